//! The ids of a rank (see [`super`]'s "The ids of a rank"): its lease, its
//! pending slots, the claims it won, the chunk out, and what it computed.

use crate::ids::IdSet;
use crate::plan::initial_block;
use crate::protocol::{Level, Slot};
use crate::verdict::Audit;
use std::ops::Range;

/// Where every id a rank answers for is.
#[derive(Debug)]
pub(super) struct Ledger {
    /// The number of realisations of the run.
    pub(super) total: u64,
    /// Ids this rank may compute now.
    pub(super) lease: IdSet,
    /// Slots this rank posted that nobody is known to have claimed, with
    /// their board, in id order.
    pub(super) pending: Vec<(Level, Slot)>,
    /// Claims this rank won: the board, the owner and the slot.
    pub(super) won: Vec<(Level, usize, Slot)>,
    /// Own slots lost to a claim whose body this rank did not read: if ids
    /// are lost, their files are the suspects.
    pub(super) unread: Vec<(Level, Slot)>,
    /// The chunk being computed and when it was handed out.
    out: Option<(f64, Range<u64>)>,
    /// The ids finished since the last progress line.
    progress: IdSet,
    /// The ids computed, for the audit at finalize.
    pub(super) audit: Audit,
}

impl Ledger {
    /// Rank `me` of `ranks`, leasing its initial block of `0..total`.
    pub(super) fn new(total: u64, ranks: usize, me: usize) -> Ledger {
        Ledger {
            total,
            lease: IdSet::from_range(initial_block(total, ranks, me)),
            pending: Vec::new(),
            won: Vec::new(),
            unread: Vec::new(),
            out: None,
            progress: IdSet::new(),
            audit: Audit::default(),
        }
    }

    /// Ids owned now: the lease and the slots not known claimed.
    pub(super) fn remaining(&self) -> u64 {
        self.lease.len() + self.pending.iter().map(|(_, s)| s.len()).sum::<u64>()
    }

    /// True while a chunk is handed out.
    pub(super) fn computing(&self) -> bool {
        self.out.is_some()
    }

    /// The ids owned now: lease, slots, the chunk handed out.
    pub(super) fn owned(&self) -> IdSet {
        let mut ids = self.lease.clone();
        for s in self.pending.iter().map(|p| &p.1) {
            ids.insert(s.ids());
        }
        if let Some((_, chunk)) = &self.out {
            ids.insert(chunk.clone());
        }
        ids
    }

    /// Hand out a chunk of up to `len` ids of the lease at `now`.
    pub(super) fn hand_out(&mut self, now: f64, len: u64) -> Option<Range<u64>> {
        let chunk = self.lease.pop_chunk(len)?;
        self.out = Some((now, chunk.clone()));
        Some(chunk)
    }

    /// The chunk out is finished: it counts as computed. Returns when it was
    /// handed out and its length.
    pub(super) fn finish(&mut self) -> Option<(f64, u64)> {
        let (t0, chunk) = self.out.take()?;
        let n = chunk.end - chunk.start;
        self.audit.add(chunk.clone());
        self.progress.insert(chunk);
        Some((t0, n))
    }

    /// The chunk out starts computing at `now`.
    pub(super) fn restart(&mut self, now: f64) {
        if let Some((t0, _)) = &mut self.out {
            *t0 = now;
        }
    }

    /// The ids finished since the last call, if any.
    pub(super) fn take_progress(&mut self) -> Option<IdSet> {
        (!self.progress.is_empty()).then(|| std::mem::take(&mut self.progress))
    }

    /// The pending slots on `level`'s board.
    pub(super) fn pending_on(&self, level: Level) -> impl Iterator<Item = &Slot> {
        (self.pending.iter())
            .filter(move |p| p.0 == level)
            .map(|p| &p.1)
    }

    /// The ids of the pending slots.
    pub(super) fn pending_ids(&self) -> IdSet {
        let mut ids = IdSet::new();
        for (_, s) in &self.pending {
            ids.insert(s.ids());
        }
        ids
    }

    /// The board of the front pending slot.
    pub(super) fn front_level(&self) -> Option<Level> {
        self.pending.first().map(|p| p.0)
    }

    /// A board other than `level` that holds pending slots.
    pub(super) fn pending_elsewhere(&self, level: Level) -> Option<Level> {
        self.pending.iter().map(|p| p.0).find(|&l| l != level)
    }

    /// The front pending slots on the board of the front one, up to
    /// `target` ids (the first slot past it included).
    pub(super) fn front(&self, target: u64) -> Vec<Slot> {
        walk(self.pending.iter(), target).map_or_else(Vec::new, |w| w.1)
    }

    /// The back pending slots on the board of the back one, up to `target`
    /// ids (the first slot past it included), back first; `None` without
    /// pending slots.
    pub(super) fn back(&self, target: u64) -> Option<(Level, Vec<Slot>)> {
        walk(self.pending.iter().rev(), target)
    }

    /// New pending `slots` on `level`'s board, kept in id order.
    pub(super) fn add_pending(&mut self, level: Level, slots: Vec<Slot>) {
        self.pending.extend(slots.into_iter().map(|s| (level, s)));
        self.pending.sort_by_key(|p| p.1.start);
    }

    /// Whether `s` is pending.
    pub(super) fn holds(&self, s: &Slot) -> bool {
        self.pending.iter().any(|(_, p)| p == s)
    }

    /// Forget the pending slot `s`.
    pub(super) fn drop_pending(&mut self, s: &Slot) {
        self.pending.retain(|(_, p)| p != s);
    }
}

/// The slots of `pending`, in its order, on the board of the first, up to
/// `target` ids (the first slot past it included); `None` when empty.
fn walk<'a>(
    pending: impl Iterator<Item = &'a (Level, Slot)>,
    target: u64,
) -> Option<(Level, Vec<Slot>)> {
    let mut pending = pending.peekable();
    let level = pending.peek()?.0;
    let (mut got, mut slots) = (0, Vec::new());
    for (l, s) in pending {
        if *l != level || got >= target {
            break;
        }
        got += s.len();
        slots.push(s.clone());
    }
    Some((level, slots))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::cut;

    /// Rank 0 of 2 with 100 ids (its block 0..50), 30 of them cut into
    /// slots of 10 on the host's board and 10 on the shared one.
    fn ledger() -> Ledger {
        let mut l = Ledger::new(100, 2, 0);
        let tail = l.lease.take_back(40);
        let slots = cut(&tail, 1, 0, &[10, 10, 10, 10]);
        l.add_pending(Level::Shared, slots[3..].to_vec());
        l.add_pending(Level::Host, slots[..3].to_vec());
        l
    }

    #[test]
    fn the_slots_walked_from_the_front_and_the_back_stay_on_one_board() {
        let l = ledger();
        assert_eq!(l.remaining(), 50);
        assert_eq!(l.front_level(), Some(Level::Host));
        let starts = |s: &[Slot]| s.iter().map(|s| s.start).collect::<Vec<_>>();
        assert_eq!(starts(&l.front(15)), [10, 20]);
        assert_eq!(starts(&l.front(100)), [10, 20, 30]);
        assert_eq!(
            l.back(5).map(|(lv, s)| (lv, starts(&s))),
            Some((Level::Shared, vec![40]))
        );
        assert_eq!(l.pending_on(Level::Host).count(), 3);
        assert_eq!(l.pending_ids().len(), 40);
    }

    #[test]
    fn a_chunk_handed_out_counts_once_finished() {
        let mut l = ledger();
        let chunk = l.hand_out(1.0, 4);
        assert_eq!(chunk, Some(0..4));
        assert!(l.computing() && l.owned().len() == 50);
        l.restart(2.0);
        assert_eq!(l.finish(), Some((2.0, 4)));
        assert_eq!(l.take_progress().map(|p| p.len()), Some(4));
        assert_eq!(l.take_progress(), None);
        assert_eq!(l.remaining(), 46);
    }
}
