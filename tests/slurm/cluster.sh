#!/bin/sh
# cluster.sh: a real Slurm on this machine, for the tests that run jobs under srun and sbatch.
#
#   tests/slurm/cluster.sh up DIR     starts munged, slurmctld and slurmd (node "localhost", this
#                                     machine's cores as its CPUs) with their state under DIR, and
#                                     prints the SLURM_CONF to export; waits until the node is idle
#   tests/slurm/cluster.sh down DIR   stops them: only the daemons this script started for DIR
#
# Ports: RH_SLURMCTLD_PORT and RH_SLURMD_PORT when set (a busy one is an error), else free ones
# found at start, so that another Slurm on this machine (a second DIR, a system one) is left alone.
# Debian's slurm-wlm and munge; run as root (slurmd starts jobs as their users).  Nothing under
# /etc is changed: the configuration is DIR/slurm.conf, found through SLURM_CONF.
set -eu
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up|down DIR" >&2; exit 2; }
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
export SLURM_CONF="$dir/slurm.conf"

# The pid in DIR/NAME.pid when it is still that daemon, started with DIR in its command line:
# a stale file whose pid went to another process (another Slurm's munged) names nothing.
ours() {
  pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$1" ] &&
    tr '\0' ' ' < /proc/"$pid"/cmdline 2>/dev/null | grep -qF "$dir"
}

down() {
  for p in slurmd slurmctld munged; do ours $p && kill "$pid" 2>/dev/null || true; done
  for i in $(seq 1 25); do
    alive=0
    for p in slurmd slurmctld munged; do ours $p && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for p in slurmd slurmctld munged; do
    ours $p && kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$p.pid"
  done
}

# Whether something on this machine uses TCP port $1 (listening or connected).
busy() {
  hex=$(printf '%04X' "$1")
  awk -v h=":$hex" 'NR > 1 && (substr($2, length($2) - 4) == h || substr($3, length($3) - 4) == h) {f = 1}
                    END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A free port from a random start in 20000-49999, other than $1.
free_port() {
  p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 30000 ))
  while busy $p || [ "$p" = "${1:-}" ]; do p=$(( p < 49999 ? p + 1 : 20000 )); done
  echo $p
}

# RH_<NAME>_PORT when set (busy: an error), else a free port other than $2.
pick_port() {
  eval "given=\${RH_$1_PORT:-}"
  if [ -z "$given" ]; then free_port "${2:-}"; return; fi
  if busy "$given"; then
    echo "cluster.sh: RH_$1_PORT=$given is in use on this machine; unset it to take a free one" >&2
    return 1
  fi
  echo "$given"
}

if [ "$cmd" = down ]; then down; exit 0; fi
[ "$cmd" = up ] || { echo "usage: $0 up|down DIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "cluster.sh: slurmd starts jobs as their users: run as root" >&2; exit 77; }
for t in munged slurmctld slurmd srun sbatch; do
  command -v $t >/dev/null 2>&1 || [ -x /usr/sbin/$t ] ||
    { echo "cluster.sh: $t not found (apt-get install slurm-wlm munge)" >&2; exit 77; }
done
PATH=$PATH:/usr/sbin
down 2>/dev/null || true
ctld_port=$(pick_port SLURMCTLD) || exit 1
d_port=$(pick_port SLURMD "$ctld_port") || exit 1
# a start that fails stops what it started: no munged is left behind
trap 'rc=$?; [ $rc = 0 ] || down 2>/dev/null; exit $rc' EXIT
trap 'exit 130' INT TERM
mkdir -p "$dir/munge" "$dir/ctld" "$dir/d" "$dir/log"
chmod 700 "$dir/munge"
[ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
       --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
       --force
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2/1024*0.8)}' /proc/meminfo)
cat > "$SLURM_CONF" <<CONF
ClusterName=rehearsal
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
MaxArraySize=10001
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeHostname=$(hostname) CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
slurmctld -c -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N localhost
for i in $(seq 1 100); do
  state=$(sinfo -h -n localhost -o %t 2>/dev/null || true)
  case "$state" in idle*|mix*|alloc*) echo "SLURM_CONF=$SLURM_CONF"; exit 0;; esac
  sleep 0.2
done
echo "cluster.sh: the node did not come up (state '${state:-}'); logs in $dir/log" >&2
tail -n 15 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null
exit 1
