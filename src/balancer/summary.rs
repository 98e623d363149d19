//! The summary [`Summary`] of a run: every rank's figures gathered at
//! `finish`, the statistics reduced over the ranks, the audit of the ids
//! computed, and the table printed with `summary: true`.

use crate::comm::Comm;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::policy::{Rank, RankReport};
use crate::resume::Prior;
use crate::stats::{Observables, Statistic};
use crate::verdict::{Audit, Verdict};
use std::path::PathBuf;

/// What [`Balancer::finish`](crate::Balancer::finish) returns on every rank.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Realisations added with [`Balancer::add`](crate::Balancer::add), over
    /// all ranks.
    pub count: u64,
    /// Mean and standard error of each observable.
    pub statistics: Vec<Statistic>,
    /// Each rank's figures.
    pub ranks: Vec<RankReport>,
    /// Each rank's host.
    pub hosts: Vec<String>,
    /// The run directory on the signal directory.
    pub job_dir: PathBuf,
    /// Seconds from the common start to the verdict.
    pub elapsed: f64,
    /// How the job ended.
    pub verdict: Verdict,
    /// The ids computed over all ranks, against `0..total` (in a resumed
    /// run: against the ids the journal did not hold, numbered from 0).
    pub audit: Audit,
    /// Realisations whose sums came from the completion journal of earlier
    /// runs (included in `count` and `statistics`).
    pub resumed: u64,
    /// Termination waves completed (the same on every rank): `elapsed`
    /// over this is the mean time a wave took.
    pub waves: u64,
    /// Seconds `init` took, on the rank where it took longest (from the
    /// entry of `init` to its return; the monitor logs' `init-time` lines
    /// give each rank's phases).
    pub init: f64,
}

impl Summary {
    /// What the audit found wrong with the ids computed, if anything: with
    /// [`Verdict::Done`] they must be `0..total`, each once; after a stop, at
    /// most that many.
    pub fn audit_problem(&self, total: u64) -> Option<String> {
        let a = &self.audit;
        let all = Audit::of_all(total);
        let per_rank = || {
            let counts: Vec<String> = self.ranks.iter().map(|r| r.computed.to_string()).collect();
            format!("per rank: {}", counts.join(" "))
        };
        match self.verdict {
            Verdict::Done if *a != all => Some(format!(
                "the ranks computed {} realisations for a total of {total}, {}; {}",
                a.count,
                match a.count.cmp(&total) {
                    std::cmp::Ordering::Greater => "so some ids were computed twice",
                    std::cmp::Ordering::Less => "so some ids were never computed",
                    std::cmp::Ordering::Equal => {
                        "but not the ids 0..total each once: some twice, others never"
                    }
                },
                per_rank()
            )),
            Verdict::Stopped if a.count > total => Some(format!(
                "the ranks computed {} realisations for a total of {total}: some ids twice; {}",
                a.count,
                per_rank()
            )),
            _ => None,
        }
    }

    /// The per-rank table printed when the config says `summary: true`.
    pub fn table(&self, config: &Config, total: u64) -> String {
        let mut s = format!(
            "soslb summary: {} ranks, {total} realisations, mode {:?}, policy {:?}, {:.3} s (init {:.3} s)\n",
            self.ranks.len(),
            config.mode,
            config.help_policy,
            self.elapsed,
            self.init
        );
        s += "  rank host             computed  busy_s  warmup_v  planned  taken  given  sos\n";
        for (r, h) in self.ranks.iter().zip(&self.hosts) {
            s += &format!(
                "  {:>4} {:<16} {:>8} {:>7.2} {:>9.2} {:>8} {:>6} {:>6} {:>4}\n",
                r.rank,
                h,
                r.computed,
                r.busy,
                r.warmup_speed,
                r.planned,
                r.taken,
                r.given,
                r.sos_posted
            );
        }
        s += &match (&self.verdict, self.audit_problem(total)) {
            (_, Some(problem)) => format!("  audit: FAILED: {problem}\n"),
            (Verdict::Done, None) => format!(
                "  audit: {} realisations computed, ids 0..{total} each exactly once\n",
                self.audit.count
            ),
            (v, None) => format!(
                "  audit: {} of {total} realisations computed ({v:?})\n",
                self.audit.count
            ),
        };
        if self.resumed > 0 {
            s += &format!(
                "  journal: {} realisations from earlier runs, {} computed in this run\n",
                self.resumed, self.audit.count
            );
        }
        let errors: u64 = self.ranks.iter().map(|r| r.errors).sum();
        if errors > 0 {
            s += &format!(
                "  {errors} signal-file error(s) recovered from: see the monitor logs in {}\n",
                self.job_dir.display()
            );
        }
        s
    }
}

/// Every rank's figures at `finish`, and what they add up to.
pub(super) struct Gathered {
    /// Each rank's figures.
    pub(super) ranks: Vec<RankReport>,
    /// The ids computed over all ranks.
    pub(super) audit: Audit,
    /// The observables reduced over the ranks (with the journalled sums of
    /// earlier runs); none when the ranks added different numbers.
    pub(super) observables: Observables,
    /// The ranks added different numbers of observables per realisation.
    pub(super) mismatch: Option<Error>,
    /// The longest `init` of the ranks, seconds.
    pub(super) init: f64,
}

/// Gather every rank's figures, audit and observables (collective).
pub(super) fn gather(
    comm: &Comm,
    rank: &Rank,
    observables: &Observables,
    init_seconds: f64,
    prior: Option<&Prior>,
) -> Result<Gathered> {
    let words = own_words(rank, observables, init_seconds);
    let all = comm.all_gather(&words);
    let rows: Vec<&[u64]> = all.chunks_exact(words.len()).collect();
    let ranks: Vec<RankReport> = rows
        .iter()
        .enumerate()
        .map(|(rank, w)| report_of(rank, w))
        .collect();
    let mut total_audit = Audit::default();
    for w in &rows {
        total_audit.merge(&Audit {
            count: w[0],
            sum: w[11],
            sum_sq: w[12],
        });
    }
    let (n, mismatch) = observables_per_realisation(&rows, prior);
    let observables = match mismatch {
        None => {
            let mut words = observables.to_words(n);
            // The journalled sums of earlier runs, once (on rank 0).
            if let Some(p) = prior.filter(|p| p.observables == n && comm.rank() == 0) {
                words.iter_mut().zip(&p.words).for_each(|(w, p)| *w += p);
            }
            Observables::from_words(n, &comm.sum(&words))?
        }
        Some(_) => Observables::new(),
    };
    Ok(Gathered {
        ranks,
        audit: total_audit,
        observables,
        mismatch,
        init: rows
            .iter()
            .map(|w| f64::from_bits(w[19]))
            .fold(0.0, f64::max),
    })
}

/// This rank's row of the gather at `finish`.
fn own_words(rank: &Rank, observables: &Observables, init_seconds: f64) -> [u64; 20] {
    let mine = rank.report();
    let audit = rank.audit();
    [
        mine.computed,
        mine.busy.to_bits(),
        mine.warmup_speed.to_bits(),
        mine.planned,
        mine.horizon.to_bits(),
        mine.taken,
        mine.given,
        mine.sos_posted,
        mine.errors,
        observables.len() as u64,
        observables.count(),
        audit.sum,
        audit.sum_sq,
        mine.given_to[0],
        mine.given_to[1],
        mine.given_to[2],
        mine.steals.0,
        mine.steals.1,
        mine.host_steals,
        init_seconds.to_bits(),
    ]
}

/// The figures of `rank` from its row of the gather.
fn report_of(rank: usize, w: &[u64]) -> RankReport {
    RankReport {
        rank,
        computed: w[0],
        busy: f64::from_bits(w[1]),
        warmup_speed: f64::from_bits(w[2]),
        planned: w[3],
        horizon: f64::from_bits(w[4]),
        taken: w[5],
        given: w[6],
        sos_posted: w[7],
        errors: w[8],
        given_to: [w[13], w[14], w[15]],
        steals: (w[16], w[17]),
        host_steals: w[18],
    }
}

/// The observables per realisation (the most any rank, or the journal,
/// has), and an error when the ranks that added any disagree.
fn observables_per_realisation(rows: &[&[u64]], prior: Option<&Prior>) -> (usize, Option<Error>) {
    let n = rows
        .iter()
        .map(|w| w[9] as usize)
        .chain(prior.map(|p| p.observables))
        .max()
        .unwrap_or(0);
    let mismatch = rows
        .iter()
        .position(|w| w[10] > 0 && w[9] as usize != n)
        .map(|r| {
            let other = rows.iter().position(|w| w[9] as usize == n).unwrap_or(0);
            Error::argument(
                "values",
                format!(
                    "rank {r} added {} observables per realisation and rank {other} added {n}: \
                     every call of soslb_add on every rank must pass the same number",
                    rows[r][9]
                ),
            )
        });
    (n, mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(verdict: Verdict, ids: &[std::ops::Range<u64>]) -> Summary {
        let mut audit = Audit::default();
        ids.iter().for_each(|r| audit.add(r.clone()));
        Summary {
            count: audit.count,
            statistics: Vec::new(),
            ranks: vec![RankReport {
                computed: audit.count,
                ..RankReport::default()
            }],
            hosts: vec!["h".into()],
            job_dir: PathBuf::from("run"),
            elapsed: 1.0,
            verdict,
            audit,
            resumed: 0,
            waves: 0,
            init: 0.0,
        }
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // sets of id ranges
    fn the_audit_names_ids_computed_twice_or_never() {
        assert_eq!(summary(Verdict::Done, &[0..10]).audit_problem(10), None);
        let twice = summary(Verdict::Done, &[0..10, 3..4]).audit_problem(10);
        assert!(twice.is_some_and(|p| p.contains("11") && p.contains("twice")));
        let never = summary(Verdict::Done, &[0..9]).audit_problem(10);
        assert!(never.is_some_and(|p| p.contains("never")));
        let swapped = summary(Verdict::Done, &[0..4, 5..10, 7..8]).audit_problem(10);
        assert!(swapped.is_some_and(|p| p.contains("some twice, others never")));
        // After a stop, fewer is fine; more is not.
        assert_eq!(summary(Verdict::Stopped, &[0..4]).audit_problem(10), None);
        assert!(
            summary(Verdict::Stopped, &[0..10, 0..1])
                .audit_problem(10)
                .is_some()
        );
        let table = summary(Verdict::Done, &[0..10, 3..4]).table(&Config::default(), 10);
        assert!(table.contains("audit: FAILED"), "{table}");
    }
}
