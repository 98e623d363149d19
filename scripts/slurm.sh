#!/usr/bin/env bash
# A one-node Slurm on this machine, for the grid-job tests and the Slurm demo:
# munge (a key of its own), MariaDB and slurmdbd (so that sacct works),
# slurmctld and slurmd, all as root, their files in one directory.
#
# usage: scripts/slurm.sh start|stop|status|env
#
#   start    install what is missing (slurm-wlm, slurmdbd, munge,
#            mariadb-server-core, mariadb-client-core), write the
#            configuration (the node's real CPUs and memory from `slurmd -C`,
#            oversubscription allowed), start the daemons and wait until the
#            node is idle
#   stop     cancel every job, stop the daemons, check that none is left
#   status   sinfo and squeue, or say that it is not running
#   env      the line to source for the Slurm commands:
#            eval "$(scripts/slurm.sh env)"   (export SLURM_CONF=...)
#
# The directory is $SOSLB_SLURM_DIR, default /run/soslb-slurm; nothing goes
# to /etc. The commands find this Slurm through SLURM_CONF. Jobs with more
# tasks than the node has CPUs need `sbatch --overcommit` (-O).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
S=${SOSLB_SLURM_DIR:-/run/soslb-slurm}
CLUSTER=soslb
# Slurm's clients reach munge at its default socket, whatever AuthInfo says.
MUNGE_SOCKET=/run/munge/munge.socket.2
say() { echo "slurm.sh: $*" >&2; }
die() { say "$*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# The daemons, in the order they start (stop goes the other way).
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)

pid_of() { # DAEMON: its pid if it runs (from its pid file)
    local f="$S/run/$1.pid" p
    [ -s "$f" ] || return 1
    p=$(tr -dc 0-9 <"$f")
    [ -n "$p" ] && [ -d "/proc/$p" ] || return 1
    # A zombie does not count.
    grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null && return 1
    echo "$p"
}

wait_until() { # SECONDS CMD...: run CMD every 0.2 s until it succeeds
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || return 1
        sleep 0.2
    done
}

install_missing() {
    local want=() pair
    for pair in slurmctld=slurm-wlm slurmd=slurm-wlm sbatch=slurm-client slurmdbd=slurmdbd \
        munged=munge mungekey=munge mariadbd=mariadb-server-core \
        mariadb-install-db=mariadb-server-core my_print_defaults=mariadb-client-core; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "${pair%%=*}" >/dev/null 2>&1 ||
            want+=("${pair#*=}")
    done
    ((${#want[@]})) || return 0
    # shellcheck source=scripts/setup.sh
    SOSLB_SETUP=0 . "$ROOT/scripts/setup.sh"
    local p
    for p in $(printf '%s\n' "${want[@]}" | sort -u); do setup_want "$p" "Slurm ($p)"; done
    setup_install
}

write_config() {
    local node cpus host
    host=$(hostname -s)
    node=$(slurmd -C | head -1)
    [[ "$node" == NodeName=* ]] || die "slurmd -C gave no node line: $node"
    cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    cat >"$S/slurm.conf" <<EOF
# A one-node Slurm for soslb's tests (scripts/slurm.sh).
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/d
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# No cgroups here: track processes by their parents, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
# Walltimes enforced to the minute, the kill 10 s after the TERM signal.
OverTimeLimit=0
KillWait=10
MinJobAge=600
InactiveLimit=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# The node as slurmd sees it: the real CPUs and memory.
$node NodeAddr=127.0.0.1 State=UNKNOWN
# Jobs share CPUs, and may have more tasks than CPUs (--overcommit).
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:$((cpus * 4))
EOF
    cat >"$S/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$S/slurmdbd.conf"
}

start() {
    local d
    for d in "${DAEMONS[@]}"; do
        [ -d "$S/run" ] && pid_of "$d" >/dev/null && die "$d runs already (pid $(pid_of "$d")): scripts/slurm.sh stop first"
    done
    install_missing
    export PATH=$PATH:/usr/sbin
    # Another Slurm on this machine would take the ports.
    if command -v ss >/dev/null 2>&1 && ss -ltn | grep -qE ':(6817|6818|6819)\b'; then
        die "ports 6817 to 6819 are taken: another Slurm runs on this machine"
    fi
    [ -S "$MUNGE_SOCKET" ] && munge -n </dev/null >/dev/null 2>&1 &&
        die "a munged runs already at $MUNGE_SOCKET"
    rm -rf "$S"
    mkdir -p "$S"/{run,log,ctld,d,mysql} "${MUNGE_SOCKET%/*}"
    chmod 700 "$S"
    trap 'say "start failed: the logs are in $S/log"; stop_daemons' EXIT
    write_config
    export SLURM_CONF=$S/slurm.conf

    mungekey --create --keyfile="$S/munge.key" --force 2>/dev/null ||
        dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 status=none
    chmod 600 "$S/munge.key"
    munged --force --key-file="$S/munge.key" --socket="$MUNGE_SOCKET" \
        --pid-file="$S/run/munged.pid" --log-file="$S/log/munged.log" --seed-file="$S/munge.seed"
    wait_until 10 test -S "$MUNGE_SOCKET" || die "munged did not start: $S/log/munged.log"

    mariadb-install-db --no-defaults --datadir="$S/mysql" --user=root --auth-root-authentication-method=socket \
        --skip-test-db >"$S/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed: $S/log/mariadb-install.log"
    mariadbd --no-defaults --datadir="$S/mysql" --socket="$S/run/mysql.sock" --skip-networking --user=root \
        --pid-file="$S/run/mariadbd.pid" --log-error="$S/log/mariadbd.log" --innodb-buffer-pool-size=32M \
        >>"$S/log/mariadbd.log" 2>&1 &
    disown
    wait_until 30 test -S "$S/run/mysql.sock" || die "mariadbd did not start: $S/log/mariadbd.log"

    # slurmdbd reaches MariaDB through its socket (the client library reads MYSQL_UNIX_PORT).
    # (slurmdbd reads slurmdbd.conf beside $SLURM_CONF.)
    MYSQL_UNIX_PORT="$S/run/mysql.sock" slurmdbd
    wait_until 30 sacctmgr -n list cluster || die "slurmdbd did not answer: $S/log/slurmdbd.log"
    sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true

    slurmctld -f "$S/slurm.conf"
    wait_until 30 scontrol ping || die "slurmctld did not answer: $S/log/slurmctld.log"
    slurmd -f "$S/slurm.conf"
    idle() { sinfo -h -o %T | grep -qE '^(idle|mixed|allocated)'; }
    if ! wait_until 30 idle; then
        scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
        wait_until 15 idle || die "the node is not idle: $(sinfo -h -o '%T %E'); $S/log/slurmd.log"
    fi
    trap - EXIT
    say "Slurm $(sinfo -V | awk '{print $2}') runs: $(sinfo -h -N -o '%N %c CPUs %m MB %T'); use it with"
    echo "  export SLURM_CONF=$S/slurm.conf" >&2
}

stop_daemons() {
    local i d p
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        d=${DAEMONS[i]}
        p=$(pid_of "$d") || continue
        kill -TERM "$p" 2>/dev/null || true
        wait_until 20 sh -c "! [ -d /proc/$p ] || grep -q '^State:[[:space:]]*Z' /proc/$p/status" || {
            say "$d (pid $p) did not stop in 20 s: killing it"
            kill -KILL "$p" 2>/dev/null || true
        }
    done
}

# The job processes slurmd started and left: slurmstepd, and whatever runs
# with a job id of this Slurm in its environment.
stray_processes() {
    local e p env
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        [ "$p" = $$ ] && continue
        case "$(readlink "/proc/$p/exe" 2>/dev/null)" in
            */slurmstepd) echo "$p"; continue ;;
        esac
        env=$({ tr '\0' '\n' <"$e"; } 2>/dev/null) || continue
        # (An `if`: a process that does not match must not fail the loop.)
        if grep -qx "SLURM_CONF=$S/slurm.conf" <<<"$env" && grep -q '^SLURM_JOB_ID=' <<<"$env"; then
            echo "$p"
        fi
    done | sort -u
}

stop() {
    [ -d "$S" ] || { say "not running (no $S)"; return 0; }
    export PATH=$PATH:/usr/sbin SLURM_CONF=$S/slurm.conf
    if pid_of slurmctld >/dev/null; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086 # job ids are words
            scancel $jobs 2>/dev/null || true
            wait_until 30 sh -c '[ -z "$(squeue -h -o %i)" ]' || say "jobs left after scancel: $jobs"
        fi
    fi
    stop_daemons
    local left p
    left=$(stray_processes)
    for p in $left; do
        say "killing pid $p, left by a job: $({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)"
        kill -KILL "$p" 2>/dev/null || true
    done
    sleep 0.2
    left=""
    for d in "${DAEMONS[@]}"; do
        p=$(pid_of "$d") && left="$left $d($p)"
    done
    for p in $(stray_processes); do left="$left pid $p"; done
    [ -z "$left" ] || die "still running after stop:$left"
    rm -rf "$S/run" "$S/mysql" "$S/ctld" "$S/d" "$S/munge.key" "$S/munge.seed"
    say "stopped; nothing of it runs (logs in $S/log)"
}

status() {
    export PATH=$PATH:/usr/sbin SLURM_CONF=$S/slurm.conf
    pid_of slurmctld >/dev/null || { say "not running"; return 1; }
    sinfo
    squeue
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) echo "export SLURM_CONF=$S/slurm.conf" ;;
    -h | --help) usage ;;
    *) usage >&2; exit 2 ;;
esac
