//! Property test of the claims protocol at the granularity of single board
//! operations: owners and helpers are step machines over real `FileBoard`s
//! in a temporary directory (one handle per rank), and a random scheduler
//! interleaves their steps: post an SOS, read one, claim a slot, look at a
//! claim, list the claims, or compute one id. Helpers act on what they
//! last read, however stale; owners post anew, withdraw and claim their own
//! slots as they go.
//! Every id of every owner must end up computed exactly once, and the
//! checker must catch a board whose claims are plain creates.

use soslb::board::file::{self, Fault, FileBoard, JobInfo};
use soslb::board::{Board, Claimed, Probe};
use soslb::ids::IdSet;
use soslb::protocol::{Claim, Post, Slot, Sos, SosState, cut};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

struct TempJob(PathBuf);

impl TempJob {
    fn new() -> TempJob {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "soslb-board-steps-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let job = root.join("job");
        let info = JobInfo {
            job_id: "steps".into(),
            total: 0,
            ranks: 0,
            start: "2025-01-01T00:00:00Z".into(),
            config_digest: 0,
        };
        file::create_job(&job, &info).expect("create the job");
        TempJob(job)
    }
}

impl Drop for TempJob {
    fn drop(&mut self) {
        if let Some(root) = self.0.parent() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// splitmix64: the scheduler's and the actors' random choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// An owner: a lease it computes, slots it posted and has not seen claimed.
struct Owner {
    rank: usize,
    board: FileBoard,
    lease: IdSet,
    pending: Vec<Slot>,
    seq: u64,
    open: bool,
}

/// A helper: the SOS it last read, per owner.
struct Helper {
    rank: usize,
    board: FileBoard,
    seen: Vec<Option<Post>>,
    lease: IdSet,
}

fn claim_of(owner: usize, slot: &Slot, by: usize) -> Claim {
    Claim {
        owner,
        slot: slot.clone(),
        by,
        at: 0.0,
        speed: 1.0,
        busy_for: 0.0,
        steal_cost: 0.0,
    }
}

impl Owner {
    fn post(&mut self, rng: &mut Rng) -> Result<(), String> {
        let keep = rng.below(self.lease.len() + 1);
        let tail = self.lease.take_back(self.lease.len() - keep);
        self.seq += 1;
        let sizes: Vec<u64> = (0..4).map(|_| 1 + rng.below(6)).collect();
        self.pending.extend(cut(&tail, self.seq, 0, &sizes));
        self.pending.sort_by_key(|s| s.start);
        self.open = true;
        self.write(true)
    }

    fn write(&mut self, open: bool) -> Result<(), String> {
        let state = if open {
            SosState::Open(Post {
                speed: 1.0,
                remaining: 0,
                forecast: 0.0,
                host: "h".into(),
                site: "s".into(),
                opened_at: 0.0,
                at: 0.0,
                slots: self.pending.clone(),
                helped: Vec::new(),
            })
        } else {
            SosState::Closed
        };
        let sos = Sos {
            rank: self.rank,
            seq: self.seq,
            state,
        };
        self.board.post(&sos).map_err(|e| e.to_string())
    }

    /// One step; `Ok(true)` when it computed an id (`done` gets it).
    fn step(&mut self, rng: &mut Rng, done: &mut Vec<u64>) -> Result<(), String> {
        match rng.below(7) {
            0 if !self.lease.is_empty() => self.post(rng),
            1 if self.open => {
                self.open = false;
                self.write(false)
            }
            2 if self.pending.len() > 1 => {
                // A refresh's look at a back slot.
                let i = self.pending.len() - 1 - rng.below(self.pending.len() as u64 - 1) as usize;
                let s = self.pending[i].clone();
                if let Probe::Taken(_) =
                    self.board.probe(self.rank, &s).map_err(|e| e.to_string())?
                {
                    self.pending.remove(i);
                }
                Ok(())
            }
            3 | 4 if self.lease.is_empty() && !self.pending.is_empty() => self.claim_front(),
            5 if !self.pending.is_empty() => self.list_claims(),
            _ => {
                if let Some(r) = self.lease.pop_chunk(1) {
                    done.push(r.start);
                }
                Ok(())
            }
        }
    }

    /// A listing of its claims, after a front claim lost: a slot listed is
    /// a helper's.
    fn list_claims(&mut self) -> Result<(), String> {
        let names = self.board.claimed(self.rank).map_err(|e| e.to_string())?;
        self.pending.retain(|s| !names.iter().any(|n| s.named(n)));
        Ok(())
    }

    fn claim_front(&mut self) -> Result<(), String> {
        let s = self.pending.remove(0);
        match self.board.claim(&claim_of(self.rank, &s, self.rank)) {
            Ok(Claimed::Won) => self.lease.insert(s.ids()),
            Ok(Claimed::Lost) => {}
            Err(e) => return Err(e.to_string()),
        }
        Ok(())
    }
}

impl Helper {
    fn step(&mut self, rng: &mut Rng, owners: usize, done: &mut Vec<u64>) -> Result<(), String> {
        let o = rng.below(owners as u64) as usize;
        match rng.below(3) {
            0 => {
                self.seen[o] = match self.board.read_sos(o).map_err(|e| e.to_string())? {
                    Some(Sos {
                        state: SosState::Open(p),
                        ..
                    }) => Some(p),
                    _ => None,
                };
                Ok(())
            }
            1 => {
                // A claim of a slot it saw, however long ago.
                let Some(p) = &mut self.seen[o] else {
                    return Ok(());
                };
                if p.slots.is_empty() {
                    return Ok(());
                }
                let s = p.slots.remove(rng.below(p.slots.len() as u64) as usize);
                match self.board.claim(&claim_of(o, &s, self.rank)) {
                    Ok(Claimed::Won) => self.lease.insert(s.ids()),
                    Ok(Claimed::Lost) => {}
                    Err(e) => return Err(e.to_string()),
                }
                Ok(())
            }
            _ => {
                if let Some(r) = self.lease.pop_chunk(1) {
                    done.push(r.start);
                }
                Ok(())
            }
        }
    }
}

/// One interleaving: `owners` owners of `per_owner` ids each and `helpers`
/// helpers, `steps` random steps, then every rank finishes: owners claim
/// their pending slots, everyone computes its lease. Err when an id was
/// computed twice or never.
fn run(
    seed: u64,
    owners: usize,
    helpers: usize,
    per_owner: u64,
    fault: Option<Fault>,
) -> Result<(), String> {
    let job = TempJob::new();
    let mut rng = Rng(seed);
    let open = |rank| {
        let b = FileBoard::open(&job.0, rank).expect("open the board");
        match fault {
            Some(f) => b.with_fault(f),
            None => b,
        }
    };
    let mut os: Vec<Owner> = (0..owners)
        .map(|r| Owner {
            rank: r,
            board: open(r),
            lease: IdSet::from_range(r as u64 * per_owner..(r as u64 + 1) * per_owner),
            pending: Vec::new(),
            seq: 0,
            open: false,
        })
        .collect();
    let mut hs: Vec<Helper> = (0..helpers)
        .map(|h| Helper {
            rank: owners + h,
            board: open(owners + h),
            seen: vec![None; owners],
            lease: IdSet::new(),
        })
        .collect();
    let mut done = Vec::new();
    for _ in 0..owners as u64 * per_owner * 3 {
        let who = rng.below((owners + helpers) as u64) as usize;
        match who.checked_sub(owners) {
            None => os[who].step(&mut rng, &mut done)?,
            Some(h) => hs[h].step(&mut rng, owners, &mut done)?,
        }
    }
    for o in &mut os {
        while !o.pending.is_empty() {
            o.claim_front()?;
        }
        done.extend(o.lease.ranges().flatten());
    }
    for h in &hs {
        done.extend(h.lease.ranges().flatten());
    }
    done.sort_unstable();
    let want: Vec<u64> = (0..owners as u64 * per_owner).collect();
    if done != want {
        let twice: Vec<u64> = done
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        return Err(format!(
            "seed {seed}: {} ids computed for {}; twice: {twice:?}",
            done.len(),
            want.len()
        ));
    }
    Ok(())
}

#[test]
fn interleaved_single_operations_compute_every_id_once() {
    // 1,200 interleavings of 2 or 3 owners and 1 to 3 helpers.
    for seed in 0..1200u64 {
        let owners = 2 + (seed % 2) as usize;
        let helpers = 1 + (seed % 3) as usize;
        if let Err(e) = run(seed, owners, helpers, 24, None) {
            panic!("{e}");
        }
    }
}

#[test]
fn the_checker_catches_claims_that_are_plain_creates() {
    // Without O_EXCL every contender "wins": some interleaving computes an
    // id twice, and the checker says so.
    let caught = (0..200u64).find_map(|seed| run(seed, 2, 3, 24, Some(Fault::PlainCreate)).err());
    let e = caught.expect("a plain create was never caught in 200 interleavings");
    assert!(e.contains("twice"), "{e}");
}
