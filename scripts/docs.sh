#!/usr/bin/env bash
# Builds the API reference from the public headers' /// comments with Doxygen (the CMake
# target `docs`; undocumented public symbols fail it). Installs Debian's doxygen when missing.
# Output: $SG_BUILD_DIR/docs/html/index.html (default build dir: build-docs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh doxygen
build=${SG_BUILD_DIR:-build-docs}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SG_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --target docs
echo "API reference: $build/docs/html/index.html"
