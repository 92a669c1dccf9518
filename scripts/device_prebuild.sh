#!/usr/bin/env bash
# Builds test_structured_gemm and bench_gemm_cuda on this (GPU-less) machine for the GPU machine, into
# .device/carry (ignored by git): sm_90a device code, portable host code (AVX2/FMA, no
# -march=native), no NCCL. Carry .device/carry to a device call and run the programs from there
# with the toolkit's libraries on LD_LIBRARY_PATH; the GPU machine then builds nothing.
#   usage: scripts/device_prebuild.sh [extra cmake targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=.device/build
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSG_NATIVE_ARCH=OFF -DSG_NCCL=OFF -DCMAKE_CXX_FLAGS='-mavx2 -mfma' > /dev/null
targets=(test_structured_gemm bench_gemm_cuda "$@")
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p .device/carry
for t in "${targets[@]}"; do
  find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x -exec cp {} .device/carry/ \;
done
echo "built at $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'): $(ls .device/carry)"
