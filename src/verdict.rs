//! Termination with a verdict (DESIGN §5), the pure part.
//!
//! The job is over when all `Z` ids have been computed, when a rank asked to
//! stop, or when any rank has failed; every rank learns the same verdict. The
//! MPI shell runs *waves*: non-blocking reductions of every rank's [`Status`]
//! (`MPI_SUM` over [`Words::sums`], `MPI_BOR` over [`Words::bits`]). Idle
//! ranks start a new wave as soon as the previous one completes; busy ranks
//! join at their checks. Every rank feeds the same reduced words to its
//! [`Judge`], so every rank reaches the same verdict at the same wave.
//!
//! "Every rank was idle once" does not end the job: idle ranks keep serving
//! SOS files (including the ones helpers post for ids they took) until the
//! completed count reaches `Z`. If it never can (ids lost to a bug or a
//! destroyed file), two waves in a row in which no rank owns work and the
//! count did not move end the job with [`Verdict::Lost`] instead of a hang.
//!
//! Idle ranks test the wave in flight every 0.5 to 2 ms, sleeping in
//! between; busy ranks join at their checks. The
//! warm-up exchange carries the same flags, so a rank that leaves during
//! the warm-up ends the job too. At finalize a rank whose SOS is still open
//! looks at it once more (helpers may have drained it after its last look),
//! so that the summary's *given* counts every claim; then the ranks check
//! that they added the same number of observables per realisation, and
//! [`Audit`] the ids: the count and two power sums of the ids computed on
//! all ranks must be those of `0..total`. A difference is an audit error on
//! every rank, with the per-rank counts.

use crate::topology::{IdleMap, Topology};
use std::sync::Arc;

/// One rank's contribution to a termination wave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Realisations this rank has completed.
    pub completed: u64,
    /// The rank owns work: ids to compute, a chunk handed out, an open SOS.
    pub busy: bool,
    /// The rank failed (its message follows the verdict).
    pub failed: bool,
    /// The program asked to stop early (`soslb_stop`).
    pub stop: bool,
    /// The rank's speed in thousandths of a realisation per second (summed
    /// over the ranks, it dates the job's forecast end).
    pub speed_milli: u64,
    /// The rank's speed times the time it joined the wave (seconds since
    /// the start), in thousandths of a realisation (whole realisations
    /// would date a job of minute-long realisations by tens of seconds
    /// wrong). Summed over the ranks and divided by the summed speed, it is
    /// the time the wave's counts are as of: busy ranks join at their
    /// checks, up to an interval before the wave completes.
    pub speed_time_milli: u64,
    /// An SOS of this rank is open.
    pub sos_open: bool,
    /// That SOS is on the host's board, which only the host's ranks reach.
    pub sos_on_host: bool,
    /// The rank is at least as fast as its host's mean at the last wave
    /// (host transfers go to such ranks first).
    pub fast: bool,
    /// The rank is done with its own quota (idle, or computing help), or
    /// will be within one grace, or holds a share taken early
    /// ([`crate::policy::Rank::is_free`]). Free ranks near an SOS are its
    /// first helpers (a farther helper's grace waits for them).
    pub free: bool,
    /// Ids the rank owns and has not computed (summed per host, with the
    /// speeds, they tell whether a host as a whole will be late).
    pub remaining: u64,
    /// Ids the rank will not have computed by the job's forecast end at
    /// its speed (summed per host, they size each rank's part of a host
    /// transfer, [`crate::transfer::sends`]).
    pub excess: u64,
}

impl Status {
    /// The flags as one word (for the warm-up exchange, which gathers them).
    pub fn flags(&self) -> u64 {
        self.failed as u64 | (self.stop as u64) << 1 | (self.busy as u64) << 2
    }

    /// The status of `completed` ids and the word of [`Status::flags`].
    pub fn from_flags(completed: u64, flags: u64) -> Status {
        Status {
            completed,
            failed: flags & 1 != 0,
            stop: flags & 2 != 0,
            busy: flags & 4 != 0,
            speed_milli: 0,
            speed_time_milli: 0,
            sos_open: false,
            sos_on_host: false,
            fast: false,
            free: false,
            remaining: 0,
            excess: 0,
        }
    }
}

/// The outcome of a job, the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// All ids were computed.
    Done,
    /// A rank asked to stop: the realisations completed are the result.
    Stopped,
    /// Ranks failed; `first` is the lowest of them, whose message every
    /// rank reports.
    Failed {
        /// The lowest failed rank.
        first: usize,
        /// Every failed rank.
        ranks: Vec<usize>,
    },
    /// No rank owns work, yet only `completed` of the ids were computed.
    Lost {
        /// Realisations completed over all ranks.
        completed: u64,
    },
}

/// What a wave tells every rank of the whole job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Job {
    /// Realisations completed over all ranks.
    pub completed: u64,
    /// The ranks' summed speed, realisations per second.
    pub speed: f64,
    /// The time the counts are as of (seconds since the start): the times
    /// the ranks joined the wave, weighted by their speeds. The job's
    /// forecast end is `at + (total − completed) / speed`.
    pub at: f64,
    /// Ranks that own no work (helpers looking for an SOS), per host and
    /// site (shared: the simulator hands one map to every rank).
    pub idle: Arc<IdleMap>,
    /// Open SOS.
    pub open: u64,
    /// The free ranks' summed speed ([`Status::free`]): with their number,
    /// the speed of a helper to come.
    pub free_speed: f64,
    /// Each host's ids left (owned and not computed) and summed speed,
    /// realisations per second, by [`Topology::host_index`].
    pub hosts: Arc<Vec<(u64, f64)>>,
    /// Each host's ids its ranks will not have computed by the job's
    /// forecast end, summed over the ranks ([`Status::excess`]).
    pub excess: Arc<Vec<u64>>,
    /// Bitmaps of the free ranks ([`Status::free`]) and of the ranks with
    /// an open SOS (empty when not known).
    pub free_ranks: Arc<Vec<u64>>,
    /// See `free_ranks`.
    pub sos_ranks: Arc<Vec<u64>>,
    /// Bitmap of the ranks at least as fast as their host's mean
    /// ([`Status::fast`]).
    pub fast_ranks: Arc<Vec<u64>>,
    /// SOS open on each host's board, by [`Topology::host_index`] (empty
    /// when not counted: all are taken as reachable).
    pub host_open: Arc<Vec<u64>>,
    /// The host transfers planned from this wave's figures
    /// ([`crate::transfer::planned`]; empty when none is due).
    pub moves: Arc<Vec<Move>>,
}

/// Whether rank `r`'s bit is set in the bitmap `map`.
pub fn bit(map: &[u64], r: usize) -> bool {
    map.get(r / 64).is_some_and(|w| w >> (r % 64) & 1 == 1)
}

impl Job {
    /// Open SOS that a rank of host `h` can reach: those on the shared
    /// board and on its own host's board. (Counted as reachable, the SOS
    /// on other hosts' boards sent ranks looking ahead on slow storage to
    /// a search that found nothing, and their next look came a pace of
    /// several seconds later.)
    pub fn reachable_open(&self, h: usize) -> u64 {
        let elsewhere: u64 =
            self.host_open.iter().sum::<u64>() - self.host_open.get(h).copied().unwrap_or(0);
        self.open.saturating_sub(elsewhere)
    }

    /// When host `h`'s ranks together will have computed the ids they own,
    /// at their summed speed (infinite when it is not known).
    pub fn host_end(&self, h: usize) -> f64 {
        match self.hosts.get(h) {
            Some(&(0, _)) => self.at,
            Some(&(left, v)) if v > 0.0 => self.at + left as f64 / v,
            _ => f64::INFINITY,
        }
    }
}

/// Whether the hosts numbered `hosts` will be late as a whole, at the
/// per-host figures `figures` ([`Job::hosts`]), by more than `slack`
/// seconds of their summed speed, if the job's forecast end comes `left`
/// seconds after the figures' time. Hosts with nothing left never are.
pub fn hosts_late(
    figures: &[(u64, f64)],
    hosts: impl IntoIterator<Item = usize>,
    left: f64,
    slack: f64,
) -> bool {
    let (ids, speed) = hosts_sums(figures, hosts);
    ids > 0.0 && ids - speed * left > speed * slack
}

/// Seconds from the figures' time until the hosts numbered `hosts` finish
/// their ids left at their summed speed, at the per-host figures `figures`
/// ([`Job::hosts`]): 0 with nothing left, infinite with no speed.
pub fn hosts_end(figures: &[(u64, f64)], hosts: impl IntoIterator<Item = usize>) -> f64 {
    match hosts_sums(figures, hosts) {
        (0.0, _) => 0.0,
        (ids, speed) if speed > 0.0 => ids / speed,
        _ => f64::INFINITY,
    }
}

/// The ids left and the speed of the hosts numbered `hosts`, summed
/// (hosts the figures do not know count for nothing).
fn hosts_sums(figures: &[(u64, f64)], hosts: impl IntoIterator<Item = usize>) -> (f64, f64) {
    hosts
        .into_iter()
        .filter_map(|h| figures.get(h))
        .fold((0.0, 0.0), |(n, v), &(ids, speed)| {
            (n + ids as f64, v + speed)
        })
}

/// Words of [`Words::sums`] before the per-host ones.
const FIXED: usize = 6;

/// Words of [`Words::sums`] per host.
const PER_HOST: usize = 4;

/// Bitmaps of [`Words::bits`].
const BITMAPS: usize = 5;

/// The words of one wave: `sums` are added, `bits` are or-ed over the ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Words {
    /// `[completed, stop requests, speed in thousandths of a realisation
    /// per second, open SOS, speed times time of joining in thousandths,
    /// speed of the free ranks in thousandths]`,
    /// then for each host its ids left, its speed in thousandths, the SOS
    /// open on its board and its ranks' excess.
    pub sums: Vec<u64>,
    /// Bitmaps of failed, busy and free ranks ([`Status::free`]), of
    /// ranks with an open SOS and of fast ones ([`Status::fast`]), `⌈P/64⌉`
    /// words each.
    pub bits: Vec<u64>,
}

impl Words {
    /// Words of no rank (the identity of the reduction) on `ranks` ranks
    /// and `hosts` hosts.
    pub fn zero(ranks: usize, hosts: usize) -> Words {
        Words {
            sums: vec![0; FIXED + PER_HOST * hosts],
            bits: vec![0; BITMAPS * ranks.div_ceil(64)],
        }
    }

    /// Words of no rank, as long as `other`.
    pub fn zero_like(other: &Words) -> Words {
        Words {
            sums: vec![0; other.sums.len()],
            bits: vec![0; other.bits.len()],
        }
    }

    /// The contribution of rank `me` of `topology`.
    pub fn of(status: &Status, me: usize, topology: &Topology) -> Words {
        let mut w = Words::zero(topology.ranks(), topology.hosts());
        w.add(status, me, topology);
        w
    }

    /// Add the contribution of rank `me` of `topology` (the reduction of
    /// one rank's words, done in place).
    pub fn add(&mut self, status: &Status, me: usize, topology: &Topology) {
        let fixed = [
            status.completed,
            status.stop as u64,
            status.speed_milli,
            status.sos_open as u64,
            status.speed_time_milli,
            if status.free { status.speed_milli } else { 0 },
        ];
        let h = FIXED + PER_HOST * topology.host_index(me);
        let host = [
            status.remaining,
            status.speed_milli,
            status.sos_on_host as u64,
            status.excess,
        ];
        let (head, hosts) = self.sums.split_at_mut(FIXED);
        let sums = head
            .iter_mut()
            .chain(&mut hosts[h - FIXED..h - FIXED + PER_HOST]);
        for (a, b) in sums.zip(fixed.into_iter().chain(host)) {
            *a = a.wrapping_add(b);
        }
        let words = topology.ranks().div_ceil(64);
        let bit = 1u64 << (me % 64);
        let maps = [
            status.failed,
            status.busy,
            status.free,
            status.sos_open,
            status.fast,
        ];
        for (k, set) in maps.into_iter().enumerate() {
            if set {
                self.bits[k * words + me / 64] |= bit;
            }
        }
    }

    /// What the words say of the job: realisations completed, the summed
    /// speed (realisations per second), and the ranks of `topology` that
    /// own no work (idle helpers).
    pub fn job(&self, topology: &Topology) -> Job {
        let words = self.bits.len() / BITMAPS;
        let map = |k: usize| &self.bits[k * words..(k + 1) * words];
        let (busy, free) = (map(1), map(2));
        let ranks = 0..topology.ranks();
        let idle = ranks.clone().filter(|&r| !bit(busy, r)).count();
        let per_host = self.sums[FIXED..].chunks_exact(PER_HOST);
        let (hosts, host_open) = per_host
            .clone()
            .map(|h| ((h[0], h[1] as f64 / 1000.0), h[2]))
            .unzip();
        let excess = per_host.map(|h| h[3]).collect();
        Job {
            completed: self.sums[0],
            speed: self.sums[2] as f64 / 1000.0,
            at: if self.sums[2] > 0 {
                self.sums[4] as f64 / self.sums[2] as f64
            } else {
                0.0
            },
            idle: Arc::new(topology.idle_map(idle, ranks.filter(|&r| bit(free, r)))),
            open: self.sums[3],
            free_speed: self.sums[5] as f64 / 1000.0,
            hosts: Arc::new(hosts),
            excess: Arc::new(excess),
            free_ranks: Arc::new(free.to_vec()),
            sos_ranks: Arc::new(map(3).to_vec()),
            fast_ranks: Arc::new(map(4).to_vec()),
            host_open: Arc::new(host_open),
            moves: Arc::default(),
        }
    }

    /// Add the words of other ranks (the reduction, done locally).
    pub fn merge(&mut self, other: &Words) {
        for (a, b) in self.sums.iter_mut().zip(&other.sums) {
            *a = a.wrapping_add(*b);
        }
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= b;
        }
    }
}

/// The ranks whose bit is set in `map`.
fn ranks_in(map: &[u64], ranks: usize) -> Vec<usize> {
    (0..ranks).filter(|&r| bit(map, r)).collect()
}

/// Decides the verdict from the reduced words of successive waves.
#[derive(Clone, Debug)]
pub struct Judge {
    total: u64,
    ranks: usize,
    /// The completed count of the last wave if no rank was busy in it.
    idle_count: Option<u64>,
    /// The ranks busy at the last wave.
    busy: Vec<usize>,
}

impl Judge {
    /// A judge of a job of `total` ids over `ranks` ranks.
    pub fn new(total: u64, ranks: usize) -> Judge {
        Judge {
            total,
            ranks,
            idle_count: None,
            busy: Vec::new(),
        }
    }

    /// The verdict after a wave whose reduced words are `w`, if there is one.
    /// Failure wins over a stop, a stop over completion.
    pub fn judge(&mut self, w: &Words) -> Option<Verdict> {
        let words = self.ranks.div_ceil(64);
        let failed = ranks_in(&w.bits[..words.min(w.bits.len())], self.ranks);
        self.busy = ranks_in(w.bits.get(words..2 * words).unwrap_or_default(), self.ranks);
        let [completed, stops, ..] = w.sums[..] else {
            return None;
        };
        if let Some(&first) = failed.first() {
            return Some(Verdict::Failed {
                first,
                ranks: failed,
            });
        }
        if stops > 0 {
            return Some(Verdict::Stopped);
        }
        if completed >= self.total {
            return Some(Verdict::Done);
        }
        if !self.busy.is_empty() {
            self.idle_count = None;
            return None;
        }
        // No rank owns work: ids may still be in flight between an owner that
        // joined idle and a helper that joined before it took them, but such a
        // helper is busy or has completed more at the next wave.
        if self.idle_count.replace(completed) == Some(completed) {
            return Some(Verdict::Lost { completed });
        }
        None
    }

    /// The ranks that owned work at the last wave (to name who is awaited).
    pub fn busy(&self) -> &[usize] {
        &self.busy
    }
}

/// The ids a rank computed, as a count and two power sums (mod 2^64), for
/// the audit at finalize: summed over the ranks they must equal those of
/// `0..Z` ([`Audit::of_all`]). An id computed twice and another never
/// would have to agree in both sums to go unseen, which no two pairs of
/// distinct ids do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Ids computed.
    pub count: u64,
    /// Their sum, mod 2^64.
    pub sum: u64,
    /// The sum of their squares, mod 2^64.
    pub sum_sq: u64,
}

/// `Σ_{i<n} i` and `Σ_{i<n} i²`, mod 2^64 (exact divisions first).
fn power_sums_below(n: u64) -> (u64, u64) {
    let (n, m) = (n as u128, (n as u128).wrapping_sub(1));
    let sum = if n % 2 == 0 {
        (n / 2).wrapping_mul(m)
    } else {
        n.wrapping_mul(m / 2)
    };
    // n(n-1)(2n-1)/6: take the 2 and the 3 out of the factors that hold them.
    let mut f = [m, n, (2 * n).wrapping_sub(1)];
    if n == 0 {
        return (0, 0);
    }
    let two = if f[0] % 2 == 0 { 0 } else { 1 };
    f[two] /= 2;
    let three = (0..3).find(|&i| f[i] % 3 == 0).unwrap_or(0);
    f[three] /= 3;
    let sq = f[0].wrapping_mul(f[1]).wrapping_mul(f[2]);
    (sum as u64, sq as u64)
}

impl Audit {
    /// Account the ids of `range`.
    #[inline]
    pub fn add(&mut self, range: std::ops::Range<u64>) {
        let (s0, q0) = power_sums_below(range.start);
        let (s1, q1) = power_sums_below(range.end);
        self.count += range.end - range.start;
        self.sum = self.sum.wrapping_add(s1.wrapping_sub(s0));
        self.sum_sq = self.sum_sq.wrapping_add(q1.wrapping_sub(q0));
    }

    /// The audit of every id of `0..total`, each once.
    pub fn of_all(total: u64) -> Audit {
        let mut a = Audit::default();
        a.add(0..total);
        a
    }

    /// The audit of several ranks together.
    pub fn merge(&mut self, other: &Audit) {
        self.count = self.count.wrapping_add(other.count);
        self.sum = self.sum.wrapping_add(other.sum);
        self.sum_sq = self.sum_sq.wrapping_add(other.sum_sq);
    }
}

/// Ids one host gives another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The giving host ([`Topology::host_index`]).
    pub from: usize,
    /// The receiving host.
    pub to: usize,
    /// How many ids.
    pub ids: u64,
}

/// Whether a rank joins a new termination wave at `now`: at once when it
/// is idle or waits inside the library; when `busy` computing, at its
/// checks (from `due` on), and when its own work `ends_soon` (before its
/// next check), one interval later, by when it is idle. Joined busy, the
/// last rank to finish made the job's last wave fail, and the verdict
/// waited a wave more (emulator, sites16-one: 78 ms from the last
/// realisation to the end of the run, 58 ms with this).
pub fn joins_wave(now: f64, busy: bool, ends_soon: bool, due: f64, interval: f64) -> bool {
    match (busy, ends_soon) {
        (false, _) => true,
        (true, false) => now >= due,
        (true, true) => now >= due + interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` ranks on one host.
    fn flat(n: usize) -> Topology {
        Topology::new(vec!["m".into(); n], &crate::topology::Sites::Single)
    }

    fn wave(statuses: &[Status]) -> Words {
        wave_on(statuses, &flat(statuses.len()))
    }

    /// The reduced words of `statuses`, rank by rank, on `top`.
    fn wave_on(statuses: &[Status], top: &Topology) -> Words {
        statuses.iter().enumerate().fold(
            Words::zero(statuses.len(), top.hosts()),
            |mut w, (r, s)| {
                w.merge(&Words::of(s, r, top));
                w
            },
        )
    }

    fn busy(completed: u64) -> Status {
        Status {
            completed,
            busy: true,
            ..Status::default()
        }
    }

    fn idle(completed: u64) -> Status {
        Status {
            completed,
            free: true,
            ..Status::default()
        }
    }

    #[test]
    fn a_rank_reaches_the_shared_board_and_its_own_hosts_board_only() {
        let top = Topology::new(
            ["a", "a", "b", "b"].map(String::from).to_vec(),
            &crate::topology::Sites::Single,
        );
        let shared = Status {
            sos_open: true,
            ..busy(0)
        };
        let on_host = Status {
            sos_on_host: true,
            ..shared
        };
        let job = wave_on(&[on_host, on_host, shared, busy(0)], &top).job(&top);
        assert_eq!(job.open, 3);
        assert_eq!(*job.host_open, [2, 0]);
        assert_eq!(job.reachable_open(0), 3);
        assert_eq!(job.reachable_open(1), 1);
    }

    #[test]
    fn a_wave_tells_the_job_its_speed_and_idle_ranks_beyond_64() {
        let n = 130;
        let mut s = vec![busy(2); n];
        for r in [0, 64, 65, 129] {
            s[r] = idle(1);
        }
        s[3].speed_milli = 1500;
        s[100].speed_milli = 2500;
        s[7].sos_open = true;
        // 13 virtual hosts of 10 ranks: 0 on host 0, 64 and 65 on host 6.
        let topology = Topology::laid_out(n, 10, 0);
        let job = wave(&s).job(&topology);
        assert_eq!(job.open, 1);
        assert_eq!(job.completed, 2 * 126 + 4);
        assert_eq!(job.speed, 4.0);
        assert_eq!(job.idle.ranks, 4);
        assert_eq!(topology.free_nearer(&job.idle, 61, 1), 2);
        assert_eq!(topology.free_nearer(&job.idle, 11, 1), 0);
    }

    /// A busy rank joins at its check, up to an interval before the wave
    /// completes: the wave's counts are dated by the joining times, weighted
    /// by speed, so the job's forecast end does not slip by that interval.
    #[test]
    fn a_wave_dates_its_counts_by_when_the_ranks_joined() {
        // Speeds 0.001 and 0.003 realisations per second (realisations of
        // minutes), joined at 2 s and 4 s.
        let mut s = [busy(10), busy(30)];
        for (status, (v, t)) in s.iter_mut().zip([(0.001, 2.0), (0.003, 4.0)]) {
            status.speed_milli = (v * 1000.0f64).round() as u64;
            status.speed_time_milli = (v * t * 1000.0f64).round() as u64;
        }
        let job = wave(&s).job(&flat(2));
        assert_eq!((job.completed, job.speed), (40, 0.004));
        assert_eq!(job.at, 3.5);
    }

    #[test]
    fn hosts_are_late_as_a_whole_beyond_a_slack_of_their_speed() {
        // Host 0: 100 ids at 10/s; host 1: 20 ids at 10/s; the job's end
        // 5 s away: host 0 is 5 s late, host 1 early, both together 1 s.
        let figures = [(100, 10.0), (20, 10.0)];
        assert!(hosts_late(&figures, [0], 5.0, 4.9));
        assert!(!hosts_late(&figures, [0], 5.0, 5.0));
        assert!(!hosts_late(&figures, [1], 5.0, 0.0));
        assert!(hosts_late(&figures, [0, 1], 5.0, 0.9));
        assert!(!hosts_late(&figures, [0, 1], 5.0, 1.0));
        // Hosts the figures do not know count for nothing.
        assert!(!hosts_late(&figures, [7], 5.0, 0.0));
        // Nothing left is never late, even past the job's forecast end.
        assert!(!hosts_late(&[(0, 10.0)], [0], -2.0, 1.0));
        assert_eq!(hosts_end(&figures, [0]), 10.0);
        assert_eq!(hosts_end(&figures, [0, 1]), 6.0);
        assert_eq!(hosts_end(&figures, [7]), 0.0);
        assert_eq!(hosts_end(&[(5, 0.0)], [0]), f64::INFINITY);
    }

    #[test]
    fn done_when_the_count_reaches_the_total_and_not_before() {
        let mut j = Judge::new(10, 3);
        assert_eq!(j.judge(&wave(&[busy(3), idle(3), idle(3)])), None);
        assert_eq!(j.busy(), &[0]);
        assert_eq!(
            j.judge(&wave(&[idle(4), idle(3), idle(3)])),
            Some(Verdict::Done)
        );
    }

    #[test]
    fn failure_wins_and_names_the_lowest_failed_rank_even_beyond_64_ranks() {
        let n = 130;
        let mut s = vec![idle(1); n];
        s[129].failed = true;
        s[70].failed = true;
        s[3].stop = true;
        let mut j = Judge::new(n as u64, n);
        assert_eq!(
            j.judge(&wave(&s)),
            Some(Verdict::Failed {
                first: 70,
                ranks: vec![70, 129]
            })
        );
    }

    #[test]
    fn a_stop_ends_the_job_with_work_left() {
        let mut j = Judge::new(100, 2);
        let mut s = [busy(10), busy(5)];
        s[1].stop = true;
        assert_eq!(j.judge(&wave(&s)), Some(Verdict::Stopped));
    }

    #[test]
    fn ids_lost_end_the_job_after_two_idle_waves_without_progress() {
        let mut j = Judge::new(10, 2);
        assert_eq!(j.judge(&wave(&[idle(4), idle(4)])), None);
        // Progress between two idle waves: ids were in flight.
        assert_eq!(j.judge(&wave(&[idle(5), idle(4)])), None);
        // A busy rank in between resets the count.
        assert_eq!(j.judge(&wave(&[busy(5), idle(4)])), None);
        assert_eq!(j.judge(&wave(&[idle(5), idle(4)])), None);
        assert_eq!(
            j.judge(&wave(&[idle(5), idle(4)])),
            Some(Verdict::Lost { completed: 9 })
        );
    }

    #[test]
    fn the_audit_sees_an_id_computed_twice_and_another_missing() {
        let total = 1_000_003u64;
        let mut a = Audit::default();
        a.add(0..500_000);
        a.add(500_000..total);
        assert_eq!(a, Audit::of_all(total));
        // By brute force on a small range.
        let mut b = Audit::default();
        (0..97u64).for_each(|i| b.add(i..i + 1));
        assert_eq!(b.sum, (0..97u64).sum::<u64>());
        assert_eq!(b.sum_sq, (0..97u64).map(|i| i * i).sum::<u64>());
        // 7 twice, 9 never; and two swaps that keep the count and the sum.
        for (twice, never) in [(vec![7], vec![9]), (vec![3, 10], vec![5, 8])] {
            let mut c = Audit::default();
            (0..20u64)
                .filter(|i| !never.contains(i))
                .chain(twice.iter().copied())
                .for_each(|i| c.add(i..i + 1));
            assert_eq!(c.count, 20);
            assert_ne!(c, Audit::of_all(20));
        }
        // Huge ids wrap without a panic.
        let mut h = Audit::default();
        h.add(u64::MAX - 10..u64::MAX);
        assert_eq!(h.count, 10);
    }

    #[test]
    fn flags_round_trip() {
        for bits in 0..8 {
            let s = Status::from_flags(7, bits);
            assert_eq!((s.flags(), s.completed), (bits, 7));
        }
    }

    #[test]
    fn one_rank() {
        let mut j = Judge::new(5, 1);
        assert_eq!(j.judge(&wave(&[busy(2)])), None);
        assert_eq!(j.judge(&wave(&[idle(5)])), Some(Verdict::Done));
    }

    #[test]
    fn a_wave_sums_the_ids_left_and_the_speeds_per_host() {
        // Hosts: ranks 0, 1 on vhost0; 2, 3 on vhost1.
        let top = Topology::laid_out(4, 2, 0);
        let status = |remaining, speed: u64| Status {
            remaining,
            speed_milli: speed * 1000,
            speed_time_milli: speed * 2000,
            ..busy(0)
        };
        let statuses = [status(100, 10), status(50, 40), status(30, 5), status(0, 0)];
        let job = wave_on(&statuses, &top).job(&top);
        assert_eq!(*job.hosts, vec![(150, 50.0), (30, 5.0)]);
        assert_eq!(job.at, 2.0);
        assert_eq!(job.host_end(0), 2.0 + 150.0 / 50.0);
        assert_eq!(job.host_end(1), 2.0 + 30.0 / 5.0);
        assert_eq!(job.host_end(7), f64::INFINITY, "no such host");
    }

    #[test]
    fn a_rank_about_to_run_out_of_work_joins_the_next_wave_idle() {
        let interval = 0.25;
        // Idle, or waiting inside the library: at once.
        assert!(joins_wave(1.0, false, true, 9.0, interval));
        // Computing: at its check.
        assert!(!joins_wave(1.0, true, false, 1.1, interval));
        assert!(joins_wave(1.1, true, false, 1.1, interval));
        // Computing its last ids: one interval later, idle by then; no
        // later, should its work not end after all.
        assert!(!joins_wave(1.1, true, true, 1.1, interval));
        assert!(!joins_wave(1.3, true, true, 1.1, interval));
        assert!(joins_wave(1.35, true, true, 1.1, interval));
    }
}
