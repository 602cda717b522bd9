#!/usr/bin/env bash
# The README's first command: installs what is missing, builds (Release), and
# runs the project's main job. Until the live runtime exists (issue 6) the
# main job is the data-path kernel benchmark on 256 MiB buffers.
#   scripts/run.sh [benchmark arguments, e.g. --mib 64 --reps 5]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
mkdir -p build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
  >build/release.configure.log 2>&1 || { cat build/release.configure.log; exit 1; }
cmake --build build/release -j "$(nproc)" --target pccl_bench_kernels
exec build/release/bench/pccl_bench_kernels "$@"
