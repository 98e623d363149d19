//! Pure planning: the initial blocks, Algorithm 1 (warm-up rescaling) and the
//! help shares of Algorithm 2.
//!
//! Everything here is a deterministic function of its arguments: every rank
//! computes the same plan from the same gathered vector.
//!
//! Algorithm 1 (DESIGN §4): the ids start in the equal blocks of
//! [`initial_block`]. After the warm-up one collective gathers each rank's
//! [`WarmupReport`], and [`rescale`] cuts the unfinished ids in proportion
//! to the measured speeds, rounded by [`largest_remainder`]: every rank gets
//! one common finishing time, the *horizon*. The collective does not block:
//! a rank keeps a warm-up's worth of its block (its *reserve*) and computes
//! it while the slower ranks reach the exchange, and the plan counts what
//! each rank has left of its reserve. A helper's share of an open SOS is
//! [`share`], sized by the [`HelpPolicy`].

use crate::ids::IdSet;
use crate::speed::usable;
use std::ops::Range;

mod help;
pub use help::{HelpPolicy, ShareInput, share};

/// The initial block of `rank`: ids are cut into `ranks` contiguous blocks
/// whose sizes differ by at most one.
pub fn initial_block(total: u64, ranks: usize, rank: usize) -> Range<u64> {
    let p = ranks.max(1) as u128;
    let z = total as u128;
    let start = z * rank as u128 / p;
    let end = z * (rank as u128 + 1) / p;
    start as u64..end as u64
}

/// What one rank contributes to the warm-up collective (DESIGN §4, step 3).
#[derive(Clone, Debug, PartialEq)]
pub struct WarmupReport {
    /// Realisations done during the warm-up (`x_i`).
    pub done: u64,
    /// Measured speed `v_i`, realisations per second of computing.
    pub speed: f64,
    /// The unfinished tail of the rank's block, pooled by the plan.
    pub tail: Range<u64>,
    /// Ids of the block the rank keeps and computes while the exchange
    /// completes (its reserve): neither done nor in the tail.
    pub reserved: u64,
    /// When the rank reported, seconds since the job's start.
    pub at: f64,
}

impl WarmupReport {
    /// The length of [`WarmupReport::to_words`].
    pub const WORDS: usize = 6;

    /// Fixed-size form for the collective.
    pub fn to_words(&self) -> [u64; Self::WORDS] {
        [
            self.done,
            self.speed.to_bits(),
            self.tail.start,
            self.tail.end,
            self.reserved,
            self.at.to_bits(),
        ]
    }

    /// Inverse of [`WarmupReport::to_words`].
    pub fn from_words(w: [u64; Self::WORDS]) -> Self {
        WarmupReport {
            done: w[0],
            speed: f64::from_bits(w[1]),
            tail: w[2]..w[3],
            reserved: w[4],
            at: f64::from_bits(w[5]),
        }
    }

    /// The reserve this rank has left when the last report is made at
    /// `end`, at its speed (none once used up).
    fn reserve_left(&self, end: f64) -> f64 {
        (self.reserved as f64 - usable(self.speed) * (end - self.at).max(0.0)).max(0.0)
    }
}

/// The result of Algorithm 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The new quota of each rank.
    pub quotas: Vec<IdSet>,
    /// `y_i`: the number of ids in each quota; `Σ y_i = Y`.
    pub shares: Vec<u64>,
    /// `r_i`: the reserve each rank has left at the last report, as the
    /// plan counts it (estimated at the rank's speed).
    pub kept: Vec<u64>,
    /// `t2`: seconds from the last report to the horizon `T_e`, when every
    /// rank ends its reserve and quota together (`Y / Σv` without reserves).
    pub duration: f64,
}

/// Split `amount` in proportion to `weights` by largest remainder, so that the
/// parts sum to `amount` exactly. Ties go to the lower index. Zero, negative or
/// non-finite weights count as zero; if every weight is zero the split is equal.
pub fn largest_remainder(amount: u64, weights: &[f64]) -> Vec<u64> {
    let n = weights.len();
    if n == 0 {
        return Vec::new();
    }
    let vmax = weights.iter().copied().map(usable).fold(0.0, f64::max);
    // Integer weights make the split exact and platform-independent.
    let w: Vec<u128> = if vmax > 0.0 {
        weights
            .iter()
            .map(|&v| (usable(v) / vmax * (1u64 << 40) as f64).round() as u128)
            .collect()
    } else {
        vec![1; n]
    };
    let sum: u128 = w.iter().sum::<u128>().max(1);
    let y = amount as u128;
    let mut parts: Vec<u64> = w.iter().map(|&wi| (y * wi / sum) as u64).collect();
    let given: u64 = parts.iter().sum();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(y * w[i] % sum), i));
    for &i in order.iter().take((amount - given) as usize) {
        parts[i] += 1;
    }
    parts
}

/// Algorithm 1: the plan every rank computes from the gathered warm-up reports.
///
/// `Y` is the number of ids left in the tails. Without reserves,
/// `y_i = Y·v_i/Σv`. A rank that kept a reserve computes it while the
/// exchange completes; at the last report it has `r_i` of it left
/// (estimated at its speed), and the shares make every rank end together:
/// `y_i + r_i = (Y + Σr)·v_i/Σv`, and a rank whose reserve alone outlasts
/// that end gets nothing. The shares are rounded by largest remainder, and
/// the tails, in id order, are cut into consecutive pieces of sizes
/// `y_0, y_1, …`.
pub fn rescale(reports: &[WarmupReport]) -> Plan {
    let speeds: Vec<f64> = reports.iter().map(|r| usable(r.speed)).collect();
    let mut tails: Vec<Range<u64>> = reports
        .iter()
        .map(|r| r.tail.clone())
        .filter(|t| t.start < t.end)
        .collect();
    tails.sort_by_key(|t| t.start);
    let remaining: u64 = tails.iter().map(|t| t.end - t.start).sum();
    let last = reports
        .iter()
        .map(|r| r.at)
        .fold(f64::NEG_INFINITY, f64::max);
    let kept: Vec<u64> = reports
        .iter()
        .map(|r| r.reserve_left(last).round() as u64)
        .collect();
    let (shares, duration) = split(remaining, &speeds, &kept);
    // One pass over the tails (a pool drained from its front cost O(P²)
    // per plan, which the simulator pays on every rank).
    let mut runs = tails.into_iter();
    let mut run = runs.next();
    let quotas = shares
        .iter()
        .map(|&y| {
            let (mut quota, mut left) = (IdSet::new(), y);
            while let Some(r) = run.as_mut().filter(|_| left > 0) {
                let n = (r.end - r.start).min(left);
                quota.insert(r.start..r.start + n);
                (r.start, left) = (r.start + n, left - n);
                if r.start == r.end {
                    run = runs.next();
                }
            }
            quota
        })
        .collect();
    Plan {
        quotas,
        shares,
        kept,
        duration,
    }
}

/// The shares of `remaining` pooled ids, and the seconds to their common
/// end: each rank's reserve `kept` and share together in proportion to its
/// speed, rounded by largest remainder. A rank whose reserve alone lasts
/// beyond the common end gets no share, and the others split the pool
/// again. Equal shares when no rank has a speed.
fn split(remaining: u64, speeds: &[f64], kept: &[u64]) -> (Vec<u64>, f64) {
    let mut active: Vec<bool> = speeds.iter().map(|&v| v > 0.0).collect();
    if !active.contains(&true) {
        return (largest_remainder(remaining, speeds), 0.0);
    }
    loop {
        let weights: Vec<f64> = speeds
            .iter()
            .zip(&active)
            .map(|(&v, &a)| if a { v } else { 0.0 })
            .collect();
        let pool = remaining
            + kept
                .iter()
                .zip(&active)
                .filter(|(_, a)| **a)
                .map(|(k, _)| k)
                .sum::<u64>();
        let totals = largest_remainder(pool, &weights);
        let mut over = false;
        for (i, a) in active.iter_mut().enumerate() {
            if *a && totals[i] < kept[i] {
                (*a, over) = (false, true);
            }
        }
        if !over {
            let shares = totals
                .iter()
                .zip(kept.iter().zip(&active))
                .map(|(t, (k, a))| if *a { t - k } else { 0 })
                .collect();
            return (shares, pool as f64 / weights.iter().sum::<f64>());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reports(total: u64, done: &[u64], speeds: &[f64]) -> Vec<WarmupReport> {
        let p = speeds.len();
        (0..p)
            .map(|i| {
                let b = initial_block(total, p, i);
                let x = done[i].min(b.end - b.start);
                WarmupReport {
                    done: x,
                    speed: speeds[i],
                    tail: b.start + x..b.end,
                    reserved: 0,
                    at: 1.0,
                }
            })
            .collect()
    }

    /// Every id of every tail lands in exactly one quota, nothing else does.
    fn assert_partition(reps: &[WarmupReport], plan: &Plan) {
        let mut seen = IdSet::new();
        let mut count = 0;
        for q in &plan.quotas {
            count += q.len();
            seen.extend(q);
        }
        let mut tails = IdSet::new();
        for r in reps {
            tails.insert(r.tail.clone());
        }
        assert_eq!(count, tails.len(), "an id was given twice");
        assert_eq!(seen, tails, "the quotas are not the tails");
        let y: Vec<u64> = plan.quotas.iter().map(IdSet::len).collect();
        assert_eq!(y, plan.shares);
    }

    #[test]
    fn blocks_cover_every_id_once() {
        for (z, p) in [(10, 3), (2, 5), (0, 4), (6000, 16), (1, 1)] {
            let mut next = 0;
            for i in 0..p {
                let b = initial_block(z, p, i);
                assert_eq!(b.start, next);
                assert!(b.end - b.start <= z / p as u64 + 1);
                next = b.end;
            }
            assert_eq!(next, z);
        }
    }

    #[test]
    fn shares_sum_to_the_remaining_ids_and_follow_speed() {
        let speeds = [50.0, 25.0, 12.5, 5.0, 50.0, 25.0, 12.5, 5.0];
        let reps = reports(6000, &[50, 25, 12, 5, 50, 25, 12, 5], &speeds);
        let plan = rescale(&reps);
        let y: u64 = plan.shares.iter().sum();
        assert_eq!(y, 6000 - 184);
        let vsum: f64 = speeds.iter().sum();
        for (i, &v) in speeds.iter().enumerate() {
            let exact = y as f64 * v / vsum;
            assert!((plan.shares[i] as f64 - exact).abs() < 1.0, "rank {i}");
        }
        assert!((plan.duration - y as f64 / vsum).abs() < 1e-12);
        assert_partition(&reps, &plan);
    }

    #[test]
    fn fewer_ids_than_ranks() {
        let reps = reports(3, &[0, 1, 0, 0, 0], &[0.0, 10.0, 0.0, 0.0, 0.0]);
        let plan = rescale(&reps);
        assert_eq!(plan.shares.iter().sum::<u64>(), 2);
        assert_eq!(plan.shares[1], 2, "only the rank with a speed gets work");
        assert_partition(&reps, &plan);
    }

    #[test]
    fn one_rank_keeps_its_tail() {
        let reps = reports(100, &[7], &[3.0]);
        let plan = rescale(&reps);
        assert_eq!(plan.quotas, vec![IdSet::from_range(7..100)]);
        assert!((plan.duration - 93.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_rank_with_zero_speed_gets_nothing_and_all_zero_splits_equally() {
        let reps = reports(1000, &[10, 0, 10], &[10.0, 0.0, f64::NAN]);
        let plan = rescale(&reps);
        assert_eq!(plan.shares[1], 0);
        assert_eq!(plan.shares[2], 0);
        assert_eq!(plan.shares[0], 980);
        assert_partition(&reps, &plan);

        let reps = reports(1000, &[0, 0, 0], &[0.0, 0.0, 0.0]);
        let plan = rescale(&reps);
        assert_eq!(plan.shares, vec![334, 333, 333]);
        assert_eq!(plan.duration, 0.0);
        assert_partition(&reps, &plan);
    }

    #[test]
    fn reserves_left_at_the_last_report_are_worked_in() {
        // Two ranks of speed 10 kept 10 ids each. Rank 0 reported at 1 s
        // and has used its reserve by the last report (rank 1's, at 2 s);
        // rank 1 still has all of it: rank 1 gets 10 ids fewer, and both
        // end 10.5 s after the last report.
        let mut reps = reports(220, &[0, 0], &[10.0, 10.0]);
        for (r, at) in reps.iter_mut().zip([1.0, 2.0]) {
            r.tail.start += 10;
            (r.reserved, r.at) = (10, at);
        }
        let plan = rescale(&reps);
        assert_eq!(plan.shares, vec![105, 95]);
        assert!((plan.duration - 10.5).abs() < 1e-12);
        assert_partition(&reps, &plan);
        // A reserve that lasts beyond the common end: that rank gets nothing.
        reps[1].reserved = 110;
        reps[1].tail.start = 220;
        let plan = rescale(&reps);
        assert_eq!(plan.shares, vec![100, 0]);
        assert!((plan.duration - 10.0).abs() < 1e-12);
        assert_partition(&reps, &plan);
    }

    #[test]
    fn huge_totals_are_split_exactly() {
        let z = 1_000_000_000_000u64;
        let speeds = [1.0, 3.0, 7.0, 1e-9, 2.5];
        let reps = reports(z, &[1, 2, 3, 4, 5], &speeds);
        let plan = rescale(&reps);
        assert_eq!(plan.shares.iter().sum::<u64>(), z - 15);
        let vsum: f64 = speeds.iter().sum();
        for (i, &v) in speeds.iter().enumerate() {
            let exact = (z - 15) as f64 * v / vsum;
            // 2^-40 relative resolution of the integer weights.
            assert!(
                (plan.shares[i] as f64 - exact).abs() <= 1.0 + exact * 1e-11,
                "rank {i}"
            );
        }
        assert_partition(&reps, &plan);
    }

    #[test]
    fn largest_remainder_breaks_ties_by_rank() {
        assert_eq!(largest_remainder(2, &[1.0, 1.0, 1.0]), vec![1, 1, 0]);
        assert_eq!(largest_remainder(0, &[1.0, 2.0]), vec![0, 0]);
        assert_eq!(largest_remainder(7, &[]), Vec::<u64>::new());
    }
}
