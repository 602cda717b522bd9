#!/usr/bin/env bash
# Runs the Python binding tests against one build tree.
#   tests/python/run.sh BUILD_DIR [pytest args...]
# Uses Debian's /usr/bin/python3 (numpy, torch, sklearn, pytest); PYTHON overrides it.
# Missing Python packages fail the run unless PCCL_PYTHON_ALLOW_SKIP=1 (then it exits 0).
set -u
if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [pytest args...]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
export PCCL_LIBRARY="$BUILD/bindings/libpccl/libpccl.so"
export PCCL_MASTER="$BUILD/master/ccoip_master"
for f in "$PCCL_LIBRARY" "$PCCL_MASTER"; do
  if [[ ! -e "$f" ]]; then
    echo "run.sh: $f is missing (build targets pccl and ccoip_master)" >&2
    exit 1
  fi
done
if ! "$PY" -c 'import pytest, numpy, torch, sklearn' 2>/dev/null; then
  if [[ "${PCCL_PYTHON_ALLOW_SKIP:-0}" == 1 ]]; then
    echo "run.sh: SKIP: $PY lacks pytest/numpy/torch/sklearn (apt-get install python3-pytest python3-numpy python3-torch python3-sklearn)"
    exit 0
  fi
  echo "run.sh: $PY lacks pytest/numpy/torch/sklearn (apt-get install python3-pytest python3-numpy python3-torch python3-sklearn; PCCL_PYTHON_ALLOW_SKIP=1 skips)" >&2
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
# every test bounds its own children; this bounds the whole suite
exec timeout -k 10 600 "$PY" -m pytest -p no:cacheprovider -q -rs "$HERE" "$@"
