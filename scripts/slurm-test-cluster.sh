#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for jupyter-hyperpod's tests and benchmarks.
#
#   scripts/slurm-test-cluster.sh start | stop | status | stop-controller | start-controller
#
# Debian's slurm-wlm + munge (installed when missing). One slurmctld and SLURM_NODES slurmd
# daemons (node1..nodeN, all on 127.0.0.1 with their own port), each with fake GPUs: GRES `gpu`
# backed by /dev/null symlinks, which Slurm counts and allocates like real devices.
# Runs as root without systemd; the config goes to /etc/slurm, as on a real login node.
# The cluster's saved state is its own (SLURM_STATE_DIR): not Debian's shared
# /var/lib/slurm/slurmctld, where another Slurm's `clustername` file would stop slurmctld with
# "CLUSTER NAME MISMATCH".
#
# Environment (start):
#   SLURM_NODES=4  GPUS_PER_NODE=4  CPUS_PER_NODE=4  GPU_TYPE=fake  MIN_JOB_AGE=300
#   NODE_FEATURES=     node features, e.g. ml.g5.12xlarge to look like a HyperPod instance type
#   SLURM_DBD=0        1: MariaDB + slurmdbd, so that sacct works (installs slurmdbd, mariadb-server)
#   SLURM_CLUSTER_NAME=hyperpod-test
#   SLURM_STATE_DIR=/var/lib/hyperpod-slurm/slurmctld   slurmctld's StateSaveLocation (owned here)
# `stop-controller` / `start-controller` stop and restart slurmctld alone, keeping its saved state
# (running jobs survive), to test what clients do while the controller is away.
set -euo pipefail
# The cluster's own clients read /etc/slurm, whatever login node the caller is set up as.
unset SLURM_CONF

NODES=${SLURM_NODES:-4}
GPUS=${GPUS_PER_NODE:-4}
CPUS=${CPUS_PER_NODE:-4}
GPU_TYPE=${GPU_TYPE:-fake}
MIN_JOB_AGE=${MIN_JOB_AGE:-300}
FEATURES=${NODE_FEATURES:-}
DBD=${SLURM_DBD:-0}

CLUSTER=${SLURM_CLUSTER_NAME:-hyperpod-test}
CONF=/etc/slurm
LOGS=/var/log/slurm
STATE=${SLURM_STATE_DIR:-/var/lib/hyperpod-slurm/slurmctld}
FAKE_DEV=/var/lib/slurm/fakegpu
RUN=/run/hyperpod-slurm
MARK='# hyperpod-slurm-test'

log() { echo "slurm-test-cluster: $*" >&2; }

# PID 1 in a container may never reap our daemons: a zombie counts as stopped.
running() {
  local stat
  [ -n "${1:-}" ] && stat=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${stat:0:1}" != Z ]
}
pid_of() { cat "$RUN/$1.pid" 2>/dev/null || true; }

# A daemon keeps no descriptor this script inherited: `flock /tmp/slurm.lock <this script>`
# would otherwise stay locked for as long as munged or slurmd runs.
no_inherited_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

# Daemons run in the foreground (-D) in their own session; we keep their pids ourselves.
spawn() {
  local name=$1; shift
  (no_inherited_fds; exec setsid "$@" >>"$LOGS/$name.console" 2>&1 </dev/null) &
  echo $! >"$RUN/$name.pid"
}

halt() {
  local name=$1 pid
  pid=$(pid_of "$name")
  if running "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    # A slurmd still registering ignores SIGTERM.
    running "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
}

node_names() { seq -f 'node%g' 1 "$NODES"; }

install_packages() {
  local wanted="slurm-wlm munge"
  [ "$DBD" = 1 ] && wanted="$wanted slurmdbd mariadb-server"
  # shellcheck disable=SC2086
  if ! dpkg -s $wanted >/dev/null 2>&1; then
    log "installing $wanted"
    apt-get update -q >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $wanted >/dev/null
  fi
  # Debian's packages start services where systemd runs; ours are the only ones wanted.
  if [ -d /run/systemd/system ]; then
    systemctl disable --now slurmd slurmctld slurmdbd >/dev/null 2>&1 || true
  fi
}

# Node names must resolve (jobs use the first node's name as MASTER_ADDR). /etc/hosts may be a
# bind mount: rewrite it in place rather than replacing the file.
write_hosts() {
  local tmp
  tmp=$(mktemp)
  grep -v "$MARK\$" /etc/hosts >"$tmp" || true
  echo "127.0.0.1 $(node_names | tr '\n' ' ')$MARK" >>"$tmp"
  cat "$tmp" >/etc/hosts
  rm -f "$tmp"
}

start_munge() {
  install -d -o munge -g munge -m 0755 /run/munge
  [ -s /etc/munge/munge.key ] || mungekey -c -k /etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  if ! munge -n </dev/null >/dev/null 2>&1; then
    (no_inherited_fds; exec runuser -u munge -- /usr/sbin/munged </dev/null >/dev/null 2>&1)
  fi
}

slurm_conf() {
  cat <<EOF
# Written by jupyter-hyperpod's scripts/slurm-test-cluster.sh: $NODES nodes on this machine.
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmdSpoolDir=/var/spool/slurmd/%n
StateSaveLocation=$STATE
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MailProg=/bin/true
MinJobAge=$MIN_JOB_AGE
KillWait=5
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.log
GresTypes=gpu
EOF
  if [ "$DBD" = 1 ]; then
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageTRES=gres/gpu"
    echo "JobAcctGatherType=jobacct_gather/linux"
  else
    # AccountingStorageTRES=gres/gpu is fatal without slurmdbd.
    echo "AccountingStorageType=accounting_storage/none"
  fi
  local gres="" features="" i
  [ "$GPUS" -gt 0 ] && gres="Gres=gpu:$GPU_TYPE:$GPUS"
  [ -n "$FEATURES" ] && features="Features=$FEATURES"
  for i in $(seq "$NODES"); do
    echo "NodeName=node$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((17000 + i))" \
      "CPUs=$CPUS RealMemory=4000 $gres $features State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
}

gres_conf() {
  echo "AutoDetect=off"
  local i
  # A gpu GRES without File= lines is silently dropped by slurmd.
  if [ "$GPUS" -gt 0 ]; then
    for i in $(seq "$NODES"); do
      echo "NodeName=node$i Name=gpu Type=$GPU_TYPE File=$FAKE_DEV/node$i/nvidia[0-$((GPUS - 1))]"
    done
  fi
}

start_dbd() {
  install -d -o mysql -g mysql /run/mysqld
  if ! mysqladmin ping >/dev/null 2>&1; then
    (no_inherited_fds; exec setsid /usr/sbin/mariadbd --user=mysql >"$LOGS/mariadb.console" 2>&1 </dev/null) &
    echo $! >"$RUN/mariadb.pid"
  fi
  for _ in $(seq 150); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.2; done
  mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm-test';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  cat >"$CONF/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
StorageType=accounting_storage/mysql
StorageUser=slurm
StoragePass=slurm-test
StorageLoc=slurm_acct_db
LogFile=$LOGS/slurmdbd.log
PidFile=/run/slurmdbd.pid
EOF
  chown slurm:slurm "$CONF/slurmdbd.conf"
  chmod 600 "$CONF/slurmdbd.conf"
  running "$(pid_of slurmdbd)" || spawn slurmdbd /usr/sbin/slurmdbd -D
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/6819) 2>/dev/null && break; sleep 0.2; done
}

# Until every node has registered and is usable (idle, or running a job of a reused cluster).
wait_ready() {
  local deadline=$((SECONDS + 60)) states
  while true; do
    states=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "$states" ] && [ -z "$(echo "$states" | tr ' ' '\n' | grep -vxE 'idle|mixed|allocated|')" ]; then
      return 0
    fi
    if [ $SECONDS -gt $deadline ] || ! running "$(pid_of slurmctld)"; then
      log "the cluster did not become ready (node states: ${states:-none})"
      tail -n 5 "$LOGS/slurmctld.log" "$LOGS/slurmd-node1.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

# A reused cluster starts clean too: nodes a previous run drained are resumed.
resume_drained() {
  local node
  for node in $(timeout 5 sinfo -h -N -t drain,drng -o %N 2>/dev/null | sort -u); do
    scontrol update nodename="$node" state=resume || true
  done
}

all_running() {
  local name
  for name in slurmctld $(node_names | sed 's/^/slurmd-/'); do
    running "$(pid_of "$name")" || return 1
  done
  [ "$DBD" != 1 ] || running "$(pid_of slurmdbd)"
}

stop_slurm() {
  local f
  for f in "$RUN"/slurmd-node*.pid; do [ -e "$f" ] && halt "$(basename "$f" .pid)"; done
  halt slurmctld
  halt slurmdbd
}

start() {
  install_packages
  install -d -m 0755 "$RUN"
  install -d -o slurm -g slurm "$LOGS" "$STATE"
  write_hosts
  start_munge
  local work
  work=$(mktemp -d)
  slurm_conf >"$work/slurm.conf"
  gres_conf >"$work/gres.conf"
  # slurmd always initialises a cgroup plugin; without systemd it must not ask it.
  printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >"$work/cgroup.conf"
  local same=1 f
  for f in slurm.conf gres.conf cgroup.conf; do cmp -s "$work/$f" "$CONF/$f" || same=0; done
  if [ $same = 1 ] && all_running; then
    rm -rf "$work"
    resume_drained
    wait_ready
    return
  fi
  # Anything differs: start again from a clean state.
  stop_slurm
  cp "$work"/*.conf "$CONF/"
  rm -rf "$work"
  # The state directory is ours: a ClusterName it recorded before (another version of this
  # script, another CLUSTER) is forgotten with the rest of the state (slurmctld -c).
  if [ -e "$STATE/clustername" ] && [ "$(cat "$STATE/clustername")" != "$CLUSTER" ]; then
    log "forgetting the state of cluster '$(cat "$STATE/clustername")' in $STATE"
    rm -f "$STATE/clustername"
  fi
  : >"$LOGS/jobcomp.log"
  chown slurm "$LOGS/jobcomp.log"
  local i g
  for i in $(seq "$NODES"); do
    install -d "/var/spool/slurmd/node$i" "$FAKE_DEV/node$i"
    for g in $(seq 0 $((GPUS - 1))); do ln -sfn /dev/null "$FAKE_DEV/node$i/nvidia$g"; done
  done
  [ "$DBD" = 1 ] && start_dbd
  spawn slurmctld /usr/sbin/slurmctld -D -c -i
  for i in $(seq "$NODES"); do spawn "slurmd-node$i" /usr/sbin/slurmd -D -N "node$i"; done
  wait_ready
}

stop() {
  stop_slurm
  if [ -n "$(pid_of mariadb)" ]; then
    mysqladmin shutdown >/dev/null 2>&1 || halt mariadb
    rm -f "$RUN/mariadb.pid"
  fi
  grep -q "$MARK\$" /etc/hosts 2>/dev/null && { grep -v "$MARK\$" /etc/hosts >"/tmp/hosts.$$" || true
    cat "/tmp/hosts.$$" >/etc/hosts; rm -f "/tmp/hosts.$$"; }
  local munged
  munged=$(cat /run/munge/munged.pid 2>/dev/null || true)
  running "$munged" && kill "$munged" 2>/dev/null || true
  return 0
}

status() {
  local name any=0
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .pid)
    if running "$(pid_of "$name")"; then echo "$name: running (pid $(pid_of "$name"))"; any=1
    else echo "$name: stopped"; fi
  done
  [ $any = 1 ] || { echo "not running"; return 1; }
  timeout 5 sinfo -N -o '%N %T %G %c %m %f' || return 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  stop-controller) halt slurmctld ;;
  start-controller)
    running "$(pid_of slurmctld)" || spawn slurmctld /usr/sbin/slurmctld -D -i
    for _ in $(seq 100); do timeout 5 scontrol ping >/dev/null 2>&1 && exit 0; sleep 0.2; done
    log "slurmctld did not answer"; exit 1 ;;
  *) echo "usage: $0 start|stop|status|stop-controller|start-controller" >&2; exit 2 ;;
esac
