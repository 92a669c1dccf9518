#!/usr/bin/env bash
# One call on the GPU machine: build (sm_90), the whole test suite, compute-sanitizer over
# the GPU tests, and the benchmarks side by side with cuBLAS and PyTorch. Logs go to $OUT;
# a short table is printed last. Usage: scripts/device_run.sh [stages...] (default: all)
#   stages: build test sanitize bench anchors
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sg_out}
# SG_SRC: the source tree to build (default: this checkout); the build stays in build-device.
src=${SG_SRC:-.}
mkdir -p "$OUT"
stages=${*:-build test sanitize bench anchors}
build=build-device
summary=()
note() { summary+=("$1"); echo "== $1"; }
has() { [[ " $stages " == *" $1 "* ]]; }

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nvcc --version | tail -2; } \
  > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

if has build; then
  t0=$(date +%s)
  cmake -S $src -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a > "$OUT/build.log" 2>&1 &&
    cmake --build $build -j16 >> "$OUT/build.log" 2>&1
  rc=$?
  grep -E "registers|spill|error" "$OUT/build.log" | grep -v "^--" | head -40 > "$OUT/ptxas.txt"
  note "build rc=$rc ($(( $(date +%s) - t0 ))s)"
  [ $rc -ne 0 ] && { tail -40 "$OUT/build.log"; printf '%s\n' "${summary[@]}"; exit 1; }
fi

if has test; then
  t0=$(date +%s)
  (cd $build && timeout ${SG_TEST_TIMEOUT:-300} ctest -j4 -V --timeout 280 > "$OUT/ctest.log" 2>&1)
  rc=$?
  note "ctest rc=$rc ($(( $(date +%s) - t0 ))s): $(grep -E 'tests passed' "$OUT/ctest.log")"
  grep -E "\(Failed\)|\(Timeout\)|Skipped" "$OUT/ctest.log" | head -30
fi

if has sanitize; then
  # memcheck over every GPU test (the Large ones excepted: minutes under the tool), racecheck
  # and initcheck over the kernel tests. Each log's summary line goes to the table.
  for tool in ${SG_SANITIZER_TOOLS:-memcheck racecheck initcheck}; do
    for t in ${SG_SANITIZER_TESTS:-test_cuda_gemm test_cuda_runtime test_structured test_ops test_tensor test_bad_input test_io test_errors}; do
      [ -x $build/tests/$t ] || continue
      filter='*cuda*:*Cuda*:*CUDA*:-*Large*'
      [ $t = test_cuda_gemm ] && filter='-*Large*'
      [ $tool != memcheck ] && [ $t != test_cuda_gemm ] && [ $t != test_cuda_runtime ] && continue
      # The out-of-memory test makes cudaMalloc fail on purpose: it runs apart, with the
      # tool's report of failed API calls off (the failure is what it tests).
      [ $t = test_cuda_runtime ] && filter="$filter:*OutOfMemory*"
      # Under racecheck the descriptor sweep runs at two sizes (one per tile config).
      SG_TEST_SIZES=$([ $tool = racecheck ] && echo 17,255) \
        timeout ${SG_SANITIZER_TIMEOUT:-400} compute-sanitizer --tool $tool --error-exitcode 17 $build/tests/$t \
        --gtest_filter="$filter" > "$OUT/sanitizer_${tool}_$t.log" 2>&1
      rc=$?
      note "compute-sanitizer --tool $tool $t rc=$rc: $(grep -E 'tests? ran|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_$t.log" | tr '\n' ' ')"
      if [ $t = test_cuda_runtime ]; then
        timeout 100 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 17 $build/tests/$t \
          --gtest_filter='*OutOfMemory*' > "$OUT/sanitizer_${tool}_${t}_oom.log" 2>&1
        note "compute-sanitizer --tool $tool --report-api-errors no $t (out-of-memory test) rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_${t}_oom.log" | tr '\n' ' ')"
      fi
    done
  done
  (cd "$OUT" && tar czf sanitizer_logs.tgz sanitizer_*.log && rm -f sanitizer_*.log)
fi

if has bench; then
  [ -x $build/bench/bench_gemm_cuda ] && timeout 150 $build/bench/bench_gemm_cuda --n ${SG_BENCH_N:-1024,2048,4096} --csv "$OUT/bench_gemm_cuda.csv" \
    > "$OUT/bench_gemm_cuda.txt" 2>&1
  note "bench_gemm_cuda rc=$?"
  # The exact float32 products on the FFMA loop (the FP64 tensor-core loop's ablation).
  timeout 150 $build/bench/bench_gemm_cuda --fma --n ${SG_BENCH_N:-1024,2048,4096} --csv "$OUT/bench_gemm_cuda_fma.csv" \
    > "$OUT/bench_gemm_cuda_fma.txt" 2>&1
  note "bench_gemm_cuda --fma rc=$?"
  [ -f $src/bench/torch_structured.py ] && PYTHONUNBUFFERED=1 timeout 150 python3 $src/bench/torch_structured.py --n ${SG_BENCH_N:-1024,2048,4096} \
    --csv "$OUT/torch_structured.csv" > "$OUT/torch_structured.txt" 2>&1
  note "torch_structured rc=$?"
  timeout 150 $build/bench/bench_gemm_cuda --tf32 --n ${SG_BENCH_N:-1024,2048,4096} \
    --csv "$OUT/bench_gemm_cuda_tf32.csv" > "$OUT/bench_gemm_cuda_tf32.txt" 2>&1
  note "bench_gemm_cuda --tf32 rc=$?"
  # The same TF32 workloads on the mma.sync loop (the wgmma loop's ablation), at 1024 and 4096.
  timeout 100 $build/bench/bench_gemm_cuda --tf32 --mma-sync --n 1024,4096 \
    --csv "$OUT/bench_gemm_cuda_tf32_mma_sync.csv" > "$OUT/bench_gemm_cuda_tf32_mma_sync.txt" 2>&1
  note "bench_gemm_cuda --tf32 --mma-sync rc=$?"
  # And on the wgmma loop with every tile register-staged (the TMA copies' ablation).
  timeout 100 $build/bench/bench_gemm_cuda --tf32 --no-tma --n 1024,4096 \
    --csv "$OUT/bench_gemm_cuda_tf32_no_tma.csv" > "$OUT/bench_gemm_cuda_tf32_no_tma.txt" 2>&1
  note "bench_gemm_cuda --tf32 --no-tma rc=$?"
  # And without the pipelined kernel (the triangular products with both operands direct on the
  # one-barrier-per-step instance).
  timeout 100 $build/bench/bench_gemm_cuda --tf32 --barrier-per-step --n 1024,4096 \
    --csv "$OUT/bench_gemm_cuda_tf32_barrier_per_step.csv" > "$OUT/bench_gemm_cuda_tf32_barrier_per_step.txt" 2>&1
  note "bench_gemm_cuda --tf32 --barrier-per-step rc=$?"
  # And without the wide kernel (the dense-shaped products on the 128-tile kernels).
  timeout 100 $build/bench/bench_gemm_cuda --tf32 --wide never --n 1024,4096 \
    --csv "$OUT/bench_gemm_cuda_tf32_wide_never.csv" > "$OUT/bench_gemm_cuda_tf32_wide_never.txt" 2>&1
  note "bench_gemm_cuda --tf32 --wide never rc=$?"
  # And without the register-B kernel (its products on the raw ring or relayout, as before).
  timeout 100 $build/bench/bench_gemm_cuda --tf32 --register-b never --n ${SG_BENCH_N:-1024,2048,4096} \
    --csv "$OUT/bench_gemm_cuda_tf32_register_b_never.csv" > "$OUT/bench_gemm_cuda_tf32_register_b_never.txt" 2>&1
  note "bench_gemm_cuda --tf32 --register-b never rc=$?"
  # And with relayout off and forced on (docs/structured_gemm.md, "Relayout": the Auto table's data).
  for mode in never always; do
    timeout 100 $build/bench/bench_gemm_cuda --tf32 --relayout $mode --n ${SG_BENCH_N:-1024,2048,4096} \
      --csv "$OUT/bench_gemm_cuda_tf32_relayout_$mode.csv" > "$OUT/bench_gemm_cuda_tf32_relayout_$mode.txt" 2>&1
    note "bench_gemm_cuda --tf32 --relayout $mode rc=$?"
  done
  PYTHONUNBUFFERED=1 timeout 150 python3 $src/bench/torch_structured.py --tf32 --n ${SG_BENCH_N:-1024,2048,4096} \
    --csv "$OUT/torch_structured_tf32.csv" > "$OUT/torch_structured_tf32.txt" 2>&1
  note "torch_structured --tf32 rc=$?"
  for ex in kernelbench_triu kernelbench_symmetric; do
    timeout 120 $build/examples/$ex --device cuda --steps 10 > "$OUT/$ex.txt" 2>&1
    note "$ex rc=$?"
  done
  # The training examples on the GPU, each asserting its final metric (exit code).
  for ex in "gaussian_precision --n 16 --samples 20000 --steps 200 --max-error 0.05" \
      "quadratic_form --n 8 --steps 300" "triangular_flow --steps 1500"; do
    name=${ex%% *}
    timeout 120 $build/examples/$ex --device cuda >> "$OUT/examples_cuda.txt" 2>&1
    note "$ex --device cuda rc=$? ($(tail -1 "$OUT/examples_cuda.txt"))"
  done
fi

if has bench; then
  timeout 200 $build/bench/bench_train_step > "$OUT/train_step.txt" 2>&1
  note "bench_train_step rc=$?"
fi

# The peers of ../shared/anchors (copied to .device/anchors), in the same run.
if has anchors && [ -d .device/anchors ]; then
  (cd .device/anchors && nvcc -O3 -arch=sm_90 anchor_bench.cu -lcublas -o /tmp/anchor_bench &&
    timeout 200 /tmp/anchor_bench 4096) > "$OUT/anchor_bench.txt" 2>&1
  note "anchor_bench rc=$?"
  PYTHONUNBUFFERED=1 timeout 150 python3 .device/anchors/torch_anchor.py > "$OUT/torch_anchor.txt" 2>&1
  note "torch_anchor rc=$?"
  (cmake -S .device/anchors/libtorch -B /tmp/lt_build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" &&
    cmake --build /tmp/lt_build && timeout 200 /tmp/lt_build/lt_anchor) > "$OUT/libtorch_anchor.txt" 2>&1
  note "libtorch_anchor rc=$?"
fi

echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
for f in bench_gemm_cuda.txt bench_gemm_cuda_fma.txt torch_structured.txt bench_gemm_cuda_tf32.txt torch_structured_tf32.txt kernelbench_triu.txt kernelbench_symmetric.txt train_step.txt \
    anchor_bench.txt torch_anchor.txt libtorch_anchor.txt; do
  [ -f "$OUT/$f" ] && { echo "---- $f"; tail -${SG_TAIL:-25} "$OUT/$f"; }
done
# At most 8 files come back from $OUT: pack the results and logs.
(cd "$OUT" && tar czf results.tgz --exclude=results.tgz --exclude=sanitizer_logs.tgz * && \
  find . -maxdepth 1 -type f ! -name results.tgz ! -name sanitizer_logs.tgz ! -name bench_gemm_cuda.csv -delete)
exit 0
