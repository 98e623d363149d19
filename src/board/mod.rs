//! The SOS/AID board: where late ranks post SOS records and helpers take
//! work from them (DESIGN §5, §6).
//!
//! A board only stores records and serialises access to them; every decision
//! (when to post, what to take) is made by [`crate::policy`]. Two boards
//! implement [`Board`]: [`file::FileBoard`], files on a shared directory (the
//! product), and [`memory::MemoryBoard`], for unit tests and the simulator.
//!
//! # Exactly once
//!
//! Ids move between ranks only inside [`Board::with_sos`], under the lock of
//! the owner's SOS record, and only from the record's unleased `tail`.
//!
//! A helper's take is also written to a journal of its own, durably and
//! before the owner's record is written: when an owner finds its record
//! corrupt or replaced, [`Board::journaled_takes`] tells it what helpers took
//! since its last look, so that its recovery neither loses nor duplicates an
//! id.

use crate::error::Result;
use crate::ids::IdSet;
use serde::{Deserialize, Serialize};

pub mod file;
pub mod format;
pub mod memory;
pub mod node;
pub mod warn;
pub mod watch;

/// Where an SOS is posted. The ranks of one host balance among themselves
/// on the host's own board (node-local files, which cost the shared storage
/// nothing); an SOS goes on the shared board, where every rank may help,
/// only when its host as a whole will be late (DESIGN §6, at scale).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Level {
    /// The board of the owner's host.
    Host,
    /// The board on the shared storage.
    #[default]
    Shared,
}

/// A rank's SOS record: closed or open, with the AID records of the help it
/// received while open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sos {
    /// The owner's rank.
    pub rank: usize,
    /// Incremented each time the SOS opens; AID records belong to one sequence.
    pub seq: u64,
    /// Closed, or open with the owner's figures and unleased tail.
    pub state: SosState,
    /// AID records appended by helpers during the current sequence.
    pub aids: Vec<Aid>,
}

/// Whether an SOS is open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum SosState {
    /// No request for help: nothing may be taken.
    #[default]
    Closed,
    /// The owner forecasts it will be late: the tail may be taken.
    Open(Post),
}

/// The content of an open SOS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Post {
    /// Owner's speed when last written, realisations per second.
    pub speed: f64,
    /// Owner's remaining ids (lease left plus tail) when last written, less
    /// what helpers took since.
    pub remaining: u64,
    /// Owner's forecast finishing time, seconds since the job's start.
    pub forecast: f64,
    /// Owner's host.
    pub host: String,
    /// Owner's site.
    pub site: String,
    /// When this sequence opened, seconds since the job's start.
    pub opened_at: f64,
    /// When the owner last wrote, seconds since the job's start.
    pub updated_at: f64,
    /// The unleased tail: the ids helpers may take.
    pub tail: IdSet,
}

/// A helper's record: "rank `helper` took `ids` from you at time `at`".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aid {
    /// The helper's rank.
    pub helper: usize,
    /// The ids it took.
    pub ids: IdSet,
    /// When, seconds since the job's start.
    pub at: f64,
    /// The helper's speed when it took them.
    pub speed: f64,
    /// Seconds of its own work the helper still had when it took them (a
    /// share taken ahead of need): it computes them after that. 0 for an
    /// idle helper, and in records written without it.
    #[serde(default)]
    pub busy_for: f64,
    /// Seconds a steal from this SOS takes the helper, as it measured its
    /// steals at that distance (0 before it measured one, and in records
    /// written without it): whether it can take more by a common end.
    #[serde(default)]
    pub steal_cost: f64,
}

/// A helper's journal entry: it took `ids` from the SOS `seq` of `owner`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Take {
    /// The owner of the SOS.
    pub owner: usize,
    /// The SOS sequence number.
    pub seq: u64,
    /// The ids taken.
    pub ids: IdSet,
}

/// The index of open SOS records (`open.ron`): a hint for helpers, never
/// authoritative (the SOS record is).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenIndex {
    /// One entry per open SOS.
    pub entries: Vec<OpenEntry>,
}

/// One open SOS in the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenEntry {
    /// The owner's rank.
    pub rank: usize,
    /// The SOS sequence number.
    pub seq: u64,
    /// The owner's forecast when it opened.
    pub forecast: f64,
    /// When it opened, seconds since the job's start.
    pub opened_at: f64,
    /// The owner's speed when it opened, realisations per second (0 when
    /// written by a version without it).
    #[serde(default)]
    pub speed: f64,
}

impl OpenIndex {
    /// Record `entry`, replacing an earlier entry of the same rank.
    pub fn upsert(&mut self, entry: OpenEntry) {
        self.remove(entry.rank);
        self.entries.push(entry);
    }

    /// Forget the entry of `rank`.
    pub fn remove(&mut self, rank: usize) {
        self.entries.retain(|e| e.rank != rank);
    }
}

/// How to take a record's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Wait for the lock (with a short back-off, never an unbounded block).
    Wait,
    /// Try once; [`Locked::Busy`] if somebody holds it.
    Try,
}

/// The outcome of a locked access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locked {
    /// The closure ran under the lock; what it changed is stored.
    Done,
    /// The lock was held by somebody else ([`Access::Try`] only).
    Busy,
}

/// Storage for SOS records and the open index.
pub trait Board {
    /// Run `f` on the SOS record of `rank` under its lock, and store what it
    /// changed before the lock is released. AID records that `f` appends are
    /// journaled ([`Take`]) before the record is stored; a journal that cannot
    /// be written is an error, and the record is then left as it was.
    ///
    /// A record that cannot be read is an error naming where it is; the caller
    /// decides how to recover (see [`Board::reset_sos`]).
    fn with_sos(
        &mut self,
        rank: usize,
        access: Access,
        f: &mut dyn FnMut(&mut Sos),
    ) -> Result<Locked>;

    /// Read the SOS record of `rank` without its lock: a hint, for a helper
    /// that would otherwise lock the record only to find nothing to take
    /// (idle helpers' empty looks kept an owner out of its own record on
    /// slow storage). `Ok(None)` when the read could not tell (caught
    /// mid-write, or not a record of `rank`): lock and look.
    fn peek_sos(&mut self, rank: usize) -> Result<Option<Sos>>;

    /// Overwrite the SOS record of `rank` under its lock without reading it:
    /// the owner's recovery from a corrupt record.
    fn reset_sos(&mut self, sos: &Sos) -> Result<()>;

    /// Overwrite the open index with an empty one under its lock without
    /// reading it: the recovery from a corrupt index (owners of open SOS list
    /// themselves again at their next refresh).
    fn reset_index(&mut self) -> Result<()>;

    /// Run `f` on the open index under its lock and store the result.
    fn with_index(&mut self, access: Access, f: &mut dyn FnMut(&mut OpenIndex)) -> Result<Locked>;

    /// Every id the journals of the ranks other than `owner` say was taken
    /// from its SOS of sequence `seq`. An unreadable journal is an error
    /// naming it: the truth cannot be rebuilt.
    fn journaled_takes(&mut self, owner: usize, seq: u64) -> Result<IdSet>;

    /// Read the open index without its lock. `Ok(None)` means a write was
    /// caught midway: read again later.
    fn read_index(&mut self) -> Result<Option<OpenIndex>>;

    /// The copy of the open index that a rank of `host` read from the
    /// shared storage, and when (seconds since the job's start); `Ok(None)`
    /// when there is none. The copy lives on node-local storage (see
    /// [`Board::write_host_index`]): reading it is not counted in
    /// [`Board::ops`].
    fn read_host_index(&mut self, host: &str) -> Result<Option<(OpenIndex, f64)>>;

    /// Leave `index`, read from the shared storage at `at`, for the other
    /// ranks of `host`, which read this copy instead of the shared index
    /// while it is fresh (DESIGN §6). Not counted in [`Board::ops`].
    fn write_host_index(&mut self, host: &str, index: &OpenIndex, at: f64) -> Result<()>;

    /// Storage operations done so far through this handle (open, lock
    /// attempt, read, write, truncate, fsync, unlock: each counts one). The
    /// memory board counts what the file board would do.
    fn ops(&self) -> u64;
}
