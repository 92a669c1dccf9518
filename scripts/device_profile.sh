#!/usr/bin/env bash
# Nsight Compute source counters (stall samples per SASS instruction) of one kernel launch of
# bench_gemm_cuda --tf32, on the GPU machine. Prints the stall reasons over the whole kernel and
# the instructions with the most samples; the report and the per-instruction CSV go to $OUT.
#   SG_PROFILES: "kernel-regex:launches-to-skip ..." (default: the register-B kernel's 4th launch,
#   the Upper·Upper forward after the bench's 3 warm-ups); SG_N: the size (default 4096).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sg_profile}; mkdir -p "$OUT"
build=build-profile
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DSG_BUILD_EXAMPLES=OFF \
  > "$OUT/build.log" 2>&1 && cmake --build $build -j16 --target bench_gemm_cuda >> "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
i=0
for spec in ${SG_PROFILES:-register_b_kernel:3}; do
  i=$((i + 1)); kernel=${spec%%:*}; skip=${spec##*:}
  ncu --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight -o "$OUT/profile$i" \
    $build/bench/bench_gemm_cuda --tf32 --n "${SG_N:-4096}" --reps 5 > "$OUT/ncu$i.log" 2>&1
  echo "ncu $kernel (skip $skip) rc=$?"
  ncu -i "$OUT/profile$i.ncu-rep" --page source --csv --print-source sass > "$OUT/source$i.csv" 2>&1
  ncu -i "$OUT/profile$i.ncu-rep" --page details 2>&1 | grep -E "Duration|Warp Cycles Per Issued|Compute \(SM\)"
  python3 - "$OUT/source$i.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
start = next(k for k, r in enumerate(rows) if r and r[0] == 'Address')
head, rows = rows[start], rows[start + 1:]
samples, source, executed = (head.index(c) for c in
                             ('Warp Stall Sampling (All Samples)', 'Source', 'Instructions Executed'))
num = lambda x: float(x.replace(',', '')) if x.strip() else 0.0
total = sum(num(r[samples]) for r in rows) or 1.0
reasons = [q for q, name in enumerate(head) if name.startswith('stall_') and 'Not Issued' not in name]
share = sorted(((sum(num(r[q]) for r in rows) / total, head[q]) for q in reasons), reverse=True)
print('stall reasons:', ', '.join('%s %.1f%%' % (name[6:], 100 * v) for v, name in share[:8]))
steps = max(num(r[executed]) for r in rows)
print('instructions per execution of the hottest loop: %.0f' % (sum(num(r[executed]) for r in rows) / steps))
for r in sorted(rows, key=lambda r: -num(r[samples]))[:15]:
  print('%5.1f%%  %s' % (100 * num(r[samples]) / total, r[source].strip()[:80]))
PY
done
