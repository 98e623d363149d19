#!/usr/bin/env bash
# A small real cluster on one machine (issue 47): hosts node01..nodeN, each
# a UTS and mount namespace with its own host name, its own /tmp and
# /dev/shm (tmpfs) and its own FUSE view (bindfs, or tests/fuse/stale_view.py)
# of one backing directory (the "file server") at one shared path, as each
# node of a cluster mounts one NFS export. Open MPI reaches the hosts through an rsh agent that enters
# their namespaces with nsenter.
#
#   scripts/cluster.sh up N [--no-lock-forwarding] [--cache] [--nfs3 [--rtt S]] [--slots S]
#   scripts/cluster.sh down
#   scripts/cluster.sh status
#   scripts/cluster.sh exec HOST COMMAND...   run COMMAND on HOST (node01 ...)
#   scripts/cluster.sh mpirun ARGS...         mpirun across the hosts
#
# up: --no-lock-forwarding: the views' locks stay local to each host (Lustre
# without flock, NFS nolock); --cache: attribute, name and page caching on
# (auto_cache, 3 s timeouts, like NFS's defaults), else off; --nfs3: views of
# tests/fuse/stale_view.py instead of bindfs, as NFSv3 clients see the
# export (a read of an open file that another host removed or renamed over
# fails with ESTALE; locks stay local; no caching), each read waiting a
# round trip of --rtt S seconds (default 0.001), each ESTALE a line of
# $CLUSTER_DIR/estale; --slots: MPI
# slots per host in the host file (default 4). A second `up` first takes
# down what an earlier one left (after a crash too). down ends only the
# processes up started (their ids are recorded), and leaves nothing mounted.
#
# CLUSTER_DIR (default target/cluster; not under /tmp, which the hosts do
# not see; not SOSLB_*, which soslb would read as a setting) holds the
# state: hosts, the processes' ids, the agent, the host file, an `mpirun`
# wrapper, backing/ (emptied by up, kept by down) and shared/ (the mount
# point of the views: run jobs with their signal directory there).
# Needs root, /dev/fuse, unshare, nsenter and bindfs (installed when missing;
# --nfs3 also Debian's python3-fusepy).
CALLER_PWD=$PWD
. "$(dirname "$0")/setup.sh"
need_commands bindfs=bindfs fusermount=fuse3 unshare=util-linux nsenter=util-linux \
    findmnt=util-linux setsid=util-linux mount=mount

say() { echo "cluster: $*" >&2; }
die() { say "$*"; exit 1; }

STATE=${CLUSTER_DIR:-$ROOT/target/cluster}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd -P)
case "$STATE/" in
    /tmp/*) die "CLUSTER_DIR=$STATE is under /tmp, which each host replaces with its own: choose another directory" ;;
esac
BACKING=$STATE/backing
SHARED=$STATE/shared

# The start time of process $1 (field 22 of /proc/PID/stat), empty if gone
# or a zombie: with the id, it names the process even after ids wrap.
started() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086 # the fields are words
    set -- $stat
    [ "$1" = Z ] || echo "${20}"
}

# Whether the process recorded in file $1 ("PID START") still runs.
recorded_alive() {
    local pid start
    [ -f "$1" ] && read -r pid start <"$1" && [ -n "$pid" ] || return 1
    [ -n "$(started "$pid")" ] && [ "$(started "$pid")" = "$start" ]
}

record() { echo "$2 $(started "$2")" >"$1"; }

hosts() { if [ -f "$STATE/hosts" ]; then cat "$STATE/hosts"; fi; }

holder_pid() {
    local pid start
    recorded_alive "$STATE/$1.holder" || die "host $1 is not up (see scripts/cluster.sh status)"
    read -r pid start <"$STATE/$1.holder"
    echo "$pid"
}

# End the process recorded in file $1 (TERM, then KILL after 5 s).
end_recorded() {
    local pid start
    recorded_alive "$1" || { rm -f "$1"; return 0; }
    read -r pid start <"$1"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        recorded_alive "$1" || break
        sleep 0.1
    done
    if recorded_alive "$1"; then
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    recorded_alive "$1" && die "process $pid ($1) does not end"
    rm -f "$1"
    ENDED+=("$pid")
}

# The processes in mount namespace $1 (as /proc/PID/ns/mnt names it) that
# started no later than $2 (clock ticks since boot: a namespace's number
# is given again once it is gone), but the ids that follow.
in_namespace() {
    local ns=$1 before=$2 p
    shift 2
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        case " $* " in *" $p "*) continue ;; esac
        if [ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$ns" ] &&
            [ "$(started "$p")" -le "$before" ] 2>/dev/null; then
            echo "$p"
        fi
    done
}

# Now, in clock ticks since boot (as a process's start time).
ticks() {
    local up
    read -r up _ </proc/uptime
    echo $(( ${up%.*} * $(getconf CLK_TCK) + 10#${up#*.} * $(getconf CLK_TCK) / 100 + 1 ))
}

down() {
    local h pid start fs ns spaces=() left now
    now=$(ticks)
    ENDED=()
    for h in $(hosts); do
        if recorded_alive "$STATE/$h.holder"; then
            read -r pid start <"$STATE/$h.holder"
            fs=""
            [ -f "$STATE/$h.view" ] && read -r fs start <"$STATE/$h.view"
            ns=$(readlink "/proc/$pid/ns/mnt")
            spaces+=("$ns")
            left=$(in_namespace "$ns" "$now" "$pid" "$fs" | tr '\n' ' ')
            [ -z "$left" ] || say "warning: on $h processes not started by cluster.sh still run (not ended): $left"
            # Unmounting the view ends its process.
            nsenter --target "$pid" --mount -- umount "$SHARED" 2>/dev/null ||
                nsenter --target "$pid" --mount -- umount -l "$SHARED" 2>/dev/null || true
        fi
        end_recorded "$STATE/$h.view"
        end_recorded "$STATE/$h.holder"
    done
    rm -f "$STATE/hosts" "$STATE/agent" "$STATE/hostfile" "$STATE/mpirun" "$STATE"/*.holder "$STATE"/*.view
    # A namespace and its mounts go with its last process (a view's own
    # helpers end just after it); what was ended shows in ps as defunct
    # until its parent, init, has reaped it.
    local unreaped
    for _ in $(seq 50); do
        left="" unreaped=""
        for ns in ${spaces[@]+"${spaces[@]}"}; do
            left+=$(in_namespace "$ns" "$now" | tr '\n' ' ')
        done
        for pid in ${ENDED[@]+"${ENDED[@]}"}; do
            [ -e "/proc/$pid" ] && unreaped+=" $pid"
        done
        [ -n "$left$unreaped" ] || break
        sleep 0.1
    done
    [ -z "$unreaped" ] || say "warning: init has not reaped$unreaped yet (defunct in ps)"
    [ -z "$left" ] || die "processes $left still hold a host's namespaces and mounts: end them, then down again"
}

check_can() {
    [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, mounts)"
    [ -c /dev/fuse ] || die "/dev/fuse does not exist: no FUSE here (modprobe fuse, or a container with --device /dev/fuse)"
    local why
    why=$(unshare --uts --mount true 2>&1) || die "unshare --uts --mount fails: $why"
}

# Start host $1: its namespaces (held by a sleeping process), its /tmp and
# /dev/shm, then its view of the backing directory: $2, the view's command
# (its source and mount point follow).
start_host() {
    local h=$1 view=$2 pid
    rm -f "$STATE/$h.pid"
    # The holder writes its id once its mounts are made, then sleeps.
    # shellcheck disable=SC2016 # expanded by the holder's shell
    setsid unshare --uts --mount --propagation private -- bash -c '
        set -e
        hostname "$1"
        mount -t tmpfs -o mode=1777,size=4g "tmp-$1" /tmp
        mount -t tmpfs -o mode=1777,size=1g "shm-$1" /dev/shm
        echo $$ >"$2.new" && mv "$2.new" "$2"
        exec -a "soslb-cluster-$1" sleep infinity' sh "$h" "$STATE/$h.pid" \
        </dev/null >"$STATE/$h.log" 2>&1 &
    for _ in $(seq 100); do
        [ -f "$STATE/$h.pid" ] && break
        kill -0 $! 2>/dev/null || die "host $h did not start: $(cat "$STATE/$h.log")"
        sleep 0.05
    done
    [ -f "$STATE/$h.pid" ] || die "host $h did not start in 5 s: $(cat "$STATE/$h.log")"
    pid=$(cat "$STATE/$h.pid")
    rm -f "$STATE/$h.pid"
    record "$STATE/$h.holder" "$pid"
    # shellcheck disable=SC2086 # the command and its options are words
    setsid nsenter --target "$pid" --mount -- $view "$BACKING" "$SHARED" \
        </dev/null >>"$STATE/$h.log" 2>&1 &
    record "$STATE/$h.view" $!
    for _ in $(seq 100); do
        [ "$(nsenter --target "$pid" --mount -- findmnt -n -o FSTYPE "$SHARED")" = fuse ] && return 0
        recorded_alive "$STATE/$h.view" || die "the view of $h failed: $(cat "$STATE/$h.log")"
        sleep 0.05
    done
    die "the view of $h is not mounted after 5 s: $(cat "$STATE/$h.log")"
}

up() {
    local n=${1:-} lock=1 cache=0 nfs3=0 rtt=0.001 slots=4 h i view
    case "$n" in '' | *[!0-9]* | 0) die "usage: scripts/cluster.sh up N [--no-lock-forwarding] [--cache] [--nfs3 [--rtt S]] [--slots S]" ;; esac
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --no-lock-forwarding) lock=0 ;;
            --cache) cache=1 ;;
            --nfs3) nfs3=1 ;;
            --rtt) rtt=${2:-}; shift ;;
            --slots) slots=${2:-}; shift ;;
            *) die "unknown option $1 of up" ;;
        esac
        shift
    done
    case "$slots" in '' | *[!0-9]* | 0) die "--slots needs a positive number" ;; esac
    [[ "$rtt" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--rtt needs a number of seconds, not '$rtt'"
    [ "$nfs3" = 0 ] || [ "$lock$cache" = 10 ] ||
        die "--nfs3 views forward no locks and cache nothing: not with --no-lock-forwarding or --cache"
    check_can
    if [ -n "$(hosts)" ]; then
        say "taking down the cluster an earlier up left in $STATE"
        down
    fi
    # (The mount point empty: FUSE mounts on no other.)
    rm -rf "$BACKING" "$SHARED"
    mkdir -p "$BACKING" "$SHARED"
    if [ "$nfs3" = 1 ]; then
        need_fusepy
        view="/usr/bin/python3 $ROOT/tests/fuse/stale_view.py --rtt $rtt --count $STATE/estale"
        rm -f "$STATE/estale"
    else
        # Multithreaded: lock forwarding needs it, and without it one host's
        # ranks would queue on one thread.
        view="bindfs -f --multithreaded"
        [ "$lock" = 1 ] && view+=" --enable-lock-forwarding"
        if [ "$cache" = 1 ]; then
            view+=" -o auto_cache,attr_timeout=3,entry_timeout=3,negative_timeout=3"
        else
            view+=" -o attr_timeout=0,entry_timeout=0,negative_timeout=0,direct_io"
        fi
    fi
    : >"$STATE/hosts"
    trap 'say "up failed: taking down what was started"; down' EXIT
    for i in $(seq "$n"); do
        h=$(printf 'node%02d' "$i")
        echo "$h" >>"$STATE/hosts"
        start_host "$h" "$view"
        echo "$h slots=$slots" >>"$STATE/hostfile"
    done
    trap - EXIT
    # Open MPI's rsh agent: `agent [OPTIONS] HOST COMMAND...` runs COMMAND
    # in HOST's namespaces (with the caller's environment, as ssh would not).
    cat >"$STATE/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
read -r pid start <"$STATE/\$1.holder" || { echo "cluster agent: no host \$1" >&2; exit 1; }
shift
exec nsenter --target "\$pid" --uts --mount -- /bin/sh -c "\$*"
EOF
    # mpirun across the hosts: their host file and agent, TCP over lo
    # between them (MCA settings from the environment, so that options on
    # the command line override them). The hosts share this machine's
    # cores: their ranks must yield when idle, which Open MPI does by itself
    # only where a host's own slots are oversubscribed (without it, ranks
    # spinning in init's collectives starved the others: 0.4 to 3.3 s of
    # soslb's init for 16 ranks on 4 hosts, against 0.1 to 0.2 s).
    cat >"$STATE/mpirun" <<EOF
#!/bin/sh
# mpirun across the hosts of $STATE (scripts/cluster.sh).
export OMPI_MCA_orte_default_hostfile="$STATE/hostfile"
export OMPI_MCA_plm_rsh_agent="$STATE/agent"
export OMPI_MCA_oob_tcp_if_include="\${OMPI_MCA_oob_tcp_if_include:-lo}"
export OMPI_MCA_btl_tcp_if_include="\${OMPI_MCA_btl_tcp_if_include:-lo}"
export OMPI_MCA_btl="\${OMPI_MCA_btl:-self,tcp}"
export OMPI_MCA_mpi_yield_when_idle="\${OMPI_MCA_mpi_yield_when_idle:-1}"
exec mpirun "\$@"
EOF
    chmod +x "$STATE/agent" "$STATE/mpirun"
    say "up: $(hosts | tr '\n' ' ')with $slots slots each; $([ "$nfs3" = 1 ] && echo "NFSv3 views (stale handles), $rtt s round trip" || echo "lock forwarding $([ "$lock" = 1 ] && echo on || echo off), caching $([ "$cache" = 1 ] && echo on || echo off)")"
    say "shared directory $SHARED (backing $BACKING); run: $STATE/mpirun -np K PROGRAM"
}

status() {
    local h
    [ -n "$(hosts)" ] || { echo "no cluster in $STATE"; return 0; }
    for h in $(hosts); do
        if recorded_alive "$STATE/$h.holder" && recorded_alive "$STATE/$h.view"; then
            echo "$h up: holder $(cut -d' ' -f1 "$STATE/$h.holder"), view $(cut -d' ' -f1 "$STATE/$h.view")"
        else
            echo "$h down (left by a crash: scripts/cluster.sh down, or up again)"
        fi
    done
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down; say "down: nothing of $STATE left mounted or running" ;;
    status) status ;;
    exec)
        [ $# -ge 3 ] || die "usage: scripts/cluster.sh exec HOST COMMAND..."
        pid=$(holder_pid "$2")
        shift 2
        # (cd inside: nsenter --wd keeps the caller's view of the mounts.)
        # shellcheck disable=SC2016 # expanded by the host's shell
        exec nsenter --target "$pid" --uts --mount -- sh -c 'cd "$0" && exec "$@"' "$CALLER_PWD" "$@" ;;
    mpirun)
        [ -x "$STATE/mpirun" ] || die "no cluster is up in $STATE: scripts/cluster.sh up N"
        shift
        exec "$STATE/mpirun" "$@" ;;
    *) die "usage: scripts/cluster.sh up N [--no-lock-forwarding] [--cache] [--nfs3 [--rtt S]] [--slots S] | down | status | exec HOST COMMAND... | mpirun ARGS..." ;;
esac
