"""PyTorch eager on the workloads of bench_gemm_cuda: what a PyTorch user runs for each
structured product (dense GEMMs plus triu / symmetrisation), timed the same way (CUDA events,
3 warm-ups, median of 15, inputs rotated to exceed L2). Run in the same command as
bench_gemm_cuda so the ratios come from one machine in one run.

Usage: python3 bench/torch_structured.py [--n 1024,4096] [--tf32] [--csv FILE]
"""
import argparse
import math
import statistics

import torch


def median_ms(fn, reps=15):
    for r in range(3):
        fn(r)
    torch.cuda.synchronize()
    times = []
    for r in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(r)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="1024,4096")
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--csv")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for n in [int(x) for x in args.n.split(",")]:
        sets = int(min(16, max(1, math.ceil(3 * l2 / (n * n * 4 * 2)))))
        torch.manual_seed(0)
        dev = "cuda"
        upper = [(torch.triu(torch.randn(n, n, device=dev)), torch.triu(torch.randn(n, n, device=dev)))
                 for _ in range(sets)]
        sym = []
        for _ in range(sets):
            s = torch.randn(n, n, device=dev)
            t = torch.randn(n, n, device=dev)
            sym.append(((s + s.T) / 2, (t + t.T) / 2, torch.randn(n, n, device=dev)))
        grad = torch.randn(n, n, device=dev)
        n3 = float(n) ** 3

        def add(workload, fn, flops):
            ms = median_ms(fn)
            rows.append((n, workload, ms, flops / (ms * 1e9)))
            print(f"  N={n} {workload:28s} {ms:9.3f} ms  {flops / (ms * 1e9):7.2f} useful TFLOP/s", flush=True)

        with torch.no_grad():
            add("upper·upper fwd", lambda r: torch.triu(upper[r % sets][0] @ upper[r % sets][1]), n3 / 3)
            add("upper·dense fwd", lambda r: upper[r % sets][0] @ sym[r % sets][2], n3)
            add("sym·dense fwd", lambda r: sym[r % sets][0] @ sym[r % sets][2], 2 * n3)
            add("sym·sym fwd", lambda r: sym[r % sets][0] @ sym[r % sets][1], 2 * n3)
            add("gram a·aᵀ", lambda r: sym[r % sets][2] @ sym[r % sets][2].T, n3)
            add("dense·dense fwd", lambda r: sym[r % sets][2] @ upper[r % sets][0], 2 * n3)

        # Forward + backward as the anchor (../shared/anchors/torch_anchor.py) writes it: the
        # structured matrices are plain leaves, so PyTorch returns dense gradients.
        leaves = [(upper[s][0].clone().requires_grad_(), upper[s][1].clone().requires_grad_(),
                   sym[s][0].clone().requires_grad_(), sym[s][1].clone().requires_grad_(),
                   sym[s][2].clone().requires_grad_()) for s in range(sets)]

        def uu(r):
            a, b = leaves[r % sets][0], leaves[r % sets][1]
            torch.triu(a @ b).backward(grad)
            a.grad = None
            b.grad = None

        def sd(r):
            s, d = leaves[r % sets][2], leaves[r % sets][4]
            (s @ d).backward(grad)
            s.grad = None
            d.grad = None

        def ss(r):
            s, t = leaves[r % sets][2], leaves[r % sets][3]
            (s @ t).backward(grad)
            s.grad = None
            t.grad = None

        add("upper·upper fwd+bwd", uu, n3)
        add("sym·dense fwd+bwd", sd, 6 * n3)
        add("sym·sym fwd+bwd", ss, 6 * n3)
        del upper, sym, leaves
        torch.cuda.empty_cache()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, tf32={args.tf32}")
    if args.csv:
        with open(args.csv, "w") as out:
            out.write("n,workload,implementation,ms,useful_tflops\n")
            for n, workload, ms, tflops in rows:
                out.write(f"{n},{workload},PyTorch{' TF32' if args.tf32 else ''},{ms},{tflops}\n")


if __name__ == "__main__":
    main()
