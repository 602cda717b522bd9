#!/usr/bin/env bash
# The README's first command: installs what is missing, builds (Release), and
# runs the project's main job: (1) the live demo (scripts/demo.sh): a
# ccoip_master and 4 peers on loopback train a small model together, one
# peer is killed and restarted, and every peer's final shared-state hash must
# be identical; (2) a churn simulation of the real master and peer state
# machines (sim/, pccl-sim) with a readable summary; (3) the data-path kernel
# benchmark on 256 MiB buffers.
#   scripts/run.sh [benchmark arguments, e.g. --mib 64 --reps 5]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
mkdir -p build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCCL_BUILD_TESTS=OFF \
  >build/release.configure.log 2>&1 || { cat build/release.configure.log; exit 1; }
cmake --build build/release -j "$(nproc)" --target pccl_bench_kernels pccl-sim \
  ccoip_master demo_train
echo "== live demo: a master and 4 peers train together; one peer is killed and restarted =="
scripts/demo.sh --build build/release
echo
echo "== churn simulation: 8 peers join, leave, crash, hang and restart for 60 s (virtual time), with shared-state sync, divergence and topology optimization =="
build/release/sim/pccl-sim --seed 7 --peers 8 --join-rate 12 --leave-rate 4 --crash-rate 6 \
  --hang-rate 2 --restart-rate 6 --loss 5 --partitions 1 --churn-ms 60000 --steps 5 \
  --shared-state --optimize-every 5 --diverge-bp 500
echo
echo "== data-path kernel benchmark =="
exec build/release/bench/pccl_bench_kernels "$@"
