//! The rank's clerk: carries out the state machine's requests on the boards
//! (DESIGN §5, §6), away from the rank's computing.
//!
//! Every look at a board costs storage round trips. So the state machine
//! ([`Rank`]) never touches a board: it asks ([`crate::policy::Step::Ask`]
//! with a [`Request`]), goes on computing its lease while a [`Clerk`]
//! carries the request out, and applies the [`Reply`] when it comes. The
//! shell ([`crate::Balancer`]) runs the clerk in a thread of its own, which
//! touches files and never MPI; the simulator charges each request the time
//! of its storage operations; `Inline` (with the `emulate` feature) carries
//! each request out at once.
//!
//! The clerk decides nothing about balancing: which SOS to help, how much
//! to take and which slots to claim are [`crate::policy::helper`]'s pure
//! choices. It keeps only the memory of its searches (SOS found with
//! nothing to take, the back-off of idle polls) and gets round what it
//! meets on the boards: an SOS file or index it cannot read costs help,
//! never an id, and is reported once.

use crate::board::{Board, Claimed, Probe, format};
use crate::cost::{TRIES, claim_reads, search_reads, slot};
use crate::error::{Error, Result};
#[cfg(feature = "emulate")]
use crate::policy::Step;
use crate::policy::helper::{Ask, Candidate, Rules, candidates, early_site_end};
use crate::policy::{Outcome, Params, Rank, Reply, Request, Search, Taken};
use crate::protocol::{Claim, Entry, Index, Level, Post, Slot, Sos, SosState};
use crate::topology::Topology;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Carries out one rank's requests on the boards. Its state is the
/// helper's memory of its searches.
#[derive(Debug)]
pub struct Clerk {
    me: usize,
    params: Params,
    topology: Topology,
    /// The host's directory beside the shared board (its copy of the open
    /// index, its ranks' wanted changes) failed once: not used any more.
    host_copy_broken: bool,
    /// Claims the current request may still read ([`Clerk::claimant`]).
    reads_left: usize,
    /// SOS (owner, sequence) found with nothing to take, until when not to
    /// read them again.
    empty: Vec<(usize, u64, f64)>,
    /// Idle searches of the shared board in a row that took nothing, and
    /// when the last one was.
    idle_polls: u32,
    last_poll: f64,
    /// When an idle rank with a host board searches the shared board next.
    shared_at: f64,
    /// Set once the job's verdict is in ([`Clerk::verdict_flag`]).
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
            host_copy_broken: false,
            reads_left: claim_reads(),
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
    /// before its next operation, and answers that it took nothing.
    pub fn verdict_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.over)
    }

    fn over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    /// Carry `request` out on `board`, the only board (every SOS is on it).
    pub fn serve(&mut self, request: Request, board: &mut dyn Board) -> Reply {
        self.serve_on(request, board, None)
    }

    /// Carry `request` out on the `shared` board and the board of this
    /// rank's `host`, if there is one. The reply's `seconds` is for the
    /// caller to fill in.
    pub fn serve_on<'s>(
        &mut self,
        request: Request,
        shared: &mut (dyn Board + 's),
        mut host: Option<&mut (dyn Board + 's)>,
    ) -> Reply {
        self.looks = (0, 0);
        self.reads_left = claim_reads();
        let before = [Some(shared.ops()), host.as_ref().map(|h| h.ops())];
        let outcome = match request {
            Request::Post { entry, sos, level } => {
                self.post(&entry, &sos, on(level, shared, host.as_deref_mut()))
            }
            Request::Refresh {
                entry,
                sos,
                level,
                front,
                claim,
            } => {
                let board = on(level, shared, host.as_deref_mut());
                match self.claim_own(&front, &claim, (false, u64::MAX), board) {
                    Outcome::Claimed { won, lost } => self.refresh(&entry, sos, (won, lost), board),
                    failed => failed,
                }
            }
            Request::Claim {
                level,
                slots,
                claim,
                listed,
                most,
            } => {
                let board = on(level, shared, host.as_deref_mut());
                self.claim_own(&slots, &claim, (listed, most), board)
            }
            Request::Withdraw { level, seq } => {
                self.withdraw(seq, on(level, shared, host.as_deref_mut()))
            }
            Request::Help(search) => self.help_near_first(&search, shared, host.as_deref_mut()),
        };
        let after = [Some(shared.ops()), host.as_ref().map(|h| h.ops())];
        let ops = [0, 1].map(|i| match (before[i], after[i]) {
            (Some(b), Some(a)) => a - b,
            _ => 0,
        });
        Reply {
            outcome,
            seconds: None,
            ops,
            looks: std::mem::take(&mut self.looks),
            errors: std::mem::take(&mut self.errors),
        }
    }

    /// Write the open SOS and list it, the SOS in flight while the index
    /// is rewritten (neither after the verdict). An SOS that could not be
    /// written is taken out of the index again.
    fn post(&mut self, entry: &Entry, sos: &Sos, board: &mut dyn Board) -> Outcome {
        if self.over() {
            return Outcome::NotPosted;
        }
        match self.post_and_list(sos, Some(entry), board) {
            Ok(listed) => Outcome::Posted { listed },
            Err(e) => {
                self.note(e, "this rank's SOS: not posted");
                self.list(None, board);
                Outcome::NotPosted
            }
        }
    }

    /// After the front claims (`won`, and `taken` lost), list the claims
    /// of this rank's slots and read those of the SOS's slots, write `sos`
    /// less the slots claimed or found taken, and list the SOS again if the
    /// index lost it (a damaged index heals here).
    fn refresh(
        &mut self,
        entry: &Entry,
        mut sos: Sos,
        (won, mut taken): (Vec<Slot>, Vec<(Slot, Option<Claim>)>),
        board: &mut dyn Board,
    ) -> Outcome {
        // After the verdict the SOS and the index are left as they are.
        if self.over() {
            return Outcome::Refreshed { won, taken };
        }
        if let SosState::Open(p) = &sos.state {
            let names = match board.claimed(self.me) {
                Ok(names) => names,
                Err(e) => {
                    self.note(e, "the claims of this rank's slots");
                    Vec::new()
                }
            };
            let known = |s: &Slot| won.contains(s) || taken.iter().any(|(t, _)| t == s);
            let listed: Vec<&Slot> = (p.slots.iter())
                .filter(|s| !known(s) && names.iter().any(|n| s.named(n)))
                .collect();
            for s in listed {
                let claim = self.claimant(s, board);
                taken.push((s.clone(), claim));
            }
        }
        if let SosState::Open(p) = &mut sos.state {
            p.slots
                .retain(|s| !won.contains(s) && !taken.iter().any(|(t, _)| t == s));
            p.remaining -= taken
                .iter()
                .map(|(s, _)| s.len())
                .sum::<u64>()
                .min(p.remaining);
            p.helped.extend(taken.iter().filter_map(|(_, c)| c.clone()));
        }
        if let Err(e) = self.post_and_list(&sos, Some(entry), board) {
            self.note(e, "this rank's SOS");
        }
        Outcome::Refreshed { won, taken }
    }

    /// Claim the rank's own `slots`, sent together; `listed`: those the
    /// claims listed first name are lost without a claim; `most`: the slots
    /// not listed are claimed front first until they hold that many ids. A
    /// claim that neither wins nor loses (the claim directory cannot be
    /// written) leaves the slot's ids nobody's: after a second try, the
    /// rank fails, naming the file.
    fn claim_own(
        &mut self,
        slots: &[Slot],
        claim: &Claim,
        (listed, most): (bool, u64),
        board: &mut dyn Board,
    ) -> Outcome {
        let (mut won, mut lost) = (Vec::new(), Vec::new());
        // A listing that fails costs nothing: every slot is claimed.
        let names = match listed {
            true => board.claimed(self.me).unwrap_or_default(),
            false => Vec::new(),
        };
        // After the verdict only the last look claims: the job is done.
        if self.over() && !listed {
            return Outcome::Claimed { won, lost };
        }
        let (known, mut new): (Vec<&Slot>, Vec<&Slot>) =
            slots.iter().partition(|s| names.iter().any(|n| s.named(n)));
        let mut ids = 0;
        new.retain(|s| {
            let wanted = ids < most;
            ids += s.len();
            wanted
        });
        for s in known {
            let by = self.claimant(s, board);
            lost.push((s.clone(), by));
        }
        let claims: Vec<Claim> = (new.iter())
            .map(|s| Claim {
                slot: (*s).clone(),
                ..claim.clone()
            })
            .collect();
        let sent = board.claim_all(&claims);
        for ((s, c), mut tried) in new.into_iter().zip(&claims).zip(sent) {
            if tried.is_err() && !self.over() {
                std::thread::sleep(std::time::Duration::from_millis(100));
                tried = board.claim(c);
            }
            match tried {
                Ok(Claimed::Won) => won.push(s.clone()),
                Ok(Claimed::Lost) => {
                    let by = self.claimant(s, board);
                    lost.push((s.clone(), by));
                }
                Err(e) => {
                    return Outcome::Failed(Error::Corrupt {
                        path: format!("aid/{}", s.claim_name(self.me)).into(),
                        reason: format!(
                            "this rank cannot claim its own slot (ids {}..{}), so it cannot tell \
                             whether a helper has them: {e}",
                            s.start, s.end
                        ),
                    });
                }
            }
        }
        Outcome::Claimed { won, lost }
    }

    /// Who claimed this rank's slot `s`, while the request may still read
    /// a claim ([`claim_reads`]): each read is an operation, and the
    /// claimant is news, not a decision.
    fn claimant(&mut self, s: &Slot, board: &mut dyn Board) -> Option<Claim> {
        if self.reads_left == 0 || self.over() {
            return None;
        }
        self.reads_left -= 1;
        match board.probe(self.me, s) {
            Ok(Probe::Taken(c)) => c,
            _ => None,
        }
    }

    /// Close the SOS and take it out of the index.
    fn withdraw(&mut self, seq: u64, board: &mut dyn Board) -> Outcome {
        if self.over() {
            return Outcome::Withdrawn;
        }
        let closed = Sos {
            rank: self.me,
            seq,
            state: SosState::Closed,
        };
        if let Err(e) = self.post_and_list(&closed, None, board) {
            self.note(e, "this rank's SOS");
        }
        Outcome::Withdrawn
    }

    /// Write `sos` and make the index list `entry` (or no SOS of this
    /// rank), the SOS in flight while the index is rewritten: whether the
    /// index lists what it should, or why the SOS was not written.
    fn post_and_list(
        &mut self,
        sos: &Sos,
        entry: Option<&Entry>,
        board: &mut dyn Board,
    ) -> Result<bool> {
        let sent = board.post_sent(sos);
        let listed = self.list(entry, board);
        sent.and_then(|()| board.landed()).map(|()| listed)
    }

    /// Make the index list `entry`, or no SOS of this rank: read it,
    /// change it, replace it, and read it again. Owners that do so at once
    /// undo each other's change: the read after the write sees it, and the
    /// change is made again ([`TRIES`] times at most; the index is a
    /// hint, and each owner lists itself again at its refresh). Each write
    /// makes the changes its host's other ranks want too
    /// ([`Board::wanted`]): the ranks of a host that move at once list one
    /// another. An index that cannot be read is replaced; one replaced by
    /// others at every read is read again. True when it lists what it
    /// should.
    fn list(&mut self, entry: Option<&Entry>, board: &mut dyn Board) -> bool {
        let (me, host) = (self.me, self.topology.host(self.me).to_string());
        let change = |index: &mut Index, rank: usize, want: Option<&Entry>| match want {
            Some(e) => index.upsert(e),
            None => index.remove(rank),
        };
        for _ in 0..TRIES {
            if self.over() {
                return false;
            }
            // What this rank wants is left even when it writes nothing: a
            // host-mate's write must not list an SOS it withdrew.
            let wanted = match self.host_copy_broken {
                true => Vec::new(),
                false => board.wanted(&host, me, entry).unwrap_or_else(|e| {
                    self.host_copy_failed(e);
                    Vec::new()
                }),
            };
            let mut index = match board.read_index() {
                Ok(ix) => ix,
                // Other owners are replacing it: read their index again.
                Err(e) if format::replaced(&e) => continue,
                Err(e) => {
                    self.note(e, "the open index; writing it anew");
                    Index::default()
                }
            };
            if !change(&mut index, me, entry) {
                return true;
            }
            for (rank, want) in wanted.iter().filter(|w| w.0 != me) {
                change(&mut index, *rank, want.as_ref());
            }
            if let Err(e) = board.write_index(&index) {
                self.note(e, "the open index");
                return false;
            }
        }
        false
    }

    /// Search the host's board, if there is one, then the shared board; an
    /// idle rank that found nothing wakes at the sooner of their wakes. The
    /// host's board is searched every poll interval, the shared one no
    /// sooner than its own last search said (its polls back off), unless a
    /// watcher saw its index change.
    fn help_near_first<'s>(
        &mut self,
        search: &Search,
        shared: &mut (dyn Board + 's),
        host: Option<&mut (dyn Board + 's)>,
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

    /// The open index of `level`'s board for a search: on the shared board
    /// the host's copy while it is fresh (the first idle rank of a host to
    /// poll reads the shared index and leaves a copy, so that reads of the
    /// shared index grow with the hosts, not the ranks), else the index.
    fn index_for(
        &mut self,
        search: &Search,
        board: &mut dyn Board,
        level: Level,
        fresh: f64,
    ) -> Result<Index> {
        let on_shared = level == Level::Shared;
        let host = self.topology.host(self.me).to_string();
        if on_shared && !search.woken && !self.host_copy_broken {
            match board.read_host_index(&host) {
                Ok(Some((index, at))) if search.now - at < fresh => return Ok(index),
                Ok(_) => {}
                Err(e) => self.host_copy_failed(e),
            }
        }
        let index = board.read_index()?;
        if on_shared
            && !self.host_copy_broken
            && let Err(e) = board.write_host_index(&host, &index, search.now)
        {
            self.host_copy_failed(e);
        }
        Ok(index)
    }

    /// Look for an open SOS on `level`'s board to help, and claim a share
    /// of its slots ([`crate::policy::helper`] chooses). On the host's
    /// board polls do not back off.
    fn help(&mut self, search: &Search, board: &mut dyn Board, level: Level) -> Outcome {
        let now = search.now;
        if self.over() {
            return Outcome::Helped {
                taken: None,
                wake: now,
            };
        }
        let on_shared = level == Level::Shared;
        let interval = search.interval[slot(level)];
        let mut poll = if on_shared {
            search.poll
        } else {
            self.params.poll_interval
        };
        // Idle polls that find nothing back off: the interval doubles up to
        // `poll_max`, until an SOS opens after the last poll.
        let idle = on_shared && search.busy_for == 0.0;
        let most = self.params.poll_max.max(poll);
        let backed_off = |polls: u32| (poll * f64::from(1u32 << polls.min(16))).min(most);
        let fresh = 0.5 * backed_off(if idle { self.idle_polls } else { 0 });
        let index = match self.index_for(search, board, level, fresh) {
            Ok(ix) => ix,
            Err(e) => {
                self.skip(e, "the open index");
                return Outcome::Helped {
                    taken: None,
                    wake: now + poll,
                };
            }
        };
        if idle {
            if index.entries.iter().any(|e| e.opened_at >= self.last_poll) {
                self.idle_polls = 0;
            }
            self.last_poll = now;
            poll = backed_off(self.idle_polls);
        }
        let rules = Rules {
            grace: self.params.grace,
            speed_window: self.params.speed_window,
        };
        let (mut found, ready) = candidates(&index, self.me, &self.topology, search, rules);
        let mut wake = (now + poll).min(ready);
        self.skip_known_empty(&mut found, now, &mut wake);
        let site_end = early_site_end(search, &self.topology, rules);
        for (empty_reads, c) in found.into_iter().enumerate() {
            if self.over() || empty_reads >= search_reads() {
                break;
            }
            let post = self.read_post(&c, board, level);
            let ask = Ask::new(self.me, &self.params, search, &c, level, site_end);
            let taken = post.as_ref().and_then(|p| {
                let ask = ask.priced(p, c.entry.rank, self.me, &self.topology);
                self.take(&c, p, &ask, board)
            });
            if let Some((slots, share)) = taken {
                self.idle_polls = 0;
                let start = ask.input.steal_cost.max(ask.input.busy_for);
                return Outcome::Helped {
                    taken: Some(Taken {
                        owner: c.entry.rank,
                        level,
                        slots,
                        ends: now + start + share as f64 / search.speed.max(1e-9),
                    }),
                    wake: now,
                };
            }
            // Nothing to take until the owner's next refresh (a rank that
            // looks ahead may only find its share too small yet).
            if search.busy_for == 0.0 || search.early {
                self.empty.push((c.entry.rank, c.entry.seq, now + interval));
            }
        }
        self.idle_polls += u32::from(idle);
        Outcome::Helped { taken: None, wake }
    }

    /// Leave out of `found` the SOS found empty since their owners' last
    /// refresh; `wake` at the soonest of those refreshes.
    fn skip_known_empty(&mut self, found: &mut Vec<Candidate>, now: f64, wake: &mut f64) {
        self.empty.retain(|e| e.2 > now);
        found.retain(|c| {
            let known = (self.empty.iter()).find(|e| (e.0, e.1) == (c.entry.rank, c.entry.seq));
            if let Some(e) = known {
                *wake = wake.min(e.2);
            }
            known.is_none()
        });
    }

    /// Read the SOS of a candidate: its open post, or `None` (closed,
    /// unreadable: reported, and skipped until its owner's next refresh;
    /// replaced by its owner at every read: skipped without a report).
    fn read_post(&mut self, c: &Candidate, board: &mut dyn Board, level: Level) -> Option<Post> {
        if level == Level::Shared {
            self.looks = (self.looks.0.max(c.distance), self.looks.1 + 1);
        }
        match board.read_sos(c.entry.rank) {
            Ok(Some(Sos {
                state: SosState::Open(p),
                ..
            })) => Some(p),
            Ok(_) => None,
            Err(e) => {
                self.skip(e, &format!("the SOS of rank {}", c.entry.rank));
                None
            }
        }
    }

    /// Claim the slots of `p` that `ask` chooses: the slots won and the
    /// share they were chosen for, if any won. A claim lost is another
    /// helper's share, made from the same view of the SOS: the rest of the
    /// choice is taken to be its too, the owner's claims are listed (once:
    /// the SOS may be stale), and the choice is made again without them,
    /// until a claim wins or no slot is left to choose.
    fn take(
        &mut self,
        c: &Candidate,
        p: &Post,
        ask: &Ask,
        board: &mut dyn Board,
    ) -> Option<(Vec<Slot>, u64)> {
        let owner = c.entry.rank;
        let mut tried: Vec<Slot> = Vec::new();
        let mut listed = false;
        loop {
            let share = ask.share(p, &tried);
            let mut chosen = ask.slots(p, &tried).into_iter();
            if chosen.len() == 0 {
                return None;
            }
            let mut got: Vec<Slot> = Vec::new();
            let mut lost = false;
            while let Some(s) = chosen.next() {
                if self.over() {
                    break;
                }
                let claim = Claim {
                    owner,
                    slot: s.clone(),
                    by: self.me,
                    at: ask.now,
                    speed: ask.input.helper_speed,
                    busy_for: ask.input.busy_for,
                    steal_cost: ask.input.steal_cost,
                };
                match board.claim(&claim) {
                    Ok(Claimed::Won) => got.push(s.clone()),
                    Ok(Claimed::Lost) => lost = true,
                    Err(e) => self.note(e, &format!("a claim of rank {owner}'s slot")),
                }
                tried.push(s);
                if lost && got.is_empty() {
                    tried.extend(chosen.by_ref());
                }
            }
            if !got.is_empty() || self.over() {
                return (!got.is_empty()).then_some((got, share));
            }
            if lost && !listed {
                listed = true;
                match board.claimed(owner) {
                    Ok(names) => tried.extend(
                        (p.slots.iter())
                            .filter(|s| !tried.contains(s) && names.iter().any(|n| s.named(n)))
                            .cloned()
                            .collect::<Vec<_>>(),
                    ),
                    Err(e) => self.note(e, &format!("the claims of rank {owner}'s slots")),
                }
            }
        }
    }

    /// The host's copy of the open index cannot be read or written: report
    /// it once, and read the shared one from now on.
    fn host_copy_failed(&mut self, e: Error) {
        self.host_copy_broken = true;
        self.note(
            e,
            "the host's directory beside the shared board; the shared one alone from now on",
        );
    }

    /// A problem got round: report it, go on.
    fn note(&mut self, e: Error, what: &str) {
        self.errors.push(format!("{e} (skipped {what})"));
    }

    /// A file skipped by a search: reported unless other ranks replaced it
    /// at every try of the read (a busy file, read again by a later search).
    fn skip(&mut self, e: Error, what: &str) {
        if !format::replaced(&e) {
            self.note(e, what);
        }
    }
}

/// The board of `level`: the host's if there is one, else the shared one.
fn on<'b, 'c>(
    level: Level,
    shared: &'b mut (dyn Board + 'c),
    host: Option<&'b mut (dyn Board + 'c)>,
) -> &'b mut (dyn Board + 'c) {
    match host {
        Some(h) if level == Level::Host => h,
        _ => shared,
    }
}

/// A rank and its clerk in one thread: every request is carried out at
/// once, before [`Inline::next`] returns (tests, and callers without a
/// thread to spare). It dereferences to the [`Rank`]. With the `emulate`
/// feature.
#[cfg(feature = "emulate")]
#[derive(Debug)]
pub struct Inline {
    rank: Rank,
    clerk: Clerk,
}

#[cfg(feature = "emulate")]
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
                    let reply = self.clerk.serve(*request, board);
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

#[cfg(feature = "emulate")]
impl std::ops::Deref for Inline {
    type Target = Rank;
    fn deref(&self) -> &Rank {
        &self.rank
    }
}

#[cfg(feature = "emulate")]
impl std::ops::DerefMut for Inline {
    fn deref_mut(&mut self) -> &mut Rank {
        &mut self.rank
    }
}
