//! Property tests of Algorithms 1 and 2 on the simulator: random speeds,
//! fluctuations, steps, realisation costs, policies, interleavings and
//! storage delays. Every run must compute every id exactly once and leave no
//! rank holding ids; and the behaviours of the policy that the efficiency
//! rests on.

use proptest::prelude::*;
use soslb::clerk::Inline;
use soslb::config::{Config, LARGE_JOB, Mode};
use soslb::ids::IdSet;
use soslb::plan::HelpPolicy;
use soslb::policy::{Event, Params, RankReport};
use soslb::scenario::{Cost, Factor, Scenario};
use soslb::sim::{self, Options, Outcome};

fn params(mode: Mode, policy: HelpPolicy) -> Params {
    let mut p = Params::from(&Config::default());
    p.mode = mode;
    p.help_policy = policy;
    p.warmup = 0.5;
    p
}

fn assert_exactly_once(out: &Outcome) {
    let missing = out.counts.iter().filter(|&&c| c == 0).count();
    let twice = out.counts.iter().filter(|&&c| c > 1).count();
    assert_eq!(
        (missing, twice),
        (0, 0),
        "ids missing / computed more than once"
    );
    assert!(
        out.left.iter().all(|&l| l == 0),
        "a rank terminated holding ids: {:?}",
        out.left
    );
    let computed: u64 = out.reports.iter().map(|r| r.computed).sum();
    assert_eq!(computed, out.counts.len() as u64, "the ranks' counts");
    let taken: u64 = out.reports.iter().map(|r| r.taken).sum();
    let given: u64 = out.reports.iter().map(|r| r.given).sum();
    assert_eq!(taken, given, "AID records must account for every id taken");
}

/// `s` simulated in `mode` with balanced help and the default options:
/// every id exactly once.
fn simulate_once(s: &Scenario, mode: Mode) -> Outcome {
    let out = sim::simulate(s, &params(mode, HelpPolicy::Balanced), &Options::default()).unwrap();
    assert_exactly_once(&out);
    out
}

fn scenario(
    ranks: usize,
    z: u64,
    classes: Vec<f64>,
    fluct: Option<u64>,
    step: Option<(f64, usize)>,
) -> Scenario {
    let mut speed = vec![Factor::Classes(classes, 1)];
    if let Some(seed) = fluct {
        speed.push(Factor::Fluctuate { seed, period: 1.0 });
    }
    if let Some((at, from_rank)) = step {
        speed.push(Factor::Step {
            at,
            until: None,
            from_rank,
            to_rank: None,
            factor: 0.2,
        });
    }
    Scenario {
        name: "prop".into(),
        ranks,
        realisations: z,
        base: 0.01,
        speed,
        cost: None,
        layout: None,
    }
}

/// fluct16's speeds on `ranks` ranks, 375 realisations each, as
/// `scripts/bench.sh sim` runs them.
fn fluct_sim(ranks: usize) -> Scenario {
    Scenario {
        name: "sim".into(),
        ranks,
        realisations: 375 * ranks as u64,
        base: 0.02,
        speed: vec![
            Factor::Classes(vec![1.0, 0.5, 0.25, 0.1], 4),
            Factor::Fluctuate {
                seed: 42,
                period: 2.0,
            },
        ],
        cost: None,
        layout: None,
    }
}

fn policy() -> impl Strategy<Value = HelpPolicy> {
    prop_oneof![
        Just(HelpPolicy::Proportional),
        Just(HelpPolicy::Half),
        Just(HelpPolicy::Balanced)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn every_id_once_whatever_the_speeds_and_interleavings(
        ranks in 2usize..12,
        z in 1u64..2500,
        classes in prop::collection::vec(0.05f64..1.0, 1..6),
        fluct in prop::option::of(any::<u64>()),
        step in prop::option::of((0.0f64..3.0, 0usize..12)),
        policy in policy(),
        mode in prop_oneof![Just(Mode::Static), Just(Mode::Warmup), Just(Mode::Full)],
        seed in any::<u64>(),
        jitter in 0.0f64..0.5,
        late in 0.0f64..1.0,
        per_host in 0usize..4,
        // Replies that come later than the next steps (the clerk's
        // requests run while the rank computes), or at once.
        delay in prop_oneof![Just(0.0), 0.001f64..0.2],
    ) {
        let s = scenario(ranks, z, classes, fluct, step);
        let mut p = params(mode, policy);
        p.late_threshold = late;
        let opts = Options { seed, jitter, ranks_per_host: per_host, hosts_per_site: 2, storage_delay: delay, ..Options::default() };
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert_exactly_once(&out);
        prop_assert_eq!(out.counts.len() as u64, z);
        if mode != Mode::Full {
            prop_assert!(out.reports.iter().all(|r| r.taken == 0));
        }
    }
}

fn cost() -> impl Strategy<Value = Cost> {
    prop_oneof![
        (0.0f64..=1.0, 0.05f64..50.0, any::<u64>())
            .prop_map(|(share, ratio, seed)| { Cost::Bimodal { share, ratio, seed } }),
        (0.0f64..2.0, any::<u64>()).prop_map(|(sigma, seed)| Cost::LogNormal { sigma, seed }),
        (1.1f64..4.0, any::<u64>()).prop_map(|(alpha, seed)| Cost::Pareto { alpha, seed }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Realisations of random cost (bimodal, log-normal, Pareto with tails
    /// up to infinite variance): every id once, and with constant speeds no
    /// run beats the ideal, which is a lower bound.
    #[test]
    fn every_id_once_whatever_the_costs(
        ranks in 2usize..16,
        z in 1u64..2000,
        classes in prop::collection::vec(0.05f64..1.0, 1..5),
        fluct in prop::option::of(any::<u64>()),
        cost in cost(),
        policy in policy(),
        mode in prop_oneof![Just(Mode::Static), Just(Mode::Warmup), Just(Mode::Full)],
        seed in any::<u64>(),
        jitter in 0.0f64..0.3,
    ) {
        let mut s = scenario(ranks, z, classes, fluct, None);
        s.cost = Some(cost);
        let opts = Options { seed, jitter, ..Options::default() };
        let out = sim::simulate(&s, &params(mode, policy), &opts).unwrap();
        assert_exactly_once(&out);
        prop_assert_eq!(out.counts.len() as u64, z);
        if fluct.is_none() {
            let ideal = s.ideal(ranks);
            prop_assert!(out.makespan >= ideal * (1.0 - 1e-9), "makespan {} < ideal {}", out.makespan, ideal);
        }
    }
}

/// The bundled scenarios of realisations of random cost and of wide jobs,
/// mode full: every id once; the efficiencies printed are the simulator's
/// (a real run adds MPI and file latencies).
#[test]
fn the_bundled_cost_and_wide_scenarios_compute_every_id_once() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    for name in ["tail16", "pareto16", "bimodal16", "wide32", "wide64"] {
        let s = Scenario::from_file(&dir.join(format!("{name}.ron"))).unwrap();
        let mut p = params(Mode::Full, HelpPolicy::Balanced);
        p.warmup = 1.0;
        let out = sim::simulate(&s, &p, &Options::default()).unwrap();
        assert_exactly_once(&out);
        assert_eq!(out.reports.len(), s.ranks);
        let eff = s.ideal(s.ranks) / out.makespan;
        println!("{name}: full {eff:.3}");
        assert!(eff > 0.7, "{name}: full efficiency {eff:.3}");
    }
}

/// The bundled scenarios on the simulator, all modes: the figures a real run
/// should approach (the real one adds MPI and file latencies).
#[test]
fn full_mode_beats_warmup_which_beats_static_on_the_bundled_scenarios() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    for name in ["hetero16", "fluct16", "step16"] {
        let s = Scenario::from_file(&dir.join(format!("{name}.ron"))).unwrap();
        let ideal = s.ideal(s.ranks);
        let mut eff = Vec::new();
        for mode in [Mode::Static, Mode::Warmup, Mode::Full] {
            let mut p = params(mode, HelpPolicy::Balanced);
            p.warmup = 1.0;
            let out = sim::simulate(
                &s,
                &p,
                &Options {
                    jitter: 0.02,
                    ..Options::default()
                },
            )
            .unwrap();
            assert_exactly_once(&out);
            eff.push(ideal / out.makespan);
        }
        println!(
            "{name}: static {:.3} warmup {:.3} full {:.3}",
            eff[0], eff[1], eff[2]
        );
        assert!(eff[2] > 0.9, "{name}: full efficiency {:.3}", eff[2]);
        assert!(
            eff[2] >= eff[1] - 0.02 && eff[1] >= eff[0] - 0.01,
            "{name}: {eff:?}"
        );
    }
}

/// The mean efficiencies of mode warmup and mode full on the bundled
/// scenario `name`, with a warm-up of 1 s and the balanced policy, at
/// `delay` seconds per file operation and `jitter`, over seeds `1..=seeds`;
/// every run computes every id once.
fn warmup_and_full(
    name: &str,
    delay: f64,
    jitter: f64,
    seeds: u64,
    ranks_per_host: usize,
) -> (f64, f64) {
    let s = Scenario::from_file(&Scenario::path_of(name)).unwrap();
    let mean = |mode| {
        let mut p = params(mode, HelpPolicy::Balanced);
        p.warmup = 1.0;
        let sum: f64 = (1..=seeds)
            .map(|seed| {
                let opts = Options {
                    seed,
                    jitter,
                    storage_delay: delay,
                    ranks_per_host,
                    ..Options::default()
                };
                let out = sim::simulate(&s, &p, &opts).unwrap();
                assert_exactly_once(&out);
                s.ideal(s.ranks) / out.makespan
            })
            .sum();
        sum / seeds as f64
    };
    (mean(Mode::Warmup), mean(Mode::Full))
}

/// On slow storage (every file operation 50 ms, as the emulator's
/// `storage_delay`), balancing still pays: every id once, and mode full
/// beats mode warmup on the bundled scenarios, on one host (whose board
/// carries every SOS) and on four (whose ranks help each other through
/// the shared storage).
#[test]
fn slow_storage_still_pays_and_loses_nothing() {
    for (name, hosts) in ["hetero16", "fluct16", "step16"]
        .into_iter()
        .flat_map(|name| [(name, 1), (name, 4)])
    {
        let (warmup, full) = warmup_and_full(name, 0.05, 0.02, 1, 16 / hosts);
        println!("{name} on slow storage, {hosts} hosts: warmup {warmup:.3} full {full:.3}");
        assert!(
            full >= warmup - 0.02,
            "{name}: full {full:.3}, warmup {warmup:.3}"
        );
    }
}

/// On very slow storage (200 ms per file operation) an SOS on the shared
/// storage brings more file time than a lateness of a few seconds is worth:
/// mode full must not lose to mode warmup (over 8 seeds; it did when owners
/// posted for lateness of four consultations of the board: fluct16 0.54
/// against 0.66), on one host and on four.
#[test]
fn on_very_slow_storage_mode_full_does_not_lose_to_mode_warmup() {
    for (name, hosts) in [("fluct16", 1), ("fluct16", 4), ("step16", 1), ("step16", 4)] {
        let (warmup, full) = warmup_and_full(name, 0.2, 0.1, 8, 16 / hosts);
        println!("{name} at 0.2 s per operation, {hosts} hosts: warmup {warmup:.3} full {full:.3}");
        assert!(
            full >= warmup - 0.01,
            "{name}: full {full:.3}, warmup {warmup:.3}"
        );
    }
}

/// With many ranks on slow storage (256 ranks at 50 ms per operation,
/// fluct16's speeds, 16 ranks per host, as `bench.sh sim`) mode full must
/// not lose to mode warmup: by default (every host's drift through SOS
/// files at this size), nor where the hosts trade through MPI (`large_job`
/// at the job's size).
#[test]
fn with_many_ranks_on_slow_storage_full_does_not_lose_to_warmup() {
    let ranks = 256;
    let s = fluct_sim(ranks);
    let opts = Options {
        storage_delay: 0.05,
        ranks_per_host: 16,
        ..Options::default()
    };
    let efficiency = |mode, large_job| {
        let p = Params {
            mode,
            large_job,
            ..Params::from(&Config::default())
        };
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert_exactly_once(&out);
        s.ideal(ranks) / out.makespan
    };
    let warmup = efficiency(Mode::Warmup, LARGE_JOB);
    let full = efficiency(Mode::Full, LARGE_JOB);
    let traded = efficiency(Mode::Full, ranks);
    println!(
        "256 ranks at 50 ms per operation: warmup {warmup:.3} full {full:.3}, hosts trading {traded:.3}"
    );
    assert!(full >= warmup, "full {full:.3}, warmup {warmup:.3}");
    assert!(
        traded >= warmup,
        "hosts trading {traded:.3}, warmup {warmup:.3}"
    );
}

/// On slow storage (100 ms per file operation: help comes 0.85 s after a
/// post) a slowdown of half a second does not open an SOS (lateness there is
/// judged at the steadier speed), while a lasting one does. It comes at
/// 6 s: at 3 s the steady speed has too little history.
#[test]
fn on_slow_storage_a_passing_slowdown_posts_no_sos_and_a_lasting_one_does() {
    let posts = |until: Option<f64>| {
        let mut s = scenario(16, 8000, vec![1.0], None, None);
        s.base = 0.02;
        s.speed.push(Factor::Step {
            at: 6.0,
            until,
            from_rank: 15,
            to_rank: None,
            factor: 0.1,
        });
        let opts = Options {
            storage_delay: 0.1,
            ..Options::default()
        };
        // (The shared storage's gate: on a host's board an SOS costs next
        // to nothing, and a passing slowdown may post one.)
        let mut p = params(Mode::Full, HelpPolicy::Balanced);
        p.warmup = 1.0;
        p.host_board = false;
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert_exactly_once(&out);
        out.reports[15].sos_posted
    };
    assert_eq!(
        posts(Some(6.5)),
        0,
        "an SOS for a slowdown of half a second"
    );
    assert!(posts(None) > 0, "no SOS for a lasting slowdown");
}

/// On very slow storage (200 ms per file operation) a rank that slows down
/// posts its SOS while its speed estimate still lags, and keeps too long a
/// lease. It gives the lease it cannot use back into slots at a later
/// check, so that helpers take at least 40 % of its quota.
#[test]
fn on_very_slow_storage_a_slowed_owner_gives_back_the_lease_it_cannot_use() {
    let s = Scenario::from_file(&Scenario::path_of("step16")).unwrap();
    let opts = Options {
        storage_delay: 0.2,
        jitter: 0.02,
        ..Options::default()
    };
    let mut p = params(Mode::Full, HelpPolicy::Balanced);
    p.warmup = 1.0;
    let out = sim::simulate(&s, &p, &opts).unwrap();
    assert_exactly_once(&out);
    for r in &out.reports[12..] {
        assert!(
            r.given * 5 >= r.planned * 2,
            "rank {} gave {} of its quota of {}",
            r.rank,
            r.given,
            r.planned
        );
    }
}

/// On slow storage a rank about to run out of work takes its next share
/// while it still computes its own: after a check that finds own ids left
/// (its progress line says how many), the next event is a share taken (had
/// the rank run dry first, a progress line of the ids it finished would
/// come between).
#[test]
fn on_slow_storage_helpers_take_their_next_share_before_they_run_dry() {
    let s = Scenario::from_file(&Scenario::path_of("step16")).unwrap();
    let opts = Options {
        storage_delay: 0.05,
        ..Options::default()
    };
    let out = sim::simulate(&s, &params(Mode::Full, HelpPolicy::Balanced), &opts).unwrap();
    assert_exactly_once(&out);
    let ahead = out
        .events
        .iter()
        .flat_map(|events| events.windows(2))
        .filter(|w| match (&w[0], &w[1]) {
            ((t0, Event::Progress { remaining, .. }), (t1, Event::AidGiven { .. })) => {
                t0 <= t1 && *remaining > 0
            }
            _ => false,
        })
        .count();
    assert!(ahead > 0, "no helper looked ahead");
}

/// The last realisations end on fast ranks: with realisations of
/// heavy-tailed cost (tail16: log-normal, one in 400 over 10 times the
/// mean), slow ranks keep and take less work near the job's forecast end,
/// by a few standard deviations of their realisations' times. Over 20
/// seeds, the slowest class (speed 0.1) ends on average less than 0.35 s
/// after the fastest (speed 1); without the margin, 0.63 s.
#[test]
fn the_last_realisations_end_on_fast_ranks() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
    let s = Scenario::from_file(&dir.join("tail16.ron")).unwrap();
    let mut p = params(Mode::Full, HelpPolicy::Balanced);
    p.warmup = 1.0;
    let mut lag = 0.0;
    let seeds = 20;
    for seed in 1..=seeds {
        let opts = Options {
            seed,
            jitter: 0.1,
            ..Options::default()
        };
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert_exactly_once(&out);
        let last =
            |ranks: std::ops::Range<usize>| out.finish[ranks].iter().copied().fold(0.0, f64::max);
        lag += last(12..16) - last(0..4);
    }
    let lag = lag / seeds as f64;
    assert!(
        lag < 0.35,
        "the slowest ranks ended {lag:.3} s after the fastest"
    );
}

/// The ranks that reach the warm-up exchange first do not wait for the
/// last: they compute their reserve meanwhile, and the plan counts what is
/// left of it. Rank 3 is slowed 20 times from just before the end of the
/// warm-up until 2 s, so that its last warm-up realisation ends about
/// 0.2 s late; mode warmup (the plan alone): ranks 0 to 2 compute nearly
/// all the time and end together.
#[test]
fn the_first_ranks_at_the_warm_up_exchange_compute_while_they_wait() {
    let mut s = scenario(4, 1200, vec![1.0], None, None);
    s.speed.push(Factor::Step {
        at: 0.49,
        until: Some(2.0),
        from_rank: 3,
        to_rank: None,
        factor: 0.05,
    });
    let out = simulate_once(&s, Mode::Warmup);
    let plan_at = out.events[0]
        .iter()
        .find_map(|(t, e)| matches!(e, Event::Plan { .. }).then_some(*t))
        .expect("no plan");
    assert!(plan_at > 0.6, "the slowed rank reported at {plan_at:.3} s");
    for r in 0..3 {
        let busy = out.reports[r].busy / out.finish[r];
        assert!(busy > 0.97, "rank {r} computed {busy:.3} of its time");
        let gap = (out.finish[r] - out.finish[0]).abs();
        assert!(gap < 0.05, "rank {r} ended {gap:.3} s from rank 0");
    }
}

/// A step slowdown after the warm-up opens SOS files that helpers serve.
#[test]
fn a_rank_that_becomes_slow_gets_help() {
    let s = scenario(8, 4000, vec![1.0], None, Some((2.0, 7)));
    let out = simulate_once(&s, Mode::Full);
    assert!(
        out.reports[7].sos_posted > 0 && out.reports[7].given > 0,
        "{:?}",
        out.reports[7]
    );
    let helped: Vec<Option<usize>> = out.events[7]
        .iter()
        .filter_map(|(_, e)| {
            if let Event::AidReceived { aid, .. } = e {
                Some(aid.helper)
            } else {
                None
            }
        })
        .collect();
    // (An owner reads some of its helpers' claims, not all.)
    let known: Vec<usize> = helped.iter().flatten().copied().collect();
    assert!(
        !helped.is_empty() && !known.is_empty() && known.iter().all(|&h| h < 7),
        "{helped:?}"
    );
}

/// Helpers prefer an SOS on their own host: the first help of a rank that
/// becomes slow comes from its host; when its whole host is slow, the other
/// host helps too, after the grace delay.
#[test]
fn nearby_helpers_go_first_and_far_ones_come_when_needed() {
    let helpers = |from_rank: usize| {
        let s = scenario(8, 4000, vec![1.0], None, Some((2.0, from_rank)));
        let mut p = params(Mode::Full, HelpPolicy::Half);
        p.grace = 1.0;
        let out = sim::simulate(
            &s,
            &p,
            &Options {
                ranks_per_host: 4,
                ..Options::default()
            },
        )
        .unwrap();
        assert_exactly_once(&out);
        // Each owner's helpers in the order they took, from the helpers'
        // own events (an owner reads only some of its helpers' claims).
        let mut given: Vec<(f64, usize, usize)> = (out.events.iter().enumerate())
            .flat_map(|(h, ev)| {
                ev.iter().filter_map(move |(t, e)| match e {
                    Event::AidGiven { owner, .. } => Some((*t, h, *owner)),
                    _ => None,
                })
            })
            .collect();
        given.sort_by(|a, b| a.0.total_cmp(&b.0));
        (from_rank..8)
            .map(|owner| {
                let h: Vec<usize> = (given.iter())
                    .filter(|g| g.2 == owner)
                    .map(|g| g.1)
                    .collect();
                assert!(!h.is_empty(), "rank {owner} got no help");
                h
            })
            .collect::<Vec<_>>()
    };
    // Only rank 7 (host 1) slows down: its first helper is on host 1.
    let near = &helpers(7)[0];
    assert!((4..7).contains(&near[0]), "{near:?}");
    // All of host 1 slows down: host 0 helps every one of its ranks.
    for (k, h) in helpers(4).iter().enumerate() {
        assert!(
            h.iter().any(|&h| h < 4),
            "rank {} got no help from host 0: {h:?}",
            4 + k
        );
    }
}

/// A storage fault destroys the SOS file of a rank while it is open: the
/// helpers that read it report the error with the path and take nothing
/// from it until its owner writes it again; the claims decide who has
/// what: every id exactly once.
#[test]
fn a_destroyed_sos_record_loses_nothing_and_duplicates_nothing() {
    let s = scenario(8, 3000, vec![1.0], None, Some((1.0, 7)));
    let mut reported = Vec::new();
    for at in [1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.625, 3.75] {
        let opts = Options {
            corrupt: Some((at, 7)),
            ..Options::default()
        };
        // Every SOS on the shared board, where the record is destroyed.
        let mut p = params(Mode::Full, HelpPolicy::Balanced);
        p.host_board = false;
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert!(
            out.counts.iter().all(|&c| c == 1),
            "corrupted at {at}: not every id exactly once"
        );
        assert!(out.left.iter().all(|&l| l == 0));
        // Reported by the helpers that read the body before its owner
        // replaced it (none may, when the owner's refresh comes first).
        if out.events.iter().flatten().any(
            |(_, e)| matches!(e, Event::Recovered { error } if error.contains("memory/sos/7.ron")),
        ) {
            reported.push(at);
        }
    }
    assert!(
        !reported.is_empty(),
        "the destroyed record was never reported"
    );
}

/// When `helper` ran out of work before it first took ids from `owner`,
/// and when it took them (None if it never did).
fn idle_then_take(out: &Outcome, helper: usize, owner: usize) -> Option<(f64, f64)> {
    let mut idle = None;
    for (t, e) in &out.events[helper] {
        match e {
            Event::Progress { remaining: 0, .. } => idle = idle.or(Some(*t)),
            Event::Progress { .. } => idle = None,
            Event::AidGiven { owner: o, .. } if *o == owner => {
                return Some((idle.unwrap_or(*t), *t));
            }
            Event::AidGiven { .. } => idle = None,
            _ => {}
        }
    }
    None
}

/// Four ranks, `per_host` per host and `per_site` hosts per site; at t = 1 s
/// rank `slow` slows down to 0.2 and rank `fast` (if any) speeds up to 1.3.
fn on_sites(slow: usize, fast: Option<usize>, grace: f64, layout: (usize, usize)) -> Outcome {
    let mut s = scenario(4, 2000, vec![1.0], None, None);
    let step = |r: usize, factor| Factor::Step {
        at: 1.0,
        until: None,
        from_rank: r,
        to_rank: Some(r + 1),
        factor,
    };
    s.speed.push(step(slow, 0.2));
    s.speed.extend(fast.map(|r| step(r, 1.3)));
    let (per_host, per_site) = layout;
    let mut p = params(Mode::Full, HelpPolicy::Balanced);
    p.grace = grace;
    let opts = Options {
        ranks_per_host: per_host,
        hosts_per_site: per_site,
        ..Options::default()
    };
    let out = sim::simulate(&s, &p, &opts).unwrap();
    assert_exactly_once(&out);
    out
}

/// A far helper waits `d · grace` for nearer ones only while some are idle
/// and can finish the owner's work within that time (issue 11).
#[test]
fn far_helpers_wait_their_grace_only_while_near_ones_are_free_and_enough() {
    // Every rank on a site of its own; rank 3 slows down. Nobody is nearer
    // to it: the others help as soon as they are idle, not 2 · 5 s later.
    let out = on_sites(3, None, 5.0, (1, 1));
    for h in 0..3 {
        let (idle, take) = idle_then_take(&out, h, 3).expect("a rank never helped");
        assert!(
            take - idle < 1.0,
            "rank {h}: idle at {idle}, helped at {take}"
        );
    }
    // Hosts {0, 1} and {2, 3} on two sites; rank 0 slows down, and rank 1,
    // on its host, speeds up: it is free (helping rank 0) when ranks 2 and 3
    // run out of work, and can finish rank 0's work within their grace of
    // 2 · 5 s: they wait.
    let out = on_sites(0, Some(1), 5.0, (2, 1));
    assert!(idle_then_take(&out, 1, 0).is_some(), "rank 1 never helped");
    for h in [2, 3] {
        if let Some((idle, take)) = idle_then_take(&out, h, 0) {
            assert!(
                take - idle >= 9.9,
                "rank {h}: idle at {idle}, helped at {take}"
            );
        }
    }
    // The same with a grace of 2 · 0.5 s: rank 1 alone would need longer
    // than that, so the far ranks come at once.
    let out = on_sites(0, Some(1), 0.5, (2, 1));
    for h in [2, 3] {
        let (idle, take) = idle_then_take(&out, h, 0).expect("a far rank never helped");
        assert!(
            take - idle < 0.5,
            "rank {h}: idle at {idle}, helped at {take}"
        );
    }
}

/// Rank `me` of two on one host, of `total` realisations (mode full,
/// balanced help).
fn rank_of_two(me: usize, total: u64) -> soslb::policy::Rank {
    rank_of_two_with(me, total, params(Mode::Full, HelpPolicy::Balanced))
}

/// [`rank_of_two`] with these parameters.
fn rank_of_two_with(me: usize, total: u64, p: Params) -> soslb::policy::Rank {
    use soslb::topology::{Sites, Topology};
    let topology = Topology::new(vec!["h".into(); 2], &Sites::Single);
    soslb::policy::Rank::new(me, total, p, topology)
}

/// Rank 1 of 2 with a clerk, driven to run out of work ([`idle_rank`]).
fn idle_helper() -> (Inline, f64) {
    let (rank, t) = idle_rank();
    (Inline::new(rank), t)
}

/// Rank 1 of 2, driven to run out of work: it computes its whole block in
/// the warm-up, and rank 0 (never driven) reports a speed that leaves rank
/// 1 no quota. Also returns the time.
fn idle_rank() -> (soslb::policy::Rank, f64) {
    idle_rank_with(params(Mode::Full, HelpPolicy::Balanced))
}

/// [`idle_rank`] with these parameters.
fn idle_rank_with(p: Params) -> (soslb::policy::Rank, f64) {
    use soslb::plan::WarmupReport;
    use soslb::policy::Step;
    let mut rank = rank_of_two_with(1, 100, p);
    let mut t = 0.0;
    let report = loop {
        match rank.next(t).unwrap() {
            Step::Compute(_) => t += 0.005,
            Step::Exchange(r) => break r,
            s => panic!("{s:?} in the warm-up"),
        }
    };
    assert_eq!(report.tail.start, report.tail.end);
    let other = WarmupReport {
        done: 10,
        speed: 1e9,
        tail: 10..50,
        reserved: 0,
        at: t,
    };
    rank.apply_plan(&[other, report], t).unwrap();
    (rank, t)
}

/// A termination wave that says how many SOS are open.
fn wave_with_open(rank: &mut soslb::policy::Rank, t: f64, open: u64) {
    rank.observe_job(soslb::verdict::Job {
        completed: 0,
        speed: 1.0,
        at: t,
        open,
        ..Default::default()
    });
}

/// Open an SOS of rank 0 at `t` offering `tail` in one slot, and list it.
fn open_sos_of_rank_0(board: &mut soslb::board::memory::MemoryBoard, t: f64, tail: &IdSet) {
    use soslb::board::Board;
    use soslb::protocol::{Entry, Index, Post, Sos, SosState, cut};
    let sos = Sos {
        rank: 0,
        seq: 1,
        state: SosState::Open(Post {
            speed: 1.0,
            remaining: tail.len(),
            forecast: t + 100.0,
            host: "h".into(),
            site: "h".into(),
            opened_at: t,
            at: t,
            slots: cut(tail, 1, 0, &[]),
            helped: Vec::new(),
        }),
    };
    board.post(&sos).unwrap();
    let mut ix = Index::default();
    ix.upsert(&Entry {
        rank: 0,
        seq: 1,
        forecast: t + 100.0,
        opened_at: t,
        speed: 1.0,
    });
    board.write_index(&ix).unwrap();
}

/// An idle rank reads no file while the termination waves say no SOS is
/// open (unless a watcher saw the index change). When they say one is, and
/// its polls find nothing, it polls the open index less and less often (up
/// to eight poll intervals apart), and comes back to the first pace when an
/// SOS opens.
#[test]
fn idle_polls_that_find_nothing_back_off() {
    use soslb::board::{Board, memory::MemoryBoard};
    use soslb::policy::Step;
    let mut board = MemoryBoard::new();
    let poll = params(Mode::Full, HelpPolicy::Balanced).poll_interval;
    let (mut rank, mut t) = idle_helper();
    let ops = board.ops();
    for _ in 0..20 {
        let Step::Idle { until } = rank.next(t, &mut board).unwrap() else {
            panic!("work while nothing is open")
        };
        t = until;
    }
    assert_eq!(board.ops(), ops, "files read while no SOS is open");
    rank.index_changed();
    let Step::Idle { until } = rank.next(t, &mut board).unwrap() else {
        panic!("work while nothing is open")
    };
    assert_eq!(board.ops(), ops + 1, "the index, after a watcher's wake");
    t = until;
    wave_with_open(&mut rank, t, 1);
    let mut polls = Vec::new();
    let until = t + 10.0;
    while t < until {
        match rank.next(t, &mut board).unwrap() {
            Step::Idle { until } => {
                polls.push(t);
                t = until;
            }
            s => panic!("{s:?} while nothing is open"),
        }
    }
    let gaps: Vec<f64> = polls.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] <= 2.01 * poll, "{gaps:?}");
    assert!(
        gaps[gaps.len() - 3..]
            .iter()
            .all(|&g| (g - 8.0 * poll).abs() < 1e-6),
        "{gaps:?}"
    );
    assert!(polls.len() < 25, "{} polls in 10 s", polls.len());
    // An SOS opens (with nothing to take yet): the next poll after it is one
    // interval later again.
    open_sos_of_rank_0(&mut board, t, &IdSet::new());
    let Step::Idle { until } = rank.next(t, &mut board).unwrap() else {
        panic!("took ids")
    };
    assert!(until - t <= 1.01 * poll, "next poll {} s later", until - t);
}

/// The first idle rank of a host to poll reads the shared open index and
/// leaves a copy on the host; the host's other idle ranks read that copy
/// while it is less than half their poll old, and the shared index only
/// when it is older, or when a watcher woke them (DESIGN §6): shared reads
/// of the index grow with the hosts, not the ranks.
#[test]
fn idle_ranks_of_a_host_share_one_read_of_the_index() {
    use soslb::board::{Board, memory::MemoryBoard};
    use soslb::policy::Step;
    use soslb::protocol::Index;
    let mut board = MemoryBoard::new();
    let (mut rank, mut t) = idle_helper();
    let poll = params(Mode::Full, HelpPolicy::Balanced).poll_interval;
    let look = |rank: &mut Inline, board: &mut MemoryBoard, t: f64| {
        wave_with_open(rank, t, 1);
        let before = board.ops();
        let Step::Idle { .. } = rank.next(t, board).unwrap() else {
            panic!("work from an empty index")
        };
        board.ops() - before
    };
    board.write_host_index("h", &Index::default(), t).unwrap();
    assert_eq!(
        look(&mut rank, &mut board, t + 0.4 * poll),
        0,
        "read the shared index"
    );
    t += 1.1 * poll;
    assert_eq!(look(&mut rank, &mut board, t), 1, "one read of the index");
    assert_eq!(board.read_host_index("h").unwrap().unwrap().1, t);
    t += 0.1 * poll;
    rank.index_changed();
    assert_eq!(look(&mut rank, &mut board, t), 1, "one read of the index");
}

/// An owner (rank 0 of 2, five times slower after the plan) posts an SOS; a
/// helper claims slots of it; at the end the owner's last look claims the
/// slots it still holds pending, so that what it gave counts every claim
/// (the summary's `given` is the ids taken), and the claims it loses are
/// exactly the helper's.
#[test]
fn an_owner_counts_at_the_end_the_help_it_did_not_see() {
    use soslb::board::memory::MemoryBoard;
    use soslb::policy::Step;
    let mut board = MemoryBoard::new();
    let mut owner = Inline::new(rank_of_two(0, 4000));
    let mut t = 0.0;
    let report = loop {
        match owner.next(t, &mut board).unwrap() {
            Step::Compute(ids) => t += 0.01 * (ids.end - ids.start) as f64,
            Step::Exchange(r) => break r,
            s => panic!("{s:?} in the warm-up"),
        }
    };
    // Rank 1 reports as fast and as far along its own block.
    let mirror = soslb::plan::WarmupReport {
        tail: 2000 + report.done + report.reserved..4000,
        ..report.clone()
    };
    let reports = [report, mirror];
    owner.apply_plan(&reports, t).unwrap();
    // Five times slower: late against the horizon, it posts an SOS.
    while !owner.sos_open() {
        assert!(t < 60.0, "no SOS posted");
        let Step::Compute(ids) = owner.next(t, &mut board).unwrap() else {
            panic!("no work for the owner at {t}")
        };
        t += 0.05 * (ids.end - ids.start) as f64;
    }
    let (mut helper, _) = idle_helper();
    wave_with_open(&mut helper, t, 1);
    let taken = loop {
        match helper.next(t, &mut board).unwrap() {
            Step::Compute(_) => break helper.report().taken,
            Step::Idle { until } if until < t + 5.0 => t = until,
            s => panic!("the helper took nothing: {s:?}"),
        }
    };
    assert!(taken > 0);
    assert_eq!(owner.report().given, 0, "the owner has not looked yet");
    owner.last_look(t, &mut board).unwrap();
    assert_eq!(owner.report().given, taken);
    assert!(owner.last_look(t, &mut board).is_ok(), "a second last look");
}

/// A wave completes only when every rank has called once more after the
/// last one joined (a reduction advances inside MPI calls): with one rank
/// whose realisations take a second, a wave every two of its calls, not
/// every one.
#[test]
fn a_wave_waits_for_every_ranks_next_call_after_the_last_joined() {
    let mut s = scenario(4, 80, vec![1.0, 1.0, 1.0, 0.02], None, None);
    s.base = 0.02;
    let out = simulate_once(&s, Mode::Static);
    // The slow rank's 20 realisations of a second each, one call after each.
    let t = out.makespan;
    assert!(t > 19.0, "{t} s");
    let waves = out.waves as f64;
    assert!(
        waves <= t / 2.0 + 2.0 && waves >= t / 3.0,
        "{waves} waves in {t:.1} s"
    );
}

/// The job's forecast end is dated by the wave's counts, not by when the
/// wave reached the rank: 3,000 realisations left at 100 per second, as of
/// 5 s, end at 35 s, however late the wave completes.
#[test]
fn the_jobs_forecast_end_is_dated_by_the_waves_counts() {
    let mut rank = rank_of_two(0, 4000);
    assert_eq!(rank.job_end(), f64::INFINITY);
    rank.observe_job(soslb::verdict::Job {
        completed: 1000,
        speed: 100.0,
        at: 5.0,
        ..Default::default()
    });
    assert_eq!(rank.job_end(), 35.0);
}

/// The help by distance of the result lines (the owners' accounts, summed
/// over their reports) is what the helpers took: each helper's claims, at
/// its distance from the owner in the scenarios' grid of two sites of two
/// hosts of four ranks. sites16's slow host gets help from the other site.
#[test]
fn the_help_by_distance_is_what_the_helpers_took() {
    for name in ["sites16", "sites16-one"] {
        let s = Scenario::from_file(&Scenario::path_of(name)).unwrap();
        let out = simulate_once(&s, Mode::Full);
        let mut taken = [0u64; 3];
        for (helper, events) in out.events.iter().enumerate() {
            for (_, e) in events {
                if let Event::AidGiven { owner, ids, .. } = e {
                    let d = if helper / 4 == owner / 4 {
                        0
                    } else if helper / 8 == owner / 8 {
                        1
                    } else {
                        2
                    };
                    taken[d] += ids.len();
                }
            }
        }
        let help = RankReport::help_by_distance(&out.reports);
        assert_eq!(help, taken, "{name}");
        assert!(help.iter().sum::<u64>() > 0, "{name}: no help");
        if name == "sites16" {
            assert!(help[2] > 0, "{name}: {help:?}");
        }
    }
}

/// 64 ranks of fluct16's speeds on 4 hosts of 16: with a board per host,
/// the hosts balance within themselves and the shared storage sees a
/// fraction of the operations; every id exactly once either way.
#[test]
fn host_boards_keep_most_balancing_off_the_shared_storage() {
    let s = fluct_sim(64);
    let opts = Options {
        ranks_per_host: 16,
        ..Options::default()
    };
    let ops = |host_board: bool| {
        let mut p = params(Mode::Full, HelpPolicy::Balanced);
        p.host_board = host_board;
        let out = sim::simulate(&s, &p, &opts).unwrap();
        assert_exactly_once(&out);
        let given: u64 = out.reports.iter().map(|r| r.given).sum();
        assert!(given > 0, "nobody was helped");
        out.storage_ops_per_second().sum::<u64>()
    };
    let (shared, host) = (ops(false), ops(true));
    assert!(
        3 * host < 2 * shared,
        "{host} shared-storage operations with host boards, {shared} without"
    );
}

/// 10,000 ranks of fluct16's speeds on hosts of 16 (`bench.sh sim
/// 10000`): every id once, the efficiency at least 0.90 and the shared
/// storage's busiest second at most 2,000 operations. (The locked protocol
/// reached 0.959; with claims it is 0.911: owners late on a host board that
/// no host-mate serves in time, see `scripts/BENCHMARKS.md`. The target
/// stays 0.95.)
#[test]
fn ten_thousand_ranks_balance_within_the_storage_budget() {
    let s = fluct_sim(10_000);
    let opts = Options {
        ranks_per_host: 16,
        ..Options::default()
    };
    let out = sim::simulate(&s, &params(Mode::Full, HelpPolicy::Balanced), &opts).unwrap();
    assert_exactly_once(&out);
    let efficiency = s.ideal(s.ranks) / out.makespan;
    let peak = out.storage_ops_per_second().max().unwrap_or(0);
    println!("10,000 ranks: efficiency {efficiency:.3}, peak {peak} operations per second");
    assert!(efficiency >= 0.90, "efficiency {efficiency:.3}");
    assert!(peak <= 2000, "peak {peak} operations per second");
}
