#!/usr/bin/env bash
# One run on a GPU machine: build (sm_90a), the whole test suite, compute-sanitizer over the GPU
# tests, this build timed against another checkout's (SG_OLD_SRC) in the same run, the benchmarks
# beside cuBLAS and PyTorch, and TF32 accuracy beside cuBLAS. Logs go to $OUT (packed into at most
# a few files); a short table is printed last.
#   usage: scripts/device_run.sh [stages...]     stages: build test sanitize ab bench numerics peers batched
#   SG_OLD_SRC: the checkout the ab stage compares with (a source tree; built in build-old)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sg_out}
mkdir -p "$OUT/logs"
stages=${*:-build test sanitize ab bench numerics peers}
build=${SG_BUILD_DIR:-build-device}
summary=()
note() { summary+=("$1"); echo "== $1"; }
has() { [[ " $stages " == *" $1 "* ]]; }
seconds() { echo $(( $(date +%s) - $1 )); }

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; nvcc --version | tail -2; } \
  > "$OUT/logs/device.txt" 2>&1
cat "$OUT/logs/device.txt"

old_build=${SG_OLD_BUILD_DIR:-build-old}
build_old() {
  # The other checkout's library and its two timing programs, built as this one is.
  cmake -S "$SG_OLD_SRC" -B $old_build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSG_BUILD_TESTS=OFF -DSG_BUILD_EXAMPLES=OFF > "$OUT/logs/build_old.log" 2>&1 &&
    cmake --build $old_build -j${SG_OLD_JOBS:-6} --target bench_matmul_cuda bench_linalg_cuda >> "$OUT/logs/build_old.log" 2>&1
}
if { has build || has ab; } && [ -n "${SG_OLD_SRC:-}" ] && [ -d "${SG_OLD_SRC}" ] &&
  [ ! -x $old_build/bench/bench_linalg_cuda ]; then
  build_old &  # beside this build; the ab stage (or the end of this run) waits for it
  old_pid=$!
fi

if has build; then
  t0=$(date +%s)
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a > "$OUT/logs/build.log" 2>&1
  cmake --build $build -j16 --target structgrad >> "$OUT/logs/build.log" 2>&1
  rc=$?
  library_s=$(seconds $t0)
  [ $rc -eq 0 ] && cmake --build $build -j16 >> "$OUT/logs/build.log" 2>&1
  rc=$?
  grep -E "warning|spill" "$OUT/logs/build.log" | head -40 > "$OUT/logs/warnings.txt"
  note "build rc=$rc (library ${library_s}s, everything $(seconds $t0)s on $(nproc) cores; $(wc -l < "$OUT/logs/warnings.txt") warning lines)"
  [ $rc -ne 0 ] && { tail -40 "$OUT/logs/build.log"; printf '%s\n' "${summary[@]}"; exit 1; }
fi

if has test; then
  t0=$(date +%s)
  (cd $build && timeout ${SG_TEST_TIMEOUT:-420} ctest -j${SG_TEST_JOBS:-4} --timeout 400 --output-on-failure > "$OUT/logs/ctest.log" 2>&1)
  note "ctest rc=$? ($(seconds $t0)s): $(grep -E 'tests passed' "$OUT/logs/ctest.log")"
  grep -E "\(Failed\)|\(Timeout\)|Not Run" "$OUT/logs/ctest.log" | head -20
  grep -c "Skipped" "$OUT/logs/ctest.log" | sed 's/^/skipped: /'
fi

if has sanitize; then
  # memcheck over the GPU tests (the Large ones excepted: minutes under the tool), racecheck and
  # initcheck over the kernel tests. The out-of-memory test runs apart, with failed API calls
  # not reported (the failure is what it tests).
  for tool in ${SG_SANITIZER_TOOLS:-memcheck racecheck initcheck}; do
    for t in ${SG_SANITIZER_TESTS:-test_structured_gemm test_gemm_kernels test_gemm_operands test_linalg_cuda test_batched_ops test_linalg test_matrix_batch test_cuda_runtime test_structure test_matmul test_ops test_tensor test_bad_input test_npy test_errors}; do
      [ -x $build/tests/$t ] || continue
      filter='*cuda*:*Cuda*:*CUDA*:-*Large*:*OutOfMemory*'
      case $t in test_structured_gemm | test_gemm_kernels | test_gemm_operands | test_linalg_cuda) filter='-*Large*' ;; esac
      [ $tool != memcheck ] && [ $t != test_structured_gemm ] && [ $t != test_gemm_kernels ] && [ $t != test_cuda_runtime ] && continue
      SG_TEST_SIZES=$([ $tool = racecheck ] && echo 17,255) \
        timeout ${SG_SANITIZER_TIMEOUT:-300} compute-sanitizer --tool $tool --error-exitcode 17 $build/tests/$t \
        --gtest_filter="$filter" > "$OUT/logs/sanitizer_${tool}_$t.log" 2>&1
      note "compute-sanitizer $tool $t rc=$?: $(grep -E 'tests? ran|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/logs/sanitizer_${tool}_$t.log" | tr '\n' ' ')"
    done
  done
  timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 17 $build/tests/test_cuda_runtime \
    --gtest_filter='*OutOfMemory*' > "$OUT/logs/sanitizer_memcheck_oom.log" 2>&1
  note "compute-sanitizer memcheck (out-of-memory test) rc=$?: $(grep -E 'ERROR SUMMARY' "$OUT/logs/sanitizer_memcheck_oom.log")"
fi

if has ab && [ -n "${SG_OLD_SRC:-}" ] && [ -d "${SG_OLD_SRC}" ]; then
  # Both builds' public-API timings in ABBA order (old, new, new, old), and the per-workload medians
  # side by side: every product × {float32, TF32, float64} at 1024 and 4096, and the linear algebra.
  t0=$(date +%s)
  if [ -n "${old_pid:-}" ]; then wait $old_pid; note "old build rc=$? (waited $(seconds $t0)s)"; fi
  cmake --build $build -j16 --target bench_matmul_cuda bench_linalg_cuda >> "$OUT/logs/build.log" 2>&1
  if [ -x $old_build/bench/bench_matmul_cuda ] && [ -x $build/bench/bench_matmul_cuda ]; then
    round=0
    for which in old new new old; do
      round=$((round + 1))
      dir=$([ $which = old ] && echo $old_build || echo $build)
      timeout ${SG_AB_TIMEOUT:-200} $dir/bench/bench_matmul_cuda --n ${SG_AB_N:-1024,4096} \
        --csv "$OUT/logs/ab_${which}_$round.csv" > "$OUT/logs/ab_${which}_$round.txt" 2>&1
      note "bench_matmul_cuda $which (pass $round) rc=$?"
      timeout ${SG_AB_TIMEOUT:-200} $dir/bench/bench_linalg_cuda --n 4096 \
        --csv "$OUT/logs/ab_linalg_${which}_$round.csv" > "$OUT/logs/ab_linalg_${which}_$round.txt" 2>&1
      note "bench_linalg_cuda $which (pass $round) rc=$?"
    done
    python3 scripts/ab_table.py "$OUT"/logs/ab_old_*.csv -- "$OUT"/logs/ab_new_*.csv > "$OUT/ab_table.md" 2>&1
    python3 scripts/ab_table.py "$OUT"/logs/ab_linalg_old_*.csv -- "$OUT"/logs/ab_linalg_new_*.csv \
      > "$OUT/ab_linalg_table.md" 2>&1
  fi
fi

if has bench; then
  b=$build/bench/bench_gemm_cuda
  timeout 200 $b --n 1024,4096 --csv "$OUT/logs/bench_fp32.csv" > "$OUT/logs/bench_fp32.txt" 2>&1
  note "bench_gemm_cuda rc=$?"
  timeout 200 $b --tf32 --n 1024,2048,4096 --head-to-head 9 --csv "$OUT/logs/bench_tf32.csv" > "$OUT/logs/bench_tf32.txt" 2>&1
  note "bench_gemm_cuda --tf32 rc=$?"
  # Upper outputs whose zeros are reused (the matmul op's pool) against written, alternating.
  for round in 1 2 3; do
    for mode in pool no-pool; do
      flag=$([ $mode = no-pool ] && echo --no-zeros-reuse)
      timeout 120 $b --tf32 --n 4096 $flag > "$OUT/logs/zeros_${mode}_$round.txt" 2>&1
      note "zeros $mode round $round: $(grep -E 'upper·upper fwd\+bwd *\| *structgrad ' "$OUT/logs/zeros_${mode}_$round.txt" | head -1 | tr -s ' ')"
    done
  done
  timeout 200 $build/bench/bench_train_step > "$OUT/logs/train_step.txt" 2>&1
  note "bench_train_step rc=$?"
fi

if has numerics; then
  timeout 200 $build/bench/bench_tf32_error_cuda --n 1024,4096 > "$OUT/logs/tf32_error.txt" 2>&1
  note "bench_tf32_error_cuda rc=$?"
fi

if has peers && [ -d .device/anchors ]; then
  (cd .device/anchors && nvcc -O3 -arch=sm_90 anchor_bench.cu -lcublas -o /tmp/anchor_bench &&
    timeout 200 /tmp/anchor_bench 4096) > "$OUT/logs/anchor_bench.txt" 2>&1
  note "anchor_bench rc=$?"
  PYTHONUNBUFFERED=1 timeout 200 python3 .device/anchors/torch_anchor.py > "$OUT/logs/torch_anchor.txt" 2>&1
  note "torch_anchor rc=$?"
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_structured.py --n 1024,4096 --csv "$OUT/logs/torch.csv" \
    > "$OUT/logs/torch_structured.txt" 2>&1
  note "torch_structured rc=$?"
fi

if has batched; then
  # Batches of small matrices, ours then PyTorch's, one machine, one run.
  timeout 200 $build/bench/bench_batched_cuda --n ${SG_BATCHED_N:-16,32,64} > "$OUT/logs/batched.txt" 2>&1
  note "bench_batched_cuda rc=$?"
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_batched.py --n ${SG_BATCHED_N:-16,32,64} \
    > "$OUT/logs/torch_batched.txt" 2>&1
  note "torch_batched rc=$?"
fi

if [ -n "${old_pid:-}" ] && ! has ab; then wait $old_pid; note "old build rc=$?"; fi

echo; echo "==== summary"; printf '%s\n' "${summary[@]}"
for f in ab_table.md ab_linalg_table.md logs/tf32_error.txt logs/anchor_bench.txt logs/torch_anchor.txt logs/batched.txt logs/torch_batched.txt; do
  [ -f "$OUT/$f" ] && { echo "---- $f"; tail -${SG_TAIL:-60} "$OUT/$f"; }
done
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
exit 0
