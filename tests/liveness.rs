//! Liveness (DESIGN §5): whatever one rank does, every rank learns the same
//! verdict and no rank hangs. Real `mpirun` runs of the emulator
//! (`examples/emulate.rs`): ranks that leave their loop early, a panic
//! inside `next`, a signal-file write that fails, a stop asked by one rank,
//! several loops in one program, one rank, observables that disagree, an
//! index or SOS file damaged from outside the job (the board heals, no rank
//! spins), a signal directory that fills up, ranks stopped by a signal
//! (busy, idle, or after they said they wait).

mod common;

use common::{example, field, mpirun, scenario, temp_dir};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One emulator job and what it printed.
struct Job {
    ok: bool,
    stdout: String,
    stderr: String,
    dir: PathBuf,
    seconds: f64,
}

impl Drop for Job {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Job {
    /// The job that printed `out`, in `dir`, in `seconds`.
    fn of(out: std::process::Output, dir: PathBuf, seconds: f64) -> Job {
        Job {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            dir,
            seconds,
        }
    }

    /// The last result line.
    fn result(&self) -> &str {
        let line = self.stdout.lines().rfind(|l| l.starts_with("result:"));
        line.unwrap_or_else(|| panic!("no result line:\n{self}"))
    }

    fn value(&self, key: &str) -> f64 {
        field(self.result(), key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {}", self.result()))
    }

    /// Every rank of `ranks` reported an error containing `text`.
    fn assert_every_rank_failed_with(&self, ranks: usize, code: i32, text: &str) {
        assert!(!self.ok, "the job succeeded:\n{self}");
        assert_eq!(self.value("error") as i32, code, "{self}");
        for r in 0..ranks {
            let prefix = format!("emulate: rank {r}: ");
            assert!(
                self.stderr
                    .lines()
                    .any(|l| l.contains(&prefix) && l.contains(text)),
                "rank {r} did not report `{text}`:\n{self}"
            );
        }
    }

    /// Monitor-log lines containing `word`, over all ranks, as job times.
    fn log_times(&self, run: &str, word: &str) -> Vec<f64> {
        common::log_times(&self.dir.join("signals").join(run).join("log"), word)
    }

    /// Seconds from the first `failed` line to the last `verdict` line.
    fn seconds_to_verdict(&self, run: &str) -> f64 {
        let failed = self.log_times(run, " failed ");
        let verdicts = self.log_times(run, " verdict ");
        let first = failed.iter().copied().fold(f64::INFINITY, f64::min);
        let last = verdicts.iter().copied().fold(0.0, f64::max);
        assert!(
            first.is_finite() && last >= first,
            "{failed:?} {verdicts:?}"
        );
        last - first
    }
}

impl std::fmt::Display for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Start the emulator; `during` runs while it does (with the signal dir).
fn emulate_with(
    np: usize,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    during: impl FnOnce(&Path),
) -> Job {
    emulate_in("full", np, name, extra, env, during)
}

/// [`emulate_with`] in `mode`.
fn emulate_in(
    mode: &str,
    np: usize,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    during: impl FnOnce(&Path),
) -> Job {
    let dir = temp_dir(name);
    let path = scenario(name);
    let mut args = vec![path.to_str().unwrap(), mode];
    args.extend(extra);
    let mut env = env.to_vec();
    env.extend([("SOSLB_WARMUP", "0.5")]);
    if !env.iter().any(|(k, _)| k.ends_with("JOB_ID")) {
        env.push(("SOSLB_JOB_ID", "job"));
    }
    let mut cmd = mpirun(np, &example("emulate"), &args, &dir, &env);
    let t0 = Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    during(&dir.join("signals"));
    let out = child.wait_with_output().expect("mpirun ends");
    Job::of(out, dir, t0.elapsed().as_secs_f64())
}

fn emulate(np: usize, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Job {
    emulate_with(np, name, extra, env, |_| {})
}

/// Wait (up to a minute) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn leave(rank: usize, at: &str, when: &str) {
    leave_in("speeds8", rank, at, when);
}

fn leave_in(scenario: &str, rank: usize, at: &str, when: &str) {
    let arg = format!("{rank}:{at}");
    // The node-local files (the host's board) in a temporary directory of
    // the job's own: a failed run leaves none behind.
    let tmp = temp_dir("tmp");
    let job = emulate(
        8,
        scenario,
        &["--leave", &arg],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    let text = format!("rank {rank} failed: soslb_finalize was called{when}");
    job.assert_every_rank_failed_with(8, 8, &text);
    assert!(job.stderr.contains("still owned"), "{job}");
    let left = node_dirs(&tmp);
    assert!(left.is_empty(), "node-local files left: {left:?}\n{job}");
    let _ = std::fs::remove_dir_all(&tmp);
    let latency = job.seconds_to_verdict("job.0");
    println!(
        "liveness: rank {rank} left at t={at} s: every rank had its error {latency:.3} s later \
         (job {:.1} s)",
        job.seconds
    );
    assert!(latency < 5.0, "{latency} s to the verdict:\n{job}");
}

#[test]
fn a_rank_that_leaves_after_the_warmup_is_an_error_on_every_rank() {
    leave(3, "1.5", " while");
}

#[test]
fn a_rank_that_leaves_during_the_warmup_is_an_error_on_every_rank() {
    leave(3, "0.2", " during the warm-up");
}

/// Rank 3 leaves while it computes its reserve and the warm-up exchange
/// is still in flight (rank 7 reaches it late): it waits for the exchange,
/// then the waves tell every rank.
#[test]
fn a_rank_that_leaves_while_the_warmup_exchange_is_in_flight_is_an_error_on_every_rank() {
    leave_in("late8", 3, "0.7", " during the warm-up");
}

#[test]
fn a_rank_that_never_calls_next_is_an_error_on_every_rank() {
    leave(5, "0", " during the warm-up");
}

#[test]
fn rank_0_leaving_early_is_an_error_on_every_rank() {
    leave(0, "1.5", " while");
}

#[test]
fn a_failed_sos_file_write_costs_help_and_no_id() {
    // Rank 15 is slow and posts an SOS; its file is made immutable, so that
    // its next writes fail with EPERM (even for root). The SOS file only
    // advertises the slots: the job ends with every id once, and the
    // failure is named.
    let file = |signals: &Path| signals.join("job.0/sos/15.ron");
    let mut made_immutable = false;
    let env = [("SOSLB_KEEP", "true"), ("SOSLB_HOST_BOARD", "false")];
    let job = emulate_with(16, "midrun", &[], &env, |signals| {
        wait_for("rank 15's SOS file", || file(signals).exists());
        made_immutable = std::process::Command::new("chattr")
            .arg("+i")
            .arg(file(signals))
            .status()
            .is_ok_and(|s| s.success());
    });
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(file(&job.dir.join("signals")))
        .status();
    if !made_immutable {
        assert!(
            std::env::var_os("CI").is_none(),
            "chattr +i is not available"
        );
        println!(
            "SKIPPED: chattr +i is not available on {}",
            job.dir.display()
        );
        return;
    }
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    assert!(
        job.stderr.contains("sos/15.ron"),
        "the failure is not named:\n{job}"
    );
}

#[test]
fn a_signal_directory_that_cannot_be_made_is_named_on_every_rank() {
    // Under a regular file: rank 0, which makes the run directory, fails
    // at init, and every other rank's error gives rank 0's message.
    let tmp = temp_dir("notdir");
    std::fs::write(tmp.join("file"), "").unwrap();
    let signals = tmp.join("file/signals");
    let job = emulate(
        4,
        "speeds8",
        &[],
        &[("SOSLB_SIGNAL_DIR", signals.to_str().unwrap())],
    );
    assert!(!job.ok, "{job}");
    for r in 0..4 {
        let prefix = format!("emulate: rank {r}: ");
        let named = (job.stderr.lines())
            .any(|l| l.starts_with(&prefix) && l.contains(signals.to_str().unwrap()));
        assert!(
            named,
            "rank {r} does not name {}:\n{job}",
            signals.display()
        );
    }
    let _ = std::fs::remove_dir_all(tmp);
}

/// A tmpfs of `size` mounted at `dir` (root only), unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Option<Tmpfs> {
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "soslb-test"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_signal_directory_costs_help_and_no_id() {
    // The signal directory on a small tmpfs, filled once rank 15 has posted
    // its SOS (a quota or a disk full on a cluster's shared storage): every
    // write fails with ENOSPC from then on. Every id is computed once, or
    // every rank fails naming a file; the failures are named.
    let Some(fs) = Tmpfs::mount(temp_dir("full"), "4m") else {
        assert!(std::env::var_os("CI").is_none(), "cannot mount a tmpfs");
        println!("SKIPPED: cannot mount a tmpfs (not root?)");
        return;
    };
    let signals = fs.0.join("signals");
    let env = [
        ("SOSLB_SIGNAL_DIR", signals.to_str().unwrap()),
        ("SOSLB_HOST_BOARD", "false"),
    ];
    let job = emulate_with(16, "midrun", &[], &env, |_| {
        wait_for("rank 15's SOS file", || {
            signals.join("job.0/sos/15.ron").exists()
        });
        let mut filler = std::fs::File::create(fs.0.join("filler")).unwrap();
        while std::io::Write::write_all(&mut filler, &[0; 4096]).is_ok() {}
    });
    let full = "No space left on device";
    assert!(job.stderr.contains(full), "nothing was refused:\n{job}");
    if job.ok {
        assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    } else {
        let named = (0..16).filter(|r| {
            let prefix = format!("emulate: rank {r}: {}", signals.display());
            job.stderr.lines().any(|l| l.starts_with(&prefix))
        });
        assert_eq!(named.count(), 16, "not every rank names a file:\n{job}");
    }
    println!("full signal directory: {}", job.result());
}

/// The pid of the emulator's rank `rank` of the job whose signal directory
/// is `signals` (Open MPI's or MPICH's rank variable in its environment).
fn pid_of_rank(signals: &Path, rank: usize) -> Option<i32> {
    let dir = format!("SOSLB_SIGNAL_DIR={}", signals.display());
    let ranks = [
        format!("OMPI_COMM_WORLD_RANK={rank}"),
        format!("PMI_RANK={rank}"),
    ];
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.filter_map(|e| e.ok()).find_map(|e| {
        let pid = e.file_name().to_str()?.parse().ok()?;
        let exe = std::fs::read_link(e.path().join("exe")).ok()?;
        let env = std::fs::read(e.path().join("environ")).ok()?;
        let has = |v: &str| env.split(|&b| b == 0).any(|x| x == v.as_bytes());
        let ours = exe.file_name()? == "emulate" && has(&dir) && ranks.iter().any(|r| has(r));
        ours.then_some(pid)
    })
}

#[test]
fn a_rank_stopped_by_a_signal_is_named_and_the_job_ends_once_it_resumes() {
    // Rank 3 stopped (SIGSTOP, as a swapping node or a debugger would) for
    // 5 s, then resumed (SIGCONT): the others name it, and it alone, while
    // they wait (every rank had work at the last wave before), and the job
    // ends with every id once.
    let env = [("SOSLB_WAIT_WARNING", "1.5")];
    let job = emulate_with(8, "speeds8", &[], &env, |signals| {
        stop_rank(
            signals,
            3,
            Duration::from_millis(800),
            Duration::from_secs(5),
        );
    });
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    let alone =
        (job.stderr.lines()).any(|l| l.contains("waited") && l.contains("rank(s) 3, which"));
    assert!(alone, "no warning named rank 3 alone:\n{job}");
    assert!(job.seconds > 5.0, "the job did not wait for rank 3:\n{job}");
}

/// Stop `rank` (SIGSTOP) `after` its monitor log appears, and resume it
/// (SIGCONT) `stopped` later.
fn stop_rank(signals: &Path, rank: usize, after: Duration, stopped: Duration) {
    let pid = pid_of(signals, rank);
    std::thread::sleep(after);
    signal(pid, libc::SIGSTOP);
    std::thread::sleep(stopped);
    signal(pid, libc::SIGCONT);
}

/// The process of `rank`, once the job's run directory is there.
fn pid_of(signals: &Path, rank: usize) -> libc::pid_t {
    let mut pid = None;
    wait_for(&format!("rank {rank}'s process"), || {
        pid = pid_of_rank(signals, rank);
        pid.is_some() && signals.join("job.0").exists()
    });
    pid.unwrap_or_default()
}

fn signal(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory preconditions.
    assert_eq!(
        unsafe { libc::kill(pid, signal) },
        0,
        "signal {signal} to {pid}"
    );
}

#[test]
fn a_stopped_rank_that_would_print_the_warning_is_named_by_the_next() {
    // Mode static: ranks 0 and 1, the fastest, are idle from 1.5 s, so
    // rank 0 prints the stall warnings. Stopped at 2.5 s, it holds up the
    // job's end (7.5 s without it): rank 1 names it.
    static_stall_named(0, Duration::from_millis(2500), 1);
}

#[test]
fn a_stopped_rank_idle_at_the_last_wave_is_named() {
    // Mode static: rank 2 is idle from 2.1 s, neither busy nor a printer
    // (ranks 0 and 1, idle from 1.5 s, print). Stopped at 3 s, it holds
    // up the job's end: rank 0 names it.
    static_stall_named(2, Duration::from_millis(3000), 0);
}

/// speeds8 in mode static with `stopped` stopped from `at` to 10 s: every
/// id once, after 9 s at least, and `printer` names `stopped` alone.
fn static_stall_named(stopped: usize, at: Duration, printer: usize) {
    let env = [("SOSLB_WAIT_WARNING", "1.5")];
    let job = emulate_in("static", 8, "speeds8", &[], &env, |signals| {
        stop_rank(signals, stopped, at, Duration::from_secs(10) - at);
    });
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    let (by, of) = (
        format!("rank {printer}: waited"),
        format!("rank(s) {stopped}, which"),
    );
    let named = (job.stderr.lines()).any(|l| l.contains(&by) && l.contains(&of));
    assert!(
        named,
        "rank {printer} did not name rank {stopped} alone:\n{job}"
    );
    assert!(
        job.seconds > 9.0,
        "the job did not wait for rank {stopped}:\n{job}"
    );
}

#[test]
fn a_rank_stopped_after_it_said_it_waits_is_named() {
    // Rank 3 stopped from 0.8 to 5.8 s: the others wait for it and say
    // so. Rank 2, which has said it waits, is stopped from 2.8 to 10 s:
    // once rank 3 is back, the ranks name rank 2, not heard from since.
    let env = [("SOSLB_WAIT_WARNING", "1.5")];
    let job = emulate_with(8, "speeds8", &[], &env, |signals| {
        let (three, two) = (pid_of(signals, 3), pid_of(signals, 2));
        std::thread::sleep(Duration::from_millis(800));
        signal(three, libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs(2));
        signal(two, libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs(3));
        signal(three, libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(4200));
        signal(two, libc::SIGCONT);
    });
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    let warnings: Vec<&str> = (job.stderr.lines())
        .filter(|l| l.contains("waited"))
        .collect();
    println!("{}", warnings.join("\n"));
    let named = warnings.iter().any(|l| l.contains("rank(s) 2, which"));
    assert!(named, "no warning named rank 2 alone:\n{job}");
    assert!(job.seconds > 9.0, "the job did not wait for rank 2:\n{job}");
}

#[test]
fn a_stop_asked_by_one_rank_ends_every_rank_with_the_realisations_done() {
    let job = emulate(8, "speeds8", &["--stop", "2:1.0"], &[]);
    assert!(job.ok, "{job}");
    assert_eq!(job.value("duplicates"), 0.0, "{job}");
    let (missing, count) = (job.value("missing"), job.value("count"));
    assert!(missing > 0.0, "the stop came too late to matter:\n{job}");
    // The statistics cover exactly the realisations computed.
    assert_eq!(count + missing, 1200.0, "{job}");
    assert!(job.value("makespan_s") < 2.0, "{job}");
}

/// Host transfers on their way when the job ends early (grid64s-long with
/// `large_job: 64`: host 1 slows at 2 s and sends its excess to other
/// hosts): a stop at 6 s ends every rank cleanly, the messages still on
/// their way are received at finalize and not computed; a rank of host 1
/// leaving at 6 s is an error on every rank, and nothing hangs. The first
/// transfer leaves at 2.6 to 4.8 s (MPICH's waves are the slower, with two
/// jobs on two cores); the job would end at about 10 s.
#[test]
fn transfers_under_way_end_cleanly_after_a_stop_and_a_failure() {
    let env = [("SOSLB_LARGE_JOB", "64")];
    let job = emulate(64, "grid64s-long", &["--stop", "20:6"], &env);
    assert!(job.ok, "{job}");
    assert_eq!(job.value("duplicates"), 0.0, "{job}");
    let (missing, count) = (job.value("missing"), job.value("count"));
    assert!(missing > 0.0, "the stop came too late to matter:\n{job}");
    assert_eq!(count + missing, 24000.0, "{job}");
    let sent = job.log_times("job.0", " transfer-sent ");
    assert!(
        sent.iter().any(|&t| t < 6.0),
        "no transfer before the stop:\n{job}"
    );
    assert!(
        !job.log_times("job.0", " transfer-received ").is_empty(),
        "no transfer received:\n{job}"
    );
    let job = emulate(64, "grid64s-long", &["--leave", "20:6"], &env);
    job.assert_every_rank_failed_with(64, 8, "rank 20 failed: soslb_finalize was called");
    println!(
        "liveness: rank 20 left while transfers were under way: every rank had its error \
         {:.3} s later",
        job.seconds_to_verdict("job.0")
    );
}

#[test]
fn three_loops_in_one_program_under_one_batch_job_id() {
    let env = [("SLURM_JOB_ID", "4242"), ("SLURM_STEP_ID", "0")];
    let job = emulate(8, "speeds8", &["--loops", "3"], &env);
    assert!(job.ok, "{job}");
    let results: Vec<&str> = job
        .stdout
        .lines()
        .filter(|l| l.starts_with("result:"))
        .collect();
    assert_eq!(results.len(), 3, "{job}");
    for r in results {
        assert!(r.contains("missing=0 duplicates=0"), "{r}");
        assert_eq!(field(r, "count"), Some("1200"), "{r}");
    }
    for n in 0..3 {
        let run = job.dir.join(format!("signals/4242.0.{n}"));
        assert!(run.join("log").is_dir(), "no logs in {}", run.display());
        assert!(
            !run.join("sos").exists(),
            "signal files left in {}",
            run.display()
        );
    }
}

/// Two jobs of one id, each started in its own working directory with the
/// default relative signal directory, run side by side: their node-local
/// host boards are two (they were one, named after the relative path, and
/// the second job failed with "the host's board already exists").
#[test]
fn two_jobs_of_one_id_in_two_directories_run_side_by_side() {
    let dirs = [temp_dir("side-a"), temp_dir("side-b")];
    let path = scenario("speeds8");
    let env = [("SOSLB_JOB_ID", "job"), ("SOSLB_WARMUP", "0.5")];
    let children: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let mut cmd = mpirun(
                8,
                &example("emulate"),
                &[path.to_str().unwrap(), "full"],
                dir,
                &env,
            );
            cmd.current_dir(dir)
                .env_remove("SOSLB_SIGNAL_DIR")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("mpirun starts")
        })
        .collect();
    for (child, dir) in children.into_iter().zip(&dirs) {
        let job = Job::of(
            child.wait_with_output().expect("mpirun ends"),
            dir.clone(),
            0.0,
        );
        assert!(job.ok, "{job}");
        assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
        assert_eq!(job.value("count"), 1200.0);
        assert!(dir.join("soslb-signals/job.0/log").is_dir(), "{job}");
    }
}

/// A panic inside rank 3's `next` (emulated, as a bug in the library would
/// be) is its failure: every rank reports it, soon, and none is left waiting.
#[test]
fn a_panic_inside_next_is_an_error_on_every_rank() {
    let job = emulate(
        8,
        "speeds8",
        &[],
        &[("SOSLB_EMULATE", "(panic_at: (3, 1.5))")],
    );
    let text = "rank 3 failed: internal error (please report): soslb_next panicked: the emulated";
    job.assert_every_rank_failed_with(8, 9, text);
    let latency = job.seconds_to_verdict("job.0");
    assert!(latency < 5.0, "{latency} s to the verdict:\n{job}");
}

#[test]
fn one_rank_computes_every_id_once() {
    let job = emulate(1, "speeds8", &[], &[]);
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    assert_eq!(job.value("count"), 1200.0);
}

#[test]
fn observable_counts_that_differ_are_an_error_on_every_rank() {
    let job = emulate(8, "speeds8", &["--observables", "4:3"], &[]);
    job.assert_every_rank_failed_with(8, 1, "rank 4 added 3");
}

/// A damage done to a run directory: the path of the file it damaged.
type Fault = fn(&Path) -> PathBuf;

/// heal8 with every SOS on the shared board, its index or rank 7's SOS
/// file damaged by `fault` once the index lists rank 7's SOS: the job's
/// makespan and the lines of stderr that name the file.
fn heal8(fault: Option<Fault>) -> (f64, usize) {
    let env = [("SOSLB_HOST_BOARD", "false")];
    let mut named = None;
    let job = emulate_with(8, "heal8", &[], &env, |signals| {
        let Some(fault) = fault else { return };
        let index = signals.join("job.0/open.ron");
        wait_for("rank 7's SOS in the index", || {
            std::fs::read_to_string(&index)
                .unwrap_or_default()
                .contains("rank:7,")
        });
        named = Some(fault(&signals.join("job.0")));
    });
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    let lines = named.map_or(0, |path| {
        let path = path.display().to_string();
        job.stderr.lines().filter(|l| l.contains(&path)).count()
    });
    // The 7 fast ranks, idle once their work is done, stay far below one
    // core while they wait for the slow one.
    let cpu: f64 = (job.stdout.lines())
        .filter(|l| l.starts_with("rank: ") && !l.starts_with("rank: 7 "))
        .filter_map(|l| field(l, "cpu_run_s")?.parse::<f64>().ok())
        .sum();
    let makespan = job.value("makespan_s");
    assert!(
        cpu < 0.25 * makespan,
        "{cpu} s of CPU in {makespan} s:\n{job}"
    );
    (makespan, lines)
}

/// The index heals (issue 45): garbage written into `open.ron`, an emptied
/// `open.ron`, or an SOS file replaced by a directory cost at most 2 s of
/// makespan against the undamaged run, and each is named on stderr by a
/// warning or a few (rate-limited: one per rank at most).
#[test]
fn a_damaged_index_or_sos_file_heals_within_two_seconds() {
    let (undamaged, _) = heal8(None);
    let faults: [(&str, Fault); 3] = [
        ("garbage in the index", |job| {
            let p = job.join("open.ron");
            std::fs::write(&p, "garbage\u{0}\u{ff}").unwrap();
            p
        }),
        ("an emptied index", |job| {
            let p = job.join("open.ron");
            std::fs::write(&p, "").unwrap();
            p
        }),
        ("an SOS file replaced by a directory", |job| {
            let p = job.join("sos/7.ron");
            std::fs::remove_file(&p).unwrap();
            std::fs::create_dir(&p).unwrap();
            p
        }),
    ];
    for (what, fault) in faults {
        let (makespan, lines) = heal8(Some(fault));
        println!(
            "liveness: {what}: makespan {makespan:.2} s, undamaged {undamaged:.2} s, {lines} lines name it"
        );
        assert!(
            makespan <= undamaged + 2.0,
            "{what}: {makespan:.2} s against {undamaged:.2} s"
        );
        assert!(
            (1..=8).contains(&lines),
            "{what}: {lines} lines name the file"
        );
    }
}

/// The run directories (`soslb-*`) in the node-local temporary directory `tmp`.
fn node_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("soslb-")
        })
        .collect()
}

#[test]
fn the_node_local_files_of_a_killed_job_are_swept_by_the_next_job_on_the_host() {
    let tmp = temp_dir("tmp");
    let signals = temp_dir("killed");
    let mut child = mpirun(
        8,
        &example("emulate"),
        &[scenario("speeds8").to_str().unwrap(), "full"],
        &signals,
        &[
            ("TMPDIR", tmp.to_str().unwrap()),
            ("SOSLB_JOB_ID", "killed"),
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("mpirun starts");
    // SIGKILL, as at a walltime, once its ranks hold the host's board.
    wait_for("the killed job's host board", || {
        node_dirs(&tmp).iter().any(|d| {
            std::fs::read_dir(d).is_ok_and(|mut e| {
                e.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("board-")))
            })
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    common::kill_tree(&mut child);
    let left = node_dirs(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].join(soslb::board::node::LOCK).is_file());
    // Untouched since long enough ago: the next job on the host sweeps it,
    // and leaves nothing of its own.
    let ago = soslb::board::node::SWEEP_AGE + Duration::from_secs(60);
    std::fs::File::open(&left[0])
        .unwrap()
        .set_modified(std::time::SystemTime::now() - ago)
        .unwrap();
    let job = emulate(
        8,
        "speeds8",
        &[],
        &[("TMPDIR", tmp.to_str().unwrap()), ("SOSLB_JOB_ID", "next")],
    );
    assert!(job.ok, "{job}");
    assert!(job.result().contains("missing=0 duplicates=0"), "{job}");
    assert_eq!(node_dirs(&tmp), Vec::<PathBuf>::new(), "{job}");
    let logs = job.dir.join("signals/next.0/log");
    let swept = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .any(|log| log.contains(&format!("swept {}", left[0].display())));
    assert!(swept, "no log line of the sweep in {}", logs.display());
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&signals);
}
