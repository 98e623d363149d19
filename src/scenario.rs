//! Emulated heterogeneity (DESIGN §8): scenarios in which realisation `id`
//! of rank `i` started at time `t` takes `base · c(id) / s_i(t)` seconds.
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
//! `s_i(t)` is the product of the factors listed in `speed`. The cost factor
//! `c(id)` is 1 unless the file gives a [`Cost`], for example
//! `cost: LogNormal(sigma: 1.0, seed: 7)`: then it is drawn from the id
//! alone, so that a realisation costs the same on every rank and in every mode.

use crate::emulate::Grid;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
                let x = crate::seed::splitmix64(
                    seed ^ (i as u64).wrapping_mul(0x0100_0000_01B3) ^ (k << 32),
                );
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

/// The distribution of the cost factor `c(id)` of the realisations, with
/// mean 1: the factors are normalised so that the distribution's mean is
/// exactly 1, and `base` stays the mean seconds of a realisation at speed 1
/// (the mean over a scenario's `Z` ids is close to 1, not exactly 1; the
/// ideal makespan uses their exact sum).
///
/// `c(id)` is drawn from the uniforms `u1 = (x1 >> 11)·2^-53` and
/// `u2 = (x2 >> 11)·2^-53`, where `x1 = splitmix64(seed ^ splitmix64(id))`
/// and `x2 = splitmix64(x1)`, `id` the 0-based id: the same id has the same
/// cost on every rank, in every mode and on every machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Cost {
    /// A fraction `share` of the realisations are `ratio` times as costly as
    /// the others: `c = ratio·light` if `u1 < share`, else `light`, with
    /// `light = 1 / (1 − share + share·ratio)`.
    Bimodal {
        /// The probability of a heavy realisation, in [0, 1].
        share: f64,
        /// How many times a light one a heavy realisation costs (positive).
        ratio: f64,
        /// The seed.
        seed: u64,
    },
    /// `c = exp(sigma·N − sigma²/2)`, `N` standard normal (Box–Muller:
    /// `N = sqrt(−2 ln(1 − u1))·cos(2π u2)`). The median is `exp(−sigma²/2)`;
    /// with `sigma = 1` about one realisation in 400 costs more than 10.
    LogNormal {
        /// The standard deviation of `ln c`, at least 0.
        sigma: f64,
        /// The seed.
        seed: u64,
    },
    /// `c = x_m·(1 − u1)^(−1/alpha)` with `x_m = (alpha − 1)/alpha`:
    /// `P(c > x) = (x_m/x)^alpha`. The variance is infinite for `alpha ≤ 2`.
    Pareto {
        /// The tail index, above 1 (the mean is infinite otherwise).
        alpha: f64,
        /// The seed.
        seed: u64,
    },
}

impl Cost {
    /// `c(id)`, the cost factor of realisation `id` (0-based).
    pub fn factor(&self, id: u64) -> f64 {
        let seed = match *self {
            Cost::Bimodal { seed, .. }
            | Cost::LogNormal { seed, .. }
            | Cost::Pareto { seed, .. } => seed,
        };
        let x1 = crate::seed::splitmix64(seed ^ crate::seed::splitmix64(id));
        let uniform = |x: u64| (x >> 11) as f64 * (-53f64).exp2();
        let u1 = uniform(x1);
        match *self {
            Cost::Bimodal { share, ratio, .. } => {
                let light = 1.0 / (1.0 - share + share * ratio);
                if u1 < share { ratio * light } else { light }
            }
            Cost::LogNormal { sigma, .. } => {
                let u2 = uniform(crate::seed::splitmix64(x1));
                let n = (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (sigma * n - sigma * sigma / 2.0).exp()
            }
            Cost::Pareto { alpha, .. } => (alpha - 1.0) / alpha * (1.0 - u1).powf(-1.0 / alpha),
        }
    }

    /// Why the parameters are invalid, naming the field, if they are.
    fn invalid(&self) -> Option<String> {
        match *self {
            Cost::Bimodal { share, .. } if !(0.0..=1.0).contains(&share) => Some(format!(
                "`cost`: Bimodal `share` must be in [0, 1], not {share}"
            )),
            Cost::Bimodal { ratio, .. } if !(ratio.is_finite() && ratio > 0.0) => Some(format!(
                "`cost`: Bimodal `ratio` must be a positive number, not {ratio}"
            )),
            Cost::LogNormal { sigma, .. } if !(sigma.is_finite() && sigma >= 0.0) => Some(format!(
                "`cost`: LogNormal `sigma` must be a number at least 0, not {sigma}"
            )),
            Cost::Pareto { alpha, .. } if !(alpha.is_finite() && alpha > 1.0) => Some(format!(
                "`cost`: Pareto `alpha` must be a number above 1 (the mean is infinite \
                 otherwise), not {alpha}"
            )),
            _ => None,
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
    /// The distribution of the realisations' cost factors (default: all 1).
    #[serde(default)]
    pub cost: Option<Cost>,
    /// The emulated grid the ranks run on (default: one host).
    #[serde(default)]
    pub layout: Option<Grid>,
}

impl Scenario {
    /// The file of scenario `name`: a path (it ends in `.ron` or has a
    /// `/`), else `examples/scenarios/<name>.ron` of the working directory
    /// or, failing that, of this crate's sources.
    pub fn path_of(name: &str) -> PathBuf {
        if name.ends_with(".ron") || name.contains('/') {
            return PathBuf::from(name);
        }
        let local = Path::new("examples/scenarios").join(format!("{name}.ron"));
        if local.is_file() {
            local
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(local)
        }
    }

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
        if let Some(why) = s.cost.as_ref().and_then(Cost::invalid) {
            return bad(&why);
        }
        if let Some(why) = s.layout.as_ref().and_then(Grid::invalid) {
            return bad(&format!("layout: {why}"));
        }
        Ok(s)
    }

    /// `s_i(t)`.
    pub fn speed(&self, i: usize, t: f64) -> f64 {
        self.speed.iter().map(|f| f.value(i, t)).product()
    }

    /// `c(id)`, the cost factor of realisation `id` (0-based): 1 without a [`Cost`].
    pub fn cost(&self, id: u64) -> f64 {
        self.cost.as_ref().map_or(1.0, |c| c.factor(id))
    }

    /// Seconds realisation `id` takes on rank `i` when it starts at `t`:
    /// `base · c(id) / s_i(t)`.
    pub fn duration(&self, i: usize, id: u64, t: f64) -> f64 {
        self.base * self.cost(id) / self.speed(i, t)
    }

    /// The ideal makespan with `ranks` ranks: the least `T` at which the
    /// ranks' summed work capacity covers the total cost,
    /// `Σ_i ∫_0^T s_i(t)/base dt ≥ Σ_id c(id)` (`= Z` without a [`Cost`]; the
    /// speeds are piecewise constant). It is a lower bound that ignores
    /// granularity: a realisation is not divisible, so a costly one near the
    /// end can keep a real run (or a perfect one) past it.
    pub fn ideal(&self, ranks: usize) -> f64 {
        let z = match self.cost {
            None => self.realisations as f64,
            Some(ref c) => (0..self.realisations).map(|id| c.factor(id)).sum(),
        };
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
    fn a_layout_lays_ranks_on_hosts_and_sites() {
        let text = "(name: \"g\", ranks: 16, realisations: 10, base: 0.01, speed: [], \
                    layout: (ranks_per_host: 4, hosts_per_site: 2, distance_delay: 0.02))";
        let dir = std::env::temp_dir().join(format!("soslb-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("g.ron");
        std::fs::write(&path, text).unwrap();
        let g = Scenario::from_file(&path).unwrap().layout.unwrap();
        assert_eq!(
            [g.distance(5, 6), g.distance(5, 1), g.distance(5, 12)],
            [0, 1, 2]
        );
        std::fs::write(
            &path,
            text.replace("hosts_per_site: 2", "hosts_per_site: 0"),
        )
        .unwrap();
        let e = Scenario::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("layout") && e.contains("hosts per site"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bundled_scenarios_have_the_ideal_times_of_the_design() {
        for (name, ideal) in [
            ("hetero16", 16.22),
            ("fluct16", 15.51),
            ("step16", 11.75),
            ("tail16", 16.20),
            ("pareto16", 16.34),
            ("bimodal16", 15.72),
            ("wide32", 14.67),
            ("wide64", 14.82),
        ] {
            let s = bundled(name);
            assert_eq!(s.name, name);
            let t = s.ideal(s.ranks);
            assert!((t - ideal).abs() < 0.005, "{name}: ideal {t}");
            // The file's comment says so.
            let path = format!(
                "{}/examples/scenarios/{name}.ron",
                env!("CARGO_MANIFEST_DIR")
            );
            let said = format!("Ideal makespan on {} ranks: {ideal:.2} s.", s.ranks);
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains(&said), "{path} does not say {said:?}");
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
        assert!((h.duration(15, 3, 1.0) - 0.2).abs() < 1e-12);
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

    /// `n` cost factors of `cost`, from id 0.
    fn costs(cost: Cost, n: u64) -> Vec<f64> {
        (0..n).map(|id| cost.factor(id)).collect()
    }

    fn mean(c: &[f64]) -> f64 {
        c.iter().sum::<f64>() / c.len() as f64
    }

    fn above(c: &[f64], x: f64) -> f64 {
        c.iter().filter(|&&v| v > x).count() as f64 / c.len() as f64
    }

    #[test]
    fn costs_have_mean_one_and_depend_on_the_seed_and_id_alone() {
        let n = 200_000;
        for cost in [
            Cost::Bimodal {
                share: 0.05,
                ratio: 20.0,
                seed: 1,
            },
            Cost::LogNormal {
                sigma: 1.0,
                seed: 2,
            },
            Cost::Pareto {
                alpha: 3.0,
                seed: 3,
            },
        ] {
            let c = costs(cost.clone(), n);
            let m = mean(&c);
            assert!((m - 1.0).abs() < 0.02, "{cost:?}: mean {m}");
            assert!(c.iter().all(|v| v.is_finite() && *v > 0.0), "{cost:?}");
            // The same id costs the same, whoever asks and in whatever order.
            let copy = cost.clone();
            for id in [0, 1, 77, n - 1, u64::MAX] {
                assert_eq!(cost.factor(id).to_bits(), copy.factor(id).to_bits());
            }
            assert_eq!(cost.factor(12345), c[12345]);
        }
        // Another seed, other costs.
        let a = costs(
            Cost::LogNormal {
                sigma: 1.0,
                seed: 2,
            },
            100,
        );
        let b = costs(
            Cost::LogNormal {
                sigma: 1.0,
                seed: 3,
            },
            100,
        );
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < 3);
        // Through a scenario: the duration follows the cost; no cost is 1.
        let mut s = Scenario::from_file(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios/tail16.ron"),
        )
        .unwrap();
        let id = (0..100).find(|&id| s.cost(id) > 2.0).unwrap();
        assert!((s.duration(0, id, 0.0) - 0.02 * s.cost(id)).abs() < 1e-15);
        assert!((s.duration(15, id, 0.0) - 0.2 * s.cost(id)).abs() < 1e-12);
        s.cost = None;
        assert_eq!((s.cost(id), s.duration(0, id, 0.0)), (1.0, 0.02));
    }

    #[test]
    fn costs_have_the_shape_of_their_distribution() {
        let n = 200_000;
        // Bimodal: two values, `share` of them heavy, `ratio` apart.
        let c = costs(
            Cost::Bimodal {
                share: 0.05,
                ratio: 20.0,
                seed: 1,
            },
            n,
        );
        let light = 1.0 / 1.95;
        assert!(c.iter().all(|&v| v == light || v == 20.0 * light));
        let heavy = above(&c, 1.0);
        assert!((heavy - 0.05).abs() < 0.003, "{heavy}");
        // Log-normal, sigma 1: median exp(-1/2); P(c > 10) = 1 - Φ(2.8026) = 0.00253.
        let mut c = costs(
            Cost::LogNormal {
                sigma: 1.0,
                seed: 2,
            },
            n,
        );
        let tail = above(&c, 10.0);
        assert!((0.002..0.0031).contains(&tail), "{tail}");
        c.sort_by(f64::total_cmp);
        let median = c[c.len() / 2];
        assert!((median - (-0.5f64).exp()).abs() < 0.01, "{median}");
        assert!(
            c[c.len() - 1] > 30.0,
            "the largest of {n}: {}",
            c[c.len() - 1]
        );
        // Pareto, alpha 2: P(c > x) = (0.5/x)^2 for x ≥ 0.5, nothing below.
        let c = costs(
            Cost::Pareto {
                alpha: 2.0,
                seed: 3,
            },
            n,
        );
        assert!(c.iter().all(|&v| v >= 0.5));
        for x in [1.0, 5.0, 10.0] {
            let (seen, law) = (above(&c, x), (0.5 / x) * (0.5 / x));
            assert!(
                (seen / law - 1.0).abs() < 0.15,
                "P(c > {x}) = {seen}, not {law}"
            );
        }
        // sigma 0 is no spread at all.
        assert!(
            costs(
                Cost::LogNormal {
                    sigma: 0.0,
                    seed: 9
                },
                100
            )
            .iter()
            .all(|&v| v == 1.0)
        );
    }

    #[test]
    fn the_ideal_covers_the_total_cost() {
        // Two ranks of speed 1 and 0.5, base 0.1: a capacity of 15 units per second.
        let mut s = Scenario {
            name: "x".into(),
            ranks: 2,
            realisations: 3000,
            base: 0.1,
            speed: vec![Factor::Classes(vec![1.0, 0.5], 1)],
            cost: None,
            layout: None,
        };
        assert!((s.ideal(2) - 200.0).abs() < 1e-9);
        s.cost = Some(Cost::Pareto {
            alpha: 1.5,
            seed: 4,
        });
        let total: f64 = (0..3000).map(|id| s.cost(id)).sum();
        assert!(
            (total - 3000.0).abs() > 1.0,
            "the sample mean is not exactly 1"
        );
        assert!(
            (s.ideal(2) - total / 15.0).abs() < 1e-9,
            "{} {total}",
            s.ideal(2)
        );
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
        for (cost, field) in [
            ("Pareto(alpha: 1.0, seed: 1)", "alpha"),
            ("LogNormal(sigma: -1.0, seed: 1)", "sigma"),
            ("Bimodal(share: 1.5, ratio: 2.0, seed: 1)", "share"),
            ("Bimodal(share: 0.5, ratio: 0.0, seed: 1)", "ratio"),
            ("Gamma(k: 2.0)", "Gamma"),
        ] {
            std::fs::write(
                &p,
                format!(
                    "(name: \"x\", ranks: 2, realisations: 10, base: 1.0, speed: [], cost: {cost})"
                ),
            )
            .unwrap();
            let msg = Scenario::from_file(&p).unwrap_err().to_string();
            assert!(
                msg.contains(field)
                    && msg.to_lowercase().contains("cost")
                    && msg.contains(&p.display().to_string()),
                "{cost}: {msg}"
            );
        }
        std::fs::remove_file(p).unwrap();
    }
}
