//! [`Balancer`]: the MPI and file shell around the pure state machine
//! ([`crate::policy::Rank`]). It reads the clock, makes the collectives,
//! runs the termination waves ([`crate::verdict`]), runs the rank's clerk
//! ([`crate::clerk`]) with the file board in a thread of its own, and owns
//! the discovery of SOS files and the monitor log.

use crate::board::file::{self, FileBoard, JobInfo};
use crate::board::node::{self, Presence};
use crate::board::warn::Warnings;
use crate::board::watch::Discovery;
use crate::board::{Board, Probe};
use crate::clerk::Clerk;
use crate::comm::{Comm, Gather, Outgoing, Wave, check_mpi};
use crate::config::{self, Config, Mode};
use crate::deadline::{self, Deadline};
use crate::error::{Error, Result, code};
use crate::ids::IdSet;
use crate::monitor::Monitor;
use crate::phases::Phases;
use crate::plan::WarmupReport;
use crate::policy::{Outcome, Params, Rank, RankReport, Reply, Request, Step};
use crate::progress::{Figures, Progress};
use crate::protocol::Level;
use crate::resume::{JobJournal, Journal, Prior};
use crate::stats::{Observables, Statistic};
use crate::topology::Topology;
use crate::verdict::{Audit, Judge, Status, Verdict, Words};
use mpi::traits::Communicator;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a waiting rank tests the termination wave, seconds: from the
/// first, doubling while the wave waits for others, up to the second; near
/// the job's forecast end, never less often than the first
/// ([`Balancer::test_cap`]). Each wave's reduction advances
/// only when its ranks test it: at up to 20 ms, the verdict came about
/// 0.18 s after the last realisation (emulator, sites16-one, 16 ranks); at
/// up to 5 ms, 0.01 to 0.03 s; at up to 2 ms, the run ended 58 ms after its
/// last realisation where it did 78 ms after at 5 ms (the end of `finish`
/// included), and the verdict came 11 to 22 ms after the last realisation;
/// at 0.5 ms, 4 to 7 ms.
const TEST_INTERVAL: (f64, f64) = (0.0005, 0.002);

/// How often a busy rank tests the wave in flight, seconds. A non-blocking
/// reduction advances only when its ranks call MPI, so this sets how fast a
/// wave completes; joining a new wave waits for the next check.
const BUSY_TEST_INTERVAL: f64 = 0.01;

/// The `init`s of this process so far: each run gets its own directory.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The common start of the first run of the process: the config's walltime
/// counts from it.
static FIRST_START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Balances `total` realisations over the ranks of a communicator.
///
/// Every rank calls [`Balancer::next`] in a loop and computes the ids it
/// returns, then [`Balancer::finish`] (collective). See the crate
/// documentation for an example.
///
/// The job ends with one verdict on every rank (DESIGN §5): all ids
/// computed, a stop asked by any rank ([`Balancer::stop`]), or a failure on
/// any rank, which every rank's `next` and `finish` then return as
/// [`Error::Rank`]. No rank is left waiting.
pub struct Balancer {
    comm: Comm,
    rank: Rank,
    /// The rank's clerk and the file board, in their thread.
    desk: Desk,
    /// The run directory.
    job_dir: PathBuf,
    /// This host's copy of the open index (removed at the end).
    host_copy: Option<PathBuf>,
    /// The rank's hold on its run's node-local directory (let go at the end).
    presence: Option<Presence>,
    /// The host's board (node-local), and whether this rank is the host's
    /// lowest, which removes it.
    host_board_dir: Option<(PathBuf, bool)>,
    /// Warnings on stderr, rate-limited.
    warner: Warnings,
    discovery: Option<Discovery>,
    monitor: Monitor,
    config: Config,
    start: Instant,
    /// The emulated slowness of this rank.
    #[cfg(feature = "emulate")]
    stretch: crate::emulate::Stretch,
    observables: Observables,
    warnings: Vec<String>,
    end: Termination,
    /// The deadline (DESIGN §11), if there is a walltime.
    deadline: Option<Deadline>,
    /// When this rank stops for the deadline (infinite: never).
    stop_at: f64,
    /// The completion journal, with a `job_name`.
    journal: Option<Journal>,
    /// The first of `stop_at` and the journal's next write: the one
    /// comparison the deadline and the journal add to the fast path.
    due: f64,
    /// Rank 0's progress line (DESIGN §12).
    progress: Option<Progress>,
    /// The storage cost, timed in the background at init
    /// ([`FileBoard::probe_storage`]), until it arrives.
    storage_probe: Option<Receiver<f64>>,
    /// Host transfers on their way ([`crate::transfer`]): the rank owns
    /// work until the receivers have them.
    outgoing: Vec<Outgoing>,
    /// Host transfers sent and received (messages), for the drain at
    /// `finish`.
    transfers: (u64, u64),
    /// A host transfer arrived since the rank last looked for work.
    received: bool,
    /// Seconds this rank spent in `init`.
    init_seconds: f64,
}

/// The shell's side of the termination: waves, this rank's failure or stop,
/// and the verdict.
struct Termination {
    judge: Judge,
    wave: Option<Wave>,
    /// When a busy rank next joins a wave (at its checks).
    next_wave: f64,
    /// When a busy rank next tests the wave in flight.
    next_test: f64,
    /// The warm-up exchange is behind (or there is none). Waves start only
    /// then, so that every rank makes the collectives in the same order.
    exchanged: bool,
    /// The warm-up exchange in flight, while this rank computes its reserve.
    gather: Option<Gather>,
    /// This rank's own failure (code, message), announced with the next wave.
    failure: Option<(i32, String)>,
    /// The program asked to stop.
    stop: bool,
    verdict: Option<Verdict>,
    /// After [`Verdict::Failed`]: the failed rank, its code and message.
    error: Option<(usize, i32, String)>,
    /// Since when this rank waits for a wave, and when it warns next.
    waiting: Option<(f64, f64)>,
    /// The time of the wave of the last host transfers planned
    /// ([`crate::transfer::planned`]; the same on every rank).
    planned: f64,
    /// Waves completed.
    waves: u64,
    /// Until when a waiting rank tests the wave at [`TEST_INTERVAL`]'s
    /// first: set once, near the job's forecast end ([`Balancer::test_cap`]).
    test_fast_until: Option<f64>,
}

/// What [`Balancer::finish`] returns on every rank.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Realisations added with [`Balancer::add`], over all ranks.
    pub count: u64,
    /// Mean and standard error of each observable.
    pub statistics: Vec<Statistic>,
    /// Each rank's figures.
    pub ranks: Vec<RankReport>,
    /// Each rank's host.
    pub hosts: Vec<String>,
    /// The run directory on the signal directory.
    pub job_dir: PathBuf,
    /// Seconds from the common start to the verdict.
    pub elapsed: f64,
    /// How the job ended.
    pub verdict: Verdict,
    /// The ids computed over all ranks, against `0..total` (in a resumed
    /// run: against the ids the journal did not hold, numbered from 0).
    pub audit: Audit,
    /// Realisations whose sums came from the completion journal of earlier
    /// runs (included in `count` and `statistics`).
    pub resumed: u64,
    /// Termination waves completed (the same on every rank): `elapsed`
    /// over this is the mean time a wave took.
    pub waves: u64,
    /// Seconds `init` took, on the rank where it took longest (from the
    /// entry of `init` to its return; the monitor logs' `init-time` lines
    /// give each rank's phases).
    pub init: f64,
}

impl Balancer {
    /// Start balancing `total` realisations over the ranks of `comm`
    /// (collective; the communicator is duplicated).
    pub fn new<C: Communicator>(comm: &C, total: u64, config: Config) -> Result<Balancer> {
        check_mpi()?;
        let phases = Phases::start();
        Self::start(Comm::duplicate(comm), total, Ok(config), phases)
    }

    /// The C and Fortran entry: a Fortran communicator handle, a signed
    /// total, a config path (else the defaults of [`Config::load`]).
    pub fn from_fortran(comm: i32, total: i64, config: Option<&Path>) -> Result<Balancer> {
        check_mpi()?;
        let phases = Phases::start();
        // SAFETY: MPI is initialised.
        let comm = unsafe { Comm::duplicate_fortran(comm)? };
        let total_ok = u64::try_from(total).ok().filter(|&t| t > 0).ok_or_else(|| {
            Error::argument(
                "total",
                format!("{total}: the number of realisations must be at least 1"),
            )
        });
        let loaded = total_ok.and_then(|_| Config::load(config));
        Self::start(comm, total.max(0) as u64, loaded, phases)
    }

    fn start(
        comm: Comm,
        total: u64,
        config: Result<Config>,
        mut phases: Phases,
    ) -> Result<Balancer> {
        phases.lap("dup");
        let mut config = comm.agree(config.and_then(|c| {
            c.validate("passed to soslb")?;
            if total == 0 {
                return Err(Error::argument(
                    "total",
                    "0: the number of realisations must be at least 1",
                ));
            }
            Ok(c)
        }))?;
        let me = comm.rank();
        // Every rank must balance the same total with the same settings.
        let all = comm.all_gather(&[total, config.digest()]);
        if let Some(r) = (0..comm.size()).find(|&r| all[2 * r..2 * r + 2] != all[..2]) {
            let what = if all[2 * r] != all[0] {
                format!(
                    "rank {r} passed total {} and rank 0 passed {}",
                    all[2 * r],
                    all[0]
                )
            } else {
                format!(
                    "rank {r} read another configuration than rank 0 (different file or SOSLB_* variables)"
                )
            };
            return Err(Error::argument("total/config", what));
        }
        phases.lap("config");
        // One rank: a pass-through, every id in order, no signal files to share.
        if comm.size() == 1 {
            config.mode = Mode::Static;
        }
        let name = mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into());
        let names = comm.all_gather_strings(&name, 256);
        #[cfg(feature = "emulate")]
        let mut topology = config.emulate.topology(names, &config.sites);
        #[cfg(not(feature = "emulate"))]
        let mut topology = Topology::new(names, &config.sites);
        if config.sites == config::Sites::Measure {
            topology = measure_sites(&comm, topology);
        }
        phases.lap("topology");
        let created = if me == 0 {
            create_run(&config, total, comm.size())
        } else {
            Ok(PathBuf::new())
        };
        let job_dir = PathBuf::from(
            comm.broadcast_string(
                &created
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                0,
            ),
        );
        comm.agree(created)?;
        phases.lap("run_dir");
        config.host_board &= config.mode == Mode::Full;
        // The run's node-local directory (the hosts' copies of the index,
        // the host's board), held while the rank runs; the host's lowest
        // rank sweeps away those that killed jobs left.
        let tmp = std::env::temp_dir();
        let node_dir = node::run_dir(&tmp, &job_dir);
        let presence = Presence::join(&node_dir);
        let lead = (0..comm.size()).find(|&r| topology.host(r) == topology.host(me)) == Some(me);
        let swept = if lead {
            node::sweep(&tmp, &node_dir, node::SWEEP_AGE)
        } else {
            Vec::new()
        };
        phases.lap("node_dir");
        let joined = FileBoard::open(&job_dir, me).and_then(|board| {
            let monitor = if config.log {
                let path = board
                    .log_dir()
                    .join(format!("{}.{me}.log", topology.host(me)));
                Monitor::create(&path, me, comm.size())?
            } else {
                Monitor::disabled(me)
            };
            let board = board.with_host_dir(&node_dir);
            #[cfg(feature = "emulate")]
            let board = config.emulate.slow(board, me, comm.size());
            Ok((board, monitor))
        });
        let (board, mut monitor) = comm.agree(joined)?;
        phases.lap("board");
        // The host's own board (node-local, beside the copies of the index):
        // made by the host's lowest rank, then joined by all of its ranks.
        let (host_board, host_board_dir) = if config.host_board {
            let dir = node_dir.join(format!("board-{}", file::file_name_of(topology.host(me))));
            comm.agree(if lead {
                file::create_host_board(&dir)
            } else {
                Ok(())
            })?;
            let board = FileBoard::open(&dir, me);
            (Some(comm.agree(board)?), Some((dir, lead)))
        } else {
            (None, None)
        };
        phases.lap("host_board");
        let discovery = if config.mode == Mode::Full {
            let watch = match config.discovery {
                config::Discovery::Watch => true,
                config::Discovery::Poll => false,
                config::Discovery::Auto => {
                    !crate::board::fs::is_shared_fs(&job_dir).unwrap_or(true)
                }
            };
            Some(Discovery::new(&board.index_path(), watch))
        } else {
            None
        };
        #[cfg(feature = "emulate")]
        let stretch = config.emulate.stretch(me);
        monitor.line(
            0.0,
            format_args!(
                "init ranks={} total={total} host={} site={} mode={:?} job_dir={} discovery={}",
                comm.size(),
                topology.host(me),
                topology.site(me),
                config.mode,
                job_dir.display(),
                match &discovery {
                    Some(d) if d.is_watching() => "watch",
                    Some(_) => "poll",
                    None => "none",
                }
            ),
        );
        for dir in &swept {
            monitor.line(
                0.0,
                format_args!("swept {} (a killed job's node-local files)", dir.display()),
            );
        }
        let mut warnings = Vec::new();
        if let Some(reason) = discovery.as_ref().and_then(Discovery::fallback_reason) {
            crate::error::warn(me, reason);
            warnings.push(reason.to_string());
        }
        let mut journal = open_journal(&comm, &config, total)?;
        if let Some(j) = &journal {
            let p = j.prior();
            for w in &p.warnings {
                if me == 0 {
                    crate::error::warn(me, w);
                }
                warnings.push(w.clone());
            }
            monitor.line(
                0.0,
                format_args!(
                    "journal dir={} earlier_runs={} journalled={} to_compute={}",
                    p.dir.display(),
                    p.runs,
                    p.done.len(),
                    j.to_compute(total)
                ),
            );
        }
        let to_compute = journal.as_ref().map_or(total, |j| j.to_compute(total));
        let asked = match crate::batch::walltime(&comm) {
            Some(Err(e)) => {
                let text = format!("the batch system's walltime is unknown: {e}");
                if me == 0 {
                    crate::error::warn(me, &text);
                }
                monitor.line(0.0, format_args!("warning {text}"));
                warnings.push(text);
                None
            }
            Some(Ok(answer)) => Some(answer),
            None => None,
        };
        phases.lap("discovery_journal");
        comm.quiet_barrier();
        phases.lap("barrier");
        let start = Instant::now();
        let first = *FIRST_START.get_or_init(|| start);
        let deadline = deadline_of(&config, start - first, to_compute, asked);
        let stop_at = deadline.as_ref().map_or(f64::INFINITY, Deadline::stop_at);
        if let Some(d) = &deadline {
            monitor.line(
                0.0,
                format_args!("deadline limit={:.3} stop_at={stop_at:.3}", d.limit()),
            );
        }
        let due = journal
            .as_mut()
            .map_or(f64::INFINITY, |j| j.due())
            .min(stop_at);
        let rank = Rank::new(me, to_compute, Params::from(&config), topology);
        let storage_probe = discovery.as_ref().map(|_| board.probe_storage());
        let host_copy = board.host_copy_path(rank.topology().host(me));
        let desk = comm.agree(Desk::start(Clerk::new(&rank), board, host_board))?;
        phases.lap("clerk");
        let init_seconds = phases.total();
        monitor.line(
            0.0,
            format_args!("init-time s={init_seconds:.4} {}", phases.fields()),
        );
        let end = Termination {
            judge: Judge::new(to_compute, comm.size()),
            wave: None,
            next_wave: 0.0,
            next_test: 0.0,
            exchanged: !rank.in_warmup(),
            gather: None,
            failure: None,
            stop: false,
            verdict: None,
            error: None,
            waiting: None,
            planned: f64::NEG_INFINITY,
            waves: 0,
            test_fast_until: None,
        };
        let progress = (me == 0).then(|| Progress::new(config.progress));
        Ok(Balancer {
            rank,
            comm,
            desk,
            job_dir,
            host_copy,
            presence,
            host_board_dir,
            warner: Warnings::new(me),
            discovery,
            monitor,
            config,
            start,
            #[cfg(feature = "emulate")]
            stretch,
            observables: Observables::new(),
            warnings,
            end,
            deadline,
            stop_at,
            journal,
            due,
            progress,
            storage_probe,
            outgoing: Vec::new(),
            transfers: (0, 0),
            received: false,
            init_seconds,
        })
    }

    /// The storage cost timed at init, once it has arrived: one read, one
    /// operation.
    fn take_storage_probe(&mut self) {
        let Some(probe) = &self.storage_probe else {
            return;
        };
        match probe.try_recv() {
            Ok(seconds) => self.rank.observe_storage(seconds),
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {}
        }
        self.storage_probe = None;
    }

    /// Seconds since the common start.
    #[inline]
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The next chunk of ids to compute, or `None` when the job is over
    /// (every id computed, or a rank asked to stop).
    ///
    /// The time between two calls is the chunk's computing time. A rank
    /// without work waits here (sleeping, never spinning) while it helps
    /// others, until the job's verdict. An error on any rank is returned on
    /// every rank as [`Error::Rank`], and again by later calls.
    #[allow(clippy::should_implement_trait)] // fallible and blocking: not an Iterator
    pub fn next(&mut self) -> Result<Option<Range<u64>>> {
        if let Some(j) = &mut self.journal {
            j.completed();
        }
        if self.end.verdict.is_some() {
            return self.outcome();
        }
        if self.end.stop || self.end.failure.is_some() {
            self.conclude();
            return self.outcome();
        }
        if let Some(piece) = self.journal.as_mut().and_then(Journal::pending) {
            return Ok(Some(piece));
        }
        #[cfg(feature = "emulate")]
        self.stretch.sleep();
        let mut now = self.now();
        // The journal's write is not computing time: the chunk handed out
        // next starts after it.
        let journalled = now >= self.due;
        if journalled && self.on_due(now) {
            self.conclude();
            return self.outcome();
        }
        // The chunk handed out starts after the library's own time.
        let mut restart = journalled;
        loop {
            if self.end.gather.is_some() {
                if let Err(e) = self.end_exchange(false) {
                    return self.fail_and_conclude(e);
                }
                if self.end.verdict.is_some() {
                    return self.outcome();
                }
            }
            if self.rank.asking()
                && let Err(e) = self.take_reply(None)
            {
                return self.fail_and_conclude(e);
            }
            let step = self.rank.next(now);
            let logged = self.rank.has_events();
            if logged {
                self.log_events(now);
                restart = true;
            }
            match step {
                Err(e) => return self.fail_and_conclude(e),
                Ok(Step::Compute(ids)) => {
                    // Only computing counts in the speed, never the
                    // library's own time.
                    if restart {
                        self.rank.restart_chunk(self.now());
                    }
                    if now >= self.end.next_test && self.wave_tick(now, false) {
                        return self.outcome();
                    }
                    #[cfg(feature = "emulate")]
                    self.stretch.start();
                    return Ok(Some(match &mut self.journal {
                        Some(j) => j.hand_out(ids),
                        None => ids,
                    }));
                }
                Ok(Step::Ask(request)) => {
                    if let Err(e) = self.desk.send(*request) {
                        return self.fail_and_conclude(e);
                    }
                    continue;
                }
                Ok(Step::AwaitReply) => {
                    restart = true;
                    match self.await_reply() {
                        Ok(true) => return self.outcome(),
                        Ok(false) => {}
                        Err(e) => return self.fail_and_conclude(e),
                    }
                }
                Ok(Step::Send { to, ids }) => {
                    self.outgoing
                        .push(self.comm.send_transfer(to, ids.to_words()));
                    self.transfers.0 += 1;
                }
                Ok(Step::Exchange(report)) => self.start_exchange(&report),
                Ok(Step::AwaitPlan) => {
                    restart = true;
                    if let Err(e) = self.end_exchange(true) {
                        return self.fail_and_conclude(e);
                    }
                    if self.end.verdict.is_some() {
                        return self.outcome();
                    }
                }
                Ok(Step::Idle { until }) => {
                    restart = true;
                    // The ids finished since the last check, logged when
                    // they were (the rank may wait long for the verdict).
                    self.rank.flush_progress(now);
                    if self.rank.has_events() {
                        self.log_events(now);
                    }
                    if self.wait_idle(until) {
                        return self.outcome();
                    }
                }
            }
            now = self.now();
        }
    }

    /// The clerk's reply, if it has come (waiting up to `wait` for it):
    /// the state machine applies it.
    fn take_reply(&mut self, wait: Option<Duration>) -> Result<bool> {
        let Some(reply) = self.desk.reply(wait)? else {
            return Ok(false);
        };
        self.rank.reply(reply)?;
        Ok(true)
    }

    /// No work until the clerk's reply comes: wait for it while taking
    /// part in the termination waves. True once there is a verdict.
    fn await_reply(&mut self) -> Result<bool> {
        let mut test_every = TEST_INTERVAL.0;
        loop {
            if self.wave_tick(self.now(), true) {
                return Ok(true);
            }
            if self.take_reply(Some(Duration::from_secs_f64(test_every)))?
                || std::mem::take(&mut self.received)
            {
                return Ok(false);
            }
            test_every = (2.0 * test_every).min(self.test_cap());
        }
    }

    /// The longest pause between two tests of the wave: [`TEST_INTERVAL`]'s
    /// first from a check interval before the job's forecast end (as first
    /// seen that close) to two check intervals after it, when the wave that
    /// ends the job may be in flight and a rank waits for the others' tests;
    /// else its second. A job that overruns its forecast by more is held up
    /// (by a straggler, a lock held from outside), its verdict not at hand:
    /// tested every 0.5 ms for as long as a lock was held from outside for
    /// 4 s, 15 waiting ranks used 2.5 s of CPU in 7.7 s, against 1.4 s.
    fn test_cap(&mut self) -> f64 {
        let (now, interval) = (self.now(), self.config.check_interval);
        let job_end = self.rank.job_end();
        if self.end.test_fast_until.is_none() && now + interval >= job_end {
            self.end.test_fast_until = Some(job_end + 2.0 * interval);
        }
        match self.end.test_fast_until {
            Some(until) if now <= until => TEST_INTERVAL.0,
            _ => TEST_INTERVAL.1,
        }
    }

    /// Ask every rank to end the loop early (for example when the standard
    /// error is small enough): every rank's [`Balancer::next`] reports the
    /// end soon (this rank's at its next call), and the statistics cover
    /// exactly the realisations added.
    pub fn stop(&mut self) {
        if !self.end.stop {
            let t = self.now();
            self.monitor.line(t, format_args!("stop asked"));
        }
        self.end.stop = true;
    }

    /// The deadline's stop or the journal's write is due at `now`. True when
    /// this rank stops for the deadline.
    #[cold]
    fn on_due(&mut self, now: f64) -> bool {
        if let Some(j) = &mut self.journal
            && now >= j.due()
            && let Err(e) = j.write(now, &self.observables)
        {
            let text = format!("the completion journal could not be written: {e}");
            if self.warner.warn(&text) {
                self.warnings.push(text.clone());
            }
            self.monitor.line(now, format_args!("warning {text}"));
        }
        self.due = self
            .journal
            .as_ref()
            .map_or(f64::INFINITY, Journal::due)
            .min(self.stop_at);
        if now < self.stop_at || self.end.stop {
            return false;
        }
        let text = format!(
            "deadline: stopping at {now:.1} s, the walltime minus the margin \
             (on_deadline: Stop); the statistics cover the realisations completed"
        );
        if self.comm.rank() == 0 {
            crate::error::warn(0, &text);
        }
        self.monitor.line(now, format_args!("{text}"));
        self.stop();
        true
    }

    /// Rank 0: compare the job's forecast end (the plan's horizon when
    /// given, the job's rate over the recent waves with their completed
    /// count, and its own forecast when no rank helps another) with the
    /// deadline, and warn the first time it passes it.
    #[cold]
    fn watch_deadline(&mut self, now: f64, completed: Option<u64>, horizon: Option<f64>) {
        if self.comm.rank() != 0 {
            return;
        }
        let Some(d) = &mut self.deadline else {
            return;
        };
        if let Some(c) = completed {
            d.observe(now, c);
        }
        let own = (self.config.mode != Mode::Full && self.rank.speed() > 0.0)
            .then(|| crate::speed::forecast(now, self.rank.remaining(), self.rank.speed()));
        let Some(forecast) = [horizon, d.rate_forecast(), own]
            .into_iter()
            .flatten()
            .reduce(f64::max)
        else {
            return;
        };
        if let Some(w) = d.check(now, forecast) {
            crate::error::warn(0, &w.text);
            self.monitor.line(now, format_args!("warning {}", w.text));
            self.monitor.flush();
            self.warnings.push(w.text);
        }
    }

    /// What `next` returns once there is a verdict.
    fn outcome(&self) -> Result<Option<Range<u64>>> {
        match &self.end.verdict {
            Some(Verdict::Done | Verdict::Stopped) => Ok(None),
            Some(Verdict::Failed { .. }) => {
                let (rank, code, message) = self.end.error.clone().unwrap_or_default();
                Err(Error::Rank {
                    rank,
                    code,
                    message,
                })
            }
            Some(Verdict::Lost { completed }) => Err(Error::Corrupt {
                path: self.job_dir.clone(),
                reason: format!(
                    "the ranks computed {completed} of {} realisations and none owns any more: \
                     ids were lost (a signal file destroyed or replaced during the run?); see \
                     the monitor logs",
                    self.rank.total()
                ),
            }),
            None => Err(Error::Internal("no verdict yet".into())),
        }
    }

    /// This rank failed with `e`: tell every rank, wait for the verdict.
    fn fail_and_conclude(&mut self, e: Error) -> Result<Option<Range<u64>>> {
        self.fail(e);
        self.conclude();
        self.outcome()
    }

    /// Record this rank's failure (the first one counts); the next wave
    /// announces it.
    fn fail(&mut self, e: Error) {
        let t = self.now();
        self.monitor
            .line(t, format_args!("failed code={} {e}", e.code()));
        self.monitor.flush();
        self.end.failure.get_or_insert((e.code(), e.to_string()));
    }

    /// Take part in the termination until there is a verdict: the warm-up
    /// exchange if it is still ahead, then waves.
    fn conclude(&mut self) {
        if !self.end.exchanged {
            if self.end.gather.is_none() {
                let report = self.rank.warmup_report(self.now());
                self.start_exchange(&report);
            }
            if let Err(e) = self.end_exchange(true) {
                self.fail(e);
            }
        }
        let mut pause = TEST_INTERVAL.0;
        while !self.wave_tick(self.now(), true) {
            std::thread::sleep(Duration::from_secs_f64(pause));
            pause = (2.0 * pause).min(self.test_cap());
        }
    }

    /// This rank's contribution to a wave.
    fn status(&self, now: f64) -> Status {
        let speed = self.rank.speed();
        Status {
            completed: self.rank.audit().count,
            busy: self.rank.owns_work() || !self.outgoing.is_empty(),
            failed: self.end.failure.is_some(),
            stop: self.end.stop,
            speed_milli: (speed * 1000.0).round() as u64,
            speed_time_milli: (speed * now * 1000.0).round() as u64,
            sos_open: self.rank.sos_open(),
            fast: self.rank.fast(),
            sos_on_host: self.rank.sos_on_host(),
            free: self.rank.is_free(),
            remaining: self.rank.remaining(),
            excess: self.rank.excess(now),
        }
    }

    /// Test the wave in flight; join a new one when none is in flight (a
    /// busy rank only at its checks, unless `waiting` inside the library).
    /// True once there is a verdict.
    fn wave_tick(&mut self, now: f64, waiting: bool) -> bool {
        if self.end.verdict.is_some() {
            return true;
        }
        if !self.end.exchanged {
            return false;
        }
        self.end.next_test = now + BUSY_TEST_INTERVAL;
        self.take_storage_probe();
        self.take_transfers(now);
        if let Some(wave) = &mut self.end.wave {
            let Some(words) = wave.test() else {
                self.warn_stall(now);
                return false;
            };
            let verdict = self.end.judge.judge(words);
            self.end.waves += 1;
            let mut job = words.job(self.rank.topology());
            let (topology, params) = (self.rank.topology(), self.rank.params());
            if let Some(moves) = crate::transfer::planned(&job, topology, params, self.end.planned)
            {
                self.end.planned = job.at;
                job.moves = Arc::new(moves);
            }
            let (completed, open) = (job.completed, job.open);
            self.rank.observe_job(job);
            self.show_progress(now, completed, open, verdict.is_some());
            self.end.wave = None;
            if self.deadline.is_some() {
                self.watch_deadline(now, Some(completed), None);
            }
            self.end.waiting = None;
            if let Some(v) = verdict {
                self.conclude_with(v);
                return true;
            }
        }
        let status = self.status(now);
        let interval = self.config.check_interval;
        let ends_soon = status.remaining as f64 <= self.rank.speed() * interval;
        let busy = status.busy && !waiting;
        if !joins_wave(now, busy, ends_soon, self.end.next_wave, interval) {
            return false;
        }
        self.end.next_wave = now + interval;
        let words = Words::of(&status, self.comm.rank(), self.rank.topology());
        self.end.wave = Some(self.comm.start_wave(words));
        false
    }

    /// Host transfers: those sent that their receivers have are done;
    /// those that arrived are the rank's own work now.
    fn take_transfers(&mut self, now: f64) {
        // (Only where the job's hosts trade, the same on every rank.)
        if !self.rank.trades() {
            return;
        }
        self.outgoing.retain_mut(|o| !o.test());
        while let Some((from, words)) = self.comm.receive_transfer() {
            self.transfers.1 += 1;
            match IdSet::from_words(&words) {
                Some(ids) => {
                    self.rank.receive(from, ids, now);
                    self.received = true;
                }
                None => self.fail(Error::Internal(format!(
                    "a host transfer from rank {from} is not a set of ids ({} words)",
                    words.len()
                ))),
            }
        }
    }

    /// At `finish`: every host transfer sent reaches its receiver (after a
    /// stop or a failure some are still on their way; their ids are not
    /// computed), so that no send is left pending. Collective.
    fn drain_transfers(&mut self) {
        if !self.rank.trades() {
            return;
        }
        loop {
            while self.comm.receive_transfer().is_some() {
                self.transfers.1 += 1;
            }
            let (sent, received) = self.transfers;
            if self.comm.sum(&[sent as i64 - received as i64])[0] == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut pause = Duration::from_micros(20);
        while !self.outgoing.iter_mut().all(Outgoing::test) {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        self.outgoing.clear();
    }

    /// Rank 0: the progress line if one is due, or the last one at the
    /// verdict, with the wave's figures (no file is read: on slow storage
    /// a read of the open index per line delayed rank 0's own work).
    #[cold]
    fn show_progress(&mut self, now: f64, done: u64, open: u64, over: bool) {
        let Some(p) = &mut self.progress else { return };
        let total = self.rank.total();
        let line = if over {
            p.last(done, total, now)
        } else if p.due(now) {
            let open = (self.config.mode == Mode::Full).then_some(open as usize);
            let end = self.rank.job_end();
            let figures = Figures {
                done,
                total,
                now,
                end,
                open,
            };
            p.line(&figures, chrono::Local::now())
        } else {
            None
        };
        if let Some(line) = line {
            use std::io::Write;
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    /// Every rank has the verdict `v`; after a failure, the failed rank's
    /// code and message reach every rank.
    fn conclude_with(&mut self, v: Verdict) {
        if let Verdict::Failed { first, .. } = &v {
            let (code, message) = self
                .end
                .failure
                .clone()
                .unwrap_or((code::INTERNAL, String::new()));
            let (code, message) = self.comm.broadcast_message(code, &message, *first);
            self.end.error = Some((*first, code, message));
        }
        let t = self.now();
        self.rank.flush_progress(t);
        self.log_events(t);
        self.monitor.line(
            t,
            format_args!("verdict {v:?} computed={}", self.rank.audit().count),
        );
        // A failure is written at once, for a post-mortem; the end of a
        // good run with finalize's line, one write per rank.
        if matches!(v, Verdict::Failed { .. } | Verdict::Lost { .. }) {
            self.monitor.flush();
        }
        self.desk.over.store(true, Ordering::Relaxed);
        self.end.verdict = Some(v);
    }

    /// A wave waited for longer than `wait_warning`: say for whom, once, then
    /// with a doubling back-off. One rank prints it (the lowest idle one);
    /// every waiting rank logs it.
    fn warn_stall(&mut self, now: f64) {
        let (since, at) = *self
            .end
            .waiting
            .get_or_insert((now, now + self.config.wait_warning));
        if now < at {
            return;
        }
        self.end.waiting = Some((since, now + (now - since)));
        let busy = self.end.judge.busy();
        let shown: Vec<String> = busy.iter().take(8).map(|r| r.to_string()).collect();
        let who = match busy.len() {
            0 => "the other ranks".to_string(),
            n if n > 8 => format!("ranks {}, ... ({n} in all)", shown.join(", ")),
            _ => format!("rank(s) {}", shown.join(", ")),
        };
        let text = format!(
            "waited {:.0} s for {who}, which owned work at the last check, to call soslb_next \
             or soslb_finalize (a realisation longer than that, or a rank that stopped calling)",
            now - since
        );
        let me = self.comm.rank();
        let printer = (0..self.comm.size()).find(|r| !busy.contains(r));
        if printer == Some(me) {
            crate::error::warn(me, &text);
        }
        self.monitor.line(now, format_args!("warning {text}"));
        self.monitor.flush();
        self.warnings.push(text);
    }

    /// Write the state machine's events to the monitor log (flushed every
    /// few seconds).
    #[cold]
    fn log_events(&mut self, now: f64) {
        for e in self.rank.drain_events() {
            if let crate::policy::Event::Recovered { error } = &e {
                self.warner.warn(error); // one whole line, repeats rate-limited
                self.warnings.push(error.clone());
            }
            self.monitor.event(now, &e);
        }
        self.monitor.flush_lazily();
    }

    /// Join Algorithm 1's collective with this rank's warm-up report and
    /// status; the rank computes its reserve until it completes.
    fn start_exchange(&mut self, report: &WarmupReport) {
        let mut words = report.to_words().to_vec();
        words.push(self.status(self.now()).flags());
        self.end.gather = Some(self.comm.start_gather(words));
    }

    /// Once the collective has completed (at once if `wait`, sleeping
    /// until then): every rank's warm-up report and status. A failed or
    /// stopping rank makes it a verdict; else the plan applies.
    fn end_exchange(&mut self, wait: bool) -> Result<()> {
        let Some(mut gather) = self.end.gather.take() else {
            return Ok(());
        };
        if !wait && gather.test().is_none() {
            self.end.gather = Some(gather);
            return Ok(());
        }
        let all = gather.wait();
        self.end.exchanged = true;
        let ranks = self.comm.size();
        let mut reduced = Words::zero(ranks, self.rank.topology().hosts());
        let mut reports = Vec::with_capacity(ranks);
        for (r, w) in all.chunks_exact(WarmupReport::WORDS + 1).enumerate() {
            let (words, flags) = w.split_at(WarmupReport::WORDS);
            let report = WarmupReport::from_words(
                words
                    .try_into()
                    .map_err(|_| Error::Internal("a warm-up report of the wrong length".into()))?,
            );
            let status = Status::from_flags(report.done, flags[0]);
            reduced.merge(&Words::of(&status, r, self.rank.topology()));
            reports.push(report);
        }
        if let Some(v) = self.end.judge.judge(&reduced) {
            self.conclude_with(v);
            return Ok(());
        }
        // Before the first decision that depends on it, if it is there.
        self.take_storage_probe();
        let now = self.now();
        self.rank.apply_plan(&reports, now)?;
        if self.deadline.is_some() {
            self.watch_deadline(now, None, Some(self.rank.horizon()));
        }
        Ok(())
    }

    /// Idle until `until`, waking early when the open index changes, while
    /// taking part in the termination waves. True once there is a verdict.
    fn wait_idle(&mut self, until: f64) -> bool {
        let mut test_every = TEST_INTERVAL.0;
        loop {
            let now = self.now();
            if self.wave_tick(now, true) {
                return true;
            }
            if now >= until || std::mem::take(&mut self.received) {
                return false;
            }
            let pause = Duration::from_secs_f64((until - now).min(test_every));
            test_every = (2.0 * test_every).min(self.test_cap());
            let woken = match &mut self.discovery {
                Some(d) => d.wait(pause),
                None => {
                    std::thread::sleep(pause);
                    false
                }
            };
            if woken {
                self.rank.index_changed();
                return false;
            }
        }
    }

    /// Add the observables of one realisation to the final statistics
    /// (every call, on every rank, passes the same number of values).
    pub fn add(&mut self, values: &[f64]) -> Result<()> {
        if self.observables.is_empty()
            && let Some(j) = &self.journal
        {
            j.prior().check_observables(values.len())?;
        }
        self.observables.add(values)
    }

    /// This rank's figures so far.
    pub fn report(&self) -> RankReport {
        self.rank.report()
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The run directory on the signal directory (logs, SOS files).
    pub fn job_dir(&self) -> &Path {
        &self.job_dir
    }

    /// File operations on the signal directory so far: signal files and
    /// monitor-log writes.
    pub fn file_ops(&self) -> u64 {
        self.desk.ops + self.monitor.writes()
    }

    /// True while this rank's SOS is open.
    pub fn sos_open(&self) -> bool {
        self.rank.sos_open()
    }

    /// The settings in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Signal-file problems this rank recovered from so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// End the run (collective): wait for the verdict, reduce the statistics,
    /// gather the ranks' figures, audit the ids computed, remove the signal
    /// files (unless `keep`), free the communicator.
    ///
    /// Calling it while this rank still owns ids (before [`Balancer::next`]
    /// returned `None`, and without [`Balancer::stop`]) is a failure of this
    /// rank that every rank reports. After a failure verdict the error is
    /// returned again here, on every rank. Observable counts that differ
    /// between ranks, and an audit that finds ids computed twice or not at
    /// all, are errors on every rank too.
    pub fn finish(mut self) -> Result<Summary> {
        if self.end.verdict.is_none() {
            self.leave();
        }
        if self.end.verdict == Some(Verdict::Done)
            && let Err(e) = self.last_look()
        {
            self.warn_at_finish(format!("the last look at the own SOS failed: {e}"));
        }
        self.drain_transfers();
        if self.rank.has_events() {
            self.log_events(self.now());
        }
        // The request out (if any) is carried out, then the clerk's thread
        // ends and the board's descriptors close. Its reply still counts
        // (an owner's last look sees the last AID records).
        let (board_ops, last) = self.desk.close();
        if let Some(reply) = last.filter(|_| self.rank.asking())
            && let Err(e) = self.rank.reply(reply)
        {
            self.warn_at_finish(format!("the last request to the signal files failed: {e}"));
        }
        let elapsed = self.now();
        if let Some(j) = &mut self.journal {
            j.completed();
            if let Err(e) = j.write(elapsed, &self.observables) {
                // The run's result stands; a resumed run would compute
                // this rank's last ids again.
                crate::error::warn(
                    self.comm.rank(),
                    &format!("the final write of the completion journal failed: {e}"),
                );
            }
            let (writes, mean) = j.cost();
            self.monitor.line(
                elapsed,
                format_args!("journal writes={writes} mean_write_ms={:.3}", mean * 1e3),
            );
        }
        let mine = self.rank.report();
        let audit = self.rank.audit();
        let words = [
            mine.computed,
            mine.busy.to_bits(),
            mine.warmup_speed.to_bits(),
            mine.planned,
            mine.horizon.to_bits(),
            mine.taken,
            mine.given,
            mine.sos_posted,
            mine.errors,
            self.observables.len() as u64,
            self.observables.count(),
            audit.sum,
            audit.sum_sq,
            mine.given_to[0],
            mine.given_to[1],
            mine.given_to[2],
            mine.steals.0,
            mine.steals.1,
            mine.host_steals,
            self.init_seconds.to_bits(),
        ];
        let all = self.comm.all_gather(&words);
        let rows: Vec<&[u64]> = all.chunks_exact(words.len()).collect();
        let ranks: Vec<RankReport> = rows
            .iter()
            .enumerate()
            .map(|(rank, w)| RankReport {
                rank,
                computed: w[0],
                busy: f64::from_bits(w[1]),
                warmup_speed: f64::from_bits(w[2]),
                planned: w[3],
                horizon: f64::from_bits(w[4]),
                taken: w[5],
                given: w[6],
                sos_posted: w[7],
                errors: w[8],
                given_to: [w[13], w[14], w[15]],
                steals: (w[16], w[17]),
                host_steals: w[18],
            })
            .collect();
        let mut total_audit = Audit::default();
        for w in &rows {
            total_audit.merge(&Audit {
                count: w[0],
                sum: w[11],
                sum_sq: w[12],
            });
        }
        // The observables per realisation must agree between the ranks that added any.
        let prior = self.journal.as_ref().map(Journal::prior);
        let n = rows
            .iter()
            .map(|w| w[9] as usize)
            .chain(prior.map(|p| p.observables))
            .max()
            .unwrap_or(0);
        let mismatch = rows
            .iter()
            .position(|w| w[10] > 0 && w[9] as usize != n)
            .map(|r| {
                let other = rows.iter().position(|w| w[9] as usize == n).unwrap_or(0);
                Error::argument(
                    "values",
                    format!(
                        "rank {r} added {} observables per realisation and rank {other} added {n}: \
                         every call of soslb_add on every rank must pass the same number",
                        rows[r][9]
                    ),
                )
            });
        let observables = match mismatch {
            None => {
                let mut words = self.observables.to_words(n);
                // The journalled sums of earlier runs, once (on rank 0).
                if let Some(p) = prior.filter(|p| p.observables == n && self.comm.rank() == 0) {
                    words.iter_mut().zip(&p.words).for_each(|(w, p)| *w += p);
                }
                Observables::from_words(n, &self.comm.sum(&words))?
            }
            Some(_) => Observables::new(),
        };
        let verdict = self.end.verdict.clone().unwrap_or(Verdict::Done);
        let summary = Summary {
            count: observables.count(),
            statistics: observables.statistics(),
            hosts: (0..self.comm.size())
                .map(|r| self.rank.topology().host(r).to_string())
                .collect(),
            ranks,
            job_dir: self.job_dir.clone(),
            elapsed,
            verdict: verdict.clone(),
            audit: total_audit,
            resumed: prior.map_or(0, Prior::count),
            waves: self.end.waves,
            init: rows
                .iter()
                .map(|w| f64::from_bits(w[19]))
                .fold(0.0, f64::max),
        };
        let total = self.rank.total();
        let audit_error = summary.audit_problem(total);
        // Ids computed twice: the claim files say which (every rank decides
        // alike, the audit being the same on every rank).
        let twice = match (&audit_error, &self.end.verdict) {
            (Some(_), Some(Verdict::Done)) => self.named_twice(),
            _ => None,
        };
        self.monitor.line(
            elapsed,
            format_args!(
                "finalize file_ops={} audit={}",
                board_ops,
                audit_error.as_deref().unwrap_or("ok")
            ),
        );
        self.monitor.flush();
        if self.config.summary && self.comm.rank() == 0 {
            print!("{}", summary.table(&self.config, total));
        }
        let result = match (self.outcome(), mismatch, twice, audit_error) {
            (Err(e), ..) => Err(e),
            (_, Some(e), ..) => Err(e),
            (_, _, Some(e), _) => Err(e),
            (_, _, _, Some(a)) => Err(Error::Audit(a)),
            _ => Ok(summary),
        };
        // The same decision on every rank: every term above is.
        let clean = result.is_ok() && !self.config.keep;
        // (Every rank's clerk has closed its descriptors: the gather above.)
        let claims: Vec<String> = (self.rank.won().iter())
            .filter(|w| w.0 == Level::Shared)
            .map(|(_, owner, s)| s.claim_name(*owner))
            .collect();
        if clean
            && let Err(e) = crate::board::file::remove_own(&self.job_dir, self.comm.rank(), &claims)
        {
            crate::error::warn(
                self.comm.rank(),
                &format!("could not remove its signal files: {e}"),
            );
        }
        let Balancer {
            comm,
            job_dir,
            host_copy,
            presence,
            host_board_dir,
            discovery,
            monitor,
            config,
            ..
        } = self;
        // Close every descriptor (and the watcher) before the files go.
        drop((discovery, monitor));
        // The run directory stays after a failure, for a post-mortem; the
        // hosts' boards are node-local (a batch system seldom lets anyone
        // read them after the job) and go whatever the outcome, unless the
        // config keeps the files. (Every rank is here: the gather above.)
        if !config.keep {
            comm.quiet_barrier();
            if clean && comm.rank() == 0 {
                remove_signal_files(&job_dir, config.log);
            }
            if let Some((dir, true)) = &host_board_dir
                && let Err(e) = std::fs::remove_dir_all(dir)
            {
                crate::error::warn(
                    comm.rank(),
                    &format!("cannot remove the host's board {}: {e}", dir.display()),
                );
            }
        }
        // A node-local cache, whatever the outcome: each rank tries (a rank
        // still looking for help reads the shared index).
        if let Some(copy) = host_copy {
            let _ = std::fs::remove_file(copy);
        }
        // The last rank of the host out removes the directory. (Without a
        // hold on it, its lock file stays: a later sweep removes it.)
        if let Some(p) = presence {
            p.leave();
        }
        result
    }

    /// Every id is computed: an owner with slots still pending claims them
    /// (after the reply to a request out), so that the claims helpers made
    /// since its last refresh count in what it gave (the summary's and the
    /// report's `given`).
    fn last_look(&mut self) -> Result<()> {
        let wait = Some(Duration::from_secs_f64(TEST_INTERVAL.1));
        while self.rank.asking() {
            self.take_reply(wait)?;
        }
        if let Some(request) = self.rank.last_look(self.now()) {
            self.desk.send(request)?;
            while self.rank.asking() {
                self.take_reply(wait)?;
            }
        }
        Ok(())
    }

    /// After an audit that found ids computed twice: re-read this rank's
    /// won claims. A claim file that now names another rank was removed
    /// during the run and made again; the lowest rank that finds one names
    /// it on every rank (collective).
    fn named_twice(&mut self) -> Option<Error> {
        let me = self.comm.rank();
        let found = self.claim_made_again(me);
        let flags = self.comm.all_gather(&[u64::from(found.is_some())]);
        let root = rows_first(&flags, 1, 0)?;
        let (_, text) = self
            .comm
            .broadcast_message(0, found.as_deref().unwrap_or(""), root);
        Some(Error::Audit(text))
    }

    /// The first of this rank's won claims whose file names another rank.
    fn claim_made_again(&mut self, me: usize) -> Option<String> {
        let mut shared = FileBoard::open(&self.job_dir, me).ok()?;
        let mut host =
            (self.host_board_dir.as_ref()).and_then(|(d, _)| FileBoard::open(d, me).ok());
        self.rank.won().iter().find_map(|(level, owner, slot)| {
            let board = match (level, &mut host) {
                (Level::Host, Some(h)) => h,
                _ => &mut shared,
            };
            match board.probe(*owner, slot) {
                Ok(Probe::Taken(Some(c))) if c.by != me => Some(format!(
                    "{} names rank {} as the claimant of ids {}..{}, but rank {me} claimed them \
                     first: the file was removed during the run and made again, and those ids \
                     were computed twice",
                    board.claim_path(*owner, slot).display(),
                    c.by,
                    slot.start,
                    slot.end
                )),
                _ => None,
            }
        })
    }

    /// A warning at `finish`: on stderr (once), in the monitor log and in
    /// the summary's warnings. The result stands.
    fn warn_at_finish(&mut self, text: String) {
        self.warner.warn(&text);
        self.monitor
            .line(self.now(), format_args!("warning {text}"));
        self.warnings.push(text);
    }

    /// `finish` before the verdict: a rank that still owns ids fails (unless
    /// it asked to stop), then takes part in the termination.
    fn leave(&mut self) {
        let owned = self.rank.owned();
        if !self.end.stop
            && self.end.failure.is_none()
            && (!owned.is_empty() || self.rank.sos_open())
        {
            let when = if self.end.exchanged {
                ""
            } else {
                " during the warm-up"
            };
            self.fail(Error::State(format!(
                "soslb_finalize was called{when} while this rank still owned {} realisations \
                 (ids {owned}); call soslb_next until it reports the end, or soslb_stop to end early",
                owned.len()
            )));
        }
        self.conclude();
    }
}

/// The rank's clerk and the file board in a thread of their own: the
/// thread touches files, never MPI (DESIGN §3). Requests go in one by one;
/// each reply comes back with the time the request took.
struct Desk {
    requests: Option<Sender<Request>>,
    /// Set when the job's verdict is in ([`Clerk::verdict_flag`]).
    over: Arc<AtomicBool>,
    replies: Receiver<(Reply, u64)>,
    thread: Option<JoinHandle<()>>,
    /// Storage operations of the board so far (as of the last reply).
    ops: u64,
}

impl Desk {
    fn start(mut clerk: Clerk, mut board: FileBoard, mut host: Option<FileBoard>) -> Result<Desk> {
        let over = clerk.verdict_flag();
        let (requests, inbox) = mpsc::channel::<Request>();
        let (outbox, replies) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("soslb-clerk".into())
            .spawn(move || {
                for request in inbox {
                    let t = Instant::now();
                    // A panic is an internal error of the rank, never a hang.
                    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let host = host.as_mut().map(|b| b as &mut dyn Board);
                        clerk.serve_on(request, &mut board, host)
                    }));
                    let mut reply = served.unwrap_or_else(|panic| Reply {
                        outcome: Outcome::Failed(Error::Internal(format!(
                            "the clerk's thread panicked: {}",
                            crate::ffi::panic_text(&*panic)
                        ))),
                        seconds: None,
                        ops: [0, 0],
                        looks: (0, 0),
                        errors: Vec::new(),
                    });
                    reply.seconds = Some(t.elapsed().as_secs_f64());
                    // Problems the boards got round themselves.
                    reply.errors.extend(board.take_notes());
                    if let Some(h) = &mut host {
                        reply.errors.extend(h.take_notes());
                    }
                    if outbox.send((reply, board.ops())).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start the clerk's thread: {e}")))?;
        Ok(Desk {
            requests: Some(requests),
            over,
            replies,
            thread: Some(thread),
            ops: 0,
        })
    }

    fn send(&self, request: Request) -> Result<()> {
        self.requests
            .as_ref()
            .and_then(|r| r.send(request).ok())
            .ok_or_else(|| Error::Internal("the clerk's thread has ended".into()))
    }

    /// The reply, if it has come (waiting up to `wait`).
    fn reply(&mut self, wait: Option<Duration>) -> Result<Option<Reply>> {
        let got = match wait {
            None => self
                .replies
                .try_recv()
                .map_err(|e| e == TryRecvError::Disconnected),
            Some(d) => self
                .replies
                .recv_timeout(d)
                .map_err(|e| e == RecvTimeoutError::Disconnected),
        };
        match got {
            Ok((reply, ops)) => {
                self.ops = ops;
                Ok(Some(reply))
            }
            Err(false) => Ok(None),
            Err(true) => Err(Error::Internal("the clerk's thread has ended".into())),
        }
    }

    /// Let the clerk finish the request out, end its thread (which closes
    /// the board's descriptors); the board's operations, and the reply not
    /// taken yet.
    fn close(&mut self) -> (u64, Option<Reply>) {
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut last = None;
        while let Ok((reply, ops)) = self.replies.try_recv() {
            self.ops = ops;
            last = Some(reply);
        }
        (self.ops, last)
    }
}

/// The lowest rank whose word `k` (of `n` words per rank in `all`) is set.
fn rows_first(all: &[u64], n: usize, k: usize) -> Option<usize> {
    all.chunks_exact(n).position(|w| w[k] != 0)
}

/// Rank 0 creates the run directory `<signal_dir>/<job id>.<run>` (the run:
/// the number of this `init` in the process); when a directory of that name
/// exists already (a requeued batch job, a reused `job_id`), the next free
/// `<job id>.<run>.<k>`. Files of an earlier run are never read.
fn create_run(config: &Config, total: u64, ranks: usize) -> Result<PathBuf> {
    let base = format!(
        "{}.{}",
        job_id(config),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let mut last = None;
    for k in 0..1000 {
        let name = match k {
            0 => base.clone(),
            _ => format!("{base}.{k}"),
        };
        let dir = config.signal_dir.join(&name);
        let info = JobInfo {
            job_id: name,
            total,
            ranks,
            start: chrono::Utc::now().to_rfc3339(),
            config_digest: config.digest(),
        };
        match file::create_job(&dir, &info) {
            Ok(()) => return Ok(dir),
            Err(e @ Error::StaleJob { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::Internal("no run directory tried".into())))
}

/// With a `job_name`: rank 0 opens the job's completion journal (reading
/// the earlier runs' when resuming), and every rank learns what they
/// completed (collective).
fn open_journal(comm: &Comm, config: &Config, total: u64) -> Result<Option<Journal>> {
    let Some(name) = &config.job_name else {
        return Ok(None);
    };
    let opened = if comm.rank() == 0 {
        JobJournal::open(&config.signal_dir, name, config.resume, total, comm.size()).and_then(
            |(job, prior)| {
                let text = ron::to_string(&prior)
                    .map_err(|e| Error::Internal(format!("the journal's summary: {e}")))?;
                Ok((Some(job), text))
            },
        )
    } else {
        Ok((None, String::new()))
    };
    let (job, text) = comm.agree(opened)?;
    let text = comm.broadcast_string(&text, 0);
    let prior: Prior = ron::from_str(&text)
        .map_err(|e| Error::Internal(format!("the journal's summary from rank 0: {e}")))?;
    let interval = config.check_interval;
    Ok(Some(Journal::new(job, prior, comm.rank(), total, interval)))
}

/// The deadline of a run that started `since_first` after the first run of
/// the process, for `total` realisations: from the config's walltime and
/// the batch system's end time (`SLURM_JOB_END_TIME`, seconds since 1970,
/// else what the batch system said when `asked`).
fn deadline_of(
    config: &Config,
    since_first: Duration,
    total: u64,
    asked: Option<crate::batch::Answer>,
) -> Option<Deadline> {
    let from_var = std::env::var("SLURM_JOB_END_TIME")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|end| (deadline::Source::Batch("SLURM_JOB_END_TIME"), end));
    let from_asked = match asked {
        Some(crate::batch::Answer::End(end, how)) => Some((deadline::Source::Asked(how), end)),
        _ => None,
    };
    let batch = from_var.or(from_asked).and_then(|(source, end)| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some((source, end - now.as_secs_f64()))
    });
    let (walltime, source) = deadline::walltime(config.walltime, since_first.as_secs_f64(), batch)?;
    let margin = config
        .deadline_margin
        .unwrap_or_else(|| deadline::default_margin(walltime));
    let window = (20.0 * config.check_interval).max(2.0);
    Some(Deadline::new(
        walltime,
        margin,
        source,
        config.on_deadline,
        total,
        window,
    ))
}

/// Whether a rank joins a new termination wave at `now`: at once when it
/// is idle or waits inside the library; when `busy` computing, at its
/// checks (from `due` on), and when its own work `ends_soon` (before its
/// next check), one interval later, by when it is idle. Joined busy, the
/// last rank to finish made the job's last wave fail, and the verdict
/// waited a wave more (emulator, sites16-one: 78 ms from the last
/// realisation to the end of the run, 58 ms with this).
fn joins_wave(now: f64, busy: bool, ends_soon: bool, due: f64, interval: f64) -> bool {
    match (busy, ends_soon) {
        (false, _) => true,
        (true, false) => now >= due,
        (true, true) => now >= due + interval,
    }
}

/// After a clean finalize: remove the signal files of the run, and the whole
/// run directory when there are no monitor logs. A failure is a warning.
fn remove_signal_files(job_dir: &Path, keep_logs: bool) {
    let removed = if keep_logs {
        ["sos", "aid"]
            .iter()
            .map(|d| std::fs::remove_dir_all(job_dir.join(d)))
            .chain(
                ["job.ron", "open.ron"]
                    .iter()
                    .map(|f| std::fs::remove_file(job_dir.join(f))),
            )
            .find(|r| r.is_err())
            .unwrap_or(Ok(()))
    } else {
        std::fs::remove_dir_all(job_dir)
    };
    if let Err(e) = removed {
        crate::error::warn(
            0,
            &format!(
                "could not remove the signal files of {}: {e}",
                job_dir.display()
            ),
        );
    }
}

impl Summary {
    /// What the audit found wrong with the ids computed, if anything: with
    /// [`Verdict::Done`] they must be `0..total`, each once; after a stop, at
    /// most that many.
    pub fn audit_problem(&self, total: u64) -> Option<String> {
        let a = &self.audit;
        let all = Audit::of_all(total);
        let per_rank = || {
            let counts: Vec<String> = self.ranks.iter().map(|r| r.computed.to_string()).collect();
            format!("per rank: {}", counts.join(" "))
        };
        match self.verdict {
            Verdict::Done if *a != all => Some(format!(
                "the ranks computed {} realisations for a total of {total}, {}; {}",
                a.count,
                match a.count.cmp(&total) {
                    std::cmp::Ordering::Greater => "so some ids were computed twice",
                    std::cmp::Ordering::Less => "so some ids were never computed",
                    std::cmp::Ordering::Equal => {
                        "but not the ids 0..total each once: some twice, others never"
                    }
                },
                per_rank()
            )),
            Verdict::Stopped if a.count > total => Some(format!(
                "the ranks computed {} realisations for a total of {total}: some ids twice; {}",
                a.count,
                per_rank()
            )),
            _ => None,
        }
    }

    /// The per-rank table printed when the config says `summary: true`.
    pub fn table(&self, config: &Config, total: u64) -> String {
        let mut s = format!(
            "soslb summary: {} ranks, {total} realisations, mode {:?}, policy {:?}, {:.3} s (init {:.3} s)\n",
            self.ranks.len(),
            config.mode,
            config.help_policy,
            self.elapsed,
            self.init
        );
        s += "  rank host             computed  busy_s  warmup_v  planned  taken  given  sos\n";
        for (r, h) in self.ranks.iter().zip(&self.hosts) {
            s += &format!(
                "  {:>4} {:<16} {:>8} {:>7.2} {:>9.2} {:>8} {:>6} {:>6} {:>4}\n",
                r.rank,
                h,
                r.computed,
                r.busy,
                r.warmup_speed,
                r.planned,
                r.taken,
                r.given,
                r.sos_posted
            );
        }
        s += &match (&self.verdict, self.audit_problem(total)) {
            (_, Some(problem)) => format!("  audit: FAILED: {problem}\n"),
            (Verdict::Done, None) => format!(
                "  audit: {} realisations computed, ids 0..{total} each exactly once\n",
                self.audit.count
            ),
            (v, None) => format!(
                "  audit: {} of {total} realisations computed ({v:?})\n",
                self.audit.count
            ),
        };
        if self.resumed > 0 {
            s += &format!(
                "  journal: {} realisations from earlier runs, {} computed in this run\n",
                self.resumed, self.audit.count
            );
        }
        let errors: u64 = self.ranks.iter().map(|r| r.errors).sum();
        if errors > 0 {
            s += &format!(
                "  {errors} signal-file error(s) recovered from: see the monitor logs in {}\n",
                self.job_dir.display()
            );
        }
        s
    }
}

/// The job id: from the config, the batch system, or a new unique one.
fn job_id(config: &Config) -> String {
    if let Some(id) = &config.job_id {
        return id.clone();
    }
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    if let Some(id) = var("SLURM_JOB_ID") {
        return match var("SLURM_STEP_ID") {
            Some(step) => format!("{id}.{step}"),
            None => id,
        };
    }
    if let Some(id) = var("PBS_JOBID") {
        return id.replace('/', "_");
    }
    let now = chrono::Utc::now();
    let nonce = crate::splitmix64(
        now.timestamp_nanos_opt().unwrap_or(0) as u64 ^ std::process::id() as u64,
    );
    format!(
        "{}-{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        std::process::id(),
        nonce & 0xffff
    )
}

/// DESIGN §7: sites from round-trip times between ranks of different hosts,
/// cut by the ratio-jump rule on each rank, reconciled over all ranks.
fn measure_sites(comm: &Comm, topology: Topology) -> Topology {
    let (me, n) = (comm.rank(), comm.size());
    // Sites are made of hosts: only the first rank of each host measures,
    // and only to the first ranks of the other hosts (the others join their
    // host's site), so the pairs grow with the hosts, not the ranks.
    let mut first = std::collections::HashMap::new();
    let leader: Vec<bool> = (0..n)
        .map(|r| *first.entry(topology.host(r)).or_insert(r) == r)
        .collect();
    let measured: Vec<bool> = (0..n)
        .map(|r| leader[me] && leader[r] && topology.host(r) != topology.host(me))
        .collect();
    let near = crate::topology::near_group(&comm.ping_pong(&measured), 1.6);
    // Exchange the near groups as bit masks, one row per rank.
    let words = n.div_ceil(64);
    let mut mask = vec![0u64; words];
    for r in near {
        mask[r / 64] |= 1 << (r % 64);
    }
    let all = comm.all_gather(&mask);
    let groups: Vec<Vec<usize>> = all
        .chunks_exact(words)
        .map(|row| {
            (0..n)
                .filter(|&r| row[r / 64] >> (r % 64) & 1 == 1)
                .collect()
        })
        .collect();
    let hosts: Vec<String> = (0..n).map(|r| topology.host(r).to_string()).collect();
    let sites = crate::topology::measured_sites(&hosts, &groups);
    topology.with_measured_sites(&sites)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(verdict: Verdict, ids: &[std::ops::Range<u64>]) -> Summary {
        let mut audit = Audit::default();
        ids.iter().for_each(|r| audit.add(r.clone()));
        Summary {
            count: audit.count,
            statistics: Vec::new(),
            ranks: vec![RankReport {
                computed: audit.count,
                ..RankReport::default()
            }],
            hosts: vec!["h".into()],
            job_dir: PathBuf::from("run"),
            elapsed: 1.0,
            verdict,
            audit,
            resumed: 0,
            waves: 0,
            init: 0.0,
        }
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

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // sets of id ranges
    fn the_audit_names_ids_computed_twice_or_never() {
        assert_eq!(summary(Verdict::Done, &[0..10]).audit_problem(10), None);
        let twice = summary(Verdict::Done, &[0..10, 3..4]).audit_problem(10);
        assert!(twice.is_some_and(|p| p.contains("11") && p.contains("twice")));
        let never = summary(Verdict::Done, &[0..9]).audit_problem(10);
        assert!(never.is_some_and(|p| p.contains("never")));
        let swapped = summary(Verdict::Done, &[0..4, 5..10, 7..8]).audit_problem(10);
        assert!(swapped.is_some_and(|p| p.contains("some twice, others never")));
        // After a stop, fewer is fine; more is not.
        assert_eq!(summary(Verdict::Stopped, &[0..4]).audit_problem(10), None);
        assert!(
            summary(Verdict::Stopped, &[0..10, 0..1])
                .audit_problem(10)
                .is_some()
        );
        let table = summary(Verdict::Done, &[0..10, 3..4]).table(&Config::default(), 10);
        assert!(table.contains("audit: FAILED"), "{table}");
    }
}
