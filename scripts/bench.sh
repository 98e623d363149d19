#!/usr/bin/env bash
# Benchmarks (figures, not pass/fail):
#   scripts/bench.sh SCENARIO MODE   one emulator run: SCENARIO is a name of
#                                    examples/scenarios or a file; MODE is
#                                    static, warmup or full
#   scripts/bench.sh all [MODE...]   hetero16, fluct16, step16 in the three
#                                    modes (or the MODEs given)
#   scripts/bench.sh tail [MODE...]  realisations of random cost: tail16
#                                    (log-normal), pareto16, bimodal16
#   scripts/bench.sh wide [MODE...]  wide jobs: wide32, wide64 (fluctuations
#                                    every 1 s and 0.5 s)
#   scripts/bench.sh sites [MODE...] two sites of two hosts of four ranks:
#                                    sites16, sites16-one, with the hierarchy
#                                    and flat (SOSLB_EMULATE with `hosts: Real,
#                                    sites: Real`, SOSLB_SITES=Single,
#                                    SOSLB_HOST_BOARD=false: on one machine a
#                                    host board would skip the emulated grid)
#   scripts/bench.sh --cluster N SCENARIO MODE, --cluster N all|sites [MODE...]
#                                    the same across the N hosts of
#                                    scripts/cluster.sh (up N first), ranks
#                                    spread evenly, hosts from their real
#                                    names; a scenario with a layout gets its
#                                    sites from node-name patterns
# The emulator is built with the feature `emulate`; SOSLB_EMULATE='(...)' sets
# its emulation (storage_delay, hosts, ...; see src/emulate.rs), and any
# SOSLB_* variable applies.
#   scripts/bench.sh next            the fast path of next: ns per call
#   scripts/bench.sh sim RANKS [MODE [OPTION...]] the simulator (one core,
#                                    virtual clock): fluct16's speeds on RANKS
#                                    ranks, 16 per virtual host, Z = 375 RANKS;
#                                    options go to examples/simulate (--ops:
#                                    operations per second by request kind)
. "$(dirname "$0")/setup.sh"
usage="usage: scripts/bench.sh [--cluster N] SCENARIO static|warmup|full | [--cluster N] all|tail|wide|sites [MODE...] | next | sim RANKS [MODE [OPTION...]]"
cargo build --release --features emulate --examples

# $SOSLB_EMULATE with real hosts and sites (the caller's other emulation
# kept): no virtual ones from a scenario's layout.
real_hosts() {
    local inner
    inner=$(sed 's/^[[:space:]]*(//; s/)[[:space:]]*$//' <<<"${SOSLB_EMULATE:-}")
    grep -q 'hosts:' <<<"$inner" || inner="hosts: Real${inner:+, $inner}"
    grep -q 'sites:' <<<"$inner" || inner="sites: Real, $inner"
    echo "($inner)"
}

# The file of scenario $1 (a name of examples/scenarios or a file).
scenario_file() {
    local file="$1"
    [ -f "$file" ] || file="examples/scenarios/$1.ron"
    [ -f "$file" ] || { echo "bench: no scenario $1 (no file $file)" >&2; exit 2; }
    echo "$file"
}

# The value of the field $2 (a number) in scenario file $1.
scenario_number() {
    sed -n -e '/^[[:space:]]*\/\//d' -e "s/.*[(, ]$2: *\([0-9]*\).*/\1/p" "$1" | head -1
}

# One run of scenario $1 in mode $2, across the cluster's hosts after --cluster.
run() {
    if [ -n "${CLUSTER_HOSTS:-}" ]; then
        cluster "$CLUSTER_HOSTS" "$1" "$2"
        return
    fi
    local file
    file=$(scenario_file "$1")
    mpirun -np "$(scenario_number "$file" ranks)" target/release/examples/emulate "$file" "$2"
}

# Scenario $2 in mode $3 across the $1 hosts of scripts/cluster.sh: hosts
# from their names (emulate: (hosts: Real)), the signal directory on the hosts' shared
# view; a scenario's layout gives sites of hosts_per_site consecutive hosts,
# as node-name patterns (its far SOS files stay slower to reach, as in the
# emulated grid).
cluster() {
    local n="$1" file ranks state hosts per h i sites="" hps
    state=${CLUSTER_DIR:-$ROOT/target/cluster}
    hosts=$(cat "$state/hosts" 2>/dev/null || true)
    if [ ! -x "$state/mpirun" ] || [ "$(echo "$hosts" | wc -w)" != "$n" ]; then
        echo "bench: no cluster of $n hosts is up in $state: scripts/cluster.sh up $n" >&2
        exit 2
    fi
    file=$(scenario_file "$2")
    ranks=$(scenario_number "$file" ranks)
    per=$(( (ranks + n - 1) / n ))
    hps=$(scenario_number "$file" hosts_per_site)
    i=0
    local spread=""
    for h in $hosts; do
        spread+="${spread:+,}$h:$per"
        [ -z "$hps" ] || sites+="${sites:+, }(\"$h\", \"site$((i / hps))\")"
        i=$((i + 1))
    done
    local env=(SOSLB_SIGNAL_DIR="$state/shared/signals" SOSLB_EMULATE="$(real_hosts)")
    # (Flat, as `sites` runs it, sets SOSLB_SITES=Single.)
    if [ -n "$sites" ] && [ -z "${SOSLB_SITES:-}" ]; then
        env+=(SOSLB_SITES="Patterns([$sites])")
        [ "$(scenario_number "$file" ranks_per_host)" = "$per" ] ||
            echo "bench: warning: $file lays out $(scenario_number "$file" ranks_per_host) ranks per host, the cluster runs $per" >&2
    fi
    echo "bench: ${env[*]} on $spread" >&2
    env "${env[@]}" "$state/mpirun" -np "$ranks" --host "$spread" \
        target/release/examples/emulate "$file" "$3"
}

# The result lines of the scenarios $1 in modes $2... (default: all three).
group() {
    local scenarios="$1"; shift
    local modes="${*:-static warmup full}"
    for m in $modes; do
        case "$m" in static|warmup|full) ;; *) echo "bench: unknown mode $m; $usage" >&2; exit 2 ;; esac
    done
    for s in $scenarios; do
        for m in $modes; do run "$s" "$m" | tail -1; done
    done
}

# The simulator on $1 ranks of fluct16's speeds, in mode $2 (default full),
# with the options that follow.
sim() {
    case "${1:-}" in ''|*[!0-9]*) echo "bench: sim needs a number of ranks; $usage" >&2; exit 2 ;; esac
    local file
    file=$(mktemp --suffix=.ron)
    printf '(name: "sim", ranks: %d, realisations: %d, base: 0.02,\n speed: [Classes([1.0, 0.5, 0.25, 0.1], 4), Fluctuate(seed: 42, period: 2.0)])\n' \
        "$1" $((375 * $1)) > "$file"
    target/release/examples/simulate "$file" "${2:-full}" --ranks-per-host 16 "${@:3}"
    rm -f "$file"
}

if [ "${1:-}" = --cluster ]; then
    case "${2:-}" in ''|*[!0-9]*|0) echo "bench: --cluster needs a number of hosts; $usage" >&2; exit 2 ;; esac
    CLUSTER_HOSTS=$2
    shift 2
fi

case "${1:-}" in
    sim) shift; sim "$@" ;;
    next) mpirun -np 2 target/release/examples/next_bench ;;
    all) shift; group "hetero16 fluct16 step16" "$@" ;;
    tail) shift; group "tail16 pareto16 bimodal16" "$@" ;;
    wide) shift; group "wide32 wide64" "$@" ;;
    sites) shift
        group "sites16 sites16-one" "${@:-full}"
        echo "flat:"
        SOSLB_EMULATE=$(real_hosts) SOSLB_SITES=Single SOSLB_HOST_BOARD=false \
            group "sites16 sites16-one" "${@:-full}" ;;
    "") echo "$usage" >&2; exit 2 ;;
    *) [ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
        case "$2" in static|warmup|full) ;; *) echo "bench: unknown mode $2; $usage" >&2; exit 2 ;; esac
        run "$1" "$2" ;;
esac
