//! A run's directory on the shared storage, and a host's board on node-local
//! storage: where each file lives, their creation, and their end (DESIGN §6).
//! The files' reads and writes are [`super::file`]'s.
//!
//! ```text
//! <dir>/
//!   job.ron                   JobInfo (rank 0, created once)
//!   open.ron                  Index: rewritten aside, renamed over
//!   sos/<rank>.ron            Sos: its rank's alone, rewritten aside, renamed over
//!   aid/<owner>/<seq>.<slot>  Claim: created once, exclusively, never rewritten
//!   log/                      monitor logs
//! ```
//!
//! `<job_id>.<n>`: `n` counts the inits of the process; a run directory
//! that exists already (a requeued batch job, a reused `job_id`) is never
//! read, the next free `<job_id>.<n>.<k>` is used. `job.ron` holds
//! [`JobInfo`] (total, ranks, start, config digest); an SOS the owner's
//! figures and slots; a claim the owner, the slot, the claimant, the time
//! and its speed ([`crate::protocol`]).
//!
//! At a clean finalize (no error, no `keep`) each rank removes its SOS file
//! and the claims it won ([`remove_own`]), and rank 0 the rest, so that no
//! rank makes thousands of removals at the end of a large job: only `log/`
//! stays (nothing with `log: false`). After a failure the whole run
//! directory stays, for a post-mortem.

use super::format;
use crate::error::{Error, Result};
use crate::protocol::{Index, Slot};
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What rank 0 records in `job.ron`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job's id (the name of the job directory).
    pub job_id: String,
    /// Number of realisations.
    pub total: u64,
    /// Number of ranks.
    pub ranks: usize,
    /// When the job started, RFC 3339.
    pub start: String,
    /// Digest of the configuration all ranks use.
    pub config_digest: u64,
}

pub(super) fn job_path(dir: &Path) -> PathBuf {
    dir.join("job.ron")
}

pub(super) fn index_path(dir: &Path) -> PathBuf {
    dir.join("open.ron")
}

pub(super) fn sos_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join("sos").join(format!("{rank}.ron"))
}

pub(super) fn claim_path(dir: &Path, owner: usize, slot: &Slot) -> PathBuf {
    dir.join("aid").join(slot.claim_name(owner))
}

/// Create `path` (it must not exist) holding `body`.
fn create_new<T: Serialize>(path: &Path, body: &T) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(format::encode(body).as_bytes()))
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Error::StaleJob {
                path: path.to_owned(),
                reason: "already exists: a file of an earlier job, or a rank started twice; \
                         remove the job directory or set another job_id"
                    .into(),
            },
            _ => Error::io(path, e),
        })
}

/// Create the job directory and its files: called by rank 0 only, before
/// the other ranks open the board. `job_dir` itself must not exist: a
/// directory already there belongs to an earlier job or a reused job id,
/// and is an [`Error::StaleJob`].
pub fn create_job(job_dir: &Path, job: &JobInfo) -> Result<()> {
    if let Some(parent) = job_dir.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    if let Err(e) = fs::create_dir(job_dir) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(Error::io(job_dir, e));
        }
        let found = match format::read::<JobInfo>(&job_path(job_dir)) {
            Ok(Some(j)) => format!(
                "its job.ron is of job `{}` ({} ranks, {} realisations, started {})",
                j.job_id, j.ranks, j.total, j.start
            ),
            _ => "it has no readable job.ron".into(),
        };
        return Err(Error::StaleJob {
            path: job_dir.to_owned(),
            reason: format!(
                "the job directory already exists ({found}): files of an earlier job or a \
                 reused job id; remove it or set another job_id"
            ),
        });
    }
    for sub in ["sos", "aid", "log"] {
        let dir = job_dir.join(sub);
        fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    create_new(&job_path(job_dir), job)?;
    create_new(&index_path(job_dir), &Index::default())
}

/// Create the board of one host in `dir`, node-local and readable by this
/// user only (called by one rank of the host before the host's ranks open
/// it). A `dir` already there is an [`Error::StaleJob`].
pub fn create_host_board(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| Error::io(parent, e))?;
    }
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Error::StaleJob {
                path: dir.to_owned(),
                reason: "the host's board already exists: a rank started twice?".into(),
            },
            _ => Error::io(dir, e),
        })?;
    for sub in ["sos", "aid"] {
        let d = dir.join(sub);
        fs::create_dir(&d).map_err(|e| Error::io(&d, e))?;
    }
    create_new(&index_path(dir), &Index::default())
}

/// Remove the signal files of the run in `job_dir` that `rank` made: its SOS
/// file and the claims it won (`claims`, as [`Slot::claim_name`]s), once no
/// rank reads the board any more. Each rank removes its own, so that a job
/// of thousands of ranks does not wait for one rank's removals. A file
/// already gone is no error.
pub fn remove_own(job_dir: &Path, rank: usize, claims: &[String]) -> Result<()> {
    let aid = job_dir.join("aid");
    let own = std::iter::once(sos_path(job_dir, rank));
    for path in own.chain(claims.iter().map(|c| aid.join(c))) {
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
            _ => {}
        }
    }
    Ok(())
}

/// `host` as a file name: ASCII letters, digits, `-` and `.` kept, every
/// other character `_`.
pub fn file_name_of(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
