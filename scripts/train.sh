#!/usr/bin/env bash
# The main job: builds structgrad and trains the gaussian_precision example (CPU by default;
# pass --device cuda on a GPU machine). Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=${SG_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SG_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)" --target gaussian_precision
"$build"/examples/gaussian_precision "$@"
