//! The node-local directory of a run, `<tmp>/soslb-<user id>-<hash>` (the
//! hosts' copies of the open index and the host's board): which ranks are
//! alive in it, and the sweep of the directories that killed jobs left.
//!
//! Every rank of the host holds a shared lock (`flock`) on the directory's
//! `ranks.lock` while it runs; the kernel drops the lock when the process
//! ends, however it ends (`SIGKILL` at the walltime included). At finalize
//! each rank lets go, and the last one out removes the lock file and the
//! directory once it is empty. At init the host's lowest rank removes every
//! other directory of this user's runs whose lock it can take exclusively
//! (no rank alive there) and that has not changed for [`SWEEP_AGE`]: a job
//! that starts makes its directory and takes its lock in the same instant,
//! and is long past that instant when the age lets a sweep near it. A
//! directory without a lock file (a run with `keep: true` leaves its host's
//! board so, for a post-mortem) is never swept, nor is anything on a shared
//! temporary directory, where a lock may not be seen from another host.
//!
//! # The host's copy of the open index
//!
//! Beside the host's board (`board-<host>/`, see [`crate::board`]) the
//! directory holds `<host>.ron`, a copy of the shared `open.ron`. The
//! directory is `<tmp>/soslb-<user id>-<hash of the run directory's absolute
//! path>` in `$TMPDIR`, else `/tmp`, readable by its user only; one that is
//! not a directory of the user is never used. The first idle rank of a host
//! to poll reads the shared index and leaves the copy; the host's other idle
//! ranks read the copy while it is less than half their poll old, so that
//! the file server sees about two reads of the index per host and poll, not
//! one per rank. A rank a watcher woke reads the shared index.
//!
//! Beside the copy, `<host>.wanted/<rank>.ron` holds what each rank of the
//! host wants the shared index to say of it (its entry, or none): a rank
//! that rewrites the shared index for its own change makes its host-mates'
//! too ([`crate::board::Board::wanted`]).

use super::fs::is_shared_fs;
use fs2::FileExt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The lock file of a run's node-local directory.
pub const LOCK: &str = "ranks.lock";

/// How long a run's node-local directory must have been left unchanged
/// before another run sweeps it.
pub const SWEEP_AGE: Duration = Duration::from_secs(60);

/// This process's user.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The prefix of this user's node-local run directories.
fn prefix() -> String {
    format!("soslb-{}-", uid())
}

/// Make `dir` and its parents, readable by this user only, where they are
/// not there (whether that worked, [`is_own_dir`] tells).
pub fn make(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let _ = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
}

/// Whether `meta` is that of a directory of this user (not a link to one):
/// the only kind of node-local directory soslb uses or removes.
pub fn is_own_dir(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.is_dir() && meta.uid() == uid()
}

/// The node-local directory, under `tmp`, of the run whose directory (on
/// the signal directory) is `job_dir`: one per run, named by a hash of
/// `job_dir`'s absolute path (two jobs of one id started in different
/// working directories with the same relative signal directory are two
/// jobs).
pub fn run_dir(tmp: &Path, job_dir: &Path) -> PathBuf {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let job_dir = fs::canonicalize(job_dir).unwrap_or_else(|_| job_dir.to_path_buf());
    let mut h = DefaultHasher::new();
    job_dir.hash(&mut h);
    tmp.join(format!("{}{:016x}", prefix(), h.finish()))
}

/// A rank's shared lock on its run's node-local directory.
#[derive(Debug)]
pub struct Presence {
    file: File,
    dir: PathBuf,
}

impl Presence {
    /// Make `dir` (readable by this user only) if it is not there, and hold
    /// its lock shared. `None` when that cannot be done (the directory is
    /// another user's, say: the hosts' copies then say so): the run goes
    /// on, and its directory, if a kill leaves it, is not swept.
    pub fn join(dir: &Path) -> Option<Presence> {
        make(dir);
        if !is_own_dir(&fs::symlink_metadata(dir).ok()?) {
            return None;
        }
        let file = File::options()
            .create(true)
            .append(true)
            .open(dir.join(LOCK))
            .ok()?;
        // (Never waits: a lock held exclusively is a sweep under way, or
        // something outside soslb.)
        FileExt::try_lock_shared(&file).ok()?;
        Some(Presence {
            file,
            dir: dir.to_path_buf(),
        })
    }

    /// Let go of the lock; the last rank of the host out removes the lock
    /// file, and the directory if nothing else is left in it.
    pub fn leave(self) {
        if self.file.try_lock_exclusive().is_ok() {
            let _ = fs::remove_file(self.dir.join(LOCK));
            let _ = fs::remove_dir(&self.dir);
        }
    }
}

/// Remove the node-local directories of this user's runs under `tmp`
/// (named and owned as this user's), other than `own`, that no rank holds
/// and that have not changed for `age`: those that killed jobs left.
/// Returns the ones removed.
pub fn sweep(tmp: &Path, own: &Path, age: Duration) -> Vec<PathBuf> {
    if is_shared_fs(tmp).unwrap_or(true) {
        return Vec::new();
    }
    let Ok(entries) = fs::read_dir(tmp) else {
        return Vec::new();
    };
    let prefix = prefix();
    let ours = |name: &str| {
        name.strip_prefix(&prefix)
            .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let now = SystemTime::now();
    let mut swept = Vec::new();
    for dir in entries.flatten().map(|e| e.path()) {
        let named = dir.file_name().and_then(|n| n.to_str()).is_some_and(ours);
        if !named || dir == own {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|a| a >= age);
        if !is_own_dir(&meta) || !old {
            continue;
        }
        // (Opened for reading only: a directory without its lock file is
        // kept, and none is made.)
        let Ok(lock) = File::open(dir.join(LOCK)) else {
            continue;
        };
        if lock.try_lock_exclusive().is_ok() && fs::remove_dir_all(&dir).is_ok() {
            swept.push(dir);
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn temp(name: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "soslb-node-test-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A run directory under `tmp` named as `n`, its lock file made.
    fn run(tmp: &Path, n: u64) -> PathBuf {
        let d = tmp.join(format!("{}{n:016x}", prefix()));
        fs::create_dir_all(d.join("board-h")).unwrap();
        fs::write(d.join(LOCK), b"").unwrap();
        d
    }

    /// Set the modification time of `dir` `ago` in the past.
    fn age(dir: &Path, ago: Duration) {
        File::open(dir)
            .unwrap()
            .set_modified(SystemTime::now() - ago)
            .unwrap();
    }

    #[test]
    fn a_sweep_removes_only_old_run_directories_that_no_rank_holds() {
        let tmp = temp("sweep");
        let old = Duration::from_secs(600);
        let dead = run(&tmp, 1);
        let young = run(&tmp, 2);
        let held = run(&tmp, 3);
        let presence = Presence::join(&held).unwrap();
        let own = run(&tmp, 4);
        let kept = run(&tmp, 5);
        fs::remove_file(kept.join(LOCK)).unwrap();
        let other = tmp.join("soslb-other-0000000000000001");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join(LOCK), b"").unwrap();
        for d in [&dead, &held, &own, &kept, &other] {
            age(d, old);
        }
        assert_eq!(sweep(&tmp, &own, SWEEP_AGE), vec![dead.clone()]);
        assert!(!dead.exists());
        for d in [&young, &held, &own, &kept, &other] {
            assert!(d.is_dir(), "{} swept", d.display());
        }
        // Once its last rank has left, the held one goes with its lock
        // file (its board is its lowest rank's to remove).
        fs::remove_dir(held.join("board-h")).unwrap();
        presence.leave();
        assert!(!held.exists());
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn the_last_rank_out_removes_the_directory() {
        let tmp = temp("leave");
        let dir = tmp.join("run");
        let (a, b) = (Presence::join(&dir).unwrap(), Presence::join(&dir).unwrap());
        a.leave();
        assert!(dir.join(LOCK).is_file(), "removed while a rank is in");
        b.leave();
        assert!(!dir.exists());
        fs::remove_dir_all(&tmp).unwrap();
    }
}
