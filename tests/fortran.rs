//! The Fortran interface end to end: programs built with `mpif90` (or
//! MPICH's `mpif90.mpich`, see [`common::mpifc`]) against the
//! static library of this test run (`fortran/soslb.f90` + `libsoslb.a`), run
//! under mpirun. The demo `examples/slab.f90`, and the test programs in
//! `tests/fortran/`: `ids.f90` (every id computed exactly once),
//! `errors.f90` (bad input gives its code and a helpful message) and
//! `f08.f90` (the `mpi_f08` module's handles, a communicator of its own).

mod common;

use soslb::error::code;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Build directories, removed when the test binary exits.
static BUILD_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_build_dirs() {
    if let Ok(dirs) = BUILD_DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `mpif90 -O2 -J dir -o dir/name fortran/soslb.f90 source libsoslb.a -lpthread -ldl -lm`.
fn build(name: &str, source: &str) -> PathBuf {
    let lib = common::target_dir().join("libsoslb.a");
    assert!(
        lib.is_file(),
        "{} does not exist: the Fortran tests link the static library of this test run; \
         build it with `cargo build --release --all-targets --features emulate` \
         (scripts/test.sh does)",
        lib.display()
    );
    let dir = common::temp_dir(&format!("fortran-build-{name}"));
    {
        let mut dirs = BUILD_DIRS.lock().unwrap();
        if dirs.is_empty() {
            // SAFETY: registers a plain function with no arguments.
            unsafe { libc::atexit(remove_build_dirs) };
        }
        dirs.push(dir.clone());
    }
    let exe = dir.join(name);
    let mpifc = common::mpifc();
    let out = Command::new(&mpifc)
        .arg("-O2")
        .arg("-J")
        .arg(&dir)
        .arg("-o")
        .arg(&exe)
        .args(["fortran/soslb.f90", source])
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm"])
        .current_dir(common::root())
        .output()
        .unwrap_or_else(|e| panic!("{mpifc} does not run ({e}): see scripts/setup.sh"));
    assert!(
        out.status.success(),
        "{mpifc} could not build {source}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// A program, built once per test binary: `slab`, `ids`, `errors` or `f08`.
fn program(name: &str) -> &'static Path {
    static SLAB: OnceLock<PathBuf> = OnceLock::new();
    static IDS: OnceLock<PathBuf> = OnceLock::new();
    static ERRORS: OnceLock<PathBuf> = OnceLock::new();
    static F08: OnceLock<PathBuf> = OnceLock::new();
    let (cell, source) = match name {
        "slab" => (&SLAB, "examples/slab.f90"),
        "ids" => (&IDS, "tests/fortran/ids.f90"),
        "errors" => (&ERRORS, "tests/fortran/errors.f90"),
        "f08" => (&F08, "tests/fortran/f08.f90"),
        _ => unreachable!("no program {name}"),
    };
    cell.get_or_init(|| build(name, source))
}

/// A test's directory (signal files, configs), removed unless the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(common::temp_dir(&format!("fortran-{name}")))
    }

    /// Write a file into the directory; its path as text.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write a config file");
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One mpirun: its exit status and output, and a description for assertions.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    what: String,
}

impl Run {
    /// The one stdout line that starts with `prefix`.
    fn line(&self, prefix: &str) -> &str {
        let mut lines = self.stdout.lines().filter(|l| l.starts_with(prefix));
        let line = lines.next();
        assert!(
            line.is_some() && lines.next().is_none(),
            "not exactly one line `{prefix}...` in {self}"
        );
        line.unwrap()
    }

    /// The integer value of `key=` in the line starting with `prefix`.
    fn value(&self, prefix: &str, key: &str) -> i64 {
        let line = self.line(prefix);
        common::field(line, key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no integer {key}= in `{line}` of {self}"))
    }

    /// The summary's `computed` column sums to `total`.
    fn assert_computed(&self, ranks: usize, total: u64) {
        let computed = self.summary_column("computed", ranks);
        assert_eq!(
            computed.iter().sum::<u64>(),
            total,
            "computed column: {self}"
        );
    }

    /// A column of the per-rank summary table (`summary: true`), one entry
    /// per rank row, checking that the rows are ranks 0..ranks-1.
    fn summary_column(&self, column: &str, ranks: usize) -> Vec<u64> {
        let title = self.line("soslb summary:");
        assert!(
            title.contains(&format!(" {ranks} ranks,")),
            "{title}: not {ranks} ranks in {self}"
        );
        let mut lines = self
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("soslb summary:"))
            .skip(1);
        let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
        let col = header.iter().position(|h| *h == column);
        let col = col.unwrap_or_else(|| panic!("no column {column} in the summary of {self}"));
        let rows: Vec<Vec<&str>> = lines
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .take_while(|w| w.len() == header.len() && w[0].parse::<usize>().is_ok())
            .collect();
        let numbers: Vec<usize> = rows.iter().map(|w| w[0].parse().unwrap()).collect();
        assert_eq!(
            numbers,
            (0..ranks).collect::<Vec<_>>(),
            "the summary's rank rows in {self}"
        );
        rows.iter()
            .map(|w| {
                w[col]
                    .parse()
                    .unwrap_or_else(|_| panic!("{column} `{}` in {self}", w[col]))
            })
            .collect()
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout\n{}--- stderr\n{}",
            self.what, self.stdout, self.stderr
        )
    }
}

/// `mpirun -np np <program> args` with SOSLB_SIGNAL_DIR in `dir` and `env`.
fn run(np: usize, name: &str, args: &[&str], dir: &Scratch, env: &[(&str, &str)]) -> Run {
    let (out, stdout, stderr) = common::run(common::mpirun(np, program(name), args, &dir.0, env));
    let what = format!(
        "mpirun -np {np} {name} {} with {env:?}: {}",
        args.join(" "),
        out.status
    );
    Run {
        ok: out.status.success(),
        stdout,
        stderr,
        what,
    }
}

/// Like [`run`], and the run must succeed.
fn run_ok(np: usize, name: &str, args: &[&str], dir: &Scratch, env: &[(&str, &str)]) -> Run {
    let r = run(np, name, args, dir, env);
    assert!(r.ok, "failed: {r}");
    r
}

/// The number after `key` (and blanks) in `line`.
fn number(line: &str, key: &str) -> f64 {
    let v = line
        .split(key)
        .nth(1)
        .and_then(|s| s.split_whitespace().next());
    v.and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {key} in `{line}`"))
}

/// The statistics lines of slab; the `stats:` line must be the last.
fn statistics(r: &Run) -> String {
    let last = r.stdout.lines().last().unwrap_or("");
    assert_eq!(last, r.line("stats: "), "not the last line: {r}");
    format!(
        "{}\n{}\n{last}",
        r.line("transmission: "),
        r.line("reflection: ")
    )
}

#[test]
fn slab_example_builds_and_runs_with_summary() {
    let dir = Scratch::new("slab");
    let r = run_ok(6, "slab", &["6000", "examples/slab.ron"], &dir, &[]);
    r.assert_computed(6, 6000);
    for stat in ["transmission: ", "reflection: "] {
        let (mean, err) = (
            number(r.line(stat), "mean="),
            number(r.line(stat), "std_error="),
        );
        assert!(
            mean > 0.0 && mean < 1.0 && err > 0.0 && err < 0.01,
            "{stat} in {r}"
        );
    }
}

#[test]
fn slab_statistics_are_identical_whatever_the_balancing_did() {
    let dir = Scratch::new("slab-stats");
    let config = dir.file(
        "stats.ron",
        "(summary: true, emulate: (speed: [1.0, 0.25, 1.0, 1.0, 0.5]))",
    );
    let mut first: Option<(String, String)> = None;
    for np in [1, 3, 4] {
        for mode in ["Static", "Warmup", "Full"] {
            let env = [("SOSLB_MODE", mode), ("SOSLB_WARMUP", "0.2")];
            let r = run_ok(np, "slab", &["2000", &config], &dir, &env);
            r.assert_computed(np, 2000);
            assert_eq!(r.value("stats: ", "realisations"), 2000, "{r}");
            let stats = statistics(&r);
            match &first {
                None => first = Some((r.what.clone(), stats)),
                Some((what, expected)) => assert_eq!(
                    &stats, expected,
                    "the statistics differ between\n{what}\nand {r}"
                ),
            }
        }
    }
}

#[test]
fn every_id_is_computed_once_from_fortran() {
    let dir = Scratch::new("ids");
    let config = dir.file(
        "ids.ron",
        "(mode: Full, warmup: 0.2, speed_window: 0.5, summary: true,\n emulate: (speed: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2]))",
    );
    // Ranks 4 to 7 slow down four times 0.5 s after init, past the warm-up:
    // the SOS/AID help has to move ids at run time. (With the default
    // speed_window of 2 s, longer than this run, the slowdown is seen too
    // late for an SOS. With 8,000 ids the run lasted 1.4 s, and under the
    // parallel MPI tests of a CI run the slowed ranks' SOS, posted at
    // 0.96 s, went back to their owners at 1.26 s untaken.)
    let total = 24_000;
    let r = run_ok(8, "ids", &[&total.to_string(), &config, "0.5"], &dir, &[]);
    let keys = [
        "total",
        "computed",
        "missing",
        "duplicates",
        "min_id",
        "max_id",
    ];
    let got: Vec<i64> = keys.iter().map(|k| r.value("ids: ", k)).collect();
    assert_eq!(got, [total, total, 0, 0, 1, total], "{keys:?} in {r}");
    let sum = |column| r.summary_column(column, 8).iter().sum::<u64>();
    r.assert_computed(8, total as u64);
    assert_eq!(sum("taken"), sum("given"), "ids taken and given in {r}");
    assert!(
        sum("taken") > 0,
        "no rank helped the slowed-down ranks 4 to 7: {r}"
    );
}

/// Run tests/fortran/errors.f90 for `case` on `np` ranks: every rank must
/// return the same code; rank 0's code, the module's name of it and the message.
fn error_case(
    case: &str,
    np: usize,
    config: Option<&str>,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let dir = Scratch::new(case);
    let mut args = vec![case];
    args.extend(config);
    let r = run_ok(np, "errors", &args, &dir, env);
    let line = r.line(&format!("case={case} ierr="));
    let message = line.split_once(" message=").map(|(_, m)| m.to_string());
    let message = message.unwrap_or_else(|| panic!("no message= in {r}"));
    assert_eq!(
        r.value("ranks_with_code=", "ranks_with_code"),
        np as i64,
        "not every rank returned rank 0's code: {r}"
    );
    let name = common::field(r.line("ranks_with_code="), "code_name")
        .unwrap_or("")
        .to_string();
    (r.value("case=", "ierr") as i32, name, message)
}

/// The code is `expected`: its number in src/error.rs and the name of the
/// module's parameter; the message contains every one of `words`.
fn assert_error(got: (i32, String, String), expected: (i32, &str), words: &[&str]) {
    let (code, name, message) = got;
    assert_eq!(
        (code, name.as_str()),
        expected,
        "code of the error `{message}`"
    );
    for w in words {
        assert!(message.contains(w), "the message `{message}` lacks `{w}`");
    }
}

const ARGUMENT: (i32, &str) = (code::INVALID_ARGUMENT, "SOSLB_ERR_ARGUMENT");
const CONFIG: (i32, &str) = (code::CONFIG, "SOSLB_ERR_CONFIG");

#[test]
fn error_total_zero() {
    assert_error(
        error_case("total0", 2, None, &[]),
        ARGUMENT,
        &["`total`", "at least 1"],
    );
}

#[test]
fn error_total_negative() {
    assert_error(
        error_case("negative", 2, None, &[]),
        ARGUMENT,
        &["`total`", "-5"],
    );
}

#[test]
fn error_unknown_config_field() {
    let dir = Scratch::new("unknown-field-config");
    let path = dir.file("typo.ron", "(mode: Full, chek_interval: 0.5)");
    let line = format!("{path}:1:");
    assert_error(
        error_case("unknown-field", 2, Some(&path), &[]),
        CONFIG,
        &["chek_interval", &line],
    );
}

#[test]
fn error_unreadable_config() {
    let dir = Scratch::new("unreadable-config");
    let path = dir.0.join("no-such-dir/soslb.ron").display().to_string();
    assert_error(
        error_case("unreadable", 2, Some(&path), &[]),
        CONFIG,
        &[&path, "cannot read"],
    );
}

#[test]
fn error_bad_config_value() {
    let dir = Scratch::new("bad-value-config");
    let path = dir.file("bad.ron", "(check_interval: 0.01)");
    assert_error(
        error_case("bad-value", 2, Some(&path), &[]),
        CONFIG,
        &["check_interval", &path, "0.1"],
    );
}

#[test]
fn mpi_f08_users_pass_comm_mpi_val_of_a_communicator_of_their_own() {
    // Open MPI's Fortran handles are table indices (MPI_COMM_NULL is 2),
    // MPICH's are the C handles themselves (0x04000000): both convert.
    let dir = Scratch::new("f08");
    let r = run_ok(5, "f08", &["split"], &dir, &[]);
    let mut halves: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("f08: half="))
        .collect();
    halves.sort();
    assert_eq!(
        halves,
        [
            "f08: half=0 ranks=2 total=300 computed=300 duplicates=0",
            "f08: half=1 ranks=3 total=300 computed=300 duplicates=0"
        ],
        "{r}"
    );
    // MPI_COMM_NULL, and a number that is no communicator's handle (Open
    // MPI's f2c gives a null pointer for it, MPICH's the number itself).
    for case in ["null", "bad"] {
        let r = run_ok(2, "f08", &[case], &dir, &[]);
        let line = r.line(&format!("f08: case={case} "));
        assert!(
            line.contains("ierr=1 ") && line.contains("not a communicator"),
            "{line} in {r}"
        );
    }
}

#[test]
fn one_rank_is_a_pass_through() {
    let dir = Scratch::new("one-rank");
    let config = dir.file("one.ron", "(summary: true)");
    let r = run_ok(1, "ids", &["500", &config], &dir, &[]);
    let keys = ["total", "computed", "missing", "duplicates"];
    let got: Vec<i64> = keys.iter().map(|k| r.value("ids: ", k)).collect();
    assert_eq!(got, [500, 500, 0, 0], "{keys:?} in {r}");
    r.assert_computed(1, 500);
    // The same statistics as on several ranks: see
    // slab_statistics_are_identical_whatever_the_balancing_did.
}

#[test]
fn error_next_after_finalize() {
    assert_error(
        error_case("after-finalize", 2, None, &[]),
        ARGUMENT,
        &["soslb_init", "soslb_finalize"],
    );
}

#[test]
fn a_second_finalize_is_an_error_that_leaves_the_arguments_untouched() {
    assert_error(
        error_case("finalize-twice", 2, None, &[]),
        ARGUMENT,
        &["soslb_finalize was called twice"],
    );
}

#[test]
fn finalize_with_arrays_of_different_sizes_on_one_rank_leaves_no_rank_waiting() {
    // Rank 0 alone passes `mean` of 1 and `std_error` of 2: its error, its
    // arguments untouched; the other two finalise with the full count.
    let dir = Scratch::new("finalize-sizes");
    let r = run_ok(3, "errors", &["finalize-sizes"], &dir, &[]);
    let line = r.line("case=finalize-sizes ierr=");
    assert_eq!(r.value("case=", "ierr") as i32, ARGUMENT.0, "{r}");
    assert!(line.contains("different sizes (1, 0 and 2"), "{r}");
    assert_eq!(r.value("ranks_with_code=", "ranks_with_code"), 1, "{r}");
    assert_eq!(r.value("others_ok=", "others_ok"), 2, "{r}");
}

#[test]
fn soslb_stop_on_one_rank_ends_the_loop_on_every_rank() {
    let (code, name, message) = error_case("stop", 3, None, &[]);
    assert_eq!((code, name.as_str()), (0, "SOSLB_OK"), "{message}");
}

#[test]
fn more_adds_than_realisations_handed_out_are_an_error_on_every_rank() {
    assert_error(
        error_case("add-twice", 2, None, &[]),
        (code::STATE, "SOSLB_ERR_STATE"),
        &[
            "rank 1 failed",
            "soslb_add was called for more realisations",
        ],
    );
}

#[test]
fn the_error_message_is_empty_after_a_successful_call() {
    let (code, name, message) = error_case("fresh-message", 2, None, &[]);
    assert_eq!((code, name.as_str(), message.as_str()), (0, "SOSLB_OK", ""));
}

#[test]
fn error_environment_variable_typo() {
    let env = [("SOSLB_CHECK_INTERVALL", "1")];
    assert_error(
        error_case("env-typo", 2, None, &env),
        CONFIG,
        &["SOSLB_CHECK_INTERVALL", "no field"],
    );
}

#[test]
fn the_module_compiles_with_eight_byte_default_integers() {
    // Monte-Carlo codes built with -fdefault-integer-8 build the module so
    // too: its two soslb_init must still differ.
    let dir = common::temp_dir("fortran-i8");
    let out = Command::new(common::mpifc())
        .args(["-c", "-fdefault-integer-8", "-J"])
        .arg(&dir)
        .arg("-o")
        .arg(dir.join("soslb.o"))
        .arg("fortran/soslb.f90")
        .current_dir(common::root())
        .output()
        .expect("the Fortran compiler runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn error_without_ierr_stops_the_program() {
    let dir = Scratch::new("absent-ierr");
    let r = run(2, "errors", &["absent-ierr"], &dir, &[]);
    assert!(!r.ok, "the program should stop with a non-zero status: {r}");
    assert!(
        !r.stdout.contains("case="),
        "the program went on after the error: {r}"
    );
    let (_, _, message) = error_case("total0", 2, None, &[]);
    let expected = format!("soslb: {message}");
    assert!(
        r.stderr.contains(&expected),
        "stderr lacks `{expected}`: {r}"
    );
}

/// Start slab under mpirun, wait until rank 0 of the job's run `run` has
/// journalled twice (both slots written), then SIGKILL mpirun and every
/// process under it (Open MPI puts the ranks in process groups of their own).
fn run_and_kill(np: usize, args: &[&str], dir: &Scratch, env: &[(&str, &str)], slots: &Path) {
    let mut child = common::mpirun(np, program("slab"), args, &dir.0, env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mpirun starts");
    let t0 = std::time::Instant::now();
    while !(slots.join("0.a.ron").is_file() && slots.join("0.b.ron").is_file()) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("slab ended ({status}) before rank 0 journalled twice in {slots:?}");
        }
        assert!(t0.elapsed().as_secs() < 60, "no journal in {slots:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    common::kill_tree(&mut child);
}

/// `(journalled, computed in this run)` from the summary's journal line.
fn journal_line(r: &Run) -> (u64, u64) {
    let line = r.line("  journal: ");
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 2, "{line} in {r}");
    (numbers[0], numbers[1])
}

#[test]
fn a_killed_job_resumed_twice_gives_the_bits_of_an_uninterrupted_one() {
    let dir = Scratch::new("resume-kill");
    let total = "4000";
    let slow = "summary: true, warmup: 0.3, check_interval: 0.1, \
                emulate: (speed: [0.1, 0.1, 0.1, 0.05])";
    let reference = dir.file("reference.ron", &format!("({slow})"));
    let config = dir.file("cut.ron", &format!("({slow}, job_name: \"cut\")"));
    let uninterrupted = run_ok(3, "slab", &[total, &reference], &dir, &[]);
    let job = dir.0.join("signals/cut");
    let t = std::time::Instant::now();
    run_and_kill(4, &[total, &config], &dir, &[], &job.join("0"));
    let resume = [("SOSLB_RESUME", "true")];
    run_and_kill(3, &[total, &config], &dir, &resume, &job.join("1"));
    let resumed = run_ok(2, "slab", &[total, &config], &dir, &resume);
    let (journalled, computed) = journal_line(&resumed);
    println!(
        "resume: killed on 4 ranks, killed again on 3, resumed on 2 ranks: {journalled} \
         realisations from the journals, {computed} computed in the last run, {:.1} s in all",
        t.elapsed().as_secs_f64()
    );
    assert!(
        journalled > 0 && computed > 0,
        "the kills did not come mid-way: {resumed}"
    );
    // Each id once: the last run computed exactly the ids the journals lack.
    assert_eq!(journalled + computed, 4000, "{resumed}");
    resumed.assert_computed(2, computed);
    assert_eq!(resumed.value("stats: ", "realisations"), 4000, "{resumed}");
    assert_eq!(
        statistics(&resumed),
        statistics(&uninterrupted),
        "resumed:\n{resumed}\nuninterrupted:\n{uninterrupted}"
    );
}

#[test]
fn a_resumed_job_may_grow_but_not_shrink_and_a_corrupt_journal_is_named() {
    let dir = Scratch::new("resume-grow");
    let config = dir.file(
        "grow.ron",
        "(summary: true, warmup: 0.2, job_name: \"grow\")",
    );
    let plain = dir.file("plain.ron", "(summary: true, warmup: 0.2)");
    let resume = [("SOSLB_RESUME", "true")];
    run_ok(2, "slab", &["1000", &config], &dir, &[]);
    // A larger total: only the new ids, and the bits of one run of 1500.
    let grown = run_ok(3, "slab", &["1500", &config], &dir, &resume);
    assert_eq!(journal_line(&grown), (1000, 500), "{grown}");
    grown.assert_computed(3, 500);
    let reference = run_ok(2, "slab", &["1500", &plain], &dir, &[]);
    assert_eq!(statistics(&grown), statistics(&reference));
    // A smaller total is an error that names both.
    let r = run(2, "slab", &["1200", &config], &dir, &resume);
    assert!(!r.ok, "{r}");
    for part in ["ierr=1", "1200", "total 1500", "completion.ron"] {
        assert!(r.stderr.contains(part), "{part} in {r}");
    }
    // Without resume, the journal is not silently overwritten.
    let r = run(2, "slab", &["1500", &config], &dir, &[]);
    assert!(!r.ok && r.stderr.contains("resume: true"), "{r}");
    // A corrupt journal: named with its path, nothing computed.
    let slots = dir.0.join("signals/grow/0");
    for slot in ["0.a.ron", "0.b.ron"] {
        let path = slots.join(slot);
        if path.is_file() {
            std::fs::write(&path, "(garbage").expect("spoil a slot");
        }
    }
    let r = run(2, "slab", &["1500", &config], &dir, &resume);
    assert!(!r.ok, "{r}");
    let named = format!("{}/0.", slots.display()); // the slot(s) of rank 0
    for part in [
        "ierr=5",
        "soslb_init",
        named.as_str(),
        "Nothing was computed",
    ] {
        assert!(r.stderr.contains(part), "{part} in {r}");
    }
    assert!(!r.stdout.contains("stats: "), "{r}");
}
