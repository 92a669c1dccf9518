#!/usr/bin/env python3
"""The before/after table of two builds' bench_matmul_cuda runs: per workload, the median over the
runs of each build and the ratio after/before (above 1: slower). Usage: ab_table.py OLD.csv... -- NEW.csv..."""
import csv
import statistics
import sys


def load(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (r["precision"], int(r["n"]), r["workload"])
                rows.setdefault(key, ([], []))
                rows[key][0].append(float(r["forward_ms"]))
                rows[key][1].append(float(r["forward_backward_ms"]))
    return {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in rows.items()}


def main():
    split = sys.argv.index("--")
    old, new = load(sys.argv[1:split]), load(sys.argv[split + 1:])
    print("| precision | n | workload | fwd before | fwd after | ratio | fwd+bwd before | fwd+bwd after | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = (0.0, None)
    for key in sorted(old):
        if key not in new:
            continue
        (f0, b0), (f1, b1) = old[key], new[key]
        rf, rb = f1 / f0, b1 / b0
        for r, what in ((rf, "fwd"), (rb, "fwd+bwd")):
            if r > worst[0]:
                worst = (r, (key, what))
        mark = lambda r: f"**{r:.3f}**" if r > 1.02 else f"{r:.3f}"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {f0:.4f} | {f1:.4f} | {mark(rf)} | {b0:.4f} | {b1:.4f} | {mark(rb)} |")
    print(f"\nslowest after/before: {worst[0]:.3f} ({worst[1]})")


if __name__ == "__main__":
    main()
