//! A board in memory, shared by the ranks of one process: for unit tests and
//! the simulator. Its claims are decided as the file board's are (the first
//! claim of a slot wins), and it counts the operations the file board would
//! make for the same calls ([`Board::ops`]), so that the simulator can
//! charge a storage latency.
//!
//! With a clock ([`MemoryBoard::set_clock`]) each operation is dated where
//! it ends: a call's operations follow one another from the time the call
//! starts. A write shows from its date on, and a read sees what was written
//! by its own date, so that a post shows only once its operations are done
//! and two writers of the index that overlap lose one update, as on the
//! file board. Two claims of one slot are still decided in the order of
//! the calls (the first call wins, whatever the dates of the creates).

use super::{Board, Claimed, Probe, Wanted};
use crate::error::{Error, Result};
use crate::protocol::{Claim, Entry, Index, Slot, Sos};
use crate::topology::Topology;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// A value's versions in date order, each seen from its date on.
#[derive(Debug)]
struct Dated<T>(Vec<(f64, T)>);

impl<T> Default for Dated<T> {
    fn default() -> Self {
        Dated(Vec::new())
    }
}

impl<T> Dated<T> {
    /// The version seen at `t`.
    fn at(&self, t: f64) -> Option<&T> {
        self.0.iter().rev().find(|v| v.0 <= t).map(|v| &v.1)
    }

    /// Write `value` dated `t`; no read comes before `settled`, so the
    /// versions hidden by then go.
    fn set(&mut self, t: f64, value: T, settled: f64) {
        let k = self.0.partition_point(|v| v.0 <= t);
        self.0.insert(k, (t, value));
        let seen = self.0.partition_point(|v| v.0 <= settled);
        self.0.drain(..seen.saturating_sub(1));
    }
}

#[derive(Debug, Default)]
struct Shared {
    sos: BTreeMap<usize, Dated<Sos>>,
    /// SOS files destroyed by [`MemoryBoard::corrupt`] until their next post.
    corrupt: Vec<usize>,
    /// The claims, each with the date it shows from.
    claims: HashMap<(usize, u64, u32), (f64, Claim)>,
    index: Dated<Index>,
    host_index: HashMap<String, (Index, f64)>,
    /// What each rank of a host wants the index to say of it.
    wanted: HashMap<String, BTreeMap<usize, Option<Entry>>>,
}

/// The clock of the calls of one rank ([`MemoryBoard::set_clock`]).
#[derive(Clone, Copy, Debug)]
struct Clock {
    caller: usize,
    /// When the calls started: no later call reads before it (the
    /// simulator makes its calls in time order).
    start: f64,
    /// When the last operation ended.
    at: f64,
    /// Seconds per operation.
    delay: f64,
    /// When the post in flight lands ([`Board::post_sent`]).
    landing: Option<f64>,
}

/// One rank's handle on a board shared in memory.
#[derive(Clone, Debug, Default)]
pub struct MemoryBoard {
    shared: Arc<Mutex<Shared>>,
    ops: u64,
    clock: Option<Clock>,
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

    /// Date the calls from now on as those of rank `caller` starting at
    /// `now`, each operation `delay` seconds long ([`MemoryBoard::elapsed`]).
    pub fn set_clock(&mut self, caller: usize, now: f64, delay: f64) {
        self.clock = Some(Clock {
            caller,
            start: now,
            at: now,
            delay,
            landing: None,
        });
    }

    /// Seconds the calls since [`MemoryBoard::set_clock`] took: operations
    /// sent together ([`Board::claim_all`], [`Board::post_sent`]) wait once.
    pub fn elapsed(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.at - c.start)
    }

    /// Count an operation on the files of `owner`'s SOS (`None`: the index);
    /// the date it ends (0 without a clock).
    fn op(&mut self, owner: Option<usize>) -> f64 {
        self.ops += 1;
        let Some(clock) = &mut self.clock else {
            return 0.0;
        };
        let mut extra = 0.0;
        if let (Some((t, delay)), Some(owner)) = (&self.far, owner)
            && clock.caller < t.ranks()
            && owner < t.ranks()
        {
            extra = t.distance(clock.caller, owner) as f64 * delay;
        }
        clock.at += clock.delay + extra;
        clock.at
    }

    /// No other call reads before this date.
    fn settled(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.start)
    }

    /// Every claim made, for tests.
    pub fn claims(&self) -> Vec<Claim> {
        lock(&self.shared)
            .claims
            .values()
            .map(|c| c.1.clone())
            .collect()
    }
}

impl Board for MemoryBoard {
    fn post(&mut self, sos: &Sos) -> Result<()> {
        self.op(Some(sos.rank));
        self.landed()?;
        let t = self.op(Some(sos.rank));
        let settled = self.settled();
        let mut shared = lock(&self.shared);
        shared.corrupt.retain(|&r| r != sos.rank);
        let versions = shared.sos.entry(sos.rank).or_default();
        versions.set(t, sos.clone(), settled);
        Ok(())
    }

    /// The post's operations are dated from the call's start; the call
    /// goes on from there too.
    fn post_sent(&mut self, sos: &Sos) -> Result<()> {
        self.landed()?;
        let start = self.clock.map(|c| c.at);
        let posted = self.post(sos);
        if let (Some(clock), Some(start)) = (&mut self.clock, start) {
            clock.landing = Some(clock.at);
            clock.at = start;
        }
        posted
    }

    fn landed(&mut self) -> Result<()> {
        if let Some(clock) = &mut self.clock
            && let Some(at) = clock.landing.take()
        {
            clock.at = clock.at.max(at);
        }
        Ok(())
    }

    fn read_sos(&mut self, rank: usize) -> Result<Option<Sos>> {
        let t = self.op(Some(rank));
        let shared = lock(&self.shared);
        if shared.corrupt.contains(&rank) {
            return Err(Error::Corrupt {
                path: format!("memory/sos/{rank}.ron").into(),
                reason: "destroyed by the test".into(),
            });
        }
        Ok(shared.sos.get(&rank).and_then(|v| v.at(t)).cloned())
    }

    fn claim(&mut self, claim: &Claim) -> Result<Claimed> {
        let t = self.op(Some(claim.owner));
        let key = (claim.owner, claim.slot.seq, claim.slot.index);
        let mut shared = lock(&self.shared);
        if shared.claims.contains_key(&key) {
            return Ok(Claimed::Lost);
        }
        shared.claims.insert(key, (t, claim.clone()));
        Ok(Claimed::Won)
    }

    /// The claims start together and each is dated by its own latency;
    /// the call goes on when the last one ends.
    fn claim_all(&mut self, claims: &[Claim]) -> Vec<Result<Claimed>> {
        let Some(start) = self.clock else {
            return claims.iter().map(|c| self.claim(c)).collect();
        };
        let mut end = start.at;
        let claimed = (claims.iter())
            .map(|c| {
                let claimed = self.claim(c);
                if let Some(clock) = &mut self.clock {
                    end = end.max(clock.at);
                    clock.at = start.at;
                }
                claimed
            })
            .collect();
        if let Some(clock) = &mut self.clock {
            clock.at = end;
        }
        claimed
    }

    fn probe(&mut self, owner: usize, slot: &Slot) -> Result<Probe> {
        let t = self.op(Some(owner));
        let key = (owner, slot.seq, slot.index);
        Ok(match lock(&self.shared).claims.get(&key) {
            Some((at, c)) if *at <= t => Probe::Taken(Some(c.clone())),
            _ => Probe::Free,
        })
    }

    fn claimed(&mut self, owner: usize) -> Result<Vec<String>> {
        let t = self.op(Some(owner));
        let shared = lock(&self.shared);
        Ok((shared.claims.values())
            .filter(|(at, c)| c.owner == owner && *at <= t)
            .map(|(_, c)| c.slot.file_name())
            .collect())
    }

    fn read_index(&mut self) -> Result<Index> {
        let t = self.op(None);
        Ok(lock(&self.shared).index.at(t).cloned().unwrap_or_default())
    }

    /// Renamed once the post in flight has landed, as on the file board.
    fn write_index(&mut self, index: &Index) -> Result<()> {
        self.op(None);
        self.landed()?;
        let t = self.op(None);
        let settled = self.settled();
        lock(&self.shared).index.set(t, index.clone(), settled);
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

    fn wanted(&mut self, host: &str, me: usize, want: Option<&Entry>) -> Result<Wanted> {
        let mut shared = lock(&self.shared);
        let host = shared.wanted.entry(host.to_string()).or_default();
        host.insert(me, want.cloned());
        Ok(host.iter().map(|(r, w)| (*r, w.clone())).collect())
    }

    fn ops(&self) -> u64 {
        self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operations dated from each call's start, 0.1 s apart: a post shows
    /// once it is done, two writers of the index that overlap lose one
    /// update, and a claim shows from its create on.
    #[test]
    fn writes_show_from_their_dates_and_overlapping_index_writes_lose_one() {
        let mut a = MemoryBoard::new();
        let (mut b, mut c) = (a.clone(), a.clone());
        let sos = Sos {
            rank: 0,
            seq: 1,
            state: crate::protocol::SosState::Closed,
        };
        a.set_clock(0, 0.0, 0.1);
        a.post(&sos).unwrap();
        b.set_clock(1, 0.05, 0.1);
        assert_eq!(
            b.read_sos(0).unwrap(),
            None,
            "a post shows before it is done"
        );
        b.set_clock(1, 0.15, 0.1);
        assert_eq!(b.read_sos(0).unwrap(), Some(sos));

        let listing = |rank| {
            let mut index = Index::default();
            index.upsert(&crate::protocol::Entry {
                rank,
                seq: 1,
                forecast: 9.0,
                opened_at: 1.0,
                speed: 1.0,
            });
            index
        };
        a.set_clock(0, 1.0, 0.1);
        assert_eq!(a.read_index().unwrap(), Index::default());
        a.write_index(&listing(0)).unwrap();
        b.set_clock(1, 1.05, 0.1);
        assert_eq!(
            b.read_index().unwrap(),
            Index::default(),
            "a's write shows at 1.3 s"
        );
        b.write_index(&listing(1)).unwrap();
        c.set_clock(2, 1.21, 0.1);
        assert_eq!(c.read_index().unwrap(), listing(0));
        c.set_clock(2, 1.4, 0.1);
        assert_eq!(
            c.read_index().unwrap(),
            listing(1),
            "b's write replaces a's"
        );

        let slot = Slot {
            seq: 1,
            index: 0,
            start: 0,
            end: 3,
        };
        let claim = Claim {
            owner: 0,
            slot: slot.clone(),
            by: 1,
            at: 2.0,
            speed: 1.0,
            busy_for: 0.0,
            steal_cost: 0.0,
        };
        b.set_clock(1, 2.0, 0.1);
        assert_eq!(b.claim(&claim).unwrap(), Claimed::Won);
        a.set_clock(0, 2.0, 0.1);
        assert_eq!(
            a.probe(0, &slot).unwrap(),
            Probe::Taken(Some(claim.clone()))
        );
        c.set_clock(2, 1.95, 0.1);
        assert_eq!(
            c.probe(0, &slot).unwrap(),
            Probe::Free,
            "the create ends at 2.1 s"
        );
        assert_eq!(c.claim(&claim).unwrap(), Claimed::Lost);
    }

    /// Claims sent together are each an operation, all dated one latency
    /// after they were sent; the call goes on from then.
    #[test]
    fn claims_sent_together_end_together() {
        let mut a = MemoryBoard::new();
        let mut b = a.clone();
        let claims: Vec<Claim> = (0..3)
            .map(|i| Claim {
                owner: 0,
                slot: Slot {
                    seq: 1,
                    index: i,
                    start: 3 * u64::from(i),
                    end: 3 * u64::from(i) + 3,
                },
                by: 0,
                at: 0.0,
                speed: 1.0,
                busy_for: 0.0,
                steal_cost: 0.0,
            })
            .collect();
        a.set_clock(0, 0.0, 0.1);
        let claimed: Vec<Claimed> = (a.claim_all(&claims).into_iter())
            .map(|c| c.unwrap())
            .collect();
        assert_eq!(claimed, [Claimed::Won; 3]);
        assert_eq!(a.ops(), 3);
        assert!((a.elapsed() - 0.1).abs() < 1e-12, "{}", a.elapsed());
        b.set_clock(1, 0.0, 0.1);
        assert_eq!(b.claimed(0).unwrap().len(), 3, "all three end at 0.1 s");
        let lost: Vec<Claimed> = (b.claim_all(&claims[1..]).into_iter())
            .map(|c| c.unwrap())
            .collect();
        assert_eq!(lost, [Claimed::Lost; 2]);
    }

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
        a.set_clock(0, 0.0, 0.0);
        b.set_clock(2, 0.0, 0.0);
        assert_eq!(a.claim(&claim(0)).unwrap(), Claimed::Won);
        assert_eq!(b.claim(&claim(2)).unwrap(), Claimed::Lost);
        assert_eq!(b.probe(3, &slot).unwrap(), Probe::Taken(Some(claim(0))));
        // Rank 0 is on the other site (distance 2), rank 2 on the owner's
        // site and another host (distance 1).
        assert!((a.elapsed() - 0.2).abs() < 1e-12, "{}", a.elapsed());
        assert!((b.elapsed() - 0.2).abs() < 1e-12, "{}", b.elapsed());
        assert_eq!(a.ops() + b.ops(), 3);
    }
}
