#!/usr/bin/env python3
"""The before/after table of two builds' timings: per workload, the median over the runs of each build
and the ratio after/before (above 1: slower). Reads the CSVs of bench_matmul_cuda (precision, n,
workload) and of bench_linalg_cuda (level, workload, n, dtype); a time below 0 was not taken.
Usage: ab_table.py OLD.csv... -- NEW.csv..."""
import statistics
import sys


def records(path):
    """The rows of a CSV as dicts; bench_linalg_cuda's workload names may hold commas, so its rows are
    read from both ends."""
    with open(path) as f:
        header = f.readline().strip().split(",")
        for line in f:
            parts = line.rstrip("\n").split(",")
            if "workload" in header and len(parts) > len(header):
                w = header.index("workload")
                tail = len(header) - w - 1
                parts = parts[:w] + [",".join(parts[w:len(parts) - tail])] + parts[len(parts) - tail:]
            yield dict(zip(header, parts))


def load(paths):
    rows = {}
    for path in paths:
        for r in records(path):
            kind = r["precision"] if "precision" in r else f'{r["level"]} {r["dtype"]}'
            key = (kind, int(r["n"]), r["workload"])
            rows.setdefault(key, ([], []))
            for i, column in enumerate(("forward_ms", "forward_backward_ms")):
                value = float(r[column])
                if value >= 0:
                    rows[key][i].append(value)
    return {k: tuple(statistics.median(v) if v else None for v in times) for k, times in rows.items()}


def main():
    split = sys.argv.index("--")
    old, new = load(sys.argv[1:split]), load(sys.argv[split + 1:])
    print("| precision | n | workload | fwd before | fwd after | ratio | fwd+bwd before | fwd+bwd after | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = (0.0, None)
    for key in sorted(old):
        if key not in new:
            continue
        cells = []
        for what, before, after in (("fwd", old[key][0], new[key][0]), ("fwd+bwd", old[key][1], new[key][1])):
            if before is None or after is None or before <= 0:
                cells += ["-", "-", "-"]
                continue
            ratio = after / before
            if ratio > worst[0]:
                worst = (ratio, (key, what))
            cells += [f"{before:.4f}", f"{after:.4f}", f"**{ratio:.3f}**" if ratio > 1.02 else f"{ratio:.3f}"]
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    print(f"\nslowest after/before: {worst[0]:.3f} ({worst[1]})")


if __name__ == "__main__":
    main()
