//! soslb: load balancing of Monte-Carlo realisations over MPI ranks.
#![deny(missing_docs)]

pub mod board;
pub mod error;
pub mod ids;
pub mod plan;
pub mod scenario;
pub mod sim;
pub mod policy;
pub mod config;
pub mod topology;
pub mod speed;
pub mod stats;

pub use error::{Error, Result};

/// The splitmix64 mixing function (DESIGN §8), used for the emulated speeds
/// and for seeded test generators.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
