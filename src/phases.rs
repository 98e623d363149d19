//! Where `init`'s time goes: the seconds of each named phase, for the
//! monitor log's `init-time` line and the summary's `init_s` (issue 47).
//!
//! The phases, in order: `dup` (the communicator's duplicate), `config`
//! (the settings' agreement and the total and settings check), `topology`
//! (host names, measured sites), `run_dir` (rank 0 makes the run directory
//! on the shared directory), `node_dir` (the node-local directory's lock,
//! the sweep), `board` (every rank opens the board and its monitor log),
//! `host_board` (the host's board), `discovery_journal` (the poller or
//! watcher, the completion journal, the batch system's walltime), `barrier`
//! (the common start: the ranks' skew), `clerk` (the clerk's thread). Their
//! figures on a cluster of one machine are in `scripts/BENCHMARKS.md`.

use std::time::Instant;

/// A stopwatch of `init`'s phases.
#[derive(Debug)]
pub struct Phases {
    start: Instant,
    last: Instant,
    laps: Vec<(&'static str, f64)>,
}

impl Phases {
    /// Start timing (at the entry of `init`).
    pub fn start() -> Phases {
        let now = Instant::now();
        Phases {
            start: now,
            last: now,
            laps: Vec::new(),
        }
    }

    /// The phase `name` ends now.
    pub fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.laps.push((name, (now - self.last).as_secs_f64()));
        self.last = now;
    }

    /// Seconds since the start.
    pub fn total(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// `name=seconds ...` of the phases so far (to 0.1 ms).
    pub fn fields(&self) -> String {
        let laps: Vec<String> = (self.laps.iter())
            .map(|(n, s)| format!("{n}={s:.4}"))
            .collect();
        laps.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_up_to_the_total() {
        let mut p = Phases::start();
        std::thread::sleep(std::time::Duration::from_millis(5));
        p.lap("a");
        p.lap("b");
        let f = p.fields();
        let (a, b) = f.split_once(' ').expect("two laps");
        let seconds = |lap: &str, name: &str| -> f64 {
            let v = lap.strip_prefix(name).and_then(|v| v.strip_prefix('='));
            v.and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{f}"))
        };
        assert!(seconds(a, "a") >= 0.005 && seconds(b, "b") >= 0.0, "{f}");
        let sum: f64 = p.laps.iter().map(|l| l.1).sum();
        assert!(sum <= p.total(), "{sum} {}", p.total());
    }
}
