//! A discrete-event simulator: the ranks' state machines ([`Rank`]) driven
//! by a virtual clock over a [`MemoryBoard`], with the realisation times of a
//! [`Scenario`]. It runs the same decisions as a real job in milliseconds, for
//! property tests and for exploring policies and parameters.
//!
//! A rank's request is carried out when the rank makes it, its storage
//! operations dated one after another from then ([`MemoryBoard::set_clock`]),
//! except claims sent together, which end together: what it writes shows to
//! other ranks from its operation's date, and its reply comes when its last
//! operation ends. Two claims of one slot are
//! decided in the order of the requests, not of the creates' dates.
//!
//! ```
//! use soslb::{policy::Params, config::Config, scenario::{Scenario, Factor}, sim};
//! let scenario = Scenario {
//!     name: "two classes".into(), ranks: 4, realisations: 400, base: 0.01,
//!     speed: vec![Factor::Classes(vec![1.0, 0.25], 2)], cost: None, layout: None,
//! };
//! let out = sim::simulate(&scenario, &Params::from(&Config::default()), &sim::Options::default()).unwrap();
//! assert!(out.counts.iter().all(|&c| c == 1));   // every id computed exactly once
//! assert!(out.makespan < 1.2 * scenario.ideal(4) + 1.0);
//! ```

use crate::balancer::BUSY_TEST_INTERVAL;
use crate::board::Board;
use crate::board::memory::MemoryBoard;
use crate::clerk::Clerk;
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::plan::WarmupReport;
use crate::policy::{Event, Params, Rank, RankReport, Reply, Request, Step};
use crate::scenario::Scenario;
use crate::seed::splitmix64;
use crate::topology::{Sites, Topology, virtual_hosts};
use crate::verdict::{Words, joins_wave};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Knobs of a simulation.
#[derive(Clone, Debug)]
pub struct Options {
    /// Seed of the interleavings and the jitter.
    pub seed: u64,
    /// Each chunk takes up to this fraction longer than the scenario says, at random.
    pub jitter: f64,
    /// Ranks per virtual host (0: as the scenario's layout says, else all
    /// on one host).
    pub ranks_per_host: usize,
    /// Hosts per virtual site (0: as the scenario's layout says, else one
    /// site).
    pub hosts_per_site: usize,
    /// Destroy the SOS file of this rank at this time (a storage fault).
    pub corrupt: Option<(f64, usize)>,
    /// Give up after this many events (a rank that never terminates).
    pub max_events: u64,
    /// Seconds each storage operation costs the rank that does it (the
    /// emulator's `storage_delay`; the memory board counts the operations
    /// the file board would do).
    pub storage_delay: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            jitter: 0.0,
            ranks_per_host: 0,
            hosts_per_site: 0,
            corrupt: None,
            max_events: 50_000_000,
            storage_delay: 0.0,
        }
    }
}

/// What a simulation computed.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// How many times each id was computed (all 1 when balancing is right).
    pub counts: Vec<u32>,
    /// When the last rank returned from `finish`, seconds: after the
    /// verdict, the requests still out and the owners' last looks at their
    /// open SOS.
    pub makespan: f64,
    /// When every rank learned the verdict, seconds.
    pub verdict: f64,
    /// Each rank's figures.
    pub reports: Vec<RankReport>,
    /// Each rank's events, with the simulated time of the call that made them.
    pub events: Vec<Vec<(f64, Event)>>,
    /// Ids each rank still owned when it terminated and nobody computed
    /// (all 0 when right).
    pub left: Vec<u64>,
    /// When each rank finished its last realisation, seconds.
    pub finish: Vec<f64>,
    /// Shared-storage operations (as the file board would do them, and the
    /// monitor logs' lazy writes) in each second of the run, over all
    /// ranks, by their kind (in the order of [`KINDS`]).
    pub storage_ops: Vec<[u64; KINDS.len()]>,
    /// Seconds each rank's clerk spent in shared-storage operations (the
    /// rank computes meanwhile).
    pub storage_seconds: Vec<f64>,
    /// Host transfers sent ([`crate::transfer`]): messages, and the ids
    /// they carried.
    pub transfers: (u64, u64),
    /// Termination waves completed (the emulator's `waves`).
    pub waves: u64,
    /// The monitor logs' writes at `finish`: one per rank, and the
    /// creation of the logs not written before, in the second the job ends
    /// (not in [`Outcome::storage_ops`]).
    pub finalize_writes: u64,
}

/// The kinds of shared-storage operations [`Outcome::storage_ops`] counts
/// apart: those of requests (a post of an SOS, a refresh, an owner's
/// claims of its slots, a withdrawal, a search for help: index reads, SOS
/// reads and claims), and the monitor logs' lazy writes
/// ([`crate::monitor::flush_every`]; each rank writes its log once more at
/// `finish`, which [`Outcome::finalize_writes`] counts apart), the first of
/// which creates the file (one operation more).
pub const KINDS: [&str; 6] = ["post", "refresh", "claim", "withdraw", "help", "log"];

/// The place of `request`'s kind in [`KINDS`].
fn kind(request: &Request) -> usize {
    match request {
        Request::Post { .. } => 0,
        Request::Refresh { .. } => 1,
        Request::Claim { .. } => 2,
        Request::Withdraw { .. } => 3,
        Request::Help(_) => 4,
    }
}

impl Outcome {
    /// Shared-storage operations in each second of the run, of all kinds.
    pub fn storage_ops_per_second(&self) -> impl Iterator<Item = u64> + '_ {
        self.storage_ops.iter().map(|kinds| kinds.iter().sum())
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Will call `next` at this time.
    Ready(f64),
    /// Computed its reserve, waits for the warm-up exchange.
    AwaitingPlan,
    /// Terminated at this time.
    Done(f64),
}

/// A time that orders (simulated times are never NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Run `scenario` on `scenario.ranks` simulated ranks.
pub fn simulate(scenario: &Scenario, params: &Params, opts: &Options) -> Result<Outcome> {
    let mut sim = Sim::new(scenario, params, opts);
    let mut handled = 0u64;
    while let Some((now, i)) = sim.queue.pop() {
        handled += 1;
        if handled > opts.max_events {
            return Err(Error::Internal(format!(
                "the simulation did not end within {} events",
                opts.max_events
            )));
        }
        if sim.call(i, now)? {
            break;
        }
    }
    sim.outcome()
}

/// The ranks' topology as the library sees it (the scenario's layout,
/// unless the options give hosts and sites), the shared board (slowed by
/// distance as the emulator's layout says), and the distance delay.
fn layout(scenario: &Scenario, opts: &Options) -> (Topology, MemoryBoard, f64) {
    let p = scenario.ranks;
    let grid = scenario.layout.as_ref();
    let per_host = match opts.ranks_per_host {
        0 => grid.map_or(0, |g| g.ranks_per_host),
        n => n,
    };
    let per_site = match opts.hosts_per_site {
        0 => grid.map_or(0, |g| g.hosts_per_site),
        n => n,
    };
    let hosts = if per_host > 0 {
        virtual_hosts(p, per_host)
    } else {
        vec!["sim".to_string(); p]
    };
    let mut topology = Topology::new(hosts, &Sites::Single);
    if per_site > 0 {
        topology = topology.with_virtual_sites(per_site);
    }
    let distance_delay = grid.map_or(0.0, |g| g.distance_delay);
    let mut board = MemoryBoard::new();
    if let Some(g) = grid.filter(|_| distance_delay > 0.0) {
        // The emulator slows the far path by its own layout, whatever the
        // library's hosts and sites.
        let laid = Topology::laid_out(p, g.ranks_per_host, g.hosts_per_site);
        board = board.with_distance_delay(laid, distance_delay);
    }
    (topology, board, distance_delay)
}

/// The ranks' next calls, earliest first; ties broken at random (the
/// interleaving). A rank has one entry per state change: `calls[i]` tells
/// the current one.
struct Queue {
    heap: BinaryHeap<Reverse<(Time, u64, usize, u64)>>,
    calls: Vec<u64>,
    /// The random state of the interleavings and the jitter.
    rng: u64,
}

impl Queue {
    /// Every one of `p` ranks called at 0.
    fn new(p: usize, seed: u64) -> Queue {
        let mut queue = Queue {
            heap: BinaryHeap::new(),
            calls: vec![0; p],
            rng: seed,
        };
        for i in 0..p {
            let tie = queue.random();
            queue.heap.push(Reverse((Time(0.0), tie, i, 0)));
        }
        queue
    }

    fn random(&mut self) -> u64 {
        self.rng = splitmix64(self.rng);
        self.rng
    }

    /// Rank `i`'s next call at `t`, superseding the one queued.
    fn schedule(&mut self, i: usize, t: f64) {
        self.calls[i] += 1;
        let tie = self.random();
        self.heap.push(Reverse((Time(t), tie, i, self.calls[i])));
    }

    /// The earliest call not superseded: its time and rank.
    fn pop(&mut self) -> Option<(f64, usize)> {
        while let Some(Reverse((Time(now), _, i, call))) = self.heap.pop() {
            if call == self.calls[i] {
                return Some((now, i));
            }
        }
        None
    }
}

/// The termination waves, as the shell runs them: a wave starts when the
/// last one completes; a rank inside the library (idle, or waiting for a
/// reply) joins it at once, a computing one at its first call that is a
/// check ([`joins_wave`]), so a slow rank's realisation holds every wave
/// up. A non-blocking reduction advances only inside MPI calls, so the
/// wave completes when every rank has called once more after the last one
/// joined (a rank inside the library at once: it tests every millisecond or
/// two). It tells every rank the job as each rank stood when it joined
/// ([`Words`], the shell's sums).
struct Waves {
    /// Realisations whose completion the ranks have reported (at their next
    /// call after the chunk): the job ends when they are all reported.
    completed: u64,
    /// Waves completed.
    count: u64,
    /// The wave in flight: the words of the ranks that joined it, which
    /// ones did, and how many have not.
    words: Words,
    joined: Vec<bool>,
    missing: usize,
    /// Once every rank has joined: which ranks have called since, and how
    /// many have not.
    tested: Vec<bool>,
    untested: usize,
    /// When each rank, computing, joins the next wave (its next check).
    due: Vec<f64>,
    /// Whether each rank computes a chunk (outside the library).
    computing: Vec<bool>,
    /// The waves started after the warm-up exchange carry host transfers
    /// ([`crate::transfer::planned`]; the time of the last plan's wave).
    waves_start: bool,
    after_plan: bool,
    planned: f64,
}

impl Waves {
    /// The first wave, which each rank joins at its first check, half a
    /// check interval in.
    fn new(topology: &Topology, check_interval: f64) -> Waves {
        let p = topology.ranks();
        Waves {
            completed: 0,
            count: 0,
            words: Words::zero(p, topology.hosts()),
            joined: vec![false; p],
            missing: p,
            tested: vec![false; p],
            untested: p,
            due: vec![0.5 * check_interval; p],
            computing: vec![true; p],
            waves_start: false,
            after_plan: false,
            planned: f64::NEG_INFINITY,
        }
    }

    fn join(&mut self, i: usize, rank: &Rank, topology: &Topology, now: f64, interval: f64) {
        self.words.add(&rank.status(now), i, topology);
        self.joined[i] = true;
        self.missing -= 1;
        self.due[i] = now + interval;
        if self.missing == 0 {
            // The computing ranks test the reduction at their next call.
            self.tested = self.computing.iter().map(|c| !c).collect();
            self.untested = self.tested.iter().filter(|t| !**t).count();
        }
    }

    /// Rank `i` at the end of its call at `now`: it joins the wave in
    /// flight if it is time, or tests it once all have joined; the wave
    /// completes when every rank has tested it, and the next one starts.
    fn call(
        &mut self,
        i: usize,
        now: f64,
        ranks: &mut [Rank],
        topology: &Topology,
        params: &Params,
    ) {
        let interval = params.check_interval;
        let rank = &ranks[i];
        let ends_soon = rank.remaining() as f64 <= rank.speed() * interval;
        let busy = self.computing[i] && rank.owns_work();
        if !self.joined[i] && joins_wave(now, busy, ends_soon, self.due[i], interval) {
            self.join(i, rank, topology, now, interval);
        } else if self.missing == 0 && !self.tested[i] {
            self.tested[i] = true;
            self.untested -= 1;
        }
        if self.missing > 0 || self.untested > 0 {
            return;
        }
        self.count += 1;
        let mut job = self.words.job(topology);
        // (The waves started before the warm-up exchange carry no moves.)
        if let Some(moves) = crate::transfer::planned(&job, topology, params, self.planned)
            .filter(|_| self.after_plan)
        {
            self.planned = job.at;
            job.moves = Arc::new(moves);
        }
        for rank in ranks.iter_mut() {
            rank.observe_job(job.clone());
        }
        self.words = Words::zero_like(&self.words);
        self.joined.fill(false);
        self.missing = ranks.len();
        self.after_plan = self.waves_start;
        for (k, rank) in ranks.iter().enumerate() {
            if !self.computing[k] {
                self.join(k, rank, topology, now, interval);
            }
        }
    }
}

/// The shared storage's operations and time, and the monitor logs' writes.
struct Storage {
    /// See [`Outcome::storage_ops`].
    ops: Vec<[u64; KINDS.len()]>,
    /// See [`Outcome::storage_seconds`].
    seconds: Vec<f64>,
    /// Seconds per shared operation when requests are timed (when
    /// operations cost time).
    timed: Option<f64>,
    /// When each rank's monitor log was last written (as the shell's
    /// [`crate::monitor::Monitor::flush_lazily`]: at an event, at most every
    /// `log_every` seconds).
    log_every: f64,
    logged_at: Vec<f64>,
    /// Whether each rank's monitor log has been created (at its first write).
    log_created: Vec<bool>,
}

impl Storage {
    fn new(p: usize, timed: Option<f64>) -> Storage {
        let log_every = crate::monitor::flush_every(p);
        Storage {
            ops: Vec::new(),
            seconds: vec![0.0; p],
            timed,
            log_every,
            logged_at: (0..p)
                .map(|r| crate::monitor::first_write(r, p) - log_every)
                .collect(),
            log_created: vec![false; p],
        }
    }

    /// `n` operations of `kind` at `now`.
    fn count(&mut self, now: f64, kind: usize, n: u64) {
        let second = now as usize;
        if self.ops.len() <= second {
            self.ops.resize(second + 1, [0; KINDS.len()]);
        }
        self.ops[second][kind] += n;
    }

    /// Rank `i` logged events at `now`: its log is written if due.
    fn log(&mut self, i: usize, now: f64) {
        if now >= self.logged_at[i] + self.log_every {
            self.logged_at[i] = now;
            let created = std::mem::replace(&mut self.log_created[i], true);
            self.count(now, KINDS.len() - 1, 2 - u64::from(created));
        }
    }
}

/// A simulation under way: the ranks, their clerks and boards, the calls
/// to come, and what the run has computed so far.
struct Sim<'a> {
    scenario: &'a Scenario,
    params: &'a Params,
    opts: &'a Options,
    topology: Topology,
    board: MemoryBoard,
    /// The hosts' own boards (node-local: their operations cost the shared
    /// storage nothing and take no time).
    host_boards: Vec<MemoryBoard>,
    ranks: Vec<Rank>,
    clerks: Vec<Clerk>,
    /// Each rank's reply on its way, and when it arrives.
    replies: Vec<Option<(f64, Reply)>>,
    state: Vec<State>,
    /// The warm-up reports given, and how many ranks are in the exchange.
    reports: Vec<Option<WarmupReport>>,
    exchanging: usize,
    counts: Vec<u32>,
    events: Vec<Vec<(f64, Event)>>,
    finish: Vec<f64>,
    corrupt: Option<(f64, usize)>,
    queue: Queue,
    waves: Waves,
    storage: Storage,
    /// Host transfers on their way to each rank: (arrival, sender, ids);
    /// when an idle rank next looks, if it is idle; and the messages sent
    /// and ids they carried.
    inbox: Vec<Vec<(f64, usize, IdSet)>>,
    idle_until: Vec<Option<f64>>,
    transfers: (u64, u64),
}

impl<'a> Sim<'a> {
    fn new(scenario: &'a Scenario, params: &'a Params, opts: &'a Options) -> Sim<'a> {
        let p = scenario.ranks;
        let (topology, board, distance_delay) = layout(scenario, opts);
        let host_boards = if params.host_board {
            (0..topology.hosts()).map(|_| MemoryBoard::new()).collect()
        } else {
            Vec::new()
        };
        let ranks: Vec<Rank> = (0..p)
            .map(|i| {
                let mut rank =
                    Rank::new(i, scenario.realisations, params.clone(), topology.clone());
                if opts.storage_delay > 0.0 && params.mode == crate::config::Mode::Full {
                    // As the shell learns before the plan: a read of `job.ron`,
                    // timed in the background.
                    rank.observe_storage(opts.storage_delay);
                }
                rank
            })
            .collect();
        let timed =
            (opts.storage_delay > 0.0 || distance_delay > 0.0).then_some(opts.storage_delay);
        let waves = Waves::new(&topology, params.check_interval);
        Sim {
            scenario,
            params,
            opts,
            clerks: ranks.iter().map(Clerk::new).collect(),
            topology,
            board,
            host_boards,
            ranks,
            replies: (0..p).map(|_| None).collect(),
            state: vec![State::Ready(0.0); p],
            reports: vec![None; p],
            exchanging: 0,
            counts: vec![0; scenario.realisations as usize],
            events: vec![Vec::new(); p],
            finish: vec![0.0; p],
            corrupt: opts.corrupt,
            queue: Queue::new(p, opts.seed),
            waves,
            storage: Storage::new(p, timed),
            inbox: vec![Vec::new(); p],
            idle_until: vec![None; p],
            transfers: (0, 0),
        }
    }

    /// Rank `i`'s call at `now`, after the storage fault, the reply and the
    /// host transfers due, and before it joins a wave: whether every id is
    /// now reported.
    fn call(&mut self, i: usize, now: f64) -> Result<bool> {
        if let Some((at, rank)) = self.corrupt
            && now >= at
        {
            self.board.corrupt(rank);
            self.corrupt = None;
        }
        if let Some((at, _)) = &self.replies[i]
            && *at <= now
            && let Some((_, reply)) = self.replies[i].take()
        {
            self.ranks[i].reply(reply)?;
        }
        // Host transfers that have arrived.
        self.idle_until[i] = None;
        if !self.inbox[i].is_empty() {
            let (arrived, later) = std::mem::take(&mut self.inbox[i])
                .into_iter()
                .partition(|(at, _, _)| *at <= now);
            self.inbox[i] = later;
            for (_, from, ids) in arrived {
                self.ranks[i].receive(from, ids, now);
            }
        }
        let before = self.ranks[i].done();
        let step = self.serve(i, now)?;
        self.waves.completed += self.ranks[i].done() - before;
        let logged = self.events[i].len();
        self.events[i].extend(self.ranks[i].drain_events().map(|e| (now, e)));
        self.waves.computing[i] = matches!(step, Step::Compute(_));
        self.state[i] = self.state_after(i, now, step)?;
        if self.events[i].len() > logged {
            self.storage.log(i, now);
        }
        if self.waves.completed == self.scenario.realisations {
            // Every id is reported: the next wave ends the job everywhere,
            // within a busy rank's test interval.
            let end = now + BUSY_TEST_INTERVAL;
            self.state.iter_mut().for_each(|s| *s = State::Done(end));
            return Ok(true);
        }
        (self.waves).call(i, now, &mut self.ranks, &self.topology, self.params);
        self.reschedule(i)?;
        if self.exchanging == self.ranks.len() {
            self.exchange(now)?;
        }
        Ok(false)
    }

    /// Rank `i`'s next step at `now` that is not a request or a transfer.
    /// The clerk carries a request out on the board, its operations dated
    /// from `now`; the reply arrives when they are done, and the rank
    /// computes meanwhile.
    fn serve(&mut self, i: usize, now: f64) -> Result<Step> {
        let mut step = self.ranks[i].next(now)?;
        loop {
            let request = match step {
                Step::Ask(request) => *request,
                Step::Send { to, ids } => {
                    self.send(i, to, ids, now);
                    step = self.ranks[i].next(now)?;
                    continue;
                }
                other => return Ok(other),
            };
            let kind = kind(&request);
            let (mut reply, touched, seconds) = self.serve_timed(i, now, request);
            self.storage.count(now, kind, touched);
            self.storage.seconds[i] += seconds;
            reply.seconds = Some(seconds);
            if seconds > 0.0 {
                self.replies[i] = Some((now + seconds, reply));
            } else {
                self.ranks[i].reply(reply)?;
            }
            step = self.ranks[i].next(now)?;
        }
    }

    /// Carry `request` of rank `i` out at `now` on the shared board and its
    /// host's board, timed when operations cost time: the reply, the
    /// shared-storage operations it made, and the seconds they took (the
    /// farther SOS files' extra time included; host boards are node-local
    /// and take no time).
    fn serve_timed(&mut self, i: usize, now: f64, request: Request) -> (Reply, u64, f64) {
        let host = self.host_boards.get_mut(self.topology.host_index(i));
        let board = &mut self.board;
        let ops = board.ops();
        board.set_clock(i, now, self.storage.timed.unwrap_or(0.0));
        let reply = self.clerks[i].serve_on(request, board, host.map(|b| b as _));
        (reply, board.ops() - ops, board.elapsed())
    }

    /// A host transfer of `ids` from rank `from` at `now`: the message
    /// arrives after a busy rank's test interval (when the shell's busy
    /// ranks look for one); an idle receiver wakes then.
    fn send(&mut self, from: usize, to: usize, ids: IdSet, now: f64) {
        let at = now + BUSY_TEST_INTERVAL;
        self.transfers.0 += 1;
        self.transfers.1 += ids.len();
        self.inbox[to].push((at, from, ids));
        if self.idle_until[to].is_some_and(|until| until > at) {
            self.idle_until[to] = Some(at);
            self.queue.schedule(to, at);
            self.state[to] = State::Ready(at);
        }
    }

    /// Rank `i`'s state after `step` at `now`: computing its chunk (with
    /// the jitter), in the warm-up exchange, awaiting a reply, or idle.
    fn state_after(&mut self, i: usize, now: f64, step: Step) -> Result<State> {
        Ok(match step {
            Step::Compute(chunk) => {
                let mut t = now;
                for id in chunk {
                    self.counts[id as usize] += 1;
                    t += self.scenario.duration(i, id, t);
                }
                let random = self.queue.random();
                let jitter = self.opts.jitter * (random >> 11) as f64 * (-53f64).exp2();
                self.finish[i] = now + (t - now) * (1.0 + jitter);
                State::Ready(self.finish[i])
            }
            // The rank computes its reserve while the others report.
            Step::Exchange(report) => {
                self.reports[i] = Some(report);
                self.exchanging += 1;
                State::Ready(now)
            }
            Step::AwaitPlan => State::AwaitingPlan,
            Step::AwaitReply => match &self.replies[i] {
                Some((at, _)) => State::Ready(*at),
                None => {
                    return Err(Error::Internal(format!(
                        "rank {i} awaits a reply that is not on its way"
                    )));
                }
            },
            Step::Idle { until } => {
                // As the shell: the ids finished since the last check are
                // logged when the rank runs out of work.
                self.ranks[i].flush_progress(now);
                self.events[i].extend(self.ranks[i].drain_events().map(|e| (now, e)));
                let until = until.max(now + 1e-6);
                self.idle_until[i] = Some(until);
                State::Ready(until)
            }
            Step::Ask(_) | Step::Send { .. } => {
                return Err(Error::Internal("a request left unserved".into()));
            }
        })
    }

    /// Queue rank `i`'s next call if it has one; an error when it waits
    /// for ever while nobody owns work and ids are missing.
    fn reschedule(&mut self, i: usize) -> Result<()> {
        if let State::Ready(t) = self.state[i] {
            if t.is_finite() {
                self.queue.schedule(i, t);
            } else if !self.ranks[i].owns_work()
                && self.ranks.iter().all(|r| !r.owns_work())
                && self.inbox.iter().all(Vec::is_empty)
            {
                // Nobody owns work, yet ids are missing: the real job's
                // verdict is Lost.
                return Err(Error::Internal(format!(
                    "no rank owns work, yet only {} of {} realisations were reported",
                    self.waves.completed, self.scenario.realisations
                )));
            }
        }
        Ok(())
    }

    /// The warm-up exchange: the collective completes when the last rank
    /// enters it (now); the ranks still computing their reserve go on.
    fn exchange(&mut self, now: f64) -> Result<()> {
        self.exchanging = 0;
        self.waves.waves_start = true;
        let all: Vec<WarmupReport> = self.reports.iter_mut().filter_map(Option::take).collect();
        let plan = crate::plan::rescale(&all);
        for (k, rank) in self.ranks.iter_mut().enumerate() {
            rank.apply_planned(&all, &plan, now)?;
            self.events[k].extend(rank.drain_events().map(|e| (now, e)));
            if self.state[k] == State::AwaitingPlan {
                self.state[k] = State::Ready(now);
                self.queue.schedule(k, now);
            }
        }
        Ok(())
    }

    /// What the simulation computed, once every rank has terminated.
    fn outcome(mut self) -> Result<Outcome> {
        let mut verdict = 0.0f64;
        for s in &self.state {
            match s {
                State::Done(t) => verdict = verdict.max(*t),
                _ => return Err(Error::Internal("the simulation did not terminate".into())),
            }
        }
        let makespan = self.last_looks(verdict)?;
        let uncomputed = |r: &Rank| {
            let owned = r.owned();
            let ids = owned.ranges().flatten();
            ids.filter(|&id| self.counts[id as usize] == 0).count() as u64
        };
        let left = self.ranks.iter().map(uncomputed).collect();
        let p = self.ranks.len();
        Ok(Outcome {
            makespan,
            verdict,
            reports: self.ranks.iter().map(Rank::report).collect(),
            left,
            counts: self.counts,
            finish: self.finish,
            storage_ops: self.storage.ops,
            storage_seconds: self.storage.seconds,
            events: self.events,
            transfers: self.transfers,
            waves: self.waves.count,
            finalize_writes: p as u64
                + self.storage.log_created.iter().filter(|&&c| !c).count() as u64,
        })
    }

    /// As `finish` after the `verdict`: replies still on their way reach
    /// their ranks (a request stops at the verdict, once the operation
    /// under way is done), and owners whose SOS is still open look at it
    /// once more: their accounts of the help given. The job ends (the
    /// makespan) when the last rank is through.
    fn last_looks(&mut self, verdict: f64) -> Result<f64> {
        let mut makespan = verdict;
        for (i, reply) in std::mem::take(&mut self.replies).into_iter().enumerate() {
            let mut t = verdict;
            if let Some((at, reply)) = reply {
                t = at.min(verdict + self.opts.storage_delay).max(verdict);
                self.ranks[i].reply(reply)?;
            }
            if let Some(request) = self.ranks[i].last_look(t) {
                let (reply, _, seconds) = self.serve_timed(i, t, request);
                t += seconds;
                self.ranks[i].reply(reply)?;
                self.events[i].extend(self.ranks[i].drain_events().map(|e| (t, e)));
            }
            makespan = makespan.max(t);
        }
        Ok(makespan)
    }
}
