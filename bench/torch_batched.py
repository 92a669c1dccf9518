"""PyTorch eager on the workloads of bench_batched_cuda: batches of small Cholesky factorizations,
triangular solves with 64 right-hand sides, Upper·Upper products and an MVN log-density with a
batch of scale_tril factors, forward and forward+backward, timed the same way (CUDA events, 3
warm-ups, median of --reps). Run in the same command as bench_batched_cuda so the ratios come from
one machine in one run.

Usage: python3 bench/torch_batched.py [--batch 4096] [--n 16,32,64] [--dtype float32,float64]
"""
import argparse
import math
import statistics

import torch


def median_ms(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--n", default="16,32,64")
    parser.add_argument("--dtype", default="float32,float64")
    parser.add_argument("--reps", type=int, default=31)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    reps, batch = args.reps, args.batch
    print(f"| workload | batch | dtype | PyTorch fwd ms | PyTorch fwd+bwd ms |  ({torch.__version__}, "
          f"{torch.cuda.get_device_name()})")
    print("|---|---|---|---|---|")
    for dtype_name in args.dtype.split(","):
        dtype = getattr(torch, dtype_name)
        kw = dict(device="cuda", dtype=dtype)
        for n in [int(x) for x in args.n.split(",")]:
            torch.manual_seed(0)
            x = torch.randn(batch, n, n, **kw)
            s = (x @ x.mT / n + torch.eye(n, **kw)).requires_grad_()
            dl = torch.randn(batch, n, n, **kw)
            rows = []

            def chol_ex():
                with torch.no_grad():
                    torch.linalg.cholesky_ex(s)

            rows.append(("cholesky_ex", chol_ex, lambda: torch.linalg.cholesky_ex(s)[0].backward(dl)))

            def chol():
                with torch.no_grad():
                    torch.linalg.cholesky(s)

            rows.append(("cholesky", chol, lambda: torch.linalg.cholesky(s).backward(dl)))
            l = (torch.tril(torch.randn(batch, n, n, **kw) / n)
                 + torch.diag_embed(torch.rand(batch, n, **kw) + 1)).requires_grad_()
            b = torch.randn(batch, n, 64, **kw).requires_grad_()
            gx = torch.randn(batch, n, 64, **kw)

            def solve():
                with torch.no_grad():
                    torch.linalg.solve_triangular(l, b, upper=False)

            rows.append(("solve_triangular, 64 rhs", solve,
                         lambda: torch.linalg.solve_triangular(l, b, upper=False).backward(gx)))
            u = torch.triu(torch.randn(batch, n, n, **kw)).requires_grad_()
            v = torch.triu(torch.randn(batch, n, n, **kw)).requires_grad_()
            gc = torch.randn(batch, n, n, **kw)

            def product():
                with torch.no_grad():
                    torch.triu(u @ v)

            rows.append(("triu(A·B), Upper·Upper", product, lambda: torch.triu(u @ v).backward(gc)))
            xs = torch.randn(batch, n, 1, **kw)
            mu = torch.randn(n, 1, **kw).requires_grad_()

            def log_prob():
                z = torch.linalg.solve_triangular(l, xs - mu, upper=False)
                half_mahalanobis = 0.5 * z.square().sum((-2, -1))  # [batch]
                log_det = torch.log(torch.diagonal(l, dim1=-2, dim2=-1)).sum(-1)
                return (-half_mahalanobis - log_det - 0.5 * n * math.log(2 * math.pi)).sum()

            def mvn():
                with torch.no_grad():
                    log_prob()

            rows.append(("MVN log-density, scale_tril", mvn, lambda: log_prob().backward()))
            xs_rows = xs.reshape(batch, n)
            loc = torch.randn(n, **kw).requires_grad_()

            def distribution_log_prob():
                mvn_d = torch.distributions.MultivariateNormal(loc, scale_tril=l, validate_args=False)
                return mvn_d.log_prob(xs_rows).sum()

            def distribution():
                with torch.no_grad():
                    distribution_log_prob()

            rows.append(("MVN log-density, MultivariateNormal", distribution,
                         lambda: distribution_log_prob().backward()))
            for name, fwd, fb in rows:
                print(f"| {name} | {batch} × {n}² | {dtype_name} | {median_ms(fwd, reps):.4f} | "
                      f"{median_ms(fb, reps):.4f} |", flush=True)


if __name__ == "__main__":
    main()
