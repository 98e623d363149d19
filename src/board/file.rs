//! The product's board: signal files on a directory (DESIGN §6), correct on
//! any file system that gives an atomic exclusive create: NFS v3 and v4,
//! Lustre, GPFS, BeeGFS, CephFS, FUSE, local ones; with or without working
//! locks, whatever the clients cache. Where each file lives, and a run's
//! directory from its creation to its end: [`super::layout`].
//!
//! - A claim is an `open(O_CREAT | O_EXCL)`: the server gives the name to
//!   one create and answers `EEXIST` to every other, whatever the clients
//!   remember. That answer is the only one that says a slot is taken.
//! - Every file that changes is written aside (`<name>.<rank>.new`) and
//!   renamed over its name: a reader's `open` finds an old body or a new
//!   one, whole. Bodies carry a checksum; one that fails it is an error
//!   naming the file, never read as empty.
//! - A directory (or anything else) found where a file is to be renamed is
//!   moved aside to `<name>.damaged.<rank>.<n>` and reported.
//! - Nothing is locked or `stat`ed; a listing of an owner's claims is a
//!   hint, never the answer that a slot is taken.
//! - Each file has one writer. The index has many: each owner lists itself,
//!   reads the index back and lists itself again if a concurrent writer
//!   undid it ([`crate::clerk`]). A write makes the changes the owner's
//!   host-mates want too, which they leave in node-local files beside the
//!   host's copy of the index (`<host>.wanted/<rank>.ron`,
//!   [`Board::wanted`]): the ranks of a host move together, and would
//!   otherwise undo one another.
//! - Damage is reported with the path and got round: garbage or an empty
//!   body in an SOS file or `open.ron`, a stale copy renamed over one, a
//!   directory in its place (the owner writes it anew at its next refresh).
//!   A claim file deleted by hand can let its ids be computed twice (made
//!   again by another rank, or its ids posted anew by an owner that had
//!   not yet learnt of the claim): `finalize`'s audit fails on every rank,
//!   and the rank whose claim it was names the file. A claim directory that
//!   cannot be written (`chattr +i`) ends with every id once, or with an
//!   error on every rank naming it.

use super::format;
pub use super::layout::{JobInfo, create_host_board, create_job, file_name_of, remove_own};
use super::layout::{claim_path, index_path, job_path, sos_path};
use super::{Board, Claimed, Probe, Wanted};
use crate::error::{Error, Result};
use crate::protocol::{Claim, Entry, Index, Slot, Sos, SosState};
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Claims sent at once at most: the RPC slots an NFS client has had in
/// flight by default.
const IN_FLIGHT: usize = 16;

/// Sleep an emulated latency (none in a build without emulation).
fn sleep_latency(d: Duration) {
    if !d.is_zero() {
        thread::sleep(d);
    }
}

/// Claim `claim.slot` under `dir` by an exclusive create (a plain one
/// when `plain`, a fault for tests): the result, and a note when the
/// claim won but its body could not be written.
fn create_claim(dir: &Path, claim: &Claim, plain: bool) -> (Result<Claimed>, Option<String>) {
    let path = claim_path(dir, claim.owner, &claim.slot);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    if plain {
        options.create_new(false).create(true).truncate(true);
    }
    // The owner's directory of claims is made by the first claim.
    let mut opened = options.open(&path);
    if let (Err(e), Some(dir)) = (&opened, path.parent())
        && e.kind() == io::ErrorKind::NotFound
    {
        match fs::create_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return (Err(Error::io(dir, e)), None);
            }
            _ => opened = options.open(&path),
        }
    }
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return (Ok(Claimed::Lost), None),
        Err(e) => return (Err(Error::io(&path, e)), None),
    };
    // The create decided; the body only tells who and when.
    let note = (file.write_all(format::encode(claim).as_bytes()).err()).map(|e| {
        format!(
            "{}: claimed, but its body could not be written: {e}",
            path.display()
        )
    });
    (Ok(Claimed::Won), note)
}

/// Replace the node-local file at `path` with `body`, written aside by
/// `rank` and renamed over it: no storage operation, no emulated latency.
fn replace_local<T: Serialize>(path: &Path, body: &T, rank: usize) -> Result<()> {
    let aside = path.with_extension(format!("{rank}.new"));
    fs::write(&aside, format::encode(body))
        .and_then(|()| fs::rename(&aside, path))
        .map_err(|e| Error::io(path, e))
}

/// A fault to inject, for the tests that prove the protocol needs what it
/// relies on.
#[cfg(any(test, feature = "emulate"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Claims by a plain create (`O_CREAT | O_TRUNC`, no `O_EXCL`): every
    /// contender "wins".
    PlainCreate,
}

/// One rank's handle on the signal files of a board.
#[derive(Debug)]
pub struct FileBoard {
    dir: PathBuf,
    rank: usize,
    ops: u64,
    /// Emulated storage latency before every operation, and more before
    /// those on the files of each rank's SOS (a farther site).
    #[cfg(feature = "emulate")]
    delay: Duration,
    #[cfg(feature = "emulate")]
    delay_to: Vec<Duration>,
    #[cfg(any(test, feature = "emulate"))]
    fault: Option<Fault>,
    /// Problems met and got round (an obstacle moved aside), for the caller
    /// to report.
    notes: Vec<String>,
    /// Obstacles moved aside so far (their names are numbered).
    moved: u64,
    /// The node-local directory of the hosts' copies of the index, and
    /// whether it was found to be a directory of this user.
    host_dir: Option<PathBuf>,
    host_dir_checked: bool,
    /// The post sent last ([`Board::post_sent`]), until [`Board::landed`].
    in_flight: Option<InFlight>,
}

/// A post sent ahead: written on a second handle, or landed.
#[derive(Debug)]
enum InFlight {
    Writing(thread::JoinHandle<(Result<()>, FileBoard)>),
    Landed(Result<()>),
}

/// A host's copy of the open index ([`Board::write_host_index`]).
#[derive(Serialize, Deserialize)]
struct HostCopy {
    /// When a rank of the host read the index from the board, seconds
    /// since the job's start.
    read_at: f64,
    index: Index,
}

impl FileBoard {
    /// `rank`'s handle on the board in `dir` (made by [`create_job`] or
    /// [`create_host_board`]). Nothing is created: a rank's SOS file
    /// appears at its first post.
    pub fn open(dir: &Path, rank: usize) -> Result<FileBoard> {
        let meta = fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::io(
                dir,
                io::Error::new(io::ErrorKind::NotADirectory, "the board is not a directory"),
            ));
        }
        Ok(FileBoard::at(dir.to_owned(), rank))
    }

    /// `rank`'s handle on `dir`, as yet unused.
    fn at(dir: PathBuf, rank: usize) -> FileBoard {
        FileBoard {
            dir,
            rank,
            ops: 0,
            #[cfg(feature = "emulate")]
            delay: Duration::ZERO,
            #[cfg(feature = "emulate")]
            delay_to: Vec::new(),
            #[cfg(any(test, feature = "emulate"))]
            fault: None,
            notes: Vec::new(),
            moved: 0,
            host_dir: None,
            host_dir_checked: false,
            in_flight: None,
        }
    }

    /// A second handle of this rank's on the same signal files.
    fn second(&self) -> FileBoard {
        FileBoard {
            #[cfg(feature = "emulate")]
            delay: self.delay,
            #[cfg(feature = "emulate")]
            delay_to: self.delay_to.clone(),
            #[cfg(any(test, feature = "emulate"))]
            fault: self.fault,
            moved: self.moved,
            ..FileBoard::at(self.dir.clone(), self.rank)
        }
    }

    /// Keep the hosts' copies of the open index in `dir` (created at the
    /// first copy, readable by this user only), which should be node-local:
    /// `<dir>/<host>.ron`. A `dir` that is not a directory of this user (an
    /// other user's, or a link) is never used: an error.
    pub fn with_host_dir(mut self, dir: &Path) -> Self {
        self.host_dir = Some(dir.to_owned());
        self
    }

    /// Sleep `d` before every operation: emulated storage latency.
    #[cfg(feature = "emulate")]
    pub fn with_delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Sleep `extra[r]` more before every operation on the files of rank
    /// `r`'s SOS: a slower path to another site's storage.
    #[cfg(feature = "emulate")]
    pub fn with_delays_to(mut self, extra: Vec<Duration>) -> Self {
        self.delay_to = extra;
        self
    }

    /// Inject `fault` (tests).
    #[cfg(any(test, feature = "emulate"))]
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Problems met since the last call and got round, one line each.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// The board's directory.
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

    /// Path of the claim of `slot` of `owner`'s SOS.
    pub fn claim_path(&self, owner: usize, slot: &Slot) -> PathBuf {
        claim_path(&self.dir, owner, slot)
    }

    /// Directory of the monitor logs.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// Where the copy of the open index for `host` is kept, if copies are.
    pub fn host_copy_path(&self, host: &str) -> Option<PathBuf> {
        let name = file_name_of(host);
        Some(self.host_dir.as_ref()?.join(format!("{name}.ron")))
    }

    /// Time one read of `job.ron` (with the emulated delay) in a thread of
    /// its own, so that the caller spends no file time on it: the storage
    /// cost the state machine needs before its first decision. The seconds
    /// arrive on the channel; nothing does if the read fails.
    pub fn probe_storage(&self) -> mpsc::Receiver<f64> {
        let (tx, rx) = mpsc::channel();
        let path = job_path(&self.dir);
        #[cfg(feature = "emulate")]
        let delay = self.delay;
        let _ = thread::Builder::new()
            .name("soslb-probe".into())
            .spawn(move || {
                let t = Instant::now();
                #[cfg(feature = "emulate")]
                thread::sleep(delay);
                if fs::read(&path).is_ok() {
                    let _ = tx.send(t.elapsed().as_secs_f64());
                }
            });
        rx
    }

    /// Count an operation on the files of rank `owner`'s SOS (`None`: the
    /// index), after the emulated latency.
    fn op(&mut self, owner: Option<usize>) {
        self.ops += 1;
        sleep_latency(self.latency_of(owner));
    }

    /// The emulated latency of an operation on `owner`'s files.
    #[cfg(feature = "emulate")]
    fn latency_of(&self, owner: Option<usize>) -> Duration {
        let extra = owner.and_then(|r| self.delay_to.get(r).copied());
        self.delay + extra.unwrap_or_default()
    }

    /// No emulated latency in this build.
    #[cfg(not(feature = "emulate"))]
    fn latency_of(&self, _: Option<usize>) -> Duration {
        Duration::ZERO
    }

    /// Whether claims are plain creates (a fault injected by tests).
    fn plain_create(&self) -> bool {
        #[cfg(any(test, feature = "emulate"))]
        return self.fault == Some(Fault::PlainCreate);
        #[cfg(not(any(test, feature = "emulate")))]
        false
    }

    /// Write `body` aside and rename it over `path`; an obstacle at `path`
    /// that a rename cannot replace (a directory) is moved aside first, and
    /// noted. Two operations (three with an obstacle).
    fn replace<T: Serialize>(&mut self, path: &Path, body: &T, owner: Option<usize>) -> Result<()> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let aside = path.with_file_name(format!("{}.{}.new", name.unwrap_or_default(), self.rank));
        self.op(owner);
        fs::write(&aside, format::encode(body)).map_err(|e| Error::io(&aside, e))?;
        // No index lists an SOS before it lands, no older post lands after a newer one.
        self.join_post();
        self.op(owner);
        match fs::rename(&aside, path) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EISDIR | libc::ENOTEMPTY | libc::EEXIST)
                ) =>
            {
                self.moved += 1;
                let damaged = path.with_file_name(format!(
                    "{}.damaged.{}.{}",
                    path.file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default(),
                    self.rank,
                    self.moved
                ));
                self.op(owner);
                fs::rename(path, &damaged)
                    .and_then(|()| fs::rename(&aside, path))
                    .map_err(|e| Error::io(path, e))?;
                self.notes.push(format!(
                    "{} was not a file ({e}): moved aside to {}",
                    path.display(),
                    damaged.display()
                ));
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&aside);
                Err(Error::io(path, e))
            }
        }
    }

    /// Wait for the post in flight, keeping its result for [`Board::landed`].
    fn join_post(&mut self) {
        let writing = self
            .in_flight
            .take_if(|f| matches!(f, InFlight::Writing(_)));
        let Some(InFlight::Writing(t)) = writing else {
            return;
        };
        let posted = match t.join() {
            Ok((posted, second)) => {
                self.ops += second.ops;
                self.notes.extend(second.notes);
                self.moved = self.moved.max(second.moved);
                posted
            }
            Err(_) => Err(Error::Internal("a post's thread panicked".into())),
        };
        self.in_flight = Some(InFlight::Landed(posted));
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
}

impl Board for FileBoard {
    fn post(&mut self, sos: &Sos) -> Result<()> {
        let path = sos_path(&self.dir, sos.rank);
        self.replace(&path, sos, Some(sos.rank))
    }

    /// The post on a second handle, in a thread of its own (in this one
    /// if the system refuses a thread).
    fn post_sent(&mut self, sos: &Sos) -> Result<()> {
        self.landed()?;
        let (mut second, sent) = (self.second(), sos.clone());
        let spawned = thread::Builder::new().spawn(move || (second.post(&sent), second));
        match spawned {
            Ok(t) => {
                self.in_flight = Some(InFlight::Writing(t));
                Ok(())
            }
            Err(_) => self.post(sos),
        }
    }

    fn landed(&mut self) -> Result<()> {
        self.join_post();
        match self.in_flight.take() {
            Some(InFlight::Landed(posted)) => posted,
            _ => Ok(()),
        }
    }

    fn read_sos(&mut self, rank: usize) -> Result<Option<Sos>> {
        self.op(Some(rank));
        let path = sos_path(&self.dir, rank);
        let Some(sos) = format::read_again::<Sos>(&path, || self.op(Some(rank)))? else {
            return Ok(None);
        };
        let bad = |reason: String| Error::Corrupt {
            path: path.clone(),
            reason,
        };
        if sos.rank != rank {
            return Err(bad(format!("it holds the SOS of rank {}", sos.rank)));
        }
        if let SosState::Open(p) = &sos.state
            && let Some(s) = p.slots.iter().find(|s| s.is_empty())
        {
            return Err(bad(format!("its slot {} holds no id", s.claim_name(rank))));
        }
        Ok(Some(sos))
    }

    fn claim(&mut self, claim: &Claim) -> Result<Claimed> {
        self.op(Some(claim.owner));
        let (claimed, note) = create_claim(&self.dir, claim, self.plain_create());
        self.notes.extend(note);
        claimed
    }

    /// Each create in a thread of its own, so that they wait together.
    fn claim_all(&mut self, claims: &[Claim]) -> Vec<Result<Claimed>> {
        if claims.len() < 2 {
            return claims.iter().map(|c| self.claim(c)).collect();
        }
        self.ops += claims.len() as u64;
        let (dir, plain) = (&self.dir, self.plain_create());
        let sent: Vec<_> = (claims.iter())
            .map(|c| (c, self.latency_of(Some(c.owner))))
            .collect();
        let one = |(c, d): (&Claim, Duration)| {
            sleep_latency(d);
            create_claim(dir, c, plain)
        };
        // A thread the system refuses (a node's process limit) leaves its
        // claim to this one, after the others.
        let in_threads = |batch: &[(&Claim, Duration)]| {
            thread::scope(|scope| {
                let threads: Vec<_> = (batch.iter())
                    .map(|&s| {
                        let spawned = thread::Builder::new().spawn_scoped(scope, move || one(s));
                        spawned.map_err(|_| s)
                    })
                    .collect();
                let panicked = || Err(Error::Internal("a claim's thread panicked".into()));
                (threads.into_iter())
                    .map(|t| match t {
                        Ok(t) => t.join().unwrap_or_else(|_| (panicked(), None)),
                        Err(s) => one(s),
                    })
                    .collect::<Vec<_>>()
            })
        };
        let created: Vec<_> = sent.chunks(IN_FLIGHT).flat_map(in_threads).collect();
        (created.into_iter())
            .map(|(claimed, note)| {
                self.notes.extend(note);
                claimed
            })
            .collect()
    }

    fn probe(&mut self, owner: usize, slot: &Slot) -> Result<Probe> {
        self.op(Some(owner));
        let path = claim_path(&self.dir, owner, slot);
        match format::read_again::<Claim>(&path, || self.op(Some(owner))) {
            Ok(None) => Ok(Probe::Free),
            Ok(Some(c)) if c.owner == owner && c.slot == *slot => Ok(Probe::Taken(Some(c))),
            // Claimed: the body is being written, or is not of this slot.
            Ok(Some(_)) | Err(Error::Corrupt { .. }) => Ok(Probe::Taken(None)),
            Err(e) => Err(e),
        }
    }

    fn claimed(&mut self, owner: usize) -> Result<Vec<String>> {
        self.op(Some(owner));
        let dir = self.dir.join("aid").join(owner.to_string());
        match fs::read_dir(&dir) {
            Ok(entries) => Ok(entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io(&dir, e)),
        }
    }

    fn read_index(&mut self) -> Result<Index> {
        self.op(None);
        let path = index_path(&self.dir);
        Ok(format::read_again(&path, || self.op(None))?.unwrap_or_default())
    }

    fn write_index(&mut self, index: &Index) -> Result<()> {
        let path = index_path(&self.dir);
        self.replace(&path, index, None)
    }

    fn read_host_index(&mut self, host: &str) -> Result<Option<(Index, f64)>> {
        let Some(path) = self.host_copy_path(host) else {
            return Ok(None);
        };
        if !self.host_dir_ready(false)? {
            return Ok(None);
        }
        Ok(format::read::<HostCopy>(&path)?.map(|c| (c.index, c.read_at)))
    }

    fn write_host_index(&mut self, host: &str, index: &Index, at: f64) -> Result<()> {
        let Some(path) = self.host_copy_path(host) else {
            return Ok(());
        };
        self.host_dir_ready(true)?;
        let copy = HostCopy {
            read_at: at,
            index: index.clone(),
        };
        replace_local(&path, &copy, self.rank)
    }

    fn wanted(&mut self, host: &str, me: usize, want: Option<&Entry>) -> Result<Wanted> {
        let Some(dir) = self
            .host_copy_path(host)
            .map(|p| p.with_extension("wanted"))
        else {
            return Ok(vec![(me, want.cloned())]);
        };
        self.host_dir_ready(true)?;
        super::node::make(&dir);
        replace_local(&dir.join(format!("{me}.ron")), &want, me)?;
        let mut wanted = vec![(me, want.cloned())];
        // A host-mate's file that cannot be read is skipped: its rank
        // lists itself, and writes the file anew at its next listing.
        for f in fs::read_dir(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .flatten()
        {
            let name = f.file_name().to_string_lossy().into_owned();
            let Some(rank) = name.strip_suffix(".ron").and_then(|r| r.parse().ok()) else {
                continue;
            };
            if rank != me
                && let Ok(Some(w)) = format::read::<Option<Entry>>(&f.path())
            {
                wanted.push((rank, w));
            }
        }
        Ok(wanted)
    }

    fn ops(&self) -> u64 {
        self.ops
    }
}

#[cfg(test)]
mod tests;
