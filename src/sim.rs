//! A discrete-event simulator: the ranks' state machines ([`Rank`]) driven
//! by a virtual clock over a [`MemoryBoard`], with the realisation times of a
//! [`Scenario`]. It runs the same decisions as a real job in milliseconds, for
//! property tests and for exploring policies and parameters.
//!
//! ```
//! use soslb::{policy::Params, config::Config, scenario::{Scenario, Factor}, sim};
//! let scenario = Scenario {
//!     name: "two classes".into(), ranks: 4, realisations: 400, base: 0.01,
//!     speed: vec![Factor::Classes(vec![1.0, 0.25], 2)], cost: None,
//! };
//! let out = sim::simulate(&scenario, &Params::from(&Config::default()), &sim::Options::default()).unwrap();
//! assert!(out.counts.iter().all(|&c| c == 1));   // every id computed exactly once
//! assert!(out.makespan < 1.2 * scenario.ideal(4) + 1.0);
//! ```

use crate::board::memory::MemoryBoard;
use crate::config::{Hosts, Sites};
use crate::error::{Error, Result};
use crate::plan::WarmupReport;
use crate::policy::{Event, Params, Rank, RankReport, Step};
use crate::scenario::Scenario;
use crate::splitmix64;
use crate::topology::Topology;

/// Knobs of a simulation.
#[derive(Clone, Debug)]
pub struct Options {
    /// Seed of the interleavings, the jitter and the busy locks.
    pub seed: u64,
    /// Each chunk takes up to this fraction longer than the scenario says, at random.
    pub jitter: f64,
    /// About one `Try` lock in this many finds the lock busy (0: never).
    pub busy_one_in: u64,
    /// Ranks per virtual host (0: all on one host).
    pub ranks_per_host: usize,
    /// Hosts per virtual site (0: one site).
    pub hosts_per_site: usize,
    /// Destroy the SOS record of this rank at this time (a storage fault).
    pub corrupt: Option<(f64, usize)>,
    /// Give up after this many events (a rank that never terminates).
    pub max_events: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            jitter: 0.0,
            busy_one_in: 0,
            ranks_per_host: 0,
            hosts_per_site: 0,
            corrupt: None,
            max_events: 50_000_000,
        }
    }
}

/// What a simulation computed.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// How many times each id was computed (all 1 when balancing is right).
    pub counts: Vec<u32>,
    /// When the last rank terminated, seconds.
    pub makespan: f64,
    /// Each rank's figures.
    pub reports: Vec<RankReport>,
    /// Each rank's events.
    pub events: Vec<Vec<Event>>,
    /// Ids each rank still owned when it terminated (all 0 when right).
    pub left: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Will call `next` at this time.
    Ready(f64),
    /// Entered the warm-up exchange at this time.
    Exchanging(f64),
    /// Terminated at this time.
    Done(f64),
}

/// The latest time `pick` finds among the ranks' states (0 if none).
fn latest(state: &[State], pick: impl Fn(&State) -> Option<f64>) -> f64 {
    state.iter().filter_map(pick).fold(0.0, f64::max)
}

/// Run `scenario` on `scenario.ranks` simulated ranks.
pub fn simulate(scenario: &Scenario, params: &Params, opts: &Options) -> Result<Outcome> {
    let p = scenario.ranks;
    let hosts = if opts.ranks_per_host > 0 {
        Hosts::Virtual(opts.ranks_per_host)
    } else {
        Hosts::Real
    };
    let sites = if opts.hosts_per_site > 0 {
        Sites::Virtual(opts.hosts_per_site)
    } else {
        Sites::Single
    };
    let topology = Topology::new(vec!["sim".to_string(); p], &hosts, &sites);
    let mut board = MemoryBoard::new(p).with_busy_locks(opts.busy_one_in, opts.seed);
    let mut ranks: Vec<Rank> = (0..p)
        .map(|i| Rank::new(i, scenario.realisations, params.clone(), topology.clone()))
        .collect();
    let mut state = vec![State::Ready(0.0); p];
    let mut reports: Vec<Option<WarmupReport>> = vec![None; p];
    let mut counts = vec![0u32; scenario.realisations as usize];
    let mut events = vec![Vec::new(); p];
    let mut entered = vec![false; p];
    let mut rng = opts.seed;
    let mut corrupt = opts.corrupt;
    for _ in 0..opts.max_events {
        // The earliest ready rank; ties broken at random (the interleaving).
        rng = splitmix64(rng);
        let Some((i, now)) = (0..p)
            .filter_map(|k| {
                let i = (k + rng as usize % p) % p;
                match state[i] {
                    State::Ready(t) => Some((i, t)),
                    _ => None,
                }
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            break;
        };
        if now.is_infinite() {
            // Everyone left is waiting for termination, which needs every rank.
            if !entered.iter().all(|&e| e) {
                return Err(Error::Internal(
                    "ranks wait for termination that cannot come".into(),
                ));
            }
            let end = latest(&state, |s| {
                if let State::Done(t) = s {
                    Some(*t)
                } else {
                    None
                }
            });
            for s in state.iter_mut().filter(|s| matches!(s, State::Ready(_))) {
                *s = State::Done(end);
            }
            continue;
        }
        if let Some((at, rank)) = corrupt
            && now >= at
        {
            board.corrupt(rank);
            corrupt = None;
        }
        let step = ranks[i].next(now, &mut board)?;
        events[i].extend(ranks[i].drain_events());
        state[i] = match step {
            Step::Compute(chunk) => {
                let mut t = now;
                for id in chunk {
                    counts[id as usize] += 1;
                    t += scenario.duration(i, id, t);
                }
                rng = splitmix64(rng);
                let jitter = opts.jitter * (rng >> 11) as f64 * (-53f64).exp2();
                State::Ready(now + (t - now) * (1.0 + jitter))
            }
            Step::Exchange(report) => {
                reports[i] = Some(report);
                State::Exchanging(now)
            }
            Step::Idle { until } => {
                entered[i] = true;
                if entered.iter().all(|&e| e) {
                    State::Done(now)
                } else {
                    State::Ready(until.max(now + 1e-6))
                }
            }
        };
        if reports.iter().all(Option::is_some) {
            // The collective completes when the last rank enters it.
            let all: Vec<WarmupReport> = reports.iter_mut().filter_map(Option::take).collect();
            let at = latest(&state, |s| {
                if let State::Exchanging(t) = s {
                    Some(*t)
                } else {
                    None
                }
            });
            for (k, rank) in ranks.iter_mut().enumerate() {
                rank.apply_plan(&all, at)?;
                events[k].extend(rank.drain_events());
                state[k] = State::Ready(at);
            }
        }
    }
    let mut makespan = 0.0f64;
    for s in &state {
        match s {
            State::Done(t) => makespan = makespan.max(*t),
            _ => return Err(Error::Internal("the simulation did not terminate".into())),
        }
    }
    Ok(Outcome {
        counts,
        makespan,
        reports: ranks.iter().map(Rank::report).collect(),
        left: ranks.iter().map(Rank::remaining).collect(),
        events,
    })
}
