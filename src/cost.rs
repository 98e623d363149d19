//! The cost model: every threshold of the policy follows from a few
//! measured quantities and the constants below (DESIGN §10).
//!
//! Measured, per rank:
//!
//! - `op[level]`: seconds one storage operation takes on the shared board
//!   and on the host's (node-local) board, timed by the clerk;
//! - the rank's speed `v` and the spread `σ` of one realisation's time
//!   ([`crate::speed`]);
//! - the job's forecast end, and each host's ids left and speed, from the
//!   termination waves.
//!
//! Configured: the check interval `Δ`, the paper's lateness `δτ`, the poll
//! interval.
//!
//! What the protocol's steps cost, in operations ([`OPS`], [`crate::board`]):
//! a post writes the SOS aside and renames it while it reads, writes aside,
//! renames and reads back the index; a refresh looks at the back slot's
//! claim and writes the SOS aside and renames it; a claim is one exclusive
//! create (an owner's claims of its own slots go together and take one
//! claim's time; after a claim that lost them all, the owner lists its
//! claims first, one operation, as a helper does after a lost claim); a
//! steal reads the index and an SOS and claims. The rank never waits for
//! these: its clerk makes them while it computes.
//!
//! From these:
//!
//! - **help delay** of a board: a post's operations, half a poll and a
//!   steal: the soonest help can start after a rank finds it is late (all
//!   six of the post's, though its SOS is in flight with the index: the
//!   storage serves them all, and help at the threshold saves nothing);
//! - **post threshold**: lateness worth an SOS, `max(δτ, help delay)`: help
//!   that comes after the owner would have finished saves nothing;
//! - **slow storage**: a board whose help delay exceeds a check interval;
//!   there lateness is judged at the rank's steadier speed, over
//!   [`STEADY_WINDOWS`] speed windows (a fluctuation shorter than the help
//!   delay is over before help comes);
//! - **own period**: seconds of work per lease and between two refreshes,
//!   `max(Δ, refresh)`, doubled after refreshes that found no claim up to
//!   [`QUIET_DOUBLINGS`] times: the clerk keeps up with its owner, and
//!   owners nobody helps leave the storage alone;
//! - **lease**: an own period of work, no more than the rank computes by
//!   the job's forecast end less [`RISK`] spreads, no less than two claims'
//!   worth (the next claim comes while it computes); a late rank whose
//!   lease exceeds that by a post threshold's worth of work posts the
//!   excess again;
//! - **slots**: a post cuts its tail into slots of one lease, one lease,
//!   then growing by [`GROWTH`] up to the share a helper takes (split
//!   among the helpers the SOS may expect, no smaller than a helper's own
//!   period of work), in slots of that share at the back, where helpers
//!   take first; a give-back on a slow board first claims back the smaller
//!   pending slots (earlier posts' fronts, a claim each for a share among
//!   them) and cuts them anew with its ids;
//! - **look ahead**: a rank asks for its next share one steal before its
//!   work runs out; early looks (sites, DESIGN §7) are spaced by the job's
//!   share of [`EARLY_LOOKS`];
//! - **search**: a search reads SOS that show nothing to take for at most
//!   a steal's worth of operations after the index ([`search_reads`]), and
//!   a request of the owner's reads as many helpers' claims as a refresh
//!   looks at ([`claim_reads`]);
//! - **share**: what a helper computes by the common end of owner and
//!   helpers, capped by the job's forecast end ([`crate::plan::share`]);
//!   its slots are chosen in time (ids past the share delay the helper,
//!   ids short of it the faster of the owner and a helper like it), and a
//!   slot is claimed only if its work at the owner's speed is worth a
//!   claim; on a host's board an owner alone with more than [`LEAST_IDS`]
//!   ids' worth of the helper's time beyond a steal always gets one id;
//! - **giving up**: a write the storage refuses [`TRIES`] times in a row is
//!   given up (an index change other owners keep undoing; posts: the rank
//!   stops posting), and a read of a signal file replaced while open
//!   (`ESTALE` on NFSv3) or of a size its header disagrees with (a size
//!   cached for the file the path held before) is tried again as often;
//! - **host transfers** (large jobs, [`crate::transfer`]): a plan every
//!   [`PLAN_PERIOD`] seconds of waves, and at every wave from one period
//!   before the job's forecast end; a host gives when it is later than
//!   that end by more than [`PLAN_THRESHOLD`] seconds at its speed, and
//!   one plan moves [`PLAN_FRACTION`] of its excess.

use crate::protocol::Level;

/// Storage operations of the protocol's steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ops {
    /// A post: the SOS written aside and renamed, the index read, written
    /// aside, renamed and read back.
    pub post: f64,
    /// A refresh: a look at the back slot's claim and the SOS written aside
    /// and renamed (the index is read only to heal it).
    pub refresh: f64,
    /// A steal: the index, the SOS, the claim.
    pub steal: f64,
}

/// The operations of each step ([`Ops`]).
pub const OPS: Ops = Ops {
    post: 6.0,
    refresh: 3.0,
    steal: 3.0,
};

/// SOS read in one search that show nothing to take, at most: a steal's
/// operations after the index.
pub fn search_reads() -> usize {
    OPS.steal as usize - 1
}

/// Helpers' claims of a rank's slots one request reads to tell who the
/// helpers are (the rest are known taken by their names alone): a
/// refresh's operations besides its write of the SOS.
pub fn claim_reads() -> usize {
    OPS.refresh as usize - 2
}

/// Standard deviations of a rank's realisation time that its lease and its
/// shares keep clear of the job's forecast end, so that the last
/// realisations go to the ranks that finish them soonest.
pub const RISK: f64 = 2.0;

/// The ratio of two neighbouring slots' sizes: each slot as large as all
/// those in front of it, so that a share of any size is made of few claims.
pub const GROWTH: u64 = 2;

/// Refreshes in a row that find no new claim double the own period, up to
/// this many times: owners that nobody helps leave the storage alone.
pub const QUIET_DOUBLINGS: u32 = 2;

/// The steady speed spans this many speed windows.
pub const STEADY_WINDOWS: f64 = 4.0;

/// Seconds of storage time the early looks of the whole job may take per
/// second: ranks looking ahead while early (sites, DESIGN §7) space their
/// looks so that the job's looks stay within it.
pub const EARLY_LOOKS: f64 = 64.0;

/// Ids' worth of a helper's time beyond a steal that an owner alone on a
/// host's board must have left to get one id from an idle helper (see
/// [`crate::plan::ShareInput::least_one`]).
pub const LEAST_IDS: f64 = 4.0;

/// Writes of one kind the storage refuses in a row before they are given
/// up, and reads of a signal file replaced while open (`ESTALE`) or of a
/// size its header disagrees with, in a row.
pub const TRIES: u32 = 4;

/// Seconds of waves between two plans of host transfers, at least: a wave's
/// figures show the moves of the plan before only a wave or two later.
pub const PLAN_PERIOD: f64 = 1.0;

/// Seconds a host must be late, at its speed, to give ids to other hosts.
pub const PLAN_THRESHOLD: f64 = 0.1;

/// The part of a host's excess (or room) that one plan moves: the speeds
/// are estimates, and the next plan corrects the rest.
pub const PLAN_FRACTION: f64 = 0.75;

/// The measured and configured quantities, and what follows from them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Seconds per storage operation on the shared board and the host's, as
    /// the clerk timed them.
    pub op: [f64; 2],
    /// The check interval `Δ`.
    pub check_interval: f64,
    /// The paper's `δτ`.
    pub late_threshold: f64,
    /// Seconds between two polls of the index.
    pub poll: f64,
}

impl Costs {
    /// Seconds per operation on `level`'s board.
    pub fn op(&self, level: Level) -> f64 {
        self.op[slot(level)]
    }

    /// Seconds from a post to the start of help on `level`'s board.
    pub fn help_delay(&self, level: Level) -> f64 {
        (OPS.post + OPS.steal) * self.op(level) + self.poll / 2.0
    }

    /// Lateness worth a post on `level`'s board.
    pub fn post_threshold(&self, level: Level) -> f64 {
        self.late_threshold.max(self.help_delay(level))
    }

    /// Whether help on `level`'s board comes later than a check interval.
    pub fn slow(&self, level: Level) -> bool {
        self.help_delay(level) > self.check_interval
    }

    /// Seconds of work per lease and between two refreshes of an SOS on
    /// `level`'s board, `quiet` refreshes in a row having found nothing.
    pub fn own_period(&self, level: Level, quiet: u32) -> f64 {
        let period = self.check_interval.max(OPS.refresh * self.op(level));
        period * f64::from(1u32 << quiet.min(QUIET_DOUBLINGS))
    }

    /// Seconds a claim on `level`'s board takes.
    pub fn claim(&self, level: Level) -> f64 {
        self.op(level)
    }

    /// Seconds a steal on `level`'s board takes.
    pub fn steal(&self, level: Level) -> f64 {
        OPS.steal * self.op(level)
    }
}

/// The place of `level` in pairs of figures by board: the shared board
/// first, then the host's.
pub fn slot(level: Level) -> usize {
    match level {
        Level::Shared => 0,
        Level::Host => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_storage_raises_the_post_threshold_and_the_own_period() {
        let fast = Costs {
            op: [0.0005, 0.00001],
            check_interval: 0.25,
            late_threshold: 0.25,
            poll: 0.1,
        };
        assert_eq!(fast.post_threshold(Level::Shared), 0.25);
        assert!(!fast.slow(Level::Shared));
        assert_eq!(fast.own_period(Level::Shared, 0), 0.25);
        assert_eq!(fast.own_period(Level::Shared, 5), 1.0);
        let slow = Costs {
            op: [0.2, 0.00001],
            ..fast
        };
        // 9 operations and half a poll.
        assert!((slow.post_threshold(Level::Shared) - 1.85).abs() < 1e-9);
        assert!(slow.slow(Level::Shared) && !slow.slow(Level::Host));
        assert!((slow.own_period(Level::Shared, 0) - 0.6).abs() < 1e-9);
        assert_eq!(slow.own_period(Level::Host, 0), 0.25);
    }
}
