"""structgrad.torch's cholesky_ex beside torch.linalg.cholesky_ex, in one process on one CUDA device,
over a grid of batch × n² (float32, and float64 rows), timed the same way: CUDA events, 3 warm-ups,
the median of 15 (`--reps`, at least 10), inputs rotated to exceed L2. The inputs are random symmetric
positive definite matrices built on the device, A = X·Xᵀ/n + I.

Each of our factors is checked against three properties, per matrix, in float64 with TF32 off
(eps: the input dtype's machine epsilon, ‖·‖₁ the largest column sum):
  lower    L is lower triangular: ‖triu(L, 1)‖₁ ≤ 8·n·eps·‖A‖₁;
  diagonal every diagonal entry of L is positive (and info is 0);
  residual ‖L·Lᵀ − A‖₁ ≤ 20·n·eps·‖A‖₁.
The table gives both times, the speedup (torch ms / ours ms), and the check with the largest
ratio of each bound; then the geometric mean speedup per dtype over the entries with n ≤ 1024 and
over the larger ones.

Usage: python3 bench/torch_cholesky_grid.py [--quick] [--dtype float32,float64] [--reps 15] [--csv FILE]
"""
import argparse
import math
import statistics

import torch

import structgrad.torch as st

# (batch, n): small matrices in large batches up to one matrix of 32768².
GRID = [
    (4096, 16), (4096, 32), (1024, 64), (256, 128), (64, 256), (16, 512), (640, 512), (4, 1024), (60, 1024),
    (2, 2048), (8, 2048), (1, 4096), (2, 4096), (1, 8192), (1, 16384), (1, 32768),
]
QUICK_LIMIT = 8192  # --quick skips n ≥ this


def median_ms(fn, reps):
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


def spd(batch, n, dtype, seed):
    """A batch of random symmetric positive definite matrices X·Xᵀ/n + I, exactly symmetric."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(batch, n, n, device="cuda", dtype=dtype, generator=g)
    a = torch.baddbmm(torch.eye(n, device="cuda", dtype=dtype).expand(batch, n, n), a, a.mT, alpha=1.0 / n)
    return a.add_(a.mT.clone()).mul_(0.5)


def worst(a, b):
    """The larger of two ratios, NaN if either is (a factor holding a NaN fails its checks)."""
    return b if math.isnan(b) or b > a else a


def check_factor(A, L, info):
    """Largest ratios over the batch of ‖triu(L, 1)‖₁ and ‖L·Lᵀ − A‖₁ to n·eps·‖A‖₁, and whether every
    diagonal entry is positive and every info code 0. In float64, by column blocks of bounded memory."""
    n = A.shape[-1]
    eps = torch.finfo(A.dtype).eps
    lower = residual = 0.0
    positive = not bool(info.any())
    chunk = max(1, (1 << 27) // (n * n))  # matrices per step: about 1 GiB of float64
    width = max(1, min(n, (1 << 27) // n))  # columns per block: about 1 GiB of float64 per [n, width]
    for s in range(0, A.shape[0], chunk):
        a, l64 = A[s:s + chunk], L[s:s + chunk].double()
        positive = positive and bool((torch.diagonal(l64, dim1=-2, dim2=-1) > 0).all())
        norm_a = torch.zeros(a.shape[0], dtype=torch.float64, device=a.device)
        norm_upper = torch.zeros_like(norm_a)
        norm_residual = torch.zeros_like(norm_a)
        for c in range(0, n, width):
            cols = slice(c, c + width)
            a_cols = a[..., :, cols].double()
            # Column j of L·Lᵀ − A: L · (row j of L)ᵀ − A[:, j].
            r = torch.matmul(l64, l64[..., cols, :].mT).sub_(a_cols)
            norm_a = torch.maximum(norm_a, a_cols.abs().sum(-2).amax(-1))
            norm_residual = torch.maximum(norm_residual, r.abs().sum(-2).amax(-1))
            norm_upper = torch.maximum(norm_upper, torch.triu(l64[..., :, cols], 1 - c).abs().sum(-2).amax(-1))
            del a_cols, r
        scale = n * eps * norm_a
        lower = worst(lower, (norm_upper / scale).max().item())
        residual = worst(residual, (norm_residual / scale).max().item())
    return lower, positive, residual


def run_entry(batch, n, dtype, reps, l2):
    torch.manual_seed(0)
    nbytes = batch * n * n * torch.finfo(dtype).bits // 8
    sets = int(min(8, max(1, math.ceil(3 * l2 / nbytes))))
    inputs = [spd(batch, n, dtype, seed) for seed in range(sets)]
    torch.cuda.synchronize()
    torch_ms = median_ms(lambda r: torch.linalg.cholesky_ex(inputs[r % sets]), reps)
    ours_ms = median_ms(lambda r: st.cholesky_ex(inputs[r % sets]), reps)
    A = inputs[0]
    del inputs[1:]
    L, info = st.cholesky_ex(A)
    lower, positive, residual = check_factor(A, L, info)
    ok = lower <= 8 and positive and residual <= 20
    failed = [name for name, good in (("lower", lower <= 8), ("diagonal", positive), ("residual", residual <= 20))
              if not good]
    check = f"{'ok' if ok else 'FAIL ' + ','.join(failed)} (lower {lower:.2g}, residual {residual:.2g})"
    del A, L, info, inputs
    torch.cuda.empty_cache()
    return torch_ms, ours_ms, ok, lower, residual, check


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help=f"skip the entries with n ≥ {QUICK_LIMIT}")
    parser.add_argument("--dtype", default="float32,float64")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--csv")
    args = parser.parse_args()
    if args.reps < 10:
        parser.error("--reps: at least 10")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, structgrad.torch with CUDA: "
          f"{st.built_with_cuda()}, median of {args.reps}")
    print("| entry | torch ms | ours ms | speedup | check |")
    print("|---|---|---|---|---|")
    rows = []
    for dtype_name in args.dtype.split(","):
        dtype = getattr(torch, dtype_name)
        for batch, n in GRID:
            if args.quick and n >= QUICK_LIMIT:
                continue
            torch_ms, ours_ms, ok, lower, residual, check = run_entry(batch, n, dtype, args.reps, l2)
            speedup = torch_ms / ours_ms
            rows.append((dtype_name, batch, n, torch_ms, ours_ms, speedup, ok, lower, residual))
            print(f"| {batch}×{n}² {dtype_name} | {torch_ms:.3f} | {ours_ms:.3f} | {speedup:.2f} | {check} |", flush=True)
    for dtype_name in args.dtype.split(","):
        small = [r[5] for r in rows if r[0] == dtype_name and r[2] <= 1024]
        large = [r[5] for r in rows if r[0] == dtype_name and r[2] > 1024]
        print(f"{dtype_name}: geometric mean speedup {geomean(small):.2f} over n ≤ 1024 ({len(small)} entries), "
              f"{geomean(large):.2f} over n > 1024 ({len(large)} entries)")
    if args.csv:
        with open(args.csv, "w") as out:
            out.write("dtype,batch,n,torch_ms,structgrad_ms,speedup,check,lower_ratio,residual_ratio\n")
            for dtype_name, batch, n, torch_ms, ours_ms, speedup, ok, lower, residual in rows:
                out.write(f"{dtype_name},{batch},{n},{torch_ms},{ours_ms},{speedup},{'ok' if ok else 'fail'},"
                          f"{lower},{residual}\n")


if __name__ == "__main__":
    main()
