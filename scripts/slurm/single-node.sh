#!/usr/bin/env bash
# A single-node Slurm on this machine, from Debian's packages, for the workflow's cluster test
# (tests/workflow/test_slurm.py) and for trying profiles/slurm by hand.
#
#   scripts/slurm/single-node.sh install   # apt: slurm-wlm, munge, slurmdbd, mariadb (root)
#   scripts/slurm/single-node.sh up DIR    # start munged, mariadb, slurmdbd, slurmctld, slurmd under DIR
#   scripts/slurm/single-node.sh down DIR  # stop them all (what `up` started, by its pid files)
#
# Everything it starts keeps its config, state, logs and pid files under DIR. Clients find the
# cluster where they find any Slurm's: /etc/slurm/slurm.conf, here a link to DIR/slurm.conf made by
# `up` and removed by `down` (Snakemake's Slurm executor drops SLURM_* variables, SLURM_CONF among
# them, inside its jobs, so a config given only by SLURM_CONF would not reach srun there). A host
# that already has /etc/slurm/slurm.conf is refused: this makes a throwaway cluster, not a second one.
# Accounting goes to a real slurmdbd with a local MariaDB, so `sacct` (the Slurm executor's
# default status command) and the test's proof that every job went through sbatch both read the
# scheduler's own records.
set -euo pipefail

PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)

die() { echo "single-node.sh: $*" >&2; exit 2; }

install_packages() {
    [[ $(id -u) == 0 ]] || die "install needs root (apt-get)"
    command -v apt-get >/dev/null || die "install needs apt-get (a Debian or Ubuntu host)"
    if command -v slurmctld slurmd slurmdbd munged mariadbd >/dev/null 2>&1; then
        echo "single-node.sh: packages already installed"; return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
}

wait_for() {  # wait_for SECONDS COMMAND...: poll until the command succeeds (status 1 at the limit)
    local end=$((SECONDS + $1)); shift
    while ((SECONDS < end)); do
        if timeout 10 "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    return 1
}

started() {  # started SECONDS WHAT COMMAND...: wait_for, or stop with one line naming what and the logs
    local limit=$1 what=$2; shift 2
    wait_for "$limit" "$@" || die "$what did not come up within ${limit}s (logs in $DIR/log)"
}

write_configs() {
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    # Leave the host 1 GiB; Slurm refuses jobs asking for more than RealMemory.
    mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
    mkdir -p "$DIR"/{ctld,d,db,log,run}
    cat > "$DIR/slurm.conf" <<CONF
ClusterName=soaklab
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$((BASE_PORT))
SlurmdPort=$((BASE_PORT + 1))
AuthType=auth/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: the test host may be a container; processes are tracked by their parent pids.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
# Keep finished jobs in slurmctld long enough for squeue-based status checks too.
MinJobAge=600
AccountingStorageType=accounting_storage/slurmdbd
# Keep each job's comment (Snakemake's executor writes the rule and wildcards there) in sacct.
AccountingStoreFlags=job_comment
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((BASE_PORT + 2))
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    cat > "$DIR/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$((BASE_PORT + 2))
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((BASE_PORT + 3))
StorageLoc=slurm_acct_soaklab
StorageUser=slurm
StoragePass=$DB_PASS
CONF
    chmod 600 "$DIR/slurmdbd.conf"
}

up() {
    [[ $(id -u) == 0 ]] || die "up needs root (munged, slurmd)"
    for cmd in munged slurmctld slurmd slurmdbd mariadbd; do
        command -v "$cmd" >/dev/null || die "$cmd not installed: run scripts/slurm/single-node.sh install"
    done
    if [[ -e /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) != "$DIR/slurm.conf" ]]; then
        die "/etc/slurm/slurm.conf exists: this host has a Slurm of its own; use it, not a throwaway one"
    fi
    write_configs
    mkdir -p /etc/slurm
    ln -sfn "$DIR/slurm.conf" /etc/slurm/slurm.conf
    # munge at its default socket (Slurm's clients look there, whatever slurm.conf says): a running
    # host munged is used as it is; otherwise one is started with the package's key, and stopped by down.
    if ! (munge -n | unmunge) >/dev/null 2>&1; then
        mkdir -p /run/munge
        munged --force --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
            --seed-file="$DIR/run/munge.seed"
        started 20 munged bash -c "munge -n | unmunge"
    fi
    # MariaDB: its own datadir and socket under DIR; TCP on loopback only, for slurmdbd.
    mariadb-install-db --datadir="$DIR/db" --user=root > "$DIR/log/mariadb-install.log" 2>&1
    (setsid mariadbd --datadir="$DIR/db" --user=root --socket="$DIR/run/mysql.sock" \
        --bind-address=127.0.0.1 --port=$((BASE_PORT + 3)) --pid-file="$DIR/run/mariadbd.pid" \
        --log-error="$DIR/log/mariadb.log" </dev/null >/dev/null 2>&1 &)
    started 60 mariadb mariadb --socket="$DIR/run/mysql.sock" -u root -e "select 1"
    mariadb --socket="$DIR/run/mysql.sock" -u root -e "
        CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
        GRANT ALL ON slurm_acct_soaklab.* TO 'slurm'@'127.0.0.1';"
    # slurmdbd reads slurmdbd.conf beside slurm.conf.
    SLURM_CONF=$DIR/slurm.conf slurmdbd
    started 60 slurmdbd sacctmgr -i list cluster
    # The cluster, an account and this user in it: the executor guesses the account from sacct.
    sacctmgr -i add cluster soaklab >/dev/null
    sacctmgr -i add account soaklab Description=soaklab Organization=soaklab >/dev/null
    sacctmgr -i add user "$(id -un)" Account=soaklab DefaultAccount=soaklab >/dev/null
    slurmctld -f "$DIR/slurm.conf"
    started 60 slurmctld scontrol ping
    slurmd -f "$DIR/slurm.conf"
    started 60 "the node" bash -c "sinfo -h -o %T | grep -qx idle"
    echo "single-node.sh: configs under $DIR"
}

down() {
    # Jobs first (a job's processes belong to slurmd's children), then the daemons, newest first.
    [[ -f $DIR/slurm.conf ]] && SLURM_CONF=$DIR/slurm.conf timeout 10 scancel --user "$(id -un)" 2>/dev/null || true
    local pids=()
    for name in slurmd slurmctld slurmdbd mariadbd munged; do
        local pidfile="$DIR/run/$name.pid"
        [[ -f $pidfile ]] || continue
        pids+=("$(cat "$pidfile")")
        kill "${pids[-1]}" 2>/dev/null || true
    done
    if ((${#pids[@]})) && ! wait_for 30 bash -c "! kill -0 ${pids[*]} 2>/dev/null"; then
        kill -9 "${pids[@]}" 2>/dev/null || true
    fi
    if [[ $(readlink /etc/slurm/slurm.conf 2>/dev/null) == "$DIR/slurm.conf" ]]; then
        rm -f /etc/slurm/slurm.conf
    fi
}

cmd=${1:-}; DIR=${2:-}
BASE_PORT=${SOAKLAB_SLURM_PORT:-16817}
DB_PASS=soaklab-local  # a loopback-only database that lives as long as DIR
case $cmd in
    install) install_packages ;;
    up) [[ -n $DIR ]] || die "usage: single-node.sh up DIR"; DIR=$(realpath -m "$DIR"); up ;;
    down) [[ -n $DIR ]] || die "usage: single-node.sh down DIR"; DIR=$(realpath -m "$DIR"); down ;;
    *) die "usage: single-node.sh install | up DIR | down DIR" ;;
esac
