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

        # Every structure pair as a PyTorch user writes it: plain tensors holding the upper or
        # symmetric values, dense products (triu of the result for upper·upper), dense gradients.
        names = ["dense", "upper", "sym"]
        dense2 = [torch.randn(n, n, device=dev) for _ in range(sets)]

        def operand(kind, side, r):
            s = r % sets
            if kind == 0:
                return sym[s][2] if side == 0 else dense2[s]
            if kind == 1:
                return upper[s][side]
            return sym[s][side]

        def mac_fraction(a, b):
            if a == 1 and b == 1:
                return 1.0 / 6
            return (0.5 if a == 1 else 1.0) * (0.5 if b == 1 else 1.0)

        with torch.no_grad():
            for a in range(3):
                for b in range(3):
                    flops = 2 * n3 * mac_fraction(a, b)
                    if a == 1 and b == 1:
                        add("upper·upper fwd", lambda r: torch.triu(operand(1, 0, r) @ operand(1, 1, r)), flops)
                    else:
                        add(f"{names[a]}·{names[b]} fwd", lambda r, a=a, b=b: operand(a, 0, r) @ operand(b, 1, r), flops)
            add("gram a·aᵀ", lambda r: sym[r % sets][2] @ sym[r % sets][2].T, n3)

        leaves = [[[operand(k, side, s).clone().requires_grad_() for side in range(2)] for k in range(3)]
                  for s in range(sets)]

        for a in range(3):
            for b in range(3):
                def step(r, a=a, b=b):
                    x, y = leaves[r % sets][a][0], leaves[r % sets][b][1]
                    c = x @ y
                    (torch.triu(c) if a == 1 and b == 1 else c).backward(grad)
                    x.grad = None
                    y.grad = None
                add(f"{names[a]}·{names[b]} fwd+bwd", step, 3 * 2 * n3 * mac_fraction(a, b))

        def gram_step(r):
            x = leaves[r % sets][0][0]
            (x @ x.T).backward(grad)
            x.grad = None
        add("gram a·aᵀ fwd+bwd", gram_step, 3 * n3)
        del upper, sym, leaves, dense2
        torch.cuda.empty_cache()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, tf32={args.tf32}")
    if args.csv:
        with open(args.csv, "w") as out:
            out.write("n,workload,implementation,ms,useful_tflops\n")
            for n, workload, ms, tflops in rows:
                out.write(f"{n},{workload},PyTorch{' TF32' if args.tf32 else ''},{ms},{tflops}\n")


if __name__ == "__main__":
    main()
