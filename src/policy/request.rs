//! What a rank asks of its clerk, and what the clerk answers (the state
//! machine's side of [`crate::clerk`]). Pure values.
//!
//! A rank has at most one request out at a time. The ids of the slots a
//! request names stay the rank's to account for until the reply says who
//! has them: a claim won is the claimant's, a claim lost another rank's.

use crate::error::Error;
use crate::plan::HelpPolicy;
use crate::protocol::{Claim, Entry, Level, Slot, Sos};
use crate::topology::IdleMap;
use std::sync::Arc;

/// What a rank asks of its clerk.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Write the open SOS `sos` and list `entry` in the index of `level`'s
    /// board.
    Post {
        /// The entry to list.
        entry: Entry,
        /// The SOS, open.
        sos: Sos,
        /// On which board.
        level: Level,
    },
    /// Claim `front` (the rank's next lease), list the claims of the
    /// rank's slots, then write `sos` less the slots claimed or found taken
    /// (with their claims), and list `entry` again if the index lost it.
    Refresh {
        /// The entry the index should list.
        entry: Entry,
        /// The SOS as the rank would write it now.
        sos: Sos,
        /// The board it is on.
        level: Level,
        /// Front slots to claim first (none while the lease lasts).
        front: Vec<Slot>,
        /// The claim's figures.
        claim: Claim,
    },
    /// Claim `slots` of this rank's own SOS on `level`'s board, in order,
    /// with the claim `claim` (its slot is set for each).
    Claim {
        /// The board.
        level: Level,
        /// The slots, front to back.
        slots: Vec<Slot>,
        /// The claim's figures.
        claim: Claim,
        /// List the claims of this rank's slots first: a slot listed is a
        /// helper's without a claim of its own (the last look, when every
        /// slot left is a helper's; a front claim lost).
        listed: bool,
        /// Claim the slots not found listed, front first, until they hold
        /// this many ids (`u64::MAX`: all of them).
        most: u64,
    },
    /// Close the SOS `seq` and take it out of `level`'s index; its slots
    /// not claimed stay the owner's to claim.
    Withdraw {
        /// The board.
        level: Level,
        /// The post withdrawn.
        seq: u64,
    },
    /// Look for an open SOS to help and claim a share of its slots: on the
    /// host's board first, then on the shared one.
    Help(Search),
}

/// A helper's search for work: the figures its shares are sized with.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// When the rank asked, seconds since the start.
    pub now: f64,
    /// Seconds of own work left before the rank would start on a share
    /// (0: idle). A rank with work left takes only from a near SOS.
    pub busy_for: f64,
    /// Since when the rank has had no work (its grace counts from then).
    pub idle_since: f64,
    /// A watcher saw the index change: read the shared index, not the
    /// host's copy.
    pub woken: bool,
    /// Seconds between two looks at the shared index while idle.
    pub poll: f64,
    /// Seconds before an SOS found with nothing to take is looked at again
    /// (about the owner's next refresh), on the shared board and the host's.
    pub interval: [f64; 2],
    /// The share policy.
    pub policy: HelpPolicy,
    /// The helper's speed.
    pub speed: f64,
    /// Seconds to the job's forecast end.
    pub job_left: f64,
    /// Seconds a steal at distance 0, 1, 2 costs this helper on the
    /// shared board, and one on the host's.
    pub steal_cost: [f64; 3],
    /// See [`Search::steal_cost`].
    pub host_steal: f64,
    /// Seconds its last realisation may run past its mean time.
    pub risk: f64,
    /// Idle and free ranks at the last termination wave.
    pub idle: Arc<IdleMap>,
    /// The helper looks ahead because it is early against the job's
    /// forecast end, not because it runs out of work: it takes only from
    /// lasting SOS of slower owners on other hosts that the ranks nearer
    /// to them cannot close ([`crate::policy::helper::worth_early`]).
    pub early: bool,
    /// Each host's ids left and speed at the last wave, as of `counted_at`.
    pub hosts: Arc<Vec<(u64, f64)>>,
    /// See `hosts`.
    pub counted_at: f64,
    /// When the hosts of this rank's site will have computed what they
    /// own, at the last waves.
    pub site_end: f64,
    /// The job's forecast end, seconds since the start.
    pub job_end: f64,
    /// Search the shared board too, after the host's (false where hosts
    /// trade through MPI: [`crate::transfer::on`]).
    pub shared: bool,
}

/// Slots a search claimed.
#[derive(Debug)]
pub struct Taken {
    /// The owner of the SOS.
    pub owner: usize,
    /// Its board.
    pub level: Level,
    /// The slots.
    pub slots: Vec<Slot>,
    /// When the share was sized to end, seconds since the start (the
    /// slots, whole, may hold a little more or less).
    pub ends: f64,
}

/// What a clerk answers.
#[derive(Debug)]
pub struct Reply {
    /// What came of the request.
    pub outcome: Outcome,
    /// Seconds the request took, when measured (the shell and the
    /// simulator measure).
    pub seconds: Option<f64>,
    /// Storage operations it made on the shared board and on the host's.
    pub ops: [u64; 2],
    /// The farthest distance of the other ranks' SOS read, and how many.
    pub looks: (u8, u32),
    /// Problems the clerk got round (the monitor log and stderr show them).
    pub errors: Vec<String>,
}

/// The outcome of a request.
#[derive(Debug)]
pub enum Outcome {
    /// The SOS is written; `listed`: and in the index.
    Posted {
        /// The index lists it.
        listed: bool,
    },
    /// The SOS file could not be written (the reply's errors say why): no
    /// helper can see the post, its slots are the owner's to claim.
    NotPosted,
    /// The owner's claims: those won, and those lost with the winner's
    /// claim where it could be read.
    Claimed {
        /// Claims won, in order.
        won: Vec<Slot>,
        /// Claims lost.
        lost: Vec<(Slot, Option<Claim>)>,
    },
    /// A refresh: the front claims won and lost, and the other slots found
    /// claimed, with their claims where read.
    Refreshed {
        /// Front claims won.
        won: Vec<Slot>,
        /// Slots found taken: front claims lost, and claims listed.
        taken: Vec<(Slot, Option<Claim>)>,
    },
    /// The SOS is closed and out of the index.
    Withdrawn,
    /// A search for help.
    Helped {
        /// What was claimed, if anything.
        taken: Option<Taken>,
        /// When an idle rank should search again.
        wake: f64,
    },
    /// An error the rank cannot recover from.
    Failed(Error),
}
