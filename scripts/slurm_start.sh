#!/usr/bin/env bash
# Start a single-node SLURM on this machine (as root): munge + slurmctld + slurmd, node = `hostname -s`.
# Installs the Debian packages slurm-wlm and munge if missing, writes /etc/munge/munge.key and
# /etc/slurm/slurm.conf, starts the daemons, waits until `sinfo` shows the node idle, and records the
# PIDs it started in $CONCEPTLAB_SLURM_DIR/pids (default /tmp/conceptlab-slurm) for scripts/slurm_stop.sh.
# If a SLURM already answers `sinfo`, it starts nothing. Exit code ≠ 0 with one line on stderr if it cannot start.
set -euo pipefail

STATE="${CONCEPTLAB_SLURM_DIR:-/tmp/conceptlab-slurm}"
PIDS="$STATE/pids"
say() { echo "slurm_start: $*" >&2; }
die() { say "$*"; exit 1; }

if command -v sinfo >/dev/null 2>&1 && timeout 10 sinfo -h -o %T 2>/dev/null | grep -Eq 'idle|mix|alloc'; then
    say "a SLURM is already running; nothing started"
    exit 0
fi
[ "$(id -u)" = 0 ] || die "must run as root (starts munged, slurmctld and slurmd)"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    say "installing slurm-wlm and munge (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq slurm-wlm munge; } >"${TMPDIR:-/tmp}/slurm_apt.log" 2>&1 \
        || die "apt-get install slurm-wlm munge failed (see ${TMPDIR:-/tmp}/slurm_apt.log)"
fi

mkdir -p "$STATE/ctld" "$STATE/spool" /etc/slurm /run/munge /var/log/munge /var/lib/munge /etc/munge
: >"$PIDS"

# munge: a key of 1024 random bytes, owner munge, mode 400; munged runs as user munge.
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge /etc/munge
chmod 400 /etc/munge/munge.key
chmod 700 /etc/munge /var/log/munge /var/lib/munge
chmod 755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    rm -f /run/munge/munged.pid
    runuser -u munge -- munged --force || die "munged did not start"
    for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
    echo "munged $(cat /run/munge/munged.pid)" >>"$PIDS"
fi

HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 ))
REAL=$(( MEM_MB * 9 / 10 ))
CONF=/etc/slurm/slurm.conf
if [ -f "$CONF" ] && ! grep -q "written by conceptlab scripts/slurm_start.sh" "$CONF"; then
    cp "$CONF" "$CONF.before-conceptlab"
fi
cat >"$CONF" <<CONF
# written by conceptlab scripts/slurm_start.sh: a single-node SLURM for tests and laptops
ClusterName=conceptlab
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
# A requeued job waits cred_expire seconds before it may start again (default 120).
AuthInfo=cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
# Look at pending jobs every few seconds (defaults: 60 s / 30 s), so a requeued task restarts promptly.
SchedulerParameters=sched_interval=3,bf_interval=3
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobRequeue=1
KillWait=5
MinJobAge=600
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
DefMemPerCPU=$(( REAL / CPUS ))
NodeName=$HOST CPUs=$CPUS RealMemory=$REAL State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

rm -f "$STATE/slurmctld.pid" "$STATE/slurmd.pid"
slurmctld -i || die "slurmctld did not start (see $STATE/slurmctld.log)"
for _ in $(seq 100); do [ -s "$STATE/slurmctld.pid" ] && break; sleep 0.1; done
[ -s "$STATE/slurmctld.pid" ] || die "slurmctld wrote no PID file (see $STATE/slurmctld.log)"
echo "slurmctld $(cat "$STATE/slurmctld.pid")" >>"$PIDS"
slurmd || die "slurmd did not start (see $STATE/slurmd.log)"
for _ in $(seq 100); do [ -s "$STATE/slurmd.pid" ] && break; sleep 0.1; done
[ -s "$STATE/slurmd.pid" ] || die "slurmd wrote no PID file (see $STATE/slurmd.log)"
echo "slurmd $(cat "$STATE/slurmd.pid")" >>"$PIDS"

for _ in $(seq 120); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then
        scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
        say "node $HOST idle ($CPUS CPUs, ${REAL} MB); PIDs in $PIDS"
        exit 0
    fi
    sleep 0.5
done
die "the node did not become idle within 60 s: $(sinfo -h -o '%T %E' 2>&1 | head -1)"
