//! Algorithm 1 from the rank's side: its warm-up report, and its quota
//! from the plan of every rank's report.

use super::{Event, Phase, Rank};
use crate::error::{Error, Result};
use crate::plan::{Plan, WarmupReport, initial_block, rescale};

impl Rank {
    /// End the warm-up of a rank that leaves early: its report for the
    /// exchange, with its whole unfinished block in the tail.
    pub fn warmup_report(&mut self, now: f64) -> WarmupReport {
        self.report_warmup(now, 0.0)
    }

    /// End the warm-up: the report for the exchange. The ids left of the
    /// block that the rank computes in `keep` seconds at its measured speed
    /// are its reserve, which it computes while the exchange completes; the
    /// rest is the tail the plan pools.
    pub(super) fn report_warmup(&mut self, now: f64, keep: f64) -> WarmupReport {
        self.phase = Phase::Exchanging;
        let keep = (self.speed.update() * keep).ceil() as u64;
        let block = initial_block(self.ledger.total, self.topology.ranks(), self.me);
        let reserve = self.ledger.lease.take_front(keep);
        let tail = self
            .ledger
            .lease
            .ranges()
            .next()
            .unwrap_or(block.end..block.end);
        self.ledger.lease = reserve;
        WarmupReport {
            done: self.speed.done(),
            speed: self.speed.get(),
            tail,
            reserved: self.ledger.lease.len(),
            at: now,
        }
    }

    /// The chunk just handed out starts computing at `now`, not when `next`
    /// was called: the library's own time (waiting, logging) is not
    /// computing time.
    pub fn restart_chunk(&mut self, now: f64) {
        self.ledger.restart(now);
    }

    /// Algorithm 1: take this rank's quota from the plan of every rank's report.
    pub fn apply_plan(&mut self, reports: &[WarmupReport], now: f64) -> Result<()> {
        self.apply_planned(reports, &rescale(reports), now)
    }

    /// [`Rank::apply_plan`](super::Rank::apply_plan) with the plan of `reports` already made (the
    /// simulator makes it once for all its ranks).
    pub fn apply_planned(&mut self, reports: &[WarmupReport], plan: &Plan, now: f64) -> Result<()> {
        if self.phase != Phase::Exchanging {
            return Err(Error::State(
                "a plan arrived outside the warm-up exchange".into(),
            ));
        }
        let accounted: u64 = reports
            .iter()
            .map(|r| r.done + (r.tail.end - r.tail.start) + r.reserved)
            .sum();
        if reports.len() != self.topology.ranks() || accounted != self.ledger.total {
            return Err(Error::Internal(format!(
                "warm-up reports of {} ranks account for {accounted} of {} ids",
                reports.len(),
                self.ledger.total
            )));
        }
        let Some(quota) = plan.quotas.get(self.me) else {
            return Err(Error::Internal("a plan without this rank's quota".into()));
        };
        // The reserve left, then the quota.
        self.ledger.lease.extend(quota);
        // The plan's common end is counted from the last report.
        let last = reports
            .iter()
            .map(|r| r.at)
            .fold(f64::NEG_INFINITY, f64::max);
        self.horizon = last.min(now) + plan.duration;
        self.phase = Phase::Running;
        self.next_check = now;
        self.report.warmup_speed = reports[self.me].speed;
        self.report.planned = quota.len() + plan.kept.get(self.me).copied().unwrap_or(0);
        self.report.horizon = self.horizon;
        self.events.push(Event::Plan {
            quota: self.ledger.lease.clone(),
            speed: reports[self.me].speed,
            horizon: self.horizon,
        });
        Ok(())
    }
}
