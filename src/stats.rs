//! Order-independent statistics of the observables.
//!
//! Which rank computes which realisation depends on load balancing, so the
//! sums must not depend on the order or the grouping of the additions. They
//! are kept exactly in an [`ExactSum`] (a long accumulator): the exact sum of
//! doubles is order-independent, and so is its rounding. Ranks exchange
//! their sums as vectors of `i64` words that an elementwise `MPI_SUM`
//! reduction adds exactly ([`ExactSum::to_words`], [`Observables::to_words`]).

use crate::error::{Error, Result};

const W: usize = ExactSum::WORDS;
const MASK: i64 = (1 << 32) - 1;
/// Additions between carry normalisations. An addition changes a limb by less
/// than 2^32, so a limb starting in [0, 2^32) stays below 2^62 + 2^32.
const NORMALISE_EVERY: u32 = 1 << 30;

/// Exact sum of finite `f64` values.
///
/// The sum is `Σ limbs[i] · 2^(32·i − 1074)`: limbs `0..=65` hold 32 bits of
/// value each (every double is a multiple of 2^-1074 below 2^1024), limb 66
/// holds the carries and the sign. Additions only add into limbs; carries are
/// propagated every 2^30 additions and before any read. The magnitude must
/// stay below 2^1100 (2^76 times `f64::MAX`), far beyond any real run.
#[derive(Clone, Debug)]
pub struct ExactSum {
    limbs: [i64; W],
    pending: u32,
}

impl Default for ExactSum {
    fn default() -> Self {
        Self::new()
    }
}

/// Propagates carries: limbs `0..W-1` into [0, 2^32), the top one signed.
fn normalise(limbs: &mut [i64; W]) {
    for i in 0..W - 1 {
        let carry = limbs[i] >> 32;
        limbs[i] &= MASK;
        limbs[i + 1] += carry;
    }
}

/// 2^k for k in -1074..; infinity above 1023.
fn pow2(k: i32) -> f64 {
    match k {
        1024.. => f64::INFINITY,
        -1022.. => f64::from_bits(((k + 1023) as u64) << 52),
        _ => f64::from_bits(1 << (k + 1074)),
    }
}

/// The magnitude `N · 2^-1074` of normalised non-negative limbs, rounded to
/// nearest, ties to even.
fn round_magnitude(n: &[i64; W]) -> f64 {
    if n[W - 1] != 0 {
        return f64::INFINITY; // at least 2^1038
    }
    let Some(top) = (0..W - 1).rev().find(|&i| n[i] != 0) else {
        return 0.0;
    };
    let p = 32 * top + 63 - n[top].leading_zeros() as usize; // highest set bit
    if p < 53 {
        // Below 2^53 · 2^-1074: exact (subnormal or the smallest normals).
        return (n[0] as u64 | (n[1] as u64) << 32) as f64 * pow2(-1074);
    }
    let s = p - 52; // the result is normal: keep bits s..=p, round at bit s-1
    let word = |i: usize| n.get(i).map_or(0, |&l| l as u128);
    let window = word(s / 32) | word(s / 32 + 1) << 32 | word(s / 32 + 2) << 64;
    let mut mant = (window >> (s % 32)) as u64 & ((1 << 53) - 1);
    let r = s - 1;
    let round = (n[r / 32] >> (r % 32)) & 1 == 1;
    let sticky = n[..r / 32].iter().any(|&l| l != 0) || n[r / 32] & ((1 << (r % 32)) - 1) != 0;
    if round && (sticky || mant & 1 == 1) {
        mant += 1; // 2^53 is still exact as f64
    }
    mant as f64 * pow2(s as i32 - 1074)
}

impl ExactSum {
    /// Number of `i64` words of the exchange form ([`ExactSum::to_words`]).
    pub const WORDS: usize = 67;

    /// A zero sum.
    pub fn new() -> Self {
        Self {
            limbs: [0; W],
            pending: 0,
        }
    }

    /// Adds `x` exactly. `x` must be finite (checked in debug builds only);
    /// zeros of either sign add nothing.
    #[inline]
    pub fn add(&mut self, x: f64) {
        debug_assert!(x.is_finite(), "ExactSum::add({x})");
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as usize;
        let frac = bits & ((1 << 52) - 1);
        // x = ±m · 2^(b − 1074)
        let (m, b) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | 1 << 52, exp - 1)
        };
        let v = (m as u128) << (b % 32);
        let parts = [v as i64 & MASK, (v >> 32) as i64 & MASK, (v >> 64) as i64];
        let limbs = &mut self.limbs[b / 32..b / 32 + 3];
        if bits >> 63 == 0 {
            limbs.iter_mut().zip(parts).for_each(|(l, p)| *l += p);
        } else {
            limbs.iter_mut().zip(parts).for_each(|(l, p)| *l -= p);
        }
        self.pending += 1;
        if self.pending == NORMALISE_EVERY {
            normalise(&mut self.limbs);
            self.pending = 0;
        }
    }

    /// The canonical exchange form: words `0..WORDS-1` in [0, 2^32), the last
    /// one signed; the sum is `Σ w[i] · 2^(32·i − 1074)`. One exact value has
    /// one word vector, and an elementwise `i64` sum of such vectors over fewer
    /// than 2^31 ranks cannot overflow.
    pub fn to_words(&self) -> [i64; W] {
        let mut limbs = self.limbs;
        normalise(&mut limbs);
        limbs
    }

    /// Adds a sum given as words (canonical, or any elementwise `i64` sum of
    /// canonical vectors, such as the result of an `MPI_SUM` reduction).
    ///
    /// # Panics
    /// If `w.len() != ExactSum::WORDS`.
    pub fn add_words(&mut self, w: &[i64]) {
        assert_eq!(w.len(), W, "ExactSum::add_words: wrong number of words");
        normalise(&mut self.limbs);
        self.pending = 0;
        let mut carry = 0i128;
        for (i, (l, &x)) in self.limbs.iter_mut().zip(w).enumerate() {
            let t = *l as i128 + x as i128 + carry;
            *l = if i + 1 < W {
                (t & MASK as i128) as i64
            } else {
                t as i64
            };
            carry = t >> 32;
        }
    }

    /// The sum given as words, see [`ExactSum::add_words`].
    ///
    /// # Panics
    /// If `w.len() != ExactSum::WORDS`.
    pub fn from_words(w: &[i64]) -> Self {
        let mut s = Self::new();
        s.add_words(w);
        s
    }

    /// The exact sum correctly rounded to `f64` (to nearest, ties to even;
    /// ±infinity beyond the range; an exact zero gives `+0.0`). It depends only
    /// on the exact value, so on no order or grouping of the additions.
    pub fn value(&self) -> f64 {
        let mut n = self.to_words();
        if n[W - 1] >= 0 {
            return round_magnitude(&n);
        }
        n.iter_mut().for_each(|l| *l = -*l);
        normalise(&mut n);
        -round_magnitude(&n)
    }

    /// The sum as an unevaluated double-double `hi + lo`, `hi = value()`.
    fn split(&self) -> (f64, f64) {
        let hi = self.value();
        if !hi.is_finite() {
            return (hi, 0.0);
        }
        let mut rest = self.clone();
        rest.add(-hi);
        (hi, rest.value())
    }
}

/// Statistics of one observable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Statistic {
    /// The mean over the realisations (NaN if there were none).
    pub mean: f64,
    /// The unbiased sample variance `Σ(x − mean)² / (count − 1)` (NaN for
    /// fewer than two realisations).
    pub variance: f64,
    /// The standard error of the mean, `sqrt(var / count)` with the unbiased
    /// sample variance `var` (NaN for fewer than two realisations).
    pub std_error: f64,
}

/// Exact sums of the observables of the realisations added on one rank (or
/// on all ranks, after a reduction of [`Observables::to_words`]).
#[derive(Clone, Debug, Default)]
pub struct Observables {
    count: u64,
    len: usize,
    sums: Vec<ExactSum>,
    squares: Vec<ExactSum>,
}

impl Observables {
    /// The most observables per realisation.
    pub const MAX: usize = 256;

    /// No realisations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the observables of one realisation. The first call fixes their
    /// number n (1..=[`Observables::MAX`]); later calls must pass n values.
    /// Every value must be finite with a finite square (|x| < 1.34e154). On
    /// error nothing is added.
    ///
    /// The square sum is exact too: `x² = p + e` with `p = fl(x·x)` and
    /// `e = fma(x, x, −p)` (exact for |x| ≥ 2^-485; below, `e` loses bits
    /// under 2^-1074, deterministically).
    pub fn add(&mut self, values: &[f64]) -> Result<()> {
        self.check(values)
            .map_err(|reason| Error::argument("values", reason))?;
        if self.len == 0 {
            self.len = values.len();
            self.sums = vec![ExactSum::new(); self.len];
            self.squares = self.sums.clone();
        }
        for ((&x, s), q) in values.iter().zip(&mut self.sums).zip(&mut self.squares) {
            let p = x * x;
            s.add(x);
            q.add(p);
            q.add(x.mul_add(x, -p));
        }
        self.count += 1;
        Ok(())
    }

    /// Why `values` cannot be added, if it cannot.
    fn check(&self, values: &[f64]) -> std::result::Result<(), String> {
        let (n, len, max) = (values.len(), self.len, Self::MAX);
        if len == 0 && !(1..=max).contains(&n) {
            return Err(format!(
                "{n} observables given; a realisation must have 1 to {max}"
            ));
        }
        if len != 0 && n != len {
            return Err(format!(
                "{n} observables given, but earlier realisations had {len}"
            ));
        }
        for (i, &x) in values.iter().enumerate() {
            let why = if !x.is_finite() {
                "is not finite"
            } else if !(x * x).is_finite() {
                "has a square that overflows f64 (|x| must be below 1.34e154)"
            } else {
                continue;
            };
            let k = i + 1;
            return Err(format!("values[{i}] (observable {k} of {n}) = {x:e} {why}"));
        }
        Ok(())
    }

    /// The number of realisations added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The number n of observables per realisation (0 before the first add).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether n is still unknown (no add yet).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The exchange form padded to `n` observables: `1 + 2·n·WORDS` words,
    /// `[count, then for each observable j: WORDS words of Σx_j, WORDS words of
    /// Σx_j²]` (padding observables are zero). Sum the vectors of all ranks
    /// elementwise (`MPI_SUM` on `i64`) and read the result with
    /// [`Observables::from_words`].
    ///
    /// # Panics
    /// If `n < self.len()`.
    pub fn to_words(&self, n: usize) -> Vec<i64> {
        assert!(
            n >= self.len,
            "Observables::to_words({n}) with {} observables",
            self.len
        );
        let mut w = Vec::with_capacity(1 + 2 * n * W);
        w.push(self.count as i64);
        for j in 0..n {
            for acc in [&self.sums, &self.squares] {
                w.extend(acc.get(j).map_or([0; W], ExactSum::to_words));
            }
        }
        w
    }

    /// The inverse of [`Observables::to_words`] (also of a reduced sum of
    /// such vectors); the result has `len() == n`.
    pub fn from_words(n: usize, words: &[i64]) -> Result<Self> {
        let expected = 1 + 2 * n * W;
        if n > Self::MAX {
            return Err(Error::argument(
                "n",
                format!("{n} observables; at most {}", Self::MAX),
            ));
        }
        if words.len() != expected {
            return Err(Error::argument(
                "words",
                format!(
                    "{} words for {n} observables; expected 1 + 2·{n}·{W} = {expected}",
                    words.len()
                ),
            ));
        }
        if words[0] < 0 {
            return Err(Error::argument(
                "words",
                format!("the count words[0] = {} is negative", words[0]),
            ));
        }
        let mut chunks = words[1..].chunks_exact(W).map(ExactSum::from_words);
        let (mut sums, mut squares) = (Vec::with_capacity(n), Vec::with_capacity(n));
        while let (Some(s), Some(q)) = (chunks.next(), chunks.next()) {
            sums.push(s);
            squares.push(q);
        }
        Ok(Self {
            count: words[0] as u64,
            len: n,
            sums,
            squares,
        })
    }

    /// Mean, variance and standard error of each observable, from the exact sums
    /// `S = Σx`, `Q = Σx²` and the count `c`:
    /// `mean = S/c`, `var = max(0, Q − S²/c) / (c − 1)`, `std_error = sqrt(var/c)`.
    ///
    /// `S`, `Q` are taken as double-doubles (the rounded sum plus the rounded
    /// rest) and `S/c`, `Q − S²/c` are evaluated in double-double arithmetic,
    /// so the cancellation when `std ≪ |mean|` costs little: the relative error
    /// of `var` is about `2^-104 · (mean² + var) / var`, plus one rounding;
    /// the mean is within an ulp of `S/c`. All of it is deterministic.
    /// Counts above 2^53 are rounded to `f64`. No realisations: NaN mean,
    /// variance and error; one realisation: NaN variance and error.
    pub fn statistics(&self) -> Vec<Statistic> {
        let c = self.count as f64;
        let stat = |(s, q): (&ExactSum, &ExactSum)| {
            let ((s1, s2), (q1, q2)) = (s.split(), q.split());
            let m1 = s1 / c;
            let m2 = (m1.mul_add(-c, s1) + s2) / c; // (S − m1·c) / c
            let p1 = s1 * m1; // S·mean = S²/c ≈ p1 + p2
            let p2 = s1.mul_add(m1, -p1) + s1 * m2 + s2 * m1;
            let d = q1 - p1; // two-sum of q1 and −p1
            let z = d - q1;
            let e = (q1 - (d - z)) + (-p1 - z);
            let dev = d + (e + q2 - p2);
            let var = if dev < 0.0 { 0.0 } else { dev / (c - 1.0) };
            let (variance, std_error) = if self.count < 2 {
                (f64::NAN, f64::NAN)
            } else {
                (var, (var / c).sqrt())
            };
            Statistic {
                mean: m1 + m2,
                variance,
                std_error,
            }
        };
        self.sums.iter().zip(&self.squares).map(stat).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded generator of test data.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 += 1;
            crate::seed::splitmix64(self.0)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// A double of random sign and mantissa, exponent field below `max_exp`
        /// (0 gives subnormals).
        fn wild(&mut self, max_exp: usize) -> f64 {
            let exp = self.below(max_exp) as u64;
            f64::from_bits(self.next() & !(0x7ff << 52) | exp << 52)
        }
        fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                v.swap(i, self.below(i + 1));
            }
        }
    }

    fn sum(xs: &[f64]) -> ExactSum {
        let mut s = ExactSum::new();
        xs.iter().for_each(|&x| s.add(x));
        s
    }

    /// The canonical words of `n · 2^(shift − 1074)` (big-integer reference).
    fn words_of(n: u128, shift: usize) -> [i64; W] {
        let mut w = [0; W];
        for b in (0..128).filter(|b| n >> b & 1 == 1) {
            w[(shift + b) / 32] |= 1 << ((shift + b) % 32);
        }
        w
    }

    /// `x = m · 2^(shift − 1074)` for positive normal `x`.
    fn decompose(x: f64) -> (u128, usize) {
        let bits = x.to_bits();
        (
            (bits & ((1 << 52) - 1) | 1 << 52) as u128,
            (bits >> 52) as usize - 1,
        )
    }

    #[test]
    fn exact_and_correctly_rounded() {
        let (eps, tie) = (f64::EPSILON, f64::EPSILON / 2.0);
        let tiny = f64::from_bits(1);
        let cases: [(&[f64], f64); 12] = [
            (&[], 0.0),
            (&[-0.0, 0.0], 0.0),
            (&[1e16, 1.0, -1e16], 1.0),
            (&[1.0, tie], 1.0),
            (&[1.0, tie, 1e-300], 1.0 + eps),
            (&[1.0 + eps, tie], 1.0 + 2.0 * eps),
            (&[-1.0, -tie, -tiny], -1.0 - eps),
            (&[f64::MAX, 2f64.powi(970)], f64::INFINITY),
            (&[f64::MAX, 2f64.powi(969)], f64::MAX),
            (&[-f64::MAX, -f64::MAX, f64::MAX], -f64::MAX),
            (
                &[tiny, tiny, f64::MIN_POSITIVE, -tiny],
                f64::MIN_POSITIVE + tiny,
            ),
            (&[1e300, 1e-300, -1e300], 1e-300),
        ];
        for (xs, want) in cases {
            assert_eq!(sum(xs).value().to_bits(), want.to_bits(), "{xs:?}");
        }
        // Two doubles: IEEE addition is correctly rounded, so must agree.
        let mut rng = Rng(1);
        for _ in 0..20_000 {
            let a = rng.wild(2047);
            let exp = (a.to_bits() >> 52 & 0x7ff) as usize;
            let near = exp.saturating_sub(60) + rng.below(120);
            let b = f64::from_bits(rng.next() & !(0x7ff << 52) | (near.min(2046) as u64) << 52);
            assert_eq!(
                sum(&[a, b]).value().to_bits(),
                (a + b).to_bits(),
                "{a:e} + {b:e}"
            );
        }
    }

    #[test]
    fn tenth_a_million_times_matches_big_integer_reference() {
        let (m, shift) = decompose(0.1);
        let n = 1_000_000u128;
        let mut s = ExactSum::new();
        (0..n).for_each(|_| s.add(0.1));
        assert_eq!(s.to_words(), words_of(n * m, shift));
        assert_eq!(s.value(), (n * m) as f64 * 2f64.powi(shift as i32 - 1074));
        assert_eq!(s.value(), 1e5); // the excess 10^6·(0.1 − 1/10) ≈ 5.6e-12 < ulp/2
        let naive = (0..n).fold(0.0, |a, _| a + 0.1);
        assert_ne!(naive, 1e5);
    }

    #[test]
    fn permutation_and_grouping_invariance() {
        let mut rng = Rng(2);
        // Wild values up to ~1e300 and tiny subnormals; the large ones cancel.
        let mut kept: Vec<f64> = (0..3000).map(|_| rng.wild(2020)).collect();
        kept.extend([1e-300, -1e-310, f64::from_bits(3), 0.5, -0.25]);
        let mut xs = kept.clone();
        xs.extend(kept.iter().filter(|x| x.abs() > 1e-5).map(|x| -x));
        xs.extend([1e300, -1e300, 1e300, -1e300]);
        kept.retain(|x| x.abs() <= 1e-5);
        let (words, value) = (sum(&kept).to_words(), sum(&kept).value());
        assert!(value != 0.0 && value.abs() < 1e-4);
        assert!(words[..W - 1].iter().all(|w| (0..1 << 32).contains(w)));
        for round in 0..6 {
            rng.shuffle(&mut xs);
            let mut cuts: Vec<usize> = (0..round * 3).map(|_| rng.below(xs.len())).collect();
            cuts.extend([0, xs.len()]);
            cuts.sort();
            let parts: Vec<_> = cuts.windows(2).map(|c| sum(&xs[c[0]..c[1]])).collect();
            let mut merged = ExactSum::new();
            let mut reduced = [0i64; W]; // what MPI_SUM does
            for p in &parts {
                merged.add_words(&p.to_words());
                reduced
                    .iter_mut()
                    .zip(p.to_words())
                    .for_each(|(r, w)| *r += w);
            }
            let reduced = ExactSum::from_words(&reduced);
            for s in [sum(&xs), merged, reduced] {
                assert_eq!(s.to_words(), words);
                assert_eq!(s.value().to_bits(), value.to_bits());
            }
        }
        let negated: Vec<f64> = xs.iter().map(|x| -x).collect();
        assert_eq!(sum(&negated).value(), -value);
    }

    #[test]
    fn carry_normalisation_over_billions_of_max_additions() {
        let one = sum(&[f64::MAX]);
        let (m, shift) = decompose(f64::MAX);
        for sign in [1i64, -1] {
            let mut acc = ExactSum::new();
            let mut total = 0u128;
            for _ in 0..5 {
                // Fast-forward: j additions of ±MAX without normalisation.
                let j = NORMALISE_EVERY - acc.pending - 2;
                for (l, o) in acc.limbs.iter_mut().zip(one.limbs) {
                    *l += sign * o * j as i64; // overflow-checked in tests
                }
                acc.pending += j;
                (0..5).for_each(|_| acc.add(sign as f64 * f64::MAX)); // crosses
                total += j as u128 + 5;
            }
            assert!(total > 5 << 29);
            let mut want = words_of(total * m, shift);
            if sign < 0 {
                want = ExactSum::from_words(&want.map(|w| -w)).to_words();
            }
            assert_eq!(acc.to_words(), want);
            assert_eq!(acc.value(), sign as f64 * f64::INFINITY);
            acc.add_words(&ExactSum::from_words(&want.map(|w| -w)).to_words());
            acc.add(-1.5);
            assert_eq!(acc.value(), -1.5);
        }
    }

    #[test]
    fn statistics_match_two_pass_and_exact_reference() {
        let mut rng = Rng(3);
        let unit = |r: &mut Rng| (r.next() >> 11) as f64 * 2f64.powi(-53);
        let data: Vec<[f64; 3]> = (0..1000)
            .map(|_| {
                [
                    unit(&mut rng),
                    1e6 + unit(&mut rng) - unit(&mut rng),
                    -1e-3 * unit(&mut rng),
                ]
            })
            .collect();
        let mut obs = Observables::new();
        data.iter().for_each(|x| obs.add(x).unwrap());
        let c = data.len() as f64;
        for (j, st) in obs.statistics().iter().enumerate() {
            let mean = data.iter().map(|x| x[j]).sum::<f64>() / c;
            let var = data.iter().map(|x| (x[j] - mean).powi(2)).sum::<f64>() / (c - 1.0);
            assert!(
                (st.mean - mean).abs() <= 1e-15 * mean.abs(),
                "{j}: {st:?} {mean}"
            );
            let se = (var / c).sqrt();
            assert!(
                (st.variance - var).abs() <= 1e-10 * var,
                "{j}: {st:?} {var}"
            );
            assert!((st.std_error - se).abs() <= 1e-10 * se, "{j}: {st:?} {se}");
        }
        // Strong cancellation: x = 1e8 + k·2^-10, std/mean ~ 1e-9; exact reference.
        let ks: Vec<i128> = (0..1000).map(|_| rng.below(1001) as i128 - 500).collect();
        let mut obs = Observables::new();
        ks.iter()
            .for_each(|&k| obs.add(&[1e8 + k as f64 / 1024.0]).unwrap());
        let (n, s1, s2) = (
            ks.len() as i128,
            ks.iter().sum::<i128>(),
            ks.iter().map(|k| k * k).sum::<i128>(),
        );
        let var = (n * s2 - s1 * s1) as f64 / (n * (n - 1)) as f64 / 1024.0 / 1024.0;
        let se = (var / n as f64).sqrt();
        let st = obs.statistics()[0];
        assert_eq!(st.mean, 1e8 + s1 as f64 / n as f64 / 1024.0);
        assert!((st.std_error - se).abs() <= 1e-14 * se, "{st:?} {se}");
        // Constant data: no spurious spread.
        let mut obs = Observables::new();
        (0..1000).for_each(|_| obs.add(&[0.1]).unwrap());
        let st = obs.statistics()[0];
        assert!(st.mean == 0.1 && st.std_error <= 1e-25, "{st:?}");
    }

    #[test]
    fn statistics_independent_of_order_and_grouping() {
        let mut rng = Rng(4);
        let mut data: Vec<[f64; 2]> = (0..2000)
            .map(|_| [rng.wild(1500), rng.wild(1100) * 1e-3])
            .collect();
        let whole = |d: &[[f64; 2]]| {
            let mut o = Observables::new();
            d.iter().for_each(|x| o.add(x).unwrap());
            o
        };
        let reference = whole(&data);
        assert_eq!((reference.count(), reference.len()), (2000, 2));
        for ranks in [1, 3, 7] {
            rng.shuffle(&mut data);
            let mut reduced = Observables::new().to_words(2); // one rank with nothing
            for part in data.chunks(data.len().div_ceil(ranks)) {
                let w = whole(part).to_words(2);
                reduced.iter_mut().zip(w).for_each(|(r, w)| *r += w);
            }
            let all = Observables::from_words(2, &reduced).unwrap();
            assert_eq!(all.to_words(2), reference.to_words(2));
            assert_eq!(all.statistics(), reference.statistics());
            assert_eq!(whole(&data).statistics(), reference.statistics());
        }
    }

    #[test]
    fn small_counts_and_words() {
        let mut obs = Observables::new();
        assert!(obs.is_empty() && obs.statistics().is_empty());
        let st = Observables::from_words(2, &obs.to_words(2))
            .unwrap()
            .statistics();
        assert!(st.len() == 2 && st[0].mean.is_nan() && st[1].std_error.is_nan());
        obs.add(&[1.0]).unwrap();
        let st = obs.statistics()[0];
        assert!(st.mean == 1.0 && st.variance.is_nan() && st.std_error.is_nan());
        obs.add(&[3.0]).unwrap();
        assert_eq!(
            obs.statistics(),
            [Statistic {
                mean: 2.0,
                variance: 2.0,
                std_error: 1.0
            }]
        );
        assert_eq!(obs.to_words(3).len(), 1 + 6 * W);
        let msg = |r: Result<Observables>| r.unwrap_err().to_string();
        assert!(msg(Observables::from_words(1, &[0; 3])).contains("3 words for 1 observables"));
        assert!(msg(Observables::from_words(0, &[-1])).contains("negative"));
        assert!(msg(Observables::from_words(257, &[])).contains("at most 256"));
    }

    #[test]
    fn add_errors_name_the_problem() {
        let mut obs = Observables::new();
        let msg = |o: &mut Observables, v: &[f64]| o.add(v).unwrap_err().to_string();
        assert!(
            msg(&mut obs, &[]).contains("0 observables given; a realisation must have 1 to 256")
        );
        assert!(msg(&mut obs, &[0.0; 257]).contains("257 observables"));
        assert!(
            msg(&mut obs, &[1.0, f64::NAN])
                .contains("values[1] (observable 2 of 2) = NaN is not finite")
        );
        assert!(msg(&mut obs, &[f64::NEG_INFINITY]).contains("-inf is not finite"));
        assert!(msg(&mut obs, &[0.0, 1e200]).contains("= 1e200 has a square that overflows"));
        assert_eq!(obs.count(), 0);
        obs.add(&[1.0, 2.0]).unwrap();
        let e = obs.add(&[1.0, 2.0, 3.0]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { name: "values", .. }));
        assert!(
            e.to_string()
                .contains("3 observables given, but earlier realisations had 2")
        );
        assert_eq!((obs.count(), obs.len()), (1, 2));
    }
}
