//! Shared by the integration tests that run MPI jobs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// `target/<profile>` of the running test binary (`target/<profile>/deps/<test>`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// A built example of this crate.
pub fn example(name: &str) -> PathBuf {
    let p = target_dir().join("examples").join(name);
    assert!(
        p.is_file(),
        "{} is not built: run cargo build --examples (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The file of a test scenario, `tests/scenarios/<name>.ron`.
pub fn scenario(name: &str) -> std::path::PathBuf {
    root().join("tests/scenarios").join(format!("{name}.ron"))
}

/// A fresh directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "soslb-test-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create a temp dir");
    d
}

/// `mpirun -np N program args`, as root if need be, oversubscribed, with a
/// time limit, the given environment and SOSLB_SIGNAL_DIR in `dir`.
pub fn mpirun(
    np: usize,
    program: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--timeout",
        "240",
        "-np",
        &np.to_string(),
    ])
    .arg(program)
    .args(args)
    .current_dir(root())
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("SOSLB_SIGNAL_DIR", dir.join("signals"));
    // The caller's SOSLB_* settings must not change the tests.
    for (k, _) in
        std::env::vars().filter(|(k, _)| k.starts_with("SOSLB_") && k != "SOSLB_SIGNAL_DIR")
    {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Run and return the output, with stdout and stderr as text.
pub fn run(mut c: Command) -> (Output, String, String) {
    let out = c.output().expect("mpirun runs (is Open MPI installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// The value of `key=` in a line such as the emulator's result line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The job times `t=` of the lines containing `word` in the monitor logs of
/// the directory `logs` (every rank's).
pub fn log_times(logs: &Path, word: &str) -> Vec<f64> {
    let entries = std::fs::read_dir(logs).unwrap_or_else(|e| panic!("{logs:?}: {e}"));
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .flat_map(|text| {
            text.lines()
                .filter(|l| l.contains(word))
                .filter_map(|l| field(l, "t")?.parse().ok())
                .collect::<Vec<f64>>()
        })
        .collect()
}
