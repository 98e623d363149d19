//! Grid jobs under a real Slurm (`scripts/slurm.sh start`: slurmctld, slurmd
//! and slurmdbd on this machine; `scripts/test.sh` starts and stops it), with
//! the emulator (`examples/emulate.rs`: a realisation sleeps, its observable
//! is `sqrt(id)`) on 4 ranks under `mpirun` inside `sbatch`, or under `srun`:
//!
//! - a job of two minutes' work with `--time=1` and `on_deadline: Stop`
//!   warns with the deadline Slurm set (Debian's Slurm 22.05 sets no
//!   `SLURM_JOB_END_TIME`: rank 0 asks `squeue`), stops in time, and its
//!   resubmitted job resumes to the bits of an uninterrupted run;
//! - the same without `Stop`: Slurm kills it (`TIMEOUT`), and the resumed
//!   run still gives those bits;
//! - `scontrol requeue` of a running job: the requeued run, with the same
//!   `SLURM_JOB_ID`, takes a directory of its own and finishes;
//! - two `srun` steps in one allocation: two run directories, every id once
//!   in each.
//!
//! Each test prints what `sacct` says of its jobs (state, elapsed, limit).

mod common;

use common::{example, field, temp_dir};
use soslb::stats::Observables;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The Slurm of scripts/slurm.sh: its configuration, if it answers. Without
/// one the test says so, and fails under CI=true.
fn slurm_conf() -> Option<String> {
    let conf = std::env::var("SLURM_CONF").ok().unwrap_or_else(|| {
        let dir = std::env::var("SOSLB_SLURM_DIR").unwrap_or_else(|_| "/run/soslb-slurm".into());
        format!("{dir}/slurm.conf")
    });
    let ping = Command::new("scontrol")
        .arg("ping")
        .env("SLURM_CONF", &conf)
        .output();
    if ping.is_ok_and(|o| o.status.success()) {
        return Some(conf);
    }
    let why = format!(
        "no Slurm answers with SLURM_CONF={conf}: start one with scripts/slurm.sh start \
         (scripts/test.sh does)"
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// A test's directory, the Slurm it uses, and its jobs.
struct Grid {
    dir: PathBuf,
    conf: String,
}

/// What sacct says of a job: state, elapsed, time limit, exit code.
#[derive(Debug)]
struct Accounted {
    state: String,
    elapsed: String,
    limit: String,
}

impl Grid {
    fn new(name: &str) -> Option<Grid> {
        let conf = slurm_conf()?;
        let dir = temp_dir(&format!("slurm-{name}"));
        std::fs::create_dir_all(dir.join("tmp")).expect("the jobs' TMPDIR");
        Some(Grid { dir, conf })
    }

    /// A Slurm command.
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// Run a Slurm command that must succeed; its stdout.
    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The emulator on `np` ranks, as a job script's command, started by
    /// `launch` (the launcher of this build's MPI, or `srun`).
    fn emulate(&self, launch: &str, np: usize, realisations: u64, env: &[(&str, &str)]) -> String {
        let scenario = self.dir.join(format!("slurm{np}.ron"));
        // Ranks of 20 realisations a second, the fourth at 10.
        std::fs::write(
            &scenario,
            format!(
                "(name: \"slurm\", ranks: {np}, realisations: {realisations}, base: 0.05, \
                 speed: [Classes([1.0, 1.0, 1.0, 0.5], 1)])"
            ),
        )
        .expect("write the scenario");
        let mut lines = vec![
            format!(
                "export SOSLB_SIGNAL_DIR={}",
                self.dir.join("signals").display()
            ),
            format!("export TMPDIR={}", self.dir.join("tmp").display()),
            "export SOSLB_WARMUP=1 SOSLB_CHECK_INTERVAL=0.25 SOSLB_LOG=true".into(),
            "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1".into(),
        ];
        lines.extend(env.iter().map(|(k, v)| format!("export {k}={v}")));
        lines.push(format!(
            "{launch} {} {} full",
            example("emulate").display(),
            scenario.display()
        ));
        lines.join("\n")
    }

    /// Submit `body` as the batch script `name`; the job id.
    fn submit(&self, name: &str, args: &[&str], body: &str) -> String {
        let script = self.dir.join(format!("{name}.sh"));
        std::fs::write(&script, format!("#!/bin/bash\n{body}\n")).expect("write the job script");
        let out = self.dir.join(format!("{name}.out"));
        let err = self.dir.join(format!("{name}.err"));
        let mut c = self.command("sbatch");
        c.args(["--parsable", "-J", name, "--open-mode=append"])
            .arg(format!("--output={}", out.display()))
            .arg(format!("--error={}", err.display()))
            .args(args)
            .arg(&script);
        // The caller's SOSLB_* settings must not change the tests.
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SOSLB_")) {
            c.env_remove(k);
        }
        let out = c.output().expect("sbatch runs");
        assert!(
            out.status.success(),
            "sbatch {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        println!("slurm: submitted {name} as job {id} ({})", args.join(" "));
        id
    }

    /// Wait (up to `limit`) until the job has ended; what sacct says of its
    /// last run.
    fn wait(&self, id: &str, limit: Duration) -> Accounted {
        let t0 = Instant::now();
        loop {
            let queued = self.run("squeue", &["-h", "-j", id, "-o", "%T"]);
            if queued.trim().is_empty() {
                break;
            }
            assert!(
                t0.elapsed() < limit,
                "job {id} still {queued} after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // slurmdbd learns of the end a moment after squeue.
        loop {
            let all = self.accounting(id);
            if let Some(last) = all
                .last()
                .filter(|a| !matches!(a.state.as_str(), "RUNNING" | "PENDING"))
            {
                return Accounted {
                    state: last.state.clone(),
                    elapsed: last.elapsed.clone(),
                    limit: last.limit.clone(),
                };
            }
            assert!(
                t0.elapsed() < limit + Duration::from_secs(30),
                "sacct: {all:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Every record sacct has of the job's allocation (a requeued job has
    /// one per run), printed for the record.
    fn accounting(&self, id: &str) -> Vec<Accounted> {
        let out = self.run(
            "sacct",
            &[
                "-D",
                "-X",
                "-n",
                "-P",
                "-j",
                id,
                "-o",
                "JobID,State,Elapsed,Timelimit,Start,End",
            ],
        );
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                let get = |i: usize| f.get(i).map_or(String::new(), |s| s.to_string());
                Accounted {
                    state: get(1).split_whitespace().next().unwrap_or("").to_string(),
                    elapsed: get(2),
                    limit: get(3),
                }
            })
            .collect()
    }

    /// Print the job's sacct records (for the closing note).
    fn report(&self, what: &str, id: &str) {
        for a in self.accounting(id) {
            println!(
                "slurm: sacct {what} job {id}: {} elapsed {} limit {}",
                a.state, a.elapsed, a.limit
            );
        }
    }

    /// The job's stdout and stderr files.
    fn output(&self, name: &str) -> (String, String) {
        let read = |ext: &str| {
            std::fs::read_to_string(self.dir.join(format!("{name}.{ext}"))).unwrap_or_default()
        };
        (read("out"), read("err"))
    }

    /// `<signal_dir>/<run>` directories, by name.
    fn runs(&self) -> Vec<String> {
        let mut runs: Vec<String> = std::fs::read_dir(self.dir.join("signals"))
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        runs
    }
}

impl Drop for Grid {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The launcher on `np` ranks inside an allocation.
fn launch(np: usize) -> String {
    match common::mpi() {
        common::Mpi::OpenMpi => format!("{} --oversubscribe -np {np}", common::launcher()),
        common::Mpi::Mpich => format!("{} -n {np}", common::launcher()),
    }
}

/// `srun` of a step of `np` tasks, with the PMI of this build's MPI.
fn srun(np: usize) -> String {
    match common::mpi() {
        common::Mpi::OpenMpi => format!("srun --mpi=pmix -n {np}"),
        common::Mpi::Mpich => format!("srun --mpi=pmi2 -n {np}"),
    }
}

/// The `stats:` line of one uninterrupted run of `total`, computed here in
/// id order on one accumulator.
fn reference(total: u64) -> String {
    let mut seq = Observables::new();
    (0..total).for_each(|id| seq.add(&[(id as f64).sqrt()]).expect("finite"));
    let st = seq.statistics()[0];
    format!(
        "stats: count={total} mean={:e} variance={:e} stderr={:e}",
        st.mean, st.variance, st.std_error
    )
}

/// The last line of `text` that starts with `prefix`.
fn last<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().rfind(|l| l.starts_with(prefix))
}

/// Two minutes of work on 4 ranks at 70 realisations a second.
const TOTAL: u64 = 8400;

/// Kill or stop, then resume: the bits of an uninterrupted run.
fn cut_and_resume(grid: &Grid, name: &str, stop: bool) {
    let mut env = vec![("SOSLB_JOB_NAME", name)];
    if stop {
        env.push(("SOSLB_ON_DEADLINE", "Stop"));
    }
    let first = grid.submit(
        name,
        &["-n", "4", "-O", "--time=1"],
        &grid.emulate(&launch(4), 4, TOTAL, &env),
    );
    let done = grid.wait(&first, Duration::from_secs(240));
    grid.report(name, &first);
    let (stdout, stderr) = grid.output(name);
    let dump = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert!(
        grid.dir
            .join("signals")
            .join(name)
            .join("completion.ron")
            .is_file(),
        "no journal of {name}:\n{dump}"
    );
    if stop {
        assert_eq!(done.state, "COMPLETED", "{done:?}\n{dump}");
        let warning = stderr.lines().find(|l| l.contains("deadline: at"));
        let warning = warning.unwrap_or_else(|| panic!("no deadline warning:\n{dump}"));
        let source = format!("(from Slurm: squeue -j {first})");
        assert!(warning.contains(&source), "not {source}: {warning}");
        assert!(stderr.contains("deadline: stopping at"), "{dump}");
        let result = last(&stdout, "result:").unwrap_or_else(|| panic!("no result:\n{dump}"));
        assert_eq!(field(result, "duplicates"), Some("0"), "{result}");
        let missing: u64 = field(result, "missing")
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(
            missing > 0,
            "the job finished before its walltime: {result}"
        );
        println!("slurm: {name}: {warning}");
        println!("slurm: {name}: {result}");
    } else {
        assert_eq!(done.state, "TIMEOUT", "{done:?}\n{dump}");
        assert!(
            last(&stdout, "result:").is_none(),
            "the killed job ended:\n{dump}"
        );
    }
    // Resubmitted, with time enough: computes what the journal lacks.
    env.push(("SOSLB_RESUME", "true"));
    let again = format!("{name}-resumed");
    let second = grid.submit(
        &again,
        &["-n", "4", "-O", "--time=3"],
        &grid.emulate(&launch(4), 4, TOTAL, &env),
    );
    let done = grid.wait(&second, Duration::from_secs(300));
    grid.report(&again, &second);
    let (stdout, stderr) = grid.output(&again);
    let dump = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert_eq!(done.state, "COMPLETED", "{done:?}\n{dump}");
    let result = last(&stdout, "result:").unwrap_or_else(|| panic!("no result:\n{dump}"));
    assert_eq!(field(result, "duplicates"), Some("0"), "{result}");
    println!("slurm: {again}: {result}");
    assert_eq!(
        last(&stdout, "stats:"),
        Some(reference(TOTAL).as_str()),
        "not the bits of an uninterrupted run:\n{dump}"
    );
}

#[test]
fn a_job_that_stops_at_its_slurm_walltime_resumes_to_the_same_bits() {
    let Some(grid) = Grid::new("stop") else {
        return;
    };
    cut_and_resume(&grid, "stop", true);
}

#[test]
fn a_job_that_slurm_kills_at_its_walltime_resumes_to_the_same_bits() {
    let Some(grid) = Grid::new("kill") else {
        return;
    };
    cut_and_resume(&grid, "kill", false);
}

#[test]
fn a_requeued_job_never_reads_its_first_runs_directory() {
    let Some(grid) = Grid::new("requeue") else {
        return;
    };
    // About 30 s of work.
    let total = 2100;
    let id = grid.submit(
        "requeue",
        &["-n", "4", "-O", "--time=2"],
        &grid.emulate(&launch(4), 4, total, &[]),
    );
    // Requeue once the first run has its directory and is under way.
    let first_run = grid.dir.join("signals").join(format!("{id}.0"));
    let t0 = Instant::now();
    while !first_run.join("log").is_dir() || t0.elapsed() < Duration::from_secs(5) {
        assert!(t0.elapsed() < Duration::from_secs(120), "no {first_run:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    grid.run("scontrol", &["requeue", &id]);
    // Slurm holds a requeued job for two minutes: release it at once.
    std::thread::sleep(Duration::from_secs(2));
    let t1 = Instant::now();
    while grid.run("squeue", &["-h", "-j", &id, "-o", "%T"]).trim() != "PENDING" {
        assert!(
            t1.elapsed() < Duration::from_secs(60),
            "job {id} not pending after the requeue"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    grid.run(
        "scontrol",
        &["update", &format!("jobid={id}"), "starttime=now"],
    );
    let done = grid.wait(&id, Duration::from_secs(240));
    grid.report("requeue", &id);
    let (stdout, stderr) = grid.output("requeue");
    let dump = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert_eq!(done.state, "COMPLETED", "{done:?}\n{dump}");
    let records = grid.accounting(&id);
    assert!(
        records.iter().any(|a| a.state == "REQUEUED"),
        "no requeued run: {records:?}"
    );
    // The first run's directory stays as the kill left it; the second run
    // took the next free name and finished there, every id once.
    let runs = grid.runs();
    assert_eq!(runs, [format!("{id}.0"), format!("{id}.0.1")], "{dump}");
    let result = last(&stdout, "result:").unwrap_or_else(|| panic!("no result:\n{dump}"));
    assert!(result.contains("missing=0 duplicates=0"), "{result}");
    assert_eq!(
        field(result, "count"),
        Some(total.to_string().as_str()),
        "{result}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("result:")).count(),
        1,
        "the first run ended on its own:\n{dump}"
    );
    let second = grid.dir.join("signals").join(format!("{id}.0.1/log"));
    assert_eq!(
        std::fs::read_dir(&second).map(|d| d.count()).unwrap_or(0),
        4,
        "not 4 monitor logs in {second:?}"
    );
    println!("slurm: requeue: runs {runs:?}; {result}");
}

#[test]
fn two_job_steps_in_one_allocation_run_in_two_directories() {
    let Some(grid) = Grid::new("steps") else {
        return;
    };
    let total = 700;
    let step = grid.emulate(&srun(2), 2, total, &[]);
    let id = grid.submit(
        "steps",
        &["-n", "2", "-O", "--time=2"],
        &format!("{step}\n{step}"),
    );
    let done = grid.wait(&id, Duration::from_secs(180));
    grid.report("steps", &id);
    let (stdout, stderr) = grid.output("steps");
    let dump = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    assert_eq!(done.state, "COMPLETED", "{done:?}\n{dump}");
    let results: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("result:"))
        .collect();
    assert_eq!(results.len(), 2, "{dump}");
    for r in &results {
        assert!(r.contains("missing=0 duplicates=0"), "{r}");
        assert_eq!(field(r, "ranks"), Some("2"), "{r}");
    }
    assert_eq!(
        grid.runs(),
        [format!("{id}.0.0"), format!("{id}.1.0")],
        "{dump}"
    );
    println!("slurm: steps: runs {:?}", grid.runs());
}
