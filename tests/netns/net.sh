#!/bin/sh
# net.sh: a network of N hosts on this machine, for real processes joined by real links.
#
#   tests/netns/net.sh up N      hosts rh-n0 .. rh-n<N-1>: network namespaces, each with one
#                                interface "rh0" (10.77.0.<i+1>/24) whose veth peer "rh-v<i>" is a
#                                port of the bridge "rh-br" (10.77.0.254, where mpirun listens)
#   tests/netns/net.sh down N    removes them
#   tests/netns/net.sh hostfile N  an Open MPI hostfile of the N hosts, one slot each
#   tests/netns/net.sh agent HOST CMD...
#                                mpirun's launch agent in place of ssh (plm_rsh_agent): runs CMD
#                                in HOST's namespace, with HOST as its host name
#   tests/netns/net.sh link I down|up|degrade RATE DELAY|restore
#                                host I's link, both ways: down and up again, or shaped (RATE as tc
#                                takes it, 100mbit; DELAY one way, 0s or 2ms: tc tbf when it is 0,
#                                netem when not, and where the kernel has no netem the rate alone,
#                                exit 3), or as it was; RH_LINK_COMMAND's words
#
# mpirun --hostfile H --mca plm_rsh_agent "tests/netns/net.sh agent" --mca oob_tcp_if_include
#   rh-br,rh0 --mca btl self,tcp --mca btl_tcp_if_include rh0 ... then runs one process on each
#   host, joined by real links.  Needs root (CAP_NET_ADMIN) and iproute2; `up` exits 77 where
#   namespaces cannot be made.
set -eu
cmd=${1:-}
case "$cmd" in
up)
  n=$2
  ip link add rh-br type bridge 2>/dev/null || { echo "net.sh: cannot make a bridge (needs root, CAP_NET_ADMIN)" >&2; exit 77; }
  ip link set rh-br up
  ip addr add 10.77.0.254/24 dev rh-br
  ip netns attach rh-root $$ # this namespace, by name, for `link` from the hosts
  i=0
  while [ "$i" -lt "$n" ]; do
    ip netns add "rh-n$i" || { echo "net.sh: cannot make namespace rh-n$i" >&2; exit 77; }
    ip link add "rh-v$i" type veth peer name rh0 netns "rh-n$i"
    ip link set "rh-v$i" master rh-br up
    ip -n "rh-n$i" addr add "10.77.0.$((i + 1))/24" dev rh0
    ip -n "rh-n$i" link set rh0 up
    ip -n "rh-n$i" link set lo up
    i=$((i + 1))
  done
  ;;
down)
  n=$2
  i=0
  while [ "$i" -lt "$n" ]; do
    ip netns del "rh-n$i" 2>/dev/null || true
    ip link del "rh-v$i" 2>/dev/null || true
    i=$((i + 1))
  done
  ip link del rh-br 2>/dev/null || true
  ip netns del rh-root 2>/dev/null || true
  ;;
hostfile)
  i=0
  while [ "$i" -lt "$2" ]; do echo "rh-n$i slots=1"; i=$((i + 1)); done
  ;;
agent)
  host=$2; shift 2
  exec ip netns exec "$host" unshare --uts sh -c "hostname $host; $*"
  ;;
link)
  i=$2; what=$3
  # a process on one of the hosts asks: the bridge and its ports are in the namespace `up` ran in
  if ! ip link show rh-br >/dev/null 2>&1; then exec ip netns exec rh-root "$0" "$@"; fi
  case "$what" in
  down) ip link set "rh-v$i" down ;;
  up) ip link set "rh-v$i" up ;;
  degrade)
    # both ways: out of the host (its rh0) and into it (the bridge's port rh-v<i>).  tbf's
    # bucket holds a millisecond at the rate (64 KiB at least) and its queue a second, so
    # that TCP is not cut back by drops; a delay needs netem, which not every kernel has
    rate=$4; delay=$5
    bits=$(echo "$rate" | sed 's/bit$//')
    burst=$((bits / 8 / 1000)); [ "$burst" -lt 65536 ] && burst=65536
    tbf="tbf rate $rate burst $burst latency 1s"
    q=$tbf
    if [ "$(echo "$delay" | sed 's/[a-z]*$//' | awk '{print ($1 == 0)}')" != 1 ]; then
      q="netem delay $delay rate $rate limit 100000"
      # no netem in this kernel: the rate alone, and the delay said to be left out (exit 3)
      if ! ip netns exec "rh-n$i" tc qdisc replace dev rh0 root $q 2>/dev/null; then
        echo "net.sh: this kernel has no netem: host $i's link is shaped to $rate, without the $delay delay" >&2
        ip netns exec "rh-n$i" tc qdisc replace dev rh0 root $tbf || exit 1
        tc qdisc replace dev "rh-v$i" root $tbf || exit 1
        exit 3
      fi
    fi
    ip netns exec "rh-n$i" tc qdisc replace dev rh0 root $q || exit 1
    tc qdisc replace dev "rh-v$i" root $q ;;
  restore)
    ip netns exec "rh-n$i" tc qdisc del dev rh0 root 2>/dev/null || true
    tc qdisc del dev "rh-v$i" root 2>/dev/null || true ;;
  *) echo "net.sh: link I down|up|degrade RATE DELAY|restore" >&2; exit 2 ;;
  esac
  ;;
*) echo "usage: $0 up N | down N | run I CMD... | link I ..." >&2; exit 2 ;;
esac
