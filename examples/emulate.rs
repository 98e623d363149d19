//! The emulator of DESIGN §8: runs a scenario of emulated heterogeneous ranks
//! through the real library (MPI and signal files) and prints one result line,
//! last on stdout:
//!
//! ```text
//! result: scenario=hetero16 mode=full ranks=16 realisations=6000 missing=0 duplicates=0 makespan_s=16.9 ideal_s=16.22 efficiency=0.96
//! ```
//!
//! A realisation of rank `i` started at `t` (seconds since the common start)
//! sleeps `base / s_i(t)`. `missing` and `duplicates` are counted from the ids
//! the ranks really computed, gathered on rank 0 at the end.
//!
//! Usage (under mpirun): `emulate SCENARIO MODE [--config FILE] [--ranks-report]`
//! where SCENARIO is a name of `examples/scenarios/` or the path of a scenario
//! file, MODE is `static`, `warmup` or `full`. Any `SOSLB_*` variable applies.

use mpi::traits::*;
use soslb::config::{Config, Mode};
use soslb::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    scenario: PathBuf,
    mode: Mode,
    config: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let usage = "usage: emulate SCENARIO static|warmup|full [--config FILE]";
    let name = it.next().ok_or(usage)?;
    let mode = match it.next().as_deref() {
        Some("static") => Mode::Static,
        Some("warmup") => Mode::Warmup,
        Some("full") => Mode::Full,
        other => return Err(format!("unknown mode {other:?}; {usage}")),
    };
    let mut config = None;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = Some(PathBuf::from(it.next().ok_or(usage)?)),
            _ => return Err(format!("unknown argument {a:?}; {usage}")),
        }
    }
    let scenario = if name.ends_with(".ron") || name.contains('/') {
        PathBuf::from(name)
    } else {
        let local = Path::new("examples/scenarios").join(format!("{name}.ron"));
        if local.is_file() {
            local
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(local)
        }
    };
    Ok(Args {
        scenario,
        mode,
        config,
    })
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
            soslb::board::warn::print_line(&format!("emulate: rank {me}: {e}")); // one write
            ExitCode::FAILURE
        }
        Err(Failure::ThisRank(e)) => {
            soslb::board::warn::print_line(&format!("emulate: rank {me}: {e}")); // one write
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
        eprintln!(
            "emulate: warning: scenario {} is made for {} ranks, running on {ranks}",
            scenario.name, scenario.ranks
        );
    }
    let mut config = Config::load(args.config.as_deref()).map_err(|e| e.to_string())?;
    config.mode = args.mode;
    let check_interval = config.check_interval;

    // The common start.
    world.barrier();
    let t0 = Instant::now();
    let mut lb = soslb::Balancer::new(world, scenario.realisations, config)
        .map_err(|e| Failure::AllRanks(e.to_string()))?;
    let mut computed: Vec<u64> = Vec::new();
    // File operations and time while computing with no SOS open.
    let (mut quiet_ops, mut quiet_time) = (0u64, 0.0f64);
    loop {
        let (ops0, t_call, quiet) = (lb.file_ops(), Instant::now(), !lb.sos_open());
        let Some(ids) = lb.next().map_err(|e| e.to_string())? else {
            break;
        };
        if quiet && !lb.sos_open() {
            quiet_ops += lb.file_ops() - ops0;
            quiet_time += t_call.elapsed().as_secs_f64();
        }
        let t_chunk = Instant::now();
        for id in ids {
            let t = t0.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_secs_f64(scenario.duration(me, t)));
            computed.push(id);
        }
        if quiet {
            quiet_time += t_chunk.elapsed().as_secs_f64();
        }
    }
    let summary = lb.finish().map_err(|e| e.to_string())?;
    let end = t0.elapsed().as_secs_f64();

    // Makespan: to the last rank's return from finalize.
    let mut makespan = 0.0f64;
    world.all_reduce_into(&end, &mut makespan, mpi::collective::SystemOperation::max());
    let root = world.process_at_rank(0);
    let count = computed.len() as i32;
    let per_check = quiet_ops as f64 / (quiet_time / check_interval).max(1.0);
    let cpu = cpu_seconds();
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
        for (r, rep) in summary.ranks.iter().enumerate() {
            println!(
                "rank: {r} computed={} true_speed={:.3} warmup_speed={:.6} planned={} taken={} given={} sos={} \
                 file_ops_per_check_without_sos={:.3} cpu_s={:.3}",
                rep.computed,
                scenario.speed(r, 0.0) / scenario.base,
                rep.warmup_speed,
                rep.planned,
                rep.taken,
                rep.given,
                rep.sos_posted,
                per_checks[r],
                cpus[r]
            );
        }
        let ideal = scenario.ideal(ranks);
        println!(
            "result: scenario={} mode={} ranks={ranks} realisations={} missing={missing} duplicates={duplicates} \
             makespan_s={makespan:.2} ideal_s={ideal:.2} efficiency={:.3}",
            scenario.name,
            format!("{:?}", args.mode).to_lowercase(),
            scenario.realisations,
            ideal / makespan
        );
    } else {
        root.gather_into(&count);
        root.gather_varcount_into(&computed[..]);
        root.gather_into(&per_check);
        root.gather_into(&cpu);
    }
    Ok(())
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}
