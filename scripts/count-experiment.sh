#!/usr/bin/env bash
# Realisation-count experiment: the Fortran slab example (6 ranks, rank 5
# four times slower, examples/slab.ron) over a list of totals, balanced
# (SOSLB_MODE=Full) and not (Static). The standard error of the transmission
# against the count, with the 1/sqrt(N) reference through the first point,
# and the wall time against the count, both log-log.
#   scripts/count-experiment.sh OUT   -> OUT/count-stderr.png, OUT/count-time.png,
#                                        OUT/count.csv
# COUNTS="1000 3000 ..." sets the totals.
# shellcheck source=scripts/fig-lib.sh
. "$(dirname "$0")/fig-lib.sh"
fig_start "${1:-}"
build_slab
slab="$(target_dir)/release/slab"
read -ra counts <<<"${COUNTS:-1000 3000 10000 30000 100000}"
echo "realisations,stderr_full,stderr_static,wall_full_s,wall_static_s" >"$OUT/count.csv"
echo "realisations,balanced,no_balancing,reference_1/sqrt(N)" >"$OUT/count-stderr.csv"
echo "realisations,balanced,no_balancing" >"$OUT/count-time.csv"
first=""
for n in "${counts[@]}"; do
    declare -A err wall
    for mode in Full Static; do
        t0=$(date +%s.%N)
        SOSLB_MODE=$mode SOSLB_JOB_ID="count-$n-$mode" SOSLB_SUMMARY=false \
            mpirun -np 6 "$slab" "$n" examples/slab.ron >"$OUT/runs/count-$n-$mode.out"
        t1=$(date +%s.%N)
        # The last line: stats: realisations=<n> mean=<m> stderr=<e>
        line=$(tail -1 "$OUT/runs/count-$n-$mode.out")
        [[ "$line" == "stats: realisations=$n "* ]] || {
            echo "count-experiment: slab $n $mode: no stats line, got: $line" >&2
            exit 1
        }
        err[$mode]=$(field "$line" stderr)
        wall[$mode]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    done
    first=${first:-"$n ${err[Full]}"}
    ref=$(awk -v f="$first" -v n="$n" 'BEGIN { split(f, a, " "); printf "%.6e", a[2] * sqrt(a[1] / n) }')
    echo "$n,${err[Full]},${err[Static]},${wall[Full]},${wall[Static]}" | tee -a "$OUT/count.csv"
    echo "$n,${err[Full]},${err[Static]},$ref" >>"$OUT/count-stderr.csv"
    echo "$n,${wall[Full]},${wall[Static]}" >>"$OUT/count-time.csv"
done
"$SOSLB" plot "$OUT/count-stderr.csv" --out "$OUT/count-stderr.png" --log-x --log-y \
    --title "Slab transmission: standard error (identical balanced or not)" \
    --x-label "realisations N" --y-label "standard error of the mean"
"$SOSLB" plot "$OUT/count-time.csv" --out "$OUT/count-time.png" --log-x --log-y \
    --title "Slab on 6 ranks (one 4x slower): wall time" \
    --x-label "realisations N" --y-label "wall time (s)"
echo "count experiment: $OUT/count-stderr.png $OUT/count-time.png $OUT/count.csv"
