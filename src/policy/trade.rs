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
use crate::protocol::Slot;

/// A giving rank's host transfers between two plans: the plans are only as
/// fresh as the waves, and a host that slows down as a whole shows in its
/// ranks' speeds first. Until the next plan, a rank whose host gave at the
/// last one sends what its own excess grew by since (by more than
/// [`crate::transfer::THRESHOLD`] of its work) to the same receivers, in
/// the same parts, up to as much again as the plan sent.
#[derive(Clone, Debug, Default)]
pub(super) struct Shedding {
    /// The receivers and their parts.
    to: Vec<(usize, f64)>,
    /// The rank's excess right after the plan's sends.
    from: f64,
    /// Ids it may still shed before the next plan.
    left: f64,
}

impl Shedding {
    /// After a plan that sends `sends` from an excess of `excess`.
    pub(super) fn after(sends: &[(usize, u64)], excess: u64) -> Shedding {
        let total: u64 = sends.iter().map(|s| s.1).sum();
        Shedding {
            to: (sends.iter())
                .map(|&(to, n)| (to, n as f64 / total.max(1) as f64))
                .collect(),
            from: excess.saturating_sub(total) as f64,
            left: total as f64,
        }
    }

    /// The sends of a rank whose excess is now `excess` at speed `v`:
    /// none unless it grew since the plan by more than the threshold's work.
    pub(super) fn grown(&mut self, excess: u64, v: f64) -> Vec<(usize, u64)> {
        let grown = (excess as f64 - self.from).min(self.left);
        if self.to.is_empty() || grown <= v * crate::transfer::THRESHOLD {
            return Vec::new();
        }
        self.left -= grown;
        let sends = self
            .to
            .iter()
            .map(|&(to, part)| (to, (grown * part).round() as u64));
        sends.filter(|s| s.1 > 0).collect()
    }
}

impl Rank {
    /// Whether this job's hosts trade through MPI ([`crate::transfer::on`]).
    pub fn trades(&self) -> bool {
        self.trading
    }

    /// Whether this rank is at least as fast as its host's mean speed at
    /// the last wave ([`crate::verdict::Status::fast`]).
    pub fn fast(&self) -> bool {
        let h = self.topology.host_index(self.me);
        let host = self.hosts.get(h).map_or(0.0, |h| h.1);
        self.speed.get() * self.host_ranks as f64 >= host
    }

    /// Ids this rank will not have computed by the job's forecast end at
    /// its speed (0 before the first wave): its part of its host's excess.
    pub fn excess(&self, now: f64) -> u64 {
        let v = self.speed.get();
        if !self.job_end.is_finite() || v <= 0.0 {
            return 0;
        }
        let can = (v * (self.job_end - now).max(0.0)).floor() as u64;
        self.remaining().saturating_sub(can)
    }

    /// The host transfers a wave's plan asks of this rank (none between
    /// plans or outside large jobs).
    pub(super) fn plan_sends(&mut self, job: &crate::verdict::Job) {
        if job.moves.is_empty() || self.in_warmup() {
            return;
        }
        let excess = self.excess(job.at);
        self.sends = crate::transfer::sends(job, &self.topology, self.me, excess);
        self.shedding = Shedding::after(&self.sends, excess);
    }

    /// The next step of a rank with transfers to make: a send ready, or the
    /// ids for the sends to come (a claim of pending slots, or the lease).
    pub(super) fn trade_step(&mut self, now: f64) -> Option<Step> {
        if let Some((to, ids)) = self.outgoing.pop() {
            return Some(Step::Send { to, ids });
        }
        if !self.sends.is_empty() && self.asking.is_none() {
            self.give(now);
            return self.trade_step(now);
        }
        None
    }

    /// Make the transfers planned ready: from the back of the pending
    /// slots (claimed back first), else from the back of the lease beyond
    /// what the rank computes by the job's forecast end.
    fn give(&mut self, now: f64) {
        let sends = std::mem::take(&mut self.sends);
        let n: u64 = sends.iter().map(|s| s.1).sum();
        if let Some(&(level, _)) = self.pending.last() {
            let mut got = 0;
            let slots: Vec<Slot> = (self.pending.iter().rev())
                .take_while(|p| {
                    let more = p.0 == level && got < n;
                    got += p.1.len();
                    more
                })
                .map(|p| p.1.clone())
                .collect();
            let claim = self.claim_template(now);
            self.ask(
                Request::Claim {
                    level,
                    slots,
                    claim,
                },
                Asking::Give { level, sends },
            );
            return;
        }
        let spare = self.lease.len().saturating_sub(self.can_compute(now));
        let ids = self.lease.take_back(spare.min(n));
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
            self.outgoing.push((to, part));
        }
        self.lease.extend(&ids);
    }

    /// Ids another host's rank sent this one (a host transfer): its own
    /// now, and the next call checks at once.
    pub fn receive(&mut self, from: usize, ids: IdSet, now: f64) {
        self.report.taken += ids.len();
        self.lease.extend(&ids);
        self.events.push(Event::Received { from, ids });
        self.offer = true;
        self.idle_since = None;
        self.search_at = None;
        self.next_check = self.next_check.min(now);
    }
}

#[cfg(test)]
mod tests {
    use super::Shedding;

    #[test]
    fn a_giver_sheds_what_its_excess_grew_by_to_the_plans_receivers_up_to_the_plan() {
        // The plan sent 100 ids, 3 parts to rank 7 and 1 to rank 9; the
        // rank's excess was 150 before it. At 10 ids a second the threshold
        // is 1 id of work.
        let mut s = Shedding::after(&[(7, 75), (9, 25)], 150);
        assert!(s.grown(50, 10.0).is_empty(), "no growth");
        assert!(s.grown(51, 10.0).is_empty(), "within the threshold");
        assert_eq!(s.grown(90, 10.0), vec![(7, 30), (9, 10)]);
        // Never more than the plan sent, in all.
        assert_eq!(s.grown(200, 10.0), vec![(7, 45), (9, 15)]);
        assert!(s.grown(300, 10.0).is_empty());
        // A rank that gave nothing sheds nothing.
        assert!(Shedding::default().grown(1000, 10.0).is_empty());
    }
}
