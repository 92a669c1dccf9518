"""PyTorch eager on the workloads of bench_linalg_cuda: Cholesky, log-determinant through
Cholesky, and triangular solves with N and 1 right-hand sides, forward and forward+backward,
timed the same way (CUDA events, 3 warm-ups, median of 15). Run in the same command as
bench_linalg_cuda so the ratios come from one machine in one run.

Usage: python3 bench/torch_linalg.py [--n 1024,4096] [--dtype float32,float64]
"""
import argparse
import statistics

import torch


def median_ms(fn, reps=15):
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


def spd(n, dtype):
    x = torch.randn(n, n, device="cuda", dtype=dtype)
    return x @ x.T / n + torch.eye(n, device="cuda", dtype=dtype)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="1024,4096")
    parser.add_argument("--dtype", default="float32,float64")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"| workload | n | dtype | PyTorch fwd ms | PyTorch fwd+bwd ms |  ({torch.__version__}, "
          f"{torch.cuda.get_device_name()})")
    for dtype_name in args.dtype.split(","):
        dtype = getattr(torch, dtype_name)
        for n in [int(x) for x in args.n.split(",")]:
            torch.manual_seed(0)
            s = spd(n, dtype).requires_grad_()
            g = torch.randn(n, n, device="cuda", dtype=dtype)

            def chol_fb():
                torch.linalg.cholesky(s).backward(g)

            def logdet():
                return 2 * torch.log(torch.diagonal(torch.linalg.cholesky(s))).sum()

            rows = [("cholesky", lambda: torch.linalg.cholesky(s), chol_fb),
                    ("logdet of SPD", logdet, lambda: logdet().backward())]
            lower = (torch.tril(torch.randn(n, n, device="cuda", dtype=dtype)) / n ** 0.5
                     + 2 * torch.eye(n, device="cuda", dtype=dtype)).requires_grad_()
            for k in (n, 1):
                b = torch.randn(n, k, device="cuda", dtype=dtype).requires_grad_()
                gk = torch.randn(n, k, device="cuda", dtype=dtype)

                def solve(b=b):
                    return torch.linalg.solve_triangular(lower, b, upper=False)

                def solve_fb(b=b, gk=gk):
                    solve(b).backward(gk)

                rows.append((f"solve_triangular, {'n' if k == n else '1'} rhs", solve, solve_fb))
            for name, fwd, fb in rows:
                print(f"| {name} | {n} | {dtype_name} | {median_ms(fwd):.3f} | {median_ms(fb):.3f} |", flush=True)


if __name__ == "__main__":
    main()
