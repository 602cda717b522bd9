#!/usr/bin/env bash
# Open MPI's launch agent on the WAN testbed (plm_rsh_agent; bench/wan/README
# in docs/wan.md): mpirun, in the master's namespace, "logs in" to host p<i>
# as ssh would (agent HOST COMMAND...), and this runs COMMAND (Open MPI's
# orted) in namespace $PCCL_WAN_NAME-p<i> instead, with its own UTS namespace
# and hostname p<i>, so that Open MPI sees distinct hosts and never shared memory.
set -eu
host=$1
shift
[[ $host =~ ^p[0-9]+$ ]] || { echo "mpi_agent: unknown host $host" >&2; exit 1; }
# ssh joins the remote command into one string for a shell: so do we.
exec ip netns exec "${PCCL_WAN_NAME:?}-$host" unshare --uts sh -c 'hostname "$1"; shift; eval "$*"' \
  sh "$host" "$@"
