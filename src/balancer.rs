//! [`Balancer`]: the MPI and file shell around the pure state machine
//! ([`crate::policy::Rank`]). It reads the clock, makes the collectives,
//! owns the file board, the discovery of SOS files and the monitor log.

use crate::board::file::{self, FileBoard, JobInfo};
use crate::board::watch::Discovery;
use crate::comm::{Comm, check_mpi};
use crate::config::{self, Config, Mode};
use crate::error::{Error, Result};
use crate::monitor::Monitor;
use crate::plan::WarmupReport;
use crate::policy::{Params, Rank, RankReport, Step};
use crate::stats::{Observables, Statistic};
use crate::topology::Topology;
use mpi::request::Request;
use mpi::traits::Communicator;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting rank tests the termination barrier.
const TEST_INTERVAL: f64 = 0.005;

/// Balances `total` realisations over the ranks of a communicator.
///
/// Every rank calls [`Balancer::next`] in a loop and computes the ids it
/// returns, then [`Balancer::finish`] (collective). See the crate
/// documentation for an example.
pub struct Balancer {
    comm: Comm,
    rank: Rank,
    board: FileBoard,
    discovery: Option<Discovery>,
    monitor: Monitor,
    config: Config,
    start: Instant,
    /// `1 / emulate_speed - 1`: extra sleep per second of computing.
    stretch: f64,
    /// When the chunk being computed was handed out (for the stretch).
    handed_out: Option<Instant>,
    barrier: Option<Request<'static, ()>>,
    finished: bool,
    observables: Observables,
    warnings: Vec<String>,
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
    /// The job directory on the signal directory.
    pub job_dir: PathBuf,
    /// Seconds from the common start to the end of the termination.
    pub elapsed: f64,
}

impl Balancer {
    /// Start balancing `total` realisations over the ranks of `comm`
    /// (collective; the communicator is duplicated).
    pub fn new<C: Communicator>(comm: &C, total: u64, config: Config) -> Result<Balancer> {
        check_mpi()?;
        Self::start(Comm::duplicate(comm), total, Ok(config))
    }

    /// The C and Fortran entry: a Fortran communicator handle, a signed
    /// total, a config path (else the defaults of [`Config::load`]).
    pub fn from_fortran(comm: i32, total: i64, config: Option<&Path>) -> Result<Balancer> {
        check_mpi()?;
        // SAFETY: MPI is initialised.
        let comm = unsafe { Comm::duplicate_fortran(comm)? };
        let total_ok = u64::try_from(total).ok().filter(|&t| t > 0).ok_or_else(|| {
            Error::argument(
                "total",
                format!("{total}: the number of realisations must be at least 1"),
            )
        });
        let loaded = total_ok.and_then(|_| Config::load(config));
        Self::start(comm, total.max(0) as u64, loaded)
    }

    fn start(comm: Comm, total: u64, config: Result<Config>) -> Result<Balancer> {
        if comm.size() < 2 {
            return Err(Error::argument(
                "comm",
                "the communicator has one rank: soslb balances work between ranks; run with \
                 mpirun -np 2 or more (or loop over the ids yourself)",
            ));
        }
        let config = comm.agree(config.and_then(|c| {
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
        let name = mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into());
        let mut topology = Topology::new(
            comm.all_gather_strings(&name, 256),
            &config.hosts,
            &config.sites,
        );
        if config.sites == config::Sites::Measure {
            topology = measure_sites(&comm, topology);
        }
        let job_id = comm.broadcast_string(&job_id(&config), 0);
        let job_dir = config.signal_dir.join(&job_id);
        let created = if me == 0 {
            let info = JobInfo {
                job_id: job_id.clone(),
                total,
                ranks: comm.size(),
                start: chrono::Utc::now().to_rfc3339(),
                config_digest: config.digest(),
            };
            file::create_job(&job_dir, &info)
        } else {
            Ok(())
        };
        comm.agree(created)?;
        let joined = FileBoard::join(&job_dir, me, comm.size()).and_then(|board| {
            let monitor = if config.log {
                let path = board
                    .log_dir()
                    .join(format!("{}.{me}.log", topology.host(me)));
                Monitor::create(&path, me)?
            } else {
                Monitor::disabled(me)
            };
            let delay = Duration::from_secs_f64(config.storage_delay);
            Ok((board.with_delay(delay), monitor))
        });
        let (board, mut monitor) = comm.agree(joined)?;
        let discovery = if config.mode == Mode::Full {
            comm.agree(check_locks(&comm, &topology, &job_dir))?;
            let watch = match config.discovery {
                config::Discovery::Watch => true,
                config::Discovery::Poll => false,
                config::Discovery::Auto => !file::is_shared_fs(&job_dir).unwrap_or(true),
            };
            Some(Discovery::new(&board.index_path(), watch))
        } else {
            None
        };
        let stretch = config.emulate_speed.get(me).map_or(0.0, |s| 1.0 / s - 1.0);
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
        let mut warnings = Vec::new();
        if let Some(reason) = discovery.as_ref().and_then(Discovery::fallback_reason) {
            eprintln!("soslb: warning: rank {me}: {reason}");
            warnings.push(reason.to_string());
        }
        comm.quiet_barrier();
        let start = Instant::now();
        Ok(Balancer {
            rank: Rank::new(me, total, Params::from(&config), topology),
            comm,
            board,
            discovery,
            monitor,
            config,
            start,
            stretch,
            handed_out: None,
            barrier: None,
            finished: false,
            observables: Observables::new(),
            warnings,
        })
    }

    /// Seconds since the common start.
    #[inline]
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The next chunk of ids to compute, or `None` when this rank is done.
    ///
    /// The time between two calls is the chunk's computing time. A rank
    /// without work waits here (sleeping, never spinning) while it helps
    /// others, until every rank has run out of work.
    #[allow(clippy::should_implement_trait)] // fallible and blocking: not an Iterator
    pub fn next(&mut self) -> Result<Option<Range<u64>>> {
        if self.finished {
            return Ok(None);
        }
        if self.stretch > 0.0
            && let Some(t) = self.handed_out.take()
        {
            std::thread::sleep(t.elapsed().mul_f64(self.stretch));
        }
        let mut now = self.now();
        loop {
            let step = self.rank.next(now, &mut self.board);
            if self.rank.has_events() {
                self.log_events(now);
            }
            match step? {
                Step::Compute(ids) => {
                    if self.stretch > 0.0 {
                        self.handed_out = Some(Instant::now());
                    }
                    return Ok(Some(ids));
                }
                Step::Exchange(report) => {
                    let all = self.exchange(&report);
                    now = self.now();
                    self.rank.apply_plan(&all, now)?;
                }
                Step::Idle { until } => {
                    if self.wait_idle(until) {
                        self.finished = true;
                        let t = self.now();
                        self.monitor.line(
                            t,
                            format_args!("done computed={}", self.rank.report().computed),
                        );
                        self.monitor.flush();
                        return Ok(None);
                    }
                    now = self.now();
                }
            }
        }
    }

    /// Write the state machine's events to the monitor log and flush it.
    #[cold]
    fn log_events(&mut self, now: f64) {
        for e in self.rank.drain_events() {
            if let crate::policy::Event::Recovered { error } = &e {
                self.board.warn(error); // one whole line, repeats rate-limited
                self.warnings.push(error.clone());
            }
            self.monitor.event(now, &e);
        }
        self.monitor.flush();
    }

    /// Algorithm 1's collective: every rank's warm-up report.
    fn exchange(&self, report: &WarmupReport) -> Vec<WarmupReport> {
        // Sleep while the slowest rank finishes its warm-up, then gather.
        self.comm.quiet_barrier();
        let words = self.comm.all_gather(&report.to_words());
        words
            .chunks_exact(4)
            .map(|w| WarmupReport::from_words([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    /// Idle until `until`: enter the termination barrier, test it now and
    /// then, and wake early when the open index changes. True when every
    /// rank has run out of work.
    fn wait_idle(&mut self, until: f64) -> bool {
        let barrier = self
            .barrier
            .take()
            .unwrap_or_else(|| self.comm.start_barrier());
        let mut barrier = match barrier.test() {
            Ok(_) => return true,
            Err(b) => b,
        };
        loop {
            let now = self.now();
            if now >= until {
                self.barrier = Some(barrier);
                return false;
            }
            let pause = Duration::from_secs_f64((until - now).min(TEST_INTERVAL));
            let woken = match &mut self.discovery {
                Some(d) => d.wait(pause),
                None => {
                    std::thread::sleep(pause);
                    false
                }
            };
            barrier = match barrier.test() {
                Ok(_) => return true,
                Err(b) => b,
            };
            if woken {
                self.barrier = Some(barrier);
                return false;
            }
        }
    }

    /// Add the observables of one realisation to the final statistics
    /// (every call passes the same number of values).
    pub fn add(&mut self, values: &[f64]) -> Result<()> {
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

    /// The job directory on the signal directory (logs, SOS files).
    pub fn job_dir(&self) -> &Path {
        self.board.dir()
    }

    /// File operations on the signal directory so far: signal files and
    /// monitor-log writes.
    pub fn file_ops(&self) -> u64 {
        self.board.ops() + self.monitor.writes()
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

    /// End the run (collective): wait until every rank is done, reduce the
    /// statistics, gather the ranks' figures, free the communicator.
    ///
    /// Calling it before [`Balancer::next`] returned `None` is an error on
    /// every rank (the ids not computed are named), after the collectives,
    /// so that no rank is left waiting.
    pub fn finish(mut self) -> Result<Summary> {
        let left = self.rank.remaining();
        let barrier = self
            .barrier
            .take()
            .unwrap_or_else(|| self.comm.start_barrier());
        self.comm.finish_barrier(barrier);
        let elapsed = self.now();
        let n = self.comm.max(self.observables.len() as u64) as usize;
        let summed = self.comm.sum(&self.observables.to_words(n));
        let observables = Observables::from_words(n, &summed)?;
        let mine = self.rank.report();
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
            left,
        ];
        let all = self.comm.all_gather(&words);
        let ranks: Vec<RankReport> = all
            .chunks_exact(words.len())
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
            })
            .collect();
        let unfinished: Vec<(usize, u64)> = all
            .chunks_exact(words.len())
            .map(|w| w[9])
            .enumerate()
            .filter(|&(_, l)| l > 0)
            .collect();
        let summary = Summary {
            count: observables.count(),
            statistics: observables.statistics(),
            hosts: (0..self.comm.size())
                .map(|r| self.rank.topology().host(r).to_string())
                .collect(),
            ranks,
            job_dir: self.board.dir().to_path_buf(),
            elapsed,
        };
        self.monitor.line(
            elapsed,
            format_args!("finalize file_ops={}", self.board.ops()),
        );
        self.monitor.flush();
        if self.config.summary && self.comm.rank() == 0 {
            print!("{}", summary.table(&self.config, self.rank.total()));
        }
        if !unfinished.is_empty() {
            return Err(Error::State(format!(
                "finalize was called while ranks still owned ids (rank, ids): {unfinished:?}; \
                 call next until it reports that the rank is done"
            )));
        }
        Ok(summary)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        // A termination barrier left unfinished (finish not called) cannot be
        // completed alone; leaking the request is the only safe choice.
        if let Some(req) = self.barrier.take() {
            std::mem::forget(req);
        }
    }
}

impl Summary {
    /// The per-rank table printed when the config says `summary: true`.
    pub fn table(&self, config: &Config, total: u64) -> String {
        let mut s = format!(
            "soslb summary: {} ranks, {total} realisations, mode {:?}, policy {:?}, {:.3} s\n",
            self.ranks.len(),
            config.mode,
            config.help_policy,
            self.elapsed
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
    let other_host: Vec<bool> = (0..n)
        .map(|r| topology.host(r) != topology.host(me))
        .collect();
    let near = crate::topology::near_group(&comm.ping_pong(&other_host), 1.6);
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

/// DESIGN §6: prove that file locks reach from one rank to another (on
/// another host when there is one): rank 0 holds the lock of `job.ron`, the
/// prober must fail to take it.
fn check_locks(comm: &Comm, topology: &Topology, job_dir: &Path) -> Result<()> {
    if let Some(problem) = file::mount_lock_problem(job_dir) {
        return Err(Error::Locking {
            path: job_dir.to_path_buf(),
            reason: problem,
        });
    }
    let prober = topology.first_remote(0).unwrap_or(1);
    let me = comm.rank();
    let held = if me == 0 {
        Some(file::job_lock(job_dir))
    } else {
        None
    };
    let held_ok = comm.broadcast_string(
        if held.as_ref().is_some_and(|h| h.is_ok()) {
            "1"
        } else {
            "0"
        },
        0,
    );
    let probe = if held_ok == "1" && me == prober {
        match file::job_lock_is_free(job_dir) {
            Ok(true) => "free",
            Ok(false) => "held",
            Err(_) => "error",
        }
    } else {
        "-"
    };
    let probe = comm.broadcast_string(probe, prober);
    if let Some(lock) = held {
        lock?.unlock()?;
    }
    let path = job_dir.join("job.ron");
    match probe.as_str() {
        "held" => Ok(()),
        "free" => Err(Error::Locking {
            path,
            reason: format!(
                "rank 0 on {} held its lock and rank {prober} on {} could take it too: mount the \
                 signal directory with working locks (NFS without `nolock` or `local_lock`)",
                topology.host(0),
                topology.host(prober)
            ),
        }),
        "-" => Err(Error::Locking {
            path,
            reason: "rank 0 could not take the lock of job.ron".into(),
        }),
        _ => Err(Error::Locking {
            path,
            reason: format!("rank {prober} could not try the lock of job.ron"),
        }),
    }
}
