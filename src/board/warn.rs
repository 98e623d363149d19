//! Warnings that stay readable: one line per rank and per problem, repeated
//! only with a back-off, each line written to stderr with a single `write`
//! so that the lines of different ranks never interleave.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

/// Write `line` (a newline is added) to stderr with one `write` call.
///
/// Lines up to `PIPE_BUF` (4 KiB) arrive whole even when many processes share
/// the pipe; a failure to write a warning is ignored.
pub fn print_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The first repeat of a problem is printed after this long, then the
/// interval doubles up to [`MAX_INTERVAL`].
pub const FIRST_INTERVAL: Duration = Duration::from_secs(5);

/// The longest interval between two lines about one problem.
pub const MAX_INTERVAL: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Seen {
    /// Not printed again before this.
    next: Instant,
    /// The interval after the next print.
    interval: Duration,
    /// Occurrences not printed since the last line.
    suppressed: u64,
}

/// A rate limiter for one rank's warnings: the first occurrence of a
/// problem is printed at once, repeats only after 5 s, 10 s, 20 s, ... (at
/// most every 10 minutes), with the number of repeats left out.
///
/// Two messages are the same problem when they differ only in their digits
/// (sizes, times, sequence numbers).
#[derive(Debug)]
pub struct Warnings {
    rank: usize,
    seen: HashMap<String, Seen>,
}

impl Warnings {
    /// The warnings of `rank`.
    pub fn new(rank: usize) -> Warnings {
        Warnings {
            rank,
            seen: HashMap::new(),
        }
    }

    /// Print `soslb: warning: rank R: <message>` unless the same problem was
    /// printed too recently; true if printed.
    pub fn warn(&mut self, message: &str) -> bool {
        self.warn_at(message, Instant::now()).is_some_and(|line| {
            print_line(&line);
            true
        })
    }

    /// The line to print for `message` at `now`, if any (the rate limit
    /// without the printing).
    pub fn warn_at(&mut self, message: &str, now: Instant) -> Option<String> {
        let key: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
        let line = |repeats: u64| {
            let mut l = format!("soslb: warning: rank {}: {message}", self.rank);
            if repeats > 0 {
                l.push_str(&format!(" ({repeats} more since the last such warning)"));
            }
            l
        };
        match self.seen.get_mut(&key) {
            None => {
                self.seen.insert(
                    key,
                    Seen {
                        next: now + FIRST_INTERVAL,
                        interval: FIRST_INTERVAL * 2,
                        suppressed: 0,
                    },
                );
                Some(line(0))
            }
            Some(s) if now >= s.next => {
                let repeats = std::mem::take(&mut s.suppressed);
                s.next = now + s.interval;
                s.interval = (s.interval * 2).min(MAX_INTERVAL);
                Some(line(repeats))
            }
            Some(s) => {
                s.suppressed += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_printed_with_a_back_off() {
        let mut w = Warnings::new(3);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let msg = |n: u32| format!("/x/sos/4.ron: No such file or directory (os error {n})");
        let first = w.warn_at(&msg(2), t0).unwrap();
        assert_eq!(
            first,
            "soslb: warning: rank 3: /x/sos/4.ron: No such file or directory (os error 2)"
        );
        // 1000 repeats within the first interval: nothing.
        for k in 0..1000 {
            assert_eq!(w.warn_at(&msg(k % 7), t0 + s(4)), None);
        }
        let again = w.warn_at(&msg(2), t0 + s(5)).unwrap();
        assert!(
            again.ends_with("(1000 more since the last such warning)"),
            "{again}"
        );
        assert_eq!(w.warn_at(&msg(2), t0 + s(14)), None);
        assert!(w.warn_at(&msg(2), t0 + s(15)).is_some());
        assert_eq!(w.warn_at(&msg(2), t0 + s(34)), None);
        assert!(w.warn_at(&msg(2), t0 + s(35)).is_some());
        // Another problem is printed at once.
        assert!(
            w.warn_at("/x/open.ron: Permission denied", t0 + s(35))
                .is_some()
        );
        // The interval stops growing at 10 minutes.
        let mut t = t0 + s(35);
        for _ in 0..20 {
            t += MAX_INTERVAL;
            assert!(w.warn_at(&msg(2), t).is_some());
        }
    }
}
