//! The emulator of DESIGN §8: runs a scenario of emulated heterogeneous ranks
//! through the real library (MPI and signal files) and prints one result line,
//! last on stdout:
//!
//! ```text
//! result: scenario=hetero16 mode=full ranks=16 realisations=6000 missing=0 duplicates=0 makespan_s=16.9 ideal_s=16.22 efficiency=0.98 count=6000 error=0 help_d0=0 help_d1=0 help_d2=0 storage_ops=148 storage_ops_per_s_peak=32 waves=22 steals=0 ops_per_steal=0.00 host_steals=0 init_s=0.031
//! ```
//!
//! `help_d<d>`: realisations helpers at distance `d` took; `storage_ops`:
//! operations on the shared directory (signal files, as
//! [`soslb::board::Board::ops`] counts them, and monitor-log writes) over all
//! ranks, and the most in one second of the run; `waves`: termination
//! waves completed (`makespan_s / waves` is the mean time a wave took: a
//! wave advances only when every rank calls MPI, so the slow ranks'
//! realisations set its pace); `steals`: searches for help that claimed
//! ids from the shared board, and `ops_per_steal` the storage operations
//! each made there on average (the index, SOS files, claims, a listing of
//! claims after a lost one); `host_steals`: those from a host's board; `init_s`: seconds
//! `init` took on the rank where it took longest (the monitor logs'
//! `init-time` lines break it down by phase).
//!
//! Realisation `id` of rank `i` started at `t` (seconds since the end of
//! the rank's init; the makespan counts the init too) sleeps
//! `base · c(id) / s_i(t)`, `c(id)` the scenario's cost factor (1 unless
//! the file gives a `cost`), less what the rank's sleeps so far
//! overslept: realisations take their nominal times on average, while the
//! library's own time between them is never made up. `missing` and
//! `duplicates` are counted from the ids the ranks really computed,
//! gathered on rank 0 at the end.
//!
//! Usage (under mpirun): `emulate SCENARIO MODE [OPTIONS]` where SCENARIO is
//! a name of `examples/scenarios/` or the path of a scenario file, MODE is
//! `static`, `warmup` or `full`. Any `SOSLB_*` variable applies. Options:
//!
//! - `--config FILE`: the soslb config file;
//! - `--loops N`: balance the scenario N times in a row (N init/finalize);
//! - `--leave RANK:T`: rank RANK leaves its loop and calls finalize once the
//!   job time reaches T seconds (`0`: before any `next`);
//! - `--stop RANK:T`: rank RANK calls `stop` at job time T;
//! - `--observables RANK:N`: rank RANK adds N observables per realisation
//!   (the others 1).
//!
//! Before the result line, rank 0 prints the statistics of the observable
//! (`sqrt(id)` per realisation), each number in Rust's shortest round-trip
//! form: `stats: count=<n> mean=<m> variance=<v> stderr=<e>`.
//!
//! A run that ends with an error (on every rank, as soslb guarantees) still
//! prints its result line, with `error=<code>`, and exits with status 1.

use mpi::traits::*;
use soslb::config::{Config, Mode, Sites};
use soslb::emulate::{self, Grid};
use soslb::policy::RankReport;
use soslb::scenario::Scenario;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    scenario: PathBuf,
    mode: Mode,
    config: Option<PathBuf>,
    loops: usize,
    leave: Option<(usize, f64)>,
    stop: Option<(usize, f64)>,
    observables: Option<(usize, usize)>,
}

/// `RANK:VALUE`.
fn rank_and<T: std::str::FromStr>(arg: Option<String>, usage: &str) -> Result<(usize, T), String> {
    let arg = arg.ok_or(usage)?;
    let bad = || format!("{arg:?} is not RANK:VALUE; {usage}");
    let (r, v) = arg.split_once(':').ok_or_else(bad)?;
    Ok((r.parse().map_err(|_| bad())?, v.parse().map_err(|_| bad())?))
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let usage = "usage: emulate SCENARIO static|warmup|full [--config FILE] [--loops N] \
                 [--leave RANK:T] [--stop RANK:T] [--observables RANK:N]";
    let name = it.next().ok_or(usage)?;
    let mode = match it.next().as_deref() {
        Some("static") => Mode::Static,
        Some("warmup") => Mode::Warmup,
        Some("full") => Mode::Full,
        other => return Err(format!("unknown mode {other:?}; {usage}")),
    };
    let (mut config, mut loops, mut leave, mut stop, mut observables) = (None, 1, None, None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = Some(PathBuf::from(it.next().ok_or(usage)?)),
            "--loops" => {
                loops = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or(format!("--loops needs a number; {usage}"))?
            }
            "--leave" => leave = Some(rank_and(it.next(), usage)?),
            "--stop" => stop = Some(rank_and(it.next(), usage)?),
            "--observables" => observables = Some(rank_and(it.next(), usage)?),
            _ => return Err(format!("unknown argument {a:?}; {usage}")),
        }
    }
    let scenario = Scenario::path_of(&name);
    Ok(Args {
        scenario,
        mode,
        config,
        loops,
        leave,
        stop,
        observables,
    })
}

/// One whole line on stderr (one `write`), so that ranks' lines never mix.
fn say(line: String) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("emulate: MPI is already initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let me = world.rank() as usize;
    match run(&world) {
        Ok(()) => ExitCode::SUCCESS,
        // Every rank failed together: end normally, so that every rank's
        // message gets out (an abort could kill a rank before it prints).
        Err(Failure::AllRanks(e)) => {
            say(format!("emulate: rank {me}: {e}"));
            ExitCode::FAILURE
        }
        Err(Failure::ThisRank(e)) => {
            say(format!("emulate: rank {me}: {e}"));
            world.abort(2)
        }
    }
}

/// Why a run failed.
enum Failure {
    /// On every rank at once (soslb's init agrees on failure).
    AllRanks(String),
    /// On this rank: the others may wait for it, so the job is aborted.
    ThisRank(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::ThisRank(e)
    }
}

fn run(world: &mpi::topology::SimpleCommunicator) -> Result<(), Failure> {
    let me = world.rank() as usize;
    let ranks = world.size() as usize;
    let args = parse_args()?;
    let scenario = Scenario::from_file(&args.scenario).map_err(|e| e.to_string())?;
    if ranks != scenario.ranks && me == 0 {
        say(format!(
            "emulate: warning: scenario {} is made for {} ranks, running on {ranks}",
            scenario.name, scenario.ranks
        ));
    }
    let mut config = Config::load(args.config.as_deref()).map_err(|e| e.to_string())?;
    config.mode = args.mode;
    if let Some(layout) = &scenario.layout {
        lay_out(&mut config, layout);
    }
    let mut failed = None;
    for _ in 0..args.loops {
        if let Err(e) = run_once(world, &args, &scenario, config.clone()) {
            failed = Some(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// The scenario's emulated grid: virtual hosts and sites for the library
/// (unless the config's `emulate` section gives them, or its `sites` are
/// not `Single`: `SOSLB_EMULATE='(hosts: Real, sites: Real)'` runs flat on
/// the same grid), and the slower path to farther SOS files whatever the
/// library knows of the grid.
fn lay_out(config: &mut Config, layout: &Grid) {
    let e = &mut config.emulate;
    e.hosts
        .get_or_insert(emulate::Hosts::Virtual(layout.ranks_per_host));
    if config.sites == Sites::Single {
        e.sites
            .get_or_insert(emulate::Sites::Virtual(layout.hosts_per_site));
    }
    e.grid = Some(layout.clone());
}

/// One balanced loop over the scenario: init, next..., finalize, result line.
fn run_once(
    world: &mpi::topology::SimpleCommunicator,
    args: &Args,
    scenario: &Scenario,
    config: Config,
) -> Result<(), Failure> {
    let me = world.rank() as usize;
    let ranks = world.size() as usize;
    let check_interval = config.check_interval;
    let at = |opt: Option<(usize, f64)>| opt.filter(|&(r, _)| r == me).map(|(_, t)| t);
    let (leave_at, stop_at) = (at(args.leave), at(args.stop));
    let observables = match args.observables {
        Some((r, n)) if r == me => n,
        _ => 1,
    };

    // The common start.
    world.barrier();
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();
    let mut lb = soslb::Balancer::new(world, scenario.realisations, config)
        .map_err(|e| Failure::AllRanks(e.to_string()))?;
    // The scenario's clock starts with the computing, as the library's
    // does: under load an init of 2 s made rank 15 of `midrun` slow from
    // its first realisation, where the scenario slows it after the plan.
    let t_run = Instant::now();
    let mut computed: Vec<u64> = Vec::new();
    let mut error: Option<soslb::Error> = None;
    // File operations and time while computing with no SOS open.
    let (mut quiet_ops, mut quiet_time) = (0u64, 0.0f64);
    // File operations in each second of the run (init's in the first).
    let (mut per_second, mut counted) = (Vec::<u64>::new(), 0u64);
    // How much longer than their nominal times the realisations' sleeps
    // have taken so far (an oversubscribed machine wakes a sleeper late,
    // about 0.8 % of 20 ms): the next sleep is that much shorter.
    let mut overshoot = 0.0f64;
    // When the last realisation ended.
    let mut last_done = 0.0f64;
    loop {
        let t = t0.elapsed().as_secs_f64();
        if leave_at.is_some_and(|l| t >= l) {
            break;
        }
        if stop_at.is_some_and(|s| t >= s) {
            lb.stop();
        }
        let (ops0, t_call, quiet) = (lb.file_ops(), Instant::now(), !lb.sos_open());
        let ids = match lb.next() {
            Ok(Some(ids)) => ids,
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        if quiet && !lb.sos_open() {
            quiet_ops += lb.file_ops() - ops0;
            quiet_time += t_call.elapsed().as_secs_f64();
        }
        let second = t0.elapsed().as_secs() as usize;
        if per_second.len() <= second {
            per_second.resize(second + 1, 0);
        }
        per_second[second] += lb.file_ops() - counted;
        counted = lb.file_ops();
        let t_chunk = Instant::now();
        let any = !ids.is_empty();
        for id in ids {
            let start = Instant::now();
            let nominal = scenario.duration(me, id, (start - t_run).as_secs_f64());
            std::thread::sleep(Duration::from_secs_f64((nominal - overshoot).max(0.0)));
            overshoot += start.elapsed().as_secs_f64() - nominal;
            let x = (id as f64).sqrt();
            lb.add(&vec![x; observables]).map_err(|e| e.to_string())?;
            computed.push(id);
        }
        if any {
            last_done = t0.elapsed().as_secs_f64();
        }
        if quiet {
            quiet_time += t_chunk.elapsed().as_secs_f64();
        }
    }
    // Collective; after an error as well (every rank has the same verdict).
    let summary = match lb.finish() {
        Ok(s) => Some(s),
        Err(e) => {
            error.get_or_insert(e);
            None
        }
    };
    let end = t0.elapsed().as_secs_f64();

    // Makespan: to the last rank's return from finalize.
    let mut makespan = 0.0f64;
    world.all_reduce_into(&end, &mut makespan, mpi::collective::SystemOperation::max());
    // Over all ranks: the signal-file and monitor-log operations per second.
    let mut seconds = 0u64;
    world.all_reduce_into(
        &(per_second.len() as u64),
        &mut seconds,
        mpi::collective::SystemOperation::max(),
    );
    per_second.resize(seconds as usize, 0);
    let mut ops_per_second = vec![0u64; per_second.len()];
    world.all_reduce_into(
        &per_second[..],
        &mut ops_per_second[..],
        mpi::collective::SystemOperation::sum(),
    );
    let root = world.process_at_rank(0);
    let count = computed.len() as i32;
    let per_check = quiet_ops as f64 / (quiet_time / check_interval).max(1.0);
    let cpu = cpu_seconds() - cpu0;
    if me == 0 {
        let mut counts = vec![0i32; ranks];
        root.gather_into_root(&count, &mut counts[..]);
        let displs: Vec<i32> = counts
            .iter()
            .scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c)))
            .collect();
        let mut ids = vec![0u64; counts.iter().map(|&c| c as usize).sum()];
        let mut partition =
            mpi::datatype::PartitionMut::new(&mut ids[..], &counts[..], &displs[..]);
        root.gather_varcount_into_root(&computed[..], &mut partition);
        let mut per_id = vec![0u32; scenario.realisations as usize];
        let mut outside = 0u64;
        for &id in &ids {
            match per_id.get_mut(id as usize) {
                Some(c) => *c += 1,
                None => outside += 1,
            }
        }
        let missing = per_id.iter().filter(|&&c| c == 0).count();
        let duplicates = per_id
            .iter()
            .map(|&c| c.saturating_sub(1) as u64)
            .sum::<u64>()
            + outside;
        let mut per_checks = vec![0.0f64; ranks];
        root.gather_into_root(&per_check, &mut per_checks[..]);
        let mut cpus = vec![0.0f64; ranks];
        root.gather_into_root(&cpu, &mut cpus[..]);
        let mut lasts = vec![0.0f64; ranks];
        root.gather_into_root(&last_done, &mut lasts[..]);
        for (r, rep) in summary.iter().flat_map(|s| s.ranks.iter()).enumerate() {
            println!(
                "rank: {r} computed={} true_speed={:.3} warmup_speed={:.6} planned={} taken={} given={} sos={} \
                 file_ops_per_check_without_sos={:.3} cpu_run_s={:.3} busy_s={:.2} last_s={:.2}",
                rep.computed,
                scenario.speed(r, 0.0) / scenario.base,
                rep.warmup_speed,
                rep.planned,
                rep.taken,
                rep.given,
                rep.sos_posted,
                per_checks[r],
                cpus[r],
                rep.busy,
                lasts[r]
            );
        }
        if let Some(st) = summary.as_ref().and_then(|s| s.statistics.first()) {
            println!(
                "stats: count={} mean={:e} variance={:e} stderr={:e}",
                summary.as_ref().map_or(0, |s| s.count),
                st.mean,
                st.variance,
                st.std_error
            );
        }
        let ideal = scenario.ideal(ranks);
        let help = RankReport::help_by_distance(summary.iter().flat_map(|s| s.ranks.iter()));
        let steals = (summary.iter().flat_map(|s| s.ranks.iter()))
            .fold((0, 0), |a, r| (a.0 + r.steals.0, a.1 + r.steals.1));
        println!(
            "result: scenario={} mode={} ranks={ranks} realisations={} missing={missing} duplicates={duplicates} \
             makespan_s={makespan:.2} ideal_s={ideal:.2} efficiency={:.3} count={} error={} \
             help_d0={} help_d1={} help_d2={} storage_ops={} storage_ops_per_s_peak={} waves={} \
             steals={} ops_per_steal={:.2} host_steals={} init_s={:.3}",
            scenario.name,
            format!("{:?}", args.mode).to_lowercase(),
            scenario.realisations,
            ideal / makespan,
            summary.as_ref().map_or(0, |s| s.count),
            error.as_ref().map_or(0, |e| e.code()),
            help[0],
            help[1],
            help[2],
            ops_per_second.iter().sum::<u64>(),
            ops_per_second.iter().max().unwrap_or(&0),
            summary.as_ref().map_or(0, |s| s.waves),
            steals.0,
            steals.1 as f64 / steals.0.max(1) as f64,
            (summary.iter().flat_map(|s| s.ranks.iter()))
                .map(|r| r.host_steals)
                .sum::<u64>(),
            summary.as_ref().map_or(f64::NAN, |s| s.init),
        );
    } else {
        root.gather_into(&count);
        root.gather_varcount_into(&computed[..]);
        root.gather_into(&per_check);
        root.gather_into(&cpu);
        root.gather_into(&last_done);
    }
    match error {
        None => Ok(()),
        Some(e) => Err(Failure::AllRanks(e.to_string())),
    }
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}
