//! The rank's clerk: carries out the state machine's requests on the board
//! (DESIGN §5, §6), away from the rank's computing.
//!
//! Every look at the board costs storage round trips: a lock, a fresh open,
//! a read, a write and its `fsync`, an unlock. On slow storage (tenths of a
//! second per operation) a rank that waited for its own file operations
//! lost whole seconds of computing per SOS, and balancing turned into a
//! loss. So the state machine ([`Rank`]) never touches the board: it asks
//! ([`Step::Ask`] with a [`Request`]), goes on computing its lease while a
//! [`Clerk`] carries the request out, and applies the [`Reply`]
//! ([`Rank::reply`]) when it comes. An owner asks for its next lease while
//! it still computes the current one; a helper asks for its next share
//! before it runs dry.
//!
//! The shell ([`crate::Balancer`]) runs the clerk in a thread of its own,
//! which touches files and never MPI; the simulator ([`crate::sim`])
//! charges each request the time of its storage operations and delivers
//! the reply that much later; [`Inline`] carries each request out at once,
//! in the caller's thread.
//!
//! A rank has at most one request out at a time. Ids travel inside a
//! request (the tail of a post, the lease given back by a refresh) or a
//! reply (a lease extension, a share taken, a tail reclaimed), and belong
//! to nobody else meanwhile: ids still move only under the lock of the
//! owner's SOS record (DESIGN §5, exactly once).

use crate::board::{Access, Aid, Board, Level, Locked, OpenEntry, OpenIndex, Post, Sos, SosState};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::plan::{HelpPolicy, ShareInput, share};
use crate::policy::{Params, Rank, Step};
use crate::topology::{IdleMap, Topology};
use crate::verdict::hosts_late;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Looks that find nothing to take after which an early search
/// ([`Search::early`]) gives up: without a bound, each early search at
/// 10,000 ranks read about 150 SOS records, 87,000 operations in the
/// second that held most of them (simulator, `bench.sh sim 10000`; all
/// operations 700,600 → 549,800, efficiency 0.956 → 0.954). A bound of
/// two lowered sites16 (0.925 → 0.922 over 12 seeds).
const EARLY_EMPTY_LOOKS: u32 = 4;

/// What a rank asks of its clerk.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Open the SOS `entry.seq` with `post` (its tail taken from the lease)
    /// and list it in the open index.
    Post {
        /// The entry to list.
        entry: OpenEntry,
        /// The record's content.
        post: Post,
        /// On which board.
        level: Level,
    },
    /// Lock the own open SOS `entry.seq`, learn the AID records after the
    /// first `seen`, and do `op`.
    Own {
        /// The open SOS, as listed.
        entry: OpenEntry,
        /// AID records already accounted.
        seen: usize,
        /// What to change.
        op: OwnOp,
        /// The tail as the rank last saw it: what a recovery gives back
        /// (less what the helpers' journals say they took).
        tail: IdSet,
        /// The board the SOS is on.
        level: Level,
    },
    /// Look for an open SOS to help, and take a share of its tail: on the
    /// host's board first, then on the shared one.
    Help(Search),
    /// Remove the rank's closed SOS from the open index of the board it was
    /// on (the lock was busy when it closed).
    Unlist(Level),
}

/// What a look at the own open SOS changes.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnOp {
    /// Write fresh figures; give `give_back` (taken from the lease) to the
    /// tail; the rank keeps `lease` ids besides.
    Refresh {
        /// Speed, forecast, time.
        figures: Figures,
        /// Ids the rank keeps in its lease.
        lease: u64,
        /// Ids the rank can no longer use, for helpers.
        give_back: IdSet,
    },
    /// Take `n` ids from the front of the tail into the lease (closing the
    /// SOS when the tail is empty), and write fresh figures.
    Extend {
        /// Speed, forecast, time.
        figures: Figures,
        /// Ids wanted.
        n: u64,
        /// Ids the rank keeps in its lease besides.
        lease: u64,
    },
    /// Close the SOS and take the unclaimed tail back.
    Withdraw,
    /// Take `n` ids from the back of the tail (closing the SOS when the
    /// tail is empty), to send them to other hosts (a host transfer,
    /// [`crate::transfer`]).
    Give {
        /// Ids wanted.
        n: u64,
    },
}

/// The owner's figures written into its open SOS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    /// Realisations per second.
    pub speed: f64,
    /// Forecast finishing time, seconds since the start.
    pub forecast: f64,
    /// When, seconds since the start.
    pub at: f64,
}

/// A helper's search for work: the figures its shares are sized with.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// When the rank asked, seconds since the start.
    pub now: f64,
    /// Seconds of own work left before the rank would start on a share
    /// (0: idle). A rank with work left takes only from a near SOS and
    /// does not wait for busy locks.
    pub busy_for: f64,
    /// Since when the rank has had no work (its grace counts from then).
    pub idle_since: f64,
    /// A watcher saw the index change: read the shared index, not the
    /// host's copy.
    pub woken: bool,
    /// Seconds between two looks at the index while idle.
    pub poll: f64,
    /// Seconds one consultation of the board takes: a busy lock is not
    /// tried again sooner.
    pub storage_cost: f64,
    /// Seconds before an SOS found with nothing to take is looked at again
    /// (about the owner's next look at it).
    pub interval: f64,
    /// [`Search::storage_cost`] and [`Search::interval`] on the host's
    /// board, whose steals cost that much at any distance.
    pub host_cost: f64,
    /// See [`Search::host_cost`].
    pub host_interval: f64,
    /// The share policy.
    pub policy: HelpPolicy,
    /// The helper's speed.
    pub speed: f64,
    /// Seconds to the job's forecast end.
    pub job_left: f64,
    /// Seconds a steal at distance 0, 1, 2 costs this helper.
    pub steal_cost: [f64; 3],
    /// Seconds its last realisation may run past its mean time.
    pub risk: f64,
    /// Idle and free ranks at the last termination wave.
    pub idle: Arc<IdleMap>,
    /// The helper looks ahead on fast storage because it is early against
    /// the job's forecast end, not because it runs out of work: it takes
    /// only from lasting SOS of slower owners on other hosts that the ranks
    /// nearer to them cannot close (`Clerk::worth_early` says which).
    pub early: bool,
    /// Each host's ids left and speed at the last wave, as of `counted_at`
    /// seconds ([`crate::verdict::Job::hosts`]).
    pub hosts: Arc<Vec<(u64, f64)>>,
    /// See `hosts`.
    pub counted_at: f64,
    /// When the hosts of this rank's site will have computed what they
    /// own, at the last waves (`Rank::site_end`).
    pub site_end: f64,
    /// The job's forecast end, seconds since the start.
    pub job_end: f64,
    /// Search the shared board too, after the host's (false where hosts
    /// trade through MPI: [`crate::transfer::on`]).
    pub shared: bool,
}

/// What a clerk answers.
#[derive(Debug)]
pub struct Reply {
    /// What came of the request.
    pub outcome: Outcome,
    /// Seconds the request took, when measured (the shell and the
    /// simulator measure; [`Inline`] does not).
    pub seconds: Option<f64>,
    /// The farthest distance of the other ranks' records locked, and how
    /// many.
    pub looks: (u8, u32),
    /// Problems the clerk recovered from (the monitor log and stderr show
    /// them).
    pub errors: Vec<String>,
}

/// The outcome of a request.
#[derive(Debug)]
pub enum Outcome {
    /// The SOS is open.
    Posted,
    /// A look at the own open SOS.
    Looked {
        /// AID records that arrived since the last look.
        aids: Vec<Aid>,
        /// The tail now.
        tail: IdSet,
        /// Ids for the lease: the extension, or the tail reclaimed.
        lease: IdSet,
        /// The SOS is closed now.
        closed: bool,
        /// Closed, but still in the index (its lock was busy).
        listed: bool,
    },
    /// A search for help.
    Helped {
        /// The owner, the sequence and the ids taken, if any.
        taken: Option<(usize, u64, IdSet)>,
        /// When an idle rank should search again.
        wake: f64,
    },
    /// The closed SOS left the index, unless `listed` (busy again).
    Unlisted {
        /// Still in the index.
        listed: bool,
    },
    /// The own record was corrupt, replaced or lost: the rank takes back
    /// `back` (the tail as it last saw it, and the ids of the request, less
    /// `taken`, which the helpers' journals say they took), the record was
    /// reset to closed under the next sequence number.
    Recovered {
        /// Ids the journals say helpers took (out of the lease too).
        taken: IdSet,
        /// Ids back to the lease.
        back: IdSet,
        /// The reset failed: the rank stops asking for help.
        broken: bool,
        /// The index still lists the SOS.
        listed: bool,
    },
    /// An error the rank cannot recover from.
    Failed(Error),
}

/// Outcome of a steal, in crossbeam-deque's words.
#[derive(Debug)]
enum Steal {
    Empty,
    /// Nothing to take at the listed sequence: the record is closed, open
    /// again under a later sequence, or open with an empty tail (unless the
    /// owner gives back part of its lease: it then lists the SOS again).
    Drained,
    /// Taken, and whether that emptied the tail.
    Success(u64, IdSet, bool),
    Retry,
    /// The owner's work ends before another's that the helper read.
    Passed,
}

/// An SOS a search may take from: its distance, its index entry, the
/// share's figures, what a read without the lock found (if read), and the
/// end of the next owner's work, as read, below which this one is passed
/// over.
type Looked<'a> = (u8, &'a OpenEntry, Ask, Option<Result<u64, Steal>>, f64);

/// Carries out one rank's requests on the board. Its state is the
/// helper's memory of its searches: SOS found empty or busy, the back-off
/// of its polls.
#[derive(Debug)]
pub struct Clerk {
    me: usize,
    params: Params,
    topology: Topology,
    /// Reads of the open index in a row that found a write midway.
    torn_reads: u32,
    /// The host's copy of the open index failed once: not used any more.
    host_copy_broken: bool,
    /// Seconds to wait before trying a busy SOS lock again (doubles while busy).
    busy_backoff: f64,
    /// SOS (owner, sequence) found with nothing to take or their lock
    /// busy, until when not to look at them again, and whether busy.
    empty: Vec<(usize, u64, f64, bool)>,
    /// Idle searches in a row that took nothing, and when the last one was.
    idle_polls: u32,
    last_poll: f64,
    /// When an idle rank with a host board searches the shared board next
    /// (its searches of the host's board come more often).
    shared_at: f64,
    /// Set once the job's verdict is in: a search for help stops before
    /// its next look at the board (see [`Clerk::verdict_flag`]).
    over: Arc<AtomicBool>,
    /// The reply being made.
    looks: (u8, u32),
    errors: Vec<String>,
}

impl Clerk {
    /// The clerk of `rank`.
    pub fn new(rank: &Rank) -> Clerk {
        Clerk {
            me: rank.me(),
            params: rank.params().clone(),
            topology: rank.topology().clone(),
            torn_reads: 0,
            host_copy_broken: false,
            busy_backoff: 0.0,
            empty: Vec::new(),
            idle_polls: 0,
            last_poll: f64::NEG_INFINITY,
            shared_at: f64::NEG_INFINITY,
            over: Arc::new(AtomicBool::new(false)),
            looks: (0, 0),
            errors: Vec::new(),
        }
    }

    /// A flag for the shell to set when the job's verdict is in (the clerk
    /// may be in another thread): a search for help still out then stops
    /// before its next operation on a board, and answers that it took
    /// nothing. Every id is computed, or the job ends otherwise; the search's
    /// outcome cannot matter, and `finish` waits for it. (Emulator, step16
    /// on four hosts at 200 ms per operation: ranks that searched when the
    /// verdict came returned from `finish` up to 1.4 s after it; with the
    /// flag, efficiency 0.670 → 0.686 over five runs each, in turns.) A
    /// steal under way completes: its record stays whole.
    pub fn verdict_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.over)
    }

    /// True once the job's verdict is in ([`Clerk::verdict_flag`]).
    fn over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    /// Carry `request` out on `board`, the only board (no host board: every
    /// SOS is on it). The reply's `seconds` is for the caller to fill in.
    pub fn serve(&mut self, request: Request, board: &mut dyn Board) -> Reply {
        self.serve_on(request, board, None)
    }

    /// Carry `request` out on the `shared` board and the board of this
    /// rank's `host` (node-local), if there is one. The reply's `seconds` is
    /// for the caller to fill in.
    pub fn serve_on<'a>(
        &mut self,
        request: Request,
        shared: &'a mut dyn Board,
        host: Option<&'a mut dyn Board>,
    ) -> Reply {
        self.looks = (0, 0);
        let outcome = match request {
            Request::Post { entry, post, level } => self.post(entry, post, on(level, shared, host)),
            Request::Own {
                entry,
                seen,
                op,
                tail,
                level,
            } => self.own(&entry, seen, op, tail, on(level, shared, host)),
            Request::Help(search) => self.help_near_first(&search, shared, host),
            // (After the verdict nobody reads the index again.)
            Request::Unlist(_) if self.over() => Outcome::Unlisted { listed: false },
            Request::Unlist(level) => Outcome::Unlisted {
                listed: self.relist(None, on(level, shared, host)),
            },
        };
        Reply {
            outcome,
            seconds: None,
            looks: std::mem::take(&mut self.looks),
            errors: std::mem::take(&mut self.errors),
        }
    }

    /// Search the host's board, if there is one, then the shared board; an
    /// idle rank that found nothing wakes at the sooner of their wakes. The
    /// host's board is searched every poll interval, the shared one no
    /// sooner than its own last search said (its polls back off), unless a
    /// watcher saw its index change.
    fn help_near_first(
        &mut self,
        search: &Search,
        shared: &mut dyn Board,
        host: Option<&mut dyn Board>,
    ) -> Outcome {
        let mut near_wake = f64::INFINITY;
        if let Some(h) = host {
            match self.help(search, h, Level::Host) {
                Outcome::Helped { taken: None, wake } if search.shared => near_wake = wake,
                found => return found,
            }
            if search.busy_for == 0.0 && !search.woken && search.now < self.shared_at {
                return Outcome::Helped {
                    taken: None,
                    wake: near_wake.min(self.shared_at),
                };
            }
        }
        match self.help(search, shared, Level::Shared) {
            Outcome::Helped { taken: None, wake } => {
                self.shared_at = wake;
                Outcome::Helped {
                    taken: None,
                    wake: wake.min(near_wake),
                }
            }
            found => found,
        }
    }

    /// Write the open SOS into the own record, then list it.
    fn post(&mut self, entry: OpenEntry, post: Post, board: &mut dyn Board) -> Outcome {
        let me = self.me;
        let tail = post.tail.clone();
        // (Waiting: a helper may hold the closed record's lock for a look.)
        let written = board.with_sos(me, Access::Wait, &mut |s| {
            *s = Sos {
                rank: me,
                seq: entry.seq,
                state: SosState::Open(post.clone()),
                aids: Vec::new(),
            }
        });
        match written {
            Ok(_) => {
                self.relist(Some(&entry), board);
                Outcome::Posted
            }
            Err(e) => self.recover(e, &entry, None, tail, board),
        }
    }

    /// A look at the own open SOS: refresh, extend or withdraw.
    fn own(
        &mut self,
        entry: &OpenEntry,
        seen: usize,
        op: OwnOp,
        mut tail: IdSet,
        board: &mut dyn Board,
    ) -> Outcome {
        // Each closure answers the tail left, the ids for the lease, and
        // whether the SOS closed.
        let looked = match &op {
            OwnOp::Refresh {
                figures,
                lease,
                give_back,
            } => self.with_own_sos(entry.seq, seen, board, |state| {
                let SosState::Open(p) = state else {
                    return None;
                };
                write_figures(p, figures);
                p.tail.extend(give_back);
                p.remaining = lease + p.tail.len();
                Some((p.tail.clone(), IdSet::new(), false))
            }),
            OwnOp::Extend { figures, n, lease } => {
                self.with_own_sos(entry.seq, seen, board, |state| {
                    let SosState::Open(p) = state else {
                        return None;
                    };
                    let ext = p.tail.take_front(*n);
                    write_figures(p, figures);
                    p.remaining = lease + ext.len() + p.tail.len();
                    let (left, closed) = tail_left(state);
                    Some((left, ext, closed))
                })
            }
            OwnOp::Give { n } => self.with_own_sos(entry.seq, seen, board, |state| {
                let SosState::Open(p) = state else {
                    return None;
                };
                let given = p.tail.take_back(*n);
                p.remaining = p.remaining.saturating_sub(given.len());
                let (left, closed) = tail_left(state);
                Some((left, given, closed))
            }),
            OwnOp::Withdraw => self.with_own_sos(entry.seq, seen, board, |state| {
                let SosState::Open(p) = state else {
                    return None;
                };
                let reclaimed = std::mem::take(&mut p.tail);
                *state = SosState::Closed;
                Some((IdSet::new(), reclaimed, true))
            }),
        };
        let refresh = matches!(op, OwnOp::Refresh { .. });
        if let OwnOp::Refresh { give_back, .. } = &op
            && !matches!(looked, Ok(Some(_)))
        {
            tail.extend(give_back);
        }
        match looked {
            Ok(Some(((left, lease, closed), aids))) => {
                let listed = if closed {
                    self.relist(None, board)
                } else {
                    // Listed again if the index lost the entry (it was
                    // rebuilt, or a helper unlisted the SOS when it emptied
                    // the tail) while there is something to take.
                    if refresh
                        && !left.is_empty()
                        && let Ok(Some(index)) = board.read_index()
                        && !index.entries.contains(entry)
                    {
                        self.relist(Some(entry), board);
                    }
                    false
                };
                Outcome::Looked {
                    aids,
                    tail: left,
                    lease,
                    closed,
                    listed,
                }
            }
            Ok(None) => {
                let lost = lost_record(self.me, entry.seq);
                self.recover(lost, entry, Some(entry.seq), tail, board)
            }
            Err(e) => self.recover(e, entry, Some(entry.seq), tail, board),
        }
    }

    /// Lock the own SOS record (waiting: a helper holds it for one steal,
    /// and the rank computes meanwhile), let `f` change its state, and
    /// collect the AID records after the first `seen`. `f` answers `None`
    /// when the record is not an open SOS; then, or when the record is not
    /// sequence `seq` any more (it was reset or overwritten), the answer is
    /// `None`: recover.
    fn with_own_sos<T>(
        &mut self,
        seq: u64,
        seen: usize,
        board: &mut dyn Board,
        mut f: impl FnMut(&mut SosState) -> Option<T>,
    ) -> Result<Option<(T, Vec<Aid>)>> {
        let mut out = None;
        let mut new_aids = Vec::new();
        let locked = board.with_sos(self.me, Access::Wait, &mut |s| {
            if s.seq == seq {
                new_aids = s.aids.get(seen..).unwrap_or_default().to_vec();
                out = f(&mut s.state);
            }
        })?;
        if locked == Locked::Busy {
            return Err(Error::Internal("a lock waited for answered busy".into()));
        }
        Ok(out.map(|t| (t, new_aids)))
    }

    /// Make the open index list `entry`, or no SOS of this rank. The index
    /// is a hint for helpers: a failure is reported, never fatal, and a
    /// corrupt index is rebuilt empty. True when the entry of a closed SOS
    /// is still listed: the lock was busy (a rank without an open SOS does
    /// not wait for it; on 0.2 s storage the owners that closed at the
    /// job's end had queued for it for up to 9 s).
    fn relist(&mut self, entry: Option<&OpenEntry>, board: &mut dyn Board) -> bool {
        let me = self.me;
        let mut f = |ix: &mut OpenIndex| match entry {
            Some(e) => ix.upsert(e.clone()),
            None => ix.remove(me),
        };
        let access = if entry.is_some() {
            Access::Wait
        } else {
            Access::Try
        };
        match board.with_index(access, &mut f) {
            Ok(locked) => locked == Locked::Busy,
            Err(e) => {
                let corrupt = matches!(e, Error::Corrupt { .. });
                self.note_error(e, "the open index");
                corrupt
                    && board.reset_index().is_ok()
                    && board.with_index(Access::Wait, &mut f).is_err()
            }
        }
    }

    /// The own SOS record could not be read or written. Nothing may be lost
    /// or computed twice: the rank takes back `tail` (as it last saw it,
    /// with the ids of the request), less what the helpers' journals say
    /// they took from the SOS `seq`; the record is reset to closed under
    /// the next sequence number. Errors other than a corrupt record, and
    /// journals that cannot be read (the truth cannot be rebuilt), fail the
    /// rank.
    fn recover(
        &mut self,
        e: Error,
        entry: &OpenEntry,
        seq: Option<u64>,
        mut tail: IdSet,
        board: &mut dyn Board,
    ) -> Outcome {
        if !matches!(e, Error::Corrupt { .. }) {
            return Outcome::Failed(e);
        }
        self.errors.push(e.to_string());
        let taken = match seq {
            Some(seq) => match board.journaled_takes(self.me, seq) {
                Ok(ids) => ids,
                Err(j) => {
                    return Outcome::Failed(Error::Corrupt {
                        path: format!("sos/{}.ron", self.me).into(),
                        reason: format!("{e}; and the helpers' journals cannot be read: {j}"),
                    });
                }
            },
            None => IdSet::new(),
        };
        // Ids a helper took are its own; they can only be in the tail (or,
        // after a replaced record, the lease) by mistake.
        tail.remove(&taken);
        let closed = Sos {
            rank: self.me,
            seq: entry.seq + 1,
            state: SosState::Closed,
            aids: Vec::new(),
        };
        let broken = match board.reset_sos(&closed) {
            Ok(()) => false,
            Err(e) => {
                self.errors
                    .push(format!("{e}; this rank stops asking for help"));
                true
            }
        };
        let listed = self.relist(None, board);
        Outcome::Recovered {
            taken,
            back: tail,
            broken,
            listed,
        }
    }

    /// Look for an open SOS to help and take a share of its tail.
    ///
    /// Nearest SOS first, then the latest forecast. A helper at distance `d`
    /// takes from an SOS only once it has been open, and this helper idle,
    /// for `d·grace` seconds: nearer helpers go first, and remote help still
    /// comes when no near helper is free. The grace is skipped when no
    /// nearer rank was free at the last termination wave, or when those
    /// free could not finish the owner's work within it
    /// ([`Clerk::nearer_closing`]).
    ///
    /// A rank with own work left (`busy_for`) takes a share to compute
    /// after that work, from a near SOS only (a far one waits for its
    /// grace from now), and does not wait for busy locks.
    ///
    /// On the host's board (`level` Host) the index is read at every search
    /// (node-local files cost the shared storage nothing) and polls do not
    /// back off.
    fn help(&mut self, search: &Search, board: &mut dyn Board, level: Level) -> Outcome {
        let now = search.now;
        if self.over() {
            return Outcome::Helped {
                taken: None,
                wake: now,
            };
        }
        let on_shared = level == Level::Shared;
        // A look at the host's board costs what its consultations cost.
        let (mut poll, storage_cost, interval) = if on_shared {
            (search.poll, search.storage_cost, search.interval)
        } else {
            let poll = self.params.poll_interval.max(search.host_cost);
            (poll, search.host_cost, search.host_interval)
        };
        let mut wake = now + poll;
        // Idle polls that found nothing back off: the interval doubles up
        // to `poll_max`, until an SOS opens after the last poll.
        let idle = on_shared && search.busy_for == 0.0;
        let most = self.params.poll_max.max(poll);
        let backed_off = |polls: u32| (poll * f64::from(1u32 << polls.min(16))).min(most);
        // The first idle rank of a host to poll reads the shared index and
        // leaves a copy on the host; the others read the copy while it is
        // less than half their poll old (DESIGN §6), so that reads of the
        // shared index grow with the hosts, not the ranks, and back off with
        // the host's idle ranks. (Older copies sent helpers to SOS that had
        // closed: the simulator at 1,024 ranks made 154,000 operations with
        // copies up to two polls old, 139,000 with half a poll, 147,000
        // without copies. Half the backed-off poll of idle ranks: at 10,000
        // ranks 158,600 → 152,100, the last second's reads of the index
        // 15,600 → 10,000.) A rank that a watcher woke reads the shared
        // index.
        let host = self.topology.host(self.me).to_string();
        let mut copy = None;
        if on_shared && !search.woken && !self.host_copy_broken {
            let fresh = 0.5 * backed_off(if idle { self.idle_polls } else { 0 });
            match board.read_host_index(&host) {
                Ok(c) => copy = c.filter(|&(_, at)| now - at < fresh).map(|c| c.0),
                Err(e) => self.host_copy_failed(e),
            }
        }
        let read_shared = on_shared && copy.is_none();
        let read = match copy {
            Some(index) => Ok(Some(index)),
            None => board.read_index(),
        };
        let index = match read {
            Ok(Some(index)) => {
                self.torn_reads = 0;
                if read_shared
                    && !self.host_copy_broken
                    && let Err(e) = board.write_host_index(&host, &index, now)
                {
                    self.host_copy_failed(e);
                }
                index
            }
            // A write caught midway: read again soon. Many in a row are no
            // passing write: look under the lock, which names a corrupt file.
            Ok(None) => {
                self.torn_reads += 1;
                if self.torn_reads >= 20 {
                    self.torn_reads = 0;
                    // (A searching rank has no open SOS.)
                    self.relist(None, board);
                }
                return Outcome::Helped {
                    taken: None,
                    wake: now + 0.005,
                };
            }
            Err(e) => {
                self.note_error(e, "the open index");
                return Outcome::Helped { taken: None, wake };
            }
        };
        if idle {
            if index.entries.iter().any(|e| e.opened_at >= self.last_poll) {
                self.idle_polls = 0;
            }
            self.last_poll = now;
            poll = backed_off(self.idle_polls);
            wake = now + poll;
        }
        let mut candidates: Vec<(u8, &OpenEntry)> = index
            .entries
            .iter()
            .filter(|e| e.rank != self.me && e.rank < self.topology.ranks())
            .map(|e| (self.topology.distance(self.me, e.rank), e))
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.forecast.total_cmp(&a.1.forecast)));
        // Helpers that all looked at the same SOS first would queue for its
        // lock: each starts at its own place among those at one distance.
        let mut start = 0;
        while start < candidates.len() {
            let d = candidates[start].0;
            let n = candidates[start..].iter().take_while(|c| c.0 == d).count();
            candidates[start..start + n].rotate_left(self.me % n);
            start += n;
        }
        let helpers = (search.idle.ranks as f64 / candidates.len().max(1) as f64).max(1.0);
        let mut busy = false;
        self.empty.retain(|e| e.2 > now);
        // Locked looks cost storage time: a search makes at most two looks
        // that found nothing (and none worth more than a poll interval),
        // an early one [`EARLY_EMPTY_LOOKS`], then comes back at the next
        // poll.
        let mut budget = self.params.poll_interval;
        let mut empty_looks = 0;
        let site_end = self.early_site_end(search);
        // Open SOS per host and per site: the nearer helpers share themselves
        // among those (counted when first needed, as the waves count free
        // ranks).
        let mut owners: Option<IdleMap> = None;
        let mut asks: Vec<Looked> = Vec::new();
        for (d, entry) in candidates {
            let mut open = |g: u8| {
                let map = owners.get_or_insert_with(|| {
                    self.topology
                        .idle_map(0, index.entries.iter().map(|e| e.rank))
                });
                self.topology.free_nearer(map, entry.rank, g) as usize
            };
            if search.early && !self.worth_early(search, entry, d) {
                continue;
            }
            let grace = if d > 0 && self.nearer_closing(search, entry, d, open(d)).is_some() {
                d as f64 * self.params.grace
            } else {
                0.0
            };
            let ready_at = entry.opened_at.max(search.idle_since) + grace;
            if now < ready_at {
                wake = wake.min(ready_at);
                continue;
            }
            if let Some(e) = self
                .empty
                .iter()
                .find(|e| (e.0, e.1) == (entry.rank, entry.seq))
            {
                // A lock found busy is still waited for: its back-off goes
                // on (a reset here made helpers retry a held lock every
                // few milliseconds).
                busy |= e.3;
                wake = wake.min(e.2);
                continue;
            }
            // Free ranks farther than this one that wait their grace leave
            // this SOS to the nearer ones, shared among the SOS near them.
            let near_helpers = (d + 1..=2)
                .filter(|&g| {
                    self.topology.free_nearer(&search.idle, entry.rank, g) < search.idle.free()
                })
                .find_map(|g| self.nearer_closing(search, entry, g, open(g)))
                .map_or(0.0, |h| h.max(1.0));
            let ask = Ask {
                now,
                distance: d,
                policy: search.policy,
                helper_speed: search.speed,
                job_left: match site_end {
                    Some(end) if d == 1 => search.job_left.max(end - now),
                    _ => search.job_left,
                },
                steal_cost: if on_shared {
                    search.steal_cost[d.min(2) as usize]
                } else {
                    storage_cost
                },
                helpers,
                near_helpers,
                busy_for: search.busy_for,
                risk: search.risk,
                least_one: !on_shared,
                dear_steal: self.params.late_threshold,
            };
            asks.push((d, entry, ask, None, f64::NEG_INFINITY));
        }
        // Looking ahead, the owner whose own work ends last, after what
        // earlier helpers took, goes first (of equal ends, the one that
        // gives the larger share), so that owners that posted later, or
        // that fewer helpers saw, get their part of the early helpers; and
        // under its lock, an owner whose end came before the next one's as
        // read (helpers that read the same records at once took from it
        // meanwhile) is passed over. Taken in the index's order, sites16's
        // slowed host gave one of its four owners a single early share
        // where the others got three, and that owner ended the job 0.6 s
        // after every other rank (emulator, 2 runs of 7: 0.937, 0.936);
        // taken by the largest share, every share the helper's whole spare
        // time, in the index's order again, about 1 run in 10 (0.92 to
        // 0.96; 0.942 to 0.995 over 60 runs with this, its 2 under 0.95
        // from a late share at the job's end). The records are read
        // without their locks, in the clerk's time, not the computing's;
        // only the first few at the nearest distance (those go first
        // whatever the ends), so an early search reads no more records
        // than it may find empty.
        let nearest = asks.first().map(|a| a.0);
        let first = asks
            .iter()
            .take_while(|a| Some(a.0) == nearest)
            .take(EARLY_EMPTY_LOOKS as usize)
            .count();
        if search.early && first > 1 {
            for (_, entry, ask, peeked, end) in &mut asks[..first] {
                *peeked = match board.peek_sos(entry.rank) {
                    Ok(Some(s)) => {
                        *end = owner_left(&s, now);
                        Some(looked(&s, entry.seq, &self.priced(ask, &s, entry.rank)))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        self.note_error(e, &format!("the SOS of rank {}", entry.rank));
                        Some(Err(Steal::Empty))
                    }
                };
            }
            let share = |a: &Looked<'_>| match a.3 {
                Some(Ok(k)) => k,
                _ => 0,
            };
            let taking = |a: &Looked<'_>| share(a) > 0;
            asks[..first].sort_by(|a, b| {
                (taking(b).cmp(&taking(a)))
                    .then(b.4.total_cmp(&a.4))
                    .then(share(b).cmp(&share(a)))
            });
            for i in 1..first {
                let floor = if taking(&asks[i]) {
                    asks[i].4
                } else {
                    f64::NEG_INFINITY
                };
                asks[i - 1].4 = floor;
            }
            asks[first - 1].4 = f64::NEG_INFINITY;
        }
        for (d, entry, ask, peeked, floor) in asks {
            if budget < 0.0 || self.over() {
                break;
            }
            if on_shared {
                self.looks = (self.looks.0.max(d), self.looks.1 + 1);
            }
            let found = match peeked {
                Some(Err(nothing)) => nothing,
                _ => self.steal(entry.rank, entry.seq, &ask, peeked.is_none(), floor, board),
            };
            match found {
                Steal::Success(seq, ids, drained) => {
                    if drained {
                        self.unlist(entry, board);
                    }
                    self.busy_backoff = 0.0;
                    self.idle_polls = 0;
                    return Outcome::Helped {
                        taken: Some((entry.rank, seq, ids)),
                        wake: now,
                    };
                }
                // Helped by others since the read: the next owner.
                Steal::Passed => {}
                // Held by another: the next search tries the others first;
                // looking ahead, it tries again after a back-off (a lesser
                // share now would leave the largest to none).
                Steal::Retry => {
                    busy = true;
                    if search.early {
                        break;
                    }
                    let until = now + storage_cost;
                    self.empty.push((entry.rank, entry.seq, until, true));
                }
                // Nothing to take until the owner's next look at its SOS,
                // about one interval away (looking ahead, the share may
                // only be too small yet; an early look counts its looks).
                Steal::Drained | Steal::Empty if search.busy_for > 0.0 && !search.early => {}
                found @ (Steal::Drained | Steal::Empty) => {
                    if matches!(found, Steal::Drained) {
                        self.unlist(entry, board);
                    }
                    empty_looks += 1;
                    budget = match (search.early, empty_looks) {
                        (true, EARLY_EMPTY_LOOKS..) | (false, 2..) => -1.0,
                        (true, _) => budget,
                        (false, _) => budget - ask.steal_cost,
                    };
                    let until = now + interval;
                    self.empty.push((entry.rank, entry.seq, until, false));
                }
            }
        }
        // A busy lock is tried again after a back-off that doubles from 5 ms
        // up to the poll interval, so waiting helpers stay off the cores.
        if busy {
            self.busy_backoff = (2.0 * self.busy_backoff).clamp(0.005, self.params.poll_interval);
            wake = wake.min(now + self.busy_backoff);
        } else {
            self.busy_backoff = 0.0;
            self.idle_polls += u32::from(on_shared && search.busy_for == 0.0);
        }
        Outcome::Helped { taken: None, wake }
    }

    /// Whether the ranks free at the last wave that are nearer than `d` to
    /// the owner of `entry` (a far helper's grace is their head start) can
    /// finish the owner's work, with the owner, within that grace, if they
    /// are as fast as this rank and share themselves among the `open` SOS
    /// near them. If not, or if none is free, a far helper need not wait:
    /// its help comes when it still shortens the job. When they can: how
    /// many of them each of those SOS may expect.
    fn nearer_closing(
        &self,
        search: &Search,
        entry: &OpenEntry,
        d: u8,
        open: usize,
    ) -> Option<f64> {
        let near = self.topology.free_nearer(&search.idle, entry.rank, d) as f64;
        if near == 0.0 {
            return None;
        }
        let per_sos = near / open.max(1) as f64;
        let (vo, vh) = (entry.speed, search.speed);
        if vo <= 0.0 || vh <= 0.0 {
            return Some(per_sos);
        }
        // The owner's work when it posted (the index tells no more): high,
        // in favour of help.
        let work = (entry.forecast - entry.opened_at).max(0.0) * vo;
        (work / (vo + per_sos * vh) <= d as f64 * self.params.grace).then_some(per_sos)
    }

    /// Whether a helper that looks ahead while early ([`Search::early`])
    /// takes from the SOS of `entry`, at distance `d`. Only from an SOS on
    /// another host, of an owner no faster than the helper, open for a
    /// speed window (a lasting lateness, not a passing fluctuation), and
    /// only when the hosts nearer to the owner (its host, or its site) will
    /// be late as a whole, at the last wave's figures, by more than `d`
    /// graces of their speed: nearer ranks, early too, close a smaller gap
    /// themselves, and the host's own ranks help it on its board.
    /// Simulator: early shares from faster owners traded work back and
    /// forth between ranks of fluctuating speeds (fluct16 on four hosts,
    /// without jitter, 0.963 → 0.907; 0.977 without early shares); from
    /// young SOS they came while the owners' speeds still lagged their
    /// slowdown (sites16, 12 seeds, 0.923 → 0.909).
    fn worth_early(&self, search: &Search, entry: &OpenEntry, d: u8) -> bool {
        if d == 0
            || search.speed < entry.speed
            || search.now - entry.opened_at < self.params.speed_window
        {
            return false;
        }
        hosts_late(
            &search.hosts,
            self.topology.hosts_nearer(entry.rank, d),
            search.job_end - search.counted_at,
            f64::from(d) * self.params.grace,
        )
    }

    /// The end to size an early share ([`Search::early`]) from an owner on
    /// this rank's site to, instead of the job's forecast end: the site's
    /// own forecast end, at the last waves' per-host figures, when there
    /// are other sites and this one will be late as a whole by no more
    /// than their helpers' grace (`2 · grace`). Those wait that long before
    /// they help, so the site closes its own lateness: shares sized to the
    /// job's end, which counts the other sites' ranks, left the rest to
    /// the site's ranks once their quotas ran out, taken in small pieces
    /// at the end (simulator, sites16-one without jitter: the job ended at
    /// 11.55 s against 10.72 s for the site alone; 11.09 s with this).
    fn early_site_end(&self, search: &Search) -> Option<f64> {
        if !search.early || self.topology.sites() == 1 {
            return None;
        }
        let end = search.site_end;
        (end - search.job_end <= 2.0 * self.params.grace).then_some(end)
    }

    /// `ask` with the steal's cost at least what the record `s` of `owner`
    /// says a steal costs the other helpers at the same distance from it:
    /// a helper that never took that far counts its steal free. (The last
    /// helper of sites16-one from the slowed rank's site, its first steal
    /// there counted free, took a share of 32 ids after a steal of 0.165 s
    /// and ended 0.2 s after the others: emulator, 0.938 to 0.940.)
    fn priced(&self, ask: &Ask, s: &Sos, owner: usize) -> Ask {
        let steal_cost = (s.aids.iter())
            .filter(|a| a.helper != self.me)
            .filter(|a| self.topology.distance(a.helper, owner) == ask.distance)
            .map(|a| a.steal_cost)
            .fold(ask.steal_cost, f64::max);
        Ask { steal_cost, ..*ask }
    }

    /// Take a share of the tail of `owner`'s open SOS and append an AID
    /// record. A read without the lock first, unless the last search found
    /// a lock busy (then there was something to take, and another read per
    /// retry is only load, and none when the caller has just read it,
    /// `peek` false): when it shows nothing to take, the record is not
    /// locked. Nothing is taken from an owner whose work, under the lock,
    /// ends less than `floor` seconds from now.
    fn steal(
        &mut self,
        owner: usize,
        seq: u64,
        ask: &Ask,
        peek: bool,
        floor: f64,
        board: &mut dyn Board,
    ) -> Steal {
        match (peek && self.busy_backoff == 0.0).then(|| board.peek_sos(owner)) {
            Some(Ok(Some(s))) => {
                if let Err(nothing) = looked(&s, seq, &self.priced(ask, &s, owner)) {
                    return nothing;
                }
            }
            Some(Err(e)) => {
                self.note_error(e, &format!("the SOS of rank {owner}"));
                return Steal::Empty;
            }
            _ => {}
        }
        if self.over() {
            return Steal::Empty;
        }
        let (me, now, vh) = (self.me, ask.now, ask.helper_speed);
        let mut taken = None;
        let mut drained = false;
        let mut passed = false;
        let r = board.with_sos(owner, Access::Try, &mut |s| {
            // (A closed record has nothing to take either way.)
            if matches!(s.state, SosState::Open(_)) && owner_left(s, now) < floor {
                passed = true;
                return;
            }
            let k = self.priced(ask, s, owner).share(s);
            let SosState::Open(p) = &mut s.state else {
                return;
            };
            if k == 0 {
                drained = p.tail.is_empty();
                return;
            }
            let ids = p.tail.take_back(k);
            drained = p.tail.is_empty();
            p.remaining = p.remaining.saturating_sub(k);
            s.aids.push(Aid {
                helper: me,
                ids: ids.clone(),
                at: now,
                speed: vh,
                busy_for: ask.busy_for,
                steal_cost: ask.steal_cost,
            });
            taken = Some((s.seq, ids));
        });
        match r {
            Ok(Locked::Busy) => Steal::Retry,
            Ok(Locked::Done) => match taken {
                Some((seq, ids)) => Steal::Success(seq, ids, drained),
                None if passed => Steal::Passed,
                None if drained => Steal::Drained,
                None => Steal::Empty,
            },
            Err(e) => {
                self.note_error(e, &format!("the SOS of rank {owner}"));
                Steal::Empty
            }
        }
    }

    /// Remove `entry` from the open index: its SOS has nothing left to take
    /// (closed, or its tail emptied), and every helper that reads the index
    /// would look at it in vain. The helper does not wait for the index lock.
    /// An owner that gives back part of its lease lists its SOS again.
    fn unlist(&mut self, entry: &OpenEntry, board: &mut dyn Board) {
        let (rank, seq) = (entry.rank, entry.seq);
        let r = board.with_index(Access::Try, &mut |ix| {
            if ix.entries.iter().any(|e| (e.rank, e.seq) == (rank, seq)) {
                ix.remove(rank);
            }
        });
        if let Err(e) = r {
            self.note_error(e, "the open index");
        }
    }

    /// The host's copy of the open index cannot be read or written: report
    /// it once, and read the shared index from now on.
    fn host_copy_failed(&mut self, e: Error) {
        self.host_copy_broken = true;
        self.note_error(
            e,
            "the host's copy of the open index; reading the shared one",
        );
    }

    /// An error on another rank's record or the index: report it, go on.
    fn note_error(&mut self, e: Error, what: &str) {
        self.errors.push(format!("{e} (skipped {what})"));
    }
}

/// What a read of the record `s` without its lock shows of the SOS listed
/// under `seq`: the share `ask` would take, or nothing to take there. (A
/// record of an earlier sequence than the index's entry is one the owner
/// has not written yet: it shows what it holds, and a later look tells.)
fn looked(s: &Sos, seq: u64, ask: &Ask) -> Result<u64, Steal> {
    if s.seq > seq || (s.seq == seq && !matches!(s.state, SosState::Open(_))) {
        return Err(Steal::Drained);
    }
    match ask.share(s) {
        0 if matches!(&s.state, SosState::Open(p) if p.tail.is_empty()) => Err(Steal::Drained),
        0 => Err(Steal::Empty),
        k => Ok(k),
    }
}

/// The board of `level`: the host's if there is one, else the shared one.
fn on<'a>(
    level: Level,
    shared: &'a mut dyn Board,
    host: Option<&'a mut dyn Board>,
) -> &'a mut dyn Board {
    match host {
        Some(h) if level == Level::Host => h,
        _ => shared,
    }
}

/// The tail left in `state` after an owner took from it, and whether the
/// SOS closed: an open SOS whose tail is empty closes.
fn tail_left(state: &mut SosState) -> (IdSet, bool) {
    let left = match state {
        SosState::Open(p) => p.tail.clone(),
        SosState::Closed => IdSet::new(),
    };
    let closed = left.is_empty();
    if closed {
        *state = SosState::Closed;
    }
    (left, closed)
}

/// The error of an open SOS that is no longer in its record.
fn lost_record(me: usize, seq: u64) -> Error {
    Error::Corrupt {
        path: format!("sos/{me}.ron").into(),
        reason: format!("this rank's open SOS (sequence {seq}) is no longer in its record"),
    }
}

fn write_figures(p: &mut Post, f: &Figures) {
    p.speed = f.speed;
    p.forecast = f.forecast;
    p.updated_at = f.at;
}

/// What a helper asks of an SOS: the figures of its share besides the
/// record's.
#[derive(Clone, Copy)]
struct Ask {
    now: f64,
    /// The helper's distance from the owner.
    distance: u8,
    policy: HelpPolicy,
    helper_speed: f64,
    job_left: f64,
    steal_cost: f64,
    helpers: f64,
    near_helpers: f64,
    busy_for: f64,
    risk: f64,
    least_one: bool,
    dear_steal: f64,
}

/// The owner's work in the open SOS `p` at `now` that no helper took: its
/// tail and what is left of its lease.
fn unhelped(p: &Post, now: f64) -> f64 {
    let lease_left =
        p.remaining.saturating_sub(p.tail.len()) as f64 - p.speed * (now - p.updated_at);
    p.tail.len() as f64 + lease_left.max(0.0)
}

/// Seconds from `now` to the end of the owner's work in the SOS record `s`
/// that no helper took (0 when it is not open): the helpers so far sized
/// their shares to end by then.
fn owner_left(s: &Sos, now: f64) -> f64 {
    match &s.state {
        SosState::Open(p) if p.speed > 0.0 => unhelped(p, now) / p.speed,
        SosState::Open(_) => f64::INFINITY,
        SosState::Closed => 0.0,
    }
}

impl Ask {
    /// The ids to take from the SOS record `s` (0 when it is not open or
    /// holds nothing worth a steal).
    fn share(&self, s: &Sos) -> u64 {
        let SosState::Open(p) = &s.state else {
            return 0;
        };
        let now = self.now;
        // A helper that took its share ahead of need computes it after its
        // own work: until then it is not free to help either. (Counted as
        // computed from when they were taken, early shares of sites16-one
        // made the last helpers of the slowed rank's host size theirs as if
        // their site's other host had been free: shares of 19, 11, 6 and 1
        // ids, each a steal, and the site ended 0.2 s late; simulator,
        // 0.946 → 0.955.)
        let others = s
            .aids
            .iter()
            .map(|a| {
                (
                    a.speed,
                    a.ids.len() as f64 - a.speed * (now - a.at - a.busy_for),
                    a.steal_cost,
                )
            })
            .collect();
        share(
            self.policy,
            &ShareInput {
                owner_remaining: unhelped(p, now),
                owner_speed: p.speed,
                helper_speed: self.helper_speed,
                others,
                available: p.tail.len(),
                job_left: self.job_left,
                steal_cost: self.steal_cost,
                helpers: self.helpers,
                near_helpers: self.near_helpers,
                busy_for: self.busy_for,
                risk: self.risk,
                least_one: self.least_one,
                dear_steal: self.dear_steal,
            },
        )
    }
}

/// A rank and its clerk in one thread: every request is carried out at
/// once, before [`Inline::next`] returns (tests, and callers without a
/// thread to spare). It dereferences to the [`Rank`].
#[derive(Debug)]
pub struct Inline {
    rank: Rank,
    clerk: Clerk,
}

impl Inline {
    /// `rank` with a clerk of its own.
    pub fn new(rank: Rank) -> Inline {
        let clerk = Clerk::new(&rank);
        Inline { rank, clerk }
    }

    /// [`Rank::next`], with every request carried out on `board` at once.
    pub fn next(&mut self, now: f64, board: &mut dyn Board) -> Result<Step> {
        loop {
            match self.rank.next(now)? {
                Step::Ask(request) => {
                    let reply = self.clerk.serve(request, board);
                    self.rank.reply(reply)?;
                }
                step => return Ok(step),
            }
        }
    }

    /// [`Rank::last_look`], carried out on `board` at once.
    pub fn last_look(&mut self, now: f64, board: &mut dyn Board) -> Result<()> {
        match self.rank.last_look(now) {
            Some(request) => {
                let reply = self.clerk.serve(request, board);
                self.rank.reply(reply)
            }
            None => Ok(()),
        }
    }
}

impl std::ops::Deref for Inline {
    type Target = Rank;
    fn deref(&self) -> &Rank {
        &self.rank
    }
}

impl std::ops::DerefMut for Inline {
    fn deref_mut(&mut self) -> &mut Rank {
        &mut self.rank
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner at 10 ids/s with 300 ids left, all in its tail, and one AID:
    /// a helper at 50 ids/s took 30 ids at t = 1 s with `busy_for` seconds
    /// of its own work left.
    fn sos_helped(busy_for: f64) -> Sos {
        Sos {
            rank: 0,
            seq: 1,
            state: SosState::Open(Post {
                speed: 10.0,
                remaining: 300,
                forecast: 32.0,
                host: "h".into(),
                site: "s".into(),
                opened_at: 0.0,
                updated_at: 2.0,
                tail: IdSet::from_range(0..300),
            }),
            aids: vec![Aid {
                helper: 1,
                ids: IdSet::from_range(300..330),
                at: 1.0,
                speed: 50.0,
                busy_for,
                steal_cost: 0.0,
            }],
        }
    }

    /// An idle helper at 50 ids/s at t = 2 s, the job's end far away.
    fn ask() -> Ask {
        Ask {
            now: 2.0,
            distance: 0,
            policy: HelpPolicy::Balanced,
            helper_speed: 50.0,
            job_left: 100.0,
            steal_cost: 0.0,
            helpers: 1.0,
            near_helpers: 0.0,
            busy_for: 0.0,
            risk: 0.0,
            least_one: false,
            dear_steal: 1.0,
        }
    }

    #[test]
    fn a_share_taken_ahead_of_need_counts_as_work_its_helper_still_has() {
        // At t = 2 s the earlier helper has 2 s of its own work left, then
        // its 30 ids: 130 ids' worth. The owner, it and this helper end
        // together: 50 · (300 + 130) / (10 + 50 + 50) = 195.45 ids, rounded
        // up (0.55 of an id more is 11 ms of this helper's, 0.45 of an id
        // less 45 ms of the owner's).
        assert_eq!(ask().share(&sos_helped(3.0)), 196);
        // Taken by an idle helper, the 30 ids were computed by t = 1.6 s:
        // the owner is alone, 50 · 300 / (10 + 50) = 250 ids.
        assert_eq!(ask().share(&sos_helped(0.0)), 250);
    }

    #[test]
    fn a_helper_that_never_stole_that_far_counts_the_steal_as_its_peers_measured() {
        use crate::config::{Config, Hosts, Sites};
        // 2 sites of 2 hosts of 2 ranks: the owner is rank 0, the earlier
        // helper rank 2 (distance 1) measured its steals at 0.2 s.
        let topology = Topology::new(vec!["m".into(); 8], &Hosts::Virtual(2), &Sites::Virtual(2));
        let clerk = |me| {
            Clerk::new(&Rank::new(
                me,
                1000,
                Params::from(&Config::default()),
                topology.clone(),
            ))
        };
        let mut sos = sos_helped(0.0);
        sos.aids[0].helper = 2;
        sos.aids[0].steal_cost = 0.2;
        let priced = |me: usize, distance: u8| {
            clerk(me)
                .priced(&Ask { distance, ..ask() }, &sos, 0)
                .steal_cost
        };
        // Rank 3, as far as rank 2: the steal costs what rank 2 measured.
        assert_eq!(priced(3, 1), 0.2);
        // Rank 1 (distance 0) and rank 4 (distance 2): no peer that far.
        assert_eq!(priced(1, 0), 0.0);
        assert_eq!(priced(4, 2), 0.0);
        // Rank 2 itself goes by its own figure.
        assert_eq!(priced(2, 1), 0.0);
        // And the share is the idle helper's 250 ids less its steal's.
        let far = |steal_cost| Ask {
            distance: 1,
            steal_cost,
            ..ask()
        };
        let priced_share = clerk(3).priced(&far(0.0), &sos, 0).share(&sos);
        assert_eq!(priced_share, far(0.2).share(&sos));
        assert!(priced_share < far(0.0).share(&sos), "{priced_share}");
    }
}
