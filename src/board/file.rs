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
//! Rules followed here, because of what an NFS or FUSE client caches:
//! - every file is created at init; afterwards none is created, renamed or
//!   deleted, and `stat` or directory listings never decide anything;
//! - one descriptor per locked file per process, kept for the run, carries
//!   the lock (NFS turns `flock` into POSIX record locks); locks are only
//!   ever tried, in a loop with a sleeping back-off (a blocked NFSv4 lock
//!   may be re-polled only every 30 s);
//! - under the lock, the file is read through a fresh `open` (close-to-open
//!   revalidation: a kept descriptor may serve stale pages and a stale
//!   size), after a `statx` that asks the file system for the true size; a
//!   short or torn body is read again a few times before it is corrupt;
//! - the fresh descriptor must be on the file the kept one locks (device and
//!   inode), and the file's write number must not go back: otherwise the
//!   file was replaced, and that is reported;
//! - a locked update writes in place at offset 0 through the fresh
//!   descriptor, padded to a whole number of blocks (files never shrink, so
//!   a cached size rarely cuts a body) through descriptors opened with
//!   `O_DSYNC` (a write is durable when it returns), closes it, then unlocks;
//!   `open.ron` is also read without a lock (open, read, close), a torn body
//!   is then answered `None`.

use super::format::{self, Decoded};
use super::warn::Warnings;
use super::{Access, Board, Locked, OpenIndex, Sos, SosState, Take};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use fs2::FileExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

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

fn journal_path(job_dir: &Path, rank: usize) -> PathBuf {
    job_dir.join("journal").join(format!("{rank}.ron"))
}

fn sos_path(job_dir: &Path, rank: usize) -> PathBuf {
    job_dir.join("sos").join(format!("{rank}.ron"))
}

/// Options to open a signal file for reading and writing; `durable`: each
/// write returns once its data is on stable storage (`O_DSYNC`), one round
/// trip where a write and an `fsync` are two (on NFS a stable WRITE
/// instead of an unstable WRITE and a COMMIT).
fn read_write(durable: bool) -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if durable {
        options.custom_flags(libc::O_DSYNC);
    }
    options
}

/// Open an existing signal file for reading and (`durable`) writing (an
/// exclusive lock on NFS needs a descriptor open for writing).
fn open_rw(path: &Path, durable: bool) -> Result<File> {
    read_write(durable)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// Create `path` (it must not exist) holding `body`, on stable storage if
/// `durable`; the descriptor is returned open for reading and writing.
fn create_file<T: Serialize>(path: &Path, body: &T, durable: bool) -> Result<File> {
    let mut file = read_write(durable)
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
    let (id, _) = fresh_stat(&file).map_err(|e| Error::io(path, e))?;
    let text = format::encode_stamped(body, CREATED_WSEQ, id.ino);
    file.write_all(&format::pad(&text, format::padded_len(text.len(), 0)))
        .and_then(|()| if durable { file.sync_all() } else { Ok(()) })
        .map_err(|e| Error::io(path, e))?;
    Ok(file)
}

/// Read the whole file `path` (no lock) and decode it.
fn read_file<T: DeserializeOwned>(path: &Path) -> Result<Decoded<T>> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(match format::decode_record(&bytes, path)? {
        Decoded::Body(r) => Decoded::Body(r.body),
        Decoded::Torn(why) => Decoded::Torn(why),
    })
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
    for sub in ["sos", "journal", "log"] {
        let dir = job_dir.join(sub);
        fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    create_file(&job_path(job_dir), job, true)?;
    create_file(&index_path(job_dir), &OpenIndex::default(), true)?;
    Ok(())
}

/// Remove the signal files `rank` created on the board in `job_dir` (its
/// SOS record and its journal), once no rank reads the board any more: each
/// rank removes its own, as it created them, so that a job of thousands of
/// ranks does not wait for one rank's thousands of removals. A file already
/// gone is no error.
pub fn remove_own(job_dir: &Path, rank: usize) -> Result<()> {
    for path in [sos_path(job_dir, rank), journal_path(job_dir, rank)] {
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
            _ => {}
        }
    }
    Ok(())
}

/// `host` as a file name: ASCII letters, digits, `-` and `.` kept, every
/// other character `_`.
pub fn file_name_of(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Create the board of one host in `dir`, node-local (called by one rank
/// of the host, before the host's ranks [`join_host`](FileBoard::join_host)
/// it): the directory, readable by this user only, and its empty open
/// index. A `dir` already there is an [`Error::StaleJob`].
pub fn create_host_board(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| Error::io(parent, e))?;
    }
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Error::StaleJob {
                path: dir.to_owned(),
                reason: "the host's board already exists: a rank started twice?".into(),
            },
            _ => Error::io(dir, e),
        })?;
    for sub in ["sos", "journal"] {
        let d = dir.join(sub);
        fs::create_dir(&d).map_err(|e| Error::io(&d, e))?;
    }
    create_file(&index_path(dir), &OpenIndex::default(), false)?;
    Ok(())
}

/// Identity of an open file: device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

/// Identity and size of an open file, asking the file system itself rather
/// than the client's attribute cache where the kernel allows it
/// (`statx(AT_STATX_FORCE_SYNC)`: FUSE and NFS clients then refresh the
/// cached size, so that a following read is not cut by a stale one).
fn fresh_stat(file: &File) -> io::Result<(FileId, u64)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor, an empty C string with AT_EMPTY_PATH,
        // and a writable statx buffer.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::statx(
                file.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH | libc::AT_STATX_FORCE_SYNC,
                libc::STATX_INO | libc::STATX_SIZE,
                &mut st,
            )
        };
        if rc == 0 {
            let dev = libc::makedev(st.stx_dev_major, st.stx_dev_minor);
            #[allow(clippy::unnecessary_cast)] // dev_t's width differs between targets
            let id = FileId {
                dev: dev as u64,
                ino: st.stx_ino,
            };
            return Ok((id, st.stx_size));
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
            return Err(e);
        }
    }
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok((
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        },
        m.len(),
    ))
}

/// Re-reads of a short or torn body under the lock, each through a fresh
/// `open`, before it counts as corrupt, and the pause before each: all of
/// them for [`Access::Wait`] (the owner, who recovers), the first
/// [`TRY_REREADS`] for [`Access::Try`] (a helper, which only skips the file
/// and should not keep the lock from the owner).
const REREAD_PAUSES_MS: [u64; 4] = [5, 20, 60, 150];

/// Re-reads of a helper ([`Access::Try`]); see [`REREAD_PAUSES_MS`].
const TRY_REREADS: usize = 2;

/// After a [`Access::Try`] access found a file corrupt, further such
/// accesses answer the same error without touching the file for this long,
/// doubling up to [`MAX_SHUN`] while it stays corrupt: helpers must not
/// keep the lock from the owner that repairs it.
const FIRST_SHUN: Duration = Duration::from_millis(500);

/// The longest pause of [`FIRST_SHUN`].
const MAX_SHUN: Duration = Duration::from_secs(8);

/// Counts file operations, injects a storage latency before each, and
/// warns about long lock waits.
#[derive(Clone, Debug)]
struct Meter {
    ops: u64,
    delay: Duration,
    rank: usize,
    /// A lock wait longer than this prints a warning (then again with back-off).
    wait_warning: Duration,
    /// Re-reads of short or torn bodies under a lock (that then read whole).
    rereads: u64,
    /// Writes reach stable storage before they return (false on a
    /// node-local board: see [`FileBoard::join_host`]).
    durable: bool,
}

impl Meter {
    fn tick(&mut self) {
        self.ops += 1;
        if !self.delay.is_zero() {
            thread::sleep(self.delay);
        }
    }

    /// Take the exclusive lock of `file`: `false` if busy ([`Access::Try`]).
    ///
    /// [`Access::Wait`] tries again after sleeping 0.2 ms, doubling up to
    /// 20 ms: no spinning, and no blocking call (a blocked NFSv4 lock request
    /// may be retried by the client only every 30 s). After `wait_warning`
    /// one line names the file and the wait, then again after twice as
    /// long, and so on.
    fn lock(&mut self, file: &File, path: &Path, access: Access) -> Result<bool> {
        let mut backoff = Duration::from_micros(200);
        let start = Instant::now();
        let mut warn_at = self.wait_warning;
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
            let waited = start.elapsed();
            if waited >= warn_at {
                super::warn::print_line(&format!(
                    "soslb: warning: rank {}: waited {:.1} s for the lock of {}; still waiting",
                    self.rank,
                    waited.as_secs_f64(),
                    path.display()
                ));
                warn_at = waited * 2;
            }
            thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(20));
        }
    }

    fn unlock(&mut self, file: &File, path: &Path) -> Result<()> {
        self.tick();
        FileExt::unlock(file).map_err(|e| lock_error(path, e))
    }

    /// Open `path` afresh (the open revalidates what the client cached),
    /// for writing too if `write`, and learn its identity and true size.
    ///
    /// Reads open read-only: closing a descriptor open for writing would
    /// wake the watchers of the file as a write does.
    fn open_fresh(&mut self, path: &Path, write: bool) -> Result<(File, FileId, u64)> {
        self.tick();
        let file = if write {
            read_write(self.durable).open(path)
        } else {
            File::open(path)
        }
        .map_err(|e| Error::io(path, e))?;
        let (id, size) = fresh_stat(&file).map_err(|e| Error::io(path, e))?;
        Ok((file, id, size))
    }

    fn read(&mut self, mut file: &File, path: &Path) -> Result<Vec<u8>> {
        self.tick();
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| Error::io(path, e))?;
        Ok(bytes)
    }

    /// Rewrite `file` (a descriptor opened [`read_write`]) in place with
    /// `text` padded to its block size: one write, on stable storage when
    /// it returns if the board is durable. A file shrinks only past 64
    /// blocks: then a truncate (and on a durable board an `fsync`) follow.
    fn write(&mut self, mut file: &File, path: &Path, text: &str, size: u64) -> Result<()> {
        let io = |e| Error::io(path, e);
        let bytes = format::pad(text, format::padded_len(text.len(), size));
        self.tick();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&bytes))
            .map_err(io)?;
        if size > bytes.len() as u64 {
            self.tick();
            file.set_len(bytes.len() as u64).map_err(io)?;
            if self.durable {
                self.tick();
                file.sync_data().map_err(io)?;
            }
        }
        Ok(())
    }
}

/// One signal file of the job, as this rank sees it.
#[derive(Debug)]
struct Signal {
    path: PathBuf,
    /// The descriptor that carries the lock, kept for the run, and the
    /// identity of the file it was opened on. `None` until first used, or
    /// after the file was found replaced.
    kept: Option<(File, FileId)>,
    /// The highest write number this rank has read or written.
    wseq: u64,
    /// The file's size as the last fresh read under the lock (or this
    /// rank's last write) found it.
    size: u64,
    /// While locked: the record was read (a write is then the next write
    /// number; without a read it starts a new epoch).
    read_done: bool,
    locked: bool,
    /// How the lock was taken.
    access: Access,
    /// The kept descriptor is on a file that was replaced: drop it at unlock.
    replaced: bool,
    /// After a corrupt read by [`Access::Try`]: the error, and until when
    /// further such accesses answer it without touching the file.
    shunned: Option<(Instant, String)>,
    /// The next pause of [`FIRST_SHUN`].
    shun: Duration,
}

impl Signal {
    /// Create the file (it must not exist) holding `body` and keep its
    /// descriptor; its size.
    fn create<T: Serialize>(&mut self, body: &T, durable: bool) -> Result<u64> {
        let file = create_file(&self.path, body, durable)?;
        let (id, size) = fresh_stat(&file).map_err(|e| Error::io(&self.path, e))?;
        self.kept = Some((file, id));
        self.wseq = CREATED_WSEQ;
        Ok(size)
    }

    fn new(path: PathBuf) -> Signal {
        Signal {
            path,
            kept: None,
            wseq: 0,
            size: 0,
            read_done: false,
            locked: false,
            access: Access::Wait,
            replaced: false,
            shunned: None,
            shun: FIRST_SHUN,
        }
    }

    fn corrupt(&self, reason: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            reason,
        }
    }

    /// Step 1: take the lock of the kept descriptor (opened on first use).
    fn lock(&mut self, m: &mut Meter, access: Access) -> Result<Locked> {
        if self.locked {
            return Err(Error::Internal(format!(
                "{} locked twice by one rank",
                self.path.display()
            )));
        }
        if self.kept.is_none() {
            m.tick();
            let file = open_rw(&self.path, m.durable)?;
            let (id, _) = fresh_stat(&file).map_err(|e| Error::io(&self.path, e))?;
            self.kept = Some((file, id));
        }
        let Some((file, _)) = &self.kept else {
            return Err(Error::Internal("kept descriptor vanished".into()));
        };
        if !m.lock(file, &self.path, access)? {
            return Ok(Locked::Busy);
        }
        self.locked = true;
        self.access = access;
        Ok(Locked::Done)
    }

    fn require_lock(&self, what: &str) -> Result<()> {
        if self.locked {
            Ok(())
        } else {
            Err(Error::Internal(format!(
                "{what} of {} without its lock",
                self.path.display()
            )))
        }
    }

    /// Open the file afresh under the lock and check that it is the file
    /// whose descriptor holds the lock: a file put in place by `rename`
    /// (`cp` + `mv`, `sed -i`, a restore) is not, and is reported replaced.
    fn open_fresh(&mut self, m: &mut Meter, write: bool) -> Result<(File, u64)> {
        let (file, id, size) = m.open_fresh(&self.path, write)?;
        let kept = self.kept.as_ref().map(|k| k.1);
        if kept != Some(id) {
            self.replaced = true;
            return Err(self.corrupt(format!(
                "replaced: the file at this path is not the one this rank locked (inode {} \
                 instead of {}): another file was put in place by rename (cp and mv, sed -i, \
                 a restore?) while the job ran",
                id.ino,
                kept.map_or(0, |k| k.ino)
            )));
        }
        Ok((file, size))
    }

    /// Step 2: read and decode the record under the lock, through a fresh
    /// `open`. A short or torn body is read again a few times, each through
    /// a fresh `open`, before it is [`Error::Corrupt`]; so is a file
    /// replaced, or whose write number went back.
    fn read<T: DeserializeOwned>(&mut self, m: &mut Meter) -> Result<T> {
        self.require_lock("a read")?;
        self.read_done = false;
        let mut attempt = 0;
        let record = loop {
            let (file, size) = self.open_fresh(m, false)?;
            self.size = size;
            let bytes = m.read(&file, &self.path)?;
            drop(file);
            match format::decode_record::<T>(&bytes, &self.path)? {
                Decoded::Body(r) => {
                    if attempt > 0 {
                        m.rereads += 1;
                    }
                    break r;
                }
                Decoded::Torn(reason) => {
                    let rereads = match self.access {
                        Access::Wait => REREAD_PAUSES_MS.len(),
                        Access::Try => TRY_REREADS,
                    };
                    let pause = REREAD_PAUSES_MS.get(attempt).filter(|_| attempt < rereads);
                    let Some(&pause) = pause else {
                        return Err(self.corrupt(format!(
                            "{reason}, although read under the file's lock, {} times through \
                             fresh opens",
                            attempt + 1
                        )));
                    };
                    attempt += 1;
                    thread::sleep(Duration::from_millis(pause));
                }
            }
        };
        if record.wseq < self.wseq {
            return Err(self.corrupt(format!(
                "replaced: its write number went back from {} to {}: an older copy of the file \
                 was put in place while the job ran (cp, mv, sed -i, a restore?)",
                self.wseq, record.wseq
            )));
        }
        let ino = self.kept.as_ref().map_or(0, |k| k.1.ino);
        if record.ino != 0 && record.ino != ino {
            self.replaced = true;
            return Err(self.corrupt(format!(
                "replaced: the record was written to the file of inode {}, but the file at this \
                 path is inode {ino}: a copy was put in place by rename (cp and mv, sed -i, a \
                 restore?) while the job ran",
                record.ino
            )));
        }
        self.wseq = record.wseq;
        self.read_done = true;
        Ok(record.body)
    }

    /// Step 3: write `body` under the lock, in place. After a
    /// [`Signal::read`] (which proved the file at the path is the locked
    /// one) it is the next write number, written through the kept
    /// descriptor; without one (a reset) it goes through a fresh `open` of
    /// the locked file as the first write of a new epoch, above every
    /// number any rank can remember.
    fn write<T: Serialize>(&mut self, m: &mut Meter, body: &T) -> Result<()> {
        self.require_lock("a write")?;
        if self.read_done {
            return self.write_kept(m, body, self.wseq + 1);
        }
        let (file, size) = self.open_fresh(m, true)?;
        let wseq = ((self.wseq >> 32) + 1) << 32;
        let ino = self.kept.as_ref().map_or(0, |k| k.1.ino);
        let text = format::encode_stamped(body, wseq, ino);
        m.write(&file, &self.path, &text, size)?;
        self.size = format::padded_len(text.len(), size) as u64;
        self.wseq = wseq;
        self.read_done = true;
        Ok(())
    }

    /// Write `body` as write number `wseq` through the kept descriptor,
    /// over a file of the size last seen.
    fn write_kept<T: Serialize>(&mut self, m: &mut Meter, body: &T, wseq: u64) -> Result<()> {
        let Some((file, id)) = &self.kept else {
            return Err(Error::Internal("kept descriptor vanished".into()));
        };
        let text = format::encode_stamped(body, wseq, id.ino);
        m.write(file, &self.path, &text, self.size)?;
        self.size = format::padded_len(text.len(), self.size) as u64;
        self.wseq = wseq;
        self.read_done = true;
        Ok(())
    }

    /// Rewrite a file only this rank writes (its journal) without its
    /// lock, through the kept descriptor: readers read it unlocked and
    /// read a body caught mid-write again.
    fn write_own<T: Serialize>(&mut self, m: &mut Meter, body: &T) -> Result<()> {
        self.write_kept(m, body, self.wseq + 1)
    }

    /// Step 4: release the lock (a fresh descriptor is closed first; a kept
    /// descriptor on a replaced file is dropped, so the next lock is taken
    /// on the file now at the path).
    fn unlock(&mut self, m: &mut Meter) -> Result<()> {
        self.require_lock("an unlock")?;
        self.read_done = false;
        self.locked = false;
        let Some((file, _)) = &self.kept else {
            return Err(Error::Internal("kept descriptor vanished".into()));
        };
        let r = m.unlock(file, &self.path);
        if std::mem::take(&mut self.replaced) {
            self.kept = None;
        }
        r
    }

    /// Lock, run `body`, unlock (also after an error or a panic).
    fn locked<R>(
        &mut self,
        m: &mut Meter,
        access: Access,
        body: impl FnOnce(&mut Self, &mut Meter) -> Result<R>,
    ) -> Result<Option<R>> {
        if self.lock(m, access)? == Locked::Busy {
            return Ok(None);
        }
        /// Releases the lock if `body` panics.
        struct Guard(Option<std::os::fd::RawFd>);
        impl Drop for Guard {
            fn drop(&mut self) {
                if let Some(fd) = self.0 {
                    // SAFETY: flock on a descriptor that is open (owned by
                    // the kept File, which outlives this guard).
                    unsafe { libc::flock(fd, libc::LOCK_UN) };
                }
            }
        }
        let result = {
            use std::os::fd::AsRawFd;
            // The kept descriptor stays open while `body` runs (it is only
            // dropped at unlock); a panic unlocks it.
            let mut guard = Guard(self.kept.as_ref().map(|k| k.0.as_raw_fd()));
            let r = body(self, m);
            guard.0 = None;
            r
        };
        let unlocked = self.unlock(m);
        let r = result?;
        unlocked.map(|()| Some(r))
    }

    /// Under the lock: read the record, `check` it, run `f`, and write it
    /// back if it changed.
    fn update<T>(
        &mut self,
        m: &mut Meter,
        access: Access,
        check: impl Fn(&T) -> Result<()>,
        f: &mut dyn FnMut(&mut T),
    ) -> Result<Locked>
    where
        T: Serialize + DeserializeOwned + PartialEq + Clone,
    {
        // The same words as the first time: the warnings' rate limit folds them.
        if access == Access::Try
            && let Some((until, reason)) = &self.shunned
            && Instant::now() < *until
        {
            return Err(self.corrupt(reason.clone()));
        }
        let done = self.locked(m, access, |s, m| {
            let mut record: T = s.read(m)?;
            check(&record)?;
            let before = record.clone();
            f(&mut record);
            if record != before {
                s.write(m, &record)?;
            }
            Ok(())
        });
        match &done {
            Err(Error::Corrupt { reason, .. }) if access == Access::Try => {
                self.shunned = Some((Instant::now() + self.shun, reason.clone()));
                self.shun = (self.shun * 2).min(MAX_SHUN);
            }
            Ok(Some(())) => {
                self.shunned = None;
                self.shun = FIRST_SHUN;
            }
            _ => {}
        }
        Ok(if done?.is_some() {
            Locked::Done
        } else {
            Locked::Busy
        })
    }

    /// Overwrite the record without reading it (the recovery from a corrupt
    /// or replaced file): the lock is taken on the file now at the path.
    fn reset<T: Serialize>(&mut self, m: &mut Meter, body: &T) -> Result<()> {
        for _ in 0..3 {
            let r = self.locked(m, Access::Wait, |s, m| s.write(m, body));
            match r {
                Err(Error::Corrupt { .. }) if self.kept.is_none() => continue,
                r => return r.map(drop),
            }
        }
        Err(self.corrupt("replaced again and again while this rank reset it".into()))
    }

    /// Read the record without the lock (open, read, close: the open
    /// revalidates). `None` when a write was caught midway.
    ///
    /// With `identity`, a record written to another file than the one at
    /// the path (its writer kept the file that was then replaced) is
    /// [`Error::Corrupt`]. Without, no `statx`: a helper's poll should cost
    /// the server one open and one read; a body cut by a cached size is
    /// torn, read again later.
    fn read_unlocked<T: DeserializeOwned>(
        &mut self,
        m: &mut Meter,
        identity: bool,
    ) -> Result<Option<T>> {
        m.tick();
        let file = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let bytes = m.read(&file, &self.path)?;
        let ino = if identity {
            fresh_stat(&file)
                .map_err(|e| Error::io(&self.path, e))?
                .0
                .ino
        } else {
            0
        };
        drop(file);
        match format::decode_record::<T>(&bytes, &self.path)? {
            Decoded::Body(r) if identity && r.ino != 0 && r.ino != ino => {
                Err(self.corrupt(format!(
                    "replaced: written by its rank to the file of inode {}, but the file at \
                     this path is inode {ino} (cp and mv, sed -i, a restore?)",
                    r.ino
                )))
            }
            Decoded::Body(r) if r.wseq < self.wseq => Err(self.corrupt(format!(
                "replaced: its write number went back from {} to {}: an older copy of the file \
                 was put in place while the job ran (cp, mv, sed -i, a restore?)",
                self.wseq, r.wseq
            ))),
            Decoded::Body(r) => {
                self.wseq = r.wseq;
                Ok(Some(r.body))
            }
            Decoded::Torn(_) => Ok(None),
        }
    }

    /// Read the file without its lock and without the checks of identity
    /// and write number (an unlocked read may be older than the last one):
    /// its body if whole, `None` if not.
    fn peek<T: DeserializeOwned>(&self, m: &mut Meter) -> Result<Option<T>> {
        m.tick();
        let file = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let bytes = m.read(&file, &self.path)?;
        Ok(match format::decode_record::<T>(&bytes, &self.path) {
            Ok(Decoded::Body(r)) => Some(r.body),
            _ => None,
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
///
/// # What a locked access guarantees
///
/// A locked access ([`Board::with_sos`], [`Board::with_index`]) takes the
/// lock on the kept descriptor, then reads through a fresh `open` (which
/// revalidates what the client cached), after asking the file system for
/// the file's true size (`statx` with `AT_STATX_FORCE_SYNC`). A short or
/// torn body is read again a few times, each time through a fresh `open`,
/// before it is reported corrupt. It then checks that the file at the path
/// is still the one whose descriptor holds the lock (device and inode), and
/// that the file's write number has not gone back below the highest this
/// rank has seen: a file replaced by `rename`, or an older copy written
/// over it, is an [`Error::Corrupt`] whose reason says "replaced". Writes
/// go through the fresh descriptor, padded to a multiple of
/// [`format::BLOCK`] bytes (a file never shrinks), durable when the write
/// returns (the descriptors are opened with `O_DSYNC`), then the
/// lock is released.
///
/// The single steps of [`Board::with_sos`] are public too ([`FileBoard::lock_sos`],
/// [`FileBoard::read_sos`], [`FileBoard::write_sos`], [`FileBoard::unlock_sos`]),
/// so that tests can interleave the steps of several ranks.
#[derive(Debug)]
pub struct FileBoard {
    dir: PathBuf,
    rank: usize,
    /// The SOS files, by rank.
    sos: Vec<Signal>,
    /// `open.ron`.
    index: Signal,
    meter: Meter,
    warnings: Warnings,
    /// This rank's journal, `journal/<rank>.ron`: every take it made.
    journal: Signal,
    takes: Vec<Take>,
    /// The journal's own meter (it is written while an SOS file is locked).
    journal_meter: Meter,
    /// Extra delay per operation on each rank's SOS file ([`FileBoard::with_delays_to`]).
    delay_to: Vec<Duration>,
    /// The node-local directory of the hosts' copies of the open index
    /// ([`FileBoard::with_host_dir`]), and whether it was found to be a
    /// directory of this user.
    host_dir: Option<PathBuf>,
    host_dir_checked: bool,
}

/// A host's copy of the open index ([`Board::write_host_index`]).
#[derive(Serialize, Deserialize)]
struct HostCopy {
    /// When a rank of the host read the index from the shared storage,
    /// seconds since the job's start.
    read_at: f64,
    index: OpenIndex,
}

impl FileBoard {
    /// Join the job in `job_dir` (created by rank 0 with [`create_job`]) as
    /// `rank` of `ranks`: create this rank's SOS file (closed, sequence 0)
    /// and its journal. Each creation counts as the four file operations it
    /// makes (create, stat, write, `fsync`).
    ///
    /// An SOS file already there is an [`Error::StaleJob`].
    pub fn join(job_dir: &Path, rank: usize, ranks: usize) -> Result<FileBoard> {
        FileBoard::attach(job_dir, rank, ranks)?.create_own()
    }

    /// Join the board of one host in `dir` (made by [`create_host_board`]
    /// on node-local storage) as [`join`](FileBoard::join) does, but
    /// without waiting for stable storage: its files are read and written
    /// only by the host's ranks, through one page cache, and are lost with
    /// the host as those ranks are. (An `O_DSYNC` write to a node's disk
    /// costs about 0.5 ms against 5 µs.)
    pub fn join_host(dir: &Path, rank: usize, ranks: usize) -> Result<FileBoard> {
        FileBoard::open(dir, rank, ranks, false)?.create_own()
    }

    /// Create this rank's SOS file and journal.
    fn create_own(mut self) -> Result<FileBoard> {
        let (rank, durable) = (self.rank, self.meter.durable);
        let own = Sos {
            rank,
            ..Sos::default()
        };
        self.sos[rank].create(&own, durable)?;
        self.journal.size = self.journal.create(&Vec::<Take>::new(), durable)?;
        // (Two of those are the `fsync`s of a durable board.)
        self.meter.ops += if durable { JOIN_OPS } else { JOIN_OPS - 2 };
        Ok(self)
    }

    /// Join the job in `job_dir` as `rank` of `ranks` without files of its
    /// own: for a rank that never posts an SOS on this board nor takes from
    /// one (the shared board of a job whose hosts trade through MPI,
    /// [`crate::transfer::on`]), so that a job of 10,000 ranks does not
    /// create 20,000 files on the shared storage at its start. A post, or a
    /// take (which writes this rank's journal), is then an error.
    pub fn attach(job_dir: &Path, rank: usize, ranks: usize) -> Result<FileBoard> {
        FileBoard::open(job_dir, rank, ranks, true)
    }

    /// The board in `job_dir` as `rank` of `ranks` sees it, without files
    /// of its own; `durable`: writes wait for stable storage.
    fn open(job_dir: &Path, rank: usize, ranks: usize, durable: bool) -> Result<FileBoard> {
        if rank >= ranks {
            return Err(Error::argument(
                "rank",
                format!("rank {rank} is not below ranks = {ranks}"),
            ));
        }
        let mut index = Signal::new(index_path(job_dir));
        let file = open_rw(&index.path, durable)?;
        let (id, _) = fresh_stat(&file).map_err(|e| Error::io(&index.path, e))?;
        index.kept = Some((file, id));
        let sos: Vec<Signal> = (0..ranks)
            .map(|r| Signal::new(sos_path(job_dir, r)))
            .collect();
        let meter = Meter {
            ops: 0,
            delay: Duration::ZERO,
            rank,
            wait_warning: DEFAULT_WAIT_WARNING,
            rereads: 0,
            durable,
        };
        Ok(FileBoard {
            dir: job_dir.to_owned(),
            rank,
            sos,
            index,
            journal_meter: meter.clone(),
            delay_to: Vec::new(),
            meter,
            warnings: Warnings::new(rank),
            journal: Signal::new(journal_path(job_dir, rank)),
            takes: Vec::new(),
            host_dir: None,
            host_dir_checked: false,
        })
    }

    /// Keep the hosts' copies of the open index in `dir` (created at the
    /// first copy, readable by this user only), which should be
    /// node-local: `<dir>/<host>.ron`. Without it there are no copies and
    /// every rank reads the shared index. A `dir` that is not a directory
    /// of this user (another user's, or a link) is never used: an error.
    pub fn with_host_dir(mut self, dir: &Path) -> Self {
        self.host_dir = Some(dir.to_owned());
        self
    }

    /// Whether the directory of the hosts' copies is there (made if
    /// `create`), and an error if it is not a directory of this user.
    fn host_dir_ready(&mut self, create: bool) -> Result<bool> {
        let Some(dir) = &self.host_dir else {
            return Ok(false);
        };
        if self.host_dir_checked {
            return Ok(true);
        }
        if create {
            // (An error shows below: the directory is then missing or not ours.)
            super::node::make(dir);
        }
        let meta = match fs::symlink_metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(false),
            r => r.map_err(|e| Error::io(dir, e))?,
        };
        if !super::node::is_own_dir(&meta) {
            let why = format!(
                "not a directory of user {}: the hosts' copies of the index are not kept there",
                super::node::uid()
            );
            return Err(Error::io(
                dir,
                io::Error::new(io::ErrorKind::PermissionDenied, why),
            ));
        }
        self.host_dir_checked = true;
        Ok(true)
    }

    /// Where the copy of the open index for `host` is kept, if copies are.
    pub fn host_copy_path(&self, host: &str) -> Option<PathBuf> {
        let name = file_name_of(host);
        Some(self.host_dir.as_ref()?.join(format!("{name}.ron")))
    }

    /// Sleep `d` before every file operation: emulated storage latency, for tests.
    pub fn with_delay(mut self, d: Duration) -> Self {
        self.meter.delay = d;
        self.journal_meter.delay = d;
        self
    }

    /// Sleep `extra[r]` more before every operation on the SOS file of rank
    /// `r`: a slower path to another site's storage, for tests.
    pub fn with_delays_to(mut self, extra: Vec<Duration>) -> Self {
        self.delay_to = extra;
        self
    }

    /// Warn on stderr when a lock has been waited for `d` (default 10 s):
    /// `soslb: warning: rank R: waited N s for the lock of <path>; still
    /// waiting`, then again each time the wait has doubled.
    pub fn with_wait_warning(mut self, d: Duration) -> Self {
        self.meter.wait_warning = d;
        self.journal_meter.wait_warning = d;
        self
    }

    /// Print `soslb: warning: rank R: <message>` on stderr as one whole
    /// line, unless the same problem (the message up to its digits) was
    /// printed recently: repeats come after 5 s, 10 s, 20 s, ... at most
    /// every 10 minutes, with the number left out. True if printed.
    pub fn warn(&mut self, message: &str) -> bool {
        self.warnings.warn(message)
    }

    /// Number of locked reads that found a short or torn body and read it
    /// whole on a later try (through a fresh `open`).
    pub fn rereads(&self) -> u64 {
        self.meter.rereads
    }

    /// This handle's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The job directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Time one read of `job.ron` (open, read: two operations, each with
    /// the emulated delay) in a thread of its own, so that the caller
    /// spends no file time on it: the storage cost the state machine needs
    /// before its first decision (a read at init in the caller cost every
    /// rank 0.45 s at 0.2 s per operation). The seconds arrive on the
    /// channel; nothing does if the read or the thread fails (the cost is
    /// then learnt at the first consultation). `job.ron` is not locked
    /// after init's lock probe, so closing this descriptor drops no lock.
    pub fn probe_storage(&self) -> mpsc::Receiver<f64> {
        let (tx, rx) = mpsc::channel();
        let (path, delay) = (job_path(&self.dir), self.meter.delay);
        let _ = thread::Builder::new()
            .name("soslb-probe".into())
            .spawn(move || {
                let t = Instant::now();
                thread::sleep(2 * delay);
                if fs::read(&path).is_ok() {
                    let _ = tx.send(t.elapsed().as_secs_f64());
                }
            });
        rx
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

    /// First step of [`Board::with_sos`]: take the lock of the SOS file of
    /// `rank` ([`Locked::Busy`] if held elsewhere and `access` is
    /// [`Access::Try`]).
    pub fn lock_sos(&mut self, rank: usize, access: Access) -> Result<Locked> {
        signal_of(&mut self.sos, rank)?.lock(&mut self.meter, access)
    }

    /// Second step: read the locked SOS file of `rank` (fresh, whole,
    /// checked; see the type's documentation).
    pub fn read_sos(&mut self, rank: usize) -> Result<Sos> {
        let s = signal_of(&mut self.sos, rank)?;
        let sos: Sos = s.read(&mut self.meter)?;
        check_sos(&sos, rank, &s.path)?;
        Ok(sos)
    }

    /// Third step: write the locked SOS file of `sos.rank` (after a
    /// [`FileBoard::read_sos`], or without one as a reset).
    pub fn write_sos(&mut self, sos: &Sos) -> Result<()> {
        signal_of(&mut self.sos, sos.rank)?.write(&mut self.meter, sos)
    }

    /// Last step: release the lock of the SOS file of `rank`.
    pub fn unlock_sos(&mut self, rank: usize) -> Result<()> {
        signal_of(&mut self.sos, rank)?.unlock(&mut self.meter)
    }
}

/// The signal file of `rank`.
fn signal_of(sos: &mut [Signal], rank: usize) -> Result<&mut Signal> {
    let ranks = sos.len();
    sos.get_mut(rank)
        .ok_or_else(|| Error::argument("rank", format!("rank {rank} is not below ranks = {ranks}")))
}

/// The write number of a file just created.
const CREATED_WSEQ: u64 = 1;

/// The file operations of [`FileBoard::join`]'s creation of a rank's SOS
/// file and journal: create, stat, write and `fsync` each.
pub const JOIN_OPS: u64 = 8;

/// The default of [`FileBoard::with_wait_warning`].
pub const DEFAULT_WAIT_WARNING: Duration = Duration::from_secs(10);

impl Board for FileBoard {
    fn with_sos(
        &mut self,
        rank: usize,
        access: Access,
        f: &mut dyn FnMut(&mut Sos),
    ) -> Result<Locked> {
        let meter = &mut self.meter;
        let signal = signal_of(&mut self.sos, rank)?;
        let path = signal.path.clone();
        let (journal, takes, journal_meter) =
            (&mut self.journal, &mut self.takes, &mut self.journal_meter);
        let mut changed_rank = None;
        let mut journal_error = None;
        let journaled = takes.len();
        let extra = self.delay_to.get(rank).copied().unwrap_or_default();
        meter.delay += extra;
        let locked = signal.update(
            meter,
            access,
            |s| check_sos(s, rank, &path),
            &mut |s: &mut Sos| {
                let before = s.clone();
                f(s);
                if s.rank != rank {
                    changed_rank = Some(s.rank);
                    s.rank = rank;
                }
                // The takes go to this rank's journal before the record is
                // written; if they cannot, the record stays as it was.
                let new = s.aids.get(before.aids.len()..).unwrap_or_default();
                if !new.is_empty() {
                    let n = takes.len();
                    takes.extend(new.iter().map(|a| Take {
                        owner: rank,
                        seq: s.seq,
                        ids: a.ids.clone(),
                    }));
                    if let Err(e) = journal.write_own(journal_meter, &*takes) {
                        takes.truncate(n);
                        *s = before;
                        journal_error = Some(e);
                    }
                }
            },
        );
        meter.delay -= extra;
        // Takes journaled for a record that was then not written (the file
        // was found replaced, the write failed) did not happen: the journal
        // must not say they did, or a recovery would drop those ids.
        let locked = match locked {
            Err(e) if takes.len() > journaled => {
                takes.truncate(journaled);
                if let Err(j) = journal.write_own(journal_meter, &*takes) {
                    return Err(Error::Internal(format!(
                        "{e}; and this rank's journal still lists the takes that failed: {j}"
                    )));
                }
                return Err(e);
            }
            r => r?,
        };
        if let Some(e) = journal_error {
            return Err(e);
        }
        match changed_rank {
            Some(r) => Err(Error::Internal(format!(
                "an update of the SOS of rank {rank} set its rank to {r}"
            ))),
            None => Ok(locked),
        }
    }

    fn reset_sos(&mut self, sos: &Sos) -> Result<()> {
        signal_of(&mut self.sos, sos.rank)?.reset(&mut self.meter, sos)
    }

    fn reset_index(&mut self) -> Result<()> {
        self.index.reset(&mut self.meter, &OpenIndex::default())
    }

    fn with_index(&mut self, access: Access, f: &mut dyn FnMut(&mut OpenIndex)) -> Result<Locked> {
        self.index.update(&mut self.meter, access, |_| Ok(()), f)
    }

    fn read_index(&mut self) -> Result<Option<OpenIndex>> {
        self.index.read_unlocked(&mut self.meter, false)
    }

    fn peek_sos(&mut self, rank: usize) -> Result<Option<Sos>> {
        let extra = self.delay_to.get(rank).copied().unwrap_or_default();
        let signal = signal_of(&mut self.sos, rank)?;
        self.meter.delay += extra;
        let peeked = signal.peek(&mut self.meter);
        self.meter.delay -= extra;
        Ok(peeked?.filter(|s| check_sos(s, rank, &signal.path).is_ok()))
    }

    fn read_host_index(&mut self, host: &str) -> Result<Option<(OpenIndex, f64)>> {
        let Some(path) = self.host_copy_path(host) else {
            return Ok(None);
        };
        if !self.host_dir_ready(false)? {
            return Ok(None);
        }
        match read_file::<HostCopy>(&path) {
            Ok(Decoded::Body(c)) => Ok(Some((c.index, c.read_at))),
            // (Written by rename: never torn, unless by something else.)
            Ok(Decoded::Torn(_)) => Ok(None),
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_host_index(&mut self, host: &str, index: &OpenIndex, at: f64) -> Result<()> {
        let Some(path) = self.host_copy_path(host) else {
            return Ok(());
        };
        self.host_dir_ready(true)?;
        // Written aside, then renamed over the copy: readers on the host
        // see the old copy or the new one, whole.
        let aside = path.with_extension(format!("{}.new", self.rank));
        let copy = HostCopy {
            read_at: at,
            index: index.clone(),
        };
        fs::write(&aside, format::encode(&copy))
            .and_then(|()| fs::rename(&aside, &path))
            .map_err(|e| Error::io(&path, e))
    }

    fn ops(&self) -> u64 {
        self.meter.ops + self.journal_meter.ops
    }

    fn journaled_takes(&mut self, owner: usize, seq: u64) -> Result<IdSet> {
        let mut ids = IdSet::new();
        for r in (0..self.sos.len()).filter(|&r| r != owner) {
            let mut journal = Signal::new(journal_path(&self.dir, r));
            // A body caught mid-write is read again; its writer is quick.
            let mut takes = None;
            for attempt in 0..50 {
                takes = journal.read_unlocked::<Vec<Take>>(&mut self.meter, true)?;
                if takes.is_some() {
                    break;
                }
                thread::sleep(Duration::from_millis(2 << attempt.min(5)));
            }
            let takes = takes.ok_or_else(|| {
                journal.corrupt("torn on every read: the truth of what it took is lost".into())
            })?;
            for t in takes.iter().filter(|t| t.owner == owner && t.seq == seq) {
                ids.extend(&t.ids);
            }
        }
        Ok(ids)
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
    let file = open_rw(&path, true)?;
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
    let file = open_rw(&path, true)?;
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
