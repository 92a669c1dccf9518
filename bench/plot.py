"""Renders PNG plots from a benchmark CSV with the columns n,workload,implementation,ms and
useful_gflops or useful_tflops (bench_cpu_gemm, bench_gemm_cuda and torch_structured.py all
write it; several CSVs of one run may be given and are merged).

For each group of workloads (forward, forward+backward, training steps) it writes
  PREFIX_time_GROUP.png     time vs N, log-log, one panel per workload, one line per implementation
  PREFIX_speedup_GROUP.png  speed-up of structgrad over each peer (peer time / structgrad time)
                            vs N, one panel per peer, one line per workload
Usage: python3 bench/plot.py CSV [CSV ...] [--out DIR] [--prefix NAME] [--ours structgrad]
"""
import argparse
import collections
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

GROUPS = [("fwd", "forward"), ("fwdbwd", "forward + backward"), ("train", "training step")]


def group_of(workload):
    if workload.startswith("train"):
        return "train"
    if "fwd+bwd" in workload:
        return "fwdbwd"
    return "fwd"


def read_rows(paths):
    """Rows as dicts with n (int), workload, implementation, ms (float); checks the columns."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"n", "workload", "implementation", "ms"} - set(reader.fieldnames or [])
            if missing:
                sys.exit(f"plot.py: {path} lacks the column(s) {', '.join(sorted(missing))}")
            if not {"useful_gflops", "useful_tflops"} & set(reader.fieldnames):
                sys.exit(f"plot.py: {path} has neither useful_gflops nor useful_tflops")
            for r in reader:
                try:
                    ms = float(r["ms"])
                except ValueError:
                    continue
                if math.isfinite(ms) and ms > 0:
                    rows.append({"n": int(r["n"]), "workload": r["workload"], "implementation": r["implementation"],
                                 "ms": ms})
    if not rows:
        sys.exit("plot.py: no rows with a positive time")
    return rows


def label(text):
    # The modifier letter ᵀ is missing from matplotlib's default font.
    return text.replace("ᵀ", "^T")


def grid(count, width=3.2, height=2.6, max_cols=4):
    cols = min(count, max_cols)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.6), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def log_axes(ax, ns, suffix=""):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns], fontsize=7)
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    # Plain numbers (0.5, 1, 2, 5, 10, ...) instead of powers of ten, fewer per decade when
    # the data span many decades.
    low, high = ax.get_ylim()
    decades = math.log10(high / low) if low > 0 and high > low else 1.0
    subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades < 1.2 else (1.0, 2.0, 5.0) if decades < 2.5 else (1.0, 3.0) if decades < 4 else (1.0,)
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, which="major", alpha=0.3)


def save(fig, path, title, handles, labels):
    fig.suptitle(title, fontsize=10)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=7, frameon=False)
    legend_rows = math.ceil(len(labels) / 4) if handles else 0
    bottom = (0.15 + 0.14 * legend_rows) / fig.get_figheight()  # inches of legend -> figure fraction
    fig.tight_layout(rect=(0, bottom, 1, 1 - 0.35 / fig.get_figheight()))
    fig.savefig(path, dpi=72)
    plt.close(fig)
    print(f"wrote {path} ({os.path.getsize(path) // 1024} KB)")


def plot_times(rows, group, title, path, colors):
    by_workload = collections.OrderedDict()
    for r in rows:
        if group_of(r["workload"]) == group:
            by_workload.setdefault(r["workload"], []).append(r)
    if not by_workload:
        return False
    fig, axes = grid(len(by_workload))
    legend = {}
    for ax, (workload, items) in zip(axes, by_workload.items()):
        impls = collections.OrderedDict()
        for r in items:
            impls.setdefault(r["implementation"], []).append((r["n"], r["ms"]))
        for impl, points in impls.items():
            points.sort()
            (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                              linewidth=1.2, color=colors[impl])
            legend.setdefault(impl, line)
        log_axes(ax, sorted({r["n"] for r in items}))
        ax.set_title(label(workload), fontsize=8)
        ax.set_xlabel("N", fontsize=7)
        ax.set_ylabel("ms", fontsize=7)
    save(fig, path, title, list(legend.values()), [label(k) for k in legend])
    return True


def plot_speedups(rows, group, title, path, ours, colors):
    times = {(r["n"], r["workload"], r["implementation"]): r["ms"] for r in rows if group_of(r["workload"]) == group}
    peers = collections.OrderedDict()
    for (n, workload, impl), ms in times.items():
        mine = times.get((n, workload, ours))
        if impl != ours and mine:
            peers.setdefault(impl, collections.OrderedDict()).setdefault(workload, []).append((n, ms / mine))
    if not peers:
        return False
    fig, axes = grid(len(peers), width=4.2, height=3.2, max_cols=3)
    legend = {}
    for ax, (peer, by_workload) in zip(axes, peers.items()):
        ns = set()
        for workload, points in by_workload.items():
            points.sort()
            ns.update(p[0] for p in points)
            (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                              linewidth=1.2, color=colors[workload])
            legend.setdefault(workload, line)
        log_axes(ax, sorted(ns), suffix="×")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_title(f"vs {label(peer)}", fontsize=8)
        ax.set_xlabel("N", fontsize=7)
        ax.set_ylabel(f"{peer} time / {ours} time", fontsize=7)
    save(fig, path, title, list(legend.values()), [label(k) for k in legend])
    return True


def palette(names):
    cmap = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--out", default="bench-out")
    parser.add_argument("--prefix", default=None, help="file name prefix (default: the first CSV's name)")
    parser.add_argument("--ours", default="structgrad", help="the implementation speed-ups are relative to")
    args = parser.parse_args()
    rows = read_rows(args.csv)
    prefix = args.prefix or os.path.splitext(os.path.basename(args.csv[0]))[0]
    os.makedirs(args.out, exist_ok=True)
    impl_colors = palette(list(collections.OrderedDict.fromkeys(r["implementation"] for r in rows)))
    workload_colors = palette(list(collections.OrderedDict.fromkeys(r["workload"] for r in rows)))
    wrote = 0
    for group, name in GROUPS:
        wrote += plot_times(rows, group, f"{prefix}: {name} time (lower is better)",
                            os.path.join(args.out, f"{prefix}_time_{group}.png"), impl_colors)
        wrote += plot_speedups(rows, group, f"{prefix}: {name}, speed-up of {args.ours} (above 1: {args.ours} faster)",
                               os.path.join(args.out, f"{prefix}_speedup_{group}.png"), args.ours, workload_colors)
    if not wrote:
        sys.exit("plot.py: nothing to plot")


if __name__ == "__main__":
    main()
