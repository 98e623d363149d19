//! Emulated heterogeneity (DESIGN §8): scenarios in which a realisation of
//! rank `i` started at time `t` takes `base / s_i(t)` seconds.
//!
//! A scenario is a RON file the user can copy and edit:
//!
//! ```ron
//! (
//!     name: "hetero16",
//!     ranks: 16,
//!     realisations: 6000,
//!     base: 0.02,
//!     speed: [Classes([1.0, 0.5, 0.25, 0.1], 4)],
//! )
//! ```
//!
//! `s_i(t)` is the product of the factors listed in `speed`.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One factor of the speed `s_i(t)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Factor {
    /// `classes[(i / group) mod len]`: speed classes of `group` consecutive ranks.
    Classes(Vec<f64>, usize),
    /// `0.5 + u`, `u` uniform in [0, 1) drawn per rank and per `period`
    /// seconds from `splitmix64(seed ^ i·0x100000001B3 ^ (floor(t/period) << 32))`.
    Fluctuate {
        /// The seed (42 in DESIGN §8).
        seed: u64,
        /// Seconds between two draws.
        period: f64,
    },
    /// `factor` for ranks `from_rank..to_rank` while `at ≤ t < until`, else 1.
    Step {
        /// When the step happens, seconds since the start.
        at: f64,
        /// When it ends (default: never).
        #[serde(default)]
        until: Option<f64>,
        /// First rank affected.
        from_rank: usize,
        /// First rank not affected (default: none, all higher ranks are).
        #[serde(default)]
        to_rank: Option<usize>,
        /// The speed factor during the step.
        factor: f64,
    },
}

impl Factor {
    fn value(&self, i: usize, t: f64) -> f64 {
        match *self {
            Factor::Classes(ref c, group) => c
                .get((i / group.max(1)) % c.len().max(1))
                .copied()
                .unwrap_or(1.0),
            Factor::Fluctuate { seed, period } => {
                let k = (t / period).floor() as u64;
                let x =
                    crate::splitmix64(seed ^ (i as u64).wrapping_mul(0x0100_0000_01B3) ^ (k << 32));
                0.5 + (x >> 11) as f64 * (-53f64).exp2()
            }
            Factor::Step {
                at,
                until,
                from_rank,
                to_rank,
                factor,
            } => {
                let rank_in = i >= from_rank && to_rank.is_none_or(|e| i < e);
                let time_in = t >= at && until.is_none_or(|u| t < u);
                if rank_in && time_in { factor } else { 1.0 }
            }
        }
    }

    /// The first time after `t` at which the factor may change.
    fn next_change(&self, t: f64) -> f64 {
        match *self {
            Factor::Classes(..) => f64::INFINITY,
            Factor::Fluctuate { period, .. } => ((t / period).floor() + 1.0) * period,
            Factor::Step { at, until, .. } => {
                if t < at {
                    at
                } else {
                    until.filter(|&u| t < u).unwrap_or(f64::INFINITY)
                }
            }
        }
    }
}

/// A scenario of emulated ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name, printed in the result line.
    pub name: String,
    /// Number of ranks it is made for.
    pub ranks: usize,
    /// `Z`, the number of realisations.
    pub realisations: u64,
    /// Seconds of one realisation at speed 1.
    pub base: f64,
    /// Factors whose product is `s_i(t)`.
    pub speed: Vec<Factor>,
}

impl Scenario {
    /// Read a scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario> {
        let origin = |reason: String, at: String| Error::Config {
            origin: format!("scenario {}{at}", path.display()),
            reason,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| origin(format!("cannot read the file: {e}"), String::new()))?;
        let s: Scenario = crate::config::ron_options().from_str(&text).map_err(|e| {
            origin(
                e.code.to_string(),
                format!(":{}:{}", e.span.start.line, e.span.start.col),
            )
        })?;
        let bad = |what: &str| Err(origin(what.to_string(), String::new()));
        if s.ranks == 0 || s.realisations == 0 {
            return bad("`ranks` and `realisations` must be positive");
        }
        if !(s.base.is_finite() && s.base > 0.0) {
            return bad("`base` must be a positive number of seconds");
        }
        for f in &s.speed {
            let ok = match f {
                Factor::Classes(c, g) => {
                    *g > 0 && !c.is_empty() && c.iter().all(|v| v.is_finite() && *v > 0.0)
                }
                Factor::Fluctuate { period, .. } => period.is_finite() && *period > 0.0,
                Factor::Step { at, factor, .. } => {
                    at.is_finite() && factor.is_finite() && *factor > 0.0
                }
            };
            if !ok {
                return bad(&format!(
                    "speed factor {f:?}: speeds and periods must be positive and finite"
                ));
            }
        }
        Ok(s)
    }

    /// `s_i(t)`.
    pub fn speed(&self, i: usize, t: f64) -> f64 {
        self.speed.iter().map(|f| f.value(i, t)).product()
    }

    /// Seconds one realisation of rank `i` started at `t` takes.
    pub fn duration(&self, i: usize, t: f64) -> f64 {
        self.base / self.speed(i, t)
    }

    /// The ideal makespan with `ranks` ranks: the least `T` with
    /// `Σ_i ∫_0^T s_i(t)/base dt ≥ Z` (the speeds are piecewise constant).
    pub fn ideal(&self, ranks: usize) -> f64 {
        let z = self.realisations as f64;
        let (mut t, mut done) = (0.0f64, 0.0f64);
        loop {
            let next = self
                .speed
                .iter()
                .map(|f| f.next_change(t))
                .fold(f64::INFINITY, f64::min);
            let rate: f64 = (0..ranks).map(|i| self.speed(i, t)).sum::<f64>() / self.base;
            if rate > 0.0 && done + rate * (next - t) >= z {
                return t + (z - done) / rate;
            }
            if !next.is_finite() {
                return f64::INFINITY;
            }
            done += rate * (next - t);
            t = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundled(name: &str) -> Scenario {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/scenarios/{name}.ron"));
        Scenario::from_file(&path).unwrap()
    }

    #[test]
    fn the_bundled_scenarios_have_the_ideal_times_of_the_design() {
        for (name, ideal) in [("hetero16", 16.22), ("fluct16", 15.51), ("step16", 11.75)] {
            let s = bundled(name);
            assert_eq!(s.name, name);
            let t = s.ideal(s.ranks);
            assert!((t - ideal).abs() < 0.005, "{name}: ideal {t}");
        }
    }

    #[test]
    fn speeds_follow_the_factors() {
        let s = bundled("step16");
        assert_eq!(s.speed(12, 2.9), 1.0);
        assert_eq!(s.speed(12, 3.0), 0.2);
        assert_eq!(s.speed(11, 9.0), 1.0);
        let h = bundled("hetero16");
        assert_eq!(h.speed(5, 0.0), 0.5);
        assert_eq!(h.speed(15, 0.0), 0.1);
        assert!((h.duration(15, 1.0) - 0.2).abs() < 1e-12);
        let window = Factor::Step {
            at: 1.0,
            until: Some(2.0),
            from_rank: 3,
            to_rank: Some(4),
            factor: 0.5,
        };
        assert_eq!(
            (
                window.value(3, 1.5),
                window.value(3, 2.0),
                window.value(4, 1.5)
            ),
            (0.5, 1.0, 1.0)
        );
        assert_eq!(
            (
                window.next_change(0.0),
                window.next_change(1.0),
                window.next_change(2.0)
            ),
            (1.0, 2.0, f64::INFINITY)
        );
        let f = bundled("fluct16");
        let v = f.speed(0, 0.5);
        assert!((0.5..1.5).contains(&v));
        assert_eq!(v, f.speed(0, 1.9));
        assert_ne!(v, f.speed(0, 2.1));
    }

    #[test]
    fn bad_scenarios_are_named() {
        let p = std::env::temp_dir().join(format!("soslb-scenario-{}.ron", std::process::id()));
        std::fs::write(
            &p,
            "(name: \"x\", ranks: 2, realisations: 10, base: -1.0, speed: [])",
        )
        .unwrap();
        let msg = Scenario::from_file(&p).unwrap_err().to_string();
        assert!(
            msg.contains("base") && msg.contains(&p.display().to_string()),
            "{msg}"
        );
        std::fs::write(
            &p,
            "(name: \"x\", ranks: 2, realisations: 10, base: 1.0, speed: [], extra: 1)",
        )
        .unwrap();
        let msg = Scenario::from_file(&p).unwrap_err().to_string();
        assert!(msg.contains("extra"), "{msg}");
        std::fs::remove_file(p).unwrap();
    }
}
