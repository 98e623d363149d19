//! The job as a rank sees it from the termination waves ([`crate::verdict`]):
//! its forecast end, each host's work, the idle ranks and the open SOS.

use crate::cost::slot;
use crate::protocol::Level;
use crate::topology::{IdleMap, Topology};
use crate::verdict::{Job, bit, hosts_end, hosts_late};
use std::sync::Arc;

/// What the last termination waves said of the job, as one rank keeps it.
#[derive(Debug)]
pub(super) struct JobView {
    /// The job's forecast end, from the last wave (infinite before).
    pub(super) end: f64,
    /// Each host's ids left and speed at the last wave, as of `counted_at`.
    pub(super) hosts: Arc<Vec<(u64, f64)>>,
    pub(super) counted_at: f64,
    /// When the hosts of this rank's site will have computed what they own,
    /// at the last five waves (infinite before): see [`JobView::site_end`].
    site_ends: [f64; 5],
    /// When the ranks of this rank's host will have computed what they own,
    /// at the last wave.
    host_end: f64,
    /// Idle ranks, and free ranks per host and site, at the last wave.
    pub(super) idle: Arc<IdleMap>,
    /// The speed of a helper to come: the free ranks' mean at the last
    /// wave, or the job's mean while none is free.
    pub(super) helper_speed: f64,
    /// Open SOS this rank can reach, at the last wave.
    pub(super) open_sos: u64,
    /// The helpers an SOS of this rank may expect on the shared board and
    /// on its host's: the ranks there without an open SOS, at the last wave.
    helpers: [u64; 2],
    /// The distance to the nearest host all of whose ranks have an SOS open
    /// (0 when none): this rank's steals from there set how far ahead it
    /// looks ([`JobView::nearest_sos`]).
    pub(super) sos_near: u8,
    /// A watcher saw the open index change since the last look at it.
    pub(super) index_changed: bool,
}

impl Default for JobView {
    fn default() -> JobView {
        JobView {
            end: f64::INFINITY,
            hosts: Arc::default(),
            counted_at: 0.0,
            site_ends: [f64::INFINITY; 5],
            host_end: f64::INFINITY,
            idle: Arc::default(),
            helper_speed: 0.0,
            open_sos: 0,
            helpers: [0; 2],
            sos_near: 0,
            index_changed: false,
        }
    }
}

impl JobView {
    /// What a termination wave says of the whole job of `total` ids, to
    /// rank `me`: its forecast end (`at + (total − completed) / speed`,
    /// dated by when the ranks joined), and the idle ranks and open SOS,
    /// which tell how many helpers an SOS may expect.
    pub(super) fn observe(&mut self, job: &Job, total: u64, me: usize, topology: &Topology) {
        if job.speed > 0.0 {
            self.end = job.at + total.saturating_sub(job.completed) as f64 / job.speed;
        }
        self.counted_at = job.at;
        let host = topology.host_index(me);
        self.host_end = job.host_end(host);
        self.open_sos = job.reachable_open(host);
        let without_sos = |rs: &mut dyn Iterator<Item = usize>| {
            rs.filter(|&r| r != me && !bit(&job.sos_ranks, r)).count() as u64
        };
        self.helpers = [
            without_sos(&mut (0..topology.ranks())),
            without_sos(&mut topology.members(host).iter().copied()),
        ];
        self.sos_near = Self::nearest_sos(job, me, topology);
        if topology.sites() > 1 {
            let site = topology.hosts_nearer(me, 2);
            self.site_ends.rotate_left(1);
            self.site_ends[4] = job.at + hosts_end(&job.hosts, site);
        }
        let free = f64::from(job.idle.free());
        self.helper_speed = if free > 0.0 && job.free_speed > 0.0 {
            job.free_speed / free
        } else {
            job.speed / topology.ranks().max(1) as f64
        };
        self.hosts = job.hosts.clone();
        self.idle = job.idle.clone();
    }

    /// The distance from `me` to the nearest other host whose ranks all
    /// have an open SOS, when some SOS `me` can reach are on the shared
    /// board: no rank of that host helps the others, so their steals come
    /// from farther, at their cost (0 when there is none).
    fn nearest_sos(job: &Job, me: usize, topology: &Topology) -> u8 {
        let host = topology.host_index(me);
        if job.reachable_open(host) <= job.host_open.get(host).copied().unwrap_or(0) {
            return 0;
        }
        let members = |h: usize| topology.members(h);
        (0..topology.hosts())
            .filter(|&h| h != host && !members(h).is_empty())
            .filter(|&h| members(h).iter().all(|&r| bit(&job.sos_ranks, r)))
            .map(|h| topology.distance(me, members(h)[0]))
            .min()
            .unwrap_or(0)
    }

    /// When the hosts of this rank's site will have computed what they own:
    /// the median of the last five waves' forecasts (infinite before the
    /// third): a wave may count a share between its helper's and its
    /// owner's joins twice, or not at all.
    pub(super) fn site_end(&self) -> f64 {
        let mut ends = self.site_ends;
        ends.sort_by(f64::total_cmp);
        ends[2]
    }

    /// Seconds to the job's forecast end (infinite before the first wave).
    /// A forecast end already past means the job is behind its forecast,
    /// not that nothing is left: half a check interval (the waves' period)
    /// at least.
    pub(super) fn left(&self, now: f64, check_interval: f64) -> f64 {
        (self.end - now).max(0.5 * check_interval)
    }

    /// Whether a host other than `mine` will be late as a whole, at the
    /// last wave's figures, by more than `grace` seconds of its speed.
    pub(super) fn host_late_elsewhere(&self, mine: usize, grace: f64) -> bool {
        let left = self.end - self.counted_at;
        (0..self.hosts.len()).any(|h| h != mine && hosts_late(&self.hosts, [h], left, grace))
    }

    /// Seconds by which this rank's host as a whole will be late against the
    /// job's forecast end, at the last wave's figures, when that is at
    /// least `threshold`.
    pub(super) fn host_late_by(&self, threshold: f64) -> Option<f64> {
        let late = self.host_end - self.end;
        (late >= threshold).then_some(late)
    }

    /// The helpers one SOS on `level`'s board may expect: those there
    /// without an SOS of their own, over the open SOS, at the last wave.
    pub(super) fn helpers_per_sos(&self, level: Level) -> u64 {
        (self.helpers[slot(level)] / self.open_sos.max(1)).max(1)
    }

    /// The job's forecast end, else `horizon`.
    pub(super) fn end_or(&self, horizon: f64) -> f64 {
        if self.end.is_finite() {
            self.end
        } else {
            horizon
        }
    }
}
