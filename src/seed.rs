//! Seeded streams: the start of a realisation's random generator.
//!
//! [`seed`]`(user_seed, id)` is a well-mixed 64-bit value that depends on
//! the user's seed and the realisation's id and on nothing else: not on the
//! rank that computes the realisation, the number of ranks, the mode or
//! anything the balancing did. A program that seeds the generator of
//! realisation `id` with it (and draws nothing from a generator shared
//! between realisations) computes the same values for `id` on any run, so
//! its statistics are the same bits whatever the balancing (the sums are
//! exact, see [`crate::stats`]), and a resumed job gives the same bits as
//! an uninterrupted one.
//!
//! `seed(s, id) = splitmix64(splitmix64(s) ^ id)`. For a fixed user seed,
//! distinct ids get distinct seeds (splitmix64 is a bijection of `u64`), and
//! neighbouring ids get unrelated ones (its finaliser mixes every input bit
//! into every output bit). Use the value to fill the state of the program's
//! generator (xoshiro256, PCG, ...: typically through splitmix64 again, as
//! their authors advise), or use it directly as the state of a splitmix64
//! generator.
//!
//! The C function `soslb_seed(user_seed, id)` takes the 0-based id of the
//! C interface; the Fortran function `soslb_seed(user_seed, k)` the 1-based
//! id `k`, so that realisation `k` of Fortran and `k − 1` of C and Rust
//! start from the same value.

/// The splitmix64 mixing function (DESIGN §8), used for the emulated speeds
/// and for seeded test generators.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The start of the random stream of realisation `id` (0-based) for the
/// user's seed `user_seed`: the same on every rank and in every run.
///
/// ```
/// let a = soslb::seed::seed(42, 7);
/// assert_eq!(a, soslb::seed::seed(42, 7));
/// assert_ne!(a, soslb::seed::seed(42, 8));
/// assert_ne!(a, soslb::seed::seed(43, 7));
/// ```
#[inline]
pub fn seed(user_seed: u64, id: u64) -> u64 {
    splitmix64(splitmix64(user_seed) ^ id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_ids_get_distinct_well_mixed_seeds() {
        let n = 1 << 16;
        let mut seen: Vec<u64> = (0..n).map(|id| seed(7, id)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len() as u64, n, "two ids share a seed");
        // Neighbouring ids: about half of the 64 bits differ (avalanche).
        let flips: u32 = (0..n)
            .map(|id| (seed(7, id) ^ seed(7, id + 1)).count_ones())
            .sum();
        let mean = flips as f64 / n as f64;
        assert!((mean - 32.0).abs() < 0.2, "mean bits flipped {mean}");
        // Every output bit is set about half of the time.
        for bit in 0..64 {
            let ones = (0..n).filter(|&id| seed(7, id) >> bit & 1 == 1).count() as f64;
            assert!((ones / n as f64 - 0.5).abs() < 0.01, "bit {bit}: {ones}");
        }
    }

    #[test]
    fn the_user_seed_changes_every_stream() {
        let same = (0..10_000u64)
            .filter(|&id| seed(1, id) == seed(2, id))
            .count();
        assert_eq!(same, 0);
        // Pinned (computed independently, in Python): a change of the mixer
        // would change every user's results, and must show.
        assert_eq!(seed(42, 1), 0xf34f_e924_8c93_42e5);
        assert_eq!(seed(42, 1_000_000), 0x5c96_c915_05c5_4999);
    }
}
