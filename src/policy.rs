//! The rank's state machine (DESIGN §4, §5), driven by time and events.
//!
//! [`Rank`] makes every decision of a rank: which chunk to compute, when the
//! warm-up ends, when to post, refresh or withdraw an SOS, how far to extend
//! the lease, which SOS to help and how much to take. It reads no clock and
//! makes no MPI call: time comes in as seconds since the job's common start,
//! the board comes in as a [`Board`], and the one collective (the warm-up
//! exchange) goes out as [`Step::Exchange`]. The MPI shell
//! ([`crate::Balancer`]) and the simulator drive the same code.

use crate::board::{Access, Aid, Board, Locked, OpenEntry, Post, Sos, SosState};
use crate::config::{Config, Mode};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::plan::{HelpPolicy, Plan, ShareInput, WarmupReport, initial_block, rescale, share};
use crate::speed::{Speed, forecast};
use crate::topology::{IdleMap, Topology};
use crate::verdict::{Audit, Job};
use std::ops::Range;
use std::sync::Arc;

/// Standard deviations of a rank's realisation time that its lease and
/// its shares keep clear of the job's forecast end ([`ShareInput::risk`]).
/// Simulator, 100 seeds: 2 gains 0.02 to 0.03 on tail16 and bimodal16;
/// 4 and more lose on bimodal16 (slow ranks then idle too early).
const RISK: f64 = 2.0;

/// Consultations of the board that an SOS brings about beyond the post
/// itself: the owner's lease extensions while it is open, the helpers'
/// takes (each one a consultation in which the helper computes nothing)
/// and the recovery of the lease it gave back. Lateness below this many
/// storage costs is not worth an SOS. It matters on slow storage only
/// (fast storage costs well under a millisecond per consultation).
/// Simulator, 24 seeds, 200 ms per file operation: with 4, fluct16
/// reached 0.54 in mode full against 0.66 in mode warmup (owners posted
/// for lateness of a few seconds that passed with the speeds' next draw);
/// with 12, 0.66; step16 0.53 → 0.56. At 50 ms, within 0.02 of 4.
const SOS_COST: f64 = 12.0;

/// The window of the steady speed, in speed windows. Where an SOS costs
/// more file time than the configured `late_threshold` ([`SOS_COST`]
/// storage costs: slow storage), a rank posts only when it is late at its
/// recent speed and at its steady speed both, so that a passing slowdown
/// (speeds that fluctuate) posts no SOS whose file time outweighs it; a
/// lasting one shows in both within a window. Simulator, 16 seeds, 50 ms
/// per file operation: fluct16 0.725 → 0.754, step16 0.746 → 0.777,
/// tail16 0.72 → 0.79 (emulator, three runs each: fluct16 0.740 → 0.767,
/// step16 0.786 → 0.775); over the whole run instead of four windows,
/// step16 lost 0.08 at 200 ms (its SOS came too late). On fast storage a
/// post costs next to nothing and a late one does: there the gate cost
/// fluct16 without jitter 0.990 → 0.962, and it is off.
const STEADY_WINDOWS: f64 = 4.0;

/// The numbers of the config the state machine uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Static, Warmup or Full.
    pub mode: Mode,
    /// Warm-up window `t_l`, seconds.
    pub warmup: f64,
    /// Speed window, seconds of computing.
    pub speed_window: f64,
    /// Seconds between checks.
    pub check_interval: f64,
    /// `δτ`, seconds.
    pub late_threshold: f64,
    /// Target seconds per chunk.
    pub chunk_time: f64,
    /// Share policy of helpers.
    pub help_policy: HelpPolicy,
    /// Seconds a far helper waits per unit of distance.
    pub grace: f64,
    /// Seconds between two looks at the open index while idle.
    pub poll_interval: f64,
}

impl From<&Config> for Params {
    fn from(c: &Config) -> Self {
        Params {
            mode: c.mode,
            warmup: c.warmup_seconds(),
            speed_window: c.speed_window,
            check_interval: c.check_interval,
            late_threshold: c.late_threshold,
            chunk_time: c.chunk_time,
            help_policy: c.help_policy,
            grace: c.grace,
            poll_interval: c.poll_interval,
        }
    }
}

/// What the rank does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Compute these ids, then call [`Rank::next`] again.
    Compute(Range<u64>),
    /// The warm-up is over: gather every rank's report (one collective) and
    /// pass them to [`Rank::apply_plan`]. Meanwhile the rank computes its
    /// reserve: call [`Rank::next`] again.
    Exchange(WarmupReport),
    /// The reserve is done and the plan has not come yet: wait for the
    /// exchange to complete, apply the plan, then call [`Rank::next`] again.
    AwaitPlan,
    /// No work now. Wait until `until` (seconds since the start) or until the
    /// open index changes, then call [`Rank::next`] again; a rank that stays
    /// idle is ready to terminate.
    Idle {
        /// When to look again (infinite: nothing will come but termination).
        until: f64,
    },
}

/// Something worth a line in the monitor log.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Realisations finished since the last progress line.
    Progress {
        /// The ids finished.
        ids: IdSet,
        /// All realisations finished by this rank.
        done: u64,
        /// Current speed.
        speed: f64,
        /// Ids still owned.
        remaining: u64,
        /// Forecast finishing time.
        forecast: f64,
    },
    /// Algorithm 1's plan.
    Plan {
        /// The new quota.
        quota: IdSet,
        /// Speed measured in the warm-up.
        speed: f64,
        /// The horizon `T_e`.
        horizon: f64,
    },
    /// This rank opened an SOS.
    SosPosted {
        /// Sequence number.
        seq: u64,
        /// The tail offered.
        tail: IdSet,
        /// The forecast that made it late.
        forecast: f64,
    },
    /// This rank withdrew its SOS and took the tail back.
    SosWithdrawn {
        /// Sequence number.
        seq: u64,
        /// The ids taken back.
        reclaimed: IdSet,
        /// The forecast that is no longer late.
        forecast: f64,
    },
    /// This rank's SOS closed because its tail is empty.
    SosClosed {
        /// Sequence number.
        seq: u64,
    },
    /// A helper took ids from this rank.
    AidReceived {
        /// Sequence number of the SOS.
        seq: u64,
        /// The AID record.
        aid: Aid,
    },
    /// This rank took ids from another's SOS.
    AidGiven {
        /// The owner of the SOS.
        owner: usize,
        /// Its sequence number.
        seq: u64,
        /// The ids taken.
        ids: IdSet,
    },
    /// A signal-file error the rank recovered from.
    Recovered {
        /// What went wrong, with the path.
        error: String,
    },
}

/// A rank's figures, for the summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Realisations computed.
    pub computed: u64,
    /// Seconds spent computing.
    pub busy: f64,
    /// Speed at the end of the warm-up.
    pub warmup_speed: f64,
    /// The ids Algorithm 1 counted on: the quota it gave, and the reserve
    /// it counted as left (what the rank kept for the warm-up exchange).
    pub planned: u64,
    /// Horizon `T_e`, seconds since the start.
    pub horizon: f64,
    /// Ids this rank took from others' SOS.
    pub taken: u64,
    /// Ids others took from this rank's SOS.
    pub given: u64,
    /// The same, by the helper's distance: same host, same site, elsewhere.
    pub given_to: [u64; 3],
    /// SOS posted.
    pub sos_posted: u64,
    /// Signal-file errors recovered from.
    pub errors: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup,
    Exchanging,
    Running,
}

/// What a locked look at the rank's own SOS record found.
enum Own<T> {
    /// The lock was held by a helper, and the rank had lease work to do.
    Busy,
    /// The record no longer holds this rank's open SOS: recover.
    Lost,
    /// The record's open SOS, and what the closure made of it.
    Open(T),
}

/// Outcome of a steal, in crossbeam-deque's words.
#[derive(Debug)]
enum Steal {
    Empty,
    /// Nothing to take at the listed sequence: the record is closed, open
    /// again under a later sequence, or open with an empty tail (unless the
    /// owner gives back part of its lease: it then lists the SOS again).
    Drained,
    /// Taken, and whether that emptied the tail.
    Success(u64, IdSet, bool),
    Retry,
}

/// What a helper asks of an SOS: the figures of its share besides the
/// record's.
struct Ask {
    now: f64,
    policy: HelpPolicy,
    helper_speed: f64,
    job_left: f64,
    steal_cost: f64,
    helpers: f64,
    busy_for: f64,
    risk: f64,
}

impl Ask {
    /// The ids to take from the SOS record `s` (0 when it is not open or
    /// holds nothing worth a steal).
    fn share(&self, s: &Sos) -> u64 {
        let SosState::Open(p) = &s.state else {
            return 0;
        };
        let now = self.now;
        let others = s
            .aids
            .iter()
            .map(|a| (a.speed, a.ids.len() as f64 - a.speed * (now - a.at)))
            .collect();
        let lease_left =
            p.remaining.saturating_sub(p.tail.len()) as f64 - p.speed * (now - p.updated_at);
        share(
            self.policy,
            &ShareInput {
                owner_remaining: p.tail.len() as f64 + lease_left.max(0.0),
                owner_speed: p.speed,
                helper_speed: self.helper_speed,
                others,
                available: p.tail.len(),
                job_left: self.job_left,
                steal_cost: self.steal_cost,
                helpers: self.helpers,
                busy_for: self.busy_for,
                risk: self.risk,
            },
        )
    }
}

/// The state machine of one rank.
#[derive(Debug)]
pub struct Rank {
    me: usize,
    total: u64,
    params: Params,
    topology: Topology,
    phase: Phase,
    /// Ids this rank may compute without consulting its SOS.
    lease: IdSet,
    /// The rest of the quota: local while no SOS is open, else the tail as
    /// last read from the SOS record (helpers may have taken from it since).
    tail: IdSet,
    /// The open SOS, as listed in the index, if any.
    sos: Option<OpenEntry>,
    /// Reads of the open index in a row that found a write midway.
    torn_reads: u32,
    /// Last sequence number used.
    last_seq: u64,
    /// AID records of the open SOS already accounted.
    seen_aids: usize,
    /// After an unrecoverable error on its own SOS record, the rank stops posting.
    board_broken: bool,
    /// The speed, and the steady speed over [`STEADY_WINDOWS`] windows.
    speed: Speed,
    horizon: f64,
    next_check: f64,
    /// Since when the rank has had no work (a helper looking for an SOS).
    idle_since: Option<f64>,
    /// Seconds to wait before trying a busy SOS lock again (doubles while busy).
    busy_backoff: f64,
    /// SOS (owner, sequence) found with nothing to take or their lock
    /// busy, until when not to look at them again, and whether busy.
    empty: Vec<(usize, u64, f64, bool)>,
    /// The index still lists this rank's closed SOS: its lock was busy
    /// (see [`Rank::relist`]); a check tries again, at most every four
    /// storage costs from `relist_at`.
    unlisted: bool,
    relist_at: f64,
    /// The host's copy of the open index failed once: not used any more.
    host_copy_broken: bool,
    /// The ids computed, for the audit at finalize.
    audit: Audit,
    /// Consultations of the own open SOS in a row that found no new AID.
    quiet: u32,
    /// Idle polls in a row that took nothing, and when the last one was.
    idle_polls: u32,
    last_poll: f64,
    /// Seconds one consultation of the board takes (measured by the shell).
    storage_cost: f64,
    /// Seconds one locked look at the record of a rank at distance 0, 1, 2
    /// takes (0 until measured): another site's storage is slower.
    look_cost: [f64; 3],
    /// The farthest distance and the number of locked looks at other
    /// ranks' records in the current call of [`Rank::next`].
    looks: (u8, u32),
    /// When a check last consulted the rank's own SOS record (refresh,
    /// withdraw, post; lease extensions are paced by the lease).
    last_look: f64,
    /// When a lease extension last wrote fresh figures into the open SOS.
    extended_at: f64,
    /// When the rank last looked ahead for its next share.
    looked_ahead: f64,
    /// The job's forecast end, from the last termination wave.
    job_end: f64,
    /// Idle ranks, and free ranks per host and site, at the last
    /// termination wave.
    idle: Arc<IdleMap>,
    /// Done with its own quota: a helper since (see [`Rank::is_free`]).
    free: bool,
    /// Open SOS at the last termination wave.
    open_sos: u64,
    /// A watcher saw the open index change since the last look at it.
    index_changed: bool,
    /// The chunk being computed and when it was handed out.
    out: Option<(f64, Range<u64>)>,
    progress: IdSet,
    events: Vec<Event>,
    report: RankReport,
}

impl Rank {
    /// Rank `me` of `topology.ranks()`, owning its initial block of `0..total`.
    pub fn new(me: usize, total: u64, params: Params, topology: Topology) -> Rank {
        let lease = IdSet::from_range(initial_block(total, topology.ranks(), me));
        let phase = if params.mode == Mode::Static {
            Phase::Running
        } else {
            Phase::Warmup
        };
        Rank {
            me,
            total,
            phase,
            lease,
            tail: IdSet::new(),
            sos: None,
            torn_reads: 0,
            last_seq: 0,
            seen_aids: 0,
            board_broken: false,
            busy_backoff: 0.0,
            empty: Vec::new(),
            unlisted: false,
            relist_at: 0.0,
            host_copy_broken: false,
            audit: Audit::default(),
            storage_cost: 0.0,
            quiet: 0,
            idle_polls: 0,
            last_poll: f64::NEG_INFINITY,
            look_cost: [0.0; 3],
            looks: (0, 0),
            last_look: f64::NEG_INFINITY,
            extended_at: f64::NEG_INFINITY,
            looked_ahead: f64::NEG_INFINITY,
            job_end: f64::INFINITY,
            idle: Arc::default(),
            free: false,
            open_sos: 0,
            index_changed: false,
            speed: Speed::new(params.speed_window)
                .with_steady_window(STEADY_WINDOWS * params.speed_window),
            horizon: f64::INFINITY,
            next_check: params.check_interval,
            idle_since: None,
            out: None,
            progress: IdSet::new(),
            events: Vec::new(),
            report: RankReport {
                rank: me,
                ..RankReport::default()
            },
            params,
            topology,
        }
    }

    /// Ids this rank owns now (lease and tail as last seen).
    pub fn remaining(&self) -> u64 {
        self.lease.len() + self.tail.len()
    }

    /// True while the rank owns work: ids, a chunk handed out, an open SOS.
    pub fn owns_work(&self) -> bool {
        self.remaining() > 0 || self.out.is_some() || self.sos.is_some()
    }

    /// The ids owned now (lease, tail as last seen, the chunk handed out),
    /// to name them in an error.
    pub fn owned(&self) -> IdSet {
        let mut ids = self.lease.clone();
        ids.extend(&self.tail);
        if let Some((_, chunk)) = &self.out {
            ids.insert(chunk.clone());
        }
        ids
    }

    /// The ids computed so far, as an audit.
    pub fn audit(&self) -> Audit {
        self.audit
    }

    /// True until the warm-up exchange has happened (never in mode Static).
    pub fn in_warmup(&self) -> bool {
        self.phase != Phase::Running
    }

    /// The current speed estimate.
    pub fn speed(&self) -> f64 {
        self.speed.get()
    }

    /// Without work, and at the end: the progress line of the ids finished
    /// since the last check (if any), so that the monitor log lists every id
    /// this rank computed, when it finished them.
    pub fn flush_progress(&mut self, now: f64) {
        if !self.progress.is_empty() {
            let (speed, remaining) = (self.speed.get(), self.remaining());
            self.events.push(Event::Progress {
                ids: std::mem::take(&mut self.progress),
                done: self.speed.done(),
                speed,
                remaining,
                forecast: forecast(now, remaining, speed),
            });
        }
    }

    /// The job's forecast end, seconds since the start, from the last
    /// termination wave ([`Rank::observe_job`]; infinite before).
    pub fn job_end(&self) -> f64 {
        self.job_end
    }

    /// Realisations computed by this rank so far.
    pub fn done(&self) -> u64 {
        self.speed.done()
    }

    /// What a termination wave says of the whole job at `now`. The job's
    /// forecast end, `now + (total − completed) / speed`, caps the shares
    /// helpers take; the idle ranks tell how many helpers each open SOS
    /// may expect.
    pub fn observe_job(&mut self, now: f64, job: Job) {
        if job.speed > 0.0 {
            self.job_end = now + self.total.saturating_sub(job.completed) as f64 / job.speed;
        }
        self.idle = job.idle;
        self.open_sos = job.open;
    }

    /// The shell saw the open index change (a watcher woke the rank): the
    /// next look for help reads it, whatever the last wave said.
    pub fn index_changed(&mut self) {
        self.index_changed = true;
    }

    /// True once the rank has run out of its own quota (it is a helper,
    /// idle or computing ids taken from others), or will within one grace
    /// without asking for help: the first helpers of an SOS near it (see
    /// [`crate::verdict::Status::free`]).
    pub fn is_free(&self) -> bool {
        let v = self.speed.get();
        self.free
            || (self.phase == Phase::Running
                && self.sos.is_none()
                && v > 0.0
                && self.remaining() as f64 <= v * self.params.grace)
    }

    /// The number of realisations of the run.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Hosts and sites of the ranks.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The horizon `T_e` (infinite before the plan).
    pub fn horizon(&self) -> f64 {
        self.horizon
    }

    /// True while an SOS of this rank is open.
    pub fn sos_open(&self) -> bool {
        self.sos.is_some()
    }

    /// The events since the last call, for the monitor log.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain(..)
    }

    /// True when events wait to be drained.
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The rank's figures.
    pub fn report(&self) -> RankReport {
        RankReport {
            computed: self.speed.done(),
            busy: self.speed.busy(),
            ..self.report.clone()
        }
    }

    /// The previous chunk (if any) is finished at `now`; decide what comes next.
    ///
    /// This is the fast path of the library: when no check is due and the
    /// lease is not exhausted it does a few additions and comparisons.
    pub fn next(&mut self, now: f64, board: &mut dyn Board) -> Result<Step> {
        self.looks = (0, 0);
        if let Some((t0, chunk)) = self.out.take() {
            self.speed.record(now - t0, chunk.end - chunk.start);
            self.audit.add(chunk.clone());
            self.progress.insert(chunk);
        }
        match self.phase {
            Phase::Exchanging if self.lease.is_empty() => return Ok(Step::AwaitPlan),
            Phase::Warmup
                if self.lease.is_empty()
                    || (now >= self.params.warmup && self.speed.done() > 0) =>
            {
                // Keep computing while the slower ranks reach the exchange:
                // a warm-up's worth of work at the measured speed.
                return Ok(Step::Exchange(self.report_warmup(now, self.params.warmup)));
            }
            _ => {}
        }
        if now >= self.next_check {
            self.check(now, board)?;
        }
        loop {
            let chunk_len = (self.speed.get() * self.params.chunk_time) as u64;
            if let Some(chunk) = self.lease.pop_chunk(chunk_len) {
                self.out = Some((now, chunk.clone()));
                return Ok(Step::Compute(chunk));
            }
            if self.sos.is_some() {
                self.extend_lease(now, board)?;
                continue;
            }
            if self.params.mode != Mode::Full || self.phase != Phase::Running {
                return Ok(Step::Idle {
                    until: f64::INFINITY,
                });
            }
            self.free = true;
            match self.help(now, 0.0, board)? {
                Some(until) => return Ok(Step::Idle { until }),
                None => continue,
            }
        }
    }

    /// End the warm-up of a rank that leaves early: its report for the
    /// exchange, with its whole unfinished block in the tail.
    pub fn warmup_report(&mut self, now: f64) -> WarmupReport {
        self.report_warmup(now, 0.0)
    }

    /// End the warm-up: the report for the exchange. The ids left of the
    /// block that the rank computes in `keep` seconds at its measured speed
    /// are its reserve, which it computes while the exchange completes; the
    /// rest is the tail the plan pools.
    fn report_warmup(&mut self, now: f64, keep: f64) -> WarmupReport {
        self.phase = Phase::Exchanging;
        let keep = (self.speed.update() * keep).ceil() as u64;
        let block = initial_block(self.total, self.topology.ranks(), self.me);
        let reserve = self.lease.take_front(keep);
        let tail = self.lease.ranges().next().unwrap_or(block.end..block.end);
        self.lease = reserve;
        WarmupReport {
            done: self.speed.done(),
            speed: self.speed.get(),
            tail,
            reserved: self.lease.len(),
            at: now,
        }
    }

    /// The chunk just handed out starts computing at `now`, not when `next`
    /// was called: the library's own file time is not computing time.
    pub fn restart_chunk(&mut self, now: f64) {
        if let Some((t0, _)) = &mut self.out {
            *t0 = now;
        }
    }

    /// Algorithm 1: take this rank's quota from the plan of every rank's report.
    pub fn apply_plan(&mut self, reports: &[WarmupReport], now: f64) -> Result<()> {
        self.apply_planned(reports, &rescale(reports), now)
    }

    /// [`Rank::apply_plan`] with the plan of `reports` already made (the
    /// simulator makes it once for all its ranks).
    pub fn apply_planned(&mut self, reports: &[WarmupReport], plan: &Plan, now: f64) -> Result<()> {
        if self.phase != Phase::Exchanging {
            return Err(Error::State(
                "a plan arrived outside the warm-up exchange".into(),
            ));
        }
        let accounted: u64 = reports
            .iter()
            .map(|r| r.done + (r.tail.end - r.tail.start) + r.reserved)
            .sum();
        if reports.len() != self.topology.ranks() || accounted != self.total {
            return Err(Error::Internal(format!(
                "warm-up reports of {} ranks account for {accounted} of {} ids",
                reports.len(),
                self.total
            )));
        }
        let Some(quota) = plan.quotas.get(self.me) else {
            return Err(Error::Internal("a plan without this rank's quota".into()));
        };
        // The reserve left, then the quota.
        self.lease.extend(quota);
        // The plan's common end is counted from the last report.
        let last = reports
            .iter()
            .map(|r| r.at)
            .fold(f64::NEG_INFINITY, f64::max);
        self.horizon = last.min(now) + plan.duration;
        self.phase = Phase::Running;
        self.next_check = now;
        self.report.warmup_speed = reports[self.me].speed;
        self.report.planned = quota.len() + plan.kept.get(self.me).copied().unwrap_or(0);
        self.report.horizon = self.horizon;
        self.events.push(Event::Plan {
            quota: self.lease.clone(),
            speed: reports[self.me].speed,
            horizon: self.horizon,
        });
        Ok(())
    }

    /// The lease size: ids of work for one interval at the current speed,
    /// but no more than the rank can compute by the job's forecast end less
    /// its [`Rank::risk`] (then the ids wait in the SOS tail for idle
    /// helpers; see [`Rank::job_left`]), and at least four consultations of
    /// the board's worth.
    fn lease_len(&self, now: f64) -> u64 {
        let left = (self.job_left(now) - self.risk()).max(4.0 * self.storage_cost);
        let seconds = self.own_period().min(left);
        ((self.speed.get() * seconds).ceil() as u64).max(1)
    }

    /// Seconds by which this rank's last realisation may run past its mean
    /// time: [`RISK`] standard deviations of its realisations' times.
    /// Realisations of random cost make it large on slow ranks, so that
    /// they keep less work near the job's end, and take less.
    fn risk(&self) -> f64 {
        RISK * self.speed.spread()
    }

    /// Seconds to the job's forecast end (infinite before the first wave).
    /// A forecast end already past means the job is behind its forecast
    /// and near its end, not that nothing is left: half a check interval
    /// (the waves' period) at least. Without this floor, shares and leases
    /// went uncapped just when the last realisations were handed out
    /// (the simulator at 1,024 ranks: efficiency 0.881, with it 0.922).
    fn job_left(&self, now: f64) -> f64 {
        (self.job_end - now).max(0.5 * self.params.check_interval)
    }

    /// Seconds between checks, and of work per lease: the configured
    /// interval, or ten board consultations on slow storage, so that file
    /// time stays a small part of a rank's time.
    fn interval(&self) -> f64 {
        self.params.check_interval.max(10.0 * self.storage_cost)
    }

    /// Seconds between two consultations of the own open SOS (lease
    /// extensions and checks): one interval, doubling up to four while
    /// consultations in a row find that no helper took anything, so that
    /// owners nobody helps yet leave the shared storage alone.
    fn own_period(&self) -> f64 {
        self.interval() * f64::from(1u32 << self.quiet.min(2))
    }

    /// A consultation of the board took `seconds` (the shell measures it):
    /// a moving average, the storage cost, paces the looks at the board and
    /// sets the least lateness and tail worth an SOS and the least share
    /// worth a steal.
    ///
    /// A call that looked at other ranks' records also measures a look at
    /// the farthest of them, which sizes the shares taken that far.
    pub fn observe_storage(&mut self, seconds: f64) {
        let average = |c: f64, x: f64| if c == 0.0 { x } else { 0.75 * c + 0.25 * x };
        let seconds = seconds.max(0.0);
        self.storage_cost = average(self.storage_cost, seconds);
        if let (d, n @ 1..) = std::mem::take(&mut self.looks) {
            let c = &mut self.look_cost[d.min(2) as usize];
            *c = average(*c, seconds / n as f64);
        }
    }

    /// Seconds a steal from the record of a rank at distance `d` costs this
    /// rank: its storage cost, or more where looks that far were measured
    /// to take longer.
    fn steal_cost(&self, d: u8) -> f64 {
        self.storage_cost.max(self.look_cost[d.min(2) as usize])
    }

    /// The periodic check: speed, progress line, and the SOS decisions.
    fn check(&mut self, now: f64, board: &mut dyn Board) -> Result<()> {
        self.next_check = now + self.params.check_interval;
        let v = self.speed.update();
        let remaining = self.remaining();
        let tau = forecast(now, remaining, v);
        if !self.progress.is_empty() {
            self.events.push(Event::Progress {
                ids: std::mem::take(&mut self.progress),
                done: self.speed.done(),
                speed: v,
                remaining,
                forecast: tau,
            });
        }
        if self.params.mode != Mode::Full || self.phase != Phase::Running || self.board_broken {
            return Ok(());
        }
        if self.unlisted && now >= self.relist_at {
            self.relist_at = now + self.look_ahead();
            self.relist(board);
        }
        // An SOS costs consultations of the board ([`SOS_COST`]) and, while
        // open, a lease extension of about one and a half consultations per
        // interval: not worth it for less lateness.
        let upkeep = 1.5 * self.storage_cost * (tau - now).max(0.0) / self.interval();
        let threshold = self
            .params
            .late_threshold
            .max(SOS_COST * self.storage_cost)
            .max(upkeep);
        // Late against the horizon, or against the job's forecast end when
        // that came earlier (the others are faster than planned): then the
        // rank's last realisations would keep idle ranks waiting. On slow
        // storage a post needs lateness at the steady speed too.
        let steady = match self.sos {
            None if SOS_COST * self.storage_cost > self.params.late_threshold => {
                forecast(now, remaining, v.max(self.speed.steady()))
            }
            _ => tau,
        };
        let late = steady - self.horizon.min(self.job_end) >= threshold;
        // An open SOS is consulted at most once per interval: a check
        // itself is free, a look at the board is not. Unless the lease has
        // grown longer than the rank can use (it slowed down since, or the
        // job's end came closer) by two consultations' worth of its work or
        // more (two check intervals' at least): those ids belong in the
        // tail, for helpers. On slow storage an owner posted while its
        // speed estimate still lagged a slowdown, kept a lease it could
        // not finish, and consulted its SOS again only seconds later.
        let excess = self.lease.len().saturating_sub(self.lease_len(now)) as f64;
        let give_back =
            excess > 0.0 && excess >= 2.0 * v * self.storage_cost.max(self.params.check_interval);
        if self.sos.is_some() && now < self.last_look + self.own_period() && !give_back {
            return Ok(());
        }
        self.last_look = now;
        match (late, self.sos.as_ref().map(|e| e.seq)) {
            (true, None) => self.post(now, v, tau, board),
            // A lease extension wrote fresh figures not long ago.
            (true, Some(_)) if now < self.extended_at + self.own_period() && !give_back => Ok(()),
            (true, Some(seq)) => self.refresh(seq, now, v, tau, board),
            (false, Some(seq)) => self.withdraw(seq, tau, board),
            // About to run out of work: take the next share now, so that
            // the wait for a busy SOS lock and the steal's file time pass
            // while this rank still computes.
            (false, None)
                if remaining > 0
                    && self.open_sos > 0
                    && tau - now < self.look_ahead()
                    && now >= self.looked_ahead + self.interval() =>
            {
                self.looked_ahead = now;
                self.help(now, tau - now, board).map(drop)
            }
            (false, None) => Ok(()),
        }
    }

    /// Seconds of own work left at which a rank looks for its next share:
    /// four consultations of the board (none on fast storage).
    fn look_ahead(&self) -> f64 {
        4.0 * self.storage_cost
    }

    /// Open an SOS offering all but one lease of the quota.
    fn post(&mut self, now: f64, v: f64, tau: f64, board: &mut dyn Board) -> Result<()> {
        // The tail must hold more work than the post and a helper's steal
        // cost (two consultations of the board each).
        self.quiet = 0;
        let keep = self.lease_len(now);
        let least_tail = (v * 4.0 * self.storage_cost).ceil() as u64;
        if self.lease.len() <= keep + least_tail {
            return Ok(());
        }
        let tail = self.lease.take_back(self.lease.len() - keep);
        let seq = self.last_seq + 1;
        let post = Post {
            speed: v,
            remaining: self.lease.len() + tail.len(),
            forecast: tau,
            host: self.topology.host(self.me).to_string(),
            site: self.topology.site(self.me).to_string(),
            opened_at: now,
            updated_at: now,
            tail: tail.clone(),
        };
        let me = self.me;
        let written = board.with_sos(me, self.own_access(), &mut |s| {
            *s = Sos {
                rank: me,
                seq,
                state: SosState::Open(post.clone()),
                aids: Vec::new(),
            }
        });
        self.last_seq = seq;
        match written {
            Ok(Locked::Done) => {}
            // A helper looks at the closed record: post at the next check.
            Ok(Locked::Busy) => {
                self.lease.extend(&tail);
                return Ok(());
            }
            Err(e) => {
                self.lease.extend(&tail);
                return self.recover(e, board);
            }
        }
        let entry = OpenEntry {
            rank: me,
            seq,
            forecast: tau,
            opened_at: now,
            speed: v,
        };
        self.sos = Some(entry.clone());
        self.tail = tail.clone();
        self.seen_aids = 0;
        self.report.sos_posted += 1;
        self.events.push(Event::SosPosted {
            seq,
            tail,
            forecast: tau,
        });
        self.relist(board);
        Ok(())
    }

    /// How the owner takes its own lock: it does not wait for a helper
    /// while it has lease work left (it tries again at the next check).
    fn own_access(&self) -> Access {
        if self.lease.is_empty() {
            Access::Wait
        } else {
            Access::Try
        }
    }

    /// Lock the own SOS record, let `f` change its state, and account the
    /// AID records that arrived. `f` answers `None` when the record is not an
    /// open SOS; then, or when the record is not this rank's sequence `seq`
    /// any more (it was reset or overwritten), the answer is [`Own::Lost`]
    /// and the caller recovers.
    fn with_own_sos<T>(
        &mut self,
        seq: u64,
        board: &mut dyn Board,
        mut f: impl FnMut(&mut SosState) -> Option<T>,
    ) -> Result<Own<T>> {
        let mut out = None;
        let mut new_aids = Vec::new();
        let seen = self.seen_aids;
        let locked = board.with_sos(self.me, self.own_access(), &mut |s| {
            if s.seq == seq {
                new_aids = s.aids.get(seen..).unwrap_or_default().to_vec();
                out = f(&mut s.state);
            }
        })?;
        if locked == Locked::Busy {
            return Ok(Own::Busy);
        }
        self.quiet = if new_aids.is_empty() {
            self.quiet + 1
        } else {
            0
        };
        self.seen_aids += new_aids.len();
        for aid in new_aids {
            self.report.given += aid.ids.len();
            // (A helper number comes from a file: no rank beyond the job's.)
            if aid.helper < self.topology.ranks() {
                let d = self.topology.distance(self.me, aid.helper).min(2);
                self.report.given_to[d as usize] += aid.ids.len();
            }
            self.events.push(Event::AidReceived { seq, aid });
        }
        Ok(out.map_or(Own::Lost, Own::Open))
    }

    /// Write fresh figures into the open SOS and learn what helpers took.
    fn refresh(
        &mut self,
        seq: u64,
        now: f64,
        v: f64,
        tau: f64,
        board: &mut dyn Board,
    ) -> Result<()> {
        // A lease longer than the rank can now use (it slowed down, or the
        // job's end came closer) goes back to the tail, for helpers.
        let keep = self.lease_len(now);
        let mut excess = IdSet::new();
        if self.lease.len() > keep {
            excess = self.lease.take_back(self.lease.len() - keep);
        }
        let lease = self.lease.len();
        let r = self.with_own_sos(seq, board, |state| {
            let SosState::Open(p) = state else {
                return None;
            };
            p.speed = v;
            p.forecast = tau;
            p.updated_at = now;
            p.tail.extend(&excess);
            p.remaining = lease + p.tail.len();
            Some(p.tail.clone())
        });
        if !matches!(r, Ok(Own::Open(_))) {
            self.lease.extend(&excess);
        }
        match r {
            Ok(Own::Busy) => Ok(()),
            Ok(Own::Open(tail)) => {
                self.tail = tail;
                // Listed again if the index lost the entry (it was rebuilt,
                // or a helper unlisted the SOS when it emptied the tail)
                // while there is something to take.
                if !self.tail.is_empty()
                    && let (Some(entry), Ok(Some(index))) = (self.sos.clone(), board.read_index())
                    && !index.entries.contains(&entry)
                {
                    self.relist(board);
                }
                Ok(())
            }
            Ok(Own::Lost) => self.recover(self.lost_record(), board),
            Err(e) => self.recover(e, board),
        }
    }

    /// No longer late: close the SOS and take the unclaimed tail back.
    fn withdraw(&mut self, seq: u64, tau: f64, board: &mut dyn Board) -> Result<()> {
        let r = self.with_own_sos(seq, board, |state| {
            let SosState::Open(p) = state else {
                return None;
            };
            let reclaimed = std::mem::take(&mut p.tail);
            *state = SosState::Closed;
            Some(reclaimed)
        });
        match r {
            Ok(Own::Busy) => Ok(()),
            Ok(Own::Open(reclaimed)) => {
                self.lease.extend(&reclaimed);
                self.tail = IdSet::new();
                self.sos = None;
                self.events.push(Event::SosWithdrawn {
                    seq,
                    reclaimed,
                    forecast: tau,
                });
                self.relist(board);
                Ok(())
            }
            Ok(Own::Lost) => self.recover(self.lost_record(), board),
            Err(e) => self.recover(e, board),
        }
    }

    /// The lease is used up while the SOS is open: take about one check
    /// interval of work from the front of the tail; close the SOS when the
    /// tail is empty.
    fn extend_lease(&mut self, now: f64, board: &mut dyn Board) -> Result<()> {
        let Some(seq) = self.sos.as_ref().map(|e| e.seq) else {
            return Ok(());
        };
        let n = self.lease_len(now);
        // The record is written anyway: with fresh figures, so that the
        // next check need not look again.
        let v = self.speed.get();
        let tau = forecast(now, self.remaining(), v);
        self.extended_at = now;
        let r = self.with_own_sos(seq, board, |state| {
            let SosState::Open(p) = state else {
                return None;
            };
            let ext = p.tail.take_front(n);
            p.speed = v;
            p.forecast = tau;
            p.updated_at = now;
            p.remaining = ext.len() + p.tail.len();
            let left = p.tail.clone();
            if left.is_empty() {
                *state = SosState::Closed;
            }
            Some((ext, left))
        });
        match r {
            // Not reached: with an empty lease the owner waits for its lock.
            Ok(Own::Busy) => Ok(()),
            Ok(Own::Open((ext, left))) => {
                self.lease = ext;
                let closed = left.is_empty();
                self.tail = left;
                if closed {
                    self.sos = None;
                    self.events.push(Event::SosClosed { seq });
                    self.relist(board);
                }
                Ok(())
            }
            Ok(Own::Lost) => self.recover(self.lost_record(), board),
            Err(e) => self.recover(e, board),
        }
    }

    fn lost_record(&self) -> Error {
        Error::Corrupt {
            path: format!("sos/{}.ron", self.me).into(),
            reason: format!(
                "this rank's open SOS (sequence {:?}) is no longer in its record",
                self.sos.as_ref().map(|e| e.seq)
            ),
        }
    }

    /// Make the open index list this rank's open SOS, or no SOS of this
    /// rank when none is open. The index is a hint for helpers: a failure
    /// is reported, never fatal, and a corrupt index is rebuilt empty.
    ///
    /// A rank without an open SOS does not wait for the index lock: when
    /// another rank holds it, the entry is removed at a later check
    /// ([`Rank::unlisted`]), unless a helper that finds the SOS closed takes
    /// it out first ([`Rank::unlist`]). (Waiting, on 0.2 s storage the
    /// owners that closed their SOS at the job's end queued for the index
    /// lock for up to 9 s.)
    fn relist(&mut self, board: &mut dyn Board) {
        let (me, entry) = (self.me, self.sos.clone());
        let mut f = |ix: &mut crate::board::OpenIndex| match &entry {
            Some(e) => ix.upsert(e.clone()),
            None => ix.remove(me),
        };
        let access = if entry.is_some() {
            Access::Wait
        } else {
            Access::Try
        };
        self.unlisted = match board.with_index(access, &mut f) {
            Ok(locked) => locked == Locked::Busy,
            Err(e) => {
                let corrupt = matches!(e, Error::Corrupt { .. });
                self.note_error(e, "the open index");
                corrupt
                    && board.reset_index().is_ok()
                    && board.with_index(Access::Wait, &mut f).is_err()
            }
        };
    }

    /// The own SOS record could not be read or written. Nothing may be lost
    /// or computed twice: take back the tail as last seen, less what the
    /// helpers' journals say they took from this SOS; reset the record to
    /// closed, and go on. Errors other than a corrupt record, and journals
    /// that cannot be read (the truth cannot be rebuilt), are returned.
    fn recover(&mut self, e: Error, board: &mut dyn Board) -> Result<()> {
        if !matches!(e, Error::Corrupt { .. }) {
            return Err(e);
        }
        self.report.errors += 1;
        self.events.push(Event::Recovered {
            error: e.to_string(),
        });
        let taken = match &self.sos {
            Some(entry) => {
                board
                    .journaled_takes(self.me, entry.seq)
                    .map_err(|j| Error::Corrupt {
                        path: format!("sos/{}.ron", self.me).into(),
                        reason: format!("{e}; and the helpers' journals cannot be read: {j}"),
                    })?
            }
            None => IdSet::new(),
        };
        // Ids a helper took are its own; they can only be in the tail (or,
        // after a replaced record, the lease) by mistake.
        let mut tail = std::mem::take(&mut self.tail);
        tail.remove(&taken);
        self.lease.remove(&taken);
        self.lease.extend(&tail);
        self.sos = None;
        self.last_seq += 1;
        let closed = Sos {
            rank: self.me,
            seq: self.last_seq,
            state: SosState::Closed,
            aids: Vec::new(),
        };
        if let Err(e) = board.reset_sos(&closed) {
            self.board_broken = true;
            self.events.push(Event::Recovered {
                error: format!("{e}; this rank stops asking for help"),
            });
        }
        self.relist(board);
        Ok(())
    }

    /// The quota is exhausted: look for an open SOS to help. `Ok(None)` when
    /// ids were taken, else when to look again.
    ///
    /// Nearest SOS first, then the latest forecast. A helper at distance `d`
    /// takes from an SOS only once it has been open, and this helper idle,
    /// for `d·grace` seconds: nearer helpers go first, and remote help still
    /// comes when no near helper is free.
    ///
    /// A rank with `busy_for` seconds of own work left looks ahead: it
    /// takes a share to compute after that work, from a near SOS only (a
    /// far one waits for its grace from now), and does not wait for busy
    /// locks.
    ///
    /// The grace is skipped when no nearer rank was free at the last
    /// termination wave, or when those free could not finish the owner's
    /// work within it ([`Rank::nearer_can_close`]).
    fn help(&mut self, now: f64, busy_for: f64, board: &mut dyn Board) -> Result<Option<f64>> {
        let idle_since = if busy_for > 0.0 {
            now
        } else {
            *self.idle_since.get_or_insert(now)
        };
        // On slow storage a look at the index is dear, and a rank inside one
        // cannot progress the termination waves: look at most every four
        // storage costs (a watcher still wakes the rank at once).
        let mut poll = self.params.poll_interval.max(4.0 * self.storage_cost);
        let mut wake = now + poll;
        // The last termination wave saw no SOS open, and no watcher saw the
        // index change since: nothing to read (idle ranks waiting for the
        // verdict read no file).
        let woken = std::mem::take(&mut self.index_changed);
        if self.open_sos == 0 && !woken {
            return Ok(Some(wake));
        }
        // The first idle rank of a host to poll reads the shared index and
        // leaves a copy on the host; the others read the copy while it is
        // less than half a poll old (DESIGN §6), so that reads of the shared
        // index grow with the hosts, not the ranks. (Older copies sent
        // helpers to SOS that had closed: the simulator at 1,024 ranks made
        // 154,000 operations with copies up to two polls old, 139,000 with
        // half a poll, 147,000 without copies.) A rank that a watcher woke
        // reads the shared index.
        let host = self.topology.host(self.me).to_string();
        let mut copy = None;
        if !woken && !self.host_copy_broken {
            match board.read_host_index(&host) {
                Ok(c) => copy = c.filter(|&(_, at)| now - at < 0.5 * poll).map(|c| c.0),
                Err(e) => self.host_copy_failed(e),
            }
        }
        let shared = copy.is_none();
        let read = match copy {
            Some(index) => Ok(Some(index)),
            None => board.read_index(),
        };
        let index = match read {
            Ok(Some(index)) => {
                self.torn_reads = 0;
                if shared
                    && !self.host_copy_broken
                    && let Err(e) = board.write_host_index(&host, &index, now)
                {
                    self.host_copy_failed(e);
                }
                index
            }
            // A write caught midway: read again soon. Many in a row are no
            // passing write: look under the lock, which names a corrupt file.
            Ok(None) => {
                self.torn_reads += 1;
                if self.torn_reads >= 20 {
                    self.torn_reads = 0;
                    self.relist(board);
                }
                return Ok(Some(now + 0.005));
            }
            Err(e) => {
                self.note_error(e, "the open index");
                return Ok(Some(wake));
            }
        };
        // Idle polls that found nothing back off, up to eight poll
        // intervals, until an SOS opens after the last poll.
        if busy_for == 0.0 {
            if index.entries.iter().any(|e| e.opened_at >= self.last_poll) {
                self.idle_polls = 0;
            }
            self.last_poll = now;
            poll *= f64::from(1u32 << self.idle_polls.min(3));
            wake = now + poll;
        }
        let mut candidates: Vec<(u8, &OpenEntry)> = index
            .entries
            .iter()
            .filter(|e| e.rank != self.me && e.rank < self.topology.ranks())
            .map(|e| (self.topology.distance(self.me, e.rank), e))
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.forecast.total_cmp(&a.1.forecast)));
        // Helpers that all looked at the same SOS first would queue for its
        // lock: each starts at its own place among those at one distance.
        let mut start = 0;
        while start < candidates.len() {
            let d = candidates[start].0;
            let n = candidates[start..].iter().take_while(|c| c.0 == d).count();
            candidates[start..start + n].rotate_left(self.me % n);
            start += n;
        }
        let helpers = (self.idle.ranks as f64 / candidates.len().max(1) as f64).max(1.0);
        let mut busy = false;
        self.empty.retain(|e| e.2 > now);
        // Locked looks cost storage time: a call makes at most two looks
        // that found nothing (and none worth more than a poll interval),
        // then comes back at the next poll.
        let mut budget = self.params.poll_interval;
        let mut empty_looks = 0;
        // Open SOS per host and per site: the nearer helpers share themselves
        // among those (counted when first needed, as the waves count free
        // ranks).
        let mut owners: Option<IdleMap> = None;
        for (d, entry) in candidates {
            let open = || {
                let map = owners.get_or_insert_with(|| {
                    self.topology
                        .idle_map(0, index.entries.iter().map(|e| e.rank))
                });
                self.topology.free_nearer(map, entry.rank, d) as usize
            };
            let grace = if d > 0 && self.nearer_can_close(entry, d, open) {
                d as f64 * self.params.grace
            } else {
                0.0
            };
            let ready_at = entry.opened_at.max(idle_since) + grace;
            if now < ready_at {
                wake = wake.min(ready_at);
                continue;
            }
            if let Some(e) = self
                .empty
                .iter()
                .find(|e| (e.0, e.1) == (entry.rank, entry.seq))
            {
                // A lock found busy is still waited for: its back-off goes
                // on (a reset here made helpers retry a held lock every
                // few milliseconds).
                busy |= e.3;
                wake = wake.min(e.2);
                continue;
            }
            if budget < 0.0 {
                break;
            }
            self.looks = (self.looks.0.max(d), self.looks.1 + 1);
            let ask = self.ask(entry.rank, now, (helpers, busy_for));
            match self.steal(entry.rank, entry.seq, &ask, board) {
                Steal::Success(seq, ids, drained) => {
                    if drained {
                        self.unlist(entry, board);
                    }
                    self.busy_backoff = 0.0;
                    self.idle_polls = 0;
                    self.report.taken += ids.len();
                    self.events.push(Event::AidGiven {
                        owner: entry.rank,
                        seq,
                        ids: ids.clone(),
                    });
                    self.lease.extend(&ids);
                    self.idle_since = None;
                    return Ok(None);
                }
                // Held by another: the next call tries the others first.
                Steal::Retry => {
                    busy = true;
                    let until = now + self.storage_cost;
                    self.empty.push((entry.rank, entry.seq, until, true));
                }
                // Nothing to take until the owner's next look at its SOS,
                // about one interval away (looking ahead, the share may
                // only be too small yet).
                Steal::Drained | Steal::Empty if busy_for > 0.0 => {}
                found @ (Steal::Drained | Steal::Empty) => {
                    if matches!(found, Steal::Drained) {
                        self.unlist(entry, board);
                    }
                    empty_looks += 1;
                    budget = match empty_looks {
                        2.. => -1.0,
                        _ => budget - self.steal_cost(d),
                    };
                    let until = now + self.interval();
                    self.empty.push((entry.rank, entry.seq, until, false));
                }
            }
        }
        // A busy lock is tried again after a back-off that doubles from 5 ms
        // up to the poll interval, so waiting helpers stay off the cores.
        if busy {
            self.busy_backoff = (2.0 * self.busy_backoff).clamp(0.005, self.params.poll_interval);
            wake = wake.min(now + self.busy_backoff);
        } else {
            self.busy_backoff = 0.0;
            self.idle_polls += u32::from(busy_for == 0.0);
        }
        Ok(Some(wake))
    }

    /// Whether the ranks free at the last wave that are nearer than `d` to
    /// the owner of `entry` (a far helper's grace is their head start) can
    /// finish the owner's work, with the owner, within that grace, if they
    /// are as fast as this rank and share themselves among the `open` SOS
    /// near them. If not, or if none is free, a far helper need not wait:
    /// its help comes when it still shortens the job.
    fn nearer_can_close(&self, entry: &OpenEntry, d: u8, open: impl FnOnce() -> usize) -> bool {
        let near = self.topology.free_nearer(&self.idle, entry.rank, d) as f64;
        if near == 0.0 {
            return false;
        }
        let open = open();
        let (vo, vh) = (entry.speed, self.speed.get());
        if vo <= 0.0 || vh <= 0.0 {
            return true;
        }
        // The owner's work when it posted (the index tells no more): high,
        // in favour of help.
        let work = (entry.forecast - entry.opened_at).max(0.0) * vo;
        work / (vo + near / open.max(1) as f64 * vh) <= d as f64 * self.params.grace
    }

    /// What this helper asks of `owner`'s SOS at `now`: see [`Ask::share`].
    ///
    /// `queue`: the helpers the SOS may expect, and the seconds of own work
    /// this helper has before it starts on the share.
    fn ask(&self, owner: usize, now: f64, queue: (f64, f64)) -> Ask {
        let d = self.topology.distance(self.me, owner);
        Ask {
            now,
            policy: self.params.help_policy,
            helper_speed: self.speed.get(),
            job_left: self.job_left(now),
            steal_cost: self.steal_cost(d),
            helpers: queue.0,
            busy_for: queue.1,
            risk: self.risk(),
        }
    }

    /// Take a share of the tail of `owner`'s open SOS and append an AID
    /// record. A read without the lock first, unless the last call found a
    /// lock busy (then there was something to take, and another read per
    /// retry is only load): when it shows nothing to take, the record is
    /// not locked.
    fn steal(&mut self, owner: usize, seq: u64, ask: &Ask, board: &mut dyn Board) -> Steal {
        match (self.busy_backoff == 0.0).then(|| board.peek_sos(owner)) {
            // (A record of an earlier sequence than the index's entry is
            // one the owner has not written yet: look again later.)
            Some(Ok(Some(s)))
                if s.seq > seq || (s.seq == seq && !matches!(s.state, SosState::Open(_))) =>
            {
                return Steal::Drained;
            }
            Some(Ok(Some(s))) if ask.share(&s) == 0 => {
                let drained = matches!(&s.state, SosState::Open(p) if p.tail.is_empty());
                return if drained {
                    Steal::Drained
                } else {
                    Steal::Empty
                };
            }
            Some(Err(e)) => {
                self.note_error(e, &format!("the SOS of rank {owner}"));
                return Steal::Empty;
            }
            _ => {}
        }
        let (me, now, vh) = (self.me, ask.now, ask.helper_speed);
        let mut taken = None;
        let mut drained = false;
        let r = board.with_sos(owner, Access::Try, &mut |s| {
            let k = ask.share(s);
            let SosState::Open(p) = &mut s.state else {
                return;
            };
            if k == 0 {
                drained = p.tail.is_empty();
                return;
            }
            let ids = p.tail.take_back(k);
            drained = p.tail.is_empty();
            p.remaining = p.remaining.saturating_sub(k);
            s.aids.push(Aid {
                helper: me,
                ids: ids.clone(),
                at: now,
                speed: vh,
            });
            taken = Some((s.seq, ids));
        });
        match r {
            Ok(Locked::Busy) => Steal::Retry,
            Ok(Locked::Done) => match taken {
                Some((seq, ids)) => Steal::Success(seq, ids, drained),
                None if drained => Steal::Drained,
                None => Steal::Empty,
            },
            Err(e) => {
                self.note_error(e, &format!("the SOS of rank {owner}"));
                Steal::Empty
            }
        }
    }

    /// Remove `entry` from the open index: its SOS has nothing left to take
    /// (closed, or its tail emptied), and every helper that reads the index
    /// would look at it in vain. The helper does not wait for the index lock.
    /// An owner that gives back part of its lease lists its SOS again.
    fn unlist(&mut self, entry: &OpenEntry, board: &mut dyn Board) {
        let (rank, seq) = (entry.rank, entry.seq);
        let r = board.with_index(Access::Try, &mut |ix| {
            if ix.entries.iter().any(|e| (e.rank, e.seq) == (rank, seq)) {
                ix.remove(rank);
            }
        });
        if let Err(e) = r {
            self.note_error(e, "the open index");
        }
    }

    /// The host's copy of the open index cannot be read or written: report
    /// it once, and read the shared index from now on.
    fn host_copy_failed(&mut self, e: Error) {
        self.host_copy_broken = true;
        self.note_error(
            e,
            "the host's copy of the open index; reading the shared one",
        );
    }

    /// An error on another rank's record or the index: report it, go on.
    fn note_error(&mut self, e: Error, what: &str) {
        self.report.errors += 1;
        self.events.push(Event::Recovered {
            error: format!("{e} (skipped {what})"),
        });
    }
}
