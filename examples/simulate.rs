//! The simulator from the command line: runs a scenario on simulated ranks
//! (the library's pure state machines over an in-memory board, with a
//! virtual clock) and prints one result line, like the emulator's:
//!
//! ```text
//! result: scenario=step16 mode=full ranks=16 realisations=8000 missing=0 duplicates=0 makespan_s=11.91 ideal_s=11.75 efficiency=0.987 sim_seconds=0.003 storage_ops_per_s_peak=16 storage_ops=110 finalize_writes=16 help_d0=1044 help_d1=0 help_d2=0 steals=0 ops_per_steal=0.00 host_steals=39 transfers=0 transferred=0 waves=40
//! ```
//!
//! `help_d<d>`: realisations helpers at distance `d` took (the emulator's);
//! `finalize_writes`: the monitor logs' writes at `finish`, one per rank, not
//! in `storage_ops`; `steals`: searches that claimed ids from the shared
//! board, and `ops_per_steal` the storage operations they made there, on
//! average; `host_steals`: those from a host's board;
//! `transfers`, `transferred`: host transfers sent, and the ids they
//! carried; `waves`: termination waves completed.
//! Usage: `simulate SCENARIO MODE [--storage-delay S] [--seed N] [--jitter F]
//! [--ranks-per-host N] [--hosts-per-site N] [--trace] [--ops]`; `--trace`
//! prints every rank's plan, SOS and AID events on stderr, in time order;
//! `--ops` prints the shared-storage operations of each second by the kind
//! of request that made them, and the monitor logs' lazy writes
//! (`second=<s> storage_ops post=<n> refresh=<n> claim=<n> withdraw=<n> help=<n> log=<n>`). SCENARIO is a name of `examples/scenarios/` or a
//! file; MODE is `static`, `warmup` or `full`.
//! The settings are soslb's: `soslb.ron` or `SOSLB_CONFIG`, and `SOSLB_*`
//! variables (the `emulate` section's `storage_delay`, e.g.
//! `SOSLB_EMULATE='(storage_delay: 0.05)'`, is the default of
//! `--storage-delay`).

use soslb::config::{Config, Mode};
use soslb::policy::{Event, Params, RankReport};
use soslb::scenario::Scenario;
use soslb::sim::{KINDS, Options, simulate};
use std::process::ExitCode;

fn number<T: std::str::FromStr>(
    it: &mut impl Iterator<Item = String>,
    flag: &str,
) -> Result<T, String> {
    let v = it.next().ok_or(format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a number"))
}

fn run() -> Result<String, String> {
    let usage = "usage: simulate SCENARIO static|warmup|full [--storage-delay S] [--seed N] \
                 [--jitter F] [--ranks-per-host N] [--hosts-per-site N] [--trace] [--ops]";
    let mut it = std::env::args().skip(1);
    let scenario = Scenario::from_file(&Scenario::path_of(&it.next().ok_or(usage)?))
        .map_err(|e| e.to_string())?;
    let mode = match it.next().as_deref() {
        Some("static") => Mode::Static,
        Some("warmup") => Mode::Warmup,
        Some("full") => Mode::Full,
        other => return Err(format!("unknown mode {other:?}; {usage}")),
    };
    let mut config = Config::load(None).map_err(|e| e.to_string())?;
    config.mode = mode;
    let (mut trace, mut ops) = (false, false);
    let mut opts = Options {
        storage_delay: config.emulate.storage_delay,
        ..Options::default()
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--storage-delay" => opts.storage_delay = number(&mut it, &flag)?,
            "--seed" => opts.seed = number(&mut it, &flag)?,
            "--jitter" => opts.jitter = number(&mut it, &flag)?,
            "--ranks-per-host" => opts.ranks_per_host = number(&mut it, &flag)?,
            "--hosts-per-site" => opts.hosts_per_site = number(&mut it, &flag)?,
            "--trace" => trace = true,
            "--ops" => ops = true,
            _ => return Err(format!("unknown argument {flag:?}; {usage}")),
        }
    }
    let clock = std::time::Instant::now();
    let out = simulate(&scenario, &Params::from(&config), &opts).map_err(|e| e.to_string())?;
    let seconds = clock.elapsed().as_secs_f64();
    if trace {
        print_trace(&out.events);
        for (rank, t) in out.finish.iter().enumerate() {
            let (r, storage) = (&out.reports[rank], out.storage_seconds[rank]);
            eprintln!(
                "rank={rank:3} finished={t:.3} computed={} busy_s={:.2} storage_s={storage:.2}",
                r.computed, r.busy
            );
        }
    }
    if ops {
        for (second, kinds) in out.storage_ops.iter().enumerate() {
            let by: Vec<String> = KINDS
                .iter()
                .zip(kinds)
                .map(|(kind, n)| format!("{kind}={n}"))
                .collect();
            eprintln!("second={second} storage_ops {}", by.join(" "));
        }
    }
    let missing = out.counts.iter().filter(|&&c| c == 0).count();
    let duplicates: u64 = out
        .counts
        .iter()
        .map(|&c| u64::from(c.saturating_sub(1)))
        .sum();
    let ideal = scenario.ideal(scenario.ranks);
    let help = RankReport::help_by_distance(&out.reports);
    let steals = (out.reports.iter()).fold((0, 0), |a, r| (a.0 + r.steals.0, a.1 + r.steals.1));
    Ok(format!(
        "result: scenario={} mode={} ranks={} realisations={} missing={missing} duplicates={duplicates} \
         makespan_s={:.2} ideal_s={ideal:.2} efficiency={:.3} sim_seconds={seconds:.3} \
         storage_ops_per_s_peak={} storage_ops={} finalize_writes={} help_d0={} help_d1={} \
         help_d2={} steals={} ops_per_steal={:.2} host_steals={} transfers={} transferred={} waves={}",
        scenario.name,
        format!("{mode:?}").to_lowercase(),
        scenario.ranks,
        scenario.realisations,
        out.makespan,
        ideal / out.makespan,
        out.storage_ops_per_second().max().unwrap_or(0),
        out.storage_ops_per_second().sum::<u64>(),
        out.finalize_writes,
        help[0],
        help[1],
        help[2],
        steals.0,
        steals.1 as f64 / steals.0.max(1) as f64,
        out.reports.iter().map(|r| r.host_steals).sum::<u64>(),
        out.transfers.0,
        out.transfers.1,
        out.waves,
    ))
}

/// The progress, plan, SOS and AID events of every rank, in time order, on stderr.
fn print_trace(events: &[Vec<(f64, Event)>]) {
    let mut all: Vec<(f64, usize, String)> = Vec::new();
    for (rank, list) in events.iter().enumerate() {
        for (t, e) in list {
            let text = match e {
                Event::Progress {
                    ids,
                    remaining,
                    speed,
                    forecast,
                    ..
                } => format!(
                    "progress ids={} remaining={remaining} speed={speed:.1} forecast={forecast:.2}",
                    ids.len()
                ),
                Event::Plan {
                    quota,
                    horizon,
                    speed,
                } => {
                    format!(
                        "plan quota={} speed={speed:.1} horizon={horizon:.2}",
                        quota.len()
                    )
                }
                Event::SosPosted {
                    seq,
                    tail,
                    forecast,
                } => {
                    format!(
                        "sos posted seq={seq} tail={} forecast={forecast:.2}",
                        tail.len()
                    )
                }
                Event::SosWithdrawn {
                    seq,
                    reclaimed,
                    forecast,
                } => format!(
                    "sos withdrawn seq={seq} reclaimed={} forecast={forecast:.2}",
                    reclaimed.len()
                ),
                Event::SosClosed { seq } => format!("sos closed seq={seq}"),
                Event::AidReceived { aid, .. } => {
                    format!(
                        "aid received from={} ids={}",
                        aid.helper.map_or("?".into(), |h| h.to_string()),
                        aid.ids.len()
                    )
                }
                Event::AidGiven { owner, ids, .. } => {
                    format!("aid taken from={owner} ids={}", ids.len())
                }
                Event::Sent { to, ids } => format!("transfer to={to} ids={}", ids.len()),
                Event::Received { from, ids } => {
                    format!("transfer from={from} ids={}", ids.len())
                }
                Event::Recovered { error } => format!("recovered {error}"),
            };
            all.push((*t, rank, text));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, rank, text) in all {
        eprintln!("t={t:8.3} rank={rank:3} {text}");
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("simulate: {e}");
            ExitCode::from(2)
        }
    }
}
