//! The rank's state machine (DESIGN §4, §5), driven by time and events.
//!
//! [`Rank`] makes every decision of a rank: which chunk to compute, when the
//! warm-up ends, when to post, refresh or withdraw an SOS, how far to extend
//! the lease, which SOS to help and how much to take. It reads no clock and
//! makes no MPI call and touches no file: time comes in as seconds since the
//! job's common start, the board's work goes out as requests to the rank's
//! clerk ([`Step::Ask`], [`crate::clerk`]) whose replies come back in
//! ([`Rank::reply`]), and the one collective (the warm-up exchange) goes
//! out as [`Step::Exchange`]. The MPI shell ([`crate::Balancer`]) and the
//! simulator drive the same code.

use crate::board::{Aid, Level, OpenEntry, Post};
use crate::clerk::{Figures, Outcome, OwnOp, Reply, Request, Search};
use crate::config::{Config, Mode};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::plan::{HelpPolicy, Plan, WarmupReport, initial_block, rescale};
use crate::speed::{Speed, forecast};
use crate::topology::{IdleMap, Topology};
use crate::verdict::{Audit, Job, bit, hosts_end, hosts_late};
use std::ops::Range;
use std::sync::Arc;

/// Standard deviations of a rank's realisation time that its lease and
/// its shares keep clear of the job's forecast end ([`ShareInput::risk`]).
/// Simulator, 100 seeds: 2 gains 0.02 to 0.03 on tail16 and bimodal16;
/// 4 and more lose on bimodal16 (slow ranks then idle too early).
const RISK: f64 = 2.0;

/// Lateness worth an SOS, in consultations of the own record (the storage
/// cost): the post, and the owner's lease extensions while it is open, are
/// carried out by the rank's clerk while it computes, but a helper's steal
/// still holds the owner's lock and the helper's time. It matters on slow
/// storage only (fast storage costs well under a millisecond per
/// consultation). Simulator, 12 seeds, 10 % jitter, with the clerk: 4
/// against 2 and 8 gave the best worst case of fluct16 and step16 at 50
/// and 200 ms per operation (12, right when a rank waited for its own
/// file operations, posted too late: step16 at 200 ms 0.71 → 0.56).
const SOS_COST: f64 = 4.0;

/// Lateness at the recent speed that a post needs on slow storage while no
/// rank is idle, in consultations of the own record, besides [`SOS_COST`]
/// at the steady speed: a lasting slowdown is very late at the recent speed
/// at once (the slowed ranks of step16 forecast 26 s of lateness at 200 ms
/// per operation), speeds that fluctuate less so. Simulator, 12 seeds: at
/// 200 ms fluct16's early SOS did not pay (0.65 in the emulator against
/// 0.674 in mode warmup) and step16 keeps 0.71. Once ranks are idle (the
/// last wave says), their time is free and an SOS pays whenever it beats a
/// steal: four ranks of fluct16 at 50 ms ended 2 to 3 s late without one
/// while six ranks idled (emulator: 0.78 to 0.84 → 0.84, 0.84; at 200 ms
/// 0.675 → 0.683, 0.698).
const POST_COST: f64 = 12.0;

/// The window of the steady speed, in speed windows. Where an SOS costs
/// more file time than the configured `late_threshold` ([`SOS_COST`]
/// storage costs: slow storage), a rank posts only when it is late at its
/// recent speed and at its steady speed both, so that a passing slowdown
/// (speeds that fluctuate) posts no SOS whose steals outweigh it; a
/// lasting one shows in both within a window. On fast storage a post
/// costs next to nothing and a late one does: there the gate cost fluct16
/// without jitter 0.990 → 0.962, and it is off.
const STEADY_WINDOWS: f64 = 4.0;

/// Consultations of the own record between two looks at an open SOS (and
/// of work per lease), on slow storage: the clerk's time, not the rank's,
/// so a few suffice (10, right when the rank waited for them, made leases
/// longer than step16's whole run at 200 ms per operation).
const OWN_PERIOD: f64 = 4.0;

/// A rank looks for its next share when its own work left is below this
/// many steals (the steal's time then passes while it still computes), or
/// when its forecast end comes before the job's by more than
/// [`EARLY_SLACK`] steals and a check interval: it can take work early, so
/// that helpers do not all queue on the owners' locks when they run dry
/// (step16 at 50 ms: the 12 fast ranks reached 4 SOS at once at 10 s;
/// 0.83 → 0.89).
const LOOK_AHEAD: f64 = 4.0;

/// See [`LOOK_AHEAD`].
const EARLY_SLACK: f64 = 2.0;

/// Looks ahead while early, over the whole job, per second at most, on fast
/// storage: a rank looks early at most once per check interval, or per
/// `ranks / EARLY_LOOKS` seconds when that is longer, so that the looks of
/// ten thousand ranks do not weigh on the shared storage (the simulator
/// at 10,000 ranks: peak operations per second 108,700 without early looks,
/// 106,700 with them; once per interval made 237,500).
const EARLY_LOOKS: f64 = 64.0;

/// The default of the config's `large_job`: ranks from which on a job is
/// large (DESIGN §6: at scale the shared server's load matters more than a
/// helper's latency), and its hosts trade their drift through MPI
/// ([`crate::transfer`]) instead of SOS files on the shared storage. Below
/// it the paper's protocol runs on the shared storage, with its hierarchy
/// (nearest helpers first, far ones after a grace). Simulator, fluct16's
/// speeds, 16 ranks per host, 2 % jitter: transfers at 64 ranks 0.973
/// against 0.969, at 256 0.962 against 0.952 (eight seeds), without a
/// shared-storage operation; but in the emulator, whose waves come every
/// 0.7 to 1 s, fluct16 and step16 on four hosts of four ranks 0.940 and
/// 0.949 against 0.976 and 0.987, fluct16's speeds on four hosts of 16
/// 0.963 (twice) against 0.973 and 0.963, and grid64s 0.846 and 0.852
/// against 0.900 and 0.914.
pub const LARGE_JOB: usize = 1000;

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
    /// Seconds between two looks at the open index while idle, at most:
    /// polls that find nothing back off up to this.
    pub poll_max: f64,
    /// There is a board per host: an SOS goes on the shared board only when
    /// the owner's host as a whole will be late.
    pub host_board: bool,
    /// Ranks from which on a job is large ([`LARGE_JOB`]).
    pub large_job: usize,
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
            poll_max: c.poll_max,
            host_board: c.host_board,
            large_job: c.large_job,
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
    /// Hand this request to the rank's clerk ([`crate::clerk`]), then call
    /// [`Rank::next`] again; give the clerk's reply to [`Rank::reply`] when
    /// it comes.
    Ask(Request),
    /// Send these ids to rank `to` (a host transfer, [`crate::transfer`]),
    /// which gives them to its [`Rank::receive`]; then call [`Rank::next`]
    /// again. They are no longer this rank's: until they arrive they are
    /// the message's.
    Send {
        /// The receiving rank.
        to: usize,
        /// The ids.
        ids: IdSet,
    },
    /// No work until the reply to the request out comes: wait for it, give
    /// it to [`Rank::reply`], then call [`Rank::next`] again.
    AwaitReply,
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
    /// This rank sent ids to another host's rank (a host transfer).
    Sent {
        /// The receiving rank.
        to: usize,
        /// The ids.
        ids: IdSet,
    },
    /// This rank received ids from another host's rank (a host transfer).
    Received {
        /// The sending rank.
        from: usize,
        /// The ids.
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
    /// Ids this rank took from others' SOS, or received in host transfers.
    pub taken: u64,
    /// Ids others took from this rank's SOS, or it sent in host transfers.
    pub given: u64,
    /// The same, by the helper's (or receiver's) distance: same host, same
    /// site, elsewhere.
    pub given_to: [u64; 3],
    /// SOS posted.
    pub sos_posted: u64,
    /// Signal-file errors recovered from.
    pub errors: u64,
}

impl RankReport {
    /// The realisations helpers took from the SOS of `reports`' ranks, by
    /// the helper's distance (same host, same site, elsewhere): the
    /// `help_d0`, `help_d1`, `help_d2` of the emulator's and the
    /// simulator's result lines.
    pub fn help_by_distance<'a>(reports: impl IntoIterator<Item = &'a RankReport>) -> [u64; 3] {
        reports.into_iter().fold([0; 3], |mut help, r| {
            for (h, g) in help.iter_mut().zip(r.given_to) {
                *h += g;
            }
            help
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup,
    Exchanging,
    Running,
}

/// The request out, as the rank must remember it to apply the reply.
#[derive(Clone, Debug, PartialEq)]
enum Asking {
    /// Opening the SOS `entry` with `tail` (taken from the lease).
    Post { entry: OpenEntry, tail: IdSet },
    /// Refreshing the own SOS, `give_back` from the lease to its tail.
    Refresh { give_back: IdSet },
    /// Extending the lease from the own SOS.
    Extend,
    /// Withdrawing the own SOS; `moving` to the slow shared board (posted
    /// there at the next check, which comes at once).
    Withdraw { forecast: f64, moving: bool },
    /// Taking ids from the back of the own SOS's tail for the host
    /// transfers `sends` (to rank, ids).
    Give { sends: Vec<(usize, u64)> },
    /// Searching for help; `early`: see [`Search::early`].
    Help { early: bool },
    /// Taking the closed SOS out of the index.
    Unlist,
}

impl Asking {
    /// The ids the request carries (the rank's, out of its lease).
    fn ids(&self) -> u64 {
        match self {
            Asking::Post { tail, .. } => tail.len(),
            Asking::Refresh { give_back } => give_back.len(),
            _ => 0,
        }
    }
}

/// A giving rank's host transfers between two plans. The plans are only as
/// fresh as the waves, and a wave comes only as fast as every rank calls
/// MPI: about every second in the emulator. A host that slows down as a
/// whole shows in its ranks' own speeds at once, in the waves a second or
/// more later: until the next plan, a rank whose host gave at the last one
/// sends what its own excess grew by since (by more than
/// [`crate::transfer::THRESHOLD`] of its work) to the same receivers, in
/// the same parts, up to as much again as the plan sent. (grid64s with
/// `large_job` 64, six seeds: 0.935 → 0.945 with the simulator's waves,
/// 0.872 → 0.906 with waves every second; the emulator 0.846, 0.852 →
/// 0.893, 0.880; without the bound 0.940 and 0.934, but hosts slowing in
/// 1,024 ranks 0.956 → 0.951 and 0.945 with waves every second; 10,000
/// ranks of fluct16's speeds 0.959 → 0.961 without jitter, eight seeds
/// with 2 % jitter 0.952 → 0.950.)
#[derive(Clone, Debug, Default)]
struct Shedding {
    /// The receivers and their parts.
    to: Vec<(usize, f64)>,
    /// The rank's excess right after the plan's sends.
    from: f64,
    /// Ids it may still shed before the next plan.
    left: f64,
}

impl Shedding {
    /// The sends of a rank whose excess is now `excess` at speed `v`:
    /// none unless it grew since the plan by more than the threshold's
    /// work.
    fn grown(&mut self, excess: u64, v: f64) -> Vec<(usize, u64)> {
        let grown = (excess as f64 - self.from).min(self.left);
        if self.to.is_empty() || grown <= v * crate::transfer::THRESHOLD {
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
    /// The board of the open SOS, or of the last one.
    level: Level,
    /// Last sequence number used.
    last_seq: u64,
    /// AID records of the open SOS already accounted.
    seen_aids: usize,
    /// After an unrecoverable error on its own SOS record, the rank stops posting.
    board_broken: bool,
    /// The request out (one at a time), and the request to hand out next.
    asking: Option<Asking>,
    outbox: Option<Request>,
    /// The speed, and the steady speed over [`STEADY_WINDOWS`] windows.
    speed: Speed,
    horizon: f64,
    next_check: f64,
    /// Since when the rank has had no work (a helper looking for an SOS).
    idle_since: Option<f64>,
    /// When an idle rank should search for help again, as its clerk's last
    /// search (which found nothing) said.
    search_at: Option<f64>,
    /// The index still lists this rank's closed SOS: its lock was busy; a
    /// check tries again, at most every four storage costs from `relist_at`.
    unlisted: bool,
    relist_at: f64,
    /// The ids computed, for the audit at finalize.
    audit: Audit,
    /// Consultations of the own open SOS in a row that found no new AID.
    quiet: u32,
    /// Seconds one consultation of the shared board takes (measured by the
    /// clerk).
    storage_cost: f64,
    /// Seconds one consultation of the host's board takes (node-local: 0
    /// until measured).
    host_cost: f64,
    /// Seconds one locked look at the record of a rank at distance 0, 1, 2
    /// takes (0 until measured): another site's storage is slower.
    look_cost: [f64; 3],
    /// When a check last consulted the rank's own SOS record (refresh,
    /// withdraw, post; lease extensions are paced by the lease).
    last_look: f64,
    /// When a lease extension last wrote fresh figures into the open SOS.
    extended_at: f64,
    /// When the rank last looked ahead for its next share.
    looked_ahead: f64,
    /// The job's forecast end, from the last termination wave.
    job_end: f64,
    /// Each host's ids left and speed at the last wave, as of `counted_at`
    /// seconds ([`Job::hosts`], [`Job::at`]).
    hosts: Arc<Vec<(u64, f64)>>,
    counted_at: f64,
    /// When the hosts of this rank's site will have computed what they own,
    /// at the last five waves (infinite before): see [`Rank::site_end`].
    site_ends: [f64; 5],
    /// When the ranks of this rank's host will have computed what they own,
    /// at the last wave (infinite before, or when its figures are unknown).
    host_end: f64,
    /// Idle ranks, and free ranks per host and site, at the last
    /// termination wave.
    idle: Arc<IdleMap>,
    /// Done with its own quota: a helper since (see [`Rank::is_free`]).
    free: bool,
    /// When the work of the last share taken ends at the speed it was
    /// taken at: a helper that keeps that speed is not late.
    share_end: f64,
    /// Ranks on this rank's host.
    host_ranks: usize,
    /// This job's hosts trade through MPI ([`Rank::trades`]).
    trading: bool,
    /// Host transfers this rank is to send: (to rank, ids), from the last
    /// wave's plan ([`crate::transfer::sends`]).
    sends: Vec<(usize, u64)>,
    /// Host transfers ready to go (to rank, the ids).
    outgoing: Vec<(usize, IdSet)>,
    /// Between two plans: what this rank sheds to the last plan's
    /// receivers when its excess grows ([`Shedding`]).
    shedding: Shedding,
    /// Received a host transfer not yet offered on the host's board: the
    /// next check posts what the rank will not finish by the job's end.
    offer: bool,
    /// Open SOS at the last termination wave.
    open_sos: u64,
    /// The distance to the nearest of them whose owner's host has no rank
    /// left to help it (0 when none): this rank's steals from there set
    /// how far ahead it looks ([`Rank::nearest_sos`]).
    sos_near: u8,
    /// Requests out that wrote the shared index at the last wave
    /// ([`Job::listing`]).
    listing: u64,
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
            level: Level::Shared,
            last_seq: 0,
            seen_aids: 0,
            board_broken: false,
            asking: None,
            outbox: None,
            search_at: None,
            unlisted: false,
            relist_at: 0.0,
            audit: Audit::default(),
            storage_cost: 0.0,
            host_cost: 0.0,
            quiet: 0,
            look_cost: [0.0; 3],
            last_look: f64::NEG_INFINITY,
            extended_at: f64::NEG_INFINITY,
            looked_ahead: f64::NEG_INFINITY,
            job_end: f64::INFINITY,
            hosts: Arc::default(),
            counted_at: 0.0,
            site_ends: [f64::INFINITY; 5],
            host_end: f64::INFINITY,
            idle: Arc::default(),
            free: false,
            share_end: f64::NEG_INFINITY,
            host_ranks: topology.members(topology.host_index(me)).len(),
            trading: crate::transfer::on(&topology, &params),
            sends: Vec::new(),
            outgoing: Vec::new(),
            shedding: Shedding::default(),
            offer: false,
            open_sos: 0,
            sos_near: 0,
            listing: 0,
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

    /// This rank.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The settings it decides with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Ids this rank owns now (lease, tail as last seen, and the ids of the
    /// request out).
    pub fn remaining(&self) -> u64 {
        self.lease.len() + self.tail.len() + self.asking.as_ref().map_or(0, Asking::ids)
    }

    /// True while the rank owns work: ids, a chunk handed out, an open SOS,
    /// a request out (its reply may bring ids).
    pub fn owns_work(&self) -> bool {
        self.remaining() > 0 || self.out.is_some() || self.sos.is_some() || self.asking.is_some()
    }

    /// True while a request of this rank that writes the shared board's
    /// open index is out: a post there, a withdrawal from there, an
    /// unlisting there.
    pub fn lists_shared(&self) -> bool {
        self.level == Level::Shared
            && matches!(
                self.asking,
                Some(Asking::Post { .. } | Asking::Withdraw { .. } | Asking::Unlist)
            )
    }

    /// The ids owned now (lease, tail as last seen, the chunk handed out),
    /// to name them in an error.
    pub fn owned(&self) -> IdSet {
        let mut ids = self.lease.clone();
        ids.extend(&self.tail);
        if let Some((_, chunk)) = &self.out {
            ids.insert(chunk.clone());
        }
        match &self.asking {
            Some(Asking::Post { tail, .. }) => ids.extend(tail),
            Some(Asking::Refresh { give_back }) => ids.extend(give_back),
            _ => {}
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

    /// What a termination wave says of the whole job. The job's forecast
    /// end, `at + (total − completed) / speed` (dated by the times the
    /// counts were taken, not by the wave's completion, which comes up to
    /// an interval later), caps the shares helpers take and is the
    /// reference of lateness on slow storage; the idle ranks tell how many
    /// helpers each open SOS may expect.
    pub fn observe_job(&mut self, job: Job) {
        if job.speed > 0.0 {
            self.job_end = job.at + self.total.saturating_sub(job.completed) as f64 / job.speed;
        }
        self.counted_at = job.at;
        let host = self.topology.host_index(self.me);
        if !job.moves.is_empty() && self.phase == Phase::Running {
            let excess = self.excess(job.at);
            self.sends = crate::transfer::sends(&job, &self.topology, self.me, excess);
            let total: u64 = self.sends.iter().map(|s| s.1).sum();
            self.shedding = Shedding {
                to: (self.sends.iter())
                    .map(|&(to, n)| (to, n as f64 / total as f64))
                    .collect(),
                from: excess.saturating_sub(total) as f64,
                left: total as f64,
            };
        }
        self.host_end = job.host_end(host);
        self.open_sos = job.reachable_open(host);
        self.sos_near = self.nearest_sos(&job);
        self.listing = job.listing;
        // (Only early shares from the rank's own site, where there are
        // others, are sized to it: see `Clerk::early_site_end`.)
        if self.topology.sites() > 1 {
            let site = self.topology.hosts_nearer(self.me, 2);
            self.site_ends.rotate_left(1);
            self.site_ends[4] = job.at + hosts_end(&job.hosts, site);
        }
        self.hosts = job.hosts;
        self.idle = job.idle;
    }

    /// The shell saw the open index change (a watcher woke the rank): the
    /// next look for help reads it, whatever the last wave said.
    pub fn index_changed(&mut self) {
        self.index_changed = true;
    }

    /// True once the rank has run out of its own quota (it is a helper,
    /// idle or computing ids taken from others), or will within one grace
    /// of the next wave (the figures of a wave serve until the next)
    /// without asking for help, or took a share early and has no SOS open:
    /// the first helpers of an SOS near it (see
    /// [`crate::verdict::Status::free`]). (Ranks busy with early shares
    /// counted as not free, and the other site's ranks, no longer waiting
    /// their grace, took 17 % and 12 % of sites16-one's help in the
    /// emulator; counted free, none in two runs. Within one grace of the
    /// wave itself, the slowed rank's host-mates were free or not by a few
    /// ids at the last wave before their quotas ran out, and the other
    /// site took 0 to 32 ids, 0.942 to 0.958; with the next wave's grace
    /// none in 19 runs, 0.947 to 0.955.)
    pub fn is_free(&self) -> bool {
        let v = self.speed.get();
        self.free
            || (self.share_end.is_finite() && self.sos.is_none())
            || (self.phase == Phase::Running
                && self.sos.is_none()
                && v > 0.0
                && self.remaining() as f64 <= v * (self.params.grace + self.params.check_interval))
    }

    /// When the hosts of this rank's site will have computed what they own:
    /// the median of the last five waves' forecasts (infinite before the
    /// third). A wave adds up each host's ids as its ranks joined it, and a
    /// share stolen between the joins of its helper and of its owner (who
    /// counts its tail as of its last look, every other wave or so) counts
    /// twice, or not at all: one wave in four moved sites16-one's site end
    /// by a share's worth, 0.1 s, and the early shares sized to it by 5 ids
    /// (emulator). The median of three still let through a jump that lasted
    /// two waves.
    fn site_end(&self) -> f64 {
        let mut ends = self.site_ends;
        ends.sort_by(f64::total_cmp);
        ends[2]
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

    /// True while an SOS of this rank is open on its host's board.
    pub fn sos_on_host(&self) -> bool {
        self.sos.is_some() && self.level == Level::Host
    }

    /// True while a request to the clerk is out.
    pub fn asking(&self) -> bool {
        self.asking.is_some()
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
    pub fn next(&mut self, now: f64) -> Result<Step> {
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
            self.check(now);
        }
        loop {
            if let Some(request) = self.outbox.take() {
                return Ok(Step::Ask(request));
            }
            if let Some((to, ids)) = self.outgoing.pop() {
                return Ok(Step::Send { to, ids });
            }
            if !self.sends.is_empty() && self.asking.is_none() {
                self.give(now);
                continue;
            }
            let chunk_len = (self.speed.get() * self.params.chunk_time) as u64;
            if let Some(chunk) = self.lease.pop_chunk(chunk_len) {
                self.out = Some((now, chunk.clone()));
                return Ok(Step::Compute(chunk));
            }
            if self.asking.is_some() {
                return Ok(Step::AwaitReply);
            }
            if self.sos.is_some() {
                self.extend_lease(now);
                continue;
            }
            if self.params.mode != Mode::Full || self.phase != Phase::Running {
                return Ok(Step::Idle {
                    until: f64::INFINITY,
                });
            }
            self.free = true;
            if let Some(until) = self.help(now, 0.0) {
                return Ok(Step::Idle { until });
            }
        }
    }

    /// The clerk's reply to the request out. An error is one the
    /// rank cannot recover from (its own SOS record cannot be written, and
    /// the truth of what helpers took cannot be rebuilt): the rank fails.
    pub fn reply(&mut self, reply: Reply) -> Result<()> {
        let Some(asking) = self.asking.take() else {
            return Err(Error::Internal("a reply without a request".into()));
        };
        if let Some(seconds) = reply.seconds {
            let level = (!matches!(asking, Asking::Help { .. })).then_some(self.level);
            self.observe(seconds, reply.looks, level);
        }
        for error in reply.errors {
            self.report.errors += 1;
            self.events.push(Event::Recovered { error });
        }
        match (asking, reply.outcome) {
            (_, Outcome::Failed(e)) => return Err(e),
            (Asking::Post { entry, tail }, Outcome::Posted) => {
                self.events.push(Event::SosPosted {
                    seq: entry.seq,
                    tail: tail.clone(),
                    forecast: entry.forecast,
                });
                self.sos = Some(entry);
                self.tail = tail;
                self.seen_aids = 0;
                self.unlisted = false;
                self.report.sos_posted += 1;
            }
            (
                asking @ (Asking::Refresh { .. }
                | Asking::Extend
                | Asking::Withdraw { .. }
                | Asking::Give { .. }),
                Outcome::Looked {
                    aids,
                    tail,
                    lease,
                    closed,
                    listed,
                },
            ) => {
                let seq = self.sos.as_ref().map_or(0, |e| e.seq);
                self.account_aids(seq, aids);
                self.tail = tail;
                if let Asking::Withdraw { forecast, moving } = asking {
                    self.events.push(Event::SosWithdrawn {
                        seq,
                        reclaimed: lease.clone(),
                        forecast,
                    });
                    if moving {
                        self.next_check = f64::NEG_INFINITY;
                    }
                } else if closed {
                    self.events.push(Event::SosClosed { seq });
                }
                match asking {
                    Asking::Give { sends } => self.ready(sends, lease),
                    _ => self.lease.extend(&lease),
                }
                if closed {
                    self.sos = None;
                    self.unlisted = listed;
                }
            }
            (Asking::Help { early }, Outcome::Helped { taken, wake }) => match taken {
                Some((owner, seq, ids)) => {
                    self.took(owner, seq, ids);
                    self.idle_since = None;
                    self.share_end = forecast(wake, self.remaining(), self.speed.get());
                }
                // (An early look that found nothing does not hold back the
                // searches of a rank that runs out of work.)
                None if early => {}
                None => self.search_at = Some(wake),
            },
            (Asking::Unlist, Outcome::Unlisted { listed }) => self.unlisted = listed,
            (
                Asking::Post { .. }
                | Asking::Refresh { .. }
                | Asking::Extend
                | Asking::Withdraw { .. }
                | Asking::Give { .. },
                Outcome::Recovered {
                    taken,
                    back,
                    broken,
                    listed,
                },
            ) => {
                // The clerk reset the record under the next sequence number
                // (the SOS posted or open is the last one).
                self.lease.remove(&taken);
                self.lease.extend(&back);
                self.tail = IdSet::new();
                self.sos = None;
                self.last_seq += 1;
                self.board_broken |= broken;
                self.unlisted = listed;
            }
            (asking, outcome) => {
                return Err(Error::Internal(format!(
                    "the reply {outcome:?} does not answer {asking:?}"
                )));
            }
        }
        Ok(())
    }

    /// Ids this rank will not have computed by the job's forecast end at
    /// its speed (0 before the first wave): its part of its host's excess.
    pub fn excess(&self, now: f64) -> u64 {
        let v = self.speed.get();
        if !self.job_end.is_finite() || v <= 0.0 {
            return 0;
        }
        let can = (v * (self.job_end - now).max(0.0)).floor() as u64;
        self.remaining().saturating_sub(can)
    }

    /// Make the host transfers planned ready: from the back of the own
    /// SOS's tail (asked of the clerk: helpers of the host may take from it
    /// meanwhile), else from the back of the lease beyond a lease's worth.
    fn give(&mut self, now: f64) {
        let sends = std::mem::take(&mut self.sends);
        if self.sos.is_some() {
            let n = sends.iter().map(|s| s.1).sum();
            self.look(OwnOp::Give { n }, Asking::Give { sends });
            return;
        }
        let spare = self.lease.len().saturating_sub(self.lease_len(now));
        let ids = self
            .lease
            .take_back(spare.min(sends.iter().map(|s| s.1).sum()));
        self.ready(sends, ids);
    }

    /// Cut `ids` into the host transfers `sends` (in order, as far as they
    /// go) and make them ready to send.
    fn ready(&mut self, sends: Vec<(usize, u64)>, mut ids: IdSet) {
        for (to, n) in sends {
            let part = ids.take_front(n);
            if part.is_empty() {
                break;
            }
            self.report.given += part.len();
            let d = self.topology.distance(self.me, to).min(2);
            self.report.given_to[d as usize] += part.len();
            self.events.push(Event::Sent {
                to,
                ids: part.clone(),
            });
            self.outgoing.push((to, part));
        }
        self.lease.extend(&ids);
    }

    /// Ids another host's rank sent this one (a host transfer): its own now,
    /// and the next call checks at once.
    pub fn receive(&mut self, from: usize, ids: IdSet, now: f64) {
        self.report.taken += ids.len();
        self.lease.extend(&ids);
        self.events.push(Event::Received { from, ids });
        self.offer = true;
        self.idle_since = None;
        self.search_at = None;
        self.next_check = self.next_check.min(now);
    }

    /// The clerk took `ids` from the SOS `seq` of `owner` for this rank.
    fn took(&mut self, owner: usize, seq: u64, ids: IdSet) {
        self.report.taken += ids.len();
        self.lease.extend(&ids);
        self.events.push(Event::AidGiven { owner, seq, ids });
    }

    /// AID records that arrived on the own SOS `seq`.
    fn account_aids(&mut self, seq: u64, aids: Vec<Aid>) {
        self.quiet = if aids.is_empty() { self.quiet + 1 } else { 0 };
        self.seen_aids += aids.len();
        for aid in aids {
            self.report.given += aid.ids.len();
            // (A helper number comes from a file: no rank beyond the job's.)
            if aid.helper < self.topology.ranks() {
                let d = self.topology.distance(self.me, aid.helper).min(2);
                self.report.given_to[d as usize] += aid.ids.len();
            }
            self.events.push(Event::AidReceived { seq, aid });
        }
    }

    /// At the job's end (every id computed): an owner whose SOS is still
    /// open asks to withdraw it (its tail is empty by then), so that the
    /// AID records of helpers that drained it since its last look count in
    /// what it gave. `None` without an open SOS, or with a request out
    /// (whose reply comes first).
    pub fn last_look(&mut self, now: f64) -> Option<Request> {
        if self.sos.is_none() || self.asking.is_some() {
            return None;
        }
        self.withdraw(now, false);
        self.outbox.take()
    }

    /// Hand `request` to the clerk at the next step.
    fn ask(&mut self, request: Request, asking: Asking) {
        self.outbox = Some(request);
        self.asking = Some(asking);
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
    /// was called: the library's own time (waiting, logging) is not
    /// computing time.
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
    /// helpers; see [`Rank::job_left`]), and at least two consultations of
    /// the board's worth (the next extension comes while it computes).
    fn lease_len(&self, now: f64) -> u64 {
        let left = (self.job_left(now) - self.risk()).max(2.0 * self.cost());
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

    /// Seconds between two looks at an open SOS, and of work per lease:
    /// the configured check interval, or [`OWN_PERIOD`] consultations of the
    /// board on slow storage.
    fn interval(&self) -> f64 {
        self.interval_on(self.cost())
    }

    /// [`Rank::interval`] on a board whose consultation costs `cost`.
    fn interval_on(&self, cost: f64) -> f64 {
        self.params.check_interval.max(OWN_PERIOD * cost)
    }

    /// True when an SOS on a board whose consultation costs `cost` costs
    /// more than the configured lateness ([`SOS_COST`]): slow storage.
    fn slow(&self, cost: f64) -> bool {
        SOS_COST * cost > self.params.late_threshold
    }

    /// Seconds one consultation of the rank's own SOS record costs: on the
    /// board its SOS is on, or would go on. An SOS on the host's board
    /// costs the shared storage's latency nothing, so that neither its
    /// threshold nor its leases are those of slow storage.
    fn cost(&self) -> f64 {
        let level = if self.sos.is_some() {
            self.level
        } else {
            self.post_level()
        };
        match level {
            Level::Host => self.host_cost,
            Level::Shared => self.storage_cost,
        }
    }

    /// Seconds a post on the shared board waits for the open index's
    /// lock: a consultation for each request that writes the index and
    /// was out at the last wave. A post or a move to the shared board needs
    /// that much more lateness, and the rank keeps that much more work
    /// while its post waits. (Without it, with many ranks on slow storage
    /// the late ranks' posts queued on the index for 10 to 30 s, and their
    /// owners waited with them: simulator, fluct16's speeds, 16 ranks per
    /// host, 256 ranks at 50 ms 0.572 → 0.910 against mode warmup's 0.600,
    /// 1,024 ranks at 20 ms 0.249 → 0.744 against 0.558; on four hosts of
    /// four ranks fluct16 at 50 ms 0.883 → 0.892 and the rest unchanged.
    /// Counting the queue in the consultation's cost instead, and so in
    /// every threshold and lease, lost on four hosts: step16 at 200 ms
    /// 0.771 → 0.701.)
    fn index_wait(&self) -> f64 {
        self.storage_cost * self.listing as f64
    }

    /// [`Rank::index_wait`] for a post on the board at `level`.
    fn level_wait(&self, level: Level) -> f64 {
        match level {
            Level::Host => 0.0,
            Level::Shared => self.index_wait(),
        }
    }

    /// Seconds between two consultations of the own open SOS (lease
    /// extensions and checks): one interval, doubling up to four while
    /// consultations in a row find that no helper took anything, so that
    /// owners nobody helps yet leave the shared storage alone. Where hosts
    /// trade through MPI every SOS is on its host's board, node-local, and
    /// a look costs nothing: one interval (simulator, fluct16's speeds, 2 %
    /// jitter, eight seeds: 10,000 ranks 0.946 → 0.951, 1,024 ranks 0.947 →
    /// 0.949; in smaller jobs the quiet owners' longer leases are tuned in).
    fn own_period(&self) -> f64 {
        let quiet = if self.level == Level::Host && self.trading {
            0
        } else {
            self.quiet.min(2)
        };
        self.interval() * f64::from(1u32 << quiet)
    }

    /// A consultation of the own record on the shared board took
    /// `seconds`: a moving average, the storage cost, paces the looks at the
    /// board and sets the least lateness and tail worth an SOS and the
    /// lease's least length.
    pub fn observe_storage(&mut self, seconds: f64) {
        self.observe(seconds, (0, 0), Some(Level::Shared));
    }

    /// A request took `seconds` (the clerk measures it): a consultation of
    /// the own record on the board at `level`, or a search for help
    /// (`None`). A search that locked `looks.1` other ranks' records on the
    /// shared board, the farthest at distance `looks.0`, measures a steal
    /// that far, which sizes the shares taken that far.
    fn observe(&mut self, seconds: f64, looks: (u8, u32), level: Option<Level>) {
        let average = |c: f64, x: f64| if c == 0.0 { x } else { 0.75 * c + 0.25 * x };
        let seconds = seconds.max(0.0);
        match level {
            // (Where hosts trade through MPI the shared storage is never
            // consulted: its cost decides nothing.)
            Some(Level::Shared) if self.trading => {}
            Some(Level::Shared) => self.storage_cost = average(self.storage_cost, seconds),
            Some(Level::Host) => self.host_cost = average(self.host_cost, seconds),
            None => {}
        }
        if let (d, n @ 1..) = looks {
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

    /// The periodic check: speed, progress line, and the SOS decisions,
    /// made while no request is out.
    fn check(&mut self, now: f64) {
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
        if self.params.mode != Mode::Full
            || self.phase != Phase::Running
            || self.board_broken
            || self.asking.is_some()
            || !self.sends.is_empty()
        {
            return;
        }
        self.sends = self.shedding.grown(self.excess(now), v);
        if !self.sends.is_empty() {
            return;
        }
        if self.unlisted && now >= self.relist_at {
            self.relist_at = now + self.look_ahead();
            self.ask(Request::Unlist(self.level), Asking::Unlist);
            return;
        }
        // Slow storage: an SOS ([`SOS_COST`]) costs more than the configured
        // lateness. Only there does a post need lateness at the steady speed
        // and at the recent one ([`POST_COST`]), and only there does a rank
        // ask ahead of need (the next lease, an early share): on fast
        // storage there is no latency to hide, and the extra looks cost
        // (emulator, fluct16 at 0 s: 4,900 operations against 2,600,
        // efficiency 0.94 → 0.90). The SOS's cost is that of the board it is
        // on, or would go on: on the host's board it is next to nothing
        // whatever the shared storage costs (emulator, one host, 200 ms per
        // shared operation: step16 0.69 and 0.90 → 0.95, fluct16 0.75 → 0.96).
        let offered = std::mem::take(&mut self.offer);
        let cost = self.cost();
        let slow = self.slow(cost);
        let shared_slow = self.slow(self.storage_cost);
        // A helper late on its share while ranks idle posts at half that
        // lateness: their time is free, and the share would otherwise end
        // the job (a helper 5.4 s late at 1.6 s a consultation computed
        // alone for 6 s while 15 ranks idled: simulator, step16 on four
        // hosts at 200 ms, efficiency 0.53).
        let sos_cost = if self.free && self.idle.ranks > 0 {
            SOS_COST / 2.0
        } else {
            SOS_COST
        };
        // Whether a new post on a board whose consultation costs `cost`
        // pays: lateness of the threshold, at the steady speed on slow
        // storage, and of [`POST_COST`] consultations at the recent one
        // unless ranks idle.
        let steady = forecast(now, remaining, v.max(self.speed.steady()));
        let post_pays = |reference: f64, cost: f64, wait: f64| {
            let slow = self.slow(cost);
            let threshold = self.params.late_threshold.max(sos_cost * cost) + wait;
            (if slow { steady } else { tau }) - reference >= threshold
                && (!slow || self.idle.ranks > 0 || tau - reference >= POST_COST * cost)
        };
        // On slow shared storage the reference is the job's forecast end
        // once the waves tell it, wherever the SOS goes: a horizon that the
        // job as a whole will miss is no reason for an SOS whose steals are
        // dear (every rank of step16 was late against it after the slowdown,
        // and helpers that took work posted in turn: at 50 ms 0.76 → 0.89). On fast storage the
        // horizon, or the job's end when that comes earlier: posting
        // against the job's end alone lost (emulator, when the waves'
        // forecast end still came a wave late: fluct16 0.96 over two runs →
        // 0.92 over four, step16 0.95 → 0.94, sites16 0.92 → 0.90; the
        // simulator with it dated by the counts: fluct16 0.941 → 0.937,
        // step16 0.946 → 0.943 over 12 seeds). The reference of a rank that
        // took a share (a helper, or a rank that took one early, before its
        // own quota ran out) is the job's end, and on fast storage no sooner
        // than the end of the share: its share was sized to end then, and a
        // helper that posted against the horizon handed its share on to
        // other helpers in chains of SOS (simulator, sites16-one 0.758 →
        // 0.834 over 12 seeds; sites16 with early shares 0.900 → 0.923).
        // (Against the horizon, ranks on four hosts that took help from
        // the shared board posted on their hosts' boards in turn: simulator,
        // step16 at 50 ms, 0.921 → 0.872 over 12 seeds.)
        let took = self.free || self.share_end.is_finite();
        let reference = if (shared_slow || took) && self.job_end.is_finite() {
            self.job_end
        } else {
            self.horizon.min(self.job_end)
        }
        .max(if shared_slow {
            f64::NEG_INFINITY
        } else {
            self.share_end
        });
        // An open SOS stays open until the rank is no longer late by
        // `late_threshold` (the paper's δτ), whatever a post needs: keeping
        // it costs the owner nothing (its clerk looks), and an owner that
        // withdrew while still 0.9 s late ended step16 at 50 ms 0.9 s after
        // the others (emulator: 0.87 to 0.91 → 0.914, 0.925).
        // A host transfer received is offered on the host's board as soon
        // as the rank will not finish it by the job's end: it came for the
        // host's free ranks.
        let offer = offered && tau - self.job_end >= self.params.check_interval;
        let late = match self.sos {
            Some(_) => tau - reference >= self.params.late_threshold,
            None => offer || post_pays(reference, cost, self.level_wait(self.post_level())),
        };
        // On slow shared storage an SOS on the host's board moves to the
        // shared board only when it would be posted there now, and is
        // posted there as soon as it is withdrawn: withdrawn any sooner, it
        // was out of the host's ranks' reach until the owner was late
        // enough for a post (emulator, fluct16 on four hosts at 50 ms: a
        // fast rank withdrew 1.8 s late at 15.2 s and posted again at
        // 16.8 s, while its host's three other ranks idled from 15.7 s to
        // the job's end at 17.5 s). A check costs nothing: the move is
        // weighed at each, not only at the looks at the SOS.
        let moves = late
            && match self.sos {
                Some(_) if self.level != self.post_level() => match self.level {
                    Level::Shared => true,
                    Level::Host => {
                        !shared_slow || post_pays(reference, self.storage_cost, self.index_wait())
                    }
                },
                _ => false,
            };
        let hasten = moves && shared_slow;
        // The lease runs out before a reply could come: ask for the next
        // one now, while the rank still computes.
        if slow && self.sos.is_some() && late && self.lease_short() {
            self.extend_lease(now);
            return;
        }
        // An open SOS is consulted at most once per interval: a check
        // itself is free, a look at the board is not. Unless the lease has
        // grown longer than the rank can use (it slowed down since, or the
        // job's end came closer) by two consultations' worth of its work or
        // more (two check intervals' at least): those ids belong in the
        // tail, for helpers. On slow storage an owner posted while its
        // speed estimate still lagged a slowdown, kept a lease it could
        // not finish, and consulted its SOS again only seconds later.
        let excess = self.lease.len().saturating_sub(self.lease_len(now)) as f64;
        // (A host transfer received while the SOS is open goes to its tail
        // at once: it came for the host's free ranks.)
        let give_back =
            excess > 0.0 && (offered || excess >= 2.0 * v * cost.max(self.params.check_interval));
        if self.sos.is_some() && now < self.last_look + self.own_period() && !give_back && !hasten {
            return;
        }
        self.last_look = now;
        match (late, self.sos.is_some()) {
            (true, false) => self.post(now, v, tau),
            // Its host will be late as a whole: the SOS moves to the shared
            // board (on slow storage whatever the lease extensions wrote:
            // they come every interval on the host's board).
            (true, true) if hasten => self.withdraw(tau, true),
            // To the shared board at the look: lease extensions that came
            // more often than the looks held the move back for as long as
            // they came, behind the arm below (emulator, sites16s: the
            // slowed host's SOS stayed on its board to the job's end and
            // no other host helped, 0.41 → 0.63; `bench.sh sim` 1,024
            // ranks 0.956 → 0.967, but 64 ranks 0.982 → 0.976, and the
            // shared storage sees 20 to 80 % more operations). Back to the
            // host's board only behind it: moving back at once lost in the
            // simulator (2 % jitter, 12 seeds: sites16-one 0.936 → 0.917,
            // step16 on four hosts 0.987 → 0.972).
            (true, true) if moves && self.level == Level::Host => self.withdraw(tau, false),
            // A lease extension wrote fresh figures not long ago.
            (true, true) if now < self.extended_at + self.own_period() && !give_back => {}
            (true, true) if moves => self.withdraw(tau, false),
            (true, true) => self.refresh(now, v, tau),
            (false, true) => self.withdraw(tau, false),
            // About to run out of work, or early against the job's forecast
            // end: ask for the next share now, so that the wait for a busy
            // SOS lock and the steal's file time pass while this rank still
            // computes ([`LOOK_AHEAD`]). Steals from the shared board set
            // the pace, wherever this rank's own SOS would go. On fast
            // storage too a rank early against the job's end looks ahead,
            // for lasting SOS on other hosts only ([`Search::early`]): a
            // whole host or site that slowed down is otherwise helped only
            // once the other ranks' quotas run out, in the job's last
            // seconds (emulator, sites16: about 0.91 → 0.94).
            (false, false)
                if remaining > 0
                    && self.open_sos > 0
                    && (tau - now < self.look_ahead()
                        || tau
                            < self.job_end
                                - EARLY_SLACK * self.steal_cost(0)
                                - self.params.check_interval)
                    && now >= self.looked_ahead + self.look_pace(tau - now)
                    && (!self.looks_early(tau - now) || self.host_late_elsewhere()) =>
            {
                self.looked_ahead = now;
                self.help(now, tau - now);
            }
            (false, false) => {}
        }
    }

    /// True when the lease holds less work than a reply takes to come,
    /// plus a check interval (checks come that often).
    fn lease_short(&self) -> bool {
        let v = self.speed.get();
        v > 0.0 && (self.lease.len() as f64) < v * (self.cost() + self.params.check_interval)
    }

    /// Whether a look ahead with `busy_for` seconds of own work left is an
    /// early one on fast shared storage ([`Search::early`]): the rank is
    /// early against the job's end, not about to run out of work. (On slow
    /// storage a rank looks ahead early for any SOS: its steals are dear,
    /// and the waits for them are what looking ahead hides.)
    fn looks_early(&self, busy_for: f64) -> bool {
        busy_for > self.look_ahead() && !self.slow(self.storage_cost)
    }

    /// Seconds between two looks ahead of a rank with `busy_for` seconds of
    /// own work left: an interval of the shared board, or for an early look
    /// the job's share of [`EARLY_LOOKS`] when that is longer.
    fn look_pace(&self, busy_for: f64) -> f64 {
        let interval = self.interval_on(self.storage_cost);
        if self.looks_early(busy_for) {
            interval.max(self.topology.ranks() as f64 / EARLY_LOOKS)
        } else {
            interval
        }
    }

    /// Whether another host will be late as a whole, at the last wave's
    /// figures, by more than a grace of its speed: only then are there
    /// SOS worth an early look on fast storage ([`Search::early`]).
    fn host_late_elsewhere(&self) -> bool {
        let mine = self.topology.host_index(self.me);
        let left = self.job_end - self.counted_at;
        (0..self.hosts.len())
            .any(|h| h != mine && hosts_late(&self.hosts, [h], left, self.params.grace))
    }

    /// Seconds of own work left at which a rank looks for its next share:
    /// [`LOOK_AHEAD`] steals (none on fast storage), from the nearest SOS
    /// of a host whose every rank is late ([`Rank::nearest_sos`]).
    fn look_ahead(&self) -> f64 {
        LOOK_AHEAD * self.steal_cost(self.sos_near)
    }

    /// The distance to the nearest other host whose ranks all have an open
    /// SOS, when some SOS that this rank can reach are on the shared board
    /// (where other hosts' SOS go): no rank of that host helps the others,
    /// so their steals come from farther, at their cost (0 when there is
    /// none).
    /// Helpers 20 or 40 ms per operation away asked when their work ran
    /// out and waited for their share: simulator, sites16 with a warm-up
    /// of 0.5 s, a rank of the slowed host's site idled 0.18 s; with this,
    /// none, and 16 seeds with 2 % jitter 0.952 → 0.966; the emulator
    /// 0.976, 0.946 → 0.977, 0.976, 0.973. (For any SOS, the other host's
    /// helpers of sites16-one took shares while its owner's host-mates were
    /// about to, and held the owner's lock for 0.12 s each: 0.95 → 0.945
    /// in the emulator; `scripts/BENCHMARKS.md`.)
    fn nearest_sos(&self, job: &Job) -> u8 {
        let host = self.topology.host_index(self.me);
        if job.reachable_open(host) <= job.host_open.get(host).copied().unwrap_or(0) {
            return 0;
        }
        let members = |h: usize| self.topology.members(h);
        (0..self.topology.hosts())
            .filter(|&h| h != host && !members(h).is_empty())
            .filter(|&h| members(h).iter().all(|&r| bit(&job.sos_ranks, r)))
            .map(|h| self.topology.distance(self.me, members(h)[0]))
            .min()
            .unwrap_or(0)
    }

    /// Open an SOS offering all but one lease of the quota.
    fn post(&mut self, now: f64, v: f64, tau: f64) {
        // The tail must hold more work than the post takes to come, and the
        // lease the work of the wait on the index's lock.
        self.quiet = 0;
        let level = self.post_level();
        let keep = self.lease_len(now) + (v * self.level_wait(level)).ceil() as u64;
        let least_tail = (v * self.cost()).ceil() as u64;
        if self.lease.len() <= keep + least_tail {
            return;
        }
        let tail = self.lease.take_back(self.lease.len() - keep);
        self.last_seq += 1;
        let entry = OpenEntry {
            rank: self.me,
            seq: self.last_seq,
            forecast: tau,
            opened_at: now,
            speed: v,
        };
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
        let asking = Asking::Post {
            entry: entry.clone(),
            tail,
        };
        self.level = level;
        self.ask(Request::Post { entry, post, level }, asking);
    }

    /// The board an SOS goes on: the host's, unless there is none or the
    /// host as a whole will be late against the job's forecast end (its
    /// ranks will not be free in time to close the SOS among themselves)
    /// and there are other hosts to help. (On one host the waves' figures
    /// still called it late at times, ids that helpers took counted by
    /// their owners too until these saw the AID: the four slowed ranks of
    /// step16 moved their SOS to the shared board, where only the same
    /// ranks could help, through the storage's latency.) Late as a whole
    /// means late by [`SOS_COST`] consultations of the shared board at
    /// least: help from other hosts comes only after a post and a steal
    /// there, and until the SOS moves the host's own ranks can close it
    /// for free (emulator, fluct16 on four hosts at 200 ms: a rank moved
    /// its SOS as its host's ranks were about to be free, it was posted
    /// 2 s later and helped 2 s after that, and the job ended 4 s late;
    /// efficiency 0.69 or 0.85 from run to run, 0.84 to 0.85 with this
    /// bound). Where hosts trade through MPI ([`crate::transfer`]) every
    /// SOS stays on the host's board.
    fn post_level(&self) -> Level {
        let host_late = self.host_lateness().is_some() && self.topology.hosts() > 1;
        if self.params.host_board && (!host_late || self.trading) {
            Level::Host
        } else {
            Level::Shared
        }
    }

    /// Seconds by which this rank's host as a whole will be late against the
    /// job's forecast end, at the last wave's figures, when that is late
    /// enough for help from other hosts ([`Rank::post_level`]).
    fn host_lateness(&self) -> Option<f64> {
        let threshold =
            self.params.late_threshold.max(SOS_COST * self.storage_cost) + self.index_wait();
        let late = self.host_end - self.job_end;
        (late >= threshold).then_some(late)
    }

    /// Whether this rank is at least as fast as its host's mean speed at
    /// the last wave ([`crate::verdict::Status::fast`]).
    pub fn fast(&self) -> bool {
        self.speed.get() * self.host_ranks as f64 >= self.host_speed()
    }

    /// This rank's host's summed speed at the last wave.
    fn host_speed(&self) -> f64 {
        let h = self.topology.host_index(self.me);
        self.hosts.get(h).map_or(0.0, |h| h.1)
    }

    /// Ask for a look at the own open SOS that does `op`.
    fn look(&mut self, op: OwnOp, asking: Asking) {
        let Some(entry) = self.sos.clone() else {
            return;
        };
        let request = Request::Own {
            entry,
            seen: self.seen_aids,
            op,
            tail: self.tail.clone(),
            level: self.level,
        };
        self.ask(request, asking);
    }

    /// Write fresh figures into the open SOS and learn what helpers took.
    fn refresh(&mut self, now: f64, v: f64, tau: f64) {
        // A lease longer than the rank can now use (it slowed down, or the
        // job's end came closer) goes back to the tail, for helpers.
        let keep = self.lease_len(now);
        let mut give_back = IdSet::new();
        if self.lease.len() > keep {
            give_back = self.lease.take_back(self.lease.len() - keep);
        }
        let op = OwnOp::Refresh {
            figures: Figures {
                speed: v,
                forecast: tau,
                at: now,
            },
            lease: self.lease.len(),
            give_back: give_back.clone(),
        };
        self.look(op, Asking::Refresh { give_back });
    }

    /// No longer late: close the SOS and take the unclaimed tail back.
    fn withdraw(&mut self, tau: f64, moving: bool) {
        self.look(
            OwnOp::Withdraw,
            Asking::Withdraw {
                forecast: tau,
                moving,
            },
        );
    }

    /// The lease runs short while the SOS is open: fill it up to one
    /// interval of work from the front of the tail; the SOS closes when the
    /// tail is empty.
    fn extend_lease(&mut self, now: f64) {
        // The record is written anyway: with fresh figures, so that the
        // next check need not look again.
        let v = self.speed.get();
        let op = OwnOp::Extend {
            figures: Figures {
                speed: v,
                forecast: forecast(now, self.remaining(), v),
                at: now,
            },
            n: self.lease_len(now).saturating_sub(self.lease.len()).max(1),
            lease: self.lease.len(),
        };
        self.extended_at = now;
        self.look(op, Asking::Extend);
    }

    /// The quota is exhausted, or about to be (`busy_for` seconds of own
    /// work left): ask the clerk to search the open SOS for help to take
    /// ([`crate::clerk`] says how). `None` when the search is asked for,
    /// else when to look again.
    fn help(&mut self, now: f64, busy_for: f64) -> Option<f64> {
        let idle_since = if busy_for > 0.0 {
            now
        } else {
            *self.idle_since.get_or_insert(now)
        };
        // On slow storage a look at the index is dear: look at most once
        // per storage cost (a watcher still wakes the rank at once).
        let poll = self.params.poll_interval.max(self.storage_cost);
        let woken = std::mem::take(&mut self.index_changed);
        // The last termination wave saw no SOS open, and no watcher saw the
        // index change since: nothing to read (idle ranks waiting for the
        // verdict read no file).
        if self.open_sos == 0 && !woken {
            return Some(now + poll);
        }
        // An idle rank's last search found nothing, and said when to look
        // again.
        if busy_for == 0.0
            && let Some(at) = self.search_at.take()
            && now < at
            && !woken
        {
            return Some(at);
        }
        let early = self.looks_early(busy_for);
        let search = self.search(now, (busy_for, idle_since), woken, poll, early);
        self.ask(Request::Help(search), Asking::Help { early });
        None
    }

    /// A search for help from `now`, with `busy` seconds of own work left
    /// and idle since then, `early` as [`Search::early`] says.
    fn search(
        &self,
        now: f64,
        (busy_for, idle_since): (f64, f64),
        woken: bool,
        poll: f64,
        early: bool,
    ) -> Search {
        Search {
            now,
            busy_for,
            idle_since,
            woken,
            poll,
            storage_cost: self.storage_cost,
            interval: self.interval_on(self.storage_cost),
            host_cost: self.host_cost,
            host_interval: self.interval_on(self.host_cost),
            policy: self.params.help_policy,
            speed: self.speed.get(),
            job_left: self.job_left(now),
            steal_cost: [0, 1, 2].map(|d| self.steal_cost(d)),
            risk: self.risk(),
            idle: self.idle.clone(),
            early,
            hosts: self.hosts.clone(),
            counted_at: self.counted_at,
            site_end: self.site_end(),
            job_end: self.job_end,
            shared: !self.trading,
        }
    }

    /// Whether this job's hosts trade through MPI ([`crate::transfer::on`]):
    /// then every SOS stays on its host's board, and no rank reads or
    /// writes the shared board.
    pub fn trades(&self) -> bool {
        self.trading
    }
}

#[cfg(test)]
mod tests {
    use super::Shedding;

    #[test]
    fn a_giver_sheds_what_its_excess_grew_by_to_the_plans_receivers_up_to_the_plan() {
        // The plan sent 100 ids, 3 parts to rank 7 and 1 to rank 9; the
        // rank's excess was 50 after it. At 10 ids a second the threshold
        // is 1 id of work.
        let mut s = Shedding {
            to: vec![(7, 0.75), (9, 0.25)],
            from: 50.0,
            left: 100.0,
        };
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
