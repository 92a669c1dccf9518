#!/usr/bin/env bash
# Builds structgrad's PyTorch operators (python/) against PyTorch from PyPI in a virtual
# environment and runs their tests. CUDA follows STRUCTGRAD_CUDA (AUTO: when nvcc is found);
# CI sets it OFF. Where PyTorch cannot be installed (no registry), it says so and skips.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-python
venv=${SG_PYTHON_VENV:-build-python/venv}
torch_version=${SG_TORCH_VERSION:-2.11.0}
python3 -m venv "$venv"
if ! "$venv/bin/pip" install -q "torch==$torch_version" numpy pytest "setuptools>=70.1,<82" wheel; then
  echo "test_python.sh: SKIPPED: torch==$torch_version could not be installed from the package registry"
  exit 0
fi
STRUCTGRAD_BUILD_DIR=${STRUCTGRAD_BUILD_DIR:-$PWD/build-python/cmake} \
  "$venv/bin/pip" install -q --no-build-isolation --no-deps ./python
venv_python=$(cd "$venv" && pwd)/bin/python
# From outside the source tree, so that the installed package is the one imported.
(cd build-python && "$venv_python" -m pytest -q -rs "$OLDPWD/python/tests")
