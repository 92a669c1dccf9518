"""Twenty-sixth session (docs/structured_gemm.md, "The plans' costs fitted to the blocks' times"): fits
the tall/wide plans' model costs to the blocks' measured times.

Inputs: the per-block features of the plans that ran (plan_features, one CSV per size: FEATURES is a
pattern with {n}) and the blocks' stamps (fwd_bwd_timeline's CSV). A block's time is its end minus its
start (minus its go where present). For each candidate (item, chunk, zero, write) it models a block's
load as steps + item·items + chunk·chunks + zero·tiles of zeros + write·written steps (the writes only
in the writing forward), fits time = a·load + b per kernel and size, and scores the candidate by the
residuals' mean square relative to the mean time; prints the best overall and per kernel, and the
residuals under the best.
Usage: python3 plan_cost_fit.py FEATURES STAMPS [N ...]
"""
import collections
import csv
import itertools
import sys

import numpy as np

COLUMNS = ["steps", "items", "chunks", "zeros", "writes"]


def load_data(features, stamps, sizes):
    rows = list(csv.reader(open(stamps)))
    data = {}
    for n in sizes:
        feat = {(int(r["kernel"]), int(r["block"])): r for r in csv.DictReader(open(features.format(n=n)))}
        for k in range(3):
            times = collections.defaultdict(list)
            for r in rows:
                # costs (four comma-separated numbers), launch, n, kernel, rep, block, start, end, go
                if r[0] == "costs" or r[5] != str(n) or int(r[6]) != k:
                    continue
                start, end, go = float(r[9]), float(r[10]), float(r[11])
                times[int(r[8])].append(end - max(start, go))
            blocks = sorted(times)
            F = np.array([[float(feat[(k, b)][c]) for c in COLUMNS] for b in blocks])
            y = np.array([np.mean(times[b]) for b in blocks])
            data[(n, k)] = (F, y)
    return data


def score(data, costs, keys=None, verbose=False):
    item, chunk, zero, write = costs
    total = 0.0
    for key, (F, y) in data.items():
        if keys and key not in keys:
            continue
        load = F[:, 0] + item * F[:, 1] + chunk * F[:, 2] + zero * F[:, 3] + write * F[:, 4]
        fit = np.polyfit(load, y, 1)
        res = y - np.polyval(fit, load)
        total += (res ** 2).mean() / y.mean() ** 2
        if verbose:
            print(f"  n {key[0]} kernel {key[1]}: {fit[0]:.3f} us per unit + {fit[1]:.1f}; residual std {res.std():.2f} us; "
                  f"blocks' time mean {y.mean():.1f} max {y.max():.1f}")
    return total


def main():
    features, stamps = sys.argv[1], sys.argv[2]
    sizes = [int(s) for s in sys.argv[3:]] or [3072, 4096, 8192]
    data = load_data(features, stamps, sizes)
    grid = list(itertools.product([5, 6, 7, 8, 9, 10, 12], [1, 2, 3, 4, 5, 6, 8, 10], [2, 3, 4, 5, 6, 7], [0.5, 1, 1.5, 2, 2.5]))
    best = min(grid, key=lambda c: score(data, c))
    print("best (item, chunk, zero, write) over every kernel and size:", best)
    score(data, best, verbose=True)
    for k, name in enumerate(["writing forward", "dA (wide)", "dB"]):
        keys = [(n, k) for n in sizes]
        b = min(grid, key=lambda c: score(data, c, keys))
        print(f"{name}: best {b}")


if __name__ == "__main__":
    main()
