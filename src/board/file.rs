//! The product's board: signal files on a directory shared by all ranks
//! (DESIGN §6), correct on NFS.
//!
//! ```text
//! <signal_dir>/<job_id>/
//!   job.ron        JobInfo, written by rank 0 (create_job)
//!   open.ron       OpenIndex, rewritten in place under its lock
//!   sos/<rank>.ron Sos, created by its rank at join, rewritten in place under its lock
//!   log/           monitor logs
//! ```
//!
//! Rules followed here, because of what an NFS client caches:
//! - every file is created at init; afterwards none is created, renamed or
//!   deleted, and `stat` or directory listings never decide anything;
//! - one descriptor per locked file per process, kept for the run (NFS turns
//!   `flock` into POSIX record locks, which any `close` of the file drops);
//!   locks are only ever tried, in a loop with a back-off (a blocked NFSv4
//!   lock may be re-polled only every 30 s);
//! - a locked update reads, modifies, writes in place at offset 0, truncates,
//!   `fsync`s, then unlocks; `open.ron` is also read without a lock (open,
//!   read, close: the open revalidates), a torn body is then answered `None`.

use super::format::{self, Decoded};
use super::{Access, Board, Locked, OpenIndex, Sos, SosState};
use crate::error::{Error, Result};
use fs2::FileExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

/// What rank 0 records in `job.ron`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job's id (the name of the job directory).
    pub job_id: String,
    /// Number of realisations.
    pub total: u64,
    /// Number of ranks.
    pub ranks: usize,
    /// When the job started, RFC 3339.
    pub start: String,
    /// Digest of the configuration all ranks use.
    pub config_digest: u64,
}

fn job_path(job_dir: &Path) -> PathBuf {
    job_dir.join("job.ron")
}

fn index_path(job_dir: &Path) -> PathBuf {
    job_dir.join("open.ron")
}

fn sos_path(job_dir: &Path, rank: usize) -> PathBuf {
    job_dir.join("sos").join(format!("{rank}.ron"))
}

/// Open an existing signal file for reading and writing (an exclusive lock
/// on NFS needs a descriptor open for writing).
fn open_rw(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// Create `path` (it must not exist) holding `body`, `fsync`ed; the
/// descriptor is returned open for reading and writing.
fn create_file<T: Serialize>(path: &Path, body: &T) -> Result<File> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Error::StaleJob {
                path: path.to_owned(),
                reason: "already exists: a file of an earlier job, or a rank started twice; \
                         remove the job directory or set another job_id"
                    .into(),
            },
            _ => Error::io(path, e),
        })?;
    file.write_all(format::encode(body).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io(path, e))?;
    Ok(file)
}

/// Read the whole file `path` (no lock) and decode it.
fn read_file<T: DeserializeOwned>(path: &Path) -> Result<Decoded<T>> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    format::decode(&String::from_utf8_lossy(&bytes), path)
}

/// A lock error: `ENOLCK` (no lock service, NFS `nolock`) becomes
/// [`Error::Locking`] with the mount's offending option if known.
fn lock_error(path: &Path, e: io::Error) -> Error {
    if e.raw_os_error() != Some(libc::ENOLCK) {
        return Error::io(path, e);
    }
    let hint = mount_lock_problem(path).unwrap_or_else(|| {
        "make sure the file system's lock service runs (on NFSv3: rpc.statd and lockd on \
         client and server), or use a signal_dir whose locks reach all hosts"
            .into()
    });
    Error::Locking {
        path: path.to_owned(),
        reason: format!("{e}; {hint}"),
    }
}

fn is_contended(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
        || e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
}

/// Create the job directory and its files: called by rank 0 only, before
/// the other ranks [`join`](FileBoard::join).
///
/// `job_dir` itself must not exist: a directory already there belongs to an
/// earlier job or a reused job id, and is an [`Error::StaleJob`].
pub fn create_job(job_dir: &Path, job: &JobInfo) -> Result<()> {
    if let Some(parent) = job_dir.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    if let Err(e) = fs::create_dir(job_dir) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(Error::io(job_dir, e));
        }
        let found = match read_file::<JobInfo>(&job_path(job_dir)) {
            Ok(Decoded::Body(j)) => format!(
                "its job.ron is of job `{}` ({} ranks, {} realisations, started {})",
                j.job_id, j.ranks, j.total, j.start
            ),
            _ => "it has no readable job.ron".into(),
        };
        return Err(Error::StaleJob {
            path: job_dir.to_owned(),
            reason: format!(
                "the job directory already exists ({found}): files of an earlier job or a \
                 reused job id; remove it or set another job_id"
            ),
        });
    }
    for sub in ["sos", "log"] {
        let dir = job_dir.join(sub);
        fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    create_file(&job_path(job_dir), job)?;
    create_file(&index_path(job_dir), &OpenIndex::default())?;
    Ok(())
}

/// Counts file operations and injects a storage latency before each.
#[derive(Debug, Default)]
struct Meter {
    ops: u64,
    delay: Duration,
}

impl Meter {
    fn tick(&mut self) {
        self.ops += 1;
        if !self.delay.is_zero() {
            thread::sleep(self.delay);
        }
    }

    /// Take the exclusive lock of `file`: `false` if busy ([`Access::Try`]).
    fn lock(&mut self, file: &File, path: &Path, access: Access) -> Result<bool> {
        let mut backoff = Duration::from_micros(200);
        loop {
            self.tick();
            match file.try_lock_exclusive() {
                Ok(()) => return Ok(true),
                Err(e) if is_contended(&e) => {}
                Err(e) => return Err(lock_error(path, e)),
            }
            if access == Access::Try {
                return Ok(false);
            }
            thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(20));
        }
    }

    fn unlock(&mut self, file: &File, path: &Path) -> Result<()> {
        self.tick();
        FileExt::unlock(file).map_err(|e| lock_error(path, e))
    }

    fn read(&mut self, mut file: &File, path: &Path) -> Result<Vec<u8>> {
        self.tick();
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| Error::io(path, e))?;
        Ok(bytes)
    }

    /// Rewrite `file` in place: write at 0, truncate (unless `old_len`
    /// shows the file cannot be longer), `fsync`.
    fn write(
        &mut self,
        mut file: &File,
        path: &Path,
        text: &str,
        old_len: Option<usize>,
    ) -> Result<()> {
        let io = |e| Error::io(path, e);
        self.tick();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .map_err(io)?;
        if old_len.is_none_or(|old| old > text.len()) {
            self.tick();
            file.set_len(text.len() as u64).map_err(io)?;
        }
        self.tick();
        file.sync_data().map_err(io)
    }

    /// Lock `file`, run `body`, unlock (also after an error or a panic).
    fn locked(
        &mut self,
        file: &File,
        path: &Path,
        access: Access,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<Locked> {
        if !self.lock(file, path, access)? {
            return Ok(Locked::Busy);
        }
        /// Releases the lock if `body` panics.
        struct Guard<'a>(Option<&'a File>);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                if let Some(file) = self.0 {
                    let _ = FileExt::unlock(file);
                }
            }
        }
        let mut guard = Guard(Some(file));
        let result = body(self);
        guard.0 = None;
        let unlocked = self.unlock(file, path);
        result.and(unlocked).map(|()| Locked::Done)
    }

    /// Under the lock of `file`: read the record, `check` it, run `f`, and
    /// write it back if it changed.
    fn update<T>(
        &mut self,
        file: &File,
        path: &Path,
        access: Access,
        check: impl Fn(&T) -> Result<()>,
        f: &mut dyn FnMut(&mut T),
    ) -> Result<Locked>
    where
        T: Serialize + DeserializeOwned + PartialEq + Clone,
    {
        self.locked(file, path, access, |m| {
            let bytes = m.read(file, path)?;
            let mut record: T = match format::decode(&String::from_utf8_lossy(&bytes), path)? {
                Decoded::Body(r) => r,
                Decoded::Torn(reason) => {
                    return Err(Error::Corrupt {
                        path: path.to_owned(),
                        reason: format!("{reason}, although read under the file's lock"),
                    });
                }
            };
            check(&record)?;
            let before = record.clone();
            f(&mut record);
            if record == before {
                return Ok(());
            }
            m.write(file, path, &format::encode(&record), Some(bytes.len()))
        })
    }
}

/// Check what an SOS file of `rank` held.
fn check_sos(sos: &Sos, rank: usize, path: &Path) -> Result<()> {
    let corrupt = |reason: String| {
        Err(Error::Corrupt {
            path: path.to_owned(),
            reason,
        })
    };
    if sos.rank != rank {
        return corrupt(format!(
            "holds the SOS record of rank {}, not {rank}",
            sos.rank
        ));
    }
    if let SosState::Open(post) = &sos.state {
        if !post.tail.is_well_formed() {
            return corrupt(format!("malformed id set in the tail: {}", post.tail));
        }
    }
    if let Some(aid) = sos.aids.iter().find(|a| !a.ids.is_well_formed()) {
        return corrupt(format!(
            "malformed id set in the AID of rank {}: {}",
            aid.helper, aid.ids
        ));
    }
    Ok(())
}

/// One rank's handle on the signal files of a job.
///
/// Each process (rank) owns one: its descriptors, opened once and kept for
/// the run, carry the locks. Within one process, separate handles conflict
/// through their locks as separate processes would (on a local file system).
#[derive(Debug)]
pub struct FileBoard {
    dir: PathBuf,
    rank: usize,
    /// Kept descriptors of the SOS files, opened on first access.
    sos: Vec<Option<File>>,
    /// Kept descriptor of `open.ron`, for its lock.
    index: File,
    meter: Meter,
}

impl FileBoard {
    /// Join the job in `job_dir` (created by rank 0 with [`create_job`]) as
    /// `rank` of `ranks`: create this rank's SOS file (closed, sequence 0).
    ///
    /// An SOS file already there is an [`Error::StaleJob`].
    pub fn join(job_dir: &Path, rank: usize, ranks: usize) -> Result<FileBoard> {
        if rank >= ranks {
            return Err(Error::argument(
                "rank",
                format!("rank {rank} is not below ranks = {ranks}"),
            ));
        }
        let index = open_rw(&index_path(job_dir))?;
        let own = Sos {
            rank,
            ..Sos::default()
        };
        let mut sos: Vec<Option<File>> = (0..ranks).map(|_| None).collect();
        sos[rank] = Some(create_file(&sos_path(job_dir, rank), &own)?);
        Ok(FileBoard {
            dir: job_dir.to_owned(),
            rank,
            sos,
            index,
            meter: Meter::default(),
        })
    }

    /// Sleep `d` before every file operation: emulated storage latency, for tests.
    pub fn with_delay(mut self, d: Duration) -> Self {
        self.meter.delay = d;
        self
    }

    /// Number of file operations since [`join`](FileBoard::join) (open,
    /// lock attempt, read, write, truncate, fsync, unlock: each counts one).
    pub fn ops(&self) -> u64 {
        self.meter.ops
    }

    /// This handle's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The job directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `open.ron` (to watch it with [`super::watch::Discovery`]).
    pub fn index_path(&self) -> PathBuf {
        index_path(&self.dir)
    }

    /// Path of the SOS file of `rank`.
    pub fn sos_path(&self, rank: usize) -> PathBuf {
        sos_path(&self.dir, rank)
    }

    /// Directory of the monitor logs.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }
}

/// The kept descriptor of the SOS file of `rank`, opened on first use.
fn sos_file<'a>(
    sos: &'a mut [Option<File>],
    meter: &mut Meter,
    rank: usize,
    path: &Path,
) -> Result<&'a File> {
    let ranks = sos.len();
    let slot = sos.get_mut(rank).ok_or_else(|| {
        Error::argument("rank", format!("rank {rank} is not below ranks = {ranks}"))
    })?;
    if slot.is_none() {
        meter.tick();
        *slot = Some(open_rw(path)?);
    }
    slot.as_ref()
        .ok_or_else(|| Error::Internal("SOS descriptor vanished".into()))
}

impl Board for FileBoard {
    fn with_sos(
        &mut self,
        rank: usize,
        access: Access,
        f: &mut dyn FnMut(&mut Sos),
    ) -> Result<Locked> {
        let path = self.sos_path(rank);
        let file = sos_file(&mut self.sos, &mut self.meter, rank, &path)?;
        let mut changed_rank = None;
        let locked = self.meter.update(
            file,
            &path,
            access,
            |s| check_sos(s, rank, &path),
            &mut |s: &mut Sos| {
                f(s);
                if s.rank != rank {
                    changed_rank = Some(s.rank);
                    s.rank = rank;
                }
            },
        )?;
        match changed_rank {
            Some(r) => Err(Error::Internal(format!(
                "an update of the SOS of rank {rank} set its rank to {r}"
            ))),
            None => Ok(locked),
        }
    }

    fn reset_sos(&mut self, sos: &Sos) -> Result<()> {
        let path = self.sos_path(sos.rank);
        let file = sos_file(&mut self.sos, &mut self.meter, sos.rank, &path)?;
        let text = format::encode(sos);
        self.meter
            .locked(file, &path, Access::Wait, |m| {
                m.write(file, &path, &text, None)
            })
            .map(drop)
    }

    fn reset_index(&mut self) -> Result<()> {
        let path = self.index_path();
        let text = format::encode(&OpenIndex::default());
        let file = &self.index;
        self.meter
            .locked(file, &path, Access::Wait, |m| {
                m.write(file, &path, &text, None)
            })
            .map(drop)
    }

    fn with_index(&mut self, f: &mut dyn FnMut(&mut OpenIndex)) -> Result<()> {
        let path = self.index_path();
        self.meter
            .update(&self.index, &path, Access::Wait, |_| Ok(()), f)
            .map(drop)
    }

    fn read_index(&mut self) -> Result<Option<OpenIndex>> {
        let path = self.index_path();
        self.meter.tick();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let bytes = self.meter.read(&file, &path)?;
        drop(file);
        match format::decode(&String::from_utf8_lossy(&bytes), &path)? {
            Decoded::Body(index) => Ok(Some(index)),
            Decoded::Torn(_) => Ok(None),
        }
    }
}

/// An exclusive lock on a job's `job.ron`, held through its own descriptor
/// until [`JobLock::unlock`] (or drop).
#[derive(Debug)]
pub struct JobLock {
    file: File,
    path: PathBuf,
}

impl JobLock {
    /// Release the lock.
    pub fn unlock(self) -> Result<()> {
        FileExt::unlock(&self.file).map_err(|e| lock_error(&self.path, e))
    }
}

/// Take the exclusive lock of `job_dir/job.ron`, for the init probe that
/// proves locks reach across hosts (see [`job_lock_is_free`]).
///
/// The lock is tried, not waited for: a lock already held means another
/// process uses this job directory, an [`Error::Locking`].
pub fn job_lock(job_dir: &Path) -> Result<JobLock> {
    let path = job_path(job_dir);
    let file = open_rw(&path)?;
    match file.try_lock_exclusive() {
        Ok(()) => Ok(JobLock { file, path }),
        Err(e) if is_contended(&e) => Err(Error::Locking {
            path,
            reason: "job.ron is already locked by another process: is another job using this \
                     job directory?"
                .into(),
        }),
        Err(e) => Err(lock_error(&path, e)),
    }
}

/// Try to take the lock of `job_dir/job.ron` without waiting, through a
/// new descriptor: `true` if it could be taken (it is released at once).
///
/// Call it from a process that does not hold the lock (on NFS, closing the
/// probe's descriptor would drop that process's own lock), on another host
/// than the holder: `true` while [`job_lock`] is held there means locks do
/// not reach across hosts.
pub fn job_lock_is_free(job_dir: &Path) -> Result<bool> {
    let path = job_path(job_dir);
    let file = open_rw(&path)?;
    match file.try_lock_exclusive() {
        Ok(()) => FileExt::unlock(&file)
            .map(|()| true)
            .map_err(|e| lock_error(&path, e)),
        Err(e) if is_contended(&e) => Ok(false),
        Err(e) => Err(lock_error(&path, e)),
    }
}

/// If `path` lies on an NFS mount whose locks stay local to each client
/// (`nolock`, `local_lock=flock` or `local_lock=all`), say so and what to do.
///
/// Reads `/proc/mounts`; `None` when it is unreadable or the mount is fine.
pub fn mount_lock_problem(path: &Path) -> Option<String> {
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    // The nearest existing ancestor, with symbolic links resolved.
    let abs = std::path::absolute(path).ok()?;
    let real = abs.ancestors().find_map(|p| p.canonicalize().ok())?;
    lock_problem_in(&mounts, &real)
}

/// [`mount_lock_problem`] on the text of `/proc/mounts`.
fn lock_problem_in(mounts: &str, path: &Path) -> Option<String> {
    // `\040` and friends: octal escapes of the mount-point field.
    fn unescape(s: &str) -> String {
        let mut out = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let oct = b
                .get(i + 1..i + 4)
                .and_then(|d| std::str::from_utf8(d).ok());
            match (b[i], oct.and_then(|d| u8::from_str_radix(d, 8).ok())) {
                (b'\\', Some(c)) => {
                    out.push(c);
                    i += 4;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    // The last of the longest matching mount points: later mounts hide earlier ones.
    let (point, fstype, options) = mounts
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() >= 4).then(|| (unescape(f[1]), f[2], f[3]))
        })
        .filter(|(point, ..)| path.starts_with(point))
        .fold(None::<(String, &str, &str)>, |best, m| match &best {
            Some(b)
                if Path::new(&b.0).components().count() > Path::new(&m.0).components().count() =>
            {
                best
            }
            _ => Some(m),
        })?;
    if !fstype.starts_with("nfs") {
        return None;
    }
    let bad = options
        .split(',')
        .find(|o| matches!(*o, "nolock" | "local_lock=flock" | "local_lock=all"))?;
    Some(format!(
        "{} is on the {fstype} mount {point} with option `{bad}`: its file locks are local to \
         each host, so ranks on different hosts could take the same ids; remount it without \
         `{bad}`, or set signal_dir on a file system whose locks reach all hosts",
        path.display()
    ))
}

/// Whether `path` is on a shared (network, cluster or FUSE) file system,
/// from `statfs`: `true` for NFS, SMB/CIFS, Lustre, GPFS, BeeGFS, CephFS,
/// FUSE, 9p, AFS, OCFS2, GFS2, ... and for any type it does not know;
/// `false` for known local ones (ext2/3/4, xfs, btrfs, tmpfs, overlayfs,
/// zfs, f2fs, ...).
///
/// On a shared file system inotify only sees this host's writes: helpers
/// must poll `open.ron` instead of watching it.
pub fn is_shared_fs(path: &Path) -> Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            Error::argument("path", format!("{} contains a NUL byte", path.display()))
        })?;
        // SAFETY: `c` is a valid C string and `st` a writable statfs buffer.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
            return Err(Error::io(path, io::Error::last_os_error()));
        }
        #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between targets
        let magic = st.f_type as u64 & 0xffff_ffff;
        Ok(is_shared_type(magic))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Ok(true)
    }
}

/// Known local file-system magic numbers (`statfs.f_type`).
const LOCAL_FS: &[u64] = &[
    0xef53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683e, // btrfs
    0x0102_1994, // tmpfs
    0x8584_58f6, // ramfs
    0x794c_7630, // overlayfs
    0x2fc1_2fc1, // zfs
    0xf2f5_2010, // f2fs
    0xca45_1a4e, // bcachefs
    0x3153_464a, // jfs
    0x5265_4973, // reiserfs
    0x3434,      // nilfs
    0x4d44,      // vfat / msdos
    0x2011_bab0, // exfat
    0x5346_544e, // ntfs
    0x7366_746e, // ntfs3
    0x9660,      // iso9660
    0x7371_7368, // squashfs
];

fn is_shared_type(magic: u64) -> bool {
    !LOCAL_FS.contains(&magic)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
/dev/vda / ext4 rw,relatime 0 0
srv:/home /home nfs4 rw,vers=4.2,local_lock=none 0 0
srv:/scratch /scratch nfs rw,vers=3,nolock,proto=tcp 0 0
srv:/scratch/x /scratch/x\\040y nfs4 rw,local_lock=flock 0 0
tmpfs /scratch/fast tmpfs rw 0 0
";

    #[test]
    fn mount_options_that_keep_locks_local_are_named() {
        let p = |s: &str| lock_problem_in(MOUNTS, Path::new(s));
        assert_eq!(p("/home/u/signals"), None);
        assert_eq!(p("/tmp"), None);
        assert_eq!(p("/scratch/fast/a"), None);
        let msg = p("/scratch/job").unwrap();
        assert!(msg.contains("`nolock`") && msg.contains("remount"), "{msg}");
        let msg = p("/scratch/x y/z").unwrap();
        assert!(
            msg.contains("`local_lock=flock`") && msg.contains("/scratch/x y"),
            "{msg}"
        );
        // A prefix that is not a path component does not match.
        assert_eq!(p("/scratchy"), None);
    }

    #[test]
    fn file_system_types() {
        assert!(!is_shared_type(0xef53));
        assert!(!is_shared_type(0x0102_1994));
        assert!(is_shared_type(0x6969)); // nfs
        assert!(is_shared_type(0x0bd0_0bd0)); // lustre
        assert!(is_shared_type(0x1234_5678)); // unknown
        assert!(is_shared_fs(Path::new("/no/such/dir")).is_err());
    }
}
