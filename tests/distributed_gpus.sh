#!/usr/bin/env bash
# CTest wrapper for the multi-process checks: runs `scripts/launch.sh N PROGRAM ARGS...` when this
# host has at least N GPUs, otherwise prints why and exits 77 (CTest's SKIP_RETURN_CODE).
#   tests/distributed_gpus.sh 2 build/examples/gaussian_precision_ddp --check --dtype float64
set -u
needed=$1
shift
found=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then  # the processes see only these
  visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  ((visible < found)) && found=$visible
fi
if ((found < needed)); then
  echo "SKIP: this check needs $needed GPUs, found $found (nvidia-smi -L)"
  exit 77
fi
exec "$(dirname "$0")/../scripts/launch.sh" "$needed" "$@"
