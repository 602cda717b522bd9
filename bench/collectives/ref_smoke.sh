#!/usr/bin/env bash
# Smoke run of a reference program of the collective benchmark (the ctests
# bench_coll_<name>_ompi_smoke and _gloo_smoke): Open MPI (TCP over lo) or
# Gloo (torch.distributed through /usr/bin/python3), N ranks on this machine,
# small sizes, results checked exactly by the program. Exits 77 (ctest:
# skipped) when the system's tools are missing: mpicc and mpirun for ompi
# (built here with mpicc into BUILD_DIR/bench/collectives/), torch.distributed
# for gloo. Asserts nothing about speed.
#
#   ref_smoke.sh ompi|gloo BUILD_DIR N --coll NAME [benchmark arguments...]
set -euo pipefail
SYS=$1
BUILD=$2
N=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
case $SYS in
  ompi)
    if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
      echo "ref_smoke: no mpicc/mpirun (openmpi-bin, libopenmpi-dev): skipped"
      exit 77
    fi
    mkdir -p "$BUILD/bench/collectives"
    BIN="$BUILD/bench/collectives/mpi_coll_bench"
    mpicc -std=c11 -O2 -Wall -Wextra -Werror "$HERE/mpi_coll_bench.c" -o "$BIN.tmp.$$"
    mv -f "$BIN.tmp.$$" "$BIN"
    exec timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np "$N" \
      --mca btl self,tcp --mca btl_tcp_if_include lo "$BIN" "$@"
    ;;
  gloo)
    if ! /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()' \
      2>/dev/null; then
      echo "ref_smoke: /usr/bin/python3 has no torch.distributed (python3-torch): skipped"
      exit 77
    fi
    exec /usr/bin/python3 "$HERE/gloo_coll_bench.py" --world "$N" --timeout 120 "$@"
    ;;
  *)
    echo "ref_smoke: unknown system $SYS (ompi or gloo)" >&2
    exit 2
    ;;
esac
