//! A board in memory, shared by the ranks of one process: for unit tests and
//! the simulator. Its claims are decided as the file board's are (the first
//! claim of a slot wins), and it counts the operations the file board would
//! make for the same calls ([`Board::ops`]), so that the simulator can
//! charge a storage latency.

use super::{Board, Claimed, Probe};
use crate::error::{Error, Result};
use crate::protocol::{Claim, Index, Slot, Sos};
use crate::topology::Topology;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Shared {
    sos: BTreeMap<usize, Sos>,
    /// SOS files destroyed by [`MemoryBoard::corrupt`] until their next post.
    corrupt: Vec<usize>,
    claims: HashMap<(usize, u64, u32), Claim>,
    index: Index,
    host_index: HashMap<String, (Index, f64)>,
}

/// One rank's handle on a board shared in memory.
#[derive(Clone, Debug, Default)]
pub struct MemoryBoard {
    shared: Arc<Mutex<Shared>>,
    ops: u64,
    /// With a clock ([`MemoryBoard::set_clock`]): the rank making the calls,
    /// and the extra seconds its operations on farther ranks' files took.
    clock: Option<(usize, f64)>,
    /// The ranks' hosts and sites, and the extra seconds per operation on
    /// the files of a rank's SOS at distance 1 (2 at distance 2).
    far: Option<(Topology, f64)>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic in another test thread must not hide this one's result.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryBoard {
    /// An empty board. Clone it for each rank.
    pub fn new() -> Self {
        Self::default()
    }

    /// Make an operation on the files of the SOS of a rank at distance `d`
    /// (see [`Topology::distance`]) cost `d · delay` seconds more, with a
    /// clock: the slower path to another site's storage.
    pub fn with_distance_delay(mut self, topology: Topology, delay: f64) -> Self {
        self.far = Some((topology, delay));
        self
    }

    /// Destroy the SOS file of `rank`, as a storage fault would: reads fail
    /// with [`Error::Corrupt`] until its owner posts again.
    pub fn corrupt(&self, rank: usize) {
        lock(&self.shared).corrupt.push(rank);
    }

    /// Time the calls from now on as those of rank `caller`
    /// ([`MemoryBoard::extra`]).
    pub fn set_clock(&mut self, caller: usize) {
        self.clock = Some((caller, 0.0));
    }

    /// Seconds the calls since [`MemoryBoard::set_clock`] spent on farther
    /// ranks' files beyond the latency of each operation.
    pub fn extra(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.1)
    }

    /// Count an operation on the files of `owner`'s SOS (`None`: the index).
    fn op(&mut self, owner: Option<usize>) {
        self.ops += 1;
        if let (Some((caller, extra)), Some((t, delay)), Some(owner)) =
            (&mut self.clock, &self.far, owner)
            && *caller < t.ranks()
            && owner < t.ranks()
        {
            *extra += t.distance(*caller, owner) as f64 * delay;
        }
    }

    /// Every claim made, for tests.
    pub fn claims(&self) -> Vec<Claim> {
        lock(&self.shared).claims.values().cloned().collect()
    }
}

impl Board for MemoryBoard {
    fn post(&mut self, sos: &Sos) -> Result<()> {
        self.op(Some(sos.rank));
        self.op(Some(sos.rank));
        let mut shared = lock(&self.shared);
        shared.corrupt.retain(|&r| r != sos.rank);
        shared.sos.insert(sos.rank, sos.clone());
        Ok(())
    }

    fn read_sos(&mut self, rank: usize) -> Result<Option<Sos>> {
        self.op(Some(rank));
        let shared = lock(&self.shared);
        if shared.corrupt.contains(&rank) {
            return Err(Error::Corrupt {
                path: format!("memory/sos/{rank}.ron").into(),
                reason: "destroyed by the test".into(),
            });
        }
        Ok(shared.sos.get(&rank).cloned())
    }

    fn claim(&mut self, claim: &Claim) -> Result<Claimed> {
        self.op(Some(claim.owner));
        let key = (claim.owner, claim.slot.seq, claim.slot.index);
        let mut shared = lock(&self.shared);
        if shared.claims.contains_key(&key) {
            return Ok(Claimed::Lost);
        }
        shared.claims.insert(key, claim.clone());
        Ok(Claimed::Won)
    }

    fn probe(&mut self, owner: usize, slot: &Slot) -> Result<Probe> {
        self.op(Some(owner));
        let key = (owner, slot.seq, slot.index);
        Ok(match lock(&self.shared).claims.get(&key) {
            Some(c) => Probe::Taken(Some(c.clone())),
            None => Probe::Free,
        })
    }

    fn claimed(&mut self, owner: usize) -> Result<Vec<String>> {
        self.op(Some(owner));
        let shared = lock(&self.shared);
        Ok((shared.claims.values())
            .filter(|c| c.owner == owner)
            .map(|c| c.slot.file_name())
            .collect())
    }

    fn read_index(&mut self) -> Result<Index> {
        self.op(None);
        Ok(lock(&self.shared).index.clone())
    }

    fn write_index(&mut self, index: &Index) -> Result<()> {
        self.op(None);
        self.op(None);
        lock(&self.shared).index = index.clone();
        Ok(())
    }

    fn read_host_index(&mut self, host: &str) -> Result<Option<(Index, f64)>> {
        Ok(lock(&self.shared).host_index.get(host).cloned())
    }

    fn write_host_index(&mut self, host: &str, index: &Index, at: f64) -> Result<()> {
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

    #[test]
    fn the_first_claim_wins_and_far_files_cost_more() {
        let topology = Topology::laid_out(4, 1, 2);
        let mut a = MemoryBoard::new().with_distance_delay(topology, 0.1);
        let mut b = a.clone();
        let slot = Slot {
            seq: 1,
            index: 0,
            start: 0,
            end: 3,
        };
        let claim = |by| Claim {
            owner: 3,
            slot: slot.clone(),
            by,
            at: 0.0,
            speed: 1.0,
            busy_for: 0.0,
            steal_cost: 0.0,
        };
        a.set_clock(0);
        b.set_clock(2);
        assert_eq!(a.claim(&claim(0)).unwrap(), Claimed::Won);
        assert_eq!(b.claim(&claim(2)).unwrap(), Claimed::Lost);
        assert_eq!(b.probe(3, &slot).unwrap(), Probe::Taken(Some(claim(0))));
        // Rank 0 is on the other site (distance 2), rank 2 on the owner's
        // site and another host (distance 1).
        assert!((a.extra() - 0.2).abs() < 1e-12, "{}", a.extra());
        assert!((b.extra() - 0.2).abs() < 1e-12, "{}", b.extra());
        assert_eq!(a.ops() + b.ops(), 3);
    }
}
