//! A board in memory, shared by the ranks of one process: for unit tests and
//! the simulator. It can refuse a [`Access::Try`] now and then, as a contended
//! file lock would, to exercise the `Retry` paths. It counts the storage
//! operations the file board would do for the same calls ([`Board::ops`]),
//! so that the simulator can charge a storage latency.

use super::{Access, Board, Locked, OpenIndex, Sos, Take};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::topology::Topology;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Shared {
    /// The records of the board's ranks, by rank.
    sos: std::collections::BTreeMap<usize, Sos>,
    /// Records destroyed by [`MemoryBoard::corrupt`], not yet noticed.
    corrupt: Vec<usize>,
    index: OpenIndex,
    /// Every take, in order (the ranks' journals together).
    journal: Vec<Take>,
    /// State of the generator deciding which `Try` accesses find the lock busy.
    busy_state: u64,
    /// With a clock: until when each SOS record's lock is held.
    locked_until: Vec<f64>,
    /// With a clock: until when the open index's lock is held.
    index_until: f64,
    /// Each host's copy of the open index, and when it was read.
    host_index: std::collections::HashMap<String, (OpenIndex, f64)>,
}

/// One rank's handle on a board shared in memory.
#[derive(Clone, Debug)]
pub struct MemoryBoard {
    shared: Arc<Mutex<Shared>>,
    busy_one_in: u64,
    ops: u64,
    /// With a clock ([`MemoryBoard::set_clock`]): when the current call
    /// began, the seconds per operation, the operations before it, and the
    /// seconds it waited for locks.
    clock: Option<Clock>,
    /// With a clock: the ranks' hosts and sites, and the extra seconds per
    /// operation on the SOS record of a rank at distance 1 (2 at distance 2).
    far: Option<(Topology, f64)>,
}

#[derive(Clone, Copy, Debug)]
struct Clock {
    start: f64,
    delay: f64,
    ops: u64,
    waited: f64,
    /// The rank making the call, and the extra seconds its operations on
    /// farther records took.
    caller: usize,
    extra: f64,
}

/// Operations of the file board: a lock attempt that finds the lock busy.
const BUSY: u64 = 1;
/// A locked look: lock, fresh open, read, unlock.
const LOOK: u64 = 4;
/// A write under the lock, after a look: one durable write (`O_DSYNC`)
/// through the kept descriptor.
const WRITE: u64 = 1;
/// A rewrite of the own journal, without a lock: one durable write.
const JOURNAL: u64 = 1;
/// A locked overwrite (a reset): lock, fresh open, durable write, unlock.
const OVERWRITE: u64 = 4;
/// A read without the lock: open, read.
const READ: u64 = 2;

impl MemoryBoard {
    /// A board for `ranks` ranks, every SOS closed. Clone it for each rank.
    pub fn new(ranks: usize) -> Self {
        Self::of(ranks, 0..ranks)
    }

    /// A board of `ranks` ranks with the records of `members` only (a
    /// host's board), every SOS closed.
    pub fn of(ranks: usize, members: impl IntoIterator<Item = usize>) -> Self {
        let sos = members
            .into_iter()
            .map(|rank| {
                let record = Sos {
                    rank,
                    ..Sos::default()
                };
                (rank, record)
            })
            .collect();
        MemoryBoard {
            shared: Arc::new(Mutex::new(Shared {
                locked_until: vec![f64::NEG_INFINITY; ranks],
                sos,
                ..Shared::default()
            })),
            busy_one_in: 0,
            ops: 0,
            clock: None,
            far: None,
        }
    }

    /// Make an operation on the SOS record of a rank at distance `d` (see
    /// [`Topology::distance`]) cost `d · delay` seconds more, with a clock:
    /// the slower path to another site's storage.
    pub fn with_distance_delay(mut self, topology: Topology, delay: f64) -> Self {
        self.far = Some((topology, delay));
        self
    }

    /// Make about one `Try` access in `n` find the lock busy (0: never),
    /// deterministically from `seed`.
    pub fn with_busy_locks(mut self, n: u64, seed: u64) -> Self {
        self.busy_one_in = n;
        lock(&self.shared).busy_state = seed;
        self
    }

    /// Destroy the SOS record of `rank`, as a storage fault would: its next
    /// locked access fails with [`Error::Corrupt`] and its content is lost.
    pub fn corrupt(&self, rank: usize) {
        let mut shared = lock(&self.shared);
        shared.corrupt.push(rank);
        if let Some(s) = shared.sos.get_mut(&rank) {
            *s = Sos {
                rank,
                ..Sos::default()
            };
        }
    }

    /// Time the operations from now on: a call that starts at `now` (seconds)
    /// spends `delay` seconds per operation, and an SOS lock is held for the
    /// operations of the call that took it. A `Try` that finds a lock held
    /// is busy; a `Wait` waits until it is free ([`MemoryBoard::waited`]).
    /// The calls are those of rank `caller`.
    pub fn set_clock(&mut self, now: f64, delay: f64, caller: usize) {
        self.clock = Some(Clock {
            start: now,
            delay,
            ops: self.ops,
            waited: 0.0,
            caller,
            extra: 0.0,
        });
    }

    /// Seconds the calls since [`MemoryBoard::set_clock`] waited for locks,
    /// and spent on farther records beyond the delay per operation.
    pub fn waited(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.waited + c.extra)
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic in another test thread must not hide this one's result.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl Board for MemoryBoard {
    fn with_sos(
        &mut self,
        rank: usize,
        access: Access,
        f: &mut dyn FnMut(&mut Sos),
    ) -> Result<Locked> {
        let busy_one_in = self.busy_one_in;
        let mut shared = lock(&self.shared);
        if access == Access::Try && busy_one_in > 0 {
            shared.busy_state = crate::splitmix64(shared.busy_state);
            if shared.busy_state % busy_one_in == 0 {
                self.ops += BUSY;
                return Ok(Locked::Busy);
            }
        }
        // With a clock: the lock may be held by another call until later.
        let mut took_at = None;
        let far = match (&self.far, &self.clock) {
            (Some((t, d)), Some(c)) if c.caller < t.ranks() && rank < t.ranks() => {
                t.distance(c.caller, rank) as f64 * d
            }
            _ => 0.0,
        };
        let ops_before = self.ops;
        if let Some(c) = &mut self.clock {
            let t = c.start + (self.ops - c.ops) as f64 * c.delay + c.waited + c.extra;
            let until = shared
                .locked_until
                .get(rank)
                .copied()
                .unwrap_or(f64::NEG_INFINITY);
            if until > t {
                if access == Access::Try {
                    self.ops += BUSY;
                    return Ok(Locked::Busy);
                }
                c.waited += until - t;
            }
            took_at = Some((t.max(until), self.ops));
        }
        self.ops += LOOK;
        if let Some(k) = shared.corrupt.iter().position(|&r| r == rank) {
            shared.corrupt.swap_remove(k);
            return Err(Error::Corrupt {
                path: format!("memory/sos/{rank}.ron").into(),
                reason: "destroyed by the test".into(),
            });
        }
        let shared = &mut *shared;
        let sos = shared
            .sos
            .get_mut(&rank)
            .ok_or_else(|| Error::Internal(format!("no SOS record for rank {rank}")))?;
        let before = sos.clone();
        f(sos);
        if *sos != before {
            self.ops += WRITE;
        }
        if sos.aids.len() > before.aids.len() {
            self.ops += JOURNAL;
        }
        let seq = sos.seq;
        for aid in sos.aids.get(before.aids.len()..).unwrap_or_default() {
            shared.journal.push(Take {
                owner: rank,
                seq,
                ids: aid.ids.clone(),
            });
        }
        if let Some(c) = &mut self.clock {
            c.extra += (self.ops - ops_before) as f64 * far;
        }
        if let (Some((t, ops)), Some(c)) = (took_at, self.clock) {
            shared.locked_until[rank] = t + (self.ops - ops) as f64 * (c.delay + far);
        }
        Ok(Locked::Done)
    }

    fn reset_sos(&mut self, sos: &Sos) -> Result<()> {
        self.ops += OVERWRITE;
        let shared = &mut *lock(&self.shared);
        match shared.sos.get_mut(&sos.rank) {
            Some(slot) => {
                shared.corrupt.retain(|&r| r != sos.rank);
                *slot = sos.clone();
                Ok(())
            }
            None => Err(Error::Internal(format!(
                "no SOS record for rank {}",
                sos.rank
            ))),
        }
    }

    fn reset_index(&mut self) -> Result<()> {
        self.ops += OVERWRITE;
        lock(&self.shared).index = OpenIndex::default();
        Ok(())
    }

    fn with_index(&mut self, access: Access, f: &mut dyn FnMut(&mut OpenIndex)) -> Result<Locked> {
        let mut shared = lock(&self.shared);
        // With a clock, the index lock is held for the call's operations on
        // it, and a call waits for it (or, trying, finds it busy), as on the
        // file board.
        let mut took_at = None;
        if let Some(c) = &mut self.clock {
            let t = c.start + (self.ops - c.ops) as f64 * c.delay + c.waited + c.extra;
            if shared.index_until > t && access == Access::Try {
                self.ops += BUSY;
                return Ok(Locked::Busy);
            }
            c.waited += (shared.index_until - t).max(0.0);
            took_at = Some((t.max(shared.index_until), c.delay));
        }
        let before = shared.index.clone();
        f(&mut shared.index);
        let ops = if shared.index == before {
            LOOK
        } else {
            LOOK + WRITE
        };
        self.ops += ops;
        if let Some((t, delay)) = took_at {
            shared.index_until = t + ops as f64 * delay;
        }
        Ok(Locked::Done)
    }

    fn journaled_takes(&mut self, owner: usize, seq: u64) -> Result<IdSet> {
        let mut ids = IdSet::new();
        let shared = lock(&self.shared);
        self.ops += LOOK * (shared.sos.len() as u64).saturating_sub(1);
        for t in shared.journal.iter() {
            if t.owner == owner && t.seq == seq {
                ids.extend(&t.ids);
            }
        }
        Ok(ids)
    }

    fn peek_sos(&mut self, rank: usize) -> Result<Option<Sos>> {
        self.ops += READ;
        Ok(lock(&self.shared).sos.get(&rank).cloned())
    }

    fn read_index(&mut self) -> Result<Option<OpenIndex>> {
        self.ops += READ;
        Ok(Some(lock(&self.shared).index.clone()))
    }

    fn read_host_index(&mut self, host: &str) -> Result<Option<(OpenIndex, f64)>> {
        Ok(lock(&self.shared).host_index.get(host).cloned())
    }

    fn write_host_index(&mut self, host: &str, index: &OpenIndex, at: f64) -> Result<()> {
        let copy = (index.clone(), at);
        lock(&self.shared).host_index.insert(host.to_string(), copy);
        Ok(())
    }

    fn ops(&self) -> u64 {
        self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a clock, an SOS lock is held for the operations of the call that
    /// took it: a `Try` in that time is busy, a `Wait` waits for the rest.
    #[test]
    fn a_clock_holds_locks_for_the_operations_of_the_call() {
        let mut a = MemoryBoard::new(2);
        let mut b = a.clone();
        a.set_clock(10.0, 0.1, 0);
        // A change: a locked look and a write, 5 operations, held until 10.5.
        a.with_sos(1, Access::Wait, &mut |s| s.seq = 3).unwrap();
        assert_eq!(a.ops(), LOOK + WRITE);
        b.set_clock(10.2, 0.1, 1);
        assert_eq!(
            b.with_sos(1, Access::Try, &mut |_| {}).unwrap(),
            Locked::Busy
        );
        b.set_clock(10.2, 0.1, 1);
        assert_eq!(
            b.with_sos(1, Access::Wait, &mut |_| {}).unwrap(),
            Locked::Done
        );
        assert!((b.waited() - 0.3).abs() < 1e-9, "{}", b.waited());
        // Another record is free.
        b.set_clock(10.2, 0.1, 1);
        assert_eq!(
            b.with_sos(0, Access::Try, &mut |_| {}).unwrap(),
            Locked::Done
        );
        assert_eq!(b.waited(), 0.0);
    }

    /// The open index's lock is timed as an SOS record's: ranks that post at
    /// once queue on it, or find it busy when they only try.
    #[test]
    fn a_clock_holds_the_index_lock_for_the_operations_of_the_call() {
        let mut a = MemoryBoard::new(2);
        let mut b = a.clone();
        a.set_clock(10.0, 0.1, 0);
        let list = |rank| {
            move |ix: &mut OpenIndex| {
                ix.upsert(crate::board::OpenEntry {
                    rank,
                    seq: 1,
                    forecast: 20.0,
                    opened_at: 10.0,
                    speed: 1.0,
                })
            }
        };
        a.with_index(Access::Wait, &mut list(0)).unwrap();
        b.set_clock(10.2, 0.1, 1);
        let tried = b.with_index(Access::Try, &mut list(1)).unwrap();
        assert_eq!(tried, Locked::Busy);
        assert_eq!(b.read_index().unwrap().unwrap().entries.len(), 1);
        b.set_clock(10.2, 0.1, 1);
        b.with_index(Access::Wait, &mut list(1)).unwrap();
        assert!((b.waited() - 0.3).abs() < 1e-9, "{}", b.waited());
        assert_eq!(b.read_index().unwrap().unwrap().entries.len(), 2);
    }
}
