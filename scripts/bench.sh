#!/usr/bin/env bash
# Benchmarks (figures, not pass/fail):
#   scripts/bench.sh SCENARIO MODE   one emulator run: SCENARIO is a name of
#                                    examples/scenarios or a file; MODE is
#                                    static, warmup or full
#   scripts/bench.sh all             the three scenarios in the three modes
#   scripts/bench.sh next            the fast path of next: ns per call
. "$(dirname "$0")/setup.sh"
usage="usage: scripts/bench.sh SCENARIO static|warmup|full | all | next"
cargo build --release --examples

run() {
    local file="$1"
    [ -f "$file" ] || file="examples/scenarios/$1.ron"
    [ -f "$file" ] || { echo "bench: no scenario $1 (no file $file)" >&2; exit 2; }
    local ranks
    ranks=$(sed -n 's/^ *ranks: *\([0-9]*\).*/\1/p' "$file" | head -1)
    mpirun -np "$ranks" target/release/examples/emulate "$file" "$2"
}

case "${1:-}" in
    next) mpirun -np 2 target/release/examples/next_bench ;;
    all)
        for s in hetero16 fluct16 step16; do
            for m in static warmup full; do run "$s" "$m" | tail -1; done
        done ;;
    "") echo "$usage" >&2; exit 2 ;;
    *) [ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }; run "$1" "$2" ;;
esac
