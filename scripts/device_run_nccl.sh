#!/usr/bin/env bash
# The 2-GPU run of sg::distributed on the GPU machine (kind nvidia-h200-x2): builds with NCCL (the
# image's libnccl from PyTorch's wheel; nccl.h from the wheel or .device/nccl), runs the distributed
# tests, the 2-rank checks against 1 GPU and the scaling benchmark. Logs go to $OUT (x2_logs.tgz).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sg_out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
lib=$(find / -xdev \( -name "libnccl.so.2" -o -name "libnccl.so" \) 2>/dev/null | head -1)
inc=$(dirname "$(find / -xdev -name nccl.h -path "*nvidia*" 2>/dev/null | head -1)" 2>/dev/null)
[ -f "$inc/nccl.h" ] || inc=$PWD/.device/nccl  # a copy of this machine's nccl.h, carried
echo "libnccl: $lib  nccl.h: $inc"; grep -m1 "NCCL_VERSION_CODE" $inc/nccl.h
export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
cmake -S ${SG_SRC:-.} -B build-x2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DSG_NCCL=ON \
  -DNCCL_INCLUDE_DIR="$inc" -DNCCL_LIBRARY="$lib" -DSG_BUILD_BENCH=OFF > $OUT/x2_build.log 2>&1 &&
  cmake --build build-x2 -j32 >> $OUT/x2_build.log 2>&1
echo "build rc=$?"; grep -E "NCCL|error" $OUT/x2_build.log | head -5
timeout 200 ctest --test-dir build-x2 -R "istributed|snippet_distributed" --output-on-failure > $OUT/x2_ctest.log 2>&1
echo "ctest rc=$?: $(grep -E 'tests passed|tests failed' $OUT/x2_ctest.log)"; grep -E "Failed|Passed|Skipped|\*\*\*" $OUT/x2_ctest.log | head -20
for dt in float64 float32; do
  timeout 150 scripts/launch.sh 2 build-x2/examples/gaussian_precision_ddp --check --dtype $dt > $OUT/x2_check_$dt.txt 2>&1
  echo "check $dt rc=$?"; tail -6 $OUT/x2_check_$dt.txt
done
timeout 200 scripts/launch.sh 2 build-x2/examples/gaussian_precision_ddp --bench --single-too --dtype float32 > $OUT/x2_bench.txt 2>&1
echo "bench rc=$?"; tail -15 $OUT/x2_bench.txt
cd $OUT && tar czf x2_logs.tgz x2_* && rm -f x2_*.log x2_*.txt
