//! The completion journal and resume (DESIGN §11).
//!
//! With a `job_name`, each rank journals, at the check interval and at
//! finalize, the ids it has completed and the exact sums of their
//! observables ([`Completion`]). A later run with `resume: true` and the same
//! `job_name` reads every journal of the job, computes only the ids none of
//! them holds, and merges their sums into its statistics: the sums are exact
//! ([`crate::stats`]), so a job cut by a kill plus its resumed run give the
//! same bits as one uninterrupted run.
//!
//! The completion journal lives outside the run directories, since a
//! resumed run is a new `init`:
//!
//! ```text
//! <signal_dir>/<job_name>/completion.ron    the runs of the job (total, ranks, start);
//!                                           locked by rank 0 of the run in progress
//! <signal_dir>/<job_name>/<run>/<rank>.a.ron,
//! <signal_dir>/<job_name>/<run>/<rank>.b.ron  a rank's completions, two slots
//! ```
//!
//! A rank writes its two slots in turn, each as one padded write and an
//! `fsync`, with a sequence number under the checksum of the signal-file
//! format ([`crate::board::format`]): a write cut by a kill or a crash spoils
//! one slot at most, and the other holds the previous state. The reader takes
//! the newest valid slot; a spoiled slot beside a valid one is a warning
//! (naming the file), a rank whose every slot is spoiled an error naming them.
//! Ids the journals do not hold are computed again, never twice counted: a
//! journal's ids and sums are one snapshot, taken when every id handed out
//! before it had been computed and added.

use crate::board::format::{self, Decoded};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::stats::Observables;
use fs2::FileExt;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

mod prior;
pub use prior::{Completion, IdMap, Prior};

/// The name of the job's index file.
const INDEX: &str = "completion.ron";

/// One run of the job, in the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Its directory, under the job's.
    pub dir: String,
    /// The total it was asked to compute.
    pub total: u64,
    /// Its ranks.
    pub ranks: usize,
    /// When it started (RFC 3339).
    pub start: String,
}

/// The index of a job's journal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Index {
    job_name: String,
    runs: Vec<RunEntry>,
}

/// A slot of rank `rank`'s journal in `dir`.
fn slot_path(dir: &Path, rank: usize, slot: u64) -> PathBuf {
    dir.join(format!(
        "{rank}.{}.ron",
        if slot % 2 == 0 { "a" } else { "b" }
    ))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

/// A completion and the file it was read from.
pub type Found = (PathBuf, Completion);

/// A rank's newest valid completion in `dir` (`None`: it never wrote one),
/// and a warning when a spoiled slot was passed over.
pub fn read_rank(dir: &Path, rank: usize) -> Result<(Option<Found>, Option<String>)> {
    let mut good: Option<Found> = None;
    let mut bad: Vec<(PathBuf, String)> = Vec::new();
    for slot in 0..2 {
        let path = slot_path(dir, rank, slot);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let why = match format::decode_record::<Completion>(&bytes, &path) {
            Ok(Decoded::Body(r)) if r.body.rank == rank && r.body.ids.is_well_formed() => {
                if good.as_ref().is_none_or(|(_, g)| r.body.seq > g.seq) {
                    good = Some((path, r.body));
                }
                continue;
            }
            Ok(Decoded::Body(r)) if r.body.rank != rank => {
                format!("it holds the journal of rank {}", r.body.rank)
            }
            Ok(Decoded::Body(_)) => "its id ranges are not sorted and disjoint".to_string(),
            Ok(Decoded::Torn(why)) => why,
            Err(e) => e.to_string(),
        };
        bad.push((path, why));
    }
    let named = |bad: &[(PathBuf, String)]| {
        bad.iter()
            .map(|(p, why)| format!("{}: {why}", p.display()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match (&good, bad.is_empty()) {
        (_, true) => Ok((good, None)),
        (Some((p, _)), false) => {
            let warning = format!(
                "completion journal slot {} is spoiled (a write cut by a kill or a crash?); \
                 using {}, and computing again what only the spoiled slot held",
                named(&bad),
                p.display()
            );
            Ok((good, Some(warning)))
        }
        (None, false) => Err(Error::Corrupt {
            path: bad[0].0.clone(),
            reason: format!(
                "completion journal of rank {rank} unreadable: {}. Nothing was computed. To \
                 compute that rank's ids again, remove its files ({}); to start the job \
                 afresh, remove {}",
                named(&bad),
                bad.iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                dir.parent().unwrap_or(dir).display()
            ),
        }),
    }
}

/// Rank 0's hold on a job's journal for the run: the lock of its index.
#[derive(Debug)]
pub struct JobJournal {
    _index: File,
}

impl JobJournal {
    /// Open the journal of job `name` on `signal_dir` for a run of `total`
    /// realisations on `ranks` ranks (rank 0 only, at init): lock the index
    /// (another run of the job in progress is an error), read what earlier
    /// runs completed when `resume`, and add this run.
    pub fn open(
        signal_dir: &Path,
        name: &str,
        resume: bool,
        total: u64,
        ranks: usize,
    ) -> Result<(JobJournal, Prior)> {
        let job = signal_dir.join(name);
        let (mut file, path) = lock_index(&job, name)?;
        let mut index = Index::read(&mut file, &path, name)?;
        if !index.runs.is_empty() && !resume {
            return Err(Error::StaleJob {
                path: job,
                reason: format!(
                    "job_name {name:?} has a completion journal of {} earlier run(s): set \
                     `resume: true` (SOSLB_RESUME=true) to compute only what they did not, or \
                     choose another job_name, or remove this directory to start afresh",
                    index.runs.len()
                ),
            });
        }
        let mut prior = read_prior(&job, &index.runs)?;
        prior.check_total(total, &path)?;
        let dir = format!("{}", index.runs.len());
        prior.dir = job.join(&dir);
        if let Err(e) = fs::create_dir(&prior.dir) {
            return Err(Error::StaleJob {
                path: prior.dir.clone(),
                reason: format!(
                    "cannot create this run's journal directory ({e}): a directory of that name \
                     exists but the index {} does not list it; remove it",
                    path.display()
                ),
            });
        }
        index.runs.push(RunEntry {
            dir,
            total,
            ranks,
            start: chrono::Utc::now().to_rfc3339(),
        });
        let text = format::encode_record(&index, index.runs.len() as u64);
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.set_len(0))
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(io(&path))?;
        Ok((JobJournal { _index: file }, prior))
    }
}

/// The index of job `name` in its directory `job`, created if need be and
/// locked (another run of the job in progress is an error), and its path.
fn lock_index(job: &Path, name: &str) -> Result<(File, PathBuf)> {
    fs::create_dir_all(job).map_err(io(job))?;
    let path = job.join(INDEX);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    if file.try_lock_exclusive().is_err() {
        return Err(Error::Locking {
            path,
            reason: format!(
                "the journal of job_name {name:?} is locked: another run of this job is in \
                 progress (or its lock outlived it on NFS for a while)"
            ),
        });
    }
    Ok((file, path))
}

impl Index {
    /// The index of job `name` in `file` (at `path`): empty when the file is.
    fn read(file: &mut File, path: &Path, name: &str) -> Result<Index> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(path))?;
        if bytes.is_empty() {
            return Ok(Index {
                job_name: name.to_string(),
                runs: Vec::new(),
            });
        }
        match format::decode_record::<Index>(&bytes, path)? {
            Decoded::Body(r) => Ok(r.body),
            Decoded::Torn(why) => Err(Error::Corrupt {
                path: path.to_owned(),
                reason: format!("completion journal index: {why}"),
            }),
        }
    }
}

/// What the earlier `runs` of the job in `job` completed: every rank's
/// journal, merged, with the warnings of spoiled slots.
fn read_prior(job: &Path, runs: &[RunEntry]) -> Result<Prior> {
    let mut parts = Vec::new();
    let mut warnings = Vec::new();
    for run in runs {
        for r in 0..run.ranks {
            let (part, warning) = read_rank(&job.join(&run.dir), r)?;
            parts.extend(part);
            warnings.extend(warning);
        }
    }
    let mut prior = Prior::merge(&parts)?;
    prior.runs = runs.len();
    prior.total = runs.iter().map(|r| r.total).max().unwrap_or(0);
    prior.warnings = warnings;
    Ok(prior)
}

/// A rank's journal for one run: its two slots, written in turn.
#[derive(Debug)]
pub struct RankJournal {
    dir: PathBuf,
    rank: usize,
    seq: u64,
    /// The slots, opened at the first write and kept for the run.
    files: [Option<File>; 2],
}

impl RankJournal {
    /// The journal of `rank` in the run directory `dir` (created by rank 0).
    pub fn new(dir: &Path, rank: usize) -> RankJournal {
        RankJournal {
            dir: dir.to_path_buf(),
            rank,
            seq: 0,
            files: [None, None],
        }
    }

    /// Journal `ids` and the sums of `obs` (one snapshot): one padded write
    /// of the older slot and an `fsync`.
    pub fn write(&mut self, ids: &IdSet, obs: &Observables) -> Result<()> {
        self.seq += 1;
        let slot = self.seq % 2;
        let path = slot_path(&self.dir, self.rank, slot);
        let text = format::encode_record(&Completion::of(self.rank, self.seq, ids, obs), self.seq);
        let file = match &mut self.files[slot as usize] {
            Some(f) => f,
            empty => empty.insert(
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(io(&path))?,
            ),
        };
        let size = file.metadata().map_err(io(&path))?.len();
        let bytes = format::pad(&text, format::padded_len(text.len(), size));
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&bytes))
            .and_then(|()| file.sync_data())
            .map_err(io(&path))
    }
}

/// A rank's side of the completion journal during a run: which real ids
/// it completed, when to write, the numbering of a resumed run's ids, and
/// (on rank 0) the lock of the job's index.
#[derive(Debug)]
pub struct Journal {
    file: RankJournal,
    _job: Option<JobJournal>,
    prior: Prior,
    /// The numbering of the missing ids, when earlier runs completed some.
    map: Option<IdMap>,
    /// Real ids this rank completed in this run.
    done: IdSet,
    /// The real ids handed out last: complete at the next call of `next`.
    out: Option<Range<u64>>,
    /// The rest of a chunk of the balancing, as real ranges, last first.
    pieces: Vec<Range<u64>>,
    interval: f64,
    next_write: f64,
    writes: u64,
    seconds: f64,
}

impl Journal {
    /// The journal of `rank` for a run of `total` realisations, after the
    /// earlier runs' `prior` (rank 0 holds `job`); written every `interval`
    /// seconds.
    pub fn new(
        job: Option<JobJournal>,
        prior: Prior,
        rank: usize,
        total: u64,
        interval: f64,
    ) -> Journal {
        let map = (!prior.done.is_empty()).then(|| IdMap::new(&prior.missing(total)));
        Journal {
            file: RankJournal::new(&prior.dir, rank),
            _job: job,
            prior,
            map,
            done: IdSet::new(),
            out: None,
            pieces: Vec::new(),
            interval,
            next_write: interval,
            writes: 0,
            seconds: 0.0,
        }
    }

    /// The realisations this run balances: those of `0..total` that no
    /// earlier run completed.
    pub fn to_compute(&self, total: u64) -> u64 {
        self.map.as_ref().map_or(total, IdMap::len)
    }

    /// What the earlier runs completed.
    pub fn prior(&self) -> &Prior {
        &self.prior
    }

    /// `next` was called: the ids handed out before are complete.
    #[inline]
    pub fn completed(&mut self) {
        if let Some(r) = self.out.take() {
            self.done.insert(r);
        }
    }

    /// Whether a chunk handed out still has ranges to hand out.
    pub fn has_pieces(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// The next range of real ids of a chunk already handed out, if any.
    #[inline]
    pub fn pending(&mut self) -> Option<Range<u64>> {
        let piece = self.pieces.pop()?;
        self.out = Some(piece.clone());
        Some(piece)
    }

    /// Hand out the chunk `ids` of the balancing: its first range of real ids
    /// (the rest follow through [`Journal::pending`]).
    #[inline]
    pub fn hand_out(&mut self, ids: Range<u64>) -> Range<u64> {
        let real = match &self.map {
            None => ids,
            Some(map) => {
                map.real_rev(ids, &mut self.pieces);
                self.pieces.pop().unwrap_or(0..0)
            }
        };
        self.out = Some(real.clone());
        real
    }

    /// When the next write is due, seconds since the start.
    pub fn due(&self) -> f64 {
        self.next_write
    }

    /// Journal what this rank completed and the sums `obs` of their
    /// observables; the next write is due an interval after `now`.
    pub fn write(&mut self, now: f64, obs: &Observables) -> Result<()> {
        self.next_write = now + self.interval;
        let t = std::time::Instant::now();
        let written = self.file.write(&self.done, obs);
        self.seconds += t.elapsed().as_secs_f64();
        self.writes += 1;
        written
    }

    /// Writes so far and their mean cost, seconds.
    pub fn cost(&self) -> (u64, f64) {
        (self.writes, self.seconds / self.writes.max(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::prior::tests::{obs, set};
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("soslb-resume-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_spoiled_slot_falls_back_to_the_other_and_two_are_an_error() {
        let dir = temp("slots");
        let mut j = RankJournal::new(&dir, 2);
        j.write(&set(&[(0, 5)]), &obs(&[1.0; 5])).unwrap();
        j.write(&set(&[(0, 9)]), &obs(&[1.0; 9])).unwrap();
        j.write(&set(&[(0, 12)]), &obs(&[1.0; 12])).unwrap(); // slot a, seq 3
        let (got, warning) = read_rank(&dir, 2).unwrap();
        let (path, c) = got.unwrap();
        assert_eq!((c.seq, c.ids.len(), warning), (3, 12, None));
        assert_eq!(path, slot_path(&dir, 2, 1));
        // The newest slot torn: the previous one is used, with a warning.
        fs::write(&path, b"// soslb-signal 2 fnv1a64=00 len=3 wseq=3\n(x").unwrap();
        let (got, warning) = read_rank(&dir, 2).unwrap();
        assert_eq!(got.unwrap().1.ids, set(&[(0, 9)]));
        assert!(warning.unwrap().contains(&path.display().to_string()));
        // Both spoiled: an error naming the files.
        fs::write(slot_path(&dir, 2, 0), b"garbage").unwrap();
        let e = read_rank(&dir, 2).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("2.a.ron") && msg.contains("2.b.ron") && msg.contains("rank 2"),
            "{msg}"
        );
        // A rank that never wrote has no completion.
        assert_eq!(read_rank(&dir, 5).unwrap(), (None, None));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn runs_of_a_job_are_listed_locked_and_resumed() {
        let signals = temp("job");
        let (lock, prior) = JobJournal::open(&signals, "exp", false, 10, 2).unwrap();
        assert_eq!((prior.runs, prior.done.len()), (0, 0));
        // A second run while the first holds the lock.
        let e = JobJournal::open(&signals, "exp", true, 10, 2).unwrap_err();
        assert!(matches!(e, Error::Locking { .. }), "{e}");
        RankJournal::new(&prior.dir, 1)
            .write(&set(&[(5, 8)]), &obs(&[2.0; 3]))
            .unwrap();
        drop(lock);
        let e = JobJournal::open(&signals, "exp", false, 10, 2).unwrap_err();
        assert!(e.to_string().contains("resume: true"), "{e}");
        let e = JobJournal::open(&signals, "exp", true, 9, 2).unwrap_err();
        assert!(e.to_string().contains("total 10"), "{e}");
        let (_lock, prior) = JobJournal::open(&signals, "exp", true, 12, 3).unwrap();
        assert_eq!((prior.runs, prior.total, prior.count()), (1, 10, 3));
        assert_eq!(prior.missing(12), set(&[(0, 5), (8, 12)]));
        assert_eq!(prior.dir, signals.join("exp").join("1"));
        fs::remove_dir_all(&signals).unwrap();
    }
}
