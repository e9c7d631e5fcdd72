#!/usr/bin/env bash
# A cluster of N simulated nodes on this machine, for trying multi-node jobs
# without one: each node is a Linux network namespace (its own interfaces,
# addresses and TCP stack) with its own hostname (a UTS namespace), joined to
# the others by a veth pair on one bridge, optionally rate-limited (tc's
# token bucket). MPI sees separate hosts: MPICH's Hydra starts one proxy per
# node inside that node's namespaces, and ranks of one node share memory.
# Ranks of two nodes talk TCP over the veth links (--between-nodes tcp: each
# node also gets a boot id of its own, in a mount namespace, because MPI's
# transport, UCX, takes processes of one boot id for one machine), or share
# memory as if the nodes were one machine (--between-nodes shm: their
# traffic then bypasses the links, so --rate and a link taken down do not
# touch it). No traffic leaves the machine.
#
#   scripts/cluster/simulate.sh [--nodes N] [--ranks-per-node S[,S...]] [--rate R] [--between-nodes tcp|shm]
#                               -- COMMAND [ARGS...]
#   scripts/cluster/simulate.sh --clean      # what a killed run left behind, removed
#
# COMMAND runs on this host (outside every node) with:
#   DDL_CLUSTER_MPIEXEC  an mpiexec that starts ranks on the nodes, S per node
#                        in node order (`$DDL_CLUSTER_MPIEXEC -n 4 ddl-train ...`;
#                        a list S0,S1,... gives each node its own count: 3,1)
#   DDL_CLUSTER_DIR      the cluster's folder: `hosts` (the host file, `node0:S`
#                        lines: the nodes by name, as their ranks name them in
#                        messages), `launch` (Hydra's launcher, which finds the
#                        node by name or address), `nodes` (a line per node: name,
#                        address, the host side of its link, its namespace)
#   DDL_CLUSTER_LINKS    the host side of each node's link, in node order: `ip link
#                        set <link> down` cuts that node off, as a failed switch port
# and everything is torn down when it ends, fails or is interrupted
# (INT, TERM, HUP); a run killed outright (SIGKILL) is cleaned by the next
# run or by --clean. --rate takes tc's units (1gbit, 100mbit): every node's
# link is limited to it both ways. Exit status: COMMAND's; 77 (skipped)
# where namespaces cannot be made (not root, no `ip netns`), saying why.
set -euo pipefail

state_root=/run/ddl-cluster
nodes=2
per_node=1
rate=
between=tcp

usage() {
  sed -n '/^#   scripts/,/^#   scripts.*--clean/p' "$0" | sed 's/^#   //' >&2
  exit 2
}

# teardown <folder>: the command's process group and every process still
# in the cluster's nodes killed, the namespaces, links, bridge and mounts
# removed, then the folder. Signals wait until it is done.
teardown() {
  trap '' INT TERM HUP
  set +e  # each step on its own: what is already gone must not stop the rest
  local dir=$1 name address link netns
  [[ -f $dir/command ]] && kill -KILL -- "-$(cat "$dir/command")" 2> /dev/null
  if [[ -f $dir/nodes ]]; then
    while read -r name address link netns; do
      if [[ -e /run/netns/$netns ]]; then
        ip netns pids "$netns" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
        ip netns del "$netns" 2> /dev/null
      fi
      ip link del "$link" 2> /dev/null  # gone with the namespace, unless never moved there
      umount "$dir/$name.uts" 2> /dev/null
      umount "$dir/$name.mnt" 2> /dev/null
    done < "$dir/nodes"
  fi
  [[ -f $dir/bridge ]] && ip link del "$(cat "$dir/bridge")" 2> /dev/null
  rm -rf "$dir"
  return 0
}

# Runs killed outright leave their folder behind. A run holds a lock on its
# folder while it lives (a pid alone could be reused): a folder whose lock
# can be taken is stale.
clean_stale() {
  local dir
  for dir in "$state_root"/*/; do
    [[ -d $dir ]] || continue
    dir=${dir%/}
    if flock -n "$dir/lock" true 2> /dev/null; then teardown "$dir"; fi
  done
}

if [[ ${1:-} == --clean ]]; then
  clean_stale
  exit 0
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --ranks-per-node) per_node=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --between-nodes) between=${2:?}; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ $# -gt 0 ]] || usage
[[ $between == tcp || $between == shm ]] || { echo "simulate.sh: --between-nodes is tcp or shm, not '$between'" >&2; exit 2; }
# 99 at most: a link's name, "ddlv" + pid (7 digits at most) + "n" + node + "p", fits Linux's 15 characters.
[[ $nodes =~ ^[0-9]+$ && $nodes -ge 1 && $nodes -le 99 ]] || { echo "simulate.sh: --nodes must be 1..99, not '$nodes'" >&2; exit 2; }
IFS=, read -r -a slots <<< "$per_node"
[[ ${#slots[@]} == 1 || ${#slots[@]} == "$nodes" ]] ||
  { echo "simulate.sh: --ranks-per-node lists ${#slots[@]} counts for $nodes nodes" >&2; exit 2; }
for count in "${slots[@]}"; do
  [[ $count =~ ^[0-9]+$ && $count -ge 1 ]] || { echo "simulate.sh: --ranks-per-node must be 1 or more, not '$count'" >&2; exit 2; }
done

skip() {
  echo "skipped: simulate.sh: $*" >&2
  exit 77
}
[[ $(id -u) == 0 ]] || skip "network namespaces need root (this is uid $(id -u))"
command -v ip > /dev/null || skip "no 'ip' command (Debian package iproute2)"
command -v nsenter > /dev/null || skip "no 'nsenter' (Debian package util-linux)"
[[ -z $rate ]] || command -v tc > /dev/null || skip "--rate needs 'tc' (Debian package iproute2)"
# A millisecond of --rate in bytes, at least 64 KiB (tc's units: bit, kbit,
# mbit, gbit, tbit, or bps, kbps, ... for bytes).
burst=$(awk -v r="${rate:-0}" 'BEGIN {
  n = r + 0; u = tolower(substr(r, length(n "") + 1))
  scale["bit"] = 1; scale["kbit"] = 1e3; scale["mbit"] = 1e6; scale["gbit"] = 1e9; scale["tbit"] = 1e12
  scale["bps"] = 8; scale["kbps"] = 8e3; scale["mbps"] = 8e6; scale["gbps"] = 8e9; scale["tbps"] = 8e12
  b = (u in scale) ? n * scale[u] / 8 / 1000 : 0
  printf "%d", (b < 65536 ? 65536 : b) }')
command -v flock > /dev/null || skip "no 'flock' (Debian package util-linux)"

# The nodes' hostnames and mount namespaces are kept by bind mounts on files
# here, which needs a mount that does not propagate (/run often does, under
# systemd): the folder is bound onto itself, private, as ip netns does.
mkdir -p "$state_root"
if ! mountpoint -q "$state_root"; then
  mount --bind "$state_root" "$state_root" && mount --make-private "$state_root" ||
    skip "cannot make $state_root a private mount"
fi
clean_stale
id=$$
dir=$state_root/$id
mkdir "$dir"
trap 'teardown "$dir"' EXIT
exec {lock}> "$dir/lock"
flock -n "$lock"

# A /24 of 10.0.0.0/8 that no address or route here covers (a VPN's or a
# container network's), picked from the run's pid so that runs side by side
# differ; chosen and taken under a lock, so two runs cannot take one.
exec {choosing}> "$state_root/subnet.lock"
flock "$choosing"
net=
for ((try = 0; try < 256; ++try)); do
  candidate="10.$((200 + (id + try) % 50)).$(((id / 50 + try) % 256))"
  routes=$( (ip -4 route show table all to match "$candidate.0/24"; ip -4 route show table all root "$candidate.0/24") |
    grep -v '^default' || true)
  if [[ -z $routes ]] && ! ip -4 -o addr show | grep -qF " $candidate."; then
    net=$candidate
    break
  fi
done
[[ -n $net ]] || { echo "simulate.sh: no free 10.x.y.0/24 for the cluster" >&2; exit 1; }

# Names of interfaces are at most 15 characters: "ddlb" + pid, "ddlv" + pid
# + node. The bridge plays the switch and the host side of the cluster
# (Hydra's mpiexec talks to its proxies through its address, .254).
bridge=ddlb$id
ip link add "$bridge" type bridge 2> "$dir/error" ||
  skip "cannot create network devices here ('ip link add type bridge': $(cat "$dir/error"))"
echo "$bridge" > "$dir/bridge"
ip addr add "$net.254/24" dev "$bridge"
ip link set "$bridge" up
exec {choosing}>&-  # the subnet is taken: another run may choose now
: > "$dir/hosts"
: > "$dir/nodes"
links=()
for ((n = 0; n < nodes; ++n)); do
  name=node$n
  address=$net.$((n + 1))
  link=ddlv${id}n$n
  netns=ddl-$id-$name
  echo "$name $address $link $netns" >> "$dir/nodes"
  ip netns add "$netns" || skip "cannot create a network namespace here ('ip netns add' failed)"
  ip link add "$link" type veth peer name "${link}p"
  ip link set "${link}p" netns "$netns"
  ip link set "$link" master "$bridge"
  ip link set "$link" up
  ip -n "$netns" link set "${link}p" name eth0
  ip -n "$netns" addr add "$address/24" dev eth0
  ip -n "$netns" link set eth0 up
  ip -n "$netns" link set lo up  # no default route: the nodes reach only each other and the host's bridge
  if [[ -n $rate ]]; then
    # Both directions of the node's link: into the node (the host side's
    # egress) and out of it (eth0's egress). The bucket holds a millisecond
    # of the rate (at least 64 KiB): a smaller one starves between the
    # timer's ticks (64 KiB held 1 Gbit/s to 0.7-0.9 of it, measured), a
    # larger one lets bursts run past the rate.
    tc qdisc add dev "$link" root tbf rate "$rate" burst "$burst" latency 100ms
    ip netns exec "$netns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  fi
  # The node's hostname: a UTS namespace kept alive by a bind mount.
  touch "$dir/$name.uts"
  unshare --uts="$dir/$name.uts" hostname "$name"
  # The node's mount namespace: under --between-nodes tcp it shows the
  # node a boot id of its own, else this machine's.
  touch "$dir/$name.mnt"
  if [[ $between == tcp ]]; then
    cat /proc/sys/kernel/random/uuid > "$dir/$name.boot_id"
    unshare --mount="$dir/$name.mnt" --propagation private \
      mount --bind "$dir/$name.boot_id" /proc/sys/kernel/random/boot_id
  else
    unshare --mount="$dir/$name.mnt" --propagation private true
  fi
  echo "$name:${slots[n % ${#slots[@]}]}" >> "$dir/hosts"
  links+=("$link")
done

# Hydra's launcher: `launch <host> <command...>` as rsh takes it, the
# command run in the host's node (namespaces entered by nsenter).
cat > "$dir/launch" << EOF
#!/usr/bin/env bash
host=\$1
shift
while read -r name address link netns; do
  if [[ \$name == "\$host" || \$address == "\$host" ]]; then
    exec nsenter --net="/run/netns/\$netns" --uts="$dir/\$name.uts" --mount="$dir/\$name.mnt" -- bash -c "\$*"
  fi
done < "$dir/nodes"
echo "simulated cluster: no node is named \$host" >&2
exit 1
EOF
# UCX (MPI's transport) would also offer each node's loopback interface to
# the other nodes, where it reaches a loopback of their own: the ranks'
# MPI_Finalize then hangs flushing those endpoints. The nodes' links only,
# unless the caller chose the devices.
# A host file given (-f, as ddl-elastic's restart on the nodes left passes)
# stands for the cluster's.
cat > "$dir/mpiexec" << EOF
#!/usr/bin/env bash
export UCX_NET_DEVICES=\${UCX_NET_DEVICES:-eth0}
hosts=(-f "$dir/hosts")
for argument in "\$@"; do [[ \$argument == -f || \$argument == -hostfile || \$argument == -machinefile ]] && hosts=(); done
exec mpiexec "\${hosts[@]}" -launcher rsh -launcher-exec "$dir/launch" -localhost "$net.254" "\$@"
EOF
chmod +x "$dir/launch" "$dir/mpiexec"

echo "simulated cluster: $nodes node(s) x $per_node rank(s), $net.1-$((nodes)) on bridge $bridge${rate:+, links limited to $rate}, $between between nodes" >&2
export DDL_CLUSTER_DIR=$dir DDL_CLUSTER_MPIEXEC=$dir/mpiexec DDL_CLUSTER_LINKS="${links[*]}"
# The command in a process group of its own, in the background, so that a
# signal reaches the traps at once (bash runs a trap only after the
# foreground command ends): the group gets a TERM (a background job ignores
# INT), 5 s, and the EXIT trap removes the cluster with whatever still
# runs, the group's processes included (a run killed outright: the next
# run or --clean).
stop() {
  kill -TERM -- "-$child" 2> /dev/null
  for _ in $(seq 50); do kill -0 -- "-$child" 2> /dev/null || break; sleep 0.1; done
}
child=
for signal in INT:130 TERM:143 HUP:129; do
  trap "[[ -z \$child ]] || stop; exit ${signal#*:}" "${signal%:*}"
done
setsid "$@" <&0 {lock}>&- &
child=$!
echo "$child" > "$dir/command"
status=0
wait "$child" || status=$?
exit "$status"
