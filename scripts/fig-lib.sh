# shellcheck shell=bash
# Sourced by the experiment scripts (fig5.sh, fig6.sh, fig7.sh,
# count-experiment.sh): set-up, the `soslb` command, and the emulator runs.
#
#   fig_start OUT     OUT made empty of earlier runs; the runs' signal
#                     directory is OUT/runs
#   scenario FILE RANKS REALISATIONS BASE SPEED   write an emulator scenario
#   emulate FILE MODE JOB [VAR=VALUE...]          one emulator run (scripts/bench.sh)
#                     with job id JOB; prints its result line
#   run_dir JOB       the run directory of job JOB
#   field LINE KEY    the value of KEY= in LINE
#   SOSLB             the soslb command
# shellcheck source=scripts/setup.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cargo build --release --features emulate --examples --bin soslb
SOSLB="$(target_dir)/release/soslb"
export SOSLB

fig_start() {
    [ -n "${1:-}" ] || { echo "usage: $0 OUT" >&2; exit 2; }
    OUT=$(mkdir -p "$1" && cd "$1" && pwd)
    rm -rf "$OUT/runs"
    mkdir -p "$OUT/runs"
    export SOSLB_SIGNAL_DIR="$OUT/runs" SOSLB_WARMUP="${SOSLB_WARMUP:-0.5}"
}

scenario() {
    local name
    name=$(basename "$1" .ron)
    cat >"$1" <<RON
(
    name: "$name",
    ranks: $2,
    realisations: $3,
    base: $4,
    speed: [$5],
)
RON
}

emulate() {
    local file="$1" mode="$2" job="$3"
    shift 3
    env SOSLB_JOB_ID="$job" "$@" bash "$ROOT/scripts/bench.sh" "$file" "$mode" \
        >"$OUT/runs/$job.out" 2>"$OUT/runs/$job.err" || {
        echo "$job failed:" >&2
        cat "$OUT/runs/$job.out" "$OUT/runs/$job.err" >&2
        exit 1
    }
    tail -1 "$OUT/runs/$job.out"
}

run_dir() { echo "$OUT/runs/$1.0"; }

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }
