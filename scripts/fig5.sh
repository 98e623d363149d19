#!/usr/bin/env bash
# The paper's Fig. 5: 6 ranks of different speeds, no balancing against
# Algorithm 1 (warm-up rescaling): each rank's finishing time and the job's.
#   scripts/fig5.sh OUT   -> OUT/fig5.png, OUT/fig5.csv (per rank),
#                            OUT/fig5-total.csv, OUT/report/ (soslb report)
# shellcheck source=scripts/fig-lib.sh
. "$(dirname "$0")/fig-lib.sh"
fig_start "${1:-}"
scenario "$OUT/fig5.ron" 6 1800 0.01 "Classes([1.0, 0.8, 0.6, 0.45, 0.3, 0.25], 1)"
echo "mode,makespan_s" >"$OUT/fig5-total.csv"
for mode in static warmup; do
    result=$(emulate "$OUT/fig5.ron" "$mode" "fig5-$mode")
    echo "$result"
    echo "$mode,$(field "$result" makespan_s)" >>"$OUT/fig5-total.csv"
done
"$SOSLB" report "$(run_dir fig5-static)" "$(run_dir fig5-warmup)" --out "$OUT/report"
cp "$OUT/report/ranks.png" "$OUT/fig5.png"
# rank, finish without balancing, finish with Algorithm 1
paste -d, <(cut -d, -f1,8 "$OUT/report/ranks.csv") <(cut -d, -f8 "$OUT/report/1/ranks.csv") |
    sed '1s/.*/rank,static_finish_s,warmup_finish_s/' >"$OUT/fig5.csv"
echo "fig5: $OUT/fig5.png $OUT/fig5.csv $OUT/fig5-total.csv"
