//! Shared by the integration tests that run MPI jobs.
#![allow(dead_code)]

pub mod readme;

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
        "{} is not built: run cargo build --release --features emulate --examples \
         (scripts/test.sh does)",
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

/// The MPI family of the library this test binary links.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mpi {
    /// Open MPI: `mpirun`, `mpif90`.
    OpenMpi,
    /// MPICH and its ABI (Intel MPI, MVAPICH, Cray MPICH): `mpiexec.mpich`
    /// (Hydra), `mpif90.mpich`.
    Mpich,
}

/// The MPI this test binary was built against, as the library says
/// (`MPI_Get_library_version`, callable before `MPI_Init`), so that a test
/// never runs a build of one MPI under the launcher of the other.
pub fn mpi() -> Mpi {
    static MPI: std::sync::OnceLock<Mpi> = std::sync::OnceLock::new();
    *MPI.get_or_init(|| {
        let v = mpi::environment::library_version().unwrap_or_default();
        if v.contains("Open MPI") {
            Mpi::OpenMpi
        } else {
            Mpi::Mpich
        }
    })
}

/// `$NAME` when set and not empty, else `default`.
fn tool(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// The launcher of this build's MPI: `$MPIEXEC` (set by scripts/setup.sh),
/// else `mpirun` for Open MPI, `mpiexec.mpich` for MPICH.
pub fn launcher() -> String {
    match mpi() {
        Mpi::OpenMpi => tool("MPIEXEC", "mpirun"),
        Mpi::Mpich => tool("MPIEXEC", "mpiexec.mpich"),
    }
}

/// The Fortran compiler wrapper of this build's MPI: `$MPIFC`, else
/// `mpif90` for Open MPI, `mpif90.mpich` for MPICH.
pub fn mpifc() -> String {
    match mpi() {
        Mpi::OpenMpi => tool("MPIFC", "mpif90"),
        Mpi::Mpich => tool("MPIFC", "mpif90.mpich"),
    }
}

/// `mpirun -np N program args` (MPICH: `mpiexec.mpich -n N`), as root if
/// need be, oversubscribed, with a time limit of 240 s, the given
/// environment and SOSLB_SIGNAL_DIR in `dir`.
pub fn mpirun(
    np: usize,
    program: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
) -> Command {
    let mut c = Command::new(launcher());
    match mpi() {
        Mpi::OpenMpi => c.args(["--oversubscribe", "--timeout", "240", "-np"]),
        // Hydra runs as root and oversubscribes without being told; its
        // time limit is a variable.
        Mpi::Mpich => c.env("MPIEXEC_TIMEOUT", "240").arg("-n"),
    };
    c.arg(np.to_string())
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
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{c:?} does not run ({e}): is {:?} installed?", mpi()));
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

/// The processes of the tree rooted at `pid` (from /proc), root first.
fn process_tree(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_else(|_| Vec::new())
        .into_iter()
        .filter_map(|p: i32| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold blanks, so after the last ')'.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut tree = vec![pid];
    let mut k = 0;
    while k < tree.len() {
        let parent = tree[k];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        k += 1;
    }
    tree
}

/// SIGKILL `child` (mpirun) and every process under it (Open MPI puts the
/// ranks in process groups of their own; MPICH's Hydra runs them under a
/// proxy), and check that all are gone.
pub fn kill_tree(child: &mut std::process::Child) {
    let tree = process_tree(child.id() as i32);
    for &p in &tree {
        // SAFETY: sends a signal to processes this test started.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    let status = child.wait().expect("mpirun ends");
    assert!(!status.success(), "mpirun was not killed: {status}");
    // The ranks are gone too (reaped by init once orphaned).
    std::thread::sleep(std::time::Duration::from_millis(200));
    for &p in &tree[1..] {
        let alive = std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        });
        assert!(!alive, "process {p} of the killed job still runs");
    }
}

/// The Python of Debian's `python3-fusepy`, which `tests/fuse/stale_view.py`
/// needs.
pub const PYTHON: &str = "/usr/bin/python3";

/// The warnings in `stderr` of reads that met a file replaced under them:
/// `ESTALE`, `ENOENT` after the open, or the size of the file the path held
/// before (a body cut short, or bytes after it). soslb reads such a file
/// again; a warning means it gave up.
pub fn changed_under_the_reader(stderr: &str) -> Vec<&str> {
    const SIGNS: [&str; 4] = [
        "(os error 116)",
        "(os error 2)",
        "the header says",
        "that are not padding after the body",
    ];
    (stderr.lines())
        .filter(|l| l.contains("warning") && SIGNS.iter().any(|w| l.contains(w)))
        .collect()
}

/// Why [`PYTHON`] cannot import fusepy, if it cannot.
pub fn fusepy_unavailable() -> Option<String> {
    let probe = Command::new(PYTHON).args(["-c", "import fusepy"]).output();
    match probe {
        Ok(o) if o.status.success() => None,
        _ => Some(format!(
            "{PYTHON} cannot import fusepy (apt-get install python3-fusepy)"
        )),
    }
}

/// Why FUSE views cannot be made here, if they cannot: not root, no
/// `/dev/fuse`, or one of `tools` missing (`hint` says what installs it).
pub fn fuse_unavailable(tools: &[&str], hint: &str) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: mount namespaces and bind mounts need root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    let missing = tools.iter().find(|tool| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    missing.map(|tool| format!("`{tool}` is not installed ({hint})"))
}
