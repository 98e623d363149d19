//! The rank's state machine (DESIGN §4, §5), driven by time and events.
//!
//! [`Rank`] makes every decision of a rank: which chunk to compute, when the
//! warm-up ends, when to post, refresh or withdraw an SOS, which of its
//! slots to claim next, when to look for help to give. It reads no clock,
//! makes no MPI call and touches no file: time comes in as seconds since
//! the job's common start, the board's work goes out as requests to the
//! rank's clerk ([`Step::Ask`], [`crate::clerk`]) whose replies come back in
//! ([`Rank::reply`]), and the one collective (the warm-up exchange) goes out
//! as [`Step::Exchange`]. The MPI shell ([`crate::Balancer`]) and the
//! simulator drive the same code.
//!
//! A rank is made of parts, each a struct with its own state (private
//! modules):
//!
//! - `ledger`: where its ids are (lease, pending slots, claims won, the
//!   chunk out, the audit);
//! - `sos`: its SOS, as their owner (the open entry, its board, how posts
//!   and refreshes went);
//! - `helping`: its search for others' work (idle since, next search, the
//!   share taken);
//! - `jobview`: the job as the termination waves show it (forecast end,
//!   hosts, idle ranks, open SOS);
//! - `transfers`: its host transfers (planned, ready, shed, to offer);
//! - `timings`: what storage operations took, the cost model's inputs.
//!
//! Its decisions, which read several parts, are [`Rank`]'s methods, by
//! concern:
//!
//! - `owner`: the periodic check and the SOS owner's decisions (post,
//!   refresh, claim, withdraw);
//! - `replies`: the clerk's replies applied;
//! - `trade`: host transfers, by claims back and MPI sends;
//! - `warmup`: Algorithm 1 from the rank's side;
//! - [`helper`]: the helper's, pure (which SOS, how many ids, which slots);
//! - [`request`]: the messages between a rank and its clerk.
//!
//! # The ids of a rank
//!
//! Its *lease* it may compute at once. Ids it posted wait in *pending*
//! slots: the rank computes one only after its own claim of the slot wins;
//! a claim lost, or a claim found by a refresh, says a helper has it. So at
//! every instant each id is the lease of one rank, or in one slot.

use crate::config::Mode;
use crate::cost::{Costs, STEADY_WINDOWS};
use crate::error::Result;
use crate::ids::IdSet;
use crate::protocol::{Claim, Entry, Level, Slot};
use crate::speed::{Speed, forecast};
use crate::topology::Topology;
use crate::verdict::{Audit, Job, Status};

pub mod helper;
mod helping;
mod jobview;
mod ledger;
mod owner;
mod replies;
pub mod request;
mod sos;
mod step;
mod timings;
mod trade;
mod transfers;
mod warmup;

pub use crate::params::{self, Params};
use helping::Helper;
use jobview::JobView;
use ledger::Ledger;
pub use request::{Outcome, Reply, Request, Search, Taken};
use sos::Owner;
pub use step::{Aid, Event, RankReport, Step};
use timings::Timings;
use transfers::Transfers;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup,
    Exchanging,
    Running,
}

/// The request out, as the rank must remember it to apply the reply.
#[derive(Clone, Debug, PartialEq)]
enum Asking {
    /// Posting `entry`; `new`: the ids cut into new slots; `opens`: the SOS
    /// was closed.
    Post {
        entry: Entry,
        new: IdSet,
        opens: bool,
    },
    /// Refreshing the own SOS on `level`'s board.
    Refresh { level: Level },
    /// Claiming own slots on `level`'s board.
    Claim { level: Level },
    /// Withdrawing the own SOS; `moving`: to the other board (claimed back
    /// and posted there at the next check, which comes at once).
    Withdraw { forecast: f64, moving: bool },
    /// Searching for help; `early`: see [`Search::early`].
    Help { early: bool },
    /// Claiming pending slots on `level`'s board back for the host
    /// transfers `sends` (to rank, ids).
    Give {
        level: Level,
        sends: Vec<(usize, u64)>,
    },
}

/// The state machine of one rank: who it is, where it stands, and its
/// parts, each with its own state.
#[derive(Debug)]
pub struct Rank {
    /// This rank, its settings and where the ranks are.
    me: usize,
    params: Params,
    topology: Topology,
    /// Warm-up, its exchange, or running on the plan's quota.
    phase: Phase,
    /// The request out (one at a time), and the request to hand out next.
    asking: Option<Asking>,
    outbox: Option<Request>,
    /// Its speed, measured on the chunks it computed.
    speed: Speed,
    /// The plan's horizon `T_e` (infinite before the plan).
    horizon: f64,
    /// When the next periodic check is due.
    next_check: f64,
    /// Events for the monitor log, and the figures for the summary.
    events: Vec<Event>,
    report: RankReport,
    /// Where its ids are: lease, pending slots, claims won, the chunk out.
    ledger: Ledger,
    /// Its SOS, as their owner.
    owner: Owner,
    /// Its search for others' work, as a helper.
    helper: Helper,
    /// The job as the last termination waves showed it.
    job: JobView,
    /// Its host transfers.
    trade: Transfers,
    /// What storage operations took: the cost model's inputs.
    timings: Timings,
}

impl Rank {
    /// Rank `me` of `topology.ranks()`, owning its initial block of `0..total`.
    pub fn new(me: usize, total: u64, params: Params, topology: Topology) -> Rank {
        let phase = if params.mode == Mode::Static {
            Phase::Running
        } else {
            Phase::Warmup
        };
        Rank {
            me,
            phase,
            asking: None,
            outbox: None,
            speed: Speed::new(params.speed_window)
                .with_steady_window(STEADY_WINDOWS * params.speed_window),
            horizon: f64::INFINITY,
            next_check: params.check_interval,
            events: Vec::new(),
            report: RankReport {
                rank: me,
                ..RankReport::default()
            },
            ledger: Ledger::new(total, topology.ranks(), me),
            owner: Owner::default(),
            helper: Helper::default(),
            job: JobView::default(),
            trade: Transfers::new(me, &topology, &params),
            timings: Timings::default(),
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

    /// Ids this rank owns now: its lease and its slots not known claimed.
    pub fn remaining(&self) -> u64 {
        self.ledger.remaining()
    }

    /// True while the rank owns work: ids, a chunk handed out, an open SOS,
    /// a request out (its reply may bring ids), a host transfer to make.
    pub fn owns_work(&self) -> bool {
        self.remaining() > 0
            || self.ledger.computing()
            || self.owner.is_open()
            || self.asking.is_some()
            || !self.trade.outgoing.is_empty()
    }

    /// The ids owned now (lease, slots, the chunk handed out), to name them
    /// in an error.
    pub fn owned(&self) -> IdSet {
        let mut ids = self.ledger.owned();
        for (_, part) in &self.trade.outgoing {
            ids.extend(part);
        }
        ids
    }

    /// The claims this rank won: the board, the owner and the slot (their
    /// files are this rank's to check and remove at the end).
    pub fn won(&self) -> &[(Level, usize, Slot)] {
        &self.ledger.won
    }

    /// Own slots lost to a claim this rank could not read: the board and
    /// the slot.
    pub fn unread(&self) -> &[(Level, Slot)] {
        &self.ledger.unread
    }

    /// The ids computed so far, as an audit.
    pub fn audit(&self) -> Audit {
        self.ledger.audit
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
        if let Some(ids) = self.ledger.take_progress() {
            let (speed, remaining) = (self.speed.get(), self.remaining());
            self.events.push(Event::Progress {
                ids,
                done: self.speed.done(),
                speed,
                remaining,
                forecast: forecast(now, remaining, speed),
            });
        }
    }

    /// The job's forecast end, seconds since the start, from the last
    /// termination wave (infinite before).
    pub fn job_end(&self) -> f64 {
        self.job.end
    }

    /// Realisations computed by this rank so far.
    pub fn done(&self) -> u64 {
        self.speed.done()
    }

    /// This rank's words for a termination wave it joins at `now`; the
    /// shell adds its failure, a stop asked for and its host transfers
    /// under way.
    pub fn status(&self, now: f64) -> Status {
        let speed = self.speed();
        Status {
            completed: self.audit().count,
            busy: self.owns_work(),
            failed: false,
            stop: false,
            speed_milli: (speed * 1000.0).round() as u64,
            speed_time_milli: (speed * now * 1000.0).round() as u64,
            sos_open: self.sos_open(),
            fast: self.fast(),
            sos_on_host: self.sos_on_host(),
            free: self.is_free(),
            remaining: self.remaining(),
            excess: self.excess(now),
        }
    }

    /// What a termination wave says of the whole job: its forecast end
    /// (`at + (total − completed) / speed`, dated by when the ranks joined),
    /// which caps leases and shares and is the reference of lateness on
    /// slow storage, and the idle ranks, which tell how many helpers an
    /// SOS may expect.
    pub fn observe_job(&mut self, job: Job) {
        self.job
            .observe(&job, self.ledger.total, self.me, &self.topology);
        self.plan_sends(&job);
    }

    /// The shell saw the open index change (a watcher woke the rank): the
    /// next look for help reads it, whatever the last wave said.
    pub fn index_changed(&mut self) {
        self.job.index_changed = true;
    }

    /// True once the rank has run out of its own quota (a helper, idle or
    /// computing ids taken from others), or will within one grace of the
    /// next wave without asking for help, or took a share early and has no
    /// SOS open: the first helpers of an SOS near it (see
    /// [`crate::verdict::Status::free`]).
    pub fn is_free(&self) -> bool {
        let v = self.speed.get();
        self.helper.free
            || (self.helper.took_share() && !self.owner.is_open())
            || (self.phase == Phase::Running
                && !self.owner.is_open()
                && v > 0.0
                && self.remaining() as f64 <= v * (self.params.grace + self.params.check_interval))
    }

    /// The number of realisations of the run.
    pub fn total(&self) -> u64 {
        self.ledger.total
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
        self.owner.is_open()
    }

    /// True while an SOS of this rank is open on its host's board.
    pub fn sos_on_host(&self) -> bool {
        self.owner.is_open() && self.owner.level == Level::Host
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

    /// The previous chunk (if any) is finished at `now`: it counts as
    /// computed (also when nothing more is handed out, the job stopping).
    pub fn finish_chunk(&mut self, now: f64) {
        if let Some((t0, n)) = self.ledger.finish() {
            self.speed.record(now - t0, n);
        }
    }

    /// The previous chunk (if any) is finished at `now`; decide what comes next.
    ///
    /// This is the fast path of the library: when no check is due and the
    /// lease is not exhausted it does a few additions and comparisons.
    pub fn next(&mut self, now: f64) -> Result<Step> {
        self.finish_chunk(now);
        match self.phase {
            Phase::Exchanging if self.ledger.lease.is_empty() => return Ok(Step::AwaitPlan),
            Phase::Warmup
                if self.ledger.lease.is_empty()
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
                return Ok(Step::Ask(Box::new(request)));
            }
            if let Some(step) = self.trade_step(now) {
                return Ok(step);
            }
            if self.outbox.is_some() {
                continue;
            }
            let chunk_len = (self.speed.get() * self.params.chunk_time) as u64;
            if let Some(chunk) = self.ledger.hand_out(now, chunk_len) {
                return Ok(Step::Compute(chunk));
            }
            if self.asking.is_some() {
                return Ok(Step::AwaitReply);
            }
            if !self.ledger.pending.is_empty() {
                self.claim_front(now);
                continue;
            }
            if let Some(entry) = &self.owner.sos {
                // Every slot claimed: the SOS closes.
                let seq = entry.seq;
                self.ask(
                    Request::Withdraw {
                        level: self.owner.level,
                        seq,
                    },
                    Asking::Withdraw {
                        forecast: now,
                        moving: false,
                    },
                );
                continue;
            }
            if self.params.mode != Mode::Full || self.phase != Phase::Running {
                return Ok(Step::Idle {
                    until: f64::INFINITY,
                });
            }
            self.helper.free = true;
            if let Some(until) = self.help(now, 0.0) {
                return Ok(Step::Idle { until });
            }
        }
    }

    /// At the job's end (every id computed): claim every slot still
    /// pending, so that the claims helpers made since the last refresh
    /// count in what this rank gave (a claim it wins then is an id nobody
    /// computed, which the audit reports). Every such slot is a helper's
    /// by then, so a listing of the claims (one operation) stands for a
    /// claim of each. `None` without pending slots, or with a request out
    /// (whose reply comes first).
    pub fn last_look(&mut self, now: f64) -> Option<Request> {
        let level = self.ledger.front_level()?;
        if self.asking.is_some() {
            return None;
        }
        self.claim_all(now, level, true);
        self.outbox.take()
    }

    /// Hand `request` to the clerk at the next step.
    fn ask(&mut self, request: Request, asking: Asking) {
        self.outbox = Some(request);
        self.asking = Some(asking);
    }

    /// A consultation of the shared board took `seconds` for one operation
    /// (the storage probe at init).
    pub fn observe_storage(&mut self, seconds: f64) {
        self.timings.observe(seconds, [1, 0], (0, 0));
    }

    /// The cost model's figures now ([`crate::cost`]).
    fn costs(&self) -> Costs {
        self.timings.costs(&self.params)
    }

    /// Seconds a steal from the SOS of a rank at distance `d` costs this
    /// rank on the shared board ([`Timings::steal_cost`]).
    fn steal_cost(&self, d: u8) -> f64 {
        self.timings.steal_cost(&self.costs(), d)
    }

    /// A claim of this rank's slots at `now`.
    fn claim_template(&self, now: f64) -> Claim {
        Claim {
            owner: self.me,
            slot: Slot {
                seq: 0,
                index: 0,
                start: 0,
                end: 0,
            },
            by: self.me,
            at: now,
            speed: self.speed.get(),
            busy_for: 0.0,
            steal_cost: 0.0,
        }
    }
}
