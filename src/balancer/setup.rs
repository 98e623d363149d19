//! A run's set-up, `init` (collective): the settings agreed by every rank,
//! the topology, the run directory, the node-local directory and the
//! boards, the monitor log, the journal and the deadline, then the state
//! machine and the clerk's desk.

use super::context::Context;
use super::desk::Desk;
use super::duties::Duties;
use super::files::RunFiles;
use super::termination::Termination;
use crate::batch::Answer;
use crate::board::file::{self, FileBoard, JobInfo};
use crate::board::node::{self, Presence};
use crate::board::warn::Warnings;
use crate::board::watch::Discovery;
use crate::clerk::Clerk;
use crate::comm::Comm;
use crate::config::{self, Config, Mode};
use crate::deadline::{self, Deadline};
use crate::error::{Error, Result};
use crate::monitor::Monitor;
use crate::phases::Phases;
use crate::policy::{Params, Rank};
use crate::progress::Progress;
use crate::resume::{JobJournal, Journal, Prior};
use crate::topology::Topology;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The `init`s of this process so far: each run gets its own directory.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The common start of the first run of the process: the config's walltime
/// counts from it.
static FIRST_START: OnceLock<Instant> = OnceLock::new();

/// The parts of a [`crate::Balancer`], set up.
pub(super) struct Started {
    pub(super) ctx: Context,
    pub(super) rank: Rank,
    pub(super) desk: Desk,
    pub(super) files: RunFiles,
    pub(super) discovery: Option<Discovery>,
    pub(super) duties: Duties,
    pub(super) end: Termination,
    /// The emulated slowness of this rank.
    #[cfg(feature = "emulate")]
    pub(super) stretch: crate::emulate::Stretch,
    /// The storage cost, timed in the background at init
    /// ([`FileBoard::probe_storage`]), until it arrives.
    pub(super) storage_probe: Option<Receiver<f64>>,
    /// Seconds this rank spent in `init`.
    pub(super) init_seconds: f64,
}

/// What the set-up has made before the journal and the clock.
struct Ground {
    config: Config,
    topology: Topology,
    job_dir: PathBuf,
    node: NodeDir,
    board: FileBoard,
    /// The host's board and its directory, with host boards.
    host_board: Option<(FileBoard, PathBuf)>,
    monitor: Monitor,
    discovery: Option<Discovery>,
    warnings: Vec<String>,
}

/// The run's node-local directory on this rank's host.
struct NodeDir {
    dir: PathBuf,
    /// The rank's hold on it.
    presence: Option<Presence>,
    /// This rank is its host's lowest.
    lead: bool,
    /// Directories of killed jobs that the host's lowest rank swept away.
    swept: Vec<PathBuf>,
}

/// Set up a run of `total` realisations on `comm` with `config`
/// (collective; `phases` times its steps).
pub(super) fn start(
    comm: Comm,
    total: u64,
    config: Result<Config>,
    mut phases: Phases,
) -> Result<Started> {
    phases.lap("dup");
    let mut g = lay_ground(&comm, total, config, &mut phases)?;
    let me = comm.rank();
    #[cfg(feature = "emulate")]
    let stretch = g.config.emulate.stretch(me);
    g.announce(&comm, total);
    let journal = g.open_journal(&comm, total)?;
    let to_compute = journal.as_ref().map_or(total, |j| j.to_compute(total));
    let asked = g.ask_walltime(&comm);
    phases.lap("discovery_journal");
    comm.quiet_barrier();
    phases.lap("barrier");
    let start = Instant::now();
    let first = *FIRST_START.get_or_init(|| start);
    let deadline = deadline_of(&g.config, start - first, to_compute, asked);
    let progress = (me == 0).then(|| Progress::new(g.config.progress));
    let duties = Duties::new(deadline, journal, progress);
    g.log_deadline(&duties);
    let rank = Rank::new(me, to_compute, Params::from(&g.config), g.topology);
    let storage_probe = g.discovery.as_ref().map(|_| g.board.probe_storage());
    let host_copy = g.board.host_copy_path(rank.topology().host(me));
    let lead = g.node.lead;
    let (host_board, host_board_dir) = g.host_board.map(|(b, dir)| (b, (dir, lead))).unzip();
    let desk = comm.agree(Desk::start(Clerk::new(&rank), g.board, host_board))?;
    phases.lap("clerk");
    let init_seconds = phases.total();
    g.monitor.line(
        0.0,
        format_args!("init-time s={init_seconds:.4} {}", phases.fields()),
    );
    let end = Termination::new(to_compute, comm.size(), !rank.in_warmup());
    let files = RunFiles {
        job_dir: g.job_dir,
        host_copy,
        presence: g.node.presence,
        host_board_dir,
    };
    let ctx = Context {
        comm,
        config: g.config,
        start,
        monitor: g.monitor,
        warner: Warnings::new(me),
        warnings: g.warnings,
    };
    Ok(Started {
        ctx,
        rank,
        desk,
        files,
        discovery: g.discovery,
        duties,
        end,
        #[cfg(feature = "emulate")]
        stretch,
        storage_probe,
        init_seconds,
    })
}

/// The settings agreed, the topology, the run directory and the
/// node-local one, the boards, the monitor log and the discovery of SOS
/// files (collective).
fn lay_ground(
    comm: &Comm,
    total: u64,
    config: Result<Config>,
    phases: &mut Phases,
) -> Result<Ground> {
    let mut config = agree_settings(comm, total, config)?;
    phases.lap("config");
    // One rank: a pass-through, every id in order, no signal files to share.
    if comm.size() == 1 {
        config.mode = Mode::Static;
    }
    let topology = topology_of(comm, &config);
    phases.lap("topology");
    let job_dir = run_dir(comm, &config, total)?;
    phases.lap("run_dir");
    config.host_board &= config.mode == Mode::Full;
    let node = NodeDir::join(comm, &topology, &job_dir);
    phases.lap("node_dir");
    let joined = open_board(comm, &config, &topology, &job_dir, &node.dir);
    let (board, monitor) = comm.agree(joined)?;
    phases.lap("board");
    let host_board = open_host_board(comm, &config, &topology, &node)?;
    phases.lap("host_board");
    let discovery = discovery_of(&config, &job_dir, &board);
    Ok(Ground {
        config,
        topology,
        job_dir,
        node,
        board,
        host_board,
        monitor,
        discovery,
        warnings: Vec::new(),
    })
}

/// The config agreed by every rank (each validates its own), with every
/// rank balancing the same total with the same settings.
fn agree_settings(comm: &Comm, total: u64, config: Result<Config>) -> Result<Config> {
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
    Ok(config)
}

/// The ranks' hosts and sites (collective).
fn topology_of(comm: &Comm, config: &Config) -> Topology {
    let name = mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into());
    let names = comm.all_gather_strings(&name, 256);
    #[cfg(feature = "emulate")]
    let topology = config.emulate.topology(names, &config.sites);
    #[cfg(not(feature = "emulate"))]
    let topology = Topology::new(names, &config.sites);
    if config.sites == config::Sites::Measure {
        return measure_sites(comm, topology);
    }
    topology
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

/// The run directory, made by rank 0 and told to every rank (collective).
fn run_dir(comm: &Comm, config: &Config, total: u64) -> Result<PathBuf> {
    let created = if comm.rank() == 0 {
        create_run(config, total, comm.size())
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
    Ok(job_dir)
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
    let nonce = crate::seed::splitmix64(
        now.timestamp_nanos_opt().unwrap_or(0) as u64 ^ std::process::id() as u64,
    );
    format!(
        "{}-{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        std::process::id(),
        nonce & 0xffff
    )
}

impl NodeDir {
    /// The run's node-local directory (the hosts' copies of the index,
    /// the host's board), held while the rank runs; the host's lowest
    /// rank sweeps away those that killed jobs left.
    fn join(comm: &Comm, topology: &Topology, job_dir: &Path) -> NodeDir {
        let me = comm.rank();
        let tmp = std::env::temp_dir();
        let node_dir = node::run_dir(&tmp, job_dir);
        let presence = Presence::join(&node_dir);
        let lead = (0..comm.size()).find(|&r| topology.host(r) == topology.host(me)) == Some(me);
        let swept = if lead {
            node::sweep(&tmp, &node_dir, node::SWEEP_AGE)
        } else {
            Vec::new()
        };
        NodeDir {
            dir: node_dir,
            presence,
            lead,
            swept,
        }
    }
}

/// This rank's view of the run directory's board, and its monitor log.
fn open_board(
    comm: &Comm,
    config: &Config,
    topology: &Topology,
    job_dir: &Path,
    node_dir: &Path,
) -> Result<(FileBoard, Monitor)> {
    let me = comm.rank();
    FileBoard::open(job_dir, me).and_then(|board| {
        let monitor = if config.log {
            let path = board
                .log_dir()
                .join(format!("{}.{me}.log", topology.host(me)));
            Monitor::create(&path, me, comm.size())?
        } else {
            Monitor::disabled(me)
        };
        let board = board.with_host_dir(node_dir);
        #[cfg(feature = "emulate")]
        let board = config.emulate.slow(board, me, comm.size());
        Ok((board, monitor))
    })
}

/// The host's own board (node-local, beside the copies of the index):
/// made by the host's lowest rank, then joined by all of its ranks
/// (collective).
fn open_host_board(
    comm: &Comm,
    config: &Config,
    topology: &Topology,
    node: &NodeDir,
) -> Result<Option<(FileBoard, PathBuf)>> {
    if !config.host_board {
        return Ok(None);
    }
    let me = comm.rank();
    let dir = node
        .dir
        .join(format!("board-{}", file::file_name_of(topology.host(me))));
    comm.agree(if node.lead {
        file::create_host_board(&dir)
    } else {
        Ok(())
    })?;
    let board = FileBoard::open(&dir, me);
    Ok(Some((comm.agree(board)?, dir)))
}

/// The discovery of SOS files, in full mode: watched on a local file
/// system, polled on a shared one, as the config says.
fn discovery_of(config: &Config, job_dir: &Path, board: &FileBoard) -> Option<Discovery> {
    if config.mode != Mode::Full {
        return None;
    }
    let watch = match config.discovery {
        config::Discovery::Watch => true,
        config::Discovery::Poll => false,
        config::Discovery::Auto => !crate::board::fs::is_shared_fs(job_dir).unwrap_or(true),
    };
    Some(Discovery::new(&board.index_path(), watch))
}

impl Ground {
    /// The monitor log's first lines; a fallback of the discovery is a
    /// warning.
    fn announce(&mut self, comm: &Comm, total: u64) {
        let me = comm.rank();
        self.monitor.line(
            0.0,
            format_args!(
                "init ranks={} total={total} host={} site={} mode={:?} job_dir={} discovery={}",
                comm.size(),
                self.topology.host(me),
                self.topology.site(me),
                self.config.mode,
                self.job_dir.display(),
                match &self.discovery {
                    Some(d) if d.is_watching() => "watch",
                    Some(_) => "poll",
                    None => "none",
                }
            ),
        );
        for dir in &self.node.swept {
            self.monitor.line(
                0.0,
                format_args!("swept {} (a killed job's node-local files)", dir.display()),
            );
        }
        if let Some(reason) = self.discovery.as_ref().and_then(Discovery::fallback_reason) {
            crate::error::warn(me, reason);
            self.warnings.push(reason.to_string());
        }
    }

    /// With a `job_name`: the job's completion journal (collective), its
    /// earlier runs' warnings and a line in the monitor log.
    fn open_journal(&mut self, comm: &Comm, total: u64) -> Result<Option<Journal>> {
        let me = comm.rank();
        let journal = open_journal(comm, &self.config, total)?;
        if let Some(j) = &journal {
            let p = j.prior();
            for w in &p.warnings {
                if me == 0 {
                    crate::error::warn(me, w);
                }
                self.warnings.push(w.clone());
            }
            self.monitor.line(
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
        Ok(journal)
    }

    /// The batch system's walltime, when the config asks it (collective);
    /// an unknown one is a warning.
    fn ask_walltime(&mut self, comm: &Comm) -> Option<Answer> {
        match crate::batch::walltime(comm) {
            Some(Err(e)) => {
                let me = comm.rank();
                let text = format!("the batch system's walltime is unknown: {e}");
                if me == 0 {
                    crate::error::warn(me, &text);
                }
                self.monitor.line(0.0, format_args!("warning {text}"));
                self.warnings.push(text);
                None
            }
            Some(Ok(answer)) => Some(answer),
            None => None,
        }
    }

    /// The deadline's line in the monitor log.
    fn log_deadline(&mut self, duties: &Duties) {
        if let Some(d) = duties.deadline() {
            let stop_at = duties.stop_at();
            self.monitor.line(
                0.0,
                format_args!("deadline limit={:.3} stop_at={stop_at:.3}", d.limit()),
            );
        }
    }
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
    asked: Option<Answer>,
) -> Option<Deadline> {
    let from_var = std::env::var("SLURM_JOB_END_TIME")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|end| (deadline::Source::Batch("SLURM_JOB_END_TIME"), end));
    let from_asked = match asked {
        Some(Answer::End(end, how)) => Some((deadline::Source::Asked(how), end)),
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
