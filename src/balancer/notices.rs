//! Notices of waiting. A wave waits for every rank, so while one rank is
//! stalled no wave tells the others who it is. Each waiting rank tells the
//! ranks that will print the warning, in a point-to-point message, and
//! again every half `wait_warning` while it waits, so that the warning
//! names the ranks that have not said lately that they wait: stalled
//! before they said so, or since.

use crate::comm::{Comm, Mail, Mailbox};

/// This rank's notices, sent and received.
pub(super) struct Notices {
    mail: Mailbox,
    /// When this rank last told its printers it waits, since the last wave
    /// it saw complete.
    told_at: Option<f64>,
    /// When each rank that said it waits since then was last heard, on this
    /// rank's clock, by rank (`-inf`: not heard; the ranks do not see a wave
    /// complete at one time, so a notice names no wave).
    heard: Vec<f64>,
}

impl Notices {
    pub(super) fn new() -> Notices {
        Notices {
            mail: Mailbox::new(Mail::Waiting),
            told_at: None,
            heard: Vec::new(),
        }
    }

    /// A wave completed: the notices so far are of the stall before it.
    pub(super) fn wave_completed(&mut self) {
        self.told_at = None;
        self.heard.clear();
    }

    /// Whether this rank should tell its printers again at `now`: it never
    /// did since the last wave, or `period` seconds ago.
    pub(super) fn due(&self, now: f64, period: f64) -> bool {
        self.told_at.is_none_or(|t| now >= t + period)
    }

    /// Tell `printers` (but this rank) at `now` that this rank waits.
    pub(super) fn tell(&mut self, comm: &Comm, printers: &[usize], now: f64) {
        self.told_at = Some(now);
        self.mail.prune();
        for &p in printers.iter().filter(|&&p| p != comm.rank()) {
            self.mail.send(comm, p, vec![1]);
        }
    }

    /// Receive at `now` the notices that have arrived (at every test of a
    /// wave that waits, so that they do not pile up unreceived).
    pub(super) fn receive(&mut self, comm: &Comm, now: f64) {
        while let Some((from, _)) = self.mail.receive(comm) {
            if self.heard.len() <= from {
                self.heard.resize(from + 1, f64::NEG_INFINITY);
            }
            self.heard[from] = now;
        }
    }

    /// The ranks heard from at or after `since`, in rank order.
    pub(super) fn heard_since(&self, since: f64) -> Vec<usize> {
        (self.heard.iter().enumerate())
            .filter(|&(_, &at)| at >= since)
            .map(|(r, _)| r)
            .collect()
    }

    /// At `finish` (collective): every notice sent is received, so that no
    /// send is left pending.
    pub(super) fn drain(&mut self, comm: &Comm) {
        self.mail.drain(comm);
    }
}
