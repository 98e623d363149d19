//! Notices of waiting. A wave waits for every rank, so while one rank is
//! stalled no wave tells the others who it is. Each waiting rank tells the
//! ranks that will print the warning, in a point-to-point message, so that
//! the warning names the ranks that have not said they wait, not all that
//! had work.

use crate::comm::{Comm, Mail, Mailbox};

/// This rank's notices, sent and received.
pub(super) struct Notices {
    mail: Mailbox,
    /// This rank told its printers it waits, since the last wave it saw
    /// complete.
    told: bool,
    /// The ranks that said they wait, since then (the ranks do not see a
    /// wave complete at one time, so a notice names no wave).
    waiting: Vec<usize>,
}

impl Notices {
    pub(super) fn new() -> Notices {
        Notices {
            mail: Mailbox::new(Mail::Waiting),
            told: false,
            waiting: Vec::new(),
        }
    }

    /// A wave completed: the notices so far are of the stall before it.
    pub(super) fn wave_completed(&mut self) {
        self.told = false;
        self.waiting.clear();
    }

    /// Whether this rank has told its printers it waits.
    pub(super) fn told(&self) -> bool {
        self.told
    }

    /// Tell `printers` (but this rank) that this rank waits (once a wave:
    /// not again while [`Notices::told`]).
    pub(super) fn tell(&mut self, comm: &Comm, printers: &[usize]) {
        self.told = true;
        self.mail.prune();
        for &p in printers.iter().filter(|&&p| p != comm.rank()) {
            self.mail.send(comm, p, vec![1]);
        }
    }

    /// Receive the notices that have arrived (at every test of a wave that
    /// waits, so that they do not pile up unreceived).
    pub(super) fn receive(&mut self, comm: &Comm) {
        while let Some((from, _)) = self.mail.receive(comm) {
            self.waiting.push(from);
        }
    }

    /// The ranks that have said they wait, as of the last
    /// [`Notices::receive`].
    pub(super) fn waiting(&self) -> &[usize] {
        &self.waiting
    }

    /// At `finish` (collective): every notice sent is received, so that no
    /// send is left pending.
    pub(super) fn drain(&mut self, comm: &Comm) {
        self.mail.drain(comm);
    }
}
