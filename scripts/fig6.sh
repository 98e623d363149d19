#!/usr/bin/env bash
# The paper's Fig. 6: one slow node (2 ranks, slowed to 0.25 right after the
# warm-up, so that only SOS/AID help can fix it) and n fast ranks, n = 2, 4,
# 6, 8, 10; the job's time without balancing and with each help policy.
#   scripts/fig6.sh OUT   -> OUT/fig6.png, OUT/fig6.csv
# shellcheck source=scripts/fig-lib.sh
. "$(dirname "$0")/fig-lib.sh"
fig_start "${1:-}"
policies=(Proportional Half Balanced)
echo "fast_ranks,no_balancing,${policies[*]}" | tr ' ' , >"$OUT/fig6.csv"
for n in 2 4 6 8 10; do
    file="$OUT/fig6-n$n.ron"
    scenario "$file" $((n + 2)) 4800 0.005 "Step(at: 0.75, from_rank: 0, to_rank: 2, factor: 0.25)"
    row="$n,$(field "$(emulate "$file" static "fig6-n$n-static")" makespan_s)"
    for p in "${policies[@]}"; do
        result=$(emulate "$file" full "fig6-n$n-$p" SOSLB_HELP_POLICY="$p")
        row+=",$(field "$result" makespan_s)"
    done
    echo "$row" | tee -a "$OUT/fig6.csv"
done
"$SOSLB" plot "$OUT/fig6.csv" --out "$OUT/fig6.png" \
    --title "One slow node (2 ranks at 0.25) and n fast ranks, 4800 realisations" \
    --x-label "fast ranks n" --y-label "job time (s)"
echo "fig6: $OUT/fig6.png $OUT/fig6.csv"
