"""Times structgrad.torch against PyTorch in one process, on one CUDA device:

* KernelBench problems 13 and 14 through KernelBench's own eval_kernel_against_ref (5 correctness
  trials, its timing, its reference measured in the same run), when --kernelbench names a
  KernelBench checkout;
* problem 14 forward and forward + backward through torch.autograd against `triu(A @ B)`;
* the host time to issue one call at N = 1024, to set beside bench_matmul_out_cuda's for the
  C++ call (the binding's overhead per call).

usage: python bench_torch_ops.py [--kernelbench PATH] [--n 1024,4096]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import structgrad.torch as sgt

HERE = Path(__file__).resolve().parent


def median_ms(fn, reps=30, warmup=5, synced=False):
    """Median time of one call between CUDA events on torch's stream; with `synced`, from issue to
    completion (a device-wide wait before the second event), as bench_matmul_out_cuda measures
    the C++ call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        if synced:
            torch.cuda.synchronize()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_us_per_call(fn, reps=200):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e6


def kernelbench(path):
    sys.path.insert(0, str(Path(path) / "src"))
    from kernelbench.eval import eval_kernel_against_ref

    rows = []
    for problem, name in ((13, "13_Matmul_for_symmetric_matrices"), (14, "14_Matmul_for_upper_triangular_matrices")):
        ref_src = (Path(path) / "KernelBench" / "level1" / f"{name}.py").read_text()
        new_src = (HERE / f"kernelbench_{problem}_model_new.py").read_text()
        result = eval_kernel_against_ref(ref_src, new_src, num_correct_trials=5, num_perf_trials=100,
                                         measure_performance=True, verbose=False, device=torch.device("cuda:0"))
        ok = result.metadata.get("correctness_trials", "?")
        rows.append((problem, result.correctness, ok, result.ref_runtime, result.runtime))  # ms
    print("\nKernelBench eval_kernel_against_ref (5 correctness trials, 100 timed, reference in the same run)")
    print(f"{'problem':>8} {'correct':>8} {'trials':>8} {'reference ms':>13} {'ModelNew ms':>12} {'speedup':>8}")
    for p, correct, ok, ref_ms, new_ms in rows:
        print(f"{p:>8} {str(correct):>8} {str(ok):>8} {ref_ms:>13.3f} {new_ms:>12.3f} {ref_ms / new_ms:>7.2f}x")


def autograd_table(sizes):
    print("\nfloat32 (allow_tf32 off), median of 30, ms")
    print(f"{'workload':<36} {'n':>5} {'PyTorch':>9} {'structgrad':>11} {'ratio':>7}")
    torch.backends.cuda.matmul.allow_tf32 = False
    for n in sizes:
        A = torch.triu(torch.rand(n, n, device="cuda")).requires_grad_()
        B = torch.triu(torch.rand(n, n, device="cuda")).requires_grad_()
        G = torch.randn(n, n, device="cuda")
        S = torch.rand(n, n, device="cuda")
        S = (S + S.T) / 2
        T = torch.rand(n, n, device="cuda")
        T = (T + T.T) / 2
        rows = [("triu(A@B) forward", lambda: torch.triu(A @ B), lambda: sgt.triu_matmul(A, B)),
                ("S@T forward", lambda: S @ T, lambda: sgt.sym_matmul(S, T))]

        def step(product):
            # A training step's gradients: set to None first (zero_grad's default), so nothing accumulates.
            A.grad = B.grad = None
            product(A, B).backward(G)

        rows.append(("triu(A@B) forward+backward", lambda: step(lambda a, b: torch.triu(a @ b)),
                     lambda: step(sgt.triu_matmul)))
        for name, ref, ours in rows:
            grad_ctx = torch.no_grad() if "backward" not in name else torch.enable_grad()
            with grad_ctx:
                t_ref, t_ours = median_ms(ref), median_ms(ours)
            print(f"{name:<36} {n:>5} {t_ref:>9.3f} {t_ours:>11.3f} {t_ref / t_ours:>6.2f}x")


def overhead_table(sizes=(1, 1024)):
    print("\nbinding, float32 (set beside bench_matmul_out_cuda); and torch's own floor for one op")
    print(f"{'call':<34} {'n':>5} {'host us/call':>13} {'ms/call (synced)':>17}")
    with torch.no_grad():
        x = torch.randn(1, 1, device="cuda")
        for name, fn in (("torch.add (dispatcher floor)", lambda: torch.add(x, x)),
                         ("torch.ops.aten.add.Tensor", lambda: torch.ops.aten.add.Tensor(x, x))):
            print(f"{name:<34} {1:>5} {host_us_per_call(fn):>13.2f} {median_ms(fn, synced=True):>17.4f}")
        for n in sizes:
            A = torch.randn(n, n, device="cuda")
            B = torch.randn(n, n, device="cuda")
            S = (A + A.T) / 2
            for name, fn in (("triu_matmul", lambda: sgt.triu_matmul(A, B)),
                             ("sym_matmul", lambda: sgt.sym_matmul(S, S))):
                print(f"{name:<34} {n:>5} {host_us_per_call(fn):>13.2f} {median_ms(fn, synced=True):>17.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", help="a KernelBench checkout (its src/ and KernelBench/ folders)")
    parser.add_argument("--n", default="1024,4096")
    args = parser.parse_args()
    if not torch.cuda.is_available() or not sgt.built_with_cuda():
        print("bench_torch_ops: needs a CUDA device and a CUDA build of structgrad.torch")
        return
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}")
    overhead_table()
    autograd_table([int(x) for x in args.n.split(",")])
    if args.kernelbench:
        kernelbench(args.kernelbench)


if __name__ == "__main__":
    main()
