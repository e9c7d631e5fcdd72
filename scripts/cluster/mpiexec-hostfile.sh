#!/usr/bin/env bash
# Data-parallel ddl-train across nodes with MPICH's mpiexec and a host file,
# no scheduler (docs/CLUSTER.md):
#
#   scripts/cluster/mpiexec-hostfile.sh HOSTFILE RANKS_PER_NODE [ddl-train options ...]
#
# HOSTFILE names one node per line ("node-a" or "node-a:8"; # comments).
# mpiexec (Hydra) starts the ranks over ssh, so every node needs
# passwordless ssh from this one and ddl-train and the data at the same
# paths. DDL (default: ddl-train on PATH), DDL_STALL_TIMEOUT (default 300
# here: a job spread over nodes starts and checkpoints slower than one
# machine) and DDL_NUM_THREADS (CPU threads per rank, default 1) reach every
# rank through -genv.
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 HOSTFILE RANKS_PER_NODE [ddl-train options ...]" >&2
  exit 2
fi
hostfile=$1
per_node=$2
shift 2
[[ -r $hostfile ]] || { echo "$0: cannot read the host file $hostfile" >&2; exit 2; }
[[ $per_node =~ ^[1-9][0-9]*$ ]] || { echo "$0: RANKS_PER_NODE must be a positive integer, got '$per_node'" >&2; exit 2; }
nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$hostfile" || true)
((nodes > 0)) || { echo "$0: the host file $hostfile names no node" >&2; exit 2; }
ranks=$((nodes * per_node))
echo "mpiexec-hostfile: $ranks ranks, $per_node on each of $nodes node(s) in $hostfile" >&2
exec mpiexec -f "$hostfile" -n "$ranks" -ppn "$per_node" \
  -genv DDL_STALL_TIMEOUT "${DDL_STALL_TIMEOUT:-300}" -genv DDL_NUM_THREADS "${DDL_NUM_THREADS:-1}" \
  "${DDL:-ddl-train}" --parallel data "$@"
