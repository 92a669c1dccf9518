#!/usr/bin/env bash
# The CPU benchmark in one command: builds bench_cpu_gemm (Release) and runs every structured
# matmul forward and forward+backward, gram and one training step of each example against
# Eigen, side by side in one process. Writes OUT_DIR/cpu.md (Markdown table with the machine,
# date and commit) and OUT_DIR/cpu.csv (n,workload,implementation,ms,useful_gflops).
# Usage: scripts/bench_cpu.sh [OUT_DIR] [bench_cpu_gemm flags...]     (OUT_DIR default: bench-out)
# e.g.   scripts/bench_cpu.sh bench-out --n 256,1024 --budget 1       then scripts/plot.sh bench-out/cpu.csv
# Threads: OpenMP and Eigen use every core unless OMP_NUM_THREADS says otherwise. On a machine
# that other jobs share, OMP_NUM_THREADS=1 gives steadier ratios (a descheduled thread stalls
# every parallel region of the 2-thread runs, structgrad's and Eigen's alike).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
shift || true
scripts/install_deps.sh
build=${SG_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSG_BUILD_BENCH=ON ${SG_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(getconf _NPROCESSORS_ONLN)" --target bench_cpu_gemm
mkdir -p "$out"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)
{
  echo "# CPU benchmark: structgrad vs Eigen"
  echo
  echo "- machine: ${cpu:-unknown CPU}, $(getconf _NPROCESSORS_ONLN) cores, threads: ${OMP_NUM_THREADS:-all}; load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit: ${commit}${dirty}"
  echo "- command: scripts/bench_cpu.sh $out $*"
  echo
} > "$out/cpu.md"
start=$(date +%s)
"$build"/bench/bench_cpu_gemm --csv "$out/cpu.csv" --md "$out/cpu.md.part" "$@"
cat "$out/cpu.md.part" >> "$out/cpu.md"
rm -f "$out/cpu.md.part"
echo >> "$out/cpu.md"
echo "Total run time: $(( $(date +%s) - start )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$out/cpu.md"
echo "wrote $out/cpu.md and $out/cpu.csv (plots: scripts/plot.sh $out/cpu.csv)"
