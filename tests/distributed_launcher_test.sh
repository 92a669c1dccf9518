#!/usr/bin/env bash
# Tests scripts/launch.sh without any GPU: the environment each rank gets, the fresh rendezvous
# path (removed afterwards), the forced NCCL_NVLS_ENABLE=0, a failing rank's status coming back
# while the other ranks (and their children) are stopped, and usage errors.
set -u
launch="$(dirname "$0")/../scripts/launch.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check DESCRIPTION COMMAND...: counts a failure when the command fails
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# Three healthy ranks each write what they see.
NCCL_NVLS_ENABLE=1 "$launch" 3 bash -c 'd=$(dirname "$SG_DIST_ID_FILE"); echo "$RANK $WORLD_SIZE $LOCAL_RANK $NCCL_NVLS_ENABLE $SG_DIST_ID_FILE $([ -d "$d" ] && echo dir) $([ -e "$SG_DIST_ID_FILE" ] || echo fresh)" > "$0/rank$RANK"' "$work"
check "three healthy ranks: status 0" test $? -eq 0
for r in 0 1 2; do
  read -r rank world local nvls id_file dir fresh <"$work/rank$r" || true
  check "rank $r: RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r" test "${rank:-} ${world:-} ${local:-}" = "$r 3 $r"
  check "rank $r: NCCL_NVLS_ENABLE forced to 0" test "${nvls:-}" = 0
  check "rank $r: same SG_DIST_ID_FILE as rank 0" test "${id_file:-}" = "$(awk '{print $5}' "$work/rank0")"
  check "rank $r: the rendezvous directory exists, the file does not yet" test "${dir:-} ${fresh:-}" = "dir fresh"
done
check "the rendezvous directory is removed afterwards" test ! -e "$(dirname "$(awk '{print $5}' "$work/rank0")")"

# Rank 1 fails; ranks 0 and 2 (each with a child process) must be stopped well before 60 s.
start=$SECONDS
"$launch" 3 bash -c 'if [ "$RANK" = 1 ]; then sleep 0.3; exit 7; fi; sleep 60 & echo $! > "$0/child$RANK"; wait' "$work" 2>/dev/null
status=$?
check "a failing rank's status (7) is returned" test "$status" -eq 7
check "the other ranks are stopped at once" test $((SECONDS - start)) -lt 20
for r in 0 2; do
  check "rank $r's child is stopped too" bash -c '! kill -0 "$(cat "$0")" 2>/dev/null' "$work/child$r"
done

"$launch" 0 true 2>/dev/null
check "N = 0 is a usage error" test $? -eq 2
"$launch" 2 2>/dev/null
check "a missing program is a usage error" test $? -eq 2
"$launch" 1 false
check "one rank failing alone returns non-zero" test $? -ne 0

((failures == 0)) || { echo "$failures launcher check(s) failed"; exit 1; }
echo "all launcher checks passed"
