//! The policy's settings ([`crate::policy`]), taken from the config once at
//! init: pure values, below the policy and the host transfers that read them.
//! The policy re-exports them (`policy::Params`, `policy::params::Params`).
//!
//! ```
//! use soslb::{Config, params::Params, policy};
//! let p: policy::params::Params = Params::from(&Config::default());
//! assert_eq!(p, policy::Params::from(&Config::default()));
//! ```

use crate::config::{Config, Mode};
use crate::plan::HelpPolicy;

/// The numbers of the config the state machine uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Static, Warmup or Full.
    pub mode: Mode,
    /// Warm-up window `t_l`, seconds.
    pub warmup: f64,
    /// Speed window, seconds of computing.
    pub speed_window: f64,
    /// Seconds between checks.
    pub check_interval: f64,
    /// `δτ`, seconds.
    pub late_threshold: f64,
    /// Target seconds per chunk.
    pub chunk_time: f64,
    /// Share policy of helpers.
    pub help_policy: HelpPolicy,
    /// Seconds a far helper waits per unit of distance.
    pub grace: f64,
    /// Seconds between two looks at the open index while idle.
    pub poll_interval: f64,
    /// Seconds between two looks at the open index while idle, at most:
    /// polls that find nothing back off up to this.
    pub poll_max: f64,
    /// There is a board per host: an SOS goes on the shared board only when
    /// the owner's host as a whole will be late.
    pub host_board: bool,
    /// Ranks from which on a job is large ([`crate::config::LARGE_JOB`]).
    pub large_job: usize,
}

impl From<&Config> for Params {
    fn from(c: &Config) -> Self {
        Params {
            mode: c.mode,
            warmup: c.warmup_seconds(),
            speed_window: c.speed_window,
            check_interval: c.check_interval,
            late_threshold: c.late_threshold,
            chunk_time: c.chunk_time,
            help_policy: c.help_policy,
            grace: c.grace,
            poll_interval: c.poll_interval,
            poll_max: c.poll_max,
            host_board: c.host_board,
            large_job: c.large_job,
        }
    }
}
