//! What the earlier runs of a job completed: each rank's [`Completion`]
//! as its journal holds it, merged into a [`Prior`], and the [`IdMap`]
//! numbering the ids left for a resumed run (pure values; the files are
//! [`crate::resume`]'s).

use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::stats::Observables;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What one rank completed in one run: a slot of its journal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The rank.
    pub rank: usize,
    /// Write number: the slot with the higher one is the newer.
    pub seq: u64,
    /// The ids completed (0-based).
    pub ids: IdSet,
    /// Observables per realisation (0 before the first `add`).
    pub observables: usize,
    /// The non-zero words of [`Observables::to_words`] (index, value): the
    /// count of realisations added, then the exact sums.
    pub sums: Vec<(u32, i64)>,
}

impl Completion {
    /// The snapshot of `ids` and `obs` as write number `seq` of `rank`.
    pub fn of(rank: usize, seq: u64, ids: &IdSet, obs: &Observables) -> Completion {
        let words = obs.to_words(obs.len());
        Completion {
            rank,
            seq,
            ids: ids.clone(),
            observables: obs.len(),
            sums: (0u32..).zip(words).filter(|&(_, w)| w != 0).collect(),
        }
    }

    /// The dense words of [`Observables::to_words`], or why they cannot be.
    fn words(&self) -> std::result::Result<Vec<i64>, String> {
        if self.observables > Observables::MAX {
            return Err(format!("{} observables", self.observables));
        }
        let mut words = Observables::new().to_words(self.observables);
        let len = words.len();
        for &(i, w) in &self.sums {
            *words
                .get_mut(i as usize)
                .ok_or_else(|| format!("sum word {i} beyond {len}"))? = w;
        }
        Ok(words)
    }
}

/// What the earlier runs of a job completed, merged: on every rank of a
/// resumed run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    /// The ids completed by earlier runs.
    pub done: IdSet,
    /// Observables per realisation in them (0: none added).
    pub observables: usize,
    /// Their merged [`Observables::to_words`] (empty when none were added).
    pub words: Vec<i64>,
    /// The earlier runs.
    pub runs: usize,
    /// The largest total an earlier run asked for.
    pub total: u64,
    /// Warnings about spoiled slots (the previous slot was used).
    pub warnings: Vec<String>,
    /// This run's journal directory.
    pub dir: PathBuf,
}

impl Prior {
    /// Merge the completions of earlier runs, each with the file it came
    /// from: their ids must be disjoint and their observable counts agree.
    pub fn merge(parts: &[(PathBuf, Completion)]) -> Result<Prior> {
        let mut prior = Prior::default();
        let common = |a: &IdSet, b: &IdSet| {
            let mut only_a = a.clone();
            only_a.remove(b);
            let mut both = a.clone();
            both.remove(&only_a);
            both
        };
        for (k, (path, c)) in parts.iter().enumerate() {
            let corrupt = |reason: String| Error::Corrupt {
                path: path.clone(),
                reason: format!("completion journal: {reason}"),
            };
            if !c.ids.is_well_formed() {
                return Err(corrupt("the id ranges are not sorted and disjoint".into()));
            }
            if let Some((other, both)) = parts[..k]
                .iter()
                .map(|(p, e)| (p, common(&c.ids, &e.ids)))
                .find(|(_, both)| !both.is_empty())
            {
                return Err(corrupt(format!(
                    "ids {both} are also in {}: a journal was copied or edited",
                    other.display()
                )));
            }
            let words = c.words().map_err(corrupt)?;
            if c.observables > 0 {
                if prior.observables == 0 {
                    prior.observables = c.observables;
                    prior.words = words;
                } else if prior.observables != c.observables {
                    return Err(corrupt(format!(
                        "{} observables per realisation, but other journals of the job have {}",
                        c.observables, prior.observables
                    )));
                } else {
                    prior.words.iter_mut().zip(words).for_each(|(a, b)| *a += b);
                }
            }
            prior.done.extend(&c.ids);
        }
        Ok(prior)
    }

    /// The realisations added in the earlier runs.
    pub fn count(&self) -> u64 {
        self.words.first().map_or(0, |&c| c.max(0) as u64)
    }

    /// The ids of `0..total` that no earlier run completed.
    pub fn missing(&self, total: u64) -> IdSet {
        let mut m = IdSet::from_range(0..total);
        m.remove(&self.done);
        m
    }

    /// Why this run may not resume the job with `total` realisations.
    pub fn check_total(&self, total: u64, index: &Path) -> Result<()> {
        if total < self.total {
            return Err(Error::argument(
                "total",
                format!(
                    "{total}, but an earlier run of this job (see {}) had total {}: a resumed \
                     run may raise the total, not lower it",
                    index.display(),
                    self.total
                ),
            ));
        }
        Ok(())
    }

    /// Why `n` observables per realisation cannot be added in this run.
    pub fn check_observables(&self, n: usize) -> Result<()> {
        if self.observables != 0 && n != self.observables {
            return Err(Error::argument(
                "values",
                format!(
                    "{n} observables given, but the journalled realisations of this job \
                     (in {}) have {}: a resumed run must add the same observables",
                    self.dir.parent().unwrap_or(&self.dir).display(),
                    self.observables
                ),
            ));
        }
        Ok(())
    }
}

/// The ids a resumed run computes, `missing`, numbered `0..missing.len()`
/// for the balancing: a range of these numbers is one or several ranges of
/// real ids, in order.
#[derive(Clone, Debug)]
pub struct IdMap {
    /// `(first number, real range)` of each range of missing ids.
    runs: Vec<(u64, Range<u64>)>,
}

impl IdMap {
    /// The numbering of `missing`.
    pub fn new(missing: &IdSet) -> IdMap {
        let mut n = 0;
        let runs = missing
            .ranges()
            .map(|r| {
                let first = n;
                n += r.end - r.start;
                (first, r)
            })
            .collect();
        IdMap { runs }
    }

    /// The number of ids.
    pub fn len(&self) -> u64 {
        self.runs.last().map_or(0, |(n, r)| n + r.end - r.start)
    }

    /// True when there is no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The real ids of the numbers `v`, as ranges in order, pushed onto
    /// `out` in reverse (so that `out.pop()` gives the first).
    pub fn real_rev(&self, v: Range<u64>, out: &mut Vec<Range<u64>>) {
        let start = out.len();
        let mut k = self
            .runs
            .partition_point(|(n, r)| n + (r.end - r.start) <= v.start);
        let mut at = v.start;
        while at < v.end
            && let Some((n, r)) = self.runs.get(k)
        {
            let len = (r.end - r.start).min(v.end - n) - (at - n);
            let first = r.start + (at - n);
            out.push(first..first + len);
            at += len;
            k += 1;
        }
        out[start..].reverse();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::resume) fn set(ranges: &[(u64, u64)]) -> IdSet {
        let mut s = IdSet::new();
        ranges.iter().for_each(|&(a, b)| s.insert(a..b));
        s
    }

    pub(in crate::resume) fn obs(values: &[f64]) -> Observables {
        let mut o = Observables::new();
        values.iter().for_each(|&x| o.add(&[x, -x]).unwrap());
        o
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // lists of id ranges
    fn the_map_numbers_the_missing_ids_in_order() {
        let m = IdMap::new(&set(&[(3, 5), (7, 8), (10, 20)]));
        assert_eq!(m.len(), 13);
        let real = |v: Range<u64>| {
            let mut out = Vec::new();
            m.real_rev(v, &mut out);
            out.reverse();
            out
        };
        assert_eq!(real(0..2), [3..5]);
        assert_eq!(real(1..4), [4..5, 7..8, 10..11]);
        assert_eq!(real(3..13), [10..20]);
        assert_eq!(real(2..3), [7..8]);
        // Every number maps to a distinct missing id, all of them.
        let all: Vec<u64> = real(0..13).into_iter().flatten().collect();
        assert_eq!(all, [3, 4, 7, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
        assert!(IdMap::new(&IdSet::new()).is_empty());
    }

    #[test]
    fn merged_sums_are_the_bits_of_one_run() {
        let data: Vec<f64> = (0..100).map(|i| (i as f64).sqrt() * 1e-3 + 0.1).collect();
        let whole = obs(&data);
        let parts = vec![
            (
                PathBuf::from("0/0.a.ron"),
                Completion::of(0, 3, &set(&[(0, 40)]), &obs(&data[..40])),
            ),
            (
                PathBuf::from("0/1.a.ron"),
                Completion::of(1, 1, &set(&[(60, 100)]), &obs(&data[60..])),
            ),
            (
                PathBuf::from("1/0.b.ron"),
                Completion::of(0, 2, &set(&[(40, 60)]), &obs(&data[40..60])),
            ),
            (
                PathBuf::from("1/1.a.ron"),
                Completion::of(1, 1, &IdSet::new(), &Observables::new()),
            ),
        ];
        let prior = Prior::merge(&parts).unwrap();
        assert_eq!(prior.done, set(&[(0, 100)]));
        assert_eq!((prior.count(), prior.observables), (100, 2));
        let merged = Observables::from_words(2, &prior.words).unwrap();
        assert_eq!(merged.to_words(2), whole.to_words(2));
        assert_eq!(merged.statistics(), whole.statistics());
        assert!(prior.missing(100).is_empty());
        assert_eq!(prior.missing(120), set(&[(100, 120)]));
    }

    #[test]
    fn overlaps_and_mismatches_are_errors_naming_the_file() {
        let a = (
            PathBuf::from("0/0.a.ron"),
            Completion::of(0, 1, &set(&[(0, 10)]), &obs(&[1.0])),
        );
        let b = (
            PathBuf::from("1/3.b.ron"),
            Completion::of(3, 1, &set(&[(8, 12)]), &obs(&[1.0])),
        );
        let msg = Prior::merge(&[a.clone(), b]).unwrap_err().to_string();
        assert!(
            msg.contains("1/3.b.ron") && msg.contains("8..10") && msg.contains("0/0.a.ron"),
            "{msg}"
        );
        let mut c = Completion::of(1, 1, &set(&[(20, 30)]), &Observables::new());
        c.observables = 3;
        let msg = Prior::merge(&[a, (PathBuf::from("x.ron"), c)])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("x.ron") && msg.contains("3 observables") && msg.contains("have 2"),
            "{msg}"
        );
        let prior = Prior {
            total: 100,
            observables: 2,
            dir: PathBuf::from("job/1"),
            ..Prior::default()
        };
        let msg = prior
            .check_total(50, Path::new("job/completion.ron"))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("50") && msg.contains("total 100") && msg.contains("job/completion.ron"),
            "{msg}"
        );
        prior.check_total(100, Path::new("i")).unwrap();
        prior.check_total(200, Path::new("i")).unwrap();
        let msg = prior.check_observables(1).unwrap_err().to_string();
        assert!(
            msg.contains("1 observables") && msg.contains("have 2"),
            "{msg}"
        );
        prior.check_observables(2).unwrap();
    }
}
