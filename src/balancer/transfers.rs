//! Host transfers in the shell ([`crate::transfer`]): the MPI messages
//! that carry ids between hosts, sent, received and drained at `finish`.

use crate::comm::{Comm, Mail, Mailbox};
use crate::error::Error;
use crate::ids::IdSet;
use crate::policy::Rank;

/// This rank's host transfers.
pub(super) struct Transfers {
    /// Host transfers sent and received: the rank owns work until the
    /// receivers of those it sent have them.
    mail: Mailbox,
    /// A host transfer arrived since the rank last looked for work.
    arrived: bool,
}

impl Transfers {
    pub(super) fn new() -> Transfers {
        Transfers {
            mail: Mailbox::new(Mail::Transfer),
            arrived: false,
        }
    }

    /// Send `ids` to rank `to`.
    pub(super) fn send(&mut self, comm: &Comm, to: usize, ids: &IdSet) {
        self.mail.send(comm, to, ids.to_words());
    }

    /// Some sent are still on their way.
    pub(super) fn sending(&self) -> bool {
        self.mail.sending()
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
        self.mail.prune();
        while let Some((from, words)) = self.mail.receive(comm) {
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
        self.mail.drain(comm);
    }
}
