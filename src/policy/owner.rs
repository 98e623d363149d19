//! The periodic check of a rank: the SOS owner's decisions (post, refresh,
//! claim, withdraw, move between boards), and when the rank looks for help
//! to give. Every threshold comes from the cost model ([`crate::cost`]).

use super::request::{Request, Search};
use super::{Asking, Event, Phase, Rank};
use crate::config::Mode;
use crate::cost::{EARLY_LOOKS, GROWTH, RISK, TRIES};
use crate::ids::IdSet;
use crate::protocol::{Entry, Level, Post, Slot, Sos, SosState, cut};
use crate::speed::forecast;

impl Rank {
    /// The periodic check: speed, progress line, and the SOS decisions,
    /// made while no request is out.
    pub(super) fn check(&mut self, now: f64) {
        self.next_check = now + self.params.check_interval;
        let v = self.speed.update();
        let remaining = self.remaining();
        let tau = forecast(now, remaining, v);
        if let Some(ids) = self.ledger.take_progress() {
            self.events.push(Event::Progress {
                ids,
                done: self.speed.done(),
                speed: v,
                remaining,
                forecast: tau,
            });
        }
        if self.params.mode != Mode::Full
            || self.phase != Phase::Running
            || self.owner.post_failures >= TRIES
            || self.asking.is_some()
        {
            return;
        }
        if self.trade.sends.is_empty() {
            self.trade.sends = self.trade.shedding.grown(self.excess(now), v);
        }
        // Transfers to send wait for the decision's request, if any: a rank
        // that gives at every check still looks at its SOS.
        self.decide(now, v, remaining, tau);
    }

    /// The end a rank is late against. On slow shared storage, or for a
    /// rank that took a share, the job's forecast end (a horizon the job as
    /// a whole will miss is no reason for dear steals, and a helper's share
    /// was sized to the job's end); else the horizon, or the job's end if
    /// sooner. On fast storage a rank that took a share is never late
    /// before the end the share was sized to.
    fn reference_end(&self, shared_slow: bool) -> f64 {
        let took = self.helper.free || self.helper.took_share();
        let reference = if (shared_slow || took) && self.job.end.is_finite() {
            self.job.end
        } else {
            self.horizon.min(self.job.end)
        };
        reference.max(if shared_slow {
            f64::NEG_INFINITY
        } else {
            self.helper.share_end
        })
    }

    /// The SOS decisions of a check, at speed `v` with `remaining` ids
    /// forecast to end at `tau`.
    fn decide(&mut self, now: f64, v: f64, remaining: u64, tau: f64) {
        let costs = self.costs();
        let post_level = self.post_level();
        let level = if self.owner.is_open() {
            self.owner.level
        } else {
            post_level
        };
        let shared_slow = costs.slow(Level::Shared);
        // Lateness worth a post: on slow storage at the steadier of the
        // recent and the steady speed (a fluctuation shorter than the help
        // delay is over before help comes).
        let steady = forecast(now, remaining, v.max(self.speed.steady()));
        let post_pays = |reference: f64, level: Level| {
            let end = if costs.slow(level) { steady } else { tau };
            end - reference >= costs.post_threshold(level)
        };
        let reference = self.reference_end(shared_slow);
        // An open SOS stays open until the rank is no longer late by the
        // paper's δτ: keeping it open costs the owner nothing.
        // A host transfer received goes on the host's board as soon as the
        // rank will not finish it by the job's end: it came for the host's
        // free ranks.
        let offer = std::mem::take(&mut self.trade.offer)
            && tau - self.job.end >= self.params.check_interval;
        let late = match self.owner.sos {
            Some(_) => tau - reference >= self.params.late_threshold,
            None => offer || post_pays(reference, post_level),
        };
        // A host late as a whole moves its SOS to the shared board (on slow
        // shared storage only when a post there pays); back to the host's
        // board only behind a withdrawal.
        let moves = late
            && self.owner.is_open()
            && self.owner.level != post_level
            && (self.owner.level == Level::Shared
                || !shared_slow
                || post_pays(reference, Level::Shared));
        let hasten = moves && shared_slow;
        let look_due = self.owner.is_open() && now >= self.owner.next_look(&costs);
        let opens = late && !self.owner.is_open();
        // The lease runs out before a claim could come back: claim now,
        // unless a look at the SOS is due (a refresh claims the front too)
        // or a late rank without an SOS posts (its slots on the other
        // board, if any, claimed back at once: [`Rank::post`]).
        if !self.ledger.pending.is_empty() && self.lease_short(now) && !look_due && !opens {
            self.claim_front(now);
            return;
        }
        // A lease longer than the rank can compute by the job's end (it
        // slowed down, or the end came closer) by lateness worth a post goes
        // back into slots, for helpers.
        let excess = (self.ledger.lease.len()).saturating_sub(self.can_compute(now));
        let give_back = late && excess > 0 && excess as f64 >= v * costs.post_threshold(level);
        if self.owner.is_open() && !look_due && !give_back && !hasten {
            return;
        }
        self.owner.last_look = now;
        self.act(now, v, tau, remaining, late, (hasten, moves, give_back));
    }

    /// What a check does: post, withdraw (`hasten`: to the shared board at
    /// once; `moves`: to the other board), post again (`give_back`: part of
    /// the lease back into slots, on a slow board after the small pending
    /// slots are claimed back; or slots to cut anew), claim back or
    /// refresh an open SOS, or look for help ahead.
    fn act(
        &mut self,
        now: f64,
        v: f64,
        tau: f64,
        remaining: u64,
        late: bool,
        how: (bool, bool, bool),
    ) {
        let (hasten, moves, give_back) = how;
        match (late, self.owner.is_open()) {
            (true, false) => self.post(now, v, tau),
            (true, true) if hasten => self.withdraw(tau, true),
            (true, true) if moves => self.withdraw(tau, false),
            (true, true) if give_back && !self.owner.recut => match self.fragments() {
                slots if !slots.is_empty() => self.claim_back(now, slots),
                _ => self.post(now, v, tau),
            },
            (true, true) if give_back || std::mem::take(&mut self.owner.recut) => {
                self.post(now, v, tau)
            }
            (true, true) => match self.misfit(now, v) {
                slots if !slots.is_empty() => self.claim_back(now, slots),
                _ => self.refresh(now, v, tau),
            },
            (false, true) => self.withdraw(tau, false),
            // About to run out of work, or early against the job's forecast
            // end: ask for the next share now, so that the steal passes
            // while this rank still computes.
            (false, false)
                if remaining > 0
                    && self.job.open_sos > 0
                    && (tau - now < self.look_ahead() || tau < self.early_before(now))
                    && now >= self.helper.looked_ahead + self.look_pace(tau - now)
                    && (!self.looks_early(tau - now) || self.host_late_elsewhere()) =>
            {
                self.helper.looked_ahead = now;
                self.help(now, tau - now);
            }
            (false, false) => {}
        }
    }

    /// The time before which a rank's forecast end makes it early against
    /// the job's: two steals and a check interval before the job's end.
    fn early_before(&self, _now: f64) -> f64 {
        self.job.end - 2.0 * self.steal_cost(0) - self.params.check_interval
    }

    /// True when the lease holds less work than a claim takes to come back,
    /// plus a check interval (checks come that often).
    fn lease_short(&self, _now: f64) -> bool {
        let v = self.speed.get();
        let level = self.ledger.front_level().unwrap_or(self.owner.level);
        v > 0.0
            && (self.ledger.lease.len() as f64)
                < v * (self.costs().claim(level) + self.params.check_interval)
    }

    /// Ids this rank computes by the job's forecast end less its risk (at
    /// least two claims' worth: the next claim comes while it computes).
    pub(super) fn can_compute(&self, now: f64) -> u64 {
        let c = self.costs().claim(self.owner.level);
        let left = (self.job_left(now) - self.risk()).max(2.0 * c);
        (self.speed.get() * left).ceil() as u64
    }

    /// The lease to hold: an own period of work, no more than the rank
    /// computes by the job's forecast end, at least one id.
    pub(super) fn lease_len(&self, now: f64) -> u64 {
        let period = self.costs().own_period(self.owner.level, 0);
        let own = (self.speed.get() * period).ceil() as u64;
        own.min(self.can_compute(now)).max(1)
    }

    /// Seconds by which this rank's last realisation may run past its mean
    /// time: [`RISK`] standard deviations of its realisations' times.
    fn risk(&self) -> f64 {
        RISK * self.speed.spread()
    }

    /// Seconds to the job's forecast end
    /// ([`JobView::left`](super::jobview::JobView::left)).
    pub(super) fn job_left(&self, now: f64) -> f64 {
        self.job.left(now, self.params.check_interval)
    }

    /// Whether a look ahead with `busy_for` seconds of own work left is an
    /// early one on fast shared storage ([`Search::early`]): the rank is
    /// early against the job's end, not about to run out of work.
    fn looks_early(&self, busy_for: f64) -> bool {
        busy_for > self.look_ahead() && !self.costs().slow(Level::Shared)
    }

    /// Seconds between two looks ahead of a rank with `busy_for` seconds of
    /// own work left: an own period of the shared board, or for an early
    /// look the job's share of [`EARLY_LOOKS`] when that is longer.
    fn look_pace(&self, busy_for: f64) -> f64 {
        let period = self.costs().own_period(Level::Shared, 0);
        if self.looks_early(busy_for) {
            period.max(self.topology.ranks() as f64 / EARLY_LOOKS)
        } else {
            period
        }
    }

    /// Whether another host will be late as a whole, at the last wave's
    /// figures, by more than a grace of its speed: only then are there SOS
    /// worth an early look on fast storage.
    fn host_late_elsewhere(&self) -> bool {
        let mine = self.topology.host_index(self.me);
        self.job.host_late_elsewhere(mine, self.params.grace)
    }

    /// Seconds of own work left at which a rank looks for its next share:
    /// one steal from the nearest SOS of a host whose every rank is late
    /// (the job view's `sos_near`), so that the steal passes while it
    /// computes.
    fn look_ahead(&self) -> f64 {
        self.steal_cost(self.job.sos_near)
    }

    /// The sizes of the slots of a new post's `n` ids, front first: a
    /// lease, a lease, then doubling ([`GROWTH`]) up to the share a helper
    /// takes now ([`Rank::slot_target`], no smaller than
    /// [`Rank::least_slot`]), and slots of that share at the back, where
    /// helpers take first. The owner claims the small front slots itself
    /// as it goes.
    fn slot_sizes(&self, n: u64, now: f64, v: f64) -> Vec<u64> {
        let offered: u64 = (self.ledger.pending_on(self.owner.level))
            .map(Slot::len)
            .sum();
        let share = (self.slot_target(now, n, n + offered, v)).max(self.least_slot(now));
        let mut unit = self.lease_len(now).max(1);
        let mut sizes = vec![unit.min(n)];
        let mut left = n - sizes[0];
        while left > 0 && unit < share {
            let size = unit.min(left);
            sizes.push(size);
            left -= size;
            unit *= GROWTH;
        }
        let back = left.div_ceil(share);
        sizes.extend((0..back).map(|k| left / back + u64::from(k < left % back)));
        sizes
    }

    /// The smallest slot: a lease of this rank, and an own period of a
    /// helper's work (a helper claims no more often than a clerk can).
    fn least_slot(&self, now: f64) -> u64 {
        let period = self.costs().own_period(self.owner.level, 0);
        let helper = (self.job.helper_speed * period).ceil() as u64;
        self.lease_len(now).max(helper).max(1)
    }

    /// The share a helper takes now from this rank's work (its ids and `n`
    /// more about to be offered): what a helper of the free ranks' mean
    /// speed computes by the job's forecast end, no more than it and this
    /// rank alone end together with.
    fn helper_share(&self, now: f64, n: u64, v: f64) -> u64 {
        let vh = if self.job.helper_speed > 0.0 {
            self.job.helper_speed
        } else {
            v
        };
        let alone = vh * (self.remaining() + n) as f64 / (v + vh).max(1e-9);
        let capped = if self.job.end.is_finite() {
            alone.min(vh * self.job_left(now))
        } else {
            alone
        };
        capped.ceil() as u64
    }

    /// The slots to cut anew: when a pending slot is larger than [`GROWTH`]
    /// times the share a helper takes now (the job's end came closer), all
    /// of them. Claimed back, they are cut afresh at once.
    fn misfit(&self, now: f64, v: f64) -> Vec<Slot> {
        let mine: Vec<Slot> = self.ledger.pending_on(self.owner.level).cloned().collect();
        let offered: u64 = mine.iter().map(Slot::len).sum();
        let share = self
            .slot_target(now, 0, offered, v)
            .max(self.least_slot(now));
        if mine.iter().any(|s| s.len() > GROWTH * share) {
            mine
        } else {
            Vec::new()
        }
    }

    /// The pending slots a give-back on a slow board claims back first, to
    /// cut them anew with its ids: those smaller than the largest, when more
    /// than one. They are the front slots of earlier posts, and a share
    /// among them would cost a claim each, an operation's time there; cut
    /// anew, the SOS has a post's slots again.
    fn fragments(&self) -> Vec<Slot> {
        let level = self.owner.level;
        if !self.costs().slow(level) {
            return Vec::new();
        }
        let largest = self.ledger.pending_on(level).map(Slot::len).max();
        let small: Vec<Slot> = (self.ledger.pending_on(level))
            .filter(|s| Some(s.len()) < largest)
            .cloned()
            .collect();
        if small.len() > 1 { small } else { Vec::new() }
    }

    /// The size of a helper's slot when `n` more ids are offered, `help`
    /// ids in all: the share a helper takes now, or the helpers' part
    /// split among the helpers this SOS may expect (the ranks that reach
    /// its board without an SOS of their own, over the open SOS, at the
    /// last wave), if smaller.
    fn slot_target(&self, now: f64, n: u64, help: u64, v: f64) -> u64 {
        let helpers = self.job.helpers_per_sos(self.owner.level);
        self.helper_share(now, n, v).min(help.div_ceil(helpers))
    }

    /// The ids this rank computes by its reference end (the job's forecast
    /// end, else the horizon).
    fn by_end(&self, now: f64, v: f64) -> u64 {
        let end = self.job.end_or(self.horizon);
        (v * (end - now)).max(0.0) as u64
    }

    /// The open SOS as this rank would write it at `now`: its figures, its
    /// pending slots on the board of the SOS, the helpers' claims it knows.
    fn sos_body(&self, now: f64, v: f64, tau: f64, opened_at: f64) -> Sos {
        let slots: Vec<Slot> = self.ledger.pending_on(self.owner.level).cloned().collect();
        Sos {
            rank: self.me,
            seq: self.owner.last_seq,
            state: SosState::Open(Post {
                speed: v,
                remaining: self.remaining(),
                forecast: tau,
                host: self.topology.host(self.me).to_string(),
                site: self.topology.site(self.me).to_string(),
                opened_at,
                at: now,
                slots,
                helped: self.owner.helped.clone(),
            }),
        }
    }

    /// Post an SOS, or post the open one anew: the lease beyond one lease
    /// cut into new slots, with the slots still pending on the board.
    /// Slots pending on the other board are claimed back first (the SOS
    /// moves), and the post follows at once.
    fn post(&mut self, now: f64, v: f64, tau: f64) {
        let level = self.post_level();
        if let Some(other) = self.ledger.pending_elsewhere(level) {
            self.claim_all(now, other, false);
            self.next_check = now;
            return;
        }
        self.owner.level = level;
        // The rank keeps what it computes by its reference end; the tail
        // must hold more work than help takes to come.
        let keep = self.lease_len(now).max(self.by_end(now, v));
        let least_tail = (v * self.costs().help_delay(level)).ceil() as u64;
        let new = if self.ledger.lease.len() > keep + least_tail {
            self.ledger.lease.take_back(self.ledger.lease.len() - keep)
        } else {
            IdSet::new()
        };
        if new.is_empty() && self.ledger.pending_on(level).next().is_none() {
            return;
        }
        let seq = self.owner.next_seq();
        let sizes = self.slot_sizes(new.len(), now, v);
        let slots = cut(&new, seq, 0, &sizes);
        self.ledger.add_pending(level, slots);
        // A post anew keeps the index's entry: the index changes only when
        // an SOS opens or closes (its writers race, see `Clerk::list`).
        let opens = !self.owner.is_open();
        let opened_at = self.owner.sos.as_ref().map_or(now, |e| e.opened_at);
        let entry = self.owner.sos.clone().unwrap_or(Entry {
            rank: self.me,
            seq: self.owner.last_seq,
            forecast: tau,
            opened_at,
            speed: v,
        });
        let sos = self.sos_body(now, v, tau, opened_at);
        self.ask(
            Request::Post {
                entry: entry.clone(),
                sos,
                level,
            },
            Asking::Post { entry, new, opens },
        );
    }

    /// The board an SOS goes on: the host's, unless there is none or the
    /// host as a whole will be late against the job's forecast end (its
    /// ranks will not be free in time to close the SOS among themselves)
    /// and there are other hosts to help.
    pub(super) fn post_level(&self) -> Level {
        let host_late = self.host_lateness().is_some() && self.topology.hosts() > 1;
        if self.params.host_board && (!host_late || self.trade.trading) {
            Level::Host
        } else {
            Level::Shared
        }
    }

    /// Seconds by which this rank's host as a whole will be late against the
    /// job's forecast end, at the last wave's figures, when that is worth a
    /// post on the shared board (help from other hosts comes only after a
    /// post and a steal there).
    fn host_lateness(&self) -> Option<f64> {
        let threshold = self.costs().post_threshold(Level::Shared);
        self.job.host_late_by(threshold)
    }

    /// Learn the helpers' claims of the open SOS and write fresh figures.
    fn refresh(&mut self, now: f64, v: f64, tau: f64) {
        let Some(entry) = self.owner.sos.clone() else {
            return;
        };
        let level = self.owner.level;
        // The next lease with it, when the lease runs short.
        let front = if self.lease_short(now) {
            self.front_slots(now)
        } else {
            Vec::new()
        };
        let mut sos = self.sos_body(now, v, tau, entry.opened_at);
        if let SosState::Open(p) = &mut sos.state {
            p.slots.retain(|s| !front.contains(s));
        }
        let claim = self.claim_template(now);
        self.ask(
            Request::Refresh {
                entry,
                sos,
                level,
                front,
                claim,
            },
            Asking::Refresh { level },
        );
    }

    /// No longer late (or moving): close the SOS; its slots stay this
    /// rank's to claim as it goes.
    fn withdraw(&mut self, forecast: f64, moving: bool) {
        let Some(entry) = &self.owner.sos else {
            return;
        };
        let (level, seq) = (self.owner.level, entry.seq);
        self.ask(
            Request::Withdraw { level, seq },
            Asking::Withdraw { forecast, moving },
        );
    }

    /// Ids of the front pending slots to claim: what the lease lacks of a
    /// lease's worth, at least one.
    fn front_target(&self, now: f64) -> u64 {
        (self.lease_len(now))
            .saturating_sub(self.ledger.lease.len())
            .max(1)
    }

    /// The front pending slots, up to a lease's worth, on the board of the
    /// front one.
    fn front_slots(&self, now: f64) -> Vec<Slot> {
        self.ledger.front(self.front_target(now))
    }

    /// Claim the front pending slots, up to a lease's worth, on the board
    /// of the front one. After a front claim lost, the claims are listed
    /// first, as a helper lists them after a lost claim: the helpers that
    /// took one front slot may have taken the next ones too, and each
    /// claim lost would cost the rank its time.
    pub(super) fn claim_front(&mut self, now: f64) {
        let Some(level) = self.ledger.front_level() else {
            return;
        };
        if std::mem::take(&mut self.owner.front_lost) {
            let slots = self.ledger.front(u64::MAX);
            let most = self.front_target(now);
            self.claim_slots(now, level, slots, (true, most));
            return;
        }
        let slots = self.front_slots(now);
        self.claim_slots(now, level, slots, (false, u64::MAX));
    }

    /// Claim every pending slot on `level`'s board (an SOS that moves);
    /// `listed`: see [`Request::Claim`].
    pub(super) fn claim_all(&mut self, now: f64, level: Level, listed: bool) {
        let slots = self.ledger.pending_on(level).cloned().collect();
        self.claim_slots(now, level, slots, (listed, u64::MAX));
    }

    /// Claim `slots` of the open SOS back, to cut them anew at once.
    fn claim_back(&mut self, now: f64, slots: Vec<Slot>) {
        self.owner.recut = true;
        self.next_check = now;
        self.claim_slots(now, self.owner.level, slots, (false, u64::MAX));
    }

    /// Claim `slots` on `level`'s board; `listed` and `most`: see
    /// [`Request::Claim`].
    fn claim_slots(
        &mut self,
        now: f64,
        level: Level,
        slots: Vec<Slot>,
        (listed, most): (bool, u64),
    ) {
        let claim = self.claim_template(now);
        self.ask(
            Request::Claim {
                level,
                slots,
                claim,
                listed,
                most,
            },
            Asking::Claim { level },
        );
    }

    /// The quota is exhausted, or about to be (`busy_for` seconds of own
    /// work left): ask the clerk to search the open SOS for help to give.
    /// `None` when the search is asked for, else when to look again.
    pub(super) fn help(&mut self, now: f64, busy_for: f64) -> Option<f64> {
        let idle_since = if busy_for > 0.0 {
            now
        } else {
            *self.helper.idle_since.get_or_insert(now)
        };
        // On slow storage a look at the index is dear: at most once per
        // operation (a watcher still wakes the rank at once).
        let poll = self
            .params
            .poll_interval
            .max(self.timings.op(Level::Shared));
        let woken = std::mem::take(&mut self.job.index_changed);
        // The last wave saw no SOS open, and no watcher saw the index
        // change since: nothing to read.
        if self.job.open_sos == 0 && !woken {
            return Some(now + poll);
        }
        // An idle rank's last search found nothing, and said when to look
        // again.
        if busy_for == 0.0
            && let Some(at) = self.helper.search_at.take()
            && now < at
            && !woken
        {
            return Some(at);
        }
        let early = self.looks_early(busy_for);
        let search = self.search(now, (busy_for, idle_since), woken, poll, early);
        self.ask(Request::Help(search), Asking::Help { early });
        None
    }

    /// A search for help from `now`, with `busy_for` seconds of own work
    /// left and idle since `idle_since`, `early` as [`Search::early`] says.
    fn search(
        &self,
        now: f64,
        (busy_for, idle_since): (f64, f64),
        woken: bool,
        poll: f64,
        early: bool,
    ) -> Search {
        let costs = self.costs();
        Search {
            now,
            busy_for,
            idle_since,
            woken,
            poll,
            interval: [Level::Shared, Level::Host].map(|l| costs.own_period(l, 0)),
            policy: self.params.help_policy,
            speed: self.speed.get(),
            job_left: self.job_left(now),
            steal_cost: [0, 1, 2].map(|d| self.steal_cost(d)),
            host_steal: costs.steal(Level::Host),
            risk: self.risk(),
            idle: self.job.idle.clone(),
            early,
            hosts: self.job.hosts.clone(),
            counted_at: self.job.counted_at,
            site_end: self.job.site_end(),
            job_end: self.job.end,
            shared: !self.trade.trading,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::{Outcome, Reply};
    use super::*;
    use crate::params::Params;
    use crate::topology::{Sites, Topology};

    /// Rank 0 of 2 (its block 0..50) whose last 30 ids are pending in six
    /// slots of 5 on the shared board.
    fn owner() -> Rank {
        let topology = Topology::new(vec!["h".into(); 2], &Sites::Single);
        let mut rank = Rank::new(0, 100, Params::from(&crate::Config::default()), topology);
        let tail = rank.ledger.lease.take_back(30);
        rank.ledger
            .add_pending(Level::Shared, cut(&tail, 1, 0, &[5; 6]));
        rank
    }

    /// The claim of front slots the rank asks for now: slots, listed, most.
    fn front_claim(rank: &mut Rank) -> (Vec<Slot>, bool, u64) {
        rank.claim_front(1.0);
        match rank.outbox.take() {
            Some(Request::Claim {
                slots,
                listed,
                most,
                ..
            }) => (slots, listed, most),
            other => panic!("{other:?}"),
        }
    }

    fn claimed(rank: &mut Rank, won: Vec<Slot>, lost: &[Slot]) {
        let lost = lost.iter().map(|s| (s.clone(), None)).collect();
        let reply = Reply {
            outcome: Outcome::Claimed { won, lost },
            seconds: None,
            ops: [1, 0],
            looks: (0, 0),
            errors: Vec::new(),
        };
        rank.reply(reply).unwrap();
    }

    #[test]
    fn a_give_back_on_slow_storage_claims_the_small_slots_back_first() {
        // An open SOS on the shared board (no host board) whose last 30 ids
        // are pending in slots of 2, 2, 4, 11 and 11 ids, storage
        // operations taking `op` seconds.
        let fragmented = |op: f64| {
            let mut rank = owner();
            let pending = rank.ledger.pending_ids();
            rank.ledger.pending.clear();
            rank.ledger
                .add_pending(Level::Shared, cut(&pending, 1, 0, &[2, 2, 4, 11, 11]));
            rank.owner.sos = Some(Entry {
                rank: 0,
                seq: 1,
                forecast: 9.0,
                opened_at: 0.5,
                speed: 10.0,
            });
            rank.owner.last_seq = 1;
            rank.params.host_board = false;
            rank.timings.observe(op, [1, 0], (0, 0));
            rank
        };
        let give_back = (false, false, true);
        let mut slow = fragmented(0.2);
        slow.act(1.0, 10.0, 9.0, 50, true, give_back);
        match slow.outbox.take() {
            Some(Request::Claim { slots, .. }) => {
                assert_eq!(slots.iter().map(Slot::len).collect::<Vec<_>>(), [2, 2, 4]);
            }
            other => panic!("{other:?}"),
        }
        // Fast storage: the small slots cost no time to claim, and the
        // give-back posts at once.
        let mut fast = fragmented(0.0005);
        fast.act(1.0, 10.0, 9.0, 50, true, give_back);
        assert!(matches!(fast.outbox.take(), Some(Request::Post { .. })));
    }

    #[test]
    fn an_owner_that_lost_its_front_claims_lists_the_claims_before_the_next() {
        let mut rank = owner();
        let (front, listed, most) = front_claim(&mut rank);
        assert_eq!((front.len(), listed, most), (1, false, u64::MAX));
        // A helper had it: the next claim lists first, offers every front
        // slot left, and claims no more than the first one needed.
        claimed(&mut rank, Vec::new(), &front);
        let (slots, listed, most) = front_claim(&mut rank);
        assert!(listed);
        assert_eq!(slots.len(), 5, "{slots:?}");
        assert!(!slots.contains(&front[0]));
        assert_eq!(most, 1);
        // Won: the claims after it are plain again.
        claimed(&mut rank, slots[..1].to_vec(), &[]);
        let (slots, listed, most) = front_claim(&mut rank);
        assert_eq!((slots.len(), listed, most), (1, false, u64::MAX));
    }
}
