//! The helper's side of Algorithm 2, pure: which open SOS to help, how many
//! ids to take, and which slots to claim for them (DESIGN §5, §7). The
//! clerk ([`crate::clerk`]) reads the index and the SOS files and claims
//! what these functions choose.

use super::request::Search;
use crate::cost::OPS;
use crate::params::Params;
use crate::plan::{HelpPolicy, ShareInput, share};
use crate::protocol::{Entry, Index, Level, Post, Slot};
use crate::topology::{IdleMap, Topology};
use crate::verdict::hosts_late;

/// What a helper asks of an SOS: the figures of its share besides the
/// SOS's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Ask {
    /// The helper's rank.
    pub me: usize,
    /// When, seconds since the start.
    pub now: f64,
    /// The helper's distance from the owner.
    pub distance: u8,
    /// The share policy.
    pub policy: HelpPolicy,
    /// Seconds one claim takes: a slot whose work at the owner's speed is
    /// less is not worth its claim.
    pub claim_cost: f64,
    /// The helper's figures of the share; the owner's (its remaining ids
    /// and speed, its other helpers, the ids available) come from each
    /// post read ([`Ask::share`]).
    pub input: ShareInput,
}

impl Ask {
    /// What helper `me` (settings `params`) asks of candidate `c` on
    /// `level`'s board in `search`; `site_end`: an early look's end of the
    /// site's late ranks ([`early_site_end`]). A steal's cost is the one
    /// measured at the candidate's distance; a claim is one of a steal's
    /// operations.
    pub fn new(
        me: usize,
        params: &Params,
        search: &Search,
        c: &Candidate,
        level: Level,
        site_end: Option<f64>,
    ) -> Ask {
        let steal_cost = match level {
            Level::Shared => search.steal_cost[c.distance.min(2) as usize],
            Level::Host => search.host_steal,
        };
        let claim_cost = match level {
            Level::Shared => search.steal_cost[0],
            Level::Host => search.host_steal,
        } / OPS.steal;
        Ask {
            me,
            now: search.now,
            distance: c.distance,
            policy: search.policy,
            claim_cost,
            input: ShareInput {
                owner_remaining: 0.0,
                owner_speed: 0.0,
                helper_speed: search.speed,
                others: Vec::new(),
                available: 0,
                job_left: match site_end {
                    Some(end) if c.distance == 1 => search.job_left.max(end - search.now),
                    _ => search.job_left,
                },
                steal_cost,
                near_helpers: c.near_helpers,
                busy_for: search.busy_for,
                risk: search.risk,
                least_one: level == Level::Host,
                dear_steal: params.late_threshold,
            },
        }
    }

    /// The ids to take from the open post `p`, whose slots `taken` are
    /// known to be claimed (0: nothing worth a steal).
    pub fn share(&self, p: &Post, taken: &[Slot]) -> u64 {
        let now = self.now;
        let h = &self.input;
        // Slots found claimed whose claims are not known: another helper's
        // share, taken about now at this helper's speed.
        let unknown = (taken.iter())
            .filter(|s| !p.helped.iter().any(|c| c.slot == **s))
            .map(|s| (h.helper_speed, s.len() as f64, h.steal_cost));
        let others = (p.helped.iter())
            .map(|c| c.work_left(now))
            .chain(unknown)
            .collect();
        let available = (p.slots.iter())
            .filter(|s| !taken.contains(s))
            .map(Slot::len)
            .sum();
        share(
            self.policy,
            &ShareInput {
                owner_remaining: p.unhelped(now, taken),
                owner_speed: p.speed,
                others,
                available,
                ..h.clone()
            },
        )
    }

    /// The slots to claim for a share of `p`, less those in `taken`: from
    /// the back (the owner takes from the front), each helper starting at
    /// its own place, each slot that brings the share's end nearer, in time:
    /// ids past the share delay the helper at its speed, ids short of it
    /// are left to the owner or to a helper as fast as this one, whichever
    /// is faster. No slot ends the helper after the owner alone would end,
    /// and each is worth a claim at the owner's speed. An idle helper at
    /// least as fast as the owner whose share fits no slot takes the
    /// smallest that ends it before the owner alone would.
    pub fn slots(&self, p: &Post, taken: &[Slot]) -> Vec<Slot> {
        let k = self.share(p, taken) as f64;
        let (vh, vj) = (self.input.helper_speed.max(1e-9), p.speed.max(1e-9));
        // Help never ends after the owner alone would.
        let most = vh * p.unhelped(self.now, taken) / vj;
        // Each helper starts at its own place among the largest slots (the
        // back's, equal), so that helpers that read the SOS at once seldom
        // try the same one.
        let mut free: Vec<&Slot> = p
            .slots
            .iter()
            .rev()
            .filter(|s| !taken.contains(s))
            .collect();
        let largest = free.iter().map(|s| s.len()).max().unwrap_or(0);
        let n = free.iter().take_while(|s| s.len() + 1 >= largest).count();
        if n > 0 {
            free[..n].rotate_left(self.me % n);
        }
        let mut got = 0.0;
        let mut out = Vec::new();
        for s in &free {
            let n = s.len() as f64;
            if got >= k || (!out.is_empty() && n / vj < self.claim_cost) {
                break;
            }
            let sooner = got + n <= k || (got + n - k) / vh < (k - got) / vj.max(vh);
            if sooner && got + n <= most {
                got += n;
                out.push((*s).clone());
            }
        }
        // An idle helper at least as fast as the owner whose share fits no
        // slot takes the smallest that still ends it before the owner alone
        // would end: its time is otherwise lost, and it computes any slot
        // sooner than the owner, costly realisations included.
        if out.is_empty() && k > 0.0 && self.input.busy_for <= 0.0 && vh >= vj {
            let fits = free.into_iter().filter(|s| s.len() as f64 <= most);
            out.extend(fits.min_by_key(|s| s.len()).cloned());
        }
        out
    }

    /// This ask with the steal's cost at least what the helpers of `p` at
    /// the same distance from `owner` measured theirs: a helper that never
    /// took that far counts its steal free otherwise.
    pub fn priced(&self, p: &Post, owner: usize, me: usize, topology: &Topology) -> Ask {
        let steal_cost = (p.helped.iter())
            .filter(|c| c.by != me && c.by < topology.ranks())
            .filter(|c| topology.distance(c.by, owner) == self.distance)
            .map(|c| c.steal_cost)
            .fold(self.input.steal_cost, f64::max);
        let mut ask = self.clone();
        ask.input.steal_cost = steal_cost;
        ask
    }
}

/// Seconds from `now` to the end of the owner's work in `p` that no helper
/// took: the helpers so far sized their shares to end by then.
pub fn owner_left(p: &Post, now: f64) -> f64 {
    if p.speed > 0.0 {
        p.unhelped(now, &[]) / p.speed
    } else {
        f64::INFINITY
    }
}

/// An open SOS a search may take from.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The helper's distance from the owner.
    pub distance: u8,
    /// The index's entry.
    pub entry: Entry,
    /// Helpers nearer the owner that close it while farther ones wait.
    pub near_helpers: f64,
}

/// The settings a search decides with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rules {
    /// Seconds a far helper waits per unit of distance.
    pub grace: f64,
    /// Seconds an SOS must have been open for an early share.
    pub speed_window: f64,
}

/// The open SOS of `index` that rank `me` may take from now, nearest first,
/// then the latest forecast, each distance's list started at the rank's
/// own place so that helpers spread; and the soonest time another becomes
/// ready (a far one's grace).
///
/// A helper at distance `d` takes from an SOS only once it has been open,
/// and this helper idle, for `d · grace`: nearer helpers go first, and
/// remote help still comes when no near one is free. The grace is skipped
/// when no nearer rank was free at the last wave, or when those free could
/// not finish the owner's work within it ([`nearer_closing`]).
pub fn candidates(
    index: &Index,
    me: usize,
    topology: &Topology,
    search: &Search,
    rules: Rules,
) -> (Vec<Candidate>, f64) {
    let now = search.now;
    let mut found: Vec<(u8, &Entry)> = (index.entries.iter())
        .filter(|e| e.rank != me && e.rank < topology.ranks())
        .map(|e| (topology.distance(me, e.rank), e))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.forecast.total_cmp(&a.1.forecast)));
    let mut start = 0;
    while start < found.len() {
        let d = found[start].0;
        let n = found[start..].iter().take_while(|c| c.0 == d).count();
        found[start..start + n].rotate_left(me % n);
        start += n;
    }
    // Open SOS per host and site: the nearer helpers share themselves
    // among those.
    let owners = topology.idle_map(0, index.entries.iter().map(|e| e.rank));
    let open = |rank, g| topology.free_nearer(&owners, rank, g) as usize;
    let mut ready = f64::INFINITY;
    let mut out = Vec::new();
    for (d, entry) in found {
        if search.early && !worth_early(search, entry, d, topology, rules) {
            continue;
        }
        let closing =
            |g: u8| nearer_closing(search, entry, g, open(entry.rank, g), topology, rules);
        let grace = if d > 0 && closing(d).is_some() {
            f64::from(d) * rules.grace
        } else {
            0.0
        };
        let ready_at = entry.opened_at.max(search.idle_since) + grace;
        if now < ready_at {
            ready = ready.min(ready_at);
            continue;
        }
        // Free ranks farther than this one that wait their grace leave
        // this SOS to the nearer ones.
        let near_helpers = (d + 1..=2)
            .filter(|&g| topology.free_nearer(&search.idle, entry.rank, g) < search.idle.free())
            .find_map(closing)
            .map_or(0.0, |h| h.max(1.0));
        out.push(Candidate {
            distance: d,
            entry: entry.clone(),
            near_helpers,
        });
    }
    (out, ready)
}

/// Whether the ranks free at the last wave that are nearer than `d` to the
/// owner of `entry` (a far helper's grace is their head start) can finish
/// the owner's work with it within that grace, if they are as fast as this
/// helper and share themselves among the `open` SOS near them. If so: how
/// many of them each of those SOS may expect.
pub fn nearer_closing(
    search: &Search,
    entry: &Entry,
    d: u8,
    open: usize,
    topology: &Topology,
    rules: Rules,
) -> Option<f64> {
    let near = f64::from(topology.free_nearer(&search.idle, entry.rank, d));
    if near == 0.0 {
        return None;
    }
    let per_sos = near / open.max(1) as f64;
    let (vo, vh) = (entry.speed, search.speed);
    if vo <= 0.0 || vh <= 0.0 {
        return Some(per_sos);
    }
    // The owner's work when it posted (the index tells no more).
    let work = (entry.forecast - entry.opened_at).max(0.0) * vo;
    (work / (vo + per_sos * vh) <= f64::from(d) * rules.grace).then_some(per_sos)
}

/// Whether a helper early against the job's forecast end takes from the
/// SOS of `entry` at distance `d` ([`Search::early`]): only from another
/// host's SOS, of an owner no faster than itself, open for a speed window
/// (a lasting lateness, not a passing fluctuation), and only when the hosts
/// nearer to the owner will be late as a whole, at the last wave's figures,
/// by more than `d` graces of their speed: nearer ranks close a smaller gap.
pub fn worth_early(
    search: &Search,
    entry: &Entry,
    d: u8,
    topology: &Topology,
    rules: Rules,
) -> bool {
    if d == 0 || search.speed < entry.speed || search.now - entry.opened_at < rules.speed_window {
        return false;
    }
    hosts_late(
        &search.hosts,
        topology.hosts_nearer(entry.rank, d),
        search.job_end - search.counted_at,
        f64::from(d) * rules.grace,
    )
}

/// The end an early share from an owner on this rank's site is sized to,
/// instead of the job's forecast end: the site's own, when there are other
/// sites and this one will be late as a whole by no more than their
/// helpers' grace (`2 · grace`): those wait that long, so the site closes
/// its own lateness.
pub fn early_site_end(search: &Search, topology: &Topology, rules: Rules) -> Option<f64> {
    if !search.early || topology.sites() == 1 {
        return None;
    }
    let end = search.site_end;
    (end - search.job_end <= 2.0 * rules.grace).then_some(end)
}

/// The idle map of the owners of `index`'s entries (for tests and callers
/// that count open SOS near a rank).
pub fn owners(index: &Index, topology: &Topology) -> IdleMap {
    topology.idle_map(0, index.entries.iter().map(|e| e.rank))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdSet;
    use crate::protocol::{Claim, cut};

    /// An owner at 10 ids/s with 300 ids left, all in slots of 50, and a
    /// helper at 50 ids/s that took the last slot at t = 1 s with
    /// `busy_for` seconds of its own work left.
    fn post_helped(busy_for: f64) -> Post {
        let slots = cut(&IdSet::from_range(0..350), 1, 0, &[50; 7]);
        Post {
            speed: 10.0,
            remaining: 300,
            forecast: 32.0,
            host: "h".into(),
            site: "s".into(),
            opened_at: 0.0,
            at: 2.0,
            slots: slots[..6].to_vec(),
            helped: vec![Claim {
                owner: 0,
                slot: slots[6].clone(),
                by: 1,
                at: 1.0,
                speed: 50.0,
                busy_for,
                steal_cost: 0.0,
            }],
        }
    }

    fn ask() -> Ask {
        Ask {
            me: 0,
            now: 2.0,
            distance: 0,
            policy: HelpPolicy::Balanced,
            claim_cost: 0.0,
            input: ShareInput {
                owner_remaining: 0.0,
                owner_speed: 0.0,
                helper_speed: 50.0,
                others: Vec::new(),
                available: 0,
                job_left: 100.0,
                steal_cost: 0.0,
                near_helpers: 0.0,
                busy_for: 0.0,
                risk: 0.0,
                least_one: false,
                dear_steal: 1.0,
            },
        }
    }

    /// [`ask`] with `f` applied to its share's figures.
    fn ask_with(f: impl FnOnce(&mut ShareInput)) -> Ask {
        let mut a = ask();
        f(&mut a.input);
        a
    }

    #[test]
    fn a_share_taken_ahead_of_need_counts_as_work_its_helper_still_has() {
        // At t = 2 s the earlier helper has 2 s of its own work left, then
        // its 50 ids: 150 ids' worth. Owner, it and this helper end
        // together: 50 · (300 + 150) / (10 + 50 + 50) = 204.5 ids.
        assert_eq!(ask().share(&post_helped(3.0), &[]), 205);
        // Taken by an idle helper, the 50 ids were computed by t = 2 s: the
        // owner is alone, 50 · 300 / (10 + 50) = 250 ids.
        assert_eq!(ask().share(&post_helped(0.0), &[]), 250);
    }

    #[test]
    fn slots_are_claimed_from_the_back_to_the_nearest_slot_of_the_share() {
        let p = post_helped(0.0);
        // 250 ids: the five back slots.
        let got = ask().slots(&p, &[]);
        assert_eq!(
            got.iter().map(|s| s.index).collect::<Vec<_>>(),
            [5, 4, 3, 2, 1]
        );
        // One of them known taken, by a helper whose claim is not known:
        // another helper's 50 ids, at this one's speed. The owner has 250
        // ids left; all three end together with a share of 136: three
        // slots, the claims skipping the taken one.
        let taken = vec![p.slots[4].clone()];
        let got = ask().slots(&p, &taken);
        assert_eq!(got.iter().map(|s| s.index).collect::<Vec<_>>(), [5, 3, 2]);
        // A slow helper (10 ids/s: a share of 150) takes 3 slots.
        let slow = ask_with(|i| i.helper_speed = 10.0);
        assert_eq!(slow.slots(&p, &[]).len(), 3);
        // The job ends in 0.6 s: 30 ids wanted, at least half a slot of 50.
        let late = ask_with(|i| i.job_left = 0.6);
        assert_eq!(late.slots(&p, &[]).len(), 1);
        // 20 ids wanted: nearer none than nothing. An idle helper still
        // takes one slot (its time is otherwise lost), a busy one none.
        let later = ask_with(|i| i.job_left = 0.4);
        assert_eq!(later.slots(&p, &[]).len(), 1);
        let busy = ask_with(|i| {
            i.job_left = 0.4;
            i.busy_for = 0.1;
        });
        assert!(busy.slots(&p, &[]).is_empty());
        // A helper at half the owner's speed, 30 ids wanted: a slot of 50
        // would end it 4 s past its share, the 30 short of it end the owner
        // 3 s later: none. 40 wanted: 2 s against 4 s, the slot.
        let slower = |job_left| {
            ask_with(|i| {
                i.helper_speed = 5.0;
                i.job_left = job_left;
            })
        };
        assert!(slower(6.0).slots(&p, &[]).is_empty());
        assert_eq!(slower(8.0).slots(&p, &[]).len(), 1);
        // Slots whose work at the owner's speed is less than a claim's
        // cost are left after the first.
        let dear = Ask {
            claim_cost: 6.0,
            ..ask()
        };
        assert_eq!(dear.slots(&p, &[]).len(), 1);
    }

    #[test]
    fn a_helper_that_never_stole_that_far_counts_the_steal_as_its_peers_measured() {
        // 2 sites of 2 hosts of 2 ranks: the owner is rank 0, the earlier
        // helper rank 2 (distance 1) measured its steals at 0.2 s.
        let topology = Topology::laid_out(8, 2, 2);
        let mut p = post_helped(0.0);
        p.helped[0].by = 2;
        p.helped[0].steal_cost = 0.2;
        let priced = |me: usize, distance: u8| {
            Ask { distance, ..ask() }
                .priced(&p, 0, me, &topology)
                .input
                .steal_cost
        };
        assert_eq!(priced(3, 1), 0.2);
        assert_eq!(priced(1, 0), 0.0);
        assert_eq!(priced(4, 2), 0.0);
        assert_eq!(priced(2, 1), 0.0);
    }
}
