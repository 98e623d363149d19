//! The file board's own tests: one claim wins, damaged files are named,
//! a job directory is made once.

use super::*;
use crate::protocol::{Entry, Post};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("soslb-file-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn job(dir: &Path) {
    let info = JobInfo {
        job_id: "t".into(),
        total: 100,
        ranks: 3,
        start: String::new(),
        config_digest: 0,
    };
    create_job(dir, &info).unwrap();
}

fn claim(by: usize, slot: &Slot) -> Claim {
    Claim {
        owner: 0,
        slot: slot.clone(),
        by,
        at: 1.0,
        speed: 10.0,
        busy_for: 0.0,
        steal_cost: 0.0,
    }
}

fn open_sos(slots: Vec<Slot>) -> Sos {
    Sos {
        rank: 0,
        seq: 1,
        state: SosState::Open(Post {
            speed: 1.0,
            remaining: 10,
            forecast: 20.0,
            host: "h".into(),
            site: "s".into(),
            opened_at: 0.0,
            at: 0.0,
            slots,
            helped: Vec::new(),
        }),
    }
}

#[test]
fn one_claim_of_a_slot_wins_and_every_other_loses() {
    let dir = temp("claim");
    job(&dir);
    let slot = Slot {
        seq: 1,
        index: 0,
        start: 0,
        end: 5,
    };
    let mut a = FileBoard::open(&dir, 1).unwrap();
    let mut b = FileBoard::open(&dir, 2).unwrap();
    assert_eq!(a.probe(0, &slot).unwrap(), Probe::Free);
    assert_eq!(a.claim(&claim(1, &slot)).unwrap(), Claimed::Won);
    assert_eq!(b.claim(&claim(2, &slot)).unwrap(), Claimed::Lost);
    assert_eq!(
        b.probe(0, &slot).unwrap(),
        Probe::Taken(Some(claim(1, &slot)))
    );
    // With the fault, the second create "wins" too: what the property
    // test of the protocol must catch.
    let mut c = FileBoard::open(&dir, 0)
        .unwrap()
        .with_fault(Fault::PlainCreate);
    assert_eq!(c.claim(&claim(0, &slot)).unwrap(), Claimed::Won);
    assert_eq!(a.ops() + b.ops(), 4);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sos_and_index_are_replaced_whole_and_damage_is_named() {
    let dir = temp("replace");
    job(&dir);
    let mut b = FileBoard::open(&dir, 0).unwrap();
    assert_eq!(b.read_sos(0).unwrap(), None);
    let slots = crate::protocol::cut(&crate::ids::IdSet::from_range(0..10), 1, 0, &[5]);
    let sos = open_sos(slots);
    b.post(&sos).unwrap();
    assert_eq!(b.read_sos(0).unwrap(), Some(sos.clone()));
    // Two reads, and the post: written aside, renamed.
    assert_eq!(b.ops(), 4);
    // Garbage: an error naming the file.
    fs::write(b.sos_path(0), "garbage").unwrap();
    let e = b.read_sos(0).unwrap_err().to_string();
    assert!(e.contains("sos/0.ron"), "{e}");
    // Another rank's SOS under this name.
    let mut other = sos.clone();
    other.rank = 2;
    fs::write(b.sos_path(0), format::encode(&other)).unwrap();
    assert!(b.read_sos(0).unwrap_err().to_string().contains("rank 2"));
    // A directory in the way: moved aside at the next post, and noted.
    fs::remove_file(b.sos_path(0)).unwrap();
    fs::create_dir(b.sos_path(0)).unwrap();
    assert!(b.read_sos(0).unwrap_err().to_string().contains("directory"));
    b.post(&sos).unwrap();
    assert_eq!(b.read_sos(0).unwrap(), Some(sos));
    let notes = b.take_notes();
    assert!(
        notes.len() == 1 && notes[0].contains("moved aside"),
        "{notes:?}"
    );
    // The index: empty at first, then whole.
    assert!(b.read_index().unwrap().entries.is_empty());
    let mut ix = Index::default();
    ix.upsert(&Entry {
        rank: 0,
        seq: 1,
        forecast: 2.0,
        opened_at: 1.0,
        speed: 3.0,
    });
    b.write_index(&ix).unwrap();
    assert_eq!(b.read_index().unwrap(), ix);
    fs::write(b.index_path(), "").unwrap();
    assert!(b.read_index().unwrap_err().to_string().contains("open.ron"));
    fs::remove_dir_all(&dir).unwrap();
}

/// `read` on a board of `dir` in a thread of its own: its answer, or a
/// failure after 5 s (a read that waits on a FIFO never answers).
fn answers<T: Send + 'static>(
    dir: &Path,
    read: impl FnOnce(&mut FileBoard) -> T + Send + 'static,
) -> T {
    let mut b = FileBoard::open(dir, 1).unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(read(&mut b)));
    (rx.recv_timeout(Duration::from_secs(5))).expect("the read answers")
}

#[test]
fn a_fifo_or_a_link_in_place_of_a_signal_file_is_damage_not_a_wait() {
    let dir = temp("fifo");
    job(&dir);
    let mut b = FileBoard::open(&dir, 0).unwrap();
    let slots = crate::protocol::cut(&crate::ids::IdSet::from_range(0..10), 1, 0, &[5]);
    b.post(&open_sos(slots.clone())).unwrap();
    let fifo = |path: &Path| {
        let _ = fs::remove_file(path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    fifo(&b.sos_path(0));
    let e = answers(&dir, |b| b.read_sos(0)).unwrap_err().to_string();
    assert!(e.contains("sos/0.ron") && e.contains("FIFO"), "{e}");
    // A claim name taken by a FIFO: the claim is lost, its reader answers.
    let path = b.claim_path(0, &slots[0]);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fifo(&path);
    assert_eq!(b.claim(&claim(0, &slots[0])).unwrap(), Claimed::Lost);
    let slot = slots[0].clone();
    let probed = answers(&dir, move |b| b.probe(0, &slot));
    assert_eq!(probed.unwrap(), Probe::Taken(None));
    // A symbolic link in place of the index, to a FIFO or anywhere.
    let target = dir.join("elsewhere");
    fifo(&target);
    fs::remove_file(b.index_path()).ok();
    std::os::unix::fs::symlink(&target, b.index_path()).unwrap();
    let e = answers(&dir, |b| b.read_index()).unwrap_err().to_string();
    assert!(e.contains("open.ron") && e.contains("symbolic link"), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_job_in_the_same_directory_is_refused() {
    let dir = temp("stale");
    job(&dir);
    let e = create_job(
        &dir,
        &JobInfo {
            job_id: "u".into(),
            total: 1,
            ranks: 1,
            start: String::new(),
            config_digest: 0,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("already exists") && e.contains("job `t`"), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}
