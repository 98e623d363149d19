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
#                                    and flat (SOSLB_HOSTS=Real SOSLB_SITES=Single
#                                    SOSLB_HOST_BOARD=false: on one machine a
#                                    host board would skip the emulated grid)
#   scripts/bench.sh next            the fast path of next: ns per call
#   scripts/bench.sh sim RANKS [MODE [OPTION...]] the simulator (one core,
#                                    virtual clock): fluct16's speeds on RANKS
#                                    ranks, 16 per virtual host, Z = 375 RANKS;
#                                    options go to examples/simulate (--ops:
#                                    operations per second by request kind)
. "$(dirname "$0")/setup.sh"
usage="usage: scripts/bench.sh SCENARIO static|warmup|full | all|tail|wide|sites [MODE...] | next | sim RANKS [MODE [OPTION...]]"
cargo build --release --examples

run() {
    local file="$1"
    [ -f "$file" ] || file="examples/scenarios/$1.ron"
    [ -f "$file" ] || { echo "bench: no scenario $1 (no file $file)" >&2; exit 2; }
    local ranks
    ranks=$(sed -n 's/^ *ranks: *\([0-9]*\).*/\1/p' "$file" | head -1)
    mpirun -np "$ranks" target/release/examples/emulate "$file" "$2"
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

case "${1:-}" in
    sim) shift; sim "$@" ;;
    next) mpirun -np 2 target/release/examples/next_bench ;;
    all) shift; group "hetero16 fluct16 step16" "$@" ;;
    tail) shift; group "tail16 pareto16 bimodal16" "$@" ;;
    wide) shift; group "wide32 wide64" "$@" ;;
    sites) shift
        group "sites16 sites16-one" "${@:-full}"
        echo "flat:"
        SOSLB_HOSTS=Real SOSLB_SITES=Single SOSLB_HOST_BOARD=false group "sites16 sites16-one" "${@:-full}" ;;
    "") echo "$usage" >&2; exit 2 ;;
    *) [ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }; run "$1" "$2" ;;
esac
