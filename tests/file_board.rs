//! The file board on a local temporary directory, without MPI: threads each
//! owning their own `FileBoard` race for claims as processes would.

use soslb::board::file::{self, FileBoard, JobInfo};
use soslb::board::memory::MemoryBoard;
use soslb::board::watch::Discovery;
use soslb::board::{Board, Claimed, Probe};
use soslb::ids::IdSet;
use soslb::protocol::{Claim, Entry, Index, Post, Slot, Sos, SosState, cut};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// A fresh job directory, removed on drop.
struct TempJob(PathBuf);

impl TempJob {
    fn new() -> TempJob {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "soslb-file-board-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let job = TempJob(root.join("job"));
        file::create_job(&job.0, &job_info()).unwrap();
        job
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn open(&self, rank: usize) -> FileBoard {
        FileBoard::open(&self.0, rank).unwrap()
    }
}

impl Drop for TempJob {
    fn drop(&mut self) {
        if let Some(root) = self.0.parent() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

fn job_info() -> JobInfo {
    JobInfo {
        job_id: "test".into(),
        total: 1000,
        ranks: 4,
        start: "2025-01-01T00:00:00Z".into(),
        config_digest: 42,
    }
}

fn open_sos(rank: usize, seq: u64, slots: Vec<Slot>) -> Sos {
    Sos {
        rank,
        seq,
        state: SosState::Open(Post {
            speed: 10.0,
            remaining: slots.iter().map(Slot::len).sum(),
            forecast: 20.0,
            host: "h".into(),
            site: "s".into(),
            opened_at: 1.0,
            at: 1.0,
            slots,
            helped: Vec::new(),
        }),
    }
}

fn claim(owner: usize, slot: &Slot, by: usize) -> Claim {
    Claim {
        owner,
        slot: slot.clone(),
        by,
        at: 1.0,
        speed: 10.0,
        busy_for: 0.0,
        steal_cost: 0.0,
    }
}

fn entry(rank: usize) -> Entry {
    Entry {
        rank,
        seq: 1,
        forecast: 9.0,
        opened_at: 1.0,
        speed: 1.0,
    }
}

/// The owner and `helpers` threads, each with its own board, race for the
/// slots of one SOS: the owner from the front, the helpers from the back,
/// each after reading the SOS once, sending `together` claims at a time.
/// Every id is claimed by exactly one.
fn race(helpers: usize, delay: Duration, together: usize) {
    let job = TempJob::new();
    let slots = cut(&IdSet::from_range(0..400), 1, 0, &[7; 60]);
    job.open(0).post(&open_sos(0, 1, slots.clone())).unwrap();
    let start = Arc::new(Barrier::new(helpers + 1));
    let threads: Vec<_> = (0..=helpers)
        .map(|rank| {
            let mut board = job.open(rank).with_delay(delay);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                let Some(Sos {
                    state: SosState::Open(p),
                    ..
                }) = board.read_sos(0).unwrap()
                else {
                    panic!("no open SOS")
                };
                start.wait();
                let order: Vec<&Slot> = if rank == 0 {
                    p.slots.iter().collect()
                } else {
                    p.slots.iter().rev().collect()
                };
                let mut won = IdSet::new();
                for sent in order.chunks(together) {
                    let claims: Vec<Claim> = sent.iter().map(|s| claim(0, s, rank)).collect();
                    let ops = board.ops();
                    for (s, c) in sent.iter().zip(board.claim_all(&claims)) {
                        if c.unwrap() == Claimed::Won {
                            won.insert(s.ids());
                        }
                    }
                    assert_eq!(
                        board.ops() - ops,
                        sent.len() as u64,
                        "a claim is an operation"
                    );
                }
                won
            })
        })
        .collect();
    let mut all: Vec<u64> = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap().ranges().flatten());
    }
    all.sort_unstable();
    assert_eq!(all, (0..400).collect::<Vec<_>>(), "every id claimed once");
}

#[test]
fn racing_claims_take_every_id_once() {
    race(7, Duration::ZERO, 1);
}

#[test]
fn racing_claims_take_every_id_once_on_slow_storage() {
    race(3, Duration::from_millis(2), 1);
}

#[test]
fn racing_claims_sent_together_take_every_id_once() {
    race(7, Duration::ZERO, 5);
    race(3, Duration::from_millis(2), 4);
    race(2, Duration::ZERO, 40);
}

#[test]
fn a_damaged_sos_file_is_an_error_naming_it_and_the_owners_next_post_replaces_it() {
    let job = TempJob::new();
    let (mut owner, mut helper) = (job.open(1), job.open(2));
    let sos = open_sos(1, 1, cut(&IdSet::from_range(0..20), 1, 0, &[5]));
    owner.post(&sos).unwrap();
    let path = owner.sos_path(1);
    for damage in [&b"garbage"[..], b""] {
        std::fs::write(&path, damage).unwrap();
        let e = helper.read_sos(1).unwrap_err().to_string();
        assert!(e.contains("sos/1.ron"), "{e}");
        owner.post(&sos).unwrap();
        assert_eq!(helper.read_sos(1).unwrap(), Some(sos.clone()));
    }
    // A directory in its place: moved aside at the next post, and noted.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert!(
        helper
            .read_sos(1)
            .unwrap_err()
            .to_string()
            .contains("directory")
    );
    owner.post(&sos).unwrap();
    assert_eq!(helper.read_sos(1).unwrap(), Some(sos));
    let notes = owner.take_notes();
    assert!(
        notes.len() == 1 && notes[0].contains("moved aside"),
        "{notes:?}"
    );
}

#[test]
fn a_damaged_index_is_an_error_naming_it_and_the_next_write_replaces_it() {
    let job = TempJob::new();
    let (mut a, mut b) = (job.open(0), job.open(1));
    assert_eq!(a.read_index().unwrap(), Index::default());
    std::fs::write(a.index_path(), "not an index").unwrap();
    let e = b.read_index().unwrap_err().to_string();
    assert!(e.contains("open.ron"), "{e}");
    let mut ix = Index::default();
    ix.upsert(&entry(0));
    a.write_index(&ix).unwrap();
    assert_eq!(b.read_index().unwrap(), ix);
}

#[test]
fn an_existing_job_directory_is_a_stale_job() {
    let job = TempJob::new();
    let e = file::create_job(job.path(), &job_info()).unwrap_err();
    assert!(matches!(e, soslb::Error::StaleJob { .. }), "{e}");
}

#[test]
fn a_watcher_wakes_a_waiting_helper_when_the_index_is_replaced() {
    let job = TempJob::new();
    let mut helper = job.open(0);
    let mut owner = job.open(1);
    let mut discovery = Discovery::new(&helper.index_path(), true);
    assert!(discovery.is_watching(), "{:?}", discovery.fallback_reason());
    // Reading the index, or writing another file of the directory, wakes
    // nobody.
    helper.read_index().unwrap();
    owner.post(&open_sos(1, 1, Vec::new())).unwrap();
    assert!(!discovery.wait(Duration::from_millis(200)));
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        let mut ix = Index::default();
        ix.upsert(&entry(1));
        owner.write_index(&ix).unwrap();
    });
    let t = Instant::now();
    assert!(discovery.wait(Duration::from_secs(5)));
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    writer.join().unwrap();
    assert_eq!(helper.read_index().unwrap().entries.len(), 1);
}

#[test]
fn polling_discovery_sleeps_the_timeout() {
    let job = TempJob::new();
    let board = job.open(0);
    let mut discovery = Discovery::new(&board.index_path(), false);
    assert!(!discovery.is_watching());
    let t = Instant::now();
    assert!(!discovery.wait(Duration::from_millis(50)));
    let dt = t.elapsed();
    assert!(
        dt >= Duration::from_millis(45) && dt < Duration::from_millis(1000),
        "{dt:?}"
    );
    // A directory that is not there cannot be watched: polling, and why.
    let missing = Discovery::new(&job.path().join("no-such-dir").join("open.ron"), true);
    assert!(!missing.is_watching());
    assert!(missing.fallback_reason().unwrap().contains("no-such-dir"));
}

/// A post is two operations (written aside, renamed), a read or a claim
/// one, an index write two; the memory board counts the same.
#[test]
fn operations_are_counted_alike_on_both_boards() {
    let job = TempJob::new();
    let mut file = job.open(0);
    let mut memory = MemoryBoard::new();
    let slots = cut(&IdSet::from_range(0..10), 1, 0, &[5, 5]);
    let mut ix = Index::default();
    ix.upsert(&entry(0));
    for board in [&mut file as &mut dyn Board, &mut memory] {
        assert_eq!(board.ops(), 0, "opening a board makes no operation");
        board.post(&open_sos(0, 1, slots.clone())).unwrap();
        assert_eq!(board.ops(), 2);
        board.read_sos(0).unwrap();
        board.read_index().unwrap();
        assert_eq!(board.ops(), 4);
        board.write_index(&ix).unwrap();
        assert_eq!(board.claim(&claim(0, &slots[0], 3)).unwrap(), Claimed::Won);
        assert_eq!(board.claim(&claim(0, &slots[0], 2)).unwrap(), Claimed::Lost);
        assert_eq!(board.probe(0, &slots[1]).unwrap(), Probe::Free);
        assert!(matches!(board.probe(0, &slots[0]).unwrap(), Probe::Taken(Some(c)) if c.by == 3));
        assert_eq!(board.ops(), 10);
    }
}

/// A post sent ahead lands while the index is read and rewritten: on the
/// file board the caller waits for the index alone, on the memory board
/// the post is dated from the call's start; on both the index is renamed
/// only once the post has landed, and both count the same operations.
#[test]
fn a_post_in_flight_waits_with_the_index_rewrite() {
    let job = TempJob::new();
    let d = Duration::from_millis(300);
    let mut file = job.open(0).with_delay(d);
    let sos = open_sos(0, 1, cut(&IdSet::from_range(0..10), 1, 0, &[5, 5]));
    let mut ix = Index::default();
    ix.upsert(&entry(0));
    let t = Instant::now();
    file.post_sent(&sos).unwrap();
    assert!(
        t.elapsed() < 2 * d,
        "the post is in flight: {:?}",
        t.elapsed()
    );
    file.read_index().unwrap();
    file.write_index(&ix).unwrap();
    file.landed().unwrap();
    // One after another: five latencies; overlapped: the index's three.
    assert!(t.elapsed() < d * 9 / 2, "{:?}", t.elapsed());
    assert_eq!(file.ops(), 5);
    assert_eq!(job.open(1).read_sos(0).unwrap(), Some(sos.clone()));
    // The index is renamed only once the SOS has landed, however slow its
    // files are.
    let mut slow = job.open(0).with_delays_to(vec![d * 2]);
    let newer = open_sos(0, 2, Vec::new());
    slow.post_sent(&newer).unwrap();
    slow.write_index(&ix).unwrap();
    assert_eq!(job.open(1).read_sos(0).unwrap(), Some(newer));
    slow.landed().unwrap();

    let mut memory = MemoryBoard::new();
    let mut reader = memory.clone();
    // A post sent at `now`, the index read (or not) and written: seconds.
    let mut rewrite = |now: f64, sos: &Sos, read: bool| {
        memory.set_clock(0, now, 0.1);
        memory.post_sent(sos).unwrap();
        if read {
            memory.read_index().unwrap();
        }
        memory.write_index(&ix).unwrap();
        memory.landed().unwrap();
        memory.elapsed()
    };
    let seconds = rewrite(0.0, &sos, true);
    assert!((seconds - 0.3).abs() < 1e-9, "{seconds}");
    reader.set_clock(1, 0.0, 0.1);
    assert_eq!(reader.read_sos(0).unwrap(), None, "not there at 0.1 s");
    assert_eq!(reader.read_sos(0).unwrap(), Some(sos), "there at 0.2 s");
    // The index's write aside goes with the post; its rename waits for it.
    let seconds = rewrite(1.0, &open_sos(0, 2, Vec::new()), false);
    assert!((seconds - 0.3).abs() < 1e-9, "{seconds}");
    assert_eq!(memory.ops(), 9);
}

/// A post whose SOS cannot be written is not left in the index: a helper
/// would read an old body or none.
#[test]
fn a_post_that_fails_is_taken_out_of_the_index() {
    use soslb::clerk::Clerk;
    use soslb::policy::{Outcome, Params, Rank, Request};
    use soslb::protocol::Level;
    use soslb::topology::{Sites, Topology};
    let job = TempJob::new();
    let topology = Topology::new(vec!["n1".into()], &Sites::Single);
    let params = Params::from(&soslb::Config::default());
    let mut clerk = Clerk::new(&Rank::new(0, 1000, params, topology));
    let mut board = job.open(0);
    std::fs::remove_dir_all(job.path().join("sos")).unwrap();
    let reply = clerk.serve(
        Request::Post {
            entry: entry(0),
            sos: open_sos(0, 1, cut(&IdSet::from_range(0..10), 1, 0, &[])),
            level: Level::Shared,
        },
        &mut board,
    );
    assert!(matches!(reply.outcome, Outcome::NotPosted), "{reply:?}");
    assert!(reply.errors.iter().any(|e| e.contains("sos")), "{reply:?}");
    assert_eq!(board.read_index().unwrap(), Index::default());
}

/// An owner that lost its front claims lists its claims before it claims
/// again: the slots listed are lost without a claim of their own, and of
/// the others only the first ones up to `most` ids are claimed.
#[test]
fn a_listed_front_claim_skips_the_slots_taken_and_claims_only_what_it_needs() {
    use soslb::clerk::Clerk;
    use soslb::policy::{Outcome, Params, Rank, Request};
    use soslb::protocol::Level;
    use soslb::topology::{Sites, Topology};
    let job = TempJob::new();
    let topology = Topology::new(vec!["n1".into(); 2], &Sites::Single);
    let params = Params::from(&soslb::Config::default());
    let mut clerk = Clerk::new(&Rank::new(0, 1000, params, topology));
    let (mut owner, mut helper) = (job.open(0), job.open(1));
    let slots = cut(&IdSet::from_range(0..20), 1, 0, &[2, 3, 4, 5, 6]);
    owner.post(&open_sos(0, 1, slots.clone())).unwrap();
    for s in &slots[..2] {
        assert_eq!(helper.claim(&claim(0, s, 1)).unwrap(), Claimed::Won);
    }
    let ops = owner.ops();
    let reply = clerk.serve(
        Request::Claim {
            level: Level::Shared,
            slots: slots.clone(),
            claim: claim(0, &slots[0], 0),
            listed: true,
            most: 6,
        },
        &mut owner,
    );
    let Outcome::Claimed { won, lost } = reply.outcome else {
        panic!("{reply:?}");
    };
    assert_eq!(
        won,
        slots[2..4].to_vec(),
        "4 ids, then 5: the first free up to 6"
    );
    let lost: Vec<Slot> = lost.into_iter().map(|(s, _)| s).collect();
    assert_eq!(lost, slots[..2].to_vec());
    // The listing, a read of one claimant, and two claims: no claim lost.
    assert_eq!(owner.ops() - ops, 4);
    for s in &slots[4..] {
        assert_eq!(
            helper.claim(&claim(0, s, 1)).unwrap(),
            Claimed::Won,
            "not claimed"
        );
    }
}

/// A post in flight that fails says so when it lands, naming the file.
#[test]
fn a_post_in_flight_that_fails_is_an_error_when_it_lands() {
    let job = TempJob::new();
    let mut board = job.open(0);
    std::fs::remove_dir_all(job.path().join("sos")).unwrap();
    board.post_sent(&open_sos(0, 1, Vec::new())).unwrap();
    let e = board.landed().unwrap_err().to_string();
    assert!(e.contains("sos"), "{e}");
    assert!(board.landed().is_ok(), "nothing in flight any more");
}

#[test]
fn a_rank_removes_its_own_signal_files_and_no_others() {
    let job = TempJob::new();
    let slots = cut(&IdSet::from_range(0..10), 1, 0, &[5, 5]);
    let (mut a, mut b) = (job.open(0), job.open(1));
    a.post(&open_sos(0, 1, slots.clone())).unwrap();
    b.post(&open_sos(1, 1, Vec::new())).unwrap();
    a.claim(&claim(0, &slots[0], 0)).unwrap();
    b.claim(&claim(0, &slots[1], 1)).unwrap();
    let there = |p: PathBuf| p.exists();
    file::remove_own(job.path(), 1, &[slots[1].claim_name(0)]).unwrap();
    assert!(there(a.sos_path(0)) && !there(a.sos_path(1)));
    assert!(there(a.claim_path(0, &slots[0])) && !there(a.claim_path(0, &slots[1])));
    // Again: files already gone are no error.
    file::remove_own(job.path(), 1, &[slots[1].claim_name(0)]).unwrap();
}

/// The storage cost is timed in a thread of its own: the caller returns at
/// once, and the read's seconds arrive later; a job directory gone sends
/// nothing, and nothing hangs.
#[test]
fn the_storage_probe_costs_the_caller_no_file_time() {
    let job = TempJob::new();
    let board = job.open(0).with_delay(Duration::from_millis(100));
    let t = Instant::now();
    let probe = board.probe_storage();
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
    let seconds = probe.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!((0.1..5.0).contains(&seconds), "{seconds}");
    assert_eq!(
        board.ops(),
        0,
        "the probe is not one of the run's operations"
    );
    std::fs::remove_file(job.path().join("job.ron")).unwrap();
    let probe = board.probe_storage();
    assert!(probe.recv_timeout(Duration::from_secs(10)).is_err());
}

#[test]
fn a_host_copy_of_the_index_is_read_by_the_other_ranks_of_the_host() {
    let job = TempJob::new();
    let copies = job.path().join("local");
    let mut a = job.open(0).with_host_dir(&copies);
    let mut b = job.open(1).with_host_dir(&copies);
    let mut none = job.open(2);
    assert_eq!(b.read_host_index("n1").unwrap(), None);
    let mut index = Index::default();
    index.upsert(&entry(2));
    a.write_host_index("n1", &index, 3.5).unwrap();
    assert_eq!(b.read_host_index("n1").unwrap(), Some((index.clone(), 3.5)));
    assert_eq!(b.read_host_index("n2").unwrap(), None);
    assert_eq!(
        (a.ops(), b.ops()),
        (0, 0),
        "copies are node-local: not counted"
    );
    // A later copy replaces it; an odd host name stays inside the directory.
    a.write_host_index("n1", &Index::default(), 4.0).unwrap();
    assert_eq!(
        b.read_host_index("n1").unwrap(),
        Some((Index::default(), 4.0))
    );
    let odd = a.host_copy_path("../x/y").unwrap();
    assert_eq!(odd.parent(), Some(copies.as_path()));
    let left: Vec<_> = std::fs::read_dir(&copies).unwrap().collect();
    assert_eq!(left.len(), 1, "only the copy of n1: {left:?}");
    // Without a directory for copies: none, and writing one does nothing.
    none.write_host_index("n1", &index, 5.0).unwrap();
    assert_eq!(none.read_host_index("n1").unwrap(), None);
}

/// What each rank of a host wants the index to say of it is kept beside
/// the host's copy of the index, node-local, and every rank of the host sees
/// the latest of each.
#[test]
fn the_ranks_of_a_host_see_what_each_wants_the_index_to_say() {
    let job = TempJob::new();
    let copies = job.path().join("local");
    let [mut a, mut b, mut c] = [0, 1, 2].map(|me| job.open(me).with_host_dir(&copies));
    assert_eq!(
        a.wanted("n1", 0, Some(&entry(0))).unwrap(),
        [(0, Some(entry(0)))]
    );
    c.wanted("n2", 2, Some(&entry(2))).unwrap();
    let mut seen = b.wanted("n1", 1, None).unwrap();
    seen.sort_by_key(|w| w.0);
    assert_eq!(seen, [(0, Some(entry(0))), (1, None)]);
    a.wanted("n1", 0, None).unwrap();
    let mut seen = b.wanted("n1", 1, None).unwrap();
    seen.sort_by_key(|w| w.0);
    assert_eq!(seen, [(0, None), (1, None)]);
    assert_eq!((a.ops(), b.ops(), c.ops()), (0, 0, 0), "node-local");
    // Without a host directory: its own alone.
    assert_eq!(job.open(3).wanted("n1", 3, None).unwrap(), [(3, None)]);
}

/// The ranks of a host that list their SOS at once do not undo one another:
/// each leaves what it wants the index to say beside the host's copy of it
/// (node-local, no storage operation), and a rank that writes the index
/// makes its host-mates' changes too.
#[test]
fn a_rank_that_writes_the_index_lists_its_host_mates_too() {
    use soslb::clerk::Clerk;
    use soslb::policy::{Params, Rank, Request};
    use soslb::protocol::Level;
    use soslb::topology::{Sites, Topology};
    let job = TempJob::new();
    let copies = job.path().join("local");
    let topology = Topology::new(vec!["n1".into(); 2], &Sites::Single);
    let params = Params::from(&soslb::Config::default());
    let mut boards = [0, 1].map(|me| job.open(me).with_host_dir(&copies));
    let mut clerks =
        [0, 1].map(|me| Clerk::new(&Rank::new(me, 1000, params.clone(), topology.clone())));
    let post = |me: usize| Request::Post {
        entry: entry(me),
        sos: open_sos(me, 1, cut(&IdSet::from_range(0..10), 1, 0, &[])),
        level: Level::Shared,
    };
    let listed = |board: &mut FileBoard| -> Vec<usize> {
        let index = board.read_index().unwrap();
        let mut ranks: Vec<usize> = index.entries.iter().map(|e| e.rank).collect();
        ranks.sort();
        ranks
    };
    clerks[0].serve(post(0), &mut boards[0]);
    assert_eq!(listed(&mut boards[0]), [0]);
    // A host-mate that read the index before rank 0 listed itself, and
    // writes it after, undoes rank 0's change.
    boards[1].write_index(&Index::default()).unwrap();
    clerks[1].serve(post(1), &mut boards[1]);
    assert_eq!(
        listed(&mut boards[1]),
        [0, 1],
        "rank 1's listing makes rank 0's change too"
    );
    // A rank that withdraws is taken out by its host-mates' writes as well,
    // but only a rank that changes its own entry writes.
    let withdraw = || Request::Withdraw {
        level: Level::Shared,
        seq: 1,
    };
    clerks[0].serve(withdraw(), &mut boards[0]);
    let mut index = Index::default();
    index.upsert(&entry(0));
    index.upsert(&entry(1));
    boards[1].write_index(&index).unwrap();
    clerks[1].serve(post(1), &mut boards[1]);
    assert_eq!(
        listed(&mut boards[1]),
        [0, 1],
        "rank 1 had nothing to change"
    );
    let Request::Post {
        entry: mut moved,
        sos,
        level,
    } = post(1)
    else {
        unreachable!()
    };
    moved.forecast += 1.0;
    let repost = Request::Post {
        entry: moved,
        sos,
        level,
    };
    clerks[1].serve(repost, &mut boards[1]);
    assert_eq!(listed(&mut boards[1]), [1]);
    // A withdrawal that finds itself unlisted already (a lost update) still
    // tells the host: a host-mate's next write does not list it again.
    clerks[0].serve(post(0), &mut boards[0]);
    let mut index = Index::default();
    index.upsert(&Entry {
        forecast: 0.0,
        ..entry(1)
    });
    boards[1].write_index(&index).unwrap();
    clerks[0].serve(withdraw(), &mut boards[0]);
    clerks[1].serve(post(1), &mut boards[1]);
    assert_eq!(listed(&mut boards[1]), [1]);
}

/// A host's copy that cannot be written or read (its directory is a file)
/// is an error naming the copy (the rank then reads the shared index).
#[test]
fn a_host_copy_that_cannot_be_written_is_an_error_naming_it() {
    let job = TempJob::new();
    let blocked = job.path().join("not-a-directory");
    std::fs::write(&blocked, "").unwrap();
    let mut board = job.open(0).with_host_dir(&blocked);
    let written = board.write_host_index("n1", &Index::default(), 1.0);
    let read = board.read_host_index("n1");
    for err in [written.unwrap_err(), read.unwrap_err()] {
        assert!(err.to_string().contains("not-a-directory"), "{err}");
    }
}

/// The directory of the hosts' copies is made readable by its user only;
/// one of another user is never used: an error naming it.
#[test]
fn a_host_directory_of_another_user_is_not_used() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let job = TempJob::new();
    let mine = job.path().join("mine");
    let mut board = job.open(0).with_host_dir(&mine);
    board
        .write_host_index("n1", &Index::default(), 1.0)
        .unwrap();
    let meta = std::fs::metadata(&mine).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // (Only root can give a directory away: elsewhere the check is moot.)
    if meta.uid() != 0 {
        eprintln!("not root: the directory of another user is not tested");
        return;
    }
    let theirs = job.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let mut board = job.open(1).with_host_dir(&theirs);
    let written = board.write_host_index("n1", &Index::default(), 1.0);
    let read = board.read_host_index("n1");
    for err in [written.unwrap_err(), read.unwrap_err()] {
        assert!(
            err.to_string().contains("not a directory of user 0"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
}
