#!/usr/bin/env bash
# Builds structgrad (CUDA backend too when nvcc is found) and runs the whole test suite.
# GPU tests run where a GPU exists and skip with a reason where none does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=${SG_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SG_CMAKE_ARGS:-}
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 900
