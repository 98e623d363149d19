//! Emulation and fault injection (the cargo feature `emulate`): settings
//! that make one machine look like a heterogeneous cluster or grid, for the
//! tests, the emulator (`examples/emulate.rs`) and the benchmarks. The
//! library as installed (`scripts/install.sh`) is built without them, and
//! refuses a config that asks for them.
//!
//! They are one section of the config file, or the variable
//! `SOSLB_EMULATE` in the same syntax (which replaces the file's section
//! whole); every field is optional:
//!
//! ```ron
//! (
//!     emulate: (
//!         speed: [1.0, 1.0, 0.25],   // rank 2 four times slower
//!         hosts: Virtual(4),         // four ranks per virtual host
//!         sites: Virtual(2),         // two hosts per virtual site
//!         storage_delay: 0.05,       // seconds before every signal-file operation
//!         grid: (ranks_per_host: 4, hosts_per_site: 2, distance_delay: 0.02),
//!         panic_at: (5, 3.0),        // rank 5 panics in `next` from 3 s on
//!     ),
//! )
//! ```
//!
//! - `speed`: a speed factor in (0, 1] per rank (ranks beyond the list run as
//!   is): the library stretches each chunk's computing time by sleeping
//!   `1/speed − 1` times as long after it ([`Stretch`]).
//! - `hosts`: `Virtual(n)`: ranks `k·n .. k·n+n−1` share the virtual host
//!   `vhost<k>`, with a host board each, so that help between hosts goes
//!   through the shared storage; `Real` (the default): the real host names.
//! - `sites`: `Virtual(n)`: consecutive groups of `n` hosts form the virtual
//!   sites `vsite<k>`, in place of the config's `sites` (not with
//!   `sites: Measure`); `Real` (the default): the config's `sites`.
//! - `storage_delay`: seconds slept before every operation on the shared
//!   directory's signal files, as on a slow or distant file server (the
//!   hosts' node-local boards have none).
//! - `grid`: an emulated grid ([`Grid`]): operations on the SOS files of a
//!   rank at emulated distance `d` cost `d · distance_delay` seconds more,
//!   whatever the library knows of hosts and sites.
//! - `panic_at`: `(rank, t)`: that rank's `next` panics once `t` seconds have
//!   passed since init, as a bug in the library would; the panic is the
//!   rank's failure, which every rank reports.

use crate::board::file::FileBoard;
use crate::topology::{Sites as ConfigSites, Topology, virtual_hosts};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The emulation settings: the config's `emulate` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Emulate {
    /// Speed factor per rank, in (0, 1] (default none: every rank as is).
    pub speed: Vec<f64>,
    /// Virtual hosts (default the real host names).
    pub hosts: Option<Hosts>,
    /// Virtual sites, in place of the config's `sites` (default the config's).
    pub sites: Option<Sites>,
    /// Seconds of delay before every signal-file operation on the shared
    /// directory (default 0).
    pub storage_delay: f64,
    /// An emulated grid whose far SOS files are slower to reach (default
    /// none; the emulator sets it from a scenario's `layout`).
    pub grid: Option<Grid>,
    /// A rank whose `next` panics from a time on, seconds since init
    /// (default none).
    pub panic_at: Option<(usize, f64)>,
}

/// The hosts the library sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Hosts {
    /// The real host names.
    Real,
    /// `n` consecutive ranks per virtual host.
    Virtual(usize),
}

/// The sites the library sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Sites {
    /// The config's `sites`.
    Real,
    /// `n` consecutive hosts per virtual site.
    Virtual(usize),
}

/// An emulated grid: consecutive ranks share a host, consecutive hosts a
/// site, and signal-file operations on a far rank's SOS file are slower.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// Ranks per host.
    pub ranks_per_host: usize,
    /// Hosts per site.
    pub hosts_per_site: usize,
    /// Extra seconds per operation on an SOS file at distance `d` (1: same
    /// site, 2: another site): `d · distance_delay`.
    pub distance_delay: f64,
}

impl Grid {
    /// 0 same host, 1 same site, 2 elsewhere, as laid out.
    pub fn distance(&self, a: usize, b: usize) -> u8 {
        let host = |r: usize| r / self.ranks_per_host;
        let site = |r: usize| host(r) / self.hosts_per_site;
        if host(a) == host(b) {
            0
        } else if site(a) == site(b) {
            1
        } else {
            2
        }
    }

    /// What is wrong with these numbers, if anything.
    pub fn invalid(&self) -> Option<String> {
        let ok = self.ranks_per_host > 0
            && self.hosts_per_site > 0
            && self.distance_delay.is_finite()
            && self.distance_delay >= 0.0;
        (!ok).then(|| {
            format!(
                "{self:?}: ranks per host and hosts per site must be positive, the distance \
                 delay zero or more seconds"
            )
        })
    }
}

impl Emulate {
    /// What is wrong with the settings, if anything: the field (as
    /// `emulate.<field>`) and why. `sites` is the config's.
    pub fn invalid(&self, sites: &ConfigSites) -> Option<(&'static str, String)> {
        if let Some((i, v)) = (self.speed.iter().enumerate())
            .find(|(_, v)| !(v.is_finite() && **v > 0.0 && **v <= 1.0))
        {
            return Some((
                "emulate.speed",
                format!("entry {i} is {v}: factors are in (0, 1]"),
            ));
        }
        if matches!(self.hosts, Some(Hosts::Virtual(0))) {
            return Some((
                "emulate.hosts",
                "a virtual host needs at least one rank".into(),
            ));
        }
        if matches!(self.sites, Some(Sites::Virtual(0))) {
            return Some((
                "emulate.sites",
                "a virtual site needs at least one host".into(),
            ));
        }
        if matches!(self.sites, Some(Sites::Virtual(_))) && *sites == ConfigSites::Measure {
            return Some((
                "emulate.sites",
                "virtual sites replace the config's `sites`, which is `Measure`: keep one".into(),
            ));
        }
        let seconds = [
            ("emulate.storage_delay", Some(self.storage_delay)),
            ("emulate.panic_at", self.panic_at.map(|(_, t)| t)),
        ];
        for (field, t) in seconds {
            if let Some(t) = t.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                let why = format!("{t} seconds: must be a finite number of seconds, zero or more");
                return Some((field, why));
            }
        }
        let why = self.grid.as_ref().and_then(Grid::invalid)?;
        Some(("emulate.grid", why))
    }

    /// The topology of ranks with these `real` host names and the config's
    /// `sites`, with the virtual hosts and sites in their place where set.
    pub fn topology(&self, real: Vec<String>, sites: &ConfigSites) -> Topology {
        let hosts = match self.hosts {
            Some(Hosts::Virtual(n)) => virtual_hosts(real.len(), n),
            Some(Hosts::Real) | None => real,
        };
        let topology = Topology::new(hosts, sites);
        match self.sites {
            Some(Sites::Virtual(n)) => topology.with_virtual_sites(n),
            Some(Sites::Real) | None => topology,
        }
    }

    /// Rank `me`'s board of the shared directory, slowed by the storage
    /// delay and the grid's distance to each of the `ranks` ranks.
    pub fn slow(&self, board: FileBoard, me: usize, ranks: usize) -> FileBoard {
        let delay_to = match &self.grid {
            Some(g) => (0..ranks)
                .map(|r| Duration::from_secs_f64(g.distance(me, r) as f64 * g.distance_delay))
                .collect(),
            None => Vec::new(),
        };
        board
            .with_delay(Duration::from_secs_f64(self.storage_delay))
            .with_delays_to(delay_to)
    }

    /// Rank `me`'s emulated slowness.
    pub fn stretch(&self, me: usize) -> Stretch {
        Stretch {
            factor: self.speed.get(me).map_or(0.0, |s| 1.0 / s - 1.0),
            handed_out: None,
        }
    }
}

/// A rank's emulated slowness: each chunk's computing time, from its hand-out
/// to the next call, is followed by `factor` times as long a sleep.
#[derive(Debug)]
pub struct Stretch {
    /// `1 / speed − 1`: seconds slept per second of computing.
    factor: f64,
    /// When the chunk being computed was handed out.
    handed_out: Option<Instant>,
}

impl Stretch {
    /// A chunk is handed out now.
    pub fn start(&mut self) {
        if self.factor > 0.0 {
            self.handed_out = Some(Instant::now());
        }
    }

    /// The chunk handed out last is done: sleep for its stretch.
    pub fn sleep(&mut self) {
        if let Some(t) = self.handed_out.take() {
            std::thread::sleep(t.elapsed().mul_f64(self.factor));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_docs_sample_parses_and_lays_out_a_grid() {
        let doc = include_str!("emulate.rs");
        let sample: String = (doc.lines())
            .skip_while(|l| !l.starts_with("//! ```ron"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!")))
            .collect();
        let config: crate::config::Config = crate::config::ron_options().from_str(&sample).unwrap();
        let e = &config.emulate;
        config.validate("the sample").unwrap();
        assert_eq!(e.stretch(2).factor, 3.0);
        assert_eq!(e.stretch(3).factor, 0.0);
        let t = e.topology(vec!["m".into(); 16], &ConfigSites::Single);
        assert_eq!((t.hosts(), t.sites()), (4, 2));
        assert_eq!((t.host(5), t.site(9)), ("vhost1", "vsite1"));
        assert_eq!(e.grid.as_ref().map(|g| g.distance(0, 9)), Some(2));
        assert_eq!(e.panic_at, Some((5, 3.0)));
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = |e: Emulate, sites: ConfigSites| e.invalid(&sites).unwrap();
        let speed = Emulate {
            speed: vec![1.0, 0.0],
            ..Emulate::default()
        };
        let (field, why) = bad(speed, ConfigSites::Single);
        assert!(field == "emulate.speed" && why.contains("entry 1"), "{why}");
        let sites = Emulate {
            sites: Some(Sites::Virtual(2)),
            ..Emulate::default()
        };
        assert_eq!(bad(sites, ConfigSites::Measure).0, "emulate.sites");
        let grid = Emulate {
            grid: Some(Grid {
                ranks_per_host: 0,
                hosts_per_site: 2,
                distance_delay: 0.02,
            }),
            ..Emulate::default()
        };
        let (field, why) = bad(grid, ConfigSites::Single);
        assert!(
            field == "emulate.grid" && why.contains("ranks per host"),
            "{why}"
        );
        let delay = Emulate {
            storage_delay: -1.0,
            ..Emulate::default()
        };
        assert_eq!(bad(delay, ConfigSites::Single).0, "emulate.storage_delay");
        assert_eq!(Emulate::default().invalid(&ConfigSites::Measure), None);
    }
}
