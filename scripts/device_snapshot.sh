#!/usr/bin/env bash
# Exports the committed tree (HEAD) to .device/src, so that a GPU-machine run builds exactly
# what is committed even while uncommitted work sits in the checkout. .device/ is ignored by
# git; carry it to the device and run `SG_SRC=.device/src scripts/device_run.sh ...`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .device/src
mkdir -p .device/src
git archive HEAD | tar -x -C .device/src
echo "exported $(git log --oneline -1)"
