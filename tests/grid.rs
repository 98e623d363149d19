//! What a grid job needs (DESIGN §11), under `mpirun` with the emulator
//! (`examples/emulate.rs`, a realisation sleeps, its observable is
//! `sqrt(id)`): the deadline's warning and stop, statistics against a
//! sequential reference computed here, and a resumed run that adds another
//! number of observables. The kill-and-resume runs use the Fortran slab
//! example, in `tests/fortran.rs`.

mod common;

use common::{example, field, mpirun, temp_dir};
use soslb::stats::Observables;
use std::path::PathBuf;

/// One emulator run and what it printed.
struct Job {
    ok: bool,
    stdout: String,
    stderr: String,
    dir: PathBuf,
}

impl Drop for Job {
    fn drop(&mut self) {
        if !std::thread::panicking() && !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl std::fmt::Display for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

impl Job {
    /// The job's directory, kept for another run.
    fn keep_dir(mut self) -> PathBuf {
        std::mem::take(&mut self.dir)
    }

    /// The value of `key=` in the last line starting with `prefix`.
    fn value(&self, prefix: &str, key: &str) -> String {
        let line = self.stdout.lines().rfind(|l| l.starts_with(prefix));
        let line = line.unwrap_or_else(|| panic!("no `{prefix}` line:\n{self}"));
        field(line, key)
            .unwrap_or_else(|| panic!("no {key}= in `{line}`:\n{self}"))
            .to_string()
    }

    fn number(&self, key: &str) -> f64 {
        let v = self.value("result:", key);
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v} is not a number:\n{self}"))
    }

    /// The job times `t=` of the monitor-log lines containing `word`, all ranks.
    fn log_times(&self, word: &str) -> Vec<f64> {
        common::log_times(&self.dir.join("signals/job.0/log"), word)
    }
}

/// `np` ranks emulating `realisations` of `base` seconds each (rank 3 at a
/// quarter of the speed), mode `mode`, with `env`.
fn emulate(np: usize, realisations: u64, mode: &str, extra: &[&str], env: &[(&str, &str)]) -> Job {
    emulate_in(temp_dir("grid"), np, realisations, mode, extra, env)
}

fn emulate_in(
    dir: PathBuf,
    np: usize,
    realisations: u64,
    mode: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Job {
    let scenario = dir.join("grid.ron");
    std::fs::write(
        &scenario,
        format!(
            "(name: \"grid\", ranks: {np}, realisations: {realisations}, base: 0.01, \
             speed: [Classes([1.0, 1.0, 1.0, 0.25], 1)])"
        ),
    )
    .expect("write the scenario");
    let mut args = vec![scenario.to_str().unwrap_or_default(), mode];
    args.extend(extra);
    // The files are kept, the host's node-local board too: in the job's
    // own temporary directory, which goes with it.
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("make the job's TMPDIR");
    let mut env = env.to_vec();
    env.extend([
        ("SOSLB_JOB_ID", "job"),
        ("SOSLB_WARMUP", "0.3"),
        ("SOSLB_CHECK_INTERVAL", "0.1"),
        ("SOSLB_KEEP", "true"),
        ("TMPDIR", tmp.to_str().unwrap_or_default()),
    ]);
    let (out, stdout, stderr) = common::run(mpirun(np, &example("emulate"), &args, &dir, &env));
    Job {
        ok: out.status.success(),
        stdout,
        stderr,
        dir,
    }
}

#[test]
fn statistics_match_a_sequential_reference() {
    let total = 600u64;
    let job = emulate(4, total, "full", &[], &[]);
    assert!(job.ok, "{job}");
    assert_eq!(
        (job.number("missing"), job.number("duplicates")),
        (0.0, 0.0),
        "{job}"
    );
    // The sequential reference: the same sums, in id order, on one accumulator.
    let mut seq = Observables::new();
    (0..total).for_each(|id| seq.add(&[(id as f64).sqrt()]).expect("finite"));
    let st = seq.statistics()[0];
    let got = |k: &str| job.value("stats:", k);
    assert_eq!(got("count"), total.to_string(), "{job}");
    assert_eq!(got("mean"), format!("{:e}", st.mean), "{job}");
    assert_eq!(got("variance"), format!("{:e}", st.variance), "{job}");
    assert_eq!(got("stderr"), format!("{:e}", st.std_error), "{job}");
    // And a plain two-pass computation in f64, independent of the library.
    let x: Vec<f64> = (0..total).map(|id| (id as f64).sqrt()).collect();
    let n = total as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    assert!((st.mean - mean).abs() <= 1e-13 * mean, "{} {mean}", st.mean);
    assert!(
        (st.variance - var).abs() <= 1e-12 * var,
        "{} {var}",
        st.variance
    );
    assert!(
        (st.std_error - (var / n).sqrt()).abs() <= 1e-12 * st.std_error,
        "{st:?}"
    );
}

#[test]
fn a_walltime_too_short_warns_right_after_the_warmup_and_the_job_runs_on() {
    // About 2.6 s of work on 4 ranks (one slow), a walltime of 1.5 s from
    // the batch system: rank 0 warns at the plan, the job completes.
    let end = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
        + 1.5;
    let end = format!("{end:.3}");
    let env = [
        ("SLURM_JOB_END_TIME", end.as_str()),
        ("SOSLB_DEADLINE_MARGIN", "0.2"),
    ];
    let job = emulate(4, 800, "warmup", &[], &env);
    assert!(job.ok, "{job}");
    assert_eq!(
        (
            job.number("missing"),
            job.number("duplicates"),
            job.number("count")
        ),
        (0.0, 0.0, 800.0),
        "{job}"
    );
    let warnings: Vec<&str> = job
        .stderr
        .lines()
        .filter(|l| l.contains("deadline:"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning:\n{job}");
    for part in [
        "rank 0",
        "forecast end",
        "SLURM_JOB_END_TIME",
        "on_deadline: Warn",
    ] {
        assert!(warnings[0].contains(part), "{part}:\n{job}");
    }
    let plan = job.log_times(" plan ");
    let warned = job.log_times("warning deadline:");
    assert_eq!(warned.len(), 1, "{warned:?}\n{job}");
    let plan_end = plan.iter().copied().fold(0.0, f64::max);
    println!(
        "deadline warn: plan at {plan_end:.3} s, warning at {:.3} s: {}",
        warned[0], warnings[0]
    );
    assert!(
        warned[0] <= plan_end + 0.1,
        "the warning at {} s came later than the first check after the warm-up ({plan_end} s)\n{job}",
        warned[0]
    );
}

#[test]
fn on_deadline_stop_ends_before_the_walltime_with_exactly_the_completed_realisations() {
    let env = [
        ("SOSLB_WALLTIME", "1.5"),
        ("SOSLB_DEADLINE_MARGIN", "0.3"),
        ("SOSLB_ON_DEADLINE", "Stop"),
    ];
    let total = 800.0;
    let job = emulate(4, 800, "full", &[], &env);
    assert!(job.ok, "{job}");
    let (missing, duplicates, count) = (
        job.number("missing"),
        job.number("duplicates"),
        job.number("count"),
    );
    assert_eq!(duplicates, 0.0, "{job}");
    assert!(
        missing > 0.0,
        "the job finished before the deadline:\n{job}"
    );
    // The statistics cover exactly the realisations computed.
    assert_eq!(count, total - missing, "{job}");
    assert_eq!(job.value("stats:", "count"), count.to_string(), "{job}");
    assert!(job.stderr.contains("deadline: stopping at"), "{job}");
    // Every rank left finalize before the walltime (job time, from the
    // common start of the run).
    let finalized = job.log_times(" finalize ");
    assert_eq!(finalized.len(), 4, "{finalized:?}\n{job}");
    let last = finalized.iter().copied().fold(0.0, f64::max);
    println!(
        "deadline stop: {count} of {total} realisations, every rank out of finalize by \
         {last:.3} s (walltime 1.5 s, margin 0.3 s)"
    );
    assert!(
        last < 1.5,
        "finalize at {last} s, past the walltime:\n{job}"
    );
}

#[test]
fn a_resumed_run_with_another_observable_count_is_an_error_that_says_so() {
    let dir = temp_dir("grid-observables");
    let env = [("SOSLB_JOB_NAME", "exp")];
    let first = emulate_in(dir, 2, 40, "static", &[], &env);
    assert!(first.ok, "{first}");
    let env = [("SOSLB_JOB_NAME", "exp"), ("SOSLB_RESUME", "true")];
    let dir = first.keep_dir();
    let job = emulate_in(dir, 1, 60, "static", &["--observables", "0:2"], &env);
    assert!(!job.ok, "{job}");
    for part in [
        "2 observables given",
        "journalled realisations of this job",
        "have 1",
    ] {
        assert!(job.stderr.contains(part), "{part}:\n{job}");
    }
}
