#!/usr/bin/env bash
# Installs the Debian packages structgrad builds with, when they are missing.
# Needs root (or sudo). The CUDA toolkit is not installed here: without nvcc the build is CPU-only.
set -euo pipefail
packages=(cmake ninja-build g++ libeigen3-dev libgtest-dev zlib1g-dev pkg-config "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}"
