//! What the state machine tells its shell: the next step, the events the
//! monitor logs, and the rank's report at the end.

use super::request::Request;
use crate::ids::IdSet;
use crate::plan::WarmupReport;
use crate::protocol::Claim;
use std::ops::Range;

/// What the rank does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Compute these ids, then call [`Rank::next`](super::Rank::next) again.
    Compute(Range<u64>),
    /// The warm-up is over: gather every rank's report (one collective) and
    /// pass them to [`Rank::apply_plan`](super::Rank::apply_plan). Meanwhile the rank computes its
    /// reserve: call [`Rank::next`](super::Rank::next) again.
    Exchange(WarmupReport),
    /// The reserve is done and the plan has not come yet: wait for the
    /// exchange to complete, apply the plan, then call [`Rank::next`](super::Rank::next) again.
    AwaitPlan,
    /// No work now. Wait until `until` (seconds since the start) or until the
    /// open index changes, then call [`Rank::next`](super::Rank::next) again; a rank that stays
    /// idle is ready to terminate.
    Idle {
        /// When to look again (infinite: nothing will come but termination).
        until: f64,
    },
    /// Hand this request to the rank's clerk ([`crate::clerk`]), then call
    /// [`Rank::next`](super::Rank::next) again; give the clerk's reply to [`Rank::reply`](super::Rank::reply) when
    /// it comes.
    Ask(Box<Request>),
    /// No work until the reply to the request out comes: wait for it, give
    /// it to [`Rank::reply`](super::Rank::reply), then call [`Rank::next`](super::Rank::next) again.
    AwaitReply,
    /// Send these ids to rank `to` (a host transfer, [`crate::transfer`]),
    /// which gives them to its [`Rank::receive`](super::Rank::receive); then call [`Rank::next`](super::Rank::next)
    /// again. Until they arrive they are the message's.
    Send {
        /// The receiving rank.
        to: usize,
        /// The ids.
        ids: IdSet,
    },
}

/// Help a rank received: `helper` claimed `ids` at `at`, at speed `speed`.
#[derive(Clone, Debug, PartialEq)]
pub struct Aid {
    /// The helper's rank (`None`: its claim was not read).
    pub helper: Option<usize>,
    /// The ids it claimed.
    pub ids: IdSet,
    /// When, seconds since the start (NaN: not read).
    pub at: f64,
    /// Its speed then (NaN: not read).
    pub speed: f64,
}

impl From<&Claim> for Aid {
    fn from(c: &Claim) -> Aid {
        Aid {
            helper: Some(c.by),
            ids: IdSet::from_range(c.slot.ids()),
            at: c.at,
            speed: c.speed,
        }
    }
}

/// Something worth a line in the monitor log.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Realisations finished since the last progress line.
    Progress {
        /// The ids finished.
        ids: IdSet,
        /// All realisations finished by this rank.
        done: u64,
        /// Current speed.
        speed: f64,
        /// Ids still owned.
        remaining: u64,
        /// Forecast finishing time.
        forecast: f64,
    },
    /// Algorithm 1's plan.
    Plan {
        /// The new quota.
        quota: IdSet,
        /// Speed measured in the warm-up.
        speed: f64,
        /// The horizon `T_e`.
        horizon: f64,
    },
    /// This rank posted an SOS.
    SosPosted {
        /// Sequence number.
        seq: u64,
        /// The ids offered in its slots.
        tail: IdSet,
        /// The forecast that made it late.
        forecast: f64,
    },
    /// This rank withdrew its SOS: its slots not claimed stay its own.
    SosWithdrawn {
        /// Sequence number.
        seq: u64,
        /// The ids of its slots not claimed.
        reclaimed: IdSet,
        /// The forecast that is no longer late.
        forecast: f64,
    },
    /// This rank's SOS closed: every slot claimed.
    SosClosed {
        /// Sequence number.
        seq: u64,
    },
    /// A helper claimed a slot of this rank's SOS.
    AidReceived {
        /// Sequence number of the post that cut the slot.
        seq: u64,
        /// The help.
        aid: Aid,
    },
    /// This rank claimed slots of another's SOS.
    AidGiven {
        /// The owner of the SOS.
        owner: usize,
        /// The sequence number of the post of the first slot.
        seq: u64,
        /// The ids claimed.
        ids: IdSet,
    },
    /// This rank sent ids to another host's rank (a host transfer).
    Sent {
        /// The receiving rank.
        to: usize,
        /// The ids.
        ids: IdSet,
    },
    /// This rank received ids from another host's rank (a host transfer).
    Received {
        /// The sending rank.
        from: usize,
        /// The ids.
        ids: IdSet,
    },
    /// A signal-file problem the rank got round.
    Recovered {
        /// What went wrong, with the path.
        error: String,
    },
}

/// A rank's figures, for the summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Realisations computed.
    pub computed: u64,
    /// Seconds spent computing.
    pub busy: f64,
    /// Speed at the end of the warm-up.
    pub warmup_speed: f64,
    /// The ids Algorithm 1 counted on: the quota it gave, and the reserve
    /// it counted as left (what the rank kept for the warm-up exchange).
    pub planned: u64,
    /// Horizon `T_e`, seconds since the start.
    pub horizon: f64,
    /// Ids this rank claimed from others' SOS, or received in host transfers.
    pub taken: u64,
    /// Ids others claimed from this rank's SOS, or it sent in host transfers.
    pub given: u64,
    /// Ids that moved between ranks at each distance (same host, same
    /// site, elsewhere): those this rank took by steals, and those it sent
    /// by host transfers.
    pub given_to: [u64; 3],
    /// SOS posted.
    pub sos_posted: u64,
    /// Signal-file problems got round.
    pub errors: u64,
    /// Searches that took ids from the shared board, and the storage
    /// operations they made there.
    pub steals: (u64, u64),
    /// Searches that took ids from the host's (node-local) board.
    pub host_steals: u64,
}

impl RankReport {
    /// The realisations helpers took from the SOS of `reports`' ranks, by
    /// the helper's distance (same host, same site, elsewhere): the
    /// `help_d0`, `help_d1`, `help_d2` of the result lines.
    pub fn help_by_distance<'a>(reports: impl IntoIterator<Item = &'a RankReport>) -> [u64; 3] {
        reports.into_iter().fold([0; 3], |mut help, r| {
            for (h, g) in help.iter_mut().zip(r.given_to) {
                *h += g;
            }
            help
        })
    }
}
