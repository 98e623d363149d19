//! `soslb report`: what a run did, read back from its monitor logs
//! (`<run dir>/log/*.log`, format in [`crate::monitor`]).
//!
//! [`Run::from_logs`] is pure (records in, table and series out);
//! [`Run::read`] reads the files of a finished or running job, and
//! [`Run::write_csv`] writes the series beside the pictures, which the
//! `soslb` command draws.
//!
//! Per rank:
//!
//! - **own**: the ids the rank owned as its own work: its initial block, or
//!   after Algorithm 1's plan the quota plus what it computed of its block
//!   before the plan;
//! - **received**: ids it claimed from others' SOS (its `aid-given` lines)
//!   or received in host transfers (its `transfer-received` lines);
//! - **given**: ids others claimed from its SOS or received from it (their
//!   `aid-given` and `transfer-received` lines);
//! - **computed**: the ids of its `progress` lines, so that
//!   own + received − given = computed when nothing was lost;
//! - **speed**: computed realisations per second of computing;
//! - **finish**: the job time of its last realisation;
//! - **idle**: the job's end (the last rank's finish) less its computing time.

pub mod parse;

use crate::ids::IdSet;
use crate::plan::initial_block;
use crate::policy::Event;
use parse::{Line, Parsed, Record};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One rank's line of the table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankRow {
    /// The rank.
    pub rank: usize,
    /// Its host (from its `init` line).
    pub host: String,
    /// Ids it owned as its own work.
    pub own: u64,
    /// Ids it took from others' SOS.
    pub received: u64,
    /// Ids others took from its SOS.
    pub given: u64,
    /// Ids it computed.
    pub computed: u64,
    /// Realisations per second of computing.
    pub speed: f64,
    /// Job time of its last realisation (s).
    pub finish: f64,
    /// The job's end less its computing time (s).
    pub idle: f64,
}

/// What a rank was doing in a stretch of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Its own ids.
    Own,
    /// Ids taken from another rank's SOS.
    Help,
}

/// A stretch of computing: `rank` computed from `start` to `end` (job s).
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The rank.
    pub rank: usize,
    /// Start (job seconds).
    pub start: f64,
    /// End (job seconds).
    pub end: f64,
    /// Own work or help.
    pub work: Work,
}

/// A run as its logs tell it.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// The run directory.
    pub dir: PathBuf,
    /// Ranks of the job.
    pub ranks: usize,
    /// Realisations of the job.
    pub total: u64,
    /// The mode (`Static`, `Warmup`, `Full`).
    pub mode: String,
    /// The last rank's finish (job seconds).
    pub end: f64,
    /// Algorithm 1's horizon, if there was a plan.
    pub horizon: Option<f64>,
    /// One row per rank.
    pub rows: Vec<RankRow>,
    /// Per rank: (job time, forecast finishing time) of each progress line.
    pub forecasts: Vec<Vec<(f64, f64)>>,
    /// `help[helper][owner]`: ids `helper` took from `owner`'s SOS.
    pub help: Vec<Vec<u64>>,
    /// Stretches of computing, per rank in time order.
    pub timeline: Vec<Segment>,
    /// Per rank, the ids its progress lines list.
    pub computed_ids: Vec<IdSet>,
    /// What was wrong with the logs (cut lines, unreadable lines, ids
    /// computed twice, ...), each naming where.
    pub warnings: Vec<String>,
}

impl Run {
    /// Read the logs of a run directory (`<signal_dir>/<job_id>.<n>`, or
    /// its `log/` folder).
    pub fn read(dir: &Path) -> Result<Run, String> {
        let logs = if dir.join("log").is_dir() {
            dir.join("log")
        } else {
            dir.to_path_buf()
        };
        let entries = std::fs::read_dir(&logs)
            .map_err(|e| format!("{}: cannot list the monitor logs: {e}", logs.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(format!(
                "{}: no monitor log (*.log): is this a run directory <signal_dir>/<job_id>.<n> \
                 of a job run with `log: true`?",
                logs.display()
            ));
        }
        let mut parsed = Vec::new();
        for p in &paths {
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            parsed.push(parse::parse_log(
                &String::from_utf8_lossy(&bytes),
                &p.display().to_string(),
            ));
        }
        let mut run = Run::from_logs(parsed)?;
        run.dir = dir.to_path_buf();
        Ok(run)
    }

    /// The run told by the parsed logs (one per rank, any order).
    pub fn from_logs(logs: Vec<Parsed>) -> Result<Run, String> {
        let mut run = Run::default();
        let mut records: Vec<Record> = Vec::new();
        for p in logs {
            run.warnings.extend(p.warnings);
            records.extend(p.records);
        }
        for r in &records {
            if let Line::Init {
                ranks, total, mode, ..
            } = &r.line
            {
                (run.ranks, run.total, run.mode) = (*ranks, *total, mode.clone());
            }
        }
        if run.ranks == 0 {
            return Err("no `init` line in the monitor logs: not the logs of a soslb job".into());
        }
        if let Some(r) = records.iter().find(|r| r.rank >= run.ranks) {
            return Err(format!(
                "a log line of rank {} in a job of {} ranks",
                r.rank, run.ranks
            ));
        }
        // Stable: each rank's lines keep their order.
        records.sort_by_key(|r| r.rank);
        let n = run.ranks;
        run.rows = (0..n)
            .map(|rank| RankRow {
                rank,
                ..RankRow::default()
            })
            .collect();
        run.forecasts = vec![Vec::new(); n];
        run.help = vec![vec![0; n]; n];
        run.computed_ids = vec![IdSet::new(); n];
        let mut tally = Tally::new(n);
        for r in &records {
            run.add(r, &mut tally);
        }
        run.end = run.rows.iter().map(|r| r.finish).fold(0.0, f64::max);
        run.fill_rows(&tally);
        run.check_once();
        Ok(run)
    }

    /// Record `r` of rank `r.rank`, read in the rank's order.
    fn add(&mut self, r: &Record, tally: &mut Tally) {
        let i = r.rank;
        match &r.line {
            Line::Init { host, .. } => self.rows[i].host = host.clone(),
            Line::Event(Event::Plan {
                quota: q, horizon, ..
            }) => {
                tally.quota[i] = Some(q.clone());
                self.horizon = Some(self.horizon.map_or(*horizon, |h: f64| h.max(*horizon)));
            }
            // A host transfer received counts as help taken from its
            // sender.
            Line::Event(
                Event::AidGiven { owner, ids, .. } | Event::Received { from: owner, ids },
            ) => {
                if *owner < self.ranks {
                    self.help[i][*owner] += ids.len();
                }
                tally.taken[i].extend(ids);
            }
            Line::Event(Event::Progress {
                ids,
                speed,
                remaining,
                forecast,
                ..
            }) => {
                let len = ids.len();
                let helped = ids.clone().remove(&tally.taken[i]);
                let work = if 2 * helped > len {
                    Work::Help
                } else {
                    Work::Own
                };
                // After a wait: as long as these ids take at its speed.
                let start = match tally.last[i] {
                    (t, left) if left > 0 || *speed <= 0.0 => t,
                    (t, _) => (r.t - len as f64 / speed).max(t),
                };
                tally.busy[i] += r.t - start;
                self.timeline.push(Segment {
                    rank: i,
                    start,
                    end: r.t,
                    work,
                });
                self.forecasts[i].push((r.t, *forecast));
                self.rows[i].finish = r.t;
                self.computed_ids[i].extend(ids);
                tally.last[i] = (r.t, *remaining);
            }
            Line::Verdict { computed } => tally.verdict[i] = Some((*computed, r.t)),
            _ => {}
        }
    }

    /// Each rank's row from its records and `tally`; a warning when its
    /// verdict line disagrees with its progress lines.
    fn fill_rows(&mut self, tally: &Tally) {
        let n = self.ranks;
        for i in 0..n {
            let block = IdSet::from_range(initial_block(self.total, n, i));
            let row = &mut self.rows[i];
            row.computed = self.computed_ids[i].len();
            row.received = self.help[i].iter().sum();
            row.given = self.help.iter().map(|h| h[i]).sum();
            row.own = match &tally.quota[i] {
                None => block.len(),
                // The quota, and the ids of the block computed in the
                // warm-up: computed, in the block, neither in the quota nor
                // taken from an SOS (a quota may hold ids of others' blocks).
                Some(q) => {
                    let mut warmup = intersection(&self.computed_ids[i], &block);
                    warmup.remove(q);
                    warmup.remove(&tally.taken[i]);
                    q.len() + warmup.len()
                }
            };
            let busy = tally.busy[i];
            row.speed = if busy > 0.0 {
                row.computed as f64 / busy
            } else {
                0.0
            };
            row.idle = (self.end - busy).max(0.0);
            if let Some((c, t)) = tally.verdict[i]
                && c != row.computed
            {
                self.warnings.push(format!(
                    "rank {i}: its verdict line (t={t:.3}) says {c} realisations computed, \
                     its progress lines list {}",
                    row.computed
                ));
            }
        }
    }

    /// A warning for each rank that computed ids a lower rank computed too.
    fn check_once(&mut self) {
        let mut seen = IdSet::new();
        for (i, ids) in self.computed_ids.iter().enumerate() {
            let twice = intersection(ids, &seen);
            if let Some(first) = twice.ranges().next() {
                self.warnings.push(format!(
                    "rank {i}: {} id(s) computed by a lower rank too (the first: {})",
                    twice.len(),
                    first.start
                ));
            }
            seen.extend(ids);
        }
    }
}

/// What [`Run::from_logs`] gathers of each rank besides the run's fields.
struct Tally {
    /// The quota of its plan line.
    quota: Vec<Option<IdSet>>,
    /// Seconds of computing.
    busy: Vec<f64>,
    /// Ids taken from others' SOS or received in host transfers.
    taken: Vec<IdSet>,
    /// (job time, ids left) of each rank's last progress line: a rank
    /// that had ids left computed until its next line.
    last: Vec<(f64, u64)>,
    /// The computed count and time of its verdict line.
    verdict: Vec<Option<(u64, f64)>>,
}

impl Tally {
    fn new(n: usize) -> Tally {
        Tally {
            quota: vec![None; n],
            busy: vec![0.0; n],
            taken: vec![IdSet::new(); n],
            last: vec![(0.0, 1); n],
            verdict: vec![None; n],
        }
    }
}

impl Run {
    /// The per-rank table, with a line of totals (own and computed add up to
    /// the job's realisations when nothing was lost).
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "run {}: {} ranks, {} realisations, mode {}, last realisation at {:.3} s",
            self.dir.display(),
            self.ranks,
            self.total,
            self.mode,
            self.end
        );
        let _ = writeln!(
            t,
            "{:>5} {:<12} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8}",
            "rank", "host", "own", "received", "given", "computed", "speed/s", "finish_s", "idle_s"
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:>5} {:<12} {:>9} {:>9} {:>9} {:>9} {:>10.3} {:>9.3} {:>8.3}",
                r.rank, r.host, r.own, r.received, r.given, r.computed, r.speed, r.finish, r.idle
            );
        }
        let sum = |f: fn(&RankRow) -> u64| self.rows.iter().map(f).sum::<u64>();
        let _ = writeln!(
            t,
            "{:>5} {:<12} {:>9} {:>9} {:>9} {:>9}",
            "total",
            "",
            sum(|r| r.own),
            sum(|r| r.received),
            sum(|r| r.given),
            sum(|r| r.computed)
        );
        t
    }

    /// The series as CSV files in `out`: `ranks.csv` (the table),
    /// `forecast.csv`, `help.csv` (non-zero entries of the matrix),
    /// `timeline.csv`.
    pub fn write_csv(&self, out: &Path) -> Result<(), String> {
        let mut ranks =
            String::from("rank,host,own,received,given,computed,speed_per_s,finish_s,idle_s\n");
        for r in &self.rows {
            let _ = writeln!(
                ranks,
                "{},{},{},{},{},{},{:.6},{:.6},{:.6}",
                r.rank, r.host, r.own, r.received, r.given, r.computed, r.speed, r.finish, r.idle
            );
        }
        let mut forecast = String::from("rank,t_s,forecast_s\n");
        for (rank, f) in self.forecasts.iter().enumerate() {
            for (t, v) in f {
                let _ = writeln!(forecast, "{rank},{t:.6},{v:.6}");
            }
        }
        let mut help = String::from("helper,owner,realisations\n");
        for (helper, row) in self.help.iter().enumerate() {
            for (owner, &n) in row.iter().enumerate().filter(|(_, n)| **n > 0) {
                let _ = writeln!(help, "{helper},{owner},{n}");
            }
        }
        let mut timeline = String::from("rank,start_s,end_s,work\n");
        for s in &self.timeline {
            let work = match s.work {
                Work::Own => "own",
                Work::Help => "help",
            };
            let _ = writeln!(timeline, "{},{:.6},{:.6},{work}", s.rank, s.start, s.end);
        }
        for (name, text) in [
            ("ranks.csv", ranks),
            ("forecast.csv", forecast),
            ("help.csv", help),
            ("timeline.csv", timeline),
        ] {
            let path = out.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// The ids in both sets.
fn intersection(a: &IdSet, b: &IdSet) -> IdSet {
    let mut outside = a.clone();
    outside.remove(b);
    let mut both = a.clone();
    both.remove(&outside);
    both
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks, 20 ids: a warm-up of 2 ids each, a plan, rank 1 posts an
    /// SOS and rank 0 takes 3 of its ids.
    fn logs() -> Vec<Parsed> {
        let zero = "\
s rank=0 t=0 init ranks=2 total=20 host=a site=s mode=Full
s rank=0 t=1 progress done=2 speed=2 remaining=8 forecast=5 ids=0..2
s rank=0 t=1 plan speed=2 horizon=5 quota_len=7 quota=2..9
s rank=0 t=4.5 progress done=9 speed=2 remaining=0 forecast=4.5 ids=2..9
s rank=0 t=5 aid-given owner=1 seq=1 ids_len=3 ids=17..20
s rank=0 t=6.5 progress done=12 speed=2 remaining=0 forecast=6.5 ids=17..20
s rank=0 t=7 verdict Done computed=12
";
        let one = "\
s rank=1 t=0 init ranks=2 total=20 host=b site=s mode=Full
s rank=1 t=1 progress done=2 speed=2 remaining=8 forecast=5 ids=10..12
s rank=1 t=1 plan speed=2 horizon=5 quota_len=9 quota=9..10,12..20
s rank=1 t=3 sos-posted seq=1 forecast=8 tail_len=4 tail=16..20
s rank=1 t=5.5 aid-received seq=1 helper=0 at=5 helper_speed=2 ids_len=3 ids=17..20
s rank=1 t=6.9 progress done=8 speed=1 remaining=0 forecast=6.9 ids=9..10,12..17
s rank=1 t=7 verdict Done computed=8
";
        vec![
            parse::parse_log(one, "b.1.log"),
            parse::parse_log(zero, "a.0.log"),
        ]
    }

    #[test]
    fn the_table_adds_up() {
        let run = Run::from_logs(logs()).unwrap();
        assert!(run.warnings.is_empty(), "{:?}", run.warnings);
        let cols: Vec<_> = run
            .rows
            .iter()
            .map(|r| (r.host.as_str(), r.own, r.received, r.given, r.computed))
            .collect();
        assert_eq!(cols, [("a", 9, 3, 0, 12), ("b", 11, 0, 3, 8)]);
        assert_eq!(run.help, [[0, 3], [0, 0]]);
        assert_eq!((run.end, run.horizon), (6.9, Some(5.0)));
        // Rank 0: busy 0..4.5 (own), then 5.0..6.5 (help): idle 6.9 - 6.
        assert!(
            (run.rows[0].idle - 0.9).abs() < 1e-9,
            "{}",
            run.rows[0].idle
        );
        assert!((run.rows[0].speed - 2.0).abs() < 1e-9);
        let help: Vec<_> = run
            .timeline
            .iter()
            .filter(|s| s.work == Work::Help)
            .map(|s| (s.rank, s.start, s.end))
            .collect();
        assert_eq!(help, [(0, 5.0, 6.5)]);
        let table = run.table();
        assert!(
            table
                .lines()
                .last()
                .unwrap()
                .ends_with("20         3         3        20"),
            "{table}"
        );
    }

    #[test]
    fn ids_computed_twice_are_named() {
        let mut l = logs();
        l[0] = parse::parse_log(
            "s rank=1 t=0 init ranks=2 total=20 host=b site=s mode=Static\n\
             s rank=1 t=1 progress done=11 speed=2 remaining=0 forecast=1 ids=9..20\n",
            "b.1.log",
        );
        let run = Run::from_logs(l).unwrap();
        assert_eq!(
            run.warnings,
            ["rank 1: 3 id(s) computed by a lower rank too (the first: 17)"]
        );
        assert_eq!(run.rows[1].own, 10); // no plan: its initial block
    }

    #[test]
    fn logs_of_no_job_are_an_error() {
        let e = Run::from_logs(vec![parse::parse_log("x rank=0 t=0 progress\n", "x.log")]);
        assert!(e.unwrap_err().contains("no `init` line"));
    }
}
