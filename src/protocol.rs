//! The claims protocol's messages (DESIGN §5, §6): what the files of a board
//! hold. Pure values; the board ([`crate::board`]) stores them, the state
//! machine ([`crate::policy`]) decides what they say.
//!
//! - An **SOS** ([`Sos`]) is written by its owner alone, replaced whole. An
//!   open one offers the owner's unleased ids cut into **slots** ([`Slot`]):
//!   consecutive ids, each claimed whole.
//! - A **claim** ([`Claim`], the paper's AID) takes one slot: a file whose
//!   name says owner, sequence and slot, created once, exclusively. Whoever
//!   creates it, a helper or the owner itself, has those ids; every other
//!   rank's create fails. The claims are the journal of who has what.
//! - The **index** ([`Index`], `open.ron`) lists the open SOS: a hint for
//!   helpers, which decides nothing.

use crate::ids::IdSet;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Where an SOS is posted: the board of the owner's host (node-local files,
/// which cost the shared storage nothing) or the shared board.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Level {
    /// The board of the owner's host.
    Host,
    /// The board on the shared storage.
    #[default]
    Shared,
}

/// Consecutive ids of an SOS, claimed whole by one rank. Named by the
/// sequence of the post that cut it and its place in that post.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slot {
    /// The sequence number of the post that cut it.
    pub seq: u64,
    /// Its place in that post, from the front.
    pub index: u32,
    /// The first id.
    pub start: u64,
    /// One past the last id.
    pub end: u64,
}

impl Slot {
    /// Its ids.
    pub fn ids(&self) -> Range<u64> {
        self.start..self.end
    }

    /// The number of its ids.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// True when it holds no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of its claim file on the board of `owner`'s SOS, under the
    /// board's `aid/`: `<owner>/<seq>.<index>` (the claims of one owner in
    /// a directory of their own, so that a listing of it is one operation).
    pub fn claim_name(&self, owner: usize) -> String {
        format!("{owner}/{}", self.file_name())
    }

    /// The file name of its claim: `<seq>.<index>`.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.seq, self.index)
    }

    /// Whether `name` (of a claim file) is this slot's: exactly its
    /// [`Slot::file_name`] (a stray `03.2` is not slot 3.2's claim).
    pub fn named(&self, name: &str) -> bool {
        name == self.file_name()
    }
}

/// Cut `ids` into slots of the post `seq` of the given sizes, front to back,
/// numbered from `first`; the last slot takes what the sizes leave. Empty
/// sizes are skipped.
pub fn cut(ids: &IdSet, seq: u64, first: u32, sizes: &[u64]) -> Vec<Slot> {
    let mut ids = ids.clone();
    let mut slots = Vec::new();
    let mut index = first;
    let mut sizes = sizes.iter().copied().filter(|&n| n > 0).peekable();
    while !ids.is_empty() {
        let n = match sizes.next() {
            Some(n) if sizes.peek().is_some() => n,
            _ => ids.len(),
        };
        // A slot is consecutive: a piece of a range at most.
        for r in ids.take_front(n).ranges() {
            slots.push(Slot {
                seq,
                index,
                start: r.start,
                end: r.end,
            });
            index += 1;
        }
    }
    slots
}

/// A rank's SOS: closed, or open with the owner's figures and slots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sos {
    /// The owner's rank.
    pub rank: usize,
    /// The owner's last post (0 before the first).
    pub seq: u64,
    /// Closed, or open.
    pub state: SosState,
}

/// Whether an SOS is open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum SosState {
    /// Nothing offered: a helper takes nothing.
    #[default]
    Closed,
    /// The owner forecasts it will be late: its slots may be claimed.
    Open(Post),
}

/// The content of an open SOS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Post {
    /// The owner's speed, realisations per second.
    pub speed: f64,
    /// The owner's ids when written: its lease and its slots.
    pub remaining: u64,
    /// The owner's forecast end, seconds since the job's start.
    pub forecast: f64,
    /// The owner's host.
    pub host: String,
    /// The owner's site.
    pub site: String,
    /// When the SOS opened, seconds since the job's start.
    pub opened_at: f64,
    /// When the owner wrote this, seconds since the job's start.
    pub at: f64,
    /// The slots not claimed as far as the owner knows, front to back.
    /// Slots of earlier posts the owner has not claimed yet come first.
    pub slots: Vec<Slot>,
    /// The helpers' claims the owner knows of (a helper's share counts
    /// their work, [`crate::plan::share`]).
    pub helped: Vec<Claim>,
}

impl Post {
    /// Ids in the slots.
    pub fn offered(&self) -> u64 {
        self.slots.iter().map(Slot::len).sum()
    }

    /// The owner's work at `now` that no helper took: the slots not in
    /// `taken`, and what is left of its lease at its speed.
    pub fn unhelped(&self, now: f64, taken: &[Slot]) -> f64 {
        let lease = self.remaining.saturating_sub(self.offered()) as f64
            - self.speed * (now - self.at).max(0.0);
        let open: u64 = (self.slots.iter())
            .filter(|s| !taken.contains(s))
            .map(Slot::len)
            .sum();
        open as f64 + lease.max(0.0)
    }
}

/// A claim (the paper's AID): rank `by` took `slot` of `owner`'s SOS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The owner of the SOS.
    pub owner: usize,
    /// The slot.
    pub slot: Slot,
    /// The rank that claimed it (a helper, or the owner itself).
    pub by: usize,
    /// When, seconds since the job's start.
    pub at: f64,
    /// The claimant's speed then.
    pub speed: f64,
    /// Seconds of its own work the claimant still had (a share taken ahead
    /// of need is computed after that work).
    pub busy_for: f64,
    /// Seconds a steal from that SOS took the claimant.
    pub steal_cost: f64,
}

impl Claim {
    /// The claimant's work left of this claim at `now`, in ids (negative
    /// once done): `(speed, ids left, steal cost)` for [`crate::plan::share`].
    pub fn work_left(&self, now: f64) -> (f64, f64, f64) {
        let left = self.slot.len() as f64 - self.speed * (now - self.at - self.busy_for);
        (self.speed, left, self.steal_cost)
    }
}

/// The index of open SOS (`open.ron`): a hint for helpers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// One entry per open SOS.
    pub entries: Vec<Entry>,
}

/// One open SOS in the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The owner's rank.
    pub rank: usize,
    /// The post's sequence number.
    pub seq: u64,
    /// The owner's forecast end when it posted.
    pub forecast: f64,
    /// When it posted, seconds since the job's start.
    pub opened_at: f64,
    /// The owner's speed when it posted.
    pub speed: f64,
}

impl Index {
    /// List `entry`, replacing an earlier entry of its rank. True if that
    /// changed the index.
    pub fn upsert(&mut self, entry: &Entry) -> bool {
        if self.entries.contains(entry) {
            return false;
        }
        self.remove(entry.rank);
        self.entries.push(entry.clone());
        true
    }

    /// Forget the entry of `rank`. True if there was one.
    pub fn remove(&mut self, rank: usize) -> bool {
        let n = self.entries.len();
        self.entries.retain(|e| e.rank != rank);
        self.entries.len() != n
    }

    /// The entry of `rank`, if listed.
    pub fn get(&self, rank: usize) -> Option<&Entry> {
        self.entries.iter().find(|e| e.rank == rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_covers_the_ids_in_consecutive_slots_the_last_taking_the_rest() {
        let mut ids = IdSet::from_range(0..10);
        ids.insert(20..25);
        let slots = cut(&ids, 3, 2, &[4, 0, 4, 100]);
        let got: Vec<(u32, Range<u64>)> = slots.iter().map(|s| (s.index, s.ids())).collect();
        // The last slot takes the rest, which crosses a gap: two slots.
        assert_eq!(got, vec![(2, 0..4), (3, 4..8), (4, 8..10), (5, 20..25)]);
        assert!(slots.iter().all(|s| s.seq == 3));
        assert_eq!(slots[0].claim_name(7), "7/3.2");
        assert!(slots[0].named("3.2") && !slots[0].named("3.20") && !slots[0].named("x"));
        assert!(!slots[0].named("03.2") && !slots[0].named("+3.2") && !slots[0].named("3.02"));
        assert!(cut(&IdSet::new(), 1, 0, &[5]).is_empty());
        assert_eq!(cut(&ids, 1, 0, &[]).len(), 2);
    }

    #[test]
    fn the_unhelped_work_is_the_slots_not_taken_and_the_lease_left() {
        let slots = cut(&IdSet::from_range(100..160), 1, 0, &[20, 40]);
        let post = Post {
            speed: 10.0,
            remaining: 80,
            forecast: 9.0,
            host: "h".into(),
            site: "s".into(),
            opened_at: 1.0,
            at: 1.0,
            slots: slots.clone(),
            helped: Vec::new(),
        };
        assert_eq!(post.offered(), 60);
        // A lease of 20 ids at 10 ids/s: half gone a second later.
        assert_eq!(post.unhelped(2.0, &[]), 70.0);
        assert_eq!(post.unhelped(2.0, &slots[1..]), 30.0);
        assert_eq!(post.unhelped(9.0, &[]), 60.0);
    }

    #[test]
    fn the_index_lists_one_entry_per_rank() {
        let entry = |rank, seq| Entry {
            rank,
            seq,
            forecast: 1.0,
            opened_at: 0.0,
            speed: 1.0,
        };
        let mut ix = Index::default();
        assert!(ix.upsert(&entry(1, 1)));
        assert!(!ix.upsert(&entry(1, 1)));
        assert!(ix.upsert(&entry(2, 1)));
        assert!(ix.upsert(&entry(1, 2)));
        assert_eq!(ix.entries.len(), 2);
        assert_eq!(ix.get(1).map(|e| e.seq), Some(2));
        assert!(ix.remove(1));
        assert!(!ix.remove(1));
    }
}
