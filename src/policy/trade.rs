//! A rank's part in host transfers ([`crate::transfer`]): in a large job the
//! hosts' drift moves between hosts in MPI messages planned from the
//! termination waves, and every SOS stays on its host's board. A giving
//! rank sends from the back of its pending slots (claimed back first: the
//! host's helpers may have taken some), else from its lease beyond what it
//! computes by the job's forecast end; a receiving rank takes the ids as
//! its own, and offers at its next check what it will not finish.

use super::request::Request;
use super::{Asking, Event, Rank, Step};
use crate::ids::IdSet;
use crate::transfer::Shedding;

impl Rank {
    /// Whether this job's hosts trade through MPI ([`crate::transfer::on`]).
    pub fn trades(&self) -> bool {
        self.trade.trading
    }

    /// Whether this rank is at least as fast as its host's mean speed at
    /// the last wave ([`crate::verdict::Status::fast`]).
    pub fn fast(&self) -> bool {
        let h = self.topology.host_index(self.me);
        let host = self.job.hosts.get(h).map_or(0.0, |h| h.1);
        self.speed.get() * self.trade.host_ranks as f64 >= host
    }

    /// Ids this rank will not have computed by the job's forecast end at
    /// its speed (0 before the first wave): its part of its host's excess.
    pub fn excess(&self, now: f64) -> u64 {
        let v = self.speed.get();
        if !self.job.end.is_finite() || v <= 0.0 {
            return 0;
        }
        let can = (v * (self.job.end - now).max(0.0)).floor() as u64;
        self.remaining().saturating_sub(can)
    }

    /// The host transfers a wave's plan asks of this rank (none between
    /// plans or outside large jobs).
    pub(super) fn plan_sends(&mut self, job: &crate::verdict::Job) {
        if job.moves.is_empty() || self.in_warmup() {
            return;
        }
        let excess = self.excess(job.at);
        self.trade.sends = crate::transfer::sends(job, &self.topology, self.me, excess);
        self.trade.shedding = Shedding::after(&self.trade.sends, excess);
    }

    /// The next step of a rank with transfers to make: a send ready, or the
    /// ids for the sends to come (a claim of pending slots, or the lease).
    pub(super) fn trade_step(&mut self, now: f64) -> Option<Step> {
        if let Some((to, ids)) = self.trade.outgoing.pop() {
            return Some(Step::Send { to, ids });
        }
        if !self.trade.sends.is_empty() && self.asking.is_none() {
            self.give(now);
            return self.trade_step(now);
        }
        None
    }

    /// Make the transfers planned ready: from the back of the pending
    /// slots (claimed back first), else from the back of the lease beyond
    /// what the rank computes by the job's forecast end.
    fn give(&mut self, now: f64) {
        let sends = std::mem::take(&mut self.trade.sends);
        let n: u64 = sends.iter().map(|s| s.1).sum();
        if let Some((level, slots)) = self.ledger.back(n) {
            let claim = self.claim_template(now);
            self.ask(
                Request::Claim {
                    level,
                    slots,
                    claim,
                    listed: false,
                    most: u64::MAX,
                },
                Asking::Give { level, sends },
            );
            return;
        }
        let spare = self
            .ledger
            .lease
            .len()
            .saturating_sub(self.can_compute(now));
        let ids = self.ledger.lease.take_back(spare.min(n));
        self.ready(sends, ids);
    }

    /// Cut `ids` into the transfers `sends` (in order, as far as they go)
    /// and make them ready to send; what is left is the lease's.
    pub(super) fn ready(&mut self, sends: Vec<(usize, u64)>, mut ids: IdSet) {
        for (to, n) in sends {
            let part = ids.take_front(n);
            if part.is_empty() {
                break;
            }
            self.report.given += part.len();
            let d = self.topology.distance(self.me, to).min(2);
            self.report.given_to[d as usize] += part.len();
            self.events.push(Event::Sent {
                to,
                ids: part.clone(),
            });
            self.trade.outgoing.push((to, part));
        }
        self.ledger.lease.extend(&ids);
    }

    /// Ids another host's rank sent this one (a host transfer): its own
    /// now, and the next call checks at once.
    pub fn receive(&mut self, from: usize, ids: IdSet, now: f64) {
        self.report.taken += ids.len();
        self.ledger.lease.extend(&ids);
        self.events.push(Event::Received { from, ids });
        self.trade.offer = true;
        self.helper.got_work();
        self.next_check = self.next_check.min(now);
    }
}
