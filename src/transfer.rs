//! Host transfers (pure): in a large job, the hosts' drift from
//! Algorithm 1's plan moves between hosts in MPI messages, planned from the
//! termination waves, instead of through SOS files on the shared storage
//! (DESIGN §6: at scale the shared server's load matters more than a
//! helper's latency).
//!
//! Every wave tells every rank the same figures: each host's ids left,
//! summed speed and excess (the ids its ranks will not have computed by
//! the job's forecast end, [`crate::verdict::Job::hosts`],
//! [`crate::verdict::Job::excess`]). From them every rank computes the
//! same [`plan`] ([`planned`] says when): a host that will end later than
//! the job's forecast end by more than [`PLAN_THRESHOLD`] gives part of its
//! excess to hosts that will end earlier, nearest first (the same site,
//! then elsewhere, as mLB prefers). No message is needed to agree on it.
//! Each rank of a giving host then sends its part, in proportion to its
//! own excess, to a rank of the receiving host ([`sends`]); the receivers
//! take the ids as their own, and inside each host the host's board
//! (node-local SOS files) evens them out. The shared storage sees none of
//! it: its load no longer grows with the ranks.
//!
//! The plans are only as fresh as the waves, and a wave advances only when
//! every rank calls MPI: 16 ranks of fluct16 complete one about every
//! 0.85 s in the emulator on two cores, 0.55 s in the simulator, whose
//! waves wait for the ranks' calls as real ones do (`waves=` of both
//! result lines). With waves of 1 s the
//! simulator keeps 1,024 ranks of fluct16's speeds at 0.948, but a host of
//! grid64s that slows to half lost 0.94 → 0.87 (the shared board's
//! protocol 0.945): the protocol on the shared storage reacts to a lasting
//! slowdown between waves. Between plans the ranks of a giving host
//! therefore send what their own excess grew by to the plan's receivers
//! (`Shedding` in [`crate::policy`]): 0.87 → 0.91 there.
//!
//! A transfer is an `MPI_Issend` of the ids' ranges to a rank of the
//! receiving host. The ids belong to the message meanwhile: no wave ends the
//! job while ids travel, and `finalize` receives what is still on its way
//! after a stop or a failure. Transfers are logged (`transfer-sent`,
//! `transfer-received`, [`crate::monitor`]) and counted as help.
//!
//! ```
//! use soslb::transfer::{plan, Move};
//! // Two hosts of equal speed: host 0 owns 300 ids, host 1 owns 100; the
//! // job ends when both have done 200 each (2 s at 100 ids/s).
//! let moves = plan(&[(300, 100.0), (100, 100.0)], |_| 0, 2.0, 0.1, 1.0);
//! assert_eq!(moves, vec![Move { from: 0, to: 1, ids: 100 }]);
//! ```

use crate::config::Mode;
use crate::cost::{PLAN_FRACTION, PLAN_PERIOD, PLAN_THRESHOLD};
use crate::params::Params;
use crate::topology::Topology;
pub use crate::verdict::Move;
use crate::verdict::{Job, bit, hosts_end};

/// Whether the hosts of a job trade through MPI: in a large job
/// ([`Params::large_job`]) on more than one host, with host boards, in mode
/// Full. Then every SOS stays on its host's board, and the shared storage
/// carries no balancing at all.
pub fn on(topology: &Topology, params: &Params) -> bool {
    params.host_board
        && params.mode == Mode::Full
        && topology.ranks() >= params.large_job
        && topology.hosts() > 1
}

/// The moves planned at the wave `job` where hosts trade ([`on`]), when a
/// plan is due: [`PLAN_PERIOD`] seconds after the plan of the wave as of
/// `last` (its [`Job::at`]; a plan at the first wave), and at every wave
/// from [`PLAN_PERIOD`] seconds before the job's forecast end. Every rank sees the
/// same waves, so every rank plans at the same ones.
pub fn planned(job: &Job, topology: &Topology, params: &Params, last: f64) -> Option<Vec<Move>> {
    let left = hosts_end(&job.hosts, 0..job.hosts.len());
    let due = job.at >= last + PLAN_PERIOD || left <= PLAN_PERIOD;
    if !on(topology, params) || !left.is_finite() || !due {
        return None;
    }
    Some(plan(
        &job.hosts,
        |h| topology.site_of_host(h),
        left,
        PLAN_THRESHOLD,
        PLAN_FRACTION,
    ))
}

/// The moves that bring the hosts nearer to a common end, from the per-host
/// figures `(ids left, speed)` of a wave, `left` seconds before the job's
/// forecast end (as of the figures' time). A host later than that end by
/// more than `threshold` seconds at its speed gives `fraction` of its
/// excess (the ids it will not have done by then); an earlier host takes
/// up to `fraction` of what it could still do by then (one late host's
/// excess spread over many hosts makes each of them early by little). Givers and takers are matched greedily, latest with earliest,
/// first within each site (`site_of` a host), then across sites. Hosts
/// without a measured speed neither give nor take. Deterministic: the same
/// figures give the same moves on every rank.
pub fn plan(
    figures: &[(u64, f64)],
    site_of: impl Fn(usize) -> usize,
    left: f64,
    threshold: f64,
    fraction: f64,
) -> Vec<Move> {
    if left.is_nan() || left <= 0.0 || fraction.is_nan() || fraction <= 0.0 {
        return Vec::new();
    }
    // (lateness in seconds, host, ids to give or take)
    let mut givers = Vec::new();
    let mut takers = Vec::new();
    for (h, &(ids, speed)) in figures.iter().enumerate() {
        if speed.is_nan() || speed <= 0.0 {
            continue;
        }
        let excess = ids as f64 - speed * left;
        let late = excess / speed;
        let amount = (fraction * excess.abs()).floor() as u64;
        if amount == 0 {
            continue;
        }
        if late > threshold {
            givers.push((late, h, amount));
        } else if late < 0.0 {
            takers.push((late, h, amount));
        }
    }
    // Latest givers and earliest takers first; ties by host number.
    givers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    takers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut moves = Vec::new();
    let mut matched = |same_site: bool| {
        for g in givers.iter_mut() {
            for t in takers.iter_mut() {
                if g.2 == 0 {
                    break;
                }
                if t.2 == 0 || (same_site && site_of(g.1) != site_of(t.1)) {
                    continue;
                }
                let ids = g.2.min(t.2);
                g.2 -= ids;
                t.2 -= ids;
                moves.push(Move {
                    from: g.1,
                    to: t.1,
                    ids,
                });
            }
        }
    };
    matched(true);
    matched(false);
    moves
}

/// What rank `me` sends for the moves of the wave `job`, with `excess`
/// ids beyond the job's forecast end, on a host whose ranks had
/// [`Job::excess`] such ids at the wave: for each move from its host, its
/// part in proportion to its excess, to a rank of the receiving host
/// (the one in the same place, modulo their numbers, in the order: ranks
/// without an open SOS first, fast ones before slow ones, free ones before
/// busy ones).
/// `(to rank, ids)`, none empty.
pub fn sends(job: &Job, topology: &Topology, me: usize, excess: u64) -> Vec<(usize, u64)> {
    let host = topology.host_index(me);
    let host_excess = job.excess.get(host).copied().unwrap_or(0);
    let place = topology.members(host).iter().position(|&r| r == me);
    let (Some(place), true) = (place, host_excess > 0) else {
        return Vec::new();
    };
    let mut budget = excess;
    job.moves
        .iter()
        .filter(|m| m.from == host)
        .filter_map(|m| {
            let part = (m.ids as f64 * excess as f64 / host_excess as f64).round() as u64;
            let n = part.min(budget);
            budget -= n;
            let mut to = topology.members(m.to).to_vec();
            to.sort_by_key(|&r| {
                let (late, fast) = (bit(&job.sos_ranks, r), bit(&job.fast_ranks, r));
                (late, !fast, !bit(&job.free_ranks, r), r)
            });
            (n > 0 && !to.is_empty()).then(|| (to[place % to.len()], n))
        })
        .collect()
}

/// A giving rank's host transfers between two plans: the plans are only as
/// fresh as the waves, and a host that slows down as a whole shows in its
/// ranks' speeds first. Until the next plan, a rank whose host gave at the
/// last one sends what its own excess grew by since (by more than
/// [`PLAN_THRESHOLD`] of its work) to the same receivers, in
/// the same parts, up to as much again as the plan sent.
#[derive(Clone, Debug, Default)]
pub struct Shedding {
    /// The receivers and their parts.
    to: Vec<(usize, f64)>,
    /// The rank's excess right after the plan's sends.
    from: f64,
    /// Ids it may still shed before the next plan.
    left: f64,
}

impl Shedding {
    /// After a plan that sends `sends` from an excess of `excess`.
    pub fn after(sends: &[(usize, u64)], excess: u64) -> Shedding {
        let total: u64 = sends.iter().map(|s| s.1).sum();
        Shedding {
            to: (sends.iter())
                .map(|&(to, n)| (to, n as f64 / total.max(1) as f64))
                .collect(),
            from: excess.saturating_sub(total) as f64,
            left: total as f64,
        }
    }

    /// The sends of a rank whose excess is now `excess` at speed `v`:
    /// none unless it grew since the plan by more than the threshold's work.
    pub fn grown(&mut self, excess: u64, v: f64) -> Vec<(usize, u64)> {
        let grown = (excess as f64 - self.from).min(self.left);
        if self.to.is_empty() || grown <= v * PLAN_THRESHOLD {
            return Vec::new();
        }
        self.left -= grown;
        let sends = self
            .to
            .iter()
            .map(|&(to, part)| (to, (grown * part).round() as u64));
        sends.filter(|s| s.1 > 0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_moves_between_hosts_that_end_together() {
        let figures = [(200, 100.0), (100, 50.0), (20, 10.0)];
        assert!(plan(&figures, |_| 0, 2.0, 0.25, 1.0).is_empty());
    }

    #[test]
    fn a_late_host_gives_its_excess_to_the_early_ones_latest_first() {
        // Job end: 2 s. Host 0 ends at 4 s (200 late ids), host 1 at 3 s
        // (100), host 2 at 0 s (room for 200), host 3 at 0 s (room for 200).
        let figures = [(400, 100.0), (300, 100.0), (0, 100.0), (0, 100.0)];
        let moves = plan(&figures, |_| 0, 2.0, 0.25, 1.0);
        assert_eq!(
            moves,
            vec![
                Move {
                    from: 0,
                    to: 2,
                    ids: 200
                },
                Move {
                    from: 1,
                    to: 3,
                    ids: 100
                },
            ]
        );
        // Given equals taken, and nobody gives what it does not have.
        let given: u64 = moves.iter().map(|m| m.ids).sum();
        assert_eq!(given, 300);
    }

    #[test]
    fn hosts_within_the_threshold_and_without_speed_stay_put() {
        let figures = [(220, 100.0), (180, 100.0), (500, 0.0)];
        assert!(plan(&figures, |_| 0, 2.0, 0.25, 1.0).is_empty());
    }

    #[test]
    fn the_same_site_goes_first() {
        // Hosts 0, 1 on site 0; hosts 2, 3 on site 1. Host 0 is late by
        // 100 ids; host 3 is earlier than host 1, yet host 1 takes them.
        let figures = [(300, 100.0), (100, 100.0), (200, 100.0), (0, 100.0)];
        let moves = plan(&figures, |h| h / 2, 2.0, 0.25, 1.0);
        assert_eq!(
            moves[0],
            Move {
                from: 0,
                to: 1,
                ids: 100
            }
        );
        assert_eq!(moves.len(), 1);
    }

    #[test]
    fn a_fraction_moves_part_of_the_excess() {
        let moves = plan(&[(300, 100.0), (100, 100.0)], |_| 0, 2.0, 0.25, 0.5);
        assert_eq!(moves[0].ids, 50);
    }

    #[test]
    fn each_rank_sends_its_part_to_its_place_on_the_other_host() {
        let topology = Topology::laid_out(8, 4, 0);
        let mut job = Job {
            moves: std::sync::Arc::new(vec![Move {
                from: 0,
                to: 1,
                ids: 100,
            }]),
            excess: std::sync::Arc::new(vec![400, 0]),
            ..Job::default()
        };
        // Rank 2 has a quarter of its host's 400 ids of excess: a quarter
        // of 100, to the third rank of host 1.
        assert_eq!(sends(&job, &topology, 2, 100), vec![(6, 25)]);
        // Host 1's ranks give nothing.
        assert!(sends(&job, &topology, 6, 100).is_empty());
        // Never more than the rank's excess.
        assert_eq!(sends(&job, &topology, 1, 10), vec![(5, 3)]);
        assert_eq!(sends(&job, &topology, 1, 400)[0].1, 100);
        // Receivers without an open SOS first, fast ones first: rank 4 has
        // an SOS open, ranks 5 and 7 are fast.
        job.sos_ranks = std::sync::Arc::new(vec![1 << 4]);
        job.fast_ranks = std::sync::Arc::new(vec![1 << 5 | 1 << 7]);
        let to: Vec<usize> = (0..4)
            .map(|r| sends(&job, &topology, r, 100)[0].0)
            .collect();
        assert_eq!(to, vec![5, 7, 6, 4]);
    }

    #[test]
    fn a_giver_sheds_what_its_excess_grew_by_to_the_plans_receivers_up_to_the_plan() {
        // The plan sent 100 ids, 3 parts to rank 7 and 1 to rank 9; the
        // rank's excess was 150 before it. At 10 ids a second the threshold
        // is 1 id of work.
        let mut s = Shedding::after(&[(7, 75), (9, 25)], 150);
        assert!(s.grown(50, 10.0).is_empty(), "no growth");
        assert!(s.grown(51, 10.0).is_empty(), "within the threshold");
        assert_eq!(s.grown(90, 10.0), vec![(7, 30), (9, 10)]);
        // Never more than the plan sent, in all.
        assert_eq!(s.grown(200, 10.0), vec![(7, 45), (9, 15)]);
        assert!(s.grown(300, 10.0).is_empty());
        // A rank that gave nothing sheds nothing.
        assert!(Shedding::default().grown(1000, 10.0).is_empty());
    }
}
