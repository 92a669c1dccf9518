#!/usr/bin/env bash
# Renders PNG plots from benchmark CSVs (bench/plot.py): time vs N per workload and the
# speed-up of structgrad over each peer. Uses a python3 that has matplotlib; installs Debian's
# python3-matplotlib (for /usr/bin/python3) when none has it.
# Usage: scripts/plot.sh CSV [OUT_DIR] [PREFIX]    e.g. scripts/plot.sh bench-out/cpu.csv docs/img cpu
set -euo pipefail
cd "$(dirname "$0")/.."
csv=${1:?usage: scripts/plot.sh CSV [OUT_DIR] [PREFIX]}
out=${2:-$(dirname "$csv")}
prefix=${3:-$(basename "$csv" .csv)}
py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import matplotlib" >/dev/null 2>&1; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  scripts/install_deps.sh python3-matplotlib
  py=/usr/bin/python3
fi
"$py" bench/plot.py "$csv" --out "$out" --prefix "$prefix"
