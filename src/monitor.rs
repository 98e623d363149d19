//! Monitor logs: one file per host and rank, `log/<host>.<rank>.log`, as in
//! the paper. Each line is an RFC 3339 timestamp, the job time `t` (seconds
//! since the common start, the clock every record of the board uses), and
//! one event: chunk completions with speed and forecast, the plan, every SOS
//! posted, refreshed or withdrawn, every AID given or received. A run can be
//! reconstructed from them: who helped whom, how many ids, when.
//!
//! Lines are buffered and written when the buffer is full, at most every
//! [`flush_every`] seconds otherwise (2 s, longer in jobs of more than 1,000
//! ranks), and at once for warnings, failures and at finalize:
//! nothing is written on the fast path of `next`, and the ranks of a job
//! together write their logs at most [`LOG_WRITES`] times a second. A log's
//! file is created at its first write, not at `init`.
//!
//! The format, which `soslb report` ([`crate::report`]) reads back:
//!
//! ```text
//! <RFC 3339 stamp> rank=<r> t=<job s> <event> <key>=<value> ...
//! ```
//!
//! with the events `init` (`ranks`, `total`, `host`, `site`, `mode`, ...),
//! `plan` (`speed`, `horizon`, `quota_len`, `quota`), `progress` (`done`,
//! `speed`, `remaining`, `forecast`, `ids`: the ids finished since the
//! previous line; the ids left are logged when the rank runs out of work and before the `verdict`, so that the
//! `progress` lines of a rank list every id it computed), `sos-posted`,
//! `sos-withdrawn`, `sos-closed`, `aid-received` (`helper`, `ids_len`,
//! `ids`: a helper's claim of a slot), `aid-given` (`owner`, `ids_len`,
//! `ids`: this rank's claims of another's slots), `transfer-sent` (`to`,
//! `ids_len`, `ids`) and `transfer-received` (`from`, `ids_len`, `ids`) of
//! host transfers ([`crate::transfer`]), `verdict` (`computed`),
//! `finalize`, and free-text `warning` and `error` lines. Id sets are written
//! `a..b,c..d` (half-open ranges) or `-` when empty. A line is written whole
//! or, if the job is killed mid-write, cut at its end: readers skip a last
//! line without its newline.
//!
//! An `aid-received` line says `helper=?` when the owner did not read that
//! claim's body (it reads one of its helpers' claims per refresh): the
//! helper's own `aid-given` line names it. In jobs of more than 1,000 ranks
//! the ranks' first writes are spread over their interval, so that the
//! shared storage sees no burst of creations at the start; a job killed
//! without warning loses at most that interval of progress lines.

use crate::error::{Error, Result};
use crate::policy::Event;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A rank's monitor log.
#[derive(Debug)]
pub struct Monitor {
    /// Lines not written yet; `None` when disabled, or after a failure.
    lines: Option<Vec<u8>>,
    /// The file, created at the first write.
    file: Option<File>,
    path: PathBuf,
    rank: usize,
    writes: u64,
    flushed_at: Instant,
    every: f64,
}

/// Seconds between two writes of a rank's buffered lines by
/// [`Monitor::flush_lazily`], at least.
pub const FLUSH_EVERY: f64 = 2.0;

/// Writes of the monitor logs per second that the ranks of a job make
/// together, at most (besides the ones at once: warnings, the verdict, the
/// end): at 10,000 ranks every 2 s was 5,000 writes a second, more than
/// the signal files make (DESIGN §6: the shared server's load).
pub const LOG_WRITES: f64 = 500.0;

/// Seconds between two lazy writes of each rank's log in a job of `ranks`
/// ranks: [`FLUSH_EVERY`], or longer so that the job writes at most
/// [`LOG_WRITES`] times a second (20 s at 10,000 ranks).
pub fn flush_every(ranks: usize) -> f64 {
    FLUSH_EVERY.max(ranks as f64 / LOG_WRITES)
}

/// Seconds after its start that rank `rank` of `ranks` writes its log
/// lazily for the first time: the ranks' writes spread evenly over
/// [`flush_every`].
pub fn first_write(rank: usize, ranks: usize) -> f64 {
    flush_every(ranks) * (rank + 1) as f64 / ranks.max(1) as f64
}

/// Bytes of buffered lines from which they are written at once.
const BUFFER: usize = 64 * 1024;

impl Monitor {
    /// The log of rank `rank` of a job of `ranks` at `path`, in a
    /// directory that must exist. Its file (which must not exist yet) is
    /// created at the first write: the lines are written lazily every
    /// [`flush_every`] seconds, the ranks' first writes spread over that
    /// interval ([`first_write`]), so that a job's ranks neither create
    /// their logs nor write them all in the same second (10,000 file
    /// creations on a shared storage at the start of a job of 10,000
    /// ranks).
    pub fn create(path: &Path, rank: usize, ranks: usize) -> Result<Monitor> {
        let dir = path.parent().unwrap_or(Path::new("."));
        if !std::fs::metadata(dir)
            .map_err(|e| Error::io(dir, e))?
            .is_dir()
        {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        Ok(Monitor {
            lines: Some(Vec::new()),
            file: None,
            path: path.to_path_buf(),
            rank,
            writes: 0,
            flushed_at: Instant::now()
                .checked_sub(Duration::from_secs_f64(
                    flush_every(ranks) - first_write(rank, ranks),
                ))
                .unwrap_or_else(Instant::now),
            every: flush_every(ranks),
        })
    }

    /// A monitor that writes nothing.
    pub fn disabled(rank: usize) -> Monitor {
        Monitor {
            lines: None,
            file: None,
            path: PathBuf::new(),
            rank,
            writes: 0,
            flushed_at: Instant::now(),
            every: FLUSH_EVERY,
        }
    }

    /// Append one line: timestamp, rank, job time, then `text`.
    pub fn line(&mut self, t: f64, text: std::fmt::Arguments<'_>) {
        let Some(lines) = &mut self.lines else { return };
        let stamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        // (Writing to a vector cannot fail.)
        let _ = writeln!(lines, "{stamp} rank={} t={t:.6} {text}", self.rank);
        if lines.len() >= BUFFER {
            self.flush();
        }
    }

    /// Append the line of an event.
    pub fn event(&mut self, t: f64, event: &Event) {
        match event {
            Event::Progress {
                ids,
                done,
                speed,
                remaining,
                forecast,
            } => self.line(
                t,
                format_args!(
                    "progress done={done} speed={speed:.4} remaining={remaining} forecast={forecast:.4} ids={ids}"
                ),
            ),
            Event::Plan { quota, speed, horizon } => self.line(
                t,
                format_args!("plan speed={speed:.4} horizon={horizon:.4} quota_len={} quota={quota}", quota.len()),
            ),
            Event::SosPosted { seq, tail, forecast } => self.line(
                t,
                format_args!("sos-posted seq={seq} forecast={forecast:.4} tail_len={} tail={tail}", tail.len()),
            ),
            Event::SosWithdrawn {
                seq,
                reclaimed,
                forecast,
            } => self.line(
                t,
                format_args!(
                    "sos-withdrawn seq={seq} forecast={forecast:.4} reclaimed_len={} reclaimed={reclaimed}",
                    reclaimed.len()
                ),
            ),
            Event::SosClosed { seq } => self.line(t, format_args!("sos-closed seq={seq}")),
            Event::AidReceived { seq, aid } => self.line(
                t,
                format_args!(
                    "aid-received seq={seq} helper={} at={:.4} helper_speed={:.4} ids_len={} ids={}",
                    aid.helper.map_or("?".to_string(), |h| h.to_string()),
                    aid.at,
                    aid.speed,
                    aid.ids.len(),
                    aid.ids
                ),
            ),
            Event::AidGiven { owner, seq, ids } => self.line(
                t,
                format_args!("aid-given owner={owner} seq={seq} ids_len={} ids={ids}", ids.len()),
            ),
            Event::Sent { to, ids } => self.line(
                t,
                format_args!("transfer-sent to={to} ids_len={} ids={ids}", ids.len()),
            ),
            Event::Received { from, ids } => self.line(
                t,
                format_args!("transfer-received from={from} ids_len={} ids={ids}", ids.len()),
            ),
            Event::Recovered { error } => self.line(t, format_args!("error {error:?}")),
        }
    }

    /// Write the buffered lines if the last write is [`flush_every`] seconds
    /// old (a full buffer is written anyway).
    pub fn flush_lazily(&mut self) {
        if self.flushed_at.elapsed().as_secs_f64() >= self.every {
            self.flush();
        }
    }

    /// Write the buffered lines to the file.
    pub fn flush(&mut self) {
        let Some(lines) = self.lines.as_mut().filter(|l| !l.is_empty()) else {
            return;
        };
        let written = match &mut self.file {
            Some(file) => file.write_all(lines),
            None => {
                // The creation is one operation more.
                self.writes += 1;
                File::options()
                    .write(true)
                    .create_new(true)
                    .open(&self.path)
                    .and_then(|mut file| file.write_all(lines).map(|()| file))
                    .map(|file| self.file = Some(file))
            }
        };
        lines.clear();
        self.writes += 1;
        self.flushed_at = Instant::now();
        if let Err(e) = written {
            self.fail(e);
        }
    }

    /// Operations on the file so far: its creation and its writes.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// A log that cannot be written is dropped with one warning: it must
    /// not stop the computation.
    fn fail(&mut self, e: std::io::Error) {
        crate::error::warn(
            self.rank,
            &format!("monitor log {}: {e}; logging stops", self.path.display()),
        );
        self.lines = None;
        self.file = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_jobs_write_their_logs_less_often() {
        assert_eq!(flush_every(16), FLUSH_EVERY);
        assert_eq!(flush_every(1000), FLUSH_EVERY);
        assert_eq!(flush_every(10_000), 20.0);
        // A job's lazy writes per second, at most.
        for ranks in [16, 1000, 4096, 10_000, 100_000] {
            assert!(ranks as f64 / flush_every(ranks) <= LOG_WRITES);
        }
        // The first writes spread over the interval: rank 0 early, the
        // last rank after a whole interval.
        assert_eq!(first_write(0, 4), 0.5);
        assert_eq!(first_write(3, 4), 2.0);
        assert_eq!(first_write(9_999, 10_000), 20.0);
    }

    #[test]
    fn lines_are_written_every_few_seconds_not_at_every_check() {
        let dir = std::env::temp_dir().join(format!("soslb-monitor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.0.log");
        let _ = std::fs::remove_file(&path);
        let mut m = Monitor::create(&path, 15, 16).unwrap();
        m.line(0.5, format_args!("progress done=1"));
        m.flush_lazily();
        // Not even created yet.
        assert!(!path.exists());
        assert_eq!(m.writes(), 0);
        m.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.ends_with("rank=15 t=0.500000 progress done=1\n"),
            "{text}"
        );
        // Created and written.
        assert_eq!(m.writes(), 2);
        // A flush long enough ago lets the next lazy one write.
        m.flushed_at -= std::time::Duration::from_secs_f64(FLUSH_EVERY);
        m.line(1.0, format_args!("progress done=2"));
        m.flush_lazily();
        assert_eq!(m.writes(), 3);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        // A log whose file is there already (a rank started twice) stops
        // with a warning at its first write; the computation goes on.
        let mut twice = Monitor::create(&path, 15, 16).unwrap();
        twice.line(2.0, format_args!("progress done=3"));
        twice.flush();
        twice.line(2.5, format_args!("progress done=4"));
        twice.flush();
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        // A directory that is not there is an error at once.
        assert!(Monitor::create(&dir.join("none").join("h.1.log"), 1, 16).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
