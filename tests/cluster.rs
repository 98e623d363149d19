//! A real cluster on one machine (issue 47). `scripts/cluster.sh up N` makes
//! hosts node01.. with their own names (UTS namespaces), their own `/tmp`
//! and their own FUSE view of one backing directory at one shared path
//! (mount namespaces); `mpirun` reaches them through an `nsenter` agent.
//! These tests run the library there as a cluster runs it: hosts from their
//! names, host boards in each host's own `/tmp`, the sweep of a killed job's
//! node-local files, the shared directory as each host's own client sees it
//! (`bindfs` without lock forwarding, with caching; NFSv3 clients), and the
//! README's Fortran example.
//!
//! Needs root, `/dev/fuse`, `bindfs`, `unshare`, `nsenter` and, for the
//! NFSv3 views, Debian's `python3-fusepy`. Where one is
//! missing each test prints `SKIPPED: <why>` and passes, or fails under
//! `CI=true` or `CLUSTER_REQUIRED=1`.

mod common;

use common::{example, field, root, scenario, target_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Why a cluster cannot be made here, if it cannot.
fn unavailable() -> Option<String> {
    common::fuse_unavailable(
        &["bindfs", "unshare", "nsenter", "findmnt"],
        "scripts/test.sh and scripts/cluster.sh install it",
    )
}

/// Skip visibly, or fail where the cluster is required (CI).
macro_rules! require_cluster {
    () => {
        require_cluster!(unavailable)
    };
    ($unavailable:expr) => {
        if let Some(why) = $unavailable() {
            let required = |v: &str| std::env::var(v).is_ok_and(|v| v == "1" || v == "true");
            assert!(
                !required("CI") && !required("CLUSTER_REQUIRED"),
                "the cluster tests must run here (CI or CLUSTER_REQUIRED), but: {why}"
            );
            use std::io::Write;
            let line = format!("SKIPPED: cluster test not run: {why}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            return;
        }
    };
}

/// A cluster of `scripts/cluster.sh` in a directory of its own, taken down
/// on drop (also when the test fails).
struct Cluster {
    dir: PathBuf,
    hosts: Vec<String>,
    up: bool,
}

/// What a job printed.
struct Job {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Job {
    fn of(out: Output) -> Job {
        Job {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The emulator's result line.
    fn result(&self) -> &str {
        let line = self.stdout.lines().rfind(|l| l.starts_with("result:"));
        line.unwrap_or_else(|| panic!("no result line:\n{self}"))
    }

    fn value(&self, key: &str) -> u64 {
        field(self.result(), key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {}", self.result()))
    }

    /// Success, and every id computed exactly once (counted by the emulator).
    fn assert_every_id_once(&self) {
        assert!(self.ok, "the job failed:\n{self}");
        assert!(self.result().contains(" missing=0 duplicates=0 "), "{self}");
    }
}

impl std::fmt::Display for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

impl Cluster {
    /// `scripts/cluster.sh up HOSTS OPTIONS...` in a fresh directory under
    /// cargo's target (the hosts do not see the machine's `/tmp`).
    fn up(name: &str, hosts: usize, options: &[&str]) -> Cluster {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cluster-{name}-{}", std::process::id()));
        let mut cluster = Cluster {
            dir,
            hosts: (1..=hosts).map(|i| format!("node{i:02}")).collect(),
            up: true,
        };
        let out = cluster
            .script(&["up", &hosts.to_string()])
            .args(options)
            .output()
            .expect("bash runs");
        cluster.up = out.status.success();
        assert!(
            cluster.up,
            "scripts/cluster.sh up {hosts} {options:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    }

    fn script(&self, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(root().join("scripts/cluster.sh"))
            .args(args)
            .env("CLUSTER_DIR", &self.dir)
            // test.sh has set the machine up.
            .env("SOSLB_SETUP", "0");
        c
    }

    fn shared(&self) -> PathBuf {
        self.dir.join("shared")
    }

    /// Where the shared directory's files are (the file server's side).
    fn backing(&self) -> PathBuf {
        self.dir.join("backing")
    }

    /// The id of the process that holds `host`'s namespaces.
    fn holder(&self, host: &str) -> u32 {
        let text = std::fs::read_to_string(self.dir.join(format!("{host}.holder")))
            .unwrap_or_else(|e| panic!("{host} is not up: {e}"));
        text.split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{host}.holder: {text:?}"))
    }

    /// `path` (absolute) as `host` sees it, through its holder's root.
    fn on(&self, host: &str, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.holder(host)))
    }

    /// The run directories (`soslb-*`) in `host`'s own `/tmp`.
    fn node_dirs(&self, host: &str) -> Vec<PathBuf> {
        let tmp = self.on(host, "/tmp");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .unwrap_or_else(|e| panic!("{}: {e}", tmp.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("soslb-")
            })
            .collect();
        dirs.sort();
        dirs
    }

    /// The cluster's `mpirun OPTIONS` of `per_host` ranks on each of the
    /// first `hosts` hosts, without the caller's SOSLB_* settings and
    /// TMPDIR (the hosts' node-local files go to their /tmp), the signal
    /// directory on the shared path.
    fn mpirun(
        &self,
        (hosts, per_host): (usize, usize),
        options: &[&str],
        program: &Path,
        args: &[&str],
    ) -> Command {
        let spread: Vec<String> = (self.hosts[..hosts].iter())
            .map(|h| format!("{h}:{per_host}"))
            .collect();
        let mut c = Command::new(self.dir.join("mpirun"));
        c.args(["--oversubscribe", "--timeout", "240", "--host"])
            .arg(spread.join(","))
            .args(["-np", &(hosts * per_host).to_string()])
            .args(options)
            .arg(program)
            .args(args)
            .current_dir(root())
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SOSLB_")) {
            c.env_remove(k);
        }
        c.env_remove("TMPDIR")
            .env("SOSLB_SIGNAL_DIR", self.shared().join("signals"))
            .env("SOSLB_WARMUP", "0.5");
        c
    }

    /// The emulator on `scenario` (mode full), two ranks per host, with `env`.
    fn emulate(&self, scenario_name: &str, env: &[(&str, &str)]) -> Job {
        self.emulate_per_host(2, scenario_name, env)
    }

    /// [`Cluster::emulate`] with `per_host` ranks on each host.
    fn emulate_per_host(&self, per_host: usize, scenario_name: &str, env: &[(&str, &str)]) -> Job {
        let path = scenario(scenario_name);
        let mut c = self.mpirun(
            (self.hosts.len(), per_host),
            &[],
            &example("emulate"),
            &[path.to_str().unwrap(), "full"],
        );
        c.envs(env.iter().copied());
        Job::of(c.output().expect("mpirun runs"))
    }

    /// `scripts/cluster.sh down`, and check that it left nothing: neither
    /// the processes that `up` recorded nor any process in the hosts' mount
    /// namespaces (the last one out takes the namespace and its mounts;
    /// only a process older than `down` counts: a namespace's number is
    /// given again to another cluster's once it is gone).
    fn down(mut self) {
        let mut pids = Vec::new();
        let mut spaces = Vec::new();
        for h in &self.hosts {
            for what in ["holder", "view"] {
                let text = std::fs::read_to_string(self.dir.join(format!("{h}.{what}")))
                    .unwrap_or_default();
                pids.extend(text.split_whitespace().next().map(str::to_string));
            }
            spaces.push(std::fs::read_link(format!("/proc/{}/ns/mnt", self.holder(h))).unwrap());
        }
        let before = ticks_since_boot();
        let out = self.script(&["down"]).output().expect("bash runs");
        self.up = false;
        assert!(
            out.status.success(),
            "scripts/cluster.sh down: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for p in &pids {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(") ")
                .is_some_and(|(_, r)| r.starts_with('Z'));
            assert!(stat.is_empty() || zombie, "process {p} of up still runs");
        }
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let ns = std::fs::read_link(e.path().join("ns/mnt"));
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // Field 22, the start time: the 20th after the `(comm)`.
            let started: Option<u64> = (stat.rsplit_once(") "))
                .and_then(|(_, rest)| rest.split_whitespace().nth(19)?.parse().ok());
            assert!(
                !(ns.as_ref().is_ok_and(|ns| spaces.contains(ns))
                    && started.is_some_and(|t| t <= before)),
                "process {stat} is still in a host's mount namespace {ns:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Clock ticks since boot, as a process's start time in /proc/PID/stat.
fn ticks_since_boot() -> u64 {
    let uptime = std::fs::read_to_string("/proc/uptime").expect("/proc/uptime");
    let seconds: f64 = (uptime.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect("/proc/uptime starts with the seconds since boot");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (seconds * hz).ceil() as u64
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.up {
            let _ = self.script(&["down"]).output();
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }
    }
}

/// Who took from whom on the board in `dir`, as (helper, owner): from the
/// claim files (`aid/<owner>/<seq>.<slot>`, their `by:` field), less the
/// owners' claims of their own slots.
fn takes(dir: &Path) -> Vec<(usize, usize)> {
    let by = |text: &str| -> Option<usize> {
        let rest = text.split("by:").nth(1)?.trim_start();
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    };
    let entries = |d: &Path| std::fs::read_dir(d).into_iter().flatten().flatten();
    let mut out = Vec::new();
    for owner_dir in entries(&dir.join("aid")) {
        let name = owner_dir.file_name().to_string_lossy().into_owned();
        let owner: usize = name.parse().unwrap_or_else(|_| panic!("aid/{name}"));
        for claim in entries(&owner_dir.path()) {
            let text = std::fs::read_to_string(claim.path()).unwrap_or_default();
            if let Some(helper) = by(&text).filter(|&h| h != owner) {
                out.push((helper, owner));
            }
        }
    }
    out
}

/// The host names of the ranks in the rows of a per-rank table (`soslb
/// summary`'s or `soslb report`'s): the word after the rank number.
fn table_hosts(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.next()?.parse::<usize>().ok()?;
            Some(w.next()?.to_string())
        })
        .collect()
}

#[test]
fn hosts_come_from_their_names_and_help_goes_through_each_hosts_own_board() {
    require_cluster!();
    let cluster = Cluster::up("hosts", 4, &[]);
    // cluster8: rank 1 slows alone on node01, node02 slows as a whole.
    let job = cluster.emulate(
        "cluster8",
        &[
            ("SOSLB_JOB_ID", "hosts"),
            ("SOSLB_SUMMARY", "true"),
            ("SOSLB_KEEP", "true"),
        ],
    );
    job.assert_every_id_once();
    let expected: Vec<String> = (0..8).map(|r| format!("node{:02}", r / 2 + 1)).collect();
    assert_eq!(table_hosts(&job.stdout), expected, "{job}");
    let run = cluster.backing().join("signals/hosts.0");
    let out = Command::new(target_dir().join("soslb"))
        .arg("report")
        .arg(&run)
        .arg("--out")
        .arg(cluster.dir.join("report"))
        .output()
        .expect("soslb report runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert_eq!(table_hosts(&report), expected, "soslb report:\n{report}");

    // Help within a host went through its own /tmp, across hosts through
    // the shared directory.
    assert!(job.value("help_d0") > 0, "{job}");
    assert!(job.value("help_d1") + job.value("help_d2") > 0, "{job}");
    let host_of = |r: usize| &expected[r];
    let mut local = Vec::new();
    for h in &cluster.hosts {
        let dirs = cluster.node_dirs(h);
        assert_eq!(dirs.len(), 1, "{h}: {dirs:?}");
        let boards: Vec<String> = std::fs::read_dir(&dirs[0])
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("board-"))
            .collect();
        assert_eq!(boards, [format!("board-{h}")], "{h}'s own /tmp");
        for (helper, owner) in takes(&dirs[0].join(&boards[0])) {
            assert!(
                host_of(helper) == h && host_of(owner) == h,
                "on {h}'s board rank {helper} took from rank {owner}"
            );
            local.push((helper, owner));
        }
    }
    assert!(
        local.contains(&(0, 1)),
        "rank 0 did not help rank 1 on node01's board: {local:?}\n{job}"
    );
    let shared = takes(&run);
    assert!(
        shared.iter().any(|&(h, o)| host_of(h) != host_of(o)),
        "no help across hosts on the shared directory: {shared:?}\n{job}"
    );
    // The machine's own /tmp holds none of it.
    let name = cluster.node_dirs("node01")[0]
        .file_name()
        .unwrap()
        .to_owned();
    assert!(!Path::new("/tmp").join(name).exists());
    cluster.down();
}

/// Wait (up to a minute) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_jobs_node_local_files_stay_on_each_host_and_the_next_job_there_sweeps_them() {
    require_cluster!();
    let cluster = Cluster::up("killed", 4, &[]);
    let path = scenario("cluster8");
    let mut child = cluster
        .mpirun(
            (4, 2),
            &[],
            &example("emulate"),
            &[path.to_str().unwrap(), "full"],
        )
        .env("SOSLB_JOB_ID", "killed")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mpirun starts");
    // SIGKILL, as at a walltime, once every host's ranks hold its board.
    wait_for("every host's board", || {
        cluster.hosts.iter().all(|h| {
            let dirs = cluster.node_dirs(h);
            dirs.len() == 1 && dirs[0].join(format!("board-{h}")).is_dir()
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    common::kill_tree(&mut child);
    let left: Vec<Vec<PathBuf>> = cluster.hosts.iter().map(|h| cluster.node_dirs(h)).collect();
    for (h, dirs) in cluster.hosts.iter().zip(&left) {
        assert_eq!(dirs.len(), 1, "{h}: {dirs:?}");
        assert!(dirs[0].join(soslb::board::node::LOCK).is_file(), "{h}");
    }
    // Untouched since long enough ago on node01: the next job there sweeps it.
    let ago = soslb::board::node::SWEEP_AGE + Duration::from_secs(60);
    std::fs::File::open(&left[0][0])
        .unwrap()
        .set_modified(SystemTime::now() - ago)
        .unwrap();
    let others: Vec<(PathBuf, SystemTime)> = (left[1..].iter())
        .map(|d| (d[0].clone(), d[0].metadata().unwrap().modified().unwrap()))
        .collect();
    let next = Job::of(
        cluster
            .mpirun(
                (1, 2),
                &[],
                &example("emulate"),
                &[scenario("cost2").to_str().unwrap(), "full"],
            )
            .env("SOSLB_JOB_ID", "next")
            .output()
            .expect("mpirun runs"),
    );
    next.assert_every_id_once();
    assert_eq!(cluster.node_dirs("node01"), Vec::<PathBuf>::new(), "{next}");
    let swept = format!(
        "swept /tmp/{}",
        left[0][0].file_name().unwrap().to_string_lossy()
    );
    let logs = cluster.backing().join("signals/next.0/log");
    let logged = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .any(|log| log.contains(&swept));
    assert!(logged, "no `{swept}` in {}", logs.display());
    // The other hosts' /tmp are their own: untouched.
    for (dir, modified) in &others {
        assert!(dir.join(soslb::board::node::LOCK).is_file(), "{dir:?}");
        assert_eq!(dir.metadata().unwrap().modified().unwrap(), *modified);
    }
    cluster.down();
}

/// Views without lock forwarding (Lustre without `-o flock`, NFS
/// `nolock`): the claims need none; every id exactly once.
#[test]
fn without_lock_forwarding() {
    require_cluster!();
    let cluster = Cluster::up("nolock", 4, &["--no-lock-forwarding"]);
    // Every SOS on the views: the protocol under test.
    let job = cluster.emulate("cluster8", &[("SOSLB_HOST_BOARD", "false")]);
    job.assert_every_id_once();
    cluster.down();
}

/// Views that cache pages and attributes (`--cache`), as NFS clients do:
/// every id exactly once in each of three runs.
#[test]
fn with_caching() {
    require_cluster!();
    let cluster = Cluster::up("cache", 4, &["--cache"]);
    for _ in 0..3 {
        let job = cluster.emulate("cluster8", &[("SOSLB_HOST_BOARD", "false")]);
        job.assert_every_id_once();
    }
    cluster.down();
}

/// NFSv3 clients (`--nfs3`: a view of `tests/fuse/stale_view.py` per
/// host, whose reads of a file another host replaced fail with `ESTALE`):
/// every id exactly once in each of four runs of 16 ranks, every SOS on the
/// shared views, and no warning of a read that met a file replaced under
/// it. A read of a file renamed over may also come back cut to the old
/// file's size here (the kernel's size of the path's inode); before such
/// reads were read again, 5 of 8 runs warned of them.
#[test]
fn on_nfs3_views() {
    require_cluster!(|| unavailable().or_else(common::fusepy_unavailable));
    let cluster = Cluster::up("nfs3", 4, &["--nfs3", "--rtt", "0.01"]);
    for _ in 0..4 {
        let job = cluster.emulate_per_host(4, "fuse_fluct", &[("SOSLB_HOST_BOARD", "false")]);
        job.assert_every_id_once();
        let warned = common::changed_under_the_reader(&job.stderr);
        assert!(
            warned.is_empty(),
            "reads warned of:\n{}\n{job}",
            warned.join("\n")
        );
    }
    let stale = std::fs::read_to_string(cluster.dir.join("estale")).unwrap_or_default();
    eprintln!(
        "NFSv3 views: {} reads failed with ESTALE",
        stale.lines().count()
    );
    cluster.down();
}

#[test]
fn the_readme_fortran_example_runs_across_the_hosts() {
    require_cluster!();
    let build =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-pi-{}", std::process::id()));
    let (program, total) = common::readme::build_pi(&build.join("prefix"), &build.join("build"));
    let cluster = Cluster::up("pi", 4, &[]);
    // Run from the shared directory, as from a home directory on NFS: the
    // default signal directory is relative.
    let shared = cluster.shared();
    let mut c = cluster.mpirun((4, 2), &["--wdir", shared.to_str().unwrap()], &program, &[]);
    c.env_remove("SOSLB_SIGNAL_DIR");
    let out = c.output().expect("mpirun runs");
    let text = format!(
        "{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    common::readme::check_pi(&String::from_utf8_lossy(&out.stdout), total, &text);
    // Its monitor logs, named by host and rank, on the shared directory.
    let runs: Vec<PathBuf> = std::fs::read_dir(cluster.backing().join("soslb-signals"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let mut logs: Vec<String> = std::fs::read_dir(runs[0].join("log"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    logs.sort();
    let expected: Vec<String> = (0..8)
        .map(|r| format!("node{:02}.{r}.log", r / 2 + 1))
        .collect();
    assert_eq!(logs, expected);
    cluster.down();
    let _ = std::fs::remove_dir_all(&build);
}
