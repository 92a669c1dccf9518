#!/usr/bin/env bash
# Starts N processes of one program on this host for sg::distributed (one process per GPU):
# rank r gets RANK=r, LOCAL_RANK=r, WORLD_SIZE=N, a fresh SG_DIST_ID_FILE, and NCCL_NVLS_ENABLE=0
# (NVLink multicast stays off). Waits for all; when one fails, stops the rest and returns its status.
#
#   scripts/launch.sh 2 build/examples/gaussian_precision_ddp --check --dtype float64
set -u

usage() {
  echo "usage: $0 N PROGRAM [ARGS...]   (starts N >= 1 ranks of PROGRAM on this host)" >&2
  exit 2
}
[ $# -ge 2 ] || usage
world_size=$1
shift
[[ $world_size =~ ^[1-9][0-9]*$ ]] || usage
if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 3))); then
  echo "$0: needs bash 4.3 or newer (wait -n)" >&2
  exit 2
fi

rendezvous_dir=$(mktemp -d "${TMPDIR:-/tmp}/sg_dist.XXXXXX") || exit 1
export WORLD_SIZE=$world_size
export SG_DIST_ID_FILE=$rendezvous_dir/nccl_id  # rank 0 writes the NCCL unique id here
export NCCL_NVLS_ENABLE=0                      # NVLink multicast must stay off on the GPU machines

pids=()
declare -A rank_of_pid=()

# TERM to every rank's process group (each rank runs in its own, see set -m below), then KILL
# to whatever is still alive after a grace period.
stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
}
trap 'rm -rf "$rendezvous_dir"' EXIT
trap 'echo "launch.sh: interrupted, stopping all ranks" >&2; stop_all; exit 130' INT TERM

set -m  # job control: each rank gets its own process group, so stop_all also reaches its children
for ((rank = 0; rank < world_size; rank++)); do
  RANK=$rank LOCAL_RANK=$rank "$@" &
  pids+=("$!")
  rank_of_pid[$!]=$rank
done

status=0
for ((finished = 0; finished < world_size; finished++)); do
  finished_pid=""
  if ((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))); then
    wait -n -p finished_pid
  else
    wait -n
  fi
  rc=$?
  if ((rc != 0)); then
    status=$rc
    echo "launch.sh: rank ${rank_of_pid[${finished_pid:-none}]:-?} exited with status $rc; stopping the other ranks" >&2
    stop_all
    break
  fi
done
wait 2>/dev/null
exit "$status"
