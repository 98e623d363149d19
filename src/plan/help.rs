//! A helper's share of an open SOS (Algorithm 2, DESIGN §5): the
//! [`HelpPolicy`] and [`share`], pure like the rest of [`crate::plan`].

use crate::cost::LEAST_IDS;
use crate::speed::usable;
use serde::{Deserialize, Serialize};

/// How a helper sizes the share it takes from an open SOS (DESIGN §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelpPolicy {
    /// `k = R·v_h/(v_h+v_j)`: owner and helper finish together (the paper).
    Proportional,
    /// Proportional, but at most `R/2`, leaving work for further helpers.
    Half,
    /// Owner, earlier helpers of this SOS and the new helper all finish
    /// together: `k = v_h·(R + Σr_a)/(v_j + Σv_a + v_h)`, where `r_a` and
    /// `v_a` are what each earlier helper still has (those with `r_a > 0`)
    /// and its speed.
    ///
    /// Every policy's share is then capped (see [`share`]): no more than the
    /// helper computes by the job's forecast end, less the steal's cost.
    #[default]
    Balanced,
}

/// What a helper knows when it sizes its share.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareInput {
    /// `R`: the owner's remaining ids (lease left plus unleased tail), estimated now.
    pub owner_remaining: f64,
    /// `v_j`: the owner's speed.
    pub owner_speed: f64,
    /// `v_h`: the helper's speed.
    pub helper_speed: f64,
    /// `(v_a, r_a, c_a)` of each earlier helper of this SOS: its speed, the
    /// ids' worth of work it has left, its own work before a share taken
    /// ahead of need included (negative once it is done), and the seconds
    /// its next steal from this SOS would take.
    pub others: Vec<(f64, f64, f64)>,
    /// Ids that may be taken: the unleased tail.
    pub available: u64,
    /// Seconds until the job's forecast end (every rank's remaining work
    /// over their summed speed; infinite when unknown; the policy floors an
    /// end already past at half a check interval): a helper takes no more
    /// than it can compute by then, so that the idle ranks still to come
    /// find work too.
    pub job_left: f64,
    /// Seconds a steal takes (storage operations): the share starts no
    /// sooner, and is nothing when not worth it.
    pub steal_cost: f64,
    /// Helpers nearer the owner that close this SOS alone while the farther
    /// free ranks wait their grace (0: none wait): the job's forecast end
    /// counts those, so the share ends no sooner than these close the SOS.
    pub near_helpers: f64,
    /// Seconds of its own work the helper computes before the share (a
    /// rank that looks ahead while it still computes): the share starts
    /// then, and ends at the common end all the same.
    pub busy_for: f64,
    /// Seconds by which the helper's last realisation may run past its mean
    /// time (a few standard deviations of its realisations' times): the
    /// share ends that much before the job's forecast end, so that the last
    /// realisations go to the ranks that finish them soonest.
    pub risk: f64,
    /// The SOS is on the helper's host board, where no rank of another host
    /// can help: an idle helper takes at least one id when it computes
    /// [`LEAST_IDS`] before the owner alone would finish its work, whatever
    /// the job's forecast end says.
    pub least_one: bool,
    /// Seconds from which a steal is dear (the configured lateness): an
    /// owner that other helpers still help gets the least share of four
    /// steals' worth (within the job's forecast end) only from a helper
    /// whose steal costs that much.
    pub dear_steal: f64,
}

/// The number of ids a helper takes; zero means "do not take".
///
/// The policy sets a common end `k/v_h` seconds away; it is capped by the
/// job's forecast end ([`ShareInput::job_left`]), so that the first
/// helpers leave work for the idle ranks still to come, and the share is
/// what the helper computes in that time once the steal is done and its
/// own work ([`ShareInput::busy_for`]) is. An owner with more than three
/// steals' worth of work alone gets a share of up to four steals' worth of
/// work from a helper at least as fast as itself, ending by the job's
/// forecast end, unless other helpers still work on its SOS and the steal
/// is cheap ([`ShareInput::dear_steal`]). The common end never comes after
/// the owner alone would finish. An idle helper on the owner's
/// host board takes at least one id when that pays
/// ([`ShareInput::least_one`]). The share is rounded to the whole id that
/// ends helper and owner sooner: one id more costs the helper `(1 − f)/v_h`
/// seconds, one less costs the owner `f/v_j`, `f` the fraction of the share.
pub fn share(policy: HelpPolicy, s: &ShareInput) -> u64 {
    let r = s.owner_remaining.max(0.0);
    let vj = usable(s.owner_speed);
    let vh = usable(s.helper_speed);
    let k = if vh == 0.0 {
        // A helper that has never computed: take one id and learn its speed.
        1.0
    } else if vj == 0.0 {
        // The owner makes no progress: take everything available.
        r
    } else {
        Sizing::new(s, r, vj, vh).ids(policy)
    };
    round_in_time(k, vh, vj).min(s.available)
}

/// A share sized between an owner and a helper whose speeds are known.
struct Sizing<'a> {
    s: &'a ShareInput,
    /// `R`, `v_j` and `v_h`.
    r: f64,
    vj: f64,
    vh: f64,
    /// The earlier helpers still at work: speed, ids left, steal cost.
    busy: Vec<(f64, f64, f64)>,
    /// Seconds from now to the share's start.
    start: f64,
}

impl<'a> Sizing<'a> {
    fn new(s: &'a ShareInput, r: f64, vj: f64, vh: f64) -> Sizing<'a> {
        // Helpers that finished their share help no more.
        let busy = (s.others.iter())
            .filter(|&&(_, rem, _)| rem > 0.0)
            .map(|&(v, rem, cost)| (usable(v), rem, cost.max(0.0)))
            .collect();
        // The share starts after the helper's own work, or when the steal
        // is done if that comes later (the steal passes while the helper
        // computes).
        let start = s.steal_cost.max(s.busy_for).max(0.0);
        Sizing {
            s,
            r,
            vj,
            vh,
            busy,
            start,
        }
    }

    /// The common end T of the owner's work with the earlier helpers and
    /// `speed` more, whose work starts `ahead` ids in: r + sr + ahead =
    /// (vj + sv + speed)·T. An earlier helper whose work ends before T,
    /// but too late to steal and compute one id more by T, cannot take
    /// the rest of T's work: it is out of the common end. (Counted in,
    /// the four early helpers of sites16-one, done 0.025 s before the
    /// common end and 80 ms a steal away, left 5 of the slowed owner's
    /// ids to steals of 1 to 4 ids at its end, and those helpers ended
    /// 0.03 to 0.1 s after the others. Helpers whose work ends after T
    /// left out as well: simulator with 2 % jitter, 10,000 ranks over 12
    /// seeds, 0.9512 → 0.9488.)
    fn common_end(&self, speed: f64, ahead: f64) -> f64 {
        let (r, vj) = (self.r, self.vj);
        let (mut sv, mut sr): (f64, f64) =
            (self.busy.iter()).fold((0.0, 0.0), |(sv, sr), &(v, rem, _)| (sv + v, sr + rem));
        let mut t = (r + sr + ahead) / (vj + sv + speed);
        for &(v, rem, cost) in &self.busy {
            if v * t >= rem && v * (t - cost) - rem < 1.0 {
                (sv, sr) = (sv - v, sr - rem);
                t = (r + sr + ahead) / (vj + sv + speed);
            }
        }
        t
    }

    /// The share in ids, before rounding: what the helper computes from
    /// its start to the end [`Sizing::end`] sets, at least one id when
    /// [`ShareInput::least_one`] says it pays.
    fn ids(&self, policy: HelpPolicy) -> f64 {
        let (r, vj, vh) = (self.r, self.vj, self.vh);
        let k = match policy {
            HelpPolicy::Proportional => r * vh / (vh + vj),
            HelpPolicy::Half => (r * vh / (vh + vj)).min(r / 2.0),
            // The helper starts after its own work or its steal, `start`
            // from now: the common end T solves r + sr = (vj + sv)·T +
            // vh·(T − start); the share is vh·(T − start), and k the work
            // of T.
            HelpPolicy::Balanced => vh * self.common_end(vh, vh * self.start),
        };
        let k = (vh * (self.end(k) - self.start)).max(0.0);
        let s = self.s;
        if s.least_one && s.busy_for <= 0.0 && LEAST_IDS / vh + s.steal_cost < r / vj {
            k.max(1.0)
        } else {
            k
        }
    }

    /// Seconds from now to the end of the share: when the policy's `k` ids
    /// would end, capped by the job's forecast end, at least a least share
    /// for an owner alone that ends by the job's end, and never after the
    /// owner alone would finish.
    fn end(&self, k: f64) -> f64 {
        let (s, r, vj, vh) = (self.s, self.r, self.vj, self.vh);
        let n = self.busy.len() as f64;
        // Seconds to the common end the policy aims at, capped by the job's
        // forecast end less the risk of a long last realisation.
        let mut end = k / vh;
        // Every share ends at least two steals away.
        let least_end = 2.0 * s.steal_cost;
        // Seconds to the job's forecast end (infinite while unknown). It
        // counts no steal: a share may end one steal past it, unless the
        // steal passes while the helper computes.
        let steal = (s.steal_cost - s.busy_for).max(0.0);
        let to_end = s.job_left + steal;
        let job_end = to_end.max(least_end);
        let mut cap = to_end - s.risk.max(0.0);
        if s.near_helpers > 0.0 {
            let to_come = (s.near_helpers - n).max(1.0);
            cap = cap.max(self.common_end(to_come * vh, 0.0));
        }
        end = end.min(cap.max(least_end));
        // An owner alone (no other helper at work, or a dear steal) with
        // more than three steals' worth of work gets four steals' worth
        // from a helper at least as fast: a steal is worth its cost. But
        // not past the job's forecast end, which would end the job late.
        let alone = n == 0.0 || s.steal_cost >= s.dear_steal;
        if r / vj > 3.0 * s.steal_cost && vh >= vj && alone {
            end = end.max((5.0 * s.steal_cost).min(job_end));
        }
        // Never later than the owner alone would finish.
        end.min(r / vj)
    }
}

/// `k` ids rounded in time, as [`share`] says. Between ranks of the same
/// speed that is rounding to the nearest; a helper four times as fast as its
/// owner takes the id from a fifth on. With a zero speed the share is what
/// it was: a helper that has never computed takes its one id, and one of a
/// stalled owner its whole tail.
fn round_in_time(k: f64, vh: f64, vj: f64) -> u64 {
    let (whole, f) = (k.floor(), k - k.floor());
    whole as u64 + u64::from((1.0 - f) * vj < f * vh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(r: f64, vj: f64, vh: f64, others: Vec<(f64, f64, f64)>) -> ShareInput {
        ShareInput {
            owner_remaining: r,
            owner_speed: vj,
            helper_speed: vh,
            others,
            available: 1000,
            job_left: f64::INFINITY,
            steal_cost: 0.0,
            near_helpers: 0.0,
            busy_for: 0.0,
            risk: 0.0,
            least_one: false,
            dear_steal: 0.25,
        }
    }

    #[test]
    fn shares_follow_the_policies() {
        let s = input(300.0, 10.0, 20.0, vec![]);
        assert_eq!(share(HelpPolicy::Proportional, &s), 200);
        assert_eq!(share(HelpPolicy::Half, &s), 150);
        assert_eq!(share(HelpPolicy::Balanced, &s), 200);
        // One earlier helper at speed 10 with 100 ids left: all three finish together.
        let s = input(300.0, 10.0, 20.0, vec![(10.0, 100.0, 0.0)]);
        let k = share(HelpPolicy::Balanced, &s);
        assert_eq!(k, 200);
        let t_owner = (300.0 - k as f64) / 10.0;
        assert!((t_owner - k as f64 / 20.0).abs() < 0.1);
        // Never more than the tail; zero when the helper is too slow to matter.
        let mut s = input(300.0, 10.0, 20.0, vec![]);
        s.available = 50;
        assert_eq!(share(HelpPolicy::Proportional, &s), 50);
        assert_eq!(
            share(HelpPolicy::Proportional, &input(2.0, 100.0, 1.0, vec![])),
            0
        );
    }

    #[test]
    fn shares_stop_at_the_job_end_and_pay_for_the_steal() {
        // Alone, the helper would take 200 (4 s of work at 50/s); the job is
        // forecast to end in 1 s: it takes 1 s of work, and others get the rest.
        let mut s = input(300.0, 25.0, 50.0, vec![]);
        s.job_left = 1.0;
        assert_eq!(share(HelpPolicy::Balanced, &s), 50);
        // A steal costing 0.4 s: the share may end one steal past the job's
        // forecast end (1.4 s, the first 0.4 s of which the steal takes),
        // short of four steals' worth (80 ids), and ends at least two
        // steals away (0.8 s) however near the job's end.
        s.steal_cost = 0.4;
        assert_eq!(share(HelpPolicy::Balanced, &s), 50);
        s.job_left = 0.1;
        assert_eq!(share(HelpPolicy::Balanced, &s), 20);
        // Not from a helper slower than the owner: 2 steals' worth at most
        // (0.8 s, the first 0.4 of which the steal takes) at 20/s.
        let mut slow = s.clone();
        slow.helper_speed = 20.0;
        assert_eq!(share(HelpPolicy::Balanced, &slow), 8);
        // The job's end unknown: the policy's share, which starts once the
        // steal is done, and ends with the owner.
        s.job_left = f64::INFINITY;
        let k = share(HelpPolicy::Balanced, &s);
        assert_eq!(k, 194);
        let (owner_ends, helper_ends) = ((300.0 - k as f64) / 25.0, 0.4 + k as f64 / 50.0);
        assert!((owner_ends - helper_ends).abs() <= 1.0 / 25.0 + 1e-9);
        // A cheap steal near the forecast end: no more than the time left.
        s.steal_cost = 0.01;
        s.job_left = 0.5;
        assert_eq!(share(HelpPolicy::Balanced, &s), 25);
        // Little work left: a steal would cost more than it saves.
        let mut s = input(10.0, 25.0, 50.0, vec![]);
        s.steal_cost = 0.4;
        assert_eq!(share(HelpPolicy::Balanced, &s), 0);
    }

    #[test]
    fn a_helper_that_looks_ahead_steals_while_it_computes() {
        // The job's forecast end 4 s away, a steal of 80 ms: an idle helper
        // ends a steal later, its share starting after the steal.
        let mut s = input(1000.0, 12.5, 50.0, vec![]);
        s.job_left = 4.0;
        s.steal_cost = 0.08;
        assert_eq!(share(HelpPolicy::Balanced, &s), 200);
        // With 3 s of its own work first, the steal passes meanwhile: the
        // share ends at the forecast end, 1 s of work (54 ids before).
        s.busy_for = 3.0;
        assert_eq!(share(HelpPolicy::Balanced, &s), 50);
    }

    #[test]
    fn an_earlier_helper_too_far_to_take_more_by_the_common_end_is_out_of_it() {
        // 100 ids left at 12.5/s; an earlier helper at 50/s ends its 55 in
        // 1.1 s. Counted in, the common end is 155 / 112.5 = 1.38 s.
        let mut s = input(100.0, 12.5, 50.0, vec![(50.0, 55.0, 0.0)]);
        assert_eq!(share(HelpPolicy::Balanced, &s), 69);
        // A steal of 0.3 s away, it could not compute one id more by then:
        // the owner and this helper end together, at 100 / 62.5 = 1.6 s.
        s.others[0].2 = 0.3;
        assert_eq!(share(HelpPolicy::Balanced, &s), 80);
    }

    #[test]
    fn a_share_is_rounded_to_the_id_that_ends_helper_and_owner_sooner() {
        // 100.4 ids left at 12.5/s, a helper at 50/s: 80.32 ids end both at
        // 1.606 s. With 80 the owner ends at 1.632 s, with 81 the helper at
        // 1.62 s (and the owner at 1.552 s): it takes 81.
        let s = input(100.4, 12.5, 50.0, vec![]);
        assert_eq!(share(HelpPolicy::Balanced, &s), 81);
        // The other way round, a helper at 12.5/s of an owner at 50/s with
        // 103 ids: 20.6 ids. With 21 the helper ends at 1.68 s, with 20 the
        // owner at 1.66 s: it takes 20.
        let s = input(103.0, 50.0, 12.5, vec![]);
        assert_eq!(share(HelpPolicy::Balanced, &s), 20);
        // Of the same speed, to the nearest.
        assert_eq!(
            share(HelpPolicy::Balanced, &input(100.8, 50.0, 50.0, vec![])),
            50
        );
        assert_eq!(
            share(HelpPolicy::Balanced, &input(101.2, 50.0, 50.0, vec![])),
            51
        );
    }

    #[test]
    fn while_far_helpers_wait_the_near_ones_take_shares_that_close_the_sos() {
        // 250 ids left at 12.5/s; the job's forecast end, which counts the
        // far helpers too, is 0.3 s away: 15 ids at 50/s.
        let mut s = input(250.0, 12.5, 50.0, vec![]);
        s.job_left = 0.3;
        assert_eq!(share(HelpPolicy::Balanced, &s), 15);
        // The far ones wait their grace: 7 near helpers close the SOS in
        // 250 / (12.5 + 7 · 50) s, and each takes that much work: 34.48
        // ids, rounded up (0.52 of an id more is 10 ms of the helper's, 0.48
        // of an id less 38 ms of the owner's).
        s.near_helpers = 7.0;
        assert_eq!(share(HelpPolicy::Balanced, &s), 35);
        // Three of them took theirs already and compute it: the four to
        // come take what they leave, no less (34.8 ids each: the three end
        // less than one id before the common end, and take no more).
        let mut s = input(148.0, 12.5, 50.0, vec![(50.0, 34.0, 0.0); 3]);
        s.job_left = 0.3;
        s.near_helpers = 7.0;
        assert_eq!(share(HelpPolicy::Balanced, &s), 35);
    }

    #[test]
    fn an_idle_helper_on_the_owners_host_board_takes_one_id_when_it_pays() {
        // The job's forecast end is past (half a check interval left): a
        // helper at 5 ids/s takes nothing of an owner's 30 ids at 5 ids/s,
        // unless the SOS is on its host board, where nobody else sees it.
        let mut s = input(30.0, 5.0, 5.0, vec![]);
        s.job_left = 0.125;
        assert_eq!(share(HelpPolicy::Balanced, &s), 1);
        s.job_left = 0.05;
        assert_eq!(share(HelpPolicy::Balanced, &s), 0);
        s.least_one = true;
        assert_eq!(share(HelpPolicy::Balanced, &s), 1);
        // Not when the owner alone ends within four of the helper's ids,
        // nor for a helper that still computes its own work.
        s.owner_remaining = 3.5;
        assert_eq!(share(HelpPolicy::Balanced, &s), 0);
        s.owner_remaining = 30.0;
        s.busy_for = 0.5;
        assert_eq!(share(HelpPolicy::Balanced, &s), 0);
    }

    #[test]
    fn a_helper_whose_realisations_vary_ends_its_share_early() {
        // Job forecast to end in 1 s: a helper whose last realisation may
        // run 0.4 s long takes 0.6 s of work; one whose may run past the
        // end takes nothing (faster ranks finish those realisations).
        let mut s = input(300.0, 25.0, 50.0, vec![]);
        s.job_left = 1.0;
        s.risk = 0.4;
        assert_eq!(share(HelpPolicy::Balanced, &s), 30);
        s.risk = 1.5;
        assert_eq!(share(HelpPolicy::Balanced, &s), 0);
        // Far from the job's end, the policy's share is untouched.
        s.job_left = 100.0;
        assert_eq!(share(HelpPolicy::Balanced, &s), 200);
    }

    #[test]
    fn a_helper_after_a_dear_steal_ends_with_the_owner_and_its_cheap_helpers() {
        // The end of a sites16 run: a slowed owner with 27 ids left, its
        // three slowed host-mates helping it from steals that cost nothing,
        // and a fast helper 0.19 s a steal away. Its share starts once the
        // steal is done, and all end together, within one of the owner's
        // ids: 11 ids, where a common end that started the share at once
        // gave 5, and the owner and its host-mates ended 0.1 s after the
        // fast helper.
        let mut s = input(27.0, 12.5, 50.0, vec![(12.5, 1.0, 0.01); 3]);
        s.steal_cost = 0.19;
        let k = share(HelpPolicy::Balanced, &s) as f64;
        assert_eq!(k, 11.0);
        let (owners_end, helper_end) = ((27.0 + 3.0 - k) / 50.0, 0.19 + k / 50.0);
        assert!((owners_end - helper_end).abs() < 1.0 / 12.5);
    }

    #[test]
    fn the_least_share_is_for_owners_alone_or_dear_steals_and_ends_by_the_job() {
        // 30 ids left at 25/s, steals of 0.12 s, the job's end far: alone,
        // the owner gets four steals' worth (0.6 s, the first 0.12 s of
        // which the steal takes: 24 ids at 50/s), not the balanced 18.
        let mut s = input(30.0, 25.0, 50.0, vec![]);
        s.job_left = 10.0;
        s.steal_cost = 0.12;
        assert_eq!(share(HelpPolicy::Balanced, &s), 24);
        // Realisations whose last may run 9.8 s long trim the policy's
        // share (0.32 s), not the least one.
        s.risk = 9.8;
        assert_eq!(share(HelpPolicy::Balanced, &s), 24);
        s.risk = 0.0;
        // 300 ids left and the job's forecast end 0.3 s away: the share
        // ends one steal past it (0.42 s), the least share too: 15 ids.
        s.owner_remaining = 300.0;
        s.job_left = 0.3;
        assert_eq!(share(HelpPolicy::Balanced, &s), 15);
        // Another helper still works on the SOS: the same.
        s.others = vec![(50.0, 20.0, 0.0)];
        assert_eq!(share(HelpPolicy::Balanced, &s), 15);
        // A dear steal (0.4 s, the configured lateness is 0.25 s): the share
        // ends two steals away (0.8 s), the first of which the steal takes.
        s.steal_cost = 0.4;
        assert_eq!(share(HelpPolicy::Balanced, &s), 20);
    }

    #[test]
    fn balanced_forgets_helpers_that_finished_their_share() {
        // An earlier helper with nothing left does not lower the share.
        let gone = input(300.0, 10.0, 20.0, vec![(40.0, -3.0, 0.0)]);
        assert_eq!(share(HelpPolicy::Balanced, &gone), 200);
    }
}
