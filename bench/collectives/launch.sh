#!/usr/bin/env bash
# Launches one pccl collective benchmark run on 127.0.0.1: a ccoip_master on a
# free port and N pccl_coll_bench peers (indices 0..N-1). The peer that gets
# rank 0 prints the table; every peer's stdout goes to stdout (only rank 0's
# has rows), their logs and the master's output to a temporary directory that
# is printed (tail) when something fails. Bounded in time; every process it
# starts is killed on exit. It is the all-reduce benchmark's launcher
# (bench/allreduce/pccl_launch.sh) with this folder's peer program.
#
#   launch.sh BUILD_DIR N --coll NAME [pccl_coll_bench arguments...]
#
# Environment: PCCL_BENCH_BUDGET (seconds, default 900) bounds the whole run.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PCCL_BENCH_PEER="$1/bench/collectives/pccl_coll_bench" PCCL_BENCH_ALL_STDOUT=1 \
  exec "$HERE/../allreduce/pccl_launch.sh" "$@"
