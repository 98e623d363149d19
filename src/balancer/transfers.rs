//! Host transfers in the shell ([`crate::transfer`]): the MPI messages
//! that carry ids between hosts, sent, received and drained at `finish`.

use crate::comm::{Comm, Mail, Outgoing};
use crate::error::Error;
use crate::ids::IdSet;
use crate::policy::Rank;

/// This rank's host transfers.
pub(super) struct Transfers {
    /// Host transfers on their way: the rank owns work until the receivers
    /// have them.
    outgoing: Vec<Outgoing>,
    /// Host transfers sent and received (messages), for the drain at
    /// `finish`.
    counts: (u64, u64),
    /// A host transfer arrived since the rank last looked for work.
    arrived: bool,
}

impl Transfers {
    pub(super) fn new() -> Transfers {
        Transfers {
            outgoing: Vec::new(),
            counts: (0, 0),
            arrived: false,
        }
    }

    /// Send `ids` to rank `to`.
    pub(super) fn send(&mut self, comm: &Comm, to: usize, ids: &IdSet) {
        self.outgoing
            .push(comm.send(Mail::Transfer, to, ids.to_words()));
        self.counts.0 += 1;
    }

    /// Some sent are still on their way.
    pub(super) fn sending(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Whether a host transfer arrived since the last call.
    pub(super) fn take_arrived(&mut self) -> bool {
        std::mem::take(&mut self.arrived)
    }

    /// Those sent that their receivers have are done; those that arrived
    /// are the rank's own work now. The errors are messages that were not
    /// sets of ids.
    pub(super) fn take(&mut self, comm: &Comm, rank: &mut Rank, now: f64) -> Vec<Error> {
        let mut errors = Vec::new();
        // (Only where the job's hosts trade, the same on every rank.)
        if !rank.trades() {
            return errors;
        }
        self.outgoing.retain_mut(|o| !o.test());
        while let Some((from, words)) = comm.receive(Mail::Transfer) {
            self.counts.1 += 1;
            match IdSet::from_words(&words) {
                Some(ids) => {
                    rank.receive(from, ids, now);
                    self.arrived = true;
                }
                None => errors.push(Error::Internal(format!(
                    "a host transfer from rank {from} is not a set of ids ({} words)",
                    words.len()
                ))),
            }
        }
        errors
    }

    /// At `finish`: every host transfer sent reaches its receiver (after a
    /// stop or a failure some are still on their way; their ids are not
    /// computed), so that no send is left pending. Collective where the
    /// job's hosts `trade`.
    pub(super) fn drain(&mut self, comm: &Comm, trades: bool) {
        if !trades {
            return;
        }
        comm.drain(Mail::Transfer, &mut self.counts, &mut self.outgoing);
    }
}
