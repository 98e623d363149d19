//! The SOS/AID board: where late ranks post SOS files and ranks claim their
//! slots (DESIGN §5, §6).
//!
//! A board stores the protocol's messages ([`crate::protocol`]) and decides
//! one thing: which rank's claim of a slot was first. Everything else (when
//! to post, what to claim) is decided by [`crate::policy`]. Two boards
//! implement [`Board`]: [`file::FileBoard`], files on a directory (the
//! product), and `memory::MemoryBoard`, for unit tests and the simulator
//! (with the `emulate` feature).
//!
//! # Exactly once
//!
//! An id in a posted slot moves only by that slot's claim: an exclusive
//! create of the slot's claim name, which the file server arbitrates
//! whatever its clients cache and whether or not locks work. No lock,
//! `stat`, listing or rewrite by two writers decides anything; an SOS file
//! or index that is corrupt, emptied or replaced can cost help, never an id.
//!
//! # Operations
//!
//! [`Board::ops`] counts storage operations, each a round trip to the file
//! server: a read of a whole small file (open and read), an exclusive
//! create with its body, a write aside (create and write), a rename, a
//! listing of a directory. A post is a write aside and a rename, sent ahead
//! of the index's rewrite ([`Board::post_sent`]); a steal is
//! a read of the index (or of the host's copy of it, node-local and not
//! counted), a read of the SOS and a claim (a listing of the owner's claims
//! after a lost one). Claims may be sent together ([`Board::claim_all`]):
//! each is still an operation, but they wait for the file server once, as
//! an NFS client's requests in flight do; an owner claiming several of its
//! slots (its front, or all it keeps before it cuts its tail anew) waits
//! one round trip, not one per slot.
//!
//! # The boards of a run
//!
//! Every run has the shared board, `<signal_dir>/<job_id>.<n>`
//! ([`file`](mod@file), its files laid out as [`layout`] says), and, with
//! `host_board` (the default in mode `Full`), one board per host in its
//! node-local directory ([`node`]),
//! `<tmp>/soslb-<user id>-<hash>/board-<host>/`: the same protocol and
//! formats, made by the host's lowest rank at init and removed by it at
//! finalize, after a failure too (unless `keep: true`). A late rank posts
//! its SOS on its host's board, where its host's ranks help it without
//! touching the shared storage; it moves the SOS to the shared board only
//! when its host as a whole will be late (the termination waves sum each
//! host's ids left and speed), by claiming back its slots on the host's
//! board and posting them on the shared one. A rank looking for work
//! searches its host's board first, then the shared one. In a large job
//! (`large_job` ranks, on more than one host) every SOS stays on its host's
//! board and the hosts trade by MPI instead ([`crate::transfer`]).
//!
//! On one machine every SOS stays on the host's board; tests that damage
//! files on the shared directory, and the FUSE tests, set `host_board:
//! false`.
//!
//! # No locks
//!
//! Since the claims (issue 45) no `flock` is taken on signal files, and
//! directories whose locks do not reach across hosts (Lustre without
//! `-o flock`, BeeGFS without global locks, NFS `nolock` or
//! `local_lock=all`) work. Gone with the locks: the init probe that refused
//! such directories, files rewritten in place and padded to 4 KiB, write
//! numbers and inode checks, the helpers' `journal/` files and the recovery
//! from them. `fs2` locks remain only where one host takes them: a host's
//! `ranks.lock` ([`node`]) and the completion journal of a `job_name`
//! ([`crate::resume`]).

use crate::error::Result;
use crate::protocol::{Claim, Entry, Index, Slot, Sos};

/// What each rank of a host wants the open index to say of it
/// ([`Board::wanted`]).
pub type Wanted = Vec<(usize, Option<Entry>)>;

pub mod file;
pub mod format;
pub mod fs;
pub mod layout;
#[cfg(feature = "emulate")]
pub mod memory;
pub mod node;
pub mod warn;
pub mod watch;

/// What came of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// This rank's create made the claim: the slot's ids are its own.
    Won,
    /// The claim was there already: another rank has the slot.
    Lost,
}

/// What a look at a slot's claim found.
#[derive(Clone, Debug, PartialEq)]
pub enum Probe {
    /// No claim, as far as this client sees (a hint: a client may remember
    /// for a while that a name did not exist).
    Free,
    /// Claimed; the claim's body if it could be read (its claimant may not
    /// have written it yet).
    Taken(Option<Claim>),
}

/// Storage for the SOS files, their claims and the open index.
pub trait Board {
    /// Replace the SOS file of `sos.rank` whole (written aside, renamed
    /// over it): readers see the old body or the new one.
    fn post(&mut self, sos: &Sos) -> Result<()>;

    /// Start [`Board::post`] and return at once: the write aside and the
    /// rename are in flight while the caller goes on (its rewrite of the
    /// index), as an NFS client's requests are, until [`Board::landed`].
    /// A later rename (the index's, another post's) waits for it to land:
    /// the index never lists an SOS before it is written.
    fn post_sent(&mut self, sos: &Sos) -> Result<()> {
        self.post(sos)
    }

    /// Wait for the post sent last ([`Board::post_sent`]): its result.
    fn landed(&mut self) -> Result<()> {
        Ok(())
    }

    /// The SOS file of `rank`; `None` when there is none (never posted). A
    /// body that cannot be read is an error naming the file.
    fn read_sos(&mut self, rank: usize) -> Result<Option<Sos>>;

    /// Claim `claim.slot` of `claim.owner`'s SOS for `claim.by`, by an
    /// exclusive create of its claim name. [`Claimed::Lost`] means another
    /// rank claimed it first; any other failure is an error naming the file.
    fn claim(&mut self, claim: &Claim) -> Result<Claimed>;

    /// [`Board::claim`] each of `claims`, sent together: every create is
    /// still exclusive and counts as an operation, but they wait for the
    /// storage once, not once each (an NFS client keeps several requests in
    /// flight). The results are in the order of `claims`.
    fn claim_all(&mut self, claims: &[Claim]) -> Vec<Result<Claimed>> {
        claims.iter().map(|c| self.claim(c)).collect()
    }

    /// Whether `slot` of `owner`'s SOS is claimed, and by whom.
    fn probe(&mut self, owner: usize, slot: &Slot) -> Result<Probe>;

    /// The file names of the claims of `owner`'s slots ([`Slot::named`]),
    /// in one listing: a hint (a client may serve a listing from its cache),
    /// which never decides that a slot is taken.
    fn claimed(&mut self, owner: usize) -> Result<Vec<String>>;

    /// The open index; empty when there is none. A body that cannot be read
    /// is an error naming the file.
    fn read_index(&mut self) -> Result<Index>;

    /// Replace the open index whole (written aside, renamed over it).
    fn write_index(&mut self, index: &Index) -> Result<()>;

    /// The copy of the open index that a rank of `host` read from this
    /// board, and when (seconds since the job's start); `None` when there
    /// is none. Node-local: not counted in [`Board::ops`].
    fn read_host_index(&mut self, host: &str) -> Result<Option<(Index, f64)>>;

    /// Leave `index`, read from this board at `at`, for the other ranks of
    /// `host`, which read this copy instead while it is fresh (DESIGN §6).
    /// Not counted in [`Board::ops`].
    fn write_host_index(&mut self, host: &str, index: &Index, at: f64) -> Result<()>;

    /// Leave what rank `me` wants the open index to say of it (`want`: its
    /// entry, or `None`: not listed) for the other ranks of `host`, and
    /// return what each rank of the host left, its own included: a rank that
    /// rewrites the index for its own change makes its host-mates' too, so
    /// that the ranks of a host that post at once do not undo one another.
    /// Node-local: not counted in [`Board::ops`]; a board without a host
    /// directory keeps `me`'s alone.
    fn wanted(&mut self, _host: &str, me: usize, want: Option<&Entry>) -> Result<Wanted> {
        Ok(vec![(me, want.cloned())])
    }

    /// Storage operations done so far through this handle.
    fn ops(&self) -> u64;
}
