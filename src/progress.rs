//! The progress line (DESIGN §12): rank 0 prints to stderr, at most every
//! `progress` seconds (config; 0 turns it off), what the termination waves
//! already told it: realisations done over the total, the job's forecast end
//! as clock time and as time remaining, and the SOS open at the last
//! termination wave.
//! No collective of its own: a line is printed when a wave completes and a
//! line is due.
//!
//! ```text
//! soslb: progress 2480/6000 realisations (41.3%), forecast end 14:02:31 (in 9.8 s), 3 SOS open
//! ```
//!
//! When a job that printed progress ends, one last line says so:
//! `soslb: progress 6000/6000 realisations (100.0%), done after 16.9 s`.
//!
//! Pure: the balancer gives the times and counts, this decides when and what.

use chrono::{DateTime, TimeZone};
use std::fmt::Display;

/// When to print, and whether anything was printed.
#[derive(Clone, Debug)]
pub struct Progress {
    every: f64,
    next: f64,
    printed: bool,
}

/// What a progress line says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    /// Realisations completed by every rank.
    pub done: u64,
    /// Realisations of the run.
    pub total: u64,
    /// Job time now (seconds since the common start).
    pub now: f64,
    /// The job's forecast end in job time (infinite: not known yet).
    pub end: f64,
    /// SOS files open, if known.
    pub open: Option<usize>,
}

impl Progress {
    /// Lines at most every `every` seconds, the first after `every`
    /// seconds; none if `every` is 0.
    pub fn new(every: f64) -> Progress {
        Progress {
            every,
            next: every,
            printed: false,
        }
    }

    /// Is a line due at job time `now`?
    pub fn due(&self, now: f64) -> bool {
        self.every > 0.0 && now >= self.next
    }

    /// The line for `f` if one is due (then the next is due `every` seconds
    /// later); `clock` is the wall clock at `f.now`.
    pub fn line<Tz: TimeZone>(&mut self, f: &Figures, clock: DateTime<Tz>) -> Option<String>
    where
        Tz::Offset: Display,
    {
        if !self.due(f.now) {
            return None;
        }
        self.next = f.now + self.every;
        self.printed = true;
        let mut line = format!("soslb: progress {}", fraction(f.done, f.total));
        let left = f.end - f.now;
        if left.is_finite() && f.done < f.total {
            let left = left.max(0.0);
            let at = clock + chrono::Duration::milliseconds((left * 1e3) as i64);
            line += &format!(
                ", forecast end {} (in {})",
                at.format("%H:%M:%S"),
                duration(left)
            );
        }
        if let Some(n) = f.open {
            line += &format!(", {n} SOS open");
        }
        Some(line + "\n")
    }

    /// The last line, when the job is over after `elapsed` seconds: only if
    /// a progress line was printed (a short job prints none).
    pub fn last(&self, done: u64, total: u64, elapsed: f64) -> Option<String> {
        self.printed.then(|| {
            format!(
                "soslb: progress {}, done after {}\n",
                fraction(done, total),
                duration(elapsed)
            )
        })
    }
}

/// `done/total realisations (p%)`.
fn fraction(done: u64, total: u64) -> String {
    let pct = if total == 0 {
        100.0
    } else {
        100.0 * done as f64 / total as f64
    };
    format!("{done}/{total} realisations ({pct:.1}%)")
}

/// `9.8 s`, `3 min 20 s`, `2 h 05 min`.
fn duration(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn clock() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 14, 0, 0).unwrap()
    }

    fn at(now: f64, done: u64, end: f64, open: Option<usize>) -> Figures {
        Figures {
            done,
            total: 6000,
            now,
            end,
            open,
        }
    }

    #[test]
    fn lines_at_most_every_interval() {
        let mut p = Progress::new(5.0);
        assert_eq!(p.line(&at(4.9, 10, 20.0, None), clock()), None);
        assert_eq!(
            p.line(&at(5.0, 2480, 14.8, Some(3)), clock()).as_deref(),
            Some(
                "soslb: progress 2480/6000 realisations (41.3%), forecast end 14:00:09 (in 9.8 s), 3 SOS open\n"
            )
        );
        assert_eq!(p.line(&at(9.9, 3000, 15.0, None), clock()), None);
        assert!(p.line(&at(10.0, 3000, 15.0, None), clock()).is_some());
        assert_eq!(
            p.last(6000, 6000, 16.93).as_deref(),
            Some("soslb: progress 6000/6000 realisations (100.0%), done after 16.9 s\n")
        );
    }

    #[test]
    fn an_unknown_end_and_long_times() {
        let mut p = Progress::new(1.0);
        assert_eq!(
            p.line(&at(1.0, 0, f64::INFINITY, None), clock()).as_deref(),
            Some("soslb: progress 0/6000 realisations (0.0%)\n")
        );
        let line = p.line(&at(2.0, 1, 2.0 + 7500.0, Some(0)), clock()).unwrap();
        assert!(
            line.ends_with("forecast end 16:05:00 (in 2 h 05 min), 0 SOS open\n"),
            "{line}"
        );
        let line = p.line(&at(3.0, 1, 3.0 + 200.0, None), clock()).unwrap();
        assert!(line.ends_with("(in 3 min 20 s)\n"), "{line}");
    }

    #[test]
    fn off_prints_nothing() {
        let mut p = Progress::new(0.0);
        assert_eq!(p.line(&at(1e9, 1, 2e9, None), clock()), None);
        assert_eq!(p.last(6000, 6000, 1e9), None);
        // A short job: no line during it, none at its end.
        assert_eq!(Progress::new(5.0).last(6000, 6000, 3.0), None);
    }
}
