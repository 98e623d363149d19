//! Hosts and sites of the ranks, and the distance helpers prefer (DESIGN §7):
//! 0 on the same host, 1 on the same site, 2 elsewhere.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How hosts are grouped into sites (the config's `sites`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Sites {
    /// Every host on one site.
    #[default]
    Single,
    /// Host-name patterns (`*` and `?` wildcards) and their site, first match
    /// wins; unmatched hosts form a site named after themselves.
    Patterns(Vec<(String, String)>),
    /// Measured at init: 1 KiB ping-pongs between ranks of different hosts
    /// (5 round trips, the first discarded), clustered by mLB's ratio-jump
    /// rule with `D = 1.6`, reconciled over all ranks.
    Measure,
}

/// Host and site of every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    // Shared: every rank of the simulator holds the same topology.
    hosts: Arc<[String]>,
    sites: Arc<[String]>,
    /// The hosts and sites numbered in order of first appearance.
    host_ix: Arc<[u32]>,
    site_ix: Arc<[u32]>,
    /// The site of each host, by host number.
    host_site: Arc<[u32]>,
    /// The ranks of each host, in order, by host number.
    members: Arc<[Vec<usize>]>,
    /// The number of sites.
    site_count: usize,
}

/// Number `names` in order of first appearance.
fn numbered(names: &[String]) -> Arc<[u32]> {
    let mut seen = std::collections::HashMap::new();
    names
        .iter()
        .map(|n| {
            let k = seen.len() as u32;
            *seen.entry(n.as_str()).or_insert(k)
        })
        .collect()
}

/// The number of distinct numbers of `ix` (numbered from 0, see [`numbered`]).
fn count(ix: &[u32]) -> usize {
    ix.iter().max().map_or(0, |&m| m as usize + 1)
}

/// The site number of each host number.
fn host_sites(host_ix: &[u32], site_ix: &[u32]) -> Arc<[u32]> {
    let mut sites = vec![0; count(host_ix)];
    for (&h, &s) in host_ix.iter().zip(site_ix) {
        sites[h as usize] = s;
    }
    sites.into()
}

/// What a termination wave tells of the helpers: how many ranks are idle,
/// and how many are free (done with their own quota: idle, or computing
/// help; or holding a share taken early) on each host and each site: who is nearer to an SOS than a helper
/// (see [`Topology::free_nearer`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdleMap {
    /// Idle ranks in all.
    pub ranks: usize,
    on_host: Vec<u32>,
    on_site: Vec<u32>,
}

impl IdleMap {
    /// Free ranks in all.
    pub fn free(&self) -> u32 {
        self.on_site.iter().sum()
    }
}

impl Topology {
    /// The topology from the host name of every rank and the config's site
    /// patterns (`Sites::Measure` starts as one site: see
    /// [`Topology::with_measured_sites`]).
    pub fn new(hosts: Vec<String>, sites: &Sites) -> Topology {
        let sites = match sites {
            Sites::Single | Sites::Measure => vec!["site".to_string(); hosts.len()],
            Sites::Patterns(patterns) => hosts
                .iter()
                .map(|h| {
                    patterns
                        .iter()
                        .find(|(p, _)| glob(p, h))
                        .map_or_else(|| h.clone(), |(_, s)| s.clone())
                })
                .collect(),
        };
        let host_ix = numbered(&hosts);
        let site_ix = numbered(&sites);
        let mut members = vec![Vec::new(); count(&host_ix)];
        for (r, &h) in host_ix.iter().enumerate() {
            members[h as usize].push(r);
        }
        Topology {
            members: members.into(),
            host_site: host_sites(&host_ix, &site_ix),
            site_count: count(&site_ix),
            host_ix,
            site_ix,
            hosts: hosts.into(),
            sites: sites.into(),
        }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.hosts.len()
    }

    /// Host of rank `r`.
    pub fn host(&self, r: usize) -> &str {
        &self.hosts[r]
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.host_site.len()
    }

    /// The number of rank `r`'s host, below [`Topology::hosts`].
    pub fn host_index(&self, r: usize) -> usize {
        self.host_ix[r] as usize
    }

    /// The ranks of host `h` ([`Topology::host_index`]), in order (none
    /// for a host beyond the job's).
    pub fn members(&self, h: usize) -> &[usize] {
        self.members.get(h).map_or(&[], Vec::as_slice)
    }

    /// The site number of host `h` (0 for a host beyond the job's).
    pub fn site_of_host(&self, h: usize) -> usize {
        self.host_site.get(h).map_or(0, |&s| s as usize)
    }

    /// Site of rank `r`.
    pub fn site(&self, r: usize) -> &str {
        &self.sites[r]
    }

    /// 0 same host, 1 same site, 2 elsewhere.
    pub fn distance(&self, a: usize, b: usize) -> u8 {
        if self.host_ix[a] == self.host_ix[b] {
            0
        } else if self.site_ix[a] == self.site_ix[b] {
            1
        } else {
            2
        }
    }

    /// Replace the sites by measured ones: `site_of[r]` numbers rank `r`'s
    /// site (see [`measured_sites`]).
    pub fn with_measured_sites(self, site_of: &[usize]) -> Topology {
        self.with_sites(site_of.iter().map(|k| format!("msite{k}")).collect())
    }

    /// Emulation and tests: consecutive groups of `per_site` hosts (in
    /// order of first appearance) form virtual sites `vsite<k>`.
    #[cfg(any(test, feature = "emulate"))]
    pub fn with_virtual_sites(self, per_site: usize) -> Topology {
        let sites = (self.host_ix.iter())
            .map(|&h| format!("vsite{}", h as usize / per_site.max(1)))
            .collect();
        self.with_sites(sites)
    }

    /// Emulation and tests: `ranks` ranks on virtual hosts of `per_host`
    /// ranks, in virtual sites of `per_site` hosts (0: one site).
    #[cfg(any(test, feature = "emulate"))]
    pub fn laid_out(ranks: usize, per_host: usize, per_site: usize) -> Topology {
        let t = Topology::new(virtual_hosts(ranks, per_host), &Sites::Single);
        if per_site > 0 {
            t.with_virtual_sites(per_site)
        } else {
            t
        }
    }

    /// The sites replaced by `sites`, the site name of each rank.
    fn with_sites(mut self, sites: Vec<String>) -> Topology {
        self.site_ix = numbered(&sites);
        self.host_site = host_sites(&self.host_ix, &self.site_ix);
        self.site_count = count(&self.site_ix);
        self.sites = sites.into();
        self
    }

    /// Number of sites.
    pub fn sites(&self) -> usize {
        self.site_count
    }

    /// `idle` ranks in all, and the `free` ranks counted per host and site.
    pub fn idle_map(&self, idle: usize, free: impl IntoIterator<Item = usize>) -> IdleMap {
        let mut map = IdleMap {
            ranks: idle,
            on_host: vec![0; self.hosts()],
            on_site: vec![0; self.site_count],
        };
        for r in free.into_iter().filter(|&r| r < self.ranks()) {
            map.on_host[self.host_ix[r] as usize] += 1;
            map.on_site[self.site_ix[r] as usize] += 1;
        }
        map
    }

    /// The hosts nearer to `owner` than distance `d` (by
    /// [`Topology::host_index`]): none for 0, its host for 1, the hosts of
    /// its site for 2.
    pub fn hosts_nearer(&self, owner: usize, d: u8) -> impl Iterator<Item = usize> + '_ {
        let (host, site) = (self.host_ix[owner], self.site_ix[owner]);
        (0..self.host_site.len()).filter(move |&h| match d {
            0 => false,
            1 => h == host as usize,
            _ => self.host_site[h] == site,
        })
    }

    /// Free ranks (in `map`) nearer to `owner` than distance `d`: the
    /// helpers that go before one at distance `d`. (A map of other ranks,
    /// such as the owners of open SOS, counts those the same way.)
    pub fn free_nearer(&self, map: &IdleMap, owner: usize, d: u8) -> u32 {
        let at = |v: &[u32], ix: &[u32]| v.get(ix[owner] as usize).copied().unwrap_or(0);
        match d {
            0 => 0,
            1 => at(&map.on_host, &self.host_ix),
            _ => at(&map.on_site, &self.site_ix),
        }
    }

    /// The lowest rank on another host than `r`, if any.
    pub fn first_remote(&self, r: usize) -> Option<usize> {
        (0..self.ranks()).find(|&o| self.host_ix[o] != self.host_ix[r])
    }
}

/// Emulation and tests: the names of `ranks` ranks on virtual hosts of
/// `per_host` ranks each, `vhost<k>` for ranks `k·per_host ..`.
#[cfg(any(test, feature = "emulate"))]
pub fn virtual_hosts(ranks: usize, per_host: usize) -> Vec<String> {
    (0..ranks)
        .map(|r| format!("vhost{}", r / per_host.max(1)))
        .collect()
}

/// mLB's ratio-jump rule: sort round-trip times to other ranks and cut at
/// the first `t[s+1]/t[s] ≥ d`. Returns the ranks before the cut (all of
/// them when there is no jump).
pub fn near_group(times: &[(usize, f64)], d: f64) -> Vec<usize> {
    let mut sorted = times.to_vec();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
    let cut = sorted
        .windows(2)
        .position(|w| w[1].1 >= d * w[0].1)
        .map_or(sorted.len(), |s| s + 1);
    sorted[..cut].iter().map(|&(r, _)| r).collect()
}

/// Reconcile every rank's near group into sites: ranks `i` and `j` share a
/// site when they are on the same host, or each is in the other's near group,
/// or a chain of such pairs links them. Sites are numbered by their lowest rank.
pub fn measured_sites(hosts: &[String], near: &[Vec<usize>]) -> Vec<usize> {
    let n = hosts.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut join = |a: usize, b: usize| {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        parent[ra.max(rb)] = ra.min(rb);
    };
    for i in 0..n {
        for j in 0..n {
            let mutual = near.get(i).is_some_and(|g| g.contains(&j))
                && near.get(j).is_some_and(|g| g.contains(&i));
            if i < j && (hosts[i] == hosts[j] || mutual) {
                join(i, j);
            }
        }
    }
    (0..n).map(|i| root(&mut parent, i)).collect()
}

/// Match `text` against `pattern`, where `*` matches any run of characters
/// and `?` any one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn glob_matches_wildcards() {
        assert!(glob("node*", "node12"));
        assert!(glob("n?de*.east", "node3.east"));
        assert!(!glob("node*", "login1"));
        assert!(glob("*", ""));
        assert!(!glob("a?", "a"));
    }

    #[test]
    fn distances_follow_hosts_and_sites() {
        let hosts = names(&["a1", "a1", "a2", "b1"]);
        let sites = Sites::Patterns(vec![("a*".into(), "A".into())]);
        let t = Topology::new(hosts, &sites);
        assert_eq!(t.distance(0, 1), 0);
        assert_eq!(t.distance(0, 2), 1);
        assert_eq!(t.distance(0, 3), 2);
        assert_eq!(t.site(3), "b1");
        assert_eq!(t.first_remote(0), Some(2));
    }

    #[test]
    fn the_ratio_jump_separates_near_from_far() {
        let times = [(1, 40e-6), (2, 42e-6), (3, 2.1e-3), (4, 45e-6), (5, 2.0e-3)];
        assert_eq!(near_group(&times, 1.6), vec![1, 2, 4]);
        // No jump: everything is near.
        assert_eq!(near_group(&[(1, 1.0), (2, 1.5)], 1.6), vec![1, 2]);
        assert_eq!(near_group(&[], 1.6), Vec::<usize>::new());
    }

    #[test]
    fn near_groups_are_reconciled_into_sites() {
        // Hosts a,a,b,c,d: a-b near each other, c-d near each other; rank 3
        // sees 0 as near but not the reverse, which does not join them.
        let hosts = names(&["a", "a", "b", "c", "d"]);
        let near = vec![vec![2], vec![2], vec![0, 1], vec![4, 0], vec![3]];
        assert_eq!(measured_sites(&hosts, &near), vec![0, 0, 0, 3, 3]);
        let t = Topology::new(hosts, &Sites::Single).with_measured_sites(&[0, 0, 0, 3, 3]);
        assert_eq!(t.distance(0, 2), 1);
        assert_eq!(t.distance(0, 3), 2);
    }

    #[test]
    fn virtual_hosts_and_sites_emulate_a_grid() {
        let t = Topology::laid_out(8, 2, 2);
        assert_eq!(t.host(3), "vhost1");
        assert_eq!(t.site(3), "vsite0");
        assert_eq!(t.site(4), "vsite1");
        assert_eq!(t.distance(0, 1), 0);
        assert_eq!(t.distance(0, 2), 1);
        assert_eq!(t.distance(0, 7), 2);
        let one = Topology::new(names(&["m"; 3]), &Sites::Single);
        assert_eq!(one.first_remote(0), None);
    }

    #[test]
    fn the_hosts_nearer_to_an_owner_are_its_host_then_its_site() {
        // 2 sites of 2 hosts of 2 ranks: rank 5 on host 2, site 1.
        let t = Topology::laid_out(8, 2, 2);
        let nearer = |d| t.hosts_nearer(5, d).collect::<Vec<_>>();
        assert_eq!(nearer(0), Vec::<usize>::new());
        assert_eq!(nearer(1), [2]);
        assert_eq!(nearer(2), [2, 3]);
        // Measured sites replace the virtual ones: hosts 1 and 2 together.
        let t = t.with_measured_sites(&[0, 0, 1, 1, 1, 1, 2, 2]);
        assert_eq!(t.hosts_nearer(5, 2).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn free_ranks_nearer_to_an_owner_are_counted_by_host_and_site() {
        // 2 sites × 2 hosts × 2 ranks; free: 1 (host 0), 2 and 3 (host 1), 6 (site 1).
        let t = Topology::laid_out(8, 2, 2);
        let map = t.idle_map(4, [1, 2, 3, 6, 99]);
        assert_eq!(map.ranks, 4);
        // Owner 0: its own host has 1 free rank, its site 3.
        assert_eq!(t.free_nearer(&map, 0, 0), 0);
        assert_eq!(t.free_nearer(&map, 0, 1), 1);
        assert_eq!(t.free_nearer(&map, 0, 2), 3);
        // Owner 5: nobody free on its host (4, 5), one on its site (6).
        assert_eq!(t.free_nearer(&map, 5, 1), 0);
        assert_eq!(t.free_nearer(&map, 5, 2), 1);
        // Measured sites renumber the sites.
        let m = t.with_measured_sites(&[0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(m.free_nearer(&m.idle_map(1, [6]), 0, 2), 1);
    }
}
