//! What every part of the balancer shares: the communicator, the clock,
//! the settings, the monitor log and the warnings.

use crate::board::warn::Warnings;
use crate::comm::Comm;
use crate::config::Config;
use crate::monitor::Monitor;
use crate::policy::{Event, Rank};
use std::time::Instant;

/// The balancer's common ground, lent to its parts.
pub(super) struct Context {
    pub(super) comm: Comm,
    pub(super) config: Config,
    /// The common start (after `init`'s last barrier).
    pub(super) start: Instant,
    pub(super) monitor: Monitor,
    /// Warnings on stderr, rate-limited.
    pub(super) warner: Warnings,
    /// Every warning of the run, for [`crate::Balancer::warnings`].
    pub(super) warnings: Vec<String>,
}

impl Context {
    /// Seconds since the common start.
    #[inline]
    pub(super) fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// This rank.
    pub(super) fn me(&self) -> usize {
        self.comm.rank()
    }

    /// Write the state machine's events to the monitor log (flushed every
    /// few seconds).
    #[cold]
    pub(super) fn log_events(&mut self, rank: &mut Rank, now: f64) {
        for e in rank.drain_events() {
            if let Event::Recovered { error } = &e {
                self.warner.warn(error); // one whole line, repeats rate-limited
                self.warnings.push(error.clone());
            }
            self.monitor.event(now, &e);
        }
        self.monitor.flush_lazily();
    }

    /// A warning at `finish`: on stderr (once), in the monitor log and in
    /// the summary's warnings. The result stands.
    pub(super) fn warn_at_finish(&mut self, text: String) {
        self.warner.warn(&text);
        self.monitor
            .line(self.now(), format_args!("warning {text}"));
        self.warnings.push(text);
    }
}
