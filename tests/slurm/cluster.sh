#!/bin/sh
# cluster.sh: a real Slurm on this machine, for the tests that run jobs under srun and sbatch.
#
#   tests/slurm/cluster.sh up DIR     starts munged, slurmctld and slurmd (node "localhost", this
#                                     machine's cores as its CPUs) with their state under DIR, and
#                                     prints the SLURM_CONF to export; waits until the node is idle
#   tests/slurm/cluster.sh down DIR   stops them
#
# Debian's slurm-wlm and munge; run as root (slurmd starts jobs as their users).  Nothing under
# /etc is changed: the configuration is DIR/slurm.conf, found through SLURM_CONF.
set -eu
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up|down DIR" >&2; exit 2; }
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
export SLURM_CONF="$dir/slurm.conf"

down() {
  for p in slurmd slurmctld munged; do
    [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
  done
  sleep 1
  for p in slurmd slurmctld munged; do
    [ -f "$dir/$p.pid" ] && kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null || true
    rm -f "$dir/$p.pid"
  done
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
SlurmctldPort=${RH_SLURMCTLD_PORT:-16817}
SlurmdPort=${RH_SLURMD_PORT:-16818}
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
