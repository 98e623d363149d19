//! The board on a real FUSE file system: two `bindfs` views of one directory,
//! one per half of a 16-rank job (two emulated hosts), as two hosts would
//! mount one NFS export.
//!
//! Each half runs in its own mount namespace (`unshare -m`) where its view is
//! bind-mounted on one common path, so both halves use the same signal
//! directory path while each kernel-side view keeps its own caches. Four
//! settings, what the file systems of clusters look like to a program:
//! locks forwarded to the real file or not (Lustre without `flock`, NFS
//! `nolock`), and clients that keep attributes, names and pages for 30 s
//! (`auto_cache` or `kernel_cache`, `attr_timeout=30,entry_timeout=30`).
//! The claims protocol needs none of the locks and none of the freshness:
//! every id exactly once in every run, and ids cross the views. A fifth
//! setting mounts `fuse/stale_view.py` instead: NFSv3 clients, where a file
//! that the other view replaced reads `ESTALE` while open (the server keeps
//! no open state), and where a read may be cut to the size of the file
//! the path held before (libfuse's path-based views); either is a file
//! changed under the reader, read again without a warning.
//!
//! Needs root, `/dev/fuse`, `bindfs` and `unshare` (and Debian's
//! `python3-fusepy` for the fifth). Where one is missing the
//! test prints `SKIPPED: <why>` and returns; it fails instead under `CI=true`
//! or `FUSE_REQUIRED=1`. `FUSE_RUNS=n` runs each setting n times (default 7).

mod common;

use common::{PYTHON, changed_under_the_reader, example, field, root, scenario, temp_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why FUSE views cannot be made here, if they cannot.
fn unavailable() -> Option<String> {
    let tools = ["bindfs", "unshare", "mount", "umount"];
    if let Some(why) = common::fuse_unavailable(&tools, "apt-get install bindfs") {
        return Some(why);
    }
    let probe = Command::new("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .output();
    match probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`unshare -m` fails: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("`unshare -m` cannot run: {e}")),
    }
}

/// Why `stale_view.py` cannot run here, if it cannot.
fn stale_view_unavailable() -> Option<String> {
    unavailable().or_else(common::fusepy_unavailable)
}

/// Skip visibly: the test passes, but says that it did not run, on the
/// real stderr (libtest captures `eprintln!` of passing tests; nextest shows
/// it with `--success-output immediate`). With `FUSE_REQUIRED=1` a missing
/// FUSE fails the test instead.
macro_rules! require_fuse {
    () => {
        require_fuse!(unavailable)
    };
    ($check:ident) => {
        if let Some(why) = $check() {
            let line = format!("SKIPPED: FUSE test not run: {why}\n");
            let required = std::env::var("FUSE_REQUIRED").is_ok_and(|v| v == "1")
                || std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!required, "CI=true or FUSE_REQUIRED=1, but {line}");
            use std::io::Write;
            let _ = std::io::stderr().write_all(line.as_bytes());
            return;
        }
    };
}

/// A setting of the two views.
#[derive(Clone, Copy, Debug)]
enum Setting {
    Bindfs {
        /// `--enable-lock-forwarding`: the views' locks reach the real file.
        locks: bool,
        /// A client cache: `auto_cache` or `kernel_cache`, with attributes
        /// and names kept 30 s.
        cache: Option<&'static str>,
    },
    /// Views of `stale_view.py`: NFSv3 clients, whose reads of a file
    /// another view replaced fail with `ESTALE`, each read after `rtt`
    /// seconds' round trip.
    Stale { rtt: f64 },
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let (locks, cache) = match *self {
            Setting::Stale { rtt } => return write!(f, "NFSv3 stale handles, {rtt} s round trip"),
            Setting::Bindfs { locks, cache } => (locks, cache),
        };
        let locks = if locks {
            "lock forwarding"
        } else {
            "no lock forwarding"
        };
        match cache {
            Some(c) => write!(f, "{locks}, {c}"),
            None => write!(f, "{locks}"),
        }
    }
}

/// Two views `a` and `b` of `src` (`bindfs`, or `stale_view.py` as
/// children), unmounted on drop (also when the test fails), and the common
/// mount point of the namespaces.
struct Views {
    base: PathBuf,
    src: PathBuf,
    views: [PathBuf; 2],
    common: PathBuf,
    mounted: Vec<PathBuf>,
    daemons: Vec<std::process::Child>,
}

impl Views {
    fn new(name: &str, setting: Setting) -> Views {
        let base = temp_dir(name);
        let mut v = Views {
            src: base.join("src"),
            views: [base.join("a"), base.join("b")],
            common: base.join("common"),
            base,
            mounted: Vec::new(),
            daemons: Vec::new(),
        };
        for d in [&v.src, &v.views[0], &v.views[1], &v.common] {
            std::fs::create_dir_all(d).expect("create a directory for the views");
        }
        for i in 0..2 {
            match setting {
                Setting::Stale { rtt } => v.mount_stale(i, rtt),
                Setting::Bindfs { locks, cache } => v.mount_bindfs(i, locks, cache),
            }
            v.mounted.push(v.views[i].clone());
        }
        v
    }

    fn mount_bindfs(&self, i: usize, locks: bool, cache: Option<&str>) {
        let mut c = Command::new("bindfs");
        c.arg("--multithreaded");
        if locks {
            c.arg("--enable-lock-forwarding");
        }
        if let Some(cache) = cache {
            c.args(["-o", &format!("{cache},attr_timeout=30,entry_timeout=30")]);
        }
        let out = (c.arg(&self.src).arg(&self.views[i]).output()).expect("bindfs runs");
        assert!(
            out.status.success(),
            "bindfs {} {} failed: {}",
            self.src.display(),
            self.views[i].display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Mount view `i` with `stale_view.py`, which counts its `ESTALE` in
    /// [`Views::stale_reads`]'s file.
    fn mount_stale(&mut self, i: usize, rtt: f64) {
        let log = std::fs::File::create(self.base.join(format!("view{i}.log")))
            .expect("create the view's log");
        let child = Command::new(PYTHON)
            .arg(root().join("tests/fuse/stale_view.py"))
            .arg(&self.src)
            .arg(&self.views[i])
            .args(["--rtt", &rtt.to_string(), "--count"])
            .arg(self.base.join("estale"))
            .stderr(log)
            .spawn()
            .expect("stale_view.py starts");
        self.daemons.push(child);
        let view = self.views[i].display().to_string();
        for _ in 0..200 {
            let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            let mut points = mounts.lines().filter_map(|l| l.split(' ').nth(1));
            if points.any(|p| p == view) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("stale_view.py did not mount {view} within 10 s");
    }

    /// The reads the stale views failed with `ESTALE` so far.
    fn stale_reads(&self) -> usize {
        let text = std::fs::read_to_string(self.base.join("estale")).unwrap_or_default();
        text.lines().count()
    }

    /// The command that runs `program args` with view `i` on the common path.
    fn wrapper(&self, i: usize) -> Vec<String> {
        vec![
            "unshare".into(),
            "-m".into(),
            "--propagation".into(),
            "private".into(),
            "sh".into(),
            "-c".into(),
            r#"mount --bind "$0" "$1" && shift && exec "$@""#.into(),
            self.views[i].display().to_string(),
            self.common.display().to_string(),
        ]
    }
}

impl Drop for Views {
    fn drop(&mut self) {
        for m in self.mounted.drain(..) {
            let ok = Command::new("fusermount3")
                .arg("-u")
                .arg(&m)
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&m).output();
            }
        }
        for mut d in self.daemons.drain(..) {
            let _ = d.kill();
            let _ = d.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.base);
        } else {
            eprintln!("kept for inspection: {}", self.src.display());
        }
    }
}

/// `mpirun -np 8 <view a> emulate ... : -np 8 <view b> emulate ...`, two
/// emulated hosts of 8 ranks, one per view, every SOS on the views.
fn emulate_on_views(views: &Views, scenario: &Path, mode: &str) -> (Output, String, String) {
    // FUSE_EMULATE: the emulator of another build (to show that a build
    // before a fix fails this test).
    let emulate = std::env::var_os("FUSE_EMULATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| example("emulate"));
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "--timeout", "200"]);
    for i in 0..2 {
        if i == 1 {
            c.arg(":");
        }
        c.args(["-np", "8"]).args(views.wrapper(i));
        c.arg(&emulate).arg(scenario).arg(mode);
    }
    c.current_dir(root())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SOSLB_")) {
        c.env_remove(k);
    }
    c.env("SOSLB_SIGNAL_DIR", views.common.join("signals"))
        .env("SOSLB_EMULATE", "(hosts: Virtual(8))")
        .env("SOSLB_DISCOVERY", "Poll")
        // Every SOS on the FUSE views: the protocol under test.
        .env("SOSLB_HOST_BOARD", "false")
        .env("SOSLB_WARMUP", "0.5");
    let out = c.output().expect("mpirun runs (is Open MPI installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// Runs per setting (`FUSE_RUNS` changes it for a longer soak).
fn runs() -> usize {
    std::env::var("FUSE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
}

/// `runs()` jobs on two views in `setting`, turn by turn hetero16-,
/// fluct16- and step16-like: every id exactly once in every run, and help
/// across the views (distance 1: the other emulated host) in the runs of
/// the scenarios that slow one host down.
fn every_id_once_across_two_views(setting: Setting) {
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    let mut crossed = 0;
    let (mut stale_reads, mut stale_warnings) = (0, Vec::new());
    for run in 0..runs() {
        let name = ["fuse_hetero", "fuse_fluct", "fuse_step"][run % 3];
        let views = Views::new(name, setting);
        let (out, stdout, stderr) = emulate_on_views(&views, &scenario(name), "full");
        let result = stdout.lines().last().unwrap_or_default().to_string();
        let across: u64 = field(&result, "help_d1")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        crossed += across;
        stale_reads += views.stale_reads();
        stale_warnings.extend(
            changed_under_the_reader(&stderr)
                .into_iter()
                .map(String::from),
        );
        let line = format!("{setting}: {name} run {run}: {result}");
        eprintln!("{line}");
        lines.push(line.clone());
        let once = out.status.success()
            && result.starts_with("result:")
            && field(&result, "missing") == Some("0")
            && field(&result, "duplicates") == Some("0");
        if !once {
            let warnings: Vec<&str> = stderr
                .lines()
                .filter(|l| l.contains("soslb"))
                .take(20)
                .collect();
            failures.push(format!(
                "{line}\n  status {}\n  {}",
                out.status,
                warnings.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "runs with ids lost or computed twice on two bindfs views ({setting}):\n{}\n\nall runs:\n{}",
        failures.join("\n"),
        lines.join("\n")
    );
    assert!(
        crossed > 0,
        "no id crossed the views ({setting}):\n{}",
        lines.join("\n")
    );
    if let Setting::Stale { .. } = setting {
        eprintln!("{setting}: {stale_reads} reads failed with ESTALE");
        assert!(stale_reads > 0, "no read met a stale handle ({setting})");
        assert!(
            stale_warnings.is_empty(),
            "{stale_reads} stale reads; {} warnings of reads that met a file replaced ({setting}), e.g.\n{}",
            stale_warnings.len(),
            stale_warnings[..stale_warnings.len().min(5)].join("\n")
        );
    }
}

#[test]
fn two_views_with_lock_forwarding_compute_every_id_once() {
    require_fuse!();
    every_id_once_across_two_views(Setting::Bindfs {
        locks: true,
        cache: None,
    });
}

#[test]
fn two_caching_views_with_lock_forwarding_compute_every_id_once() {
    require_fuse!();
    every_id_once_across_two_views(Setting::Bindfs {
        locks: true,
        cache: Some("auto_cache"),
    });
}

#[test]
fn two_views_without_lock_forwarding_compute_every_id_once() {
    require_fuse!();
    every_id_once_across_two_views(Setting::Bindfs {
        locks: false,
        cache: None,
    });
}

#[test]
fn two_caching_views_without_lock_forwarding_compute_every_id_once() {
    require_fuse!();
    every_id_once_across_two_views(Setting::Bindfs {
        locks: false,
        cache: Some("kernel_cache"),
    });
}

/// NFSv3 clients: a file replaced by rename on one view reads `ESTALE` on
/// the other while open there, and a read may be cut to the size of the
/// file the path held before. Either is a file that changed under the
/// reader, read again, not a problem to warn about.
#[test]
fn two_nfs3_views_with_stale_handles_compute_every_id_once_without_warnings() {
    require_fuse!(stale_view_unavailable);
    every_id_once_across_two_views(Setting::Stale { rtt: 0.01 });
}
