//! A discrete-event simulator: the ranks' state machines ([`Rank`]) driven
//! by a virtual clock over a [`MemoryBoard`], with the realisation times of a
//! [`Scenario`]. It runs the same decisions as a real job in milliseconds, for
//! property tests and for exploring policies and parameters.
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

use crate::board::Board;
use crate::board::memory::MemoryBoard;
use crate::clerk::Clerk;
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::plan::WarmupReport;
use crate::policy::{Event, Params, Rank, RankReport, Reply, Request, Step};
use crate::scenario::Scenario;
use crate::splitmix64;
use crate::topology::{Sites, Topology, virtual_hosts};
use crate::verdict::Job;
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

/// Carry `request` of rank `i` out on the shared `board` and its host's
/// board, timed when `delay` (seconds per shared operation) is: the reply,
/// the shared-storage operations it made, and the seconds they took (the
/// farther SOS files' extra time included; host boards are node-local and
/// take no time).
fn serve_timed(
    clerk: &mut Clerk,
    request: Request,
    (board, host): (&mut MemoryBoard, Option<&mut MemoryBoard>),
    i: usize,
    delay: Option<f64>,
) -> (Reply, u64, f64) {
    let ops = board.ops();
    board.set_clock(i);
    let reply = clerk.serve_on(request, board, host.map(|b| b as _));
    let touched = board.ops() - ops;
    let seconds = touched as f64 * delay.unwrap_or(0.0) + board.extra();
    (reply, touched, seconds)
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

/// Seconds from the last completion to the verdict on every rank: idle
/// ranks run waves back to back, testing them every few milliseconds.
const WAVE_LATENCY: f64 = 0.01;

/// Seconds a host transfer takes to reach its receiver: the shell's busy
/// ranks look for one every 10 ms (idle ones every few).
const TRANSFER_LATENCY: f64 = 0.01;

/// Storage operations of the longest step of a search that the verdict
/// does not cut short: a claim ([`crate::clerk::Clerk::verdict_flag`]).
const SEARCH_STEP: f64 = 1.0;

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
    let p = scenario.ranks;
    // The scenario's layout, unless the options give hosts and sites.
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
    // The hosts' own boards (node-local: their operations cost the shared
    // storage nothing and take no time).
    let mut host_boards: Vec<MemoryBoard> = if params.host_board {
        (0..topology.hosts()).map(|_| MemoryBoard::new()).collect()
    } else {
        Vec::new()
    };
    let mut ranks: Vec<Rank> = (0..p)
        .map(|i| {
            let mut rank = Rank::new(i, scenario.realisations, params.clone(), topology.clone());
            if opts.storage_delay > 0.0 && params.mode == crate::config::Mode::Full {
                // As the shell learns before the plan: a read of `job.ron`,
                // timed in the background.
                rank.observe_storage(opts.storage_delay);
            }
            rank
        })
        .collect();
    let mut clerks: Vec<Clerk> = ranks.iter().map(Clerk::new).collect();
    // Each rank's reply on its way, and when it arrives.
    let mut replies: Vec<Option<(f64, Reply)>> = (0..p).map(|_| None).collect();
    let mut state = vec![State::Ready(0.0); p];
    let mut reports: Vec<Option<WarmupReport>> = vec![None; p];
    let mut exchanging = 0;
    let mut counts = vec![0u32; scenario.realisations as usize];
    let mut events = vec![Vec::new(); p];
    let mut finish = vec![0.0f64; p];
    let mut rng = opts.seed;
    let mut corrupt = opts.corrupt;
    // The ranks' next calls, earliest first; ties broken at random (the
    // interleaving). A rank has one entry per state change: `calls[i]`
    // tells the current one.
    let mut queue = BinaryHeap::new();
    let mut calls = vec![0u64; p];
    for i in 0..p {
        rng = splitmix64(rng);
        queue.push(Reverse((Time(0.0), rng, i, 0)));
    }
    // Realisations whose completion the ranks have reported (at their next
    // call after the chunk), as the termination waves add them up.
    let mut completed = 0u64;
    // Termination waves complete about once per check interval; each tells
    // every rank the job's completed count and summed speed, as the ranks
    // joined it: busy ranks join at their checks, so a wave brings the state
    // of up to an interval before, half an interval on average (the job's
    // forecast end comes out that much later than the truth).
    let mut next_wave = params.check_interval;
    let mut next_join = 0.5 * params.check_interval;
    let mut joined: Option<Job> = None;
    let mut handled = 0u64;
    let mut storage_ops: Vec<[u64; KINDS.len()]> = Vec::new();
    let mut storage_seconds = vec![0.0; p];
    // Host transfers on their way to each rank: (arrival, sender, ids);
    // when an idle rank next looks, if it is idle.
    let mut inbox: Vec<Vec<(f64, usize, IdSet)>> = vec![Vec::new(); p];
    let mut idle_until: Vec<Option<f64>> = vec![None; p];
    let mut transfers = (0u64, 0u64);
    // The waves joined after the warm-up exchange carry host transfers
    // ([`crate::transfer::planned`]; the time of the last plan's wave).
    let (mut waves_start, mut after_plan) = (false, false);
    let mut planned = f64::NEG_INFINITY;
    // When each rank's monitor log was last written (as the shell's
    // [`crate::monitor::Monitor::flush_lazily`]: at an event, at most every
    // `log_every` seconds).
    let log_every = crate::monitor::flush_every(p);
    let mut logged_at: Vec<f64> = (0..p)
        .map(|r| crate::monitor::first_write(r, p) - log_every)
        .collect();
    let log_kind = KINDS.len() - 1;
    let count_ops = |ops: &mut Vec<[u64; KINDS.len()]>, now: f64, kind: usize, n: u64| {
        let second = now as usize;
        if ops.len() <= second {
            ops.resize(second + 1, [0; KINDS.len()]);
        }
        ops[second][kind] += n;
    };
    // Whether each rank's monitor log has been created (at its first write).
    let mut log_created = vec![false; p];
    // Requests are timed when operations cost time.
    let timed = (opts.storage_delay > 0.0 || distance_delay > 0.0).then_some(opts.storage_delay);
    while let Some(Reverse((Time(now), _, i, call))) = queue.pop() {
        if call != calls[i] {
            continue; // superseded
        }
        handled += 1;
        if handled > opts.max_events {
            return Err(Error::Internal(format!(
                "the simulation did not end within {} events",
                opts.max_events
            )));
        }
        if now >= next_wave
            && let Some(mut job) = joined.take()
        {
            // (The shell's waves start after the warm-up exchange: the
            // waves joined before it carry no moves.)
            if let Some(moves) =
                crate::transfer::planned(&job, &topology, params, planned).filter(|_| after_plan)
            {
                planned = job.at;
                job.moves = Arc::new(moves);
            }
            for rank in &mut ranks {
                rank.observe_job(job.clone());
            }
            next_wave = now + params.check_interval;
        }
        if now >= next_join && joined.is_none() {
            // Each host's ids left and speed, and the SOS open on its board.
            let mut hosts = vec![(0, 0.0); topology.hosts()];
            let mut host_open = vec![0; topology.hosts()];
            let mut excess = vec![0; topology.hosts()];
            let mut free_ranks = vec![0u64; p.div_ceil(64)];
            let mut fast_ranks = vec![0u64; p.div_ceil(64)];
            let mut sos_ranks = vec![0u64; p.div_ceil(64)];
            for (r, rank) in ranks.iter().enumerate() {
                let h = topology.host_index(r);
                hosts[h].0 += rank.remaining();
                hosts[h].1 += rank.speed();
                host_open[h] += rank.sos_on_host() as u64;
                excess[h] += rank.excess(now);
                free_ranks[r / 64] |= u64::from(rank.is_free()) << (r % 64);
                fast_ranks[r / 64] |= u64::from(rank.fast()) << (r % 64);
                sos_ranks[r / 64] |= u64::from(rank.sos_open()) << (r % 64);
            }
            joined = Some(Job {
                completed,
                speed: ranks.iter().map(Rank::speed).sum(),
                at: now,
                idle: Arc::new(topology.idle_map(
                    ranks.iter().filter(|r| !r.owns_work()).count(),
                    (0..p).filter(|&r| ranks[r].is_free()),
                )),
                open: ranks.iter().filter(|r| r.sos_open()).count() as u64,
                free_speed: (ranks.iter())
                    .filter(|r| r.is_free())
                    .map(Rank::speed)
                    .sum(),
                host_open: Arc::new(host_open),
                hosts: Arc::new(hosts),
                excess: Arc::new(excess),
                free_ranks: Arc::new(free_ranks),
                sos_ranks: Arc::new(sos_ranks),
                fast_ranks: Arc::new(fast_ranks),
                moves: Arc::default(),
            });
            after_plan = waves_start;
            next_join = next_wave + 0.5 * params.check_interval;
        }
        if let Some((at, rank)) = corrupt
            && now >= at
        {
            board.corrupt(rank);
            corrupt = None;
        }
        if let Some((at, _)) = &replies[i]
            && *at <= now
            && let Some((_, reply)) = replies[i].take()
        {
            ranks[i].reply(reply)?;
        }
        // Host transfers that have arrived.
        idle_until[i] = None;
        if !inbox[i].is_empty() {
            let (arrived, later) = std::mem::take(&mut inbox[i])
                .into_iter()
                .partition(|(at, _, _)| *at <= now);
            inbox[i] = later;
            for (_, from, ids) in arrived {
                ranks[i].receive(from, ids, now);
            }
        }
        let before = ranks[i].done();
        let mut step = ranks[i].next(now)?;
        // The clerk carries a request out at once on the board; the reply
        // arrives when its operations are done, and the rank computes
        // meanwhile.
        loop {
            let request = match step {
                Step::Ask(request) => *request,
                Step::Send { to, ids } => {
                    // The message arrives after `TRANSFER_LATENCY`: an idle
                    // receiver wakes then, a busy one takes it at its next
                    // call.
                    let at = now + TRANSFER_LATENCY;
                    transfers.0 += 1;
                    transfers.1 += ids.len();
                    inbox[to].push((at, i, ids));
                    if idle_until[to].is_some_and(|until| until > at) {
                        idle_until[to] = Some(at);
                        calls[to] += 1;
                        rng = splitmix64(rng);
                        queue.push(Reverse((Time(at), rng, to, calls[to])));
                        state[to] = State::Ready(at);
                    }
                    step = ranks[i].next(now)?;
                    continue;
                }
                other => {
                    step = other;
                    break;
                }
            };
            let kind = kind(&request);
            let host = host_boards.get_mut(topology.host_index(i));
            let (mut reply, touched, seconds) =
                serve_timed(&mut clerks[i], request, (&mut board, host), i, timed);
            count_ops(&mut storage_ops, now, kind, touched);
            storage_seconds[i] += seconds;
            reply.seconds = Some(seconds);
            if seconds > 0.0 {
                replies[i] = Some((now + seconds, reply));
            } else {
                ranks[i].reply(reply)?;
            }
            step = ranks[i].next(now)?;
        }
        completed += ranks[i].done() - before;
        let logged = events[i].len();
        events[i].extend(ranks[i].drain_events().map(|e| (now, e)));
        state[i] = match step {
            Step::Compute(chunk) => {
                let mut t = now;
                for id in chunk {
                    counts[id as usize] += 1;
                    t += scenario.duration(i, id, t);
                }
                rng = splitmix64(rng);
                let jitter = opts.jitter * (rng >> 11) as f64 * (-53f64).exp2();
                finish[i] = now + (t - now) * (1.0 + jitter);
                State::Ready(finish[i])
            }
            // The rank computes its reserve while the others report.
            Step::Exchange(report) => {
                reports[i] = Some(report);
                exchanging += 1;
                State::Ready(now)
            }
            Step::AwaitPlan => State::AwaitingPlan,
            Step::AwaitReply => match &replies[i] {
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
                ranks[i].flush_progress(now);
                events[i].extend(ranks[i].drain_events().map(|e| (now, e)));
                let until = until.max(now + 1e-6);
                idle_until[i] = Some(until);
                State::Ready(until)
            }
            Step::Ask(_) | Step::Send { .. } => {
                return Err(Error::Internal("a request left unserved".into()));
            }
        };
        if events[i].len() > logged && now >= logged_at[i] + log_every {
            logged_at[i] = now;
            let created = std::mem::replace(&mut log_created[i], true);
            count_ops(&mut storage_ops, now, log_kind, 2 - u64::from(created));
        }
        if completed == scenario.realisations {
            // Every id is reported: the next wave ends the job everywhere.
            let end = now + WAVE_LATENCY;
            state.iter_mut().for_each(|s| *s = State::Done(end));
            break;
        }
        if let State::Ready(t) = state[i] {
            if t.is_finite() {
                calls[i] += 1;
                rng = splitmix64(rng);
                queue.push(Reverse((Time(t), rng, i, calls[i])));
            } else if !ranks[i].owns_work()
                && ranks.iter().all(|r| !r.owns_work())
                && inbox.iter().all(Vec::is_empty)
            {
                // Nobody owns work, yet ids are missing: the real job's
                // verdict is Lost.
                return Err(Error::Internal(format!(
                    "no rank owns work, yet only {completed} of {} realisations were reported",
                    scenario.realisations
                )));
            }
        }
        if exchanging == p {
            // The collective completes when the last rank enters it (now);
            // the ranks still computing their reserve go on.
            exchanging = 0;
            waves_start = true;
            let all: Vec<WarmupReport> = reports.iter_mut().filter_map(Option::take).collect();
            let plan = crate::plan::rescale(&all);
            for (k, rank) in ranks.iter_mut().enumerate() {
                rank.apply_planned(&all, &plan, now)?;
                events[k].extend(rank.drain_events().map(|e| (now, e)));
                if state[k] == State::AwaitingPlan {
                    state[k] = State::Ready(now);
                    calls[k] += 1;
                    rng = splitmix64(rng);
                    queue.push(Reverse((Time(now), rng, k, calls[k])));
                }
            }
        }
    }
    let mut verdict = 0.0f64;
    for s in &state {
        match s {
            State::Done(t) => verdict = verdict.max(*t),
            _ => return Err(Error::Internal("the simulation did not terminate".into())),
        }
    }
    // As `finish`: replies still on their way reach their ranks (a search
    // stops at the verdict, once the step under way is done), and owners
    // whose SOS is still open look at it once more: their accounts of the
    // help given. The job ends when the last rank is through.
    let mut makespan = verdict;
    for (i, reply) in replies.into_iter().enumerate() {
        let mut t = verdict;
        if let Some((at, reply)) = reply {
            t = match reply.outcome {
                crate::policy::Outcome::Helped { .. } => {
                    at.min(verdict + SEARCH_STEP * opts.storage_delay)
                }
                _ => at,
            }
            .max(verdict);
            ranks[i].reply(reply)?;
        }
        if let Some(request) = ranks[i].last_look(t) {
            let host = host_boards.get_mut(topology.host_index(i));
            let (reply, _, seconds) =
                serve_timed(&mut clerks[i], request, (&mut board, host), i, timed);
            t += seconds;
            ranks[i].reply(reply)?;
            events[i].extend(ranks[i].drain_events().map(|e| (t, e)));
        }
        makespan = makespan.max(t);
    }
    let left = ranks
        .iter()
        .map(|r| {
            let owned = r.owned();
            let uncomputed = owned
                .ranges()
                .flatten()
                .filter(|&id| counts[id as usize] == 0);
            uncomputed.count() as u64
        })
        .collect();
    Ok(Outcome {
        counts,
        makespan,
        verdict,
        reports: ranks.iter().map(Rank::report).collect(),
        left,
        finish,
        storage_ops,
        storage_seconds,
        events,
        transfers,
        finalize_writes: p as u64 + log_created.iter().filter(|&&c| !c).count() as u64,
    })
}
