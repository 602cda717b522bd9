#!/usr/bin/env bash
# Launches one pccl run across a WAN testbed that is up (scripts/wan-testbed.sh
# up --name NAME --peers >= N): a ccoip_master in the master's namespace on
# 10.77.0.1 (a free port) and N pccl_allreduce_bench peers, peer i in
# namespace NAME-p<i>, so every control and data byte crosses the delay line.
# It is bench/allreduce/pccl_launch.sh with PCCL_BENCH_TESTBED=NAME: the same
# output, bound and environment (PCCL_BENCH_BUDGET, PCCL_BENCH_PEER,
# PCCL_BENCH_LOGS=DIR: the master's and peers' logs are copied there at the end).
#
#   wan_launch.sh NAME BUILD_DIR N [pccl_allreduce_bench arguments...]
set -u
NAME=$1
shift
PCCL_BENCH_TESTBED=$NAME exec "$(dirname "$0")/../allreduce/pccl_launch.sh" "$@"
