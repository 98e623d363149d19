//! Sets of realisation ids: a quota, a lease, an SOS tail or an AID record.
//!
//! A rank's quota is "a small set of ranges", so [`IdSet`] stores sorted,
//! disjoint, non-adjacent half-open ranges. Owners compute from the front of
//! their quota; helpers take from the back (as a work-stealing deque does).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

/// A set of realisation ids (0-based), kept as sorted disjoint ranges.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdSet {
    /// Half-open `(start, end)` pairs, sorted, disjoint and never adjacent.
    runs: Vec<(u64, u64)>,
}

impl IdSet {
    /// The empty set.
    pub const fn new() -> Self {
        IdSet { runs: Vec::new() }
    }

    /// The ids of one half-open range.
    pub fn from_range(r: Range<u64>) -> Self {
        let mut s = IdSet::new();
        s.insert(r);
        s
    }

    /// Number of ids in the set.
    pub fn len(&self) -> u64 {
        self.runs.iter().map(|&(a, b)| b - a).sum()
    }

    /// True when the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The ranges, in increasing order.
    pub fn ranges(&self) -> impl DoubleEndedIterator<Item = Range<u64>> + '_ {
        self.runs.iter().map(|&(a, b)| a..b)
    }

    /// The set as words, `start, end` of each range (a host transfer's
    /// message).
    pub fn to_words(&self) -> Vec<u64> {
        self.runs.iter().flat_map(|&(a, b)| [a, b]).collect()
    }

    /// The set of [`IdSet::to_words`]' words; `None` unless they are pairs
    /// of a well-formed set.
    pub fn from_words(words: &[u64]) -> Option<IdSet> {
        let set = IdSet {
            runs: words
                .chunks(2)
                .map(|w| Some((w[0], *w.get(1)?)))
                .collect::<Option<_>>()?,
        };
        set.is_well_formed().then_some(set)
    }

    /// Check the invariants of a set read from a file: sorted, disjoint, non-empty runs.
    pub fn is_well_formed(&self) -> bool {
        self.runs.iter().all(|&(a, b)| a < b) && self.runs.windows(2).all(|w| w[0].1 < w[1].0)
    }

    /// Add the ids of `r`; ids already present stay once.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // The common case: ids arriving in order (progress, a lease).
        match self.runs.last_mut() {
            None => return self.runs.push((r.start, r.end)),
            Some(last) if last.1 == r.start => return last.1 = r.end,
            Some(last) if last.1 < r.start => return self.runs.push((r.start, r.end)),
            _ => {}
        }
        let (mut a, mut b) = (r.start, r.end);
        // First run that ends at or after `a` (it may touch or overlap).
        let lo = self.runs.partition_point(|&(_, e)| e < a);
        // First run that starts after `b` (cannot touch).
        let hi = self.runs.partition_point(|&(s, _)| s <= b);
        if lo < hi {
            a = a.min(self.runs[lo].0);
            b = b.max(self.runs[hi - 1].1);
        }
        self.runs.splice(lo..hi, std::iter::once((a, b)));
    }

    /// Add every id of `other`.
    pub fn extend(&mut self, other: &IdSet) {
        for r in other.ranges() {
            self.insert(r);
        }
    }

    /// Remove every id of `other`; returns how many were present.
    pub fn remove(&mut self, other: &IdSet) -> u64 {
        let before = self.len();
        let mut runs = Vec::with_capacity(self.runs.len());
        let mut cut = other.runs.iter().peekable();
        for &(mut a, b) in &self.runs {
            while let Some(&&(cs, ce)) = cut.peek() {
                if ce <= a {
                    cut.next();
                    continue;
                }
                if cs >= b {
                    break;
                }
                if cs > a {
                    runs.push((a, cs));
                }
                a = a.max(ce);
                if ce >= b {
                    break;
                }
                cut.next();
            }
            if a < b {
                runs.push((a, b));
            }
        }
        self.runs = runs;
        before - self.len()
    }

    /// Remove and return the first `n` ids (fewer if the set is smaller).
    pub fn take_front(&mut self, n: u64) -> IdSet {
        let mut out = IdSet::new();
        let mut left = n;
        let mut used = 0;
        for run in self.runs.iter_mut() {
            if left == 0 {
                break;
            }
            let len = run.1 - run.0;
            if len <= left {
                out.runs.push(*run);
                left -= len;
                used += 1;
            } else {
                out.runs.push((run.0, run.0 + left));
                run.0 += left;
                left = 0;
            }
        }
        self.runs.drain(..used);
        out
    }

    /// Remove and return the last `n` ids (fewer if the set is smaller).
    pub fn take_back(&mut self, n: u64) -> IdSet {
        let mut out = Vec::new();
        let mut left = n;
        while left > 0 {
            let Some(run) = self.runs.last_mut() else {
                break;
            };
            let len = run.1 - run.0;
            if len <= left {
                out.push(*run);
                self.runs.pop();
                left -= len;
            } else {
                out.push((run.1 - left, run.1));
                run.1 -= left;
                left = 0;
            }
        }
        out.reverse();
        IdSet { runs: out }
    }

    /// Remove and return the first range of at most `n` ids, for a chunk.
    pub fn pop_chunk(&mut self, n: u64) -> Option<Range<u64>> {
        let run = self.runs.first_mut()?;
        let end = run.1.min(run.0.saturating_add(n.max(1)));
        let chunk = run.0..end;
        if end == run.1 {
            self.runs.remove(0);
        } else {
            run.0 = end;
        }
        Some(chunk)
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `a..b,c..d` (or `-` when empty): the form used in the monitor logs.
impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.runs.is_empty() {
            return f.write_str("-");
        }
        for (i, (a, b)) in self.runs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}..{b}")?;
        }
        Ok(())
    }
}

impl FromIterator<Range<u64>> for IdSet {
    fn from_iter<I: IntoIterator<Item = Range<u64>>>(iter: I) -> Self {
        let mut s = IdSet::new();
        for r in iter {
            s.insert(r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(r: &[(u64, u64)]) -> IdSet {
        r.iter().map(|&(a, b)| a..b).collect()
    }

    #[test]
    fn remove_matches_a_set_difference() {
        let mut x = 1u64;
        for _ in 0..300 {
            let mut random_set = || {
                let mut s = IdSet::new();
                for _ in 0..4 {
                    x = crate::seed::splitmix64(x);
                    let a = x % 60;
                    s.insert(a..a + x / 60 % 12);
                }
                s
            };
            let (mut a, b) = (random_set(), random_set());
            let ids = |s: &IdSet| {
                s.ranges()
                    .flatten()
                    .collect::<std::collections::BTreeSet<u64>>()
            };
            let expected: Vec<u64> = ids(&a).difference(&ids(&b)).copied().collect();
            let gone = ids(&a).intersection(&ids(&b)).count() as u64;
            assert_eq!(a.remove(&b), gone);
            assert_eq!(a.ranges().flatten().collect::<Vec<u64>>(), expected);
            assert!(a.is_well_formed());
        }
    }

    #[test]
    fn insert_merges_adjacent_and_overlapping() {
        let mut s = set(&[(0, 5), (10, 15)]);
        s.insert(5..10);
        assert_eq!(s, set(&[(0, 15)]));
        s.insert(20..30);
        s.insert(25..40);
        assert_eq!(s.to_string(), "0..15,20..40");
        assert_eq!(s.len(), 35);
        assert!(s.is_well_formed());
    }

    #[test]
    fn words_carry_a_set_and_refuse_what_is_not_one() {
        let mut set = IdSet::from_range(3..7);
        set.insert(10..12);
        assert_eq!(IdSet::from_words(&set.to_words()), Some(set));
        assert_eq!(IdSet::from_words(&[]), Some(IdSet::new()));
        assert_eq!(IdSet::from_words(&[3, 7, 10]), None); // odd
        assert_eq!(IdSet::from_words(&[7, 3]), None); // backwards
        assert_eq!(IdSet::from_words(&[3, 7, 5, 9]), None); // overlapping
    }

    #[test]
    fn take_front_and_back_split_runs() {
        let mut s = set(&[(0, 4), (10, 14)]);
        assert_eq!(s.take_front(5), set(&[(0, 4), (10, 11)]));
        assert_eq!(s, set(&[(11, 14)]));
        let mut s = set(&[(0, 4), (10, 14)]);
        assert_eq!(s.take_back(6), set(&[(2, 4), (10, 14)]));
        assert_eq!(s, set(&[(0, 2)]));
        assert_eq!(s.take_back(10), set(&[(0, 2)]));
        assert!(s.is_empty());
    }

    #[test]
    fn pop_chunk_stays_inside_one_run() {
        let mut s = set(&[(0, 3), (7, 9)]);
        assert_eq!(s.pop_chunk(5), Some(0..3));
        assert_eq!(s.pop_chunk(1), Some(7..8));
        assert_eq!(s.pop_chunk(0), Some(8..9));
        assert_eq!(s.pop_chunk(1), None);
    }

    #[test]
    fn malformed_sets_are_detected() {
        let bad: IdSet = ron::from_str("[(5, 3)]").unwrap();
        assert!(!bad.is_well_formed());
        let overlapping: IdSet = ron::from_str("[(0, 5), (4, 8)]").unwrap();
        assert!(!overlapping.is_well_formed());
    }
}
