#!/usr/bin/env bash
# The paper's Fig. 7: 6 very fast ranks, 4 medium and 4 slow ones, every
# speed fluctuating; each rank's forecast finishing time as the job runs,
# balanced (Algorithm 1 and SOS/AID). The report's other pictures (who
# helped whom, the timeline) are of this run too.
#   scripts/fig7.sh OUT   -> OUT/fig7.png, OUT/fig7.csv, OUT/report/
# shellcheck source=scripts/fig-lib.sh
. "$(dirname "$0")/fig-lib.sh"
fig_start "${1:-}"
scenario "$OUT/fig7.ron" 14 20000 0.02 \
    "Classes([4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 0.4, 0.4, 0.4, 0.4], 1), Fluctuate(seed: 42, period: 2.0)"
emulate "$OUT/fig7.ron" full fig7
"$SOSLB" report "$(run_dir fig7)" --out "$OUT/report"
cp "$OUT/report/forecast.png" "$OUT/fig7.png"
cp "$OUT/report/forecast.csv" "$OUT/fig7.csv"
echo "fig7: $OUT/fig7.png $OUT/fig7.csv"
