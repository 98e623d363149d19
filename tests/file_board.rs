//! The file board on a local temporary directory, without MPI: threads each
//! owning their own `FileBoard` conflict through `flock` as processes would.

use soslb::Error;
use soslb::board::file::{self, FileBoard, JobInfo};
use soslb::board::format;
use soslb::board::watch::Discovery;
use soslb::board::{Access, Aid, Board, Locked, OpenEntry, OpenIndex, Post, Sos, SosState};
use soslb::ids::IdSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// A fresh job directory, removed on drop.
struct TempJob(PathBuf);

impl TempJob {
    fn new(ranks: usize) -> TempJob {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "soslb-file-board-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let job = TempJob(root.join("job"));
        file::create_job(&job.0, &job_info(ranks)).unwrap();
        job
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn join(&self, rank: usize, ranks: usize) -> FileBoard {
        FileBoard::join(&self.0, rank, ranks).unwrap()
    }
}

impl Drop for TempJob {
    fn drop(&mut self) {
        if let Some(root) = self.0.parent() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

fn job_info(ranks: usize) -> JobInfo {
    JobInfo {
        job_id: "test".into(),
        total: 1000,
        ranks,
        start: "2025-01-01T00:00:00Z".into(),
        config_digest: 42,
    }
}

fn post(tail: IdSet) -> Post {
    Post {
        speed: 10.0,
        remaining: tail.len(),
        forecast: 100.0,
        host: "h".into(),
        site: "s".into(),
        opened_at: 0.0,
        updated_at: 0.0,
        tail,
    }
}

/// Every id of `sets`, sorted (with repeats, if any).
fn multiset<'a>(sets: impl IntoIterator<Item = &'a IdSet>) -> Vec<u64> {
    let mut ids: Vec<u64> = sets
        .into_iter()
        .flat_map(|s| s.ranges().flatten())
        .collect();
    ids.sort_unstable();
    ids
}

/// Rank 0 owns `0..total`: a lease of `0..lease` and an open SOS with the
/// rest as its tail. 15 helpers take 1..=`max_share` ids at a time from the
/// back of the tail while the owner extends its lease by `extend` from the
/// front and applies (drops) the AID records. Every id must end up taken
/// exactly once.
fn race(total: u64, lease: u64, extend: u64, max_share: u64, delay: Duration) {
    const RANKS: usize = 16;
    let job = TempJob::new(RANKS);
    let mut boards: Vec<FileBoard> = (0..RANKS)
        .map(|r| job.join(r, RANKS).with_delay(delay))
        .collect();
    let tail = IdSet::from_range(lease..total);
    boards[0]
        .with_sos(0, Access::Wait, &mut |s| {
            s.seq = 1;
            s.state = SosState::Open(post(tail.clone()));
        })
        .unwrap();
    let start = Arc::new(Barrier::new(RANKS));
    let mut handles = Vec::new();
    for (rank, mut board) in boards.into_iter().enumerate() {
        let start = start.clone();
        handles.push(thread::spawn(move || {
            start.wait();
            // (ids computed by this rank, ids the owner saw taken in AIDs)
            let (mut mine, mut given) = (IdSet::new(), IdSet::new());
            if rank == 0 {
                mine.insert(0..lease);
            }
            let mut round = rank as u64;
            loop {
                round += 1;
                let mut open = false;
                let access = if rank % 2 == 0 {
                    Access::Try
                } else {
                    Access::Wait
                };
                let locked = board
                    .with_sos(0, access, &mut |s| {
                        let SosState::Open(p) = &mut s.state else {
                            return;
                        };
                        if rank == 0 {
                            mine.extend(&p.tail.take_front(extend));
                            for aid in s.aids.drain(..) {
                                given.extend(&aid.ids);
                            }
                        } else if !p.tail.is_empty() {
                            let ids = p.tail.take_back(1 + round % max_share);
                            mine.extend(&ids);
                            s.aids.push(Aid {
                                helper: rank,
                                ids,
                                at: round as f64,
                                speed: 1.0,
                                busy_for: 0.0,
                                steal_cost: 0.0,
                            });
                        }
                        open = !p.tail.is_empty();
                        if rank == 0 && !open {
                            s.state = SosState::Closed;
                        }
                    })
                    .unwrap();
                if locked == Locked::Done && !open {
                    return (rank, mine, given, board.ops());
                }
                thread::yield_now();
            }
        }));
    }
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let all = multiset(results.iter().map(|r| &r.1));
    assert_eq!(all.len() as u64, total, "ids taken more than once or lost");
    assert!(
        all.iter().copied().eq(0..total),
        "ids taken more than once or lost"
    );
    // What the owner read in the AID records is exactly what the helpers
    // took, and the stored record is closed with no AID left over.
    let mut given = multiset([&results[0].2]);
    let helpers = multiset(results.iter().skip(1).map(|r| &r.1));
    assert_eq!(given.len(), helpers.len());
    given.sort_unstable();
    assert_eq!(given, helpers);
    let text = std::fs::read_to_string(job.path().join("sos/0.ron")).unwrap();
    let stored: Sos = match format::decode(&text, Path::new("0.ron")).unwrap() {
        format::Decoded::Body(s) => s,
        format::Decoded::Torn(r) => panic!("torn: {r}"),
    };
    assert_eq!((stored.state, stored.aids.len()), (SosState::Closed, 0));
    // The helpers really raced.
    assert!(results.iter().skip(1).filter(|r| !r.1.is_empty()).count() > 1);
}

#[test]
fn racing_helpers_take_every_id_once() {
    race(6000, 100, 25, 6, Duration::ZERO);
}

#[test]
fn racing_helpers_take_every_id_once_on_slow_storage() {
    race(1500, 50, 40, 12, Duration::from_millis(1));
}

/// A read without the lock shows an SOS record as it is, takes no lock,
/// and says "cannot tell" (never an error, never a wrong record) for a body
/// caught mid-write, garbage, or another rank's record.
#[test]
fn a_read_without_the_lock_is_a_hint_that_never_misleads() {
    let job = TempJob::new(2);
    let mut owner = job.join(1, 2);
    let mut helper = job.join(0, 2);
    owner
        .with_sos(1, Access::Wait, &mut |s| {
            s.seq = 4;
            s.state = SosState::Open(post(IdSet::from_range(0..9)));
        })
        .unwrap();
    let seen = helper.peek_sos(1).unwrap().expect("a whole record");
    assert_eq!((seen.rank, seen.seq), (1, 4));
    assert!(matches!(seen.state, SosState::Open(p) if p.tail.len() == 9));
    // No lock was left held.
    assert_eq!(
        owner.with_sos(1, Access::Try, &mut |_| {}).unwrap(),
        Locked::Done
    );
    let path = owner.sos_path(1);
    let text = std::fs::read(&path).unwrap();
    for bad in [
        &text[..40],
        b"\x00garbage\xff (rank: 1".as_slice(),
        format::encode_record(&Sos::default(), 1 << 40).as_bytes(),
    ] {
        std::fs::write(&path, bad).unwrap();
        assert_eq!(helper.peek_sos(1).unwrap(), None);
    }
}

#[test]
fn corrupt_sos_is_an_error_naming_the_path_and_reset_repairs_it() {
    let job = TempJob::new(2);
    let mut owner = job.join(1, 2);
    let mut other = job.join(0, 2);
    let path = owner.sos_path(1);
    std::fs::write(&path, b"\x00garbage\xff (rank: 1").unwrap();
    let err = other.with_sos(1, Access::Wait, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    // The error released the lock.
    let fresh = Sos {
        rank: 1,
        ..Sos::default()
    };
    owner.reset_sos(&fresh).unwrap();
    let mut seen = None;
    let got = other
        .with_sos(1, Access::Try, &mut |s| seen = Some(s.clone()))
        .unwrap();
    assert_eq!((got, seen), (Locked::Done, Some(fresh)));

    // A record of another rank, or a malformed id set, is corrupt too.
    // (Written with a high write number: a lower one reads as an older copy.)
    std::fs::write(&path, format::encode_record(&Sos::default(), 1 << 40)).unwrap();
    let err = other.with_sos(1, Access::Wait, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("rank 0, not 1"), "{err}");
    let tail: IdSet = ron::from_str("[(9, 3)]").unwrap();
    let sos = Sos {
        rank: 1,
        seq: 1,
        state: SosState::Open(Post {
            tail,
            ..post(IdSet::new())
        }),
        aids: vec![],
    };
    std::fs::write(&path, format::encode_record(&sos, 1 << 41)).unwrap();
    let err = other.with_sos(1, Access::Try, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("malformed"), "{err}");
}

#[test]
fn torn_index_reads_as_none_then_complete() {
    let job = TempJob::new(1);
    let mut board = job.join(0, 1);
    let index = OpenIndex {
        entries: vec![OpenEntry {
            rank: 0,
            seq: 3,
            forecast: 12.5,
            opened_at: 1.0,
            speed: 1.0,
        }],
    };
    let text = format::encode(&index);
    let path = board.index_path();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    assert_eq!(board.read_index().unwrap(), None);
    std::fs::write(&path, "").unwrap();
    assert_eq!(board.read_index().unwrap(), None);
    std::fs::write(&path, &text).unwrap();
    assert_eq!(board.read_index().unwrap(), Some(index.clone()));
    // Under the lock a torn index is corruption, not an empty index.
    std::fs::write(&path, &text[..text.len() - 3]).unwrap();
    let err = board.with_index(Access::Wait, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

#[test]
fn index_updates_are_stored() {
    let job = TempJob::new(2);
    let (mut a, mut b) = (job.join(0, 2), job.join(1, 2));
    let entry = |rank| OpenEntry {
        rank,
        seq: 1,
        forecast: 5.0,
        opened_at: 0.5,
        speed: 1.0,
    };
    a.with_index(Access::Wait, &mut |i| i.upsert(entry(0)))
        .unwrap();
    b.with_index(Access::Wait, &mut |i| i.upsert(entry(1)))
        .unwrap();
    a.with_index(Access::Wait, &mut |i| i.remove(0)).unwrap();
    assert_eq!(
        b.read_index().unwrap(),
        Some(OpenIndex {
            entries: vec![entry(1)]
        })
    );
}

#[test]
fn existing_job_dir_or_sos_file_is_a_stale_job() {
    let job = TempJob::new(2);
    let err = file::create_job(job.path(), &job_info(2)).unwrap_err();
    assert!(matches!(err, Error::StaleJob { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&*job.path().to_string_lossy()) && msg.contains("job_id"),
        "{msg}"
    );
    assert!(msg.contains("job `test`"), "{msg}");
    let _first = job.join(1, 2);
    let err = FileBoard::join(job.path(), 1, 2).unwrap_err();
    assert!(matches!(err, Error::StaleJob { .. }), "{err}");
    assert!(matches!(
        FileBoard::join(job.path(), 2, 2),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn job_lock_probe() {
    let job = TempJob::new(1);
    let lock = file::job_lock(job.path()).unwrap();
    assert!(!file::job_lock_is_free(job.path()).unwrap());
    assert!(matches!(
        file::job_lock(job.path()),
        Err(Error::Locking { .. })
    ));
    lock.unlock().unwrap();
    assert!(file::job_lock_is_free(job.path()).unwrap());
    assert_eq!(file::mount_lock_problem(job.path()), None);
    file::is_shared_fs(job.path()).unwrap();
}

#[test]
fn watcher_wakes_a_waiting_helper() {
    let job = TempJob::new(3);
    let mut helper = job.join(0, 3);
    let mut owner = job.join(1, 3);
    let mut discovery = Discovery::new(&helper.index_path(), true);
    assert!(discovery.is_watching(), "{:?}", discovery.fallback_reason());
    // Reading the index (an open) does not wake anybody; nor does a rank
    // that ends and closes its descriptor of the index, open for writing
    // (the first rank at finalize woke every idle rank that way).
    helper.read_index().unwrap();
    drop(job.join(2, 3));
    assert!(!discovery.wait(Duration::from_millis(200)));
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        owner
            .with_index(Access::Wait, &mut |i| {
                i.upsert(OpenEntry {
                    rank: 1,
                    seq: 1,
                    forecast: 9.0,
                    opened_at: 1.0,
                    speed: 1.0,
                })
            })
            .unwrap();
    });
    let t = Instant::now();
    assert!(discovery.wait(Duration::from_secs(5)));
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    writer.join().unwrap();
    let index = helper.read_index().unwrap().unwrap();
    assert_eq!(index.entries.len(), 1);
}

#[test]
fn polling_discovery_sleeps_the_timeout() {
    let job = TempJob::new(1);
    let board = job.join(0, 1);
    let mut discovery = Discovery::new(&board.index_path(), false);
    assert!(!discovery.is_watching());
    assert_eq!(discovery.fallback_reason(), None);
    let t = Instant::now();
    assert!(!discovery.wait(Duration::from_millis(50)));
    let dt = t.elapsed();
    assert!(
        dt >= Duration::from_millis(45) && dt < Duration::from_millis(1000),
        "{dt:?}"
    );
    // A missing file cannot be watched: polling, with the reason.
    let missing = Discovery::new(&job.path().join("no-such.ron"), true);
    assert!(!missing.is_watching());
    assert!(missing.fallback_reason().unwrap().contains("no-such.ron"));
}

#[test]
fn operations_are_counted() {
    let job = TempJob::new(2);
    let mut board = job.join(0, 2);
    // Its SOS file and journal: create, stat, write, fsync each.
    assert_eq!(board.ops(), 8);
    let before = board.ops();
    board.read_index().unwrap();
    let per_read = board.ops() - before;
    assert!((1..=4).contains(&per_read), "{per_read}");
    // Own SOS, unchanged: lock, fresh open, read, unlock.
    let before = board.ops();
    board.with_sos(0, Access::Wait, &mut |_| {}).unwrap();
    assert_eq!(board.ops() - before, 4);
    // Changed: lock, fresh open, read, one durable write (O_DSYNC) through
    // the kept descriptor, unlock (files are padded and never shrink: no
    // truncation).
    let before = board.ops();
    board
        .with_sos(0, Access::Wait, &mut |s| {
            s.state = SosState::Open(post(IdSet::from_range(0..9)))
        })
        .unwrap();
    assert_eq!(board.ops() - before, 5);
    let before = board.ops();
    board
        .with_sos(0, Access::Wait, &mut |s| s.state = SosState::Closed)
        .unwrap();
    assert_eq!(board.ops() - before, 5);
    // Another rank's SOS: opened once, on first use.
    let before = board.ops();
    board.with_sos(1, Access::Try, &mut |_| {}).unwrap_err();
    let _other = job.join(1, 2);
    board.with_sos(1, Access::Try, &mut |_| {}).unwrap();
    board.with_sos(1, Access::Try, &mut |_| {}).unwrap();
    assert_eq!(board.ops() - before, 1 + 1 + 4 + 4);
}

/// A rank that attaches to a job (where hosts trade through MPI) creates
/// no file of its own and counts no operation; it reads the index and the
/// others' SOS files as a joined rank does, and a post of its own is an
/// error, not a file created behind its back.
#[test]
fn an_attached_rank_creates_no_file_of_its_own() {
    let job = TempJob::new(2);
    let mut attached = FileBoard::attach(job.path(), 1, 2).unwrap();
    assert_eq!(attached.ops(), 0);
    for dir in ["sos", "journal"] {
        let files = std::fs::read_dir(job.path().join(dir)).unwrap().count();
        assert_eq!(files, 0, "{dir}");
    }
    let _owner = job.join(0, 2);
    attached.read_index().unwrap();
    attached.with_sos(0, Access::Try, &mut |_| {}).unwrap();
    attached
        .with_sos(1, Access::Wait, &mut |s| {
            s.state = SosState::Open(post(IdSet::from_range(0..9)))
        })
        .unwrap_err();
    assert!(!job.path().join("sos").join("1.ron").exists());
    assert!(FileBoard::attach(job.path(), 2, 2).is_err());
}

/// After a clean finish each rank removes the files it created, and only
/// those; a file already gone is no error.
#[test]
fn a_rank_removes_its_own_signal_files_and_no_others() {
    let job = TempJob::new(2);
    let boards = [job.join(0, 2), job.join(1, 2)];
    let files = |rank: usize| {
        ["sos", "journal"].map(|d| job.path().join(d).join(format!("{rank}.ron")).exists())
    };
    assert_eq!((files(0), files(1)), ([true; 2], [true; 2]));
    drop(boards);
    file::remove_own(job.path(), 1).unwrap();
    assert_eq!((files(0), files(1)), ([true; 2], [false; 2]));
    file::remove_own(job.path(), 1).unwrap();
    assert_eq!(files(0), [true; 2]);
}

/// The `O_DSYNC` flags of this process's descriptors open on files under
/// `dir`.
fn dsync_flags_under(dir: &Path) -> Vec<bool> {
    let mut flags = Vec::new();
    for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let under = std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(dir));
        let info = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(fd.file_name()));
        if let (true, Ok(info)) = (under, info) {
            let octal = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .unwrap()
                .trim();
            let bits = i32::from_str_radix(octal, 8).unwrap();
            flags.push(bits & libc::O_DSYNC != 0);
        }
    }
    flags
}

/// A host's board is node-local: its writes do not wait for the disk
/// (those of the shared board do).
#[test]
fn a_host_board_writes_without_waiting_for_stable_storage() {
    let job = TempJob::new(2);
    let dir = job.path().parent().unwrap().join("host-board");
    file::create_host_board(&dir).unwrap();
    let mut boards = [FileBoard::join_host(&dir, 0, 2).unwrap(), job.join(0, 2)];
    // Two operations fewer: no `fsync` of the two files it created.
    assert_eq!(boards[0].ops() + 2, boards[1].ops());
    for board in &mut boards {
        board.read_index().unwrap();
        board
            .with_sos(0, Access::Wait, &mut |s| {
                s.state = SosState::Open(post(IdSet::from_range(0..9)))
            })
            .unwrap();
    }
    // Its SOS file, its journal and the index.
    let (host, shared) = (dsync_flags_under(&dir), dsync_flags_under(job.path()));
    assert_eq!(host, [false; 3]);
    assert_eq!(shared, [true; 3]);
}

/// The storage cost is timed in a thread of its own: the caller returns at
/// once, and the read's seconds (two operations at the emulated 0.1 s)
/// arrive later; a job directory gone sends nothing, and nothing hangs.
#[test]
fn the_storage_probe_costs_the_caller_no_file_time() {
    let job = TempJob::new(1);
    let board = job.join(0, 1).with_delay(Duration::from_millis(100));
    let t = std::time::Instant::now();
    let joined = board.ops();
    let probe = board.probe_storage();
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
    let seconds = probe.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!((0.2..5.0).contains(&seconds), "{seconds}");
    assert_eq!(
        board.ops(),
        joined,
        "the probe is not one of the run's operations"
    );

    std::fs::remove_file(job.path().join("job.ron")).unwrap();
    let probe = board.probe_storage();
    assert!(
        probe.recv_timeout(Duration::from_secs(10)).is_err(),
        "a failed read sent seconds"
    );
}

/// The child half of `a_long_lock_wait_warns_with_back_off_and_sleeps`: join
/// the job named by `SOSLB_TEST_WAIT_JOB` as rank 0 and wait for the lock of
/// rank 1's SOS file, which the parent holds.
#[test]
fn lock_wait_child() {
    let Some(job) = std::env::var_os("SOSLB_TEST_WAIT_JOB") else {
        return; // only run as the child
    };
    let mut board = FileBoard::join(Path::new(&job), 0, 2)
        .unwrap()
        .with_wait_warning(Duration::from_millis(300));
    let got = board.with_sos(1, Access::Wait, &mut |_| {}).unwrap();
    assert_eq!(got, Locked::Done);
}

#[test]
fn a_long_lock_wait_warns_with_back_off_and_sleeps() {
    let job = TempJob::new(2);
    let mut holder = job.join(1, 2);
    assert_eq!(holder.lock_sos(1, Access::Try).unwrap(), Locked::Done);
    // SAFETY: getrusage fills the struct it is given.
    let cpu = || {
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
        let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        s(u.ru_utime) + s(u.ru_stime)
    };
    let cpu0 = cpu();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_wait_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SOSLB_TEST_WAIT_JOB", job.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Waits of 0.3, 0.6 and 1.2 s warn; then the lock is released at 2 s.
    thread::sleep(Duration::from_millis(2000));
    holder.unlock_sos(1).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let path = job.path().join("sos/1.ron");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("soslb: warning: rank 0: waited "))
        .collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    for w in &warnings {
        assert!(
            w.ends_with(&format!(
                "s for the lock of {}; still waiting",
                path.display()
            )),
            "{w}"
        );
    }
    // The waiter slept: far below one core over 2 s (the test harness
    // itself included).
    let used = cpu() - cpu0;
    eprintln!(
        "a 2 s lock wait: {} warnings, {used:.3} s of CPU",
        warnings.len()
    );
    assert!(used < 0.3, "the waiting process used {used:.3} s of CPU");
}

fn open_sos(rank: usize, tail: std::ops::Range<u64>) -> Sos {
    Sos {
        rank,
        seq: 1,
        state: SosState::Open(post(IdSet::from_range(tail))),
        aids: vec![],
    }
}

/// A job of `ranks` ranks whose rank 1 (the owner) has an SOS open with
/// tail 0..50, rank 0 its helper: the job, owner, helper and the SOS path.
fn open_sos_of_rank_1(ranks: usize) -> (TempJob, FileBoard, FileBoard, PathBuf) {
    let job = TempJob::new(ranks);
    let mut owner = job.join(1, ranks);
    let helper = job.join(0, ranks);
    let path = owner.sos_path(1);
    owner
        .with_sos(1, Access::Wait, &mut |s| *s = open_sos(1, 0..50))
        .unwrap();
    (job, owner, helper, path)
}

/// Take one id from the back of the tail of `rank`'s SOS.
fn take_one(board: &mut FileBoard, rank: usize) -> soslb::Result<Locked> {
    board.with_sos(rank, Access::Wait, &mut |s| {
        if let SosState::Open(p) = &mut s.state {
            let ids = p.tail.take_back(1);
            s.aids.push(Aid {
                helper: 0,
                ids,
                at: 0.0,
                speed: 1.0,
                busy_for: 0.0,
                steal_cost: 0.0,
            });
        }
    })
}

/// Also to a rank that opens the file for the first time after the rename
/// and so has no memory of the original: each record names the inode it was
/// written to.
#[test]
fn a_file_replaced_by_rename_is_reported_and_the_owner_reset_repairs_it() {
    let (job, mut owner, mut helper, path) = open_sos_of_rank_1(3);
    take_one(&mut helper, 1).unwrap();
    // A copy now, more help, then the copy put back by rename.
    let copy = job.path().join("copy.ron");
    std::fs::copy(&path, &copy).unwrap();
    take_one(&mut helper, 1).unwrap();
    std::fs::rename(&copy, &path).unwrap();
    let mut newcomer = job.join(2, 3);
    for board in [&mut newcomer, &mut helper, &mut owner] {
        let err = take_one(board, 1).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Corrupt { .. }), "{msg}");
        assert!(
            msg.contains(&*path.to_string_lossy()) && msg.contains("replaced"),
            "{msg}"
        );
    }
    // The owner's reset locks and writes the file now at the path; every
    // rank then reads it.
    let closed = Sos {
        rank: 1,
        seq: 2,
        ..Sos::default()
    };
    owner.reset_sos(&closed).unwrap();
    let mut seen = None;
    helper
        .with_sos(1, Access::Wait, &mut |s| seen = Some(s.clone()))
        .unwrap();
    assert_eq!(seen, Some(closed));
    newcomer.with_sos(1, Access::Wait, &mut |_| {}).unwrap();
    // And the locks work on it: held by one, busy for the other.
    assert_eq!(owner.lock_sos(1, Access::Try).unwrap(), Locked::Done);
    assert_eq!(
        helper.with_sos(1, Access::Try, &mut |_| {}).unwrap(),
        Locked::Busy
    );
    owner.unlock_sos(1).unwrap();
}

#[test]
fn an_older_copy_written_in_place_is_reported_as_replaced() {
    let (_job, _owner, mut helper, path) = open_sos_of_rank_1(2);
    let old = std::fs::read(&path).unwrap();
    take_one(&mut helper, 1).unwrap();
    // `cp old sos/1.ron`: same file, older content, valid checksum.
    std::fs::write(&path, &old).unwrap();
    let msg = take_one(&mut helper, 1).unwrap_err().to_string();
    assert!(
        msg.contains("replaced") && msg.contains("went back"),
        "{msg}"
    );
    // (A rank whose last look is older than the copy cannot tell: here the
    // owner, which has not looked since the helper took.)
}

#[test]
fn a_torn_body_under_the_lock_is_read_again_before_it_is_corrupt() {
    let (_job, _owner, mut helper, path) = open_sos_of_rank_1(2);
    let good = std::fs::read(&path).unwrap();
    // Cut, as a stale cached size would, and whole again 30 ms later.
    let header = good.iter().position(|&b| b == b'\n').unwrap();
    std::fs::write(&path, &good[..header + 10]).unwrap();
    let restore = {
        let (path, good) = (path.clone(), good.clone());
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            std::fs::write(&path, &good).unwrap();
        })
    };
    take_one(&mut helper, 1).unwrap();
    restore.join().unwrap();
    assert_eq!(helper.rereads(), 1);
    // Empty for good: corrupt after the re-reads, naming the file.
    std::fs::write(&path, b"").unwrap();
    let t = Instant::now();
    let msg = take_one(&mut helper, 1).unwrap_err().to_string();
    assert!(
        msg.contains(&*path.to_string_lossy())
            && msg.contains("empty file")
            && msg.contains("5 times through fresh opens"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn files_are_padded_and_never_shrink() {
    let job = TempJob::new(1);
    let mut board = job.join(0, 1);
    let path = board.sos_path(0);
    let len = || std::fs::metadata(&path).unwrap().len();
    assert_eq!(len(), format::BLOCK as u64);
    // A long tail of many ranges grows the file by whole blocks ...
    let mut tail = IdSet::new();
    for k in 0..800 {
        tail.insert(3 * k..3 * k + 1);
    }
    board
        .with_sos(0, Access::Wait, &mut |s| {
            s.seq = 1;
            s.state = SosState::Open(post(tail.clone()));
        })
        .unwrap();
    let grown = len();
    assert!(grown > format::BLOCK as u64 && grown % format::BLOCK as u64 == 0);
    // ... and a short body later keeps the size.
    board
        .with_sos(0, Access::Wait, &mut |s| s.state = SosState::Closed)
        .unwrap();
    assert_eq!(len(), grown);
    let mut seen = None;
    board
        .with_sos(0, Access::Wait, &mut |s| seen = Some(s.state.clone()))
        .unwrap();
    assert_eq!(seen, Some(SosState::Closed));
}

/// The memory board (the simulator's) counts the operations the file board
/// does for the same calls, so that a simulated storage latency costs what
/// the real one would.
#[test]
fn the_memory_board_counts_what_the_file_board_does() {
    let job = TempJob::new(2);
    let mut file = job.join(0, 2);
    let _other = job.join(1, 2);
    let mut memory = soslb::board::memory::MemoryBoard::new(2);
    // Warm up the file board's kept descriptors (opened once, on first use).
    file.with_sos(0, Access::Wait, &mut |_| {}).unwrap();
    file.with_sos(1, Access::Wait, &mut |_| {}).unwrap();
    file.with_index(Access::Wait, &mut |_| {}).unwrap();
    let aid = Aid {
        helper: 0,
        ids: IdSet::from_range(5..9),
        at: 1.0,
        speed: 2.0,
        busy_for: 0.0,
        steal_cost: 0.0,
    };
    type Call = Box<dyn Fn(&mut dyn Board)>;
    let calls: Vec<(&str, Call)> = vec![
        (
            "a read of the index",
            Box::new(|b| drop(b.read_index().unwrap())),
        ),
        (
            "a read of an SOS record without its lock",
            Box::new(|b| drop(b.peek_sos(1).unwrap())),
        ),
        (
            "an unchanged look",
            Box::new(|b| {
                b.with_sos(0, Access::Wait, &mut |_| {}).unwrap();
            }),
        ),
        (
            "a post",
            Box::new(|b| {
                b.with_sos(1, Access::Wait, &mut |s| {
                    s.state = SosState::Open(post(IdSet::from_range(0..9)))
                })
                .unwrap();
            }),
        ),
        (
            "a take with its journal",
            Box::new(move |b| {
                b.with_sos(1, Access::Try, &mut |s| s.aids.push(aid.clone()))
                    .unwrap();
            }),
        ),
        (
            "a change of the index",
            Box::new(|b| {
                b.with_index(Access::Wait, &mut |ix| {
                    ix.upsert(OpenEntry {
                        rank: 1,
                        seq: 0,
                        forecast: 3.0,
                        opened_at: 1.0,
                        speed: 1.0,
                    })
                })
                .unwrap();
            }),
        ),
    ];
    for (what, call) in &calls {
        let (f0, m0) = (file.ops(), memory.ops());
        call(&mut file);
        call(&mut memory);
        assert_eq!(file.ops() - f0, memory.ops() - m0, "{what}");
    }
}

/// A host's copy of the open index (node-local, written aside and renamed):
/// what one rank of the host leaves, another reads whole, with the time it
/// was read from the shared storage; each host has its own; none before the
/// first write, or without a directory for copies; not counted as shared
/// storage operations.
#[test]
fn a_host_copy_of_the_index_is_read_by_the_other_ranks_of_the_host() {
    let job = TempJob::new(3);
    let copies = job.path().join("local");
    let (a, b) = (job.join(0, 3), job.join(1, 3));
    let mut none = job.join(2, 3);
    let (mut a, mut b) = (a.with_host_dir(&copies), b.with_host_dir(&copies));
    assert_eq!(b.read_host_index("n1").unwrap(), None);
    let mut index = OpenIndex::default();
    index.upsert(OpenEntry {
        rank: 2,
        seq: 1,
        forecast: 5.0,
        opened_at: 0.5,
        speed: 1.0,
    });
    let ops = (a.ops(), b.ops());
    a.write_host_index("n1", &index, 3.5).unwrap();
    assert_eq!(b.read_host_index("n1").unwrap(), Some((index.clone(), 3.5)));
    assert_eq!(b.read_host_index("n2").unwrap(), None);
    assert_eq!((a.ops(), b.ops()), ops);
    // A later copy replaces it; an odd host name stays inside the directory.
    a.write_host_index("n1", &OpenIndex::default(), 4.0)
        .unwrap();
    assert_eq!(
        b.read_host_index("n1").unwrap(),
        Some((OpenIndex::default(), 4.0))
    );
    let odd = a.host_copy_path("../x/y").unwrap();
    assert_eq!(odd.parent(), Some(copies.as_path()));
    let left: Vec<_> = std::fs::read_dir(&copies).unwrap().collect();
    assert_eq!(left.len(), 1, "only the copy of n1: {left:?}");
    // Without a directory for copies: none, and writing one does nothing.
    none.write_host_index("n1", &index, 5.0).unwrap();
    assert_eq!(none.read_host_index("n1").unwrap(), None);
    assert_eq!(none.host_copy_path("n1"), None);
}

/// A host's copy that cannot be written or read (its directory is a file)
/// is an error naming the copy (the rank then reads the shared index).
#[test]
fn a_host_copy_that_cannot_be_written_is_an_error_naming_it() {
    let job = TempJob::new(1);
    let blocked = job.path().join("not-a-directory");
    std::fs::write(&blocked, "").unwrap();
    let mut board = job.join(0, 1).with_host_dir(&blocked);
    let written = board.write_host_index("n1", &OpenIndex::default(), 1.0);
    let read = board.read_host_index("n1");
    for err in [written.unwrap_err(), read.unwrap_err()] {
        assert!(err.to_string().contains("not-a-directory"), "{err}");
    }
}

/// The directory of the hosts' copies is made readable by its user only;
/// one of another user (made to catch the copies, or to feed a false
/// index) is never used: an error naming it.
#[test]
fn a_host_directory_of_another_user_is_not_used() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let job = TempJob::new(2);
    let mine = job.path().join("mine");
    let mut board = job.join(0, 2).with_host_dir(&mine);
    board
        .write_host_index("n1", &OpenIndex::default(), 1.0)
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
    let mut board = job.join(1, 2).with_host_dir(&theirs);
    let written = board.write_host_index("n1", &OpenIndex::default(), 1.0);
    let read = board.read_host_index("n1");
    for err in [written.unwrap_err(), read.unwrap_err()] {
        assert!(
            err.to_string().contains("not a directory of user 0"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
}
