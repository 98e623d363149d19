//! # soslb
//!
//! Load balancing of a fixed budget of independent Monte-Carlo realisations
//! over the ranks of an MPI job whose speeds are unknown, differ and change.
//! After Galyuk, Zolotarev & Memnonov (2007):
//!
//! 1. **Warm-up rescaling** (Algorithm 1): the ids start in equal blocks;
//!    after a short warm-up every rank's speed is gathered and the unfinished
//!    ids are cut in proportion to speed ([`plan`]).
//! 2. **SOS / AID files** on shared storage (Algorithm 2): a rank forecasting
//!    that it will finish late posts an SOS, its unleased tail cut into
//!    slots; ranks that ran out of work claim slots, each by one exclusive
//!    create of its claim file, so that every id is computed exactly once on
//!    any shared file system, with or without working locks ([`policy`],
//!    [`protocol`], [`board`]).
//! 3. **Hierarchy**: helpers prefer SOS on their host, then their site
//!    ([`topology`]).
//!
//! The decisions live in a pure state machine ([`policy::Rank`]) fed with
//! time and events. It never waits for the signal files: it hands its
//! board work to a [`clerk::Clerk`] and goes on computing until the reply
//! comes. [`Balancer`] is the thin MPI and file shell around both (the
//! clerk in a thread of its own), and the simulator (`sim`, with the
//! `emulate` feature) drives the same machine and clerk with a virtual clock.
//!
//! ## The loop
//!
//! ```no_run
//! use mpi::traits::*;
//! let universe = mpi::initialize().unwrap();
//! let world = universe.world();
//! let config = soslb::Config::load(None)?;          // soslb.ron, SOSLB_* variables
//! let mut lb = soslb::Balancer::new(&world, 100_000, config)?;
//! while let Some(ids) = lb.next()? {
//!     for id in ids {
//!         let x = (id as f64).sin();                // a realisation seeded by its id
//!         lb.add(&[x])?;
//!     }
//! }
//! let summary = lb.finish()?;                        // collective
//! if world.rank() == 0 {
//!     println!("mean {}", summary.statistics[0].mean);
//! }
//! # Ok::<(), soslb::Error>(())
//! ```
//!
//! ## A grid job
//!
//! A declared walltime (`walltime`, or the batch system's: `SLURM_JOB_END_TIME`,
//! else what Slurm or PBS say of the job, [`batch`]) makes rank 0 warn when the job's forecast end passes it, and with `on_deadline: Stop`
//! the ranks stop in time ([`deadline`]). With a `job_name` each rank
//! journals what it completed, and a run with `resume` computes only the
//! rest, with the same bits as one uninterrupted run ([`resume`]).
//! [`seed::seed`] gives each realisation a start for its generator that
//! depends on its id alone.
//!
//! Fortran and C programs use the module `fortran/soslb.f90` and the header
//! `fortran/soslb.h` over the static library ([`ffi`]).
//!
//! ## Where things are
//!
//! - Pure values and decisions: [`ids`], [`plan`] (initial blocks,
//!   Algorithm 1, help shares), [`speed`] (estimator, forecast),
//!   [`protocol`] (slots, SOS, claims, the index), [`cost`] (the cost model
//!   the thresholds follow from), [`topology`] (hosts, sites, distance),
//!   [`verdict`] (the waves' words, the verdict, the audit), [`transfer`]
//!   (host transfers), [`deadline`], [`progress`], [`stats`] (exact sums),
//!   [`seed`], [`params`] (the policy's settings).
//! - The state machine: [`policy`] (the owner's checks, the helper's
//!   choices, host transfers, the clerk's requests).
//! - The shells: [`board`] (the trait, the file board, the run directory's
//!   layout, the body format, the watcher, the node-local directory; an
//!   in-memory board for tests),
//!   [`clerk`] (carries requests out on the board, in a thread of its own),
//!   [`Balancer`] with the private `comm` (MPI) and `phases` (init's time by
//!   phase), [`monitor`] (logs), [`resume`] (the completion journal),
//!   [`batch`] (the batch system's walltime), [`config`], [`error`].
//! - On top: [`ffi`] with `fortran/soslb.h` and `fortran/soslb.f90`;
//!   [`report`] and `src/bin/soslb/` (the `soslb` command).
//! - Emulation (the cargo feature `emulate`): `emulate` (the config's
//!   section), `scenario` (emulated speeds and costs) and `sim` (the
//!   simulator), run by `examples/emulate.rs` and `examples/simulate.rs`.
//! - Outside `src/`: `scripts/` (set-up, install, tests, benchmarks, the
//!   paper's figures, a cluster and a Slurm on one machine; the record of the
//!   figures in `scripts/BENCHMARKS.md`), `examples/` (`slab.f90`, the
//!   emulator, the simulator, `next_bench.rs`, scenarios), `tests/`.
//!
//! ## Emulation, and the simulator without MPI
//!
//! The cargo feature `emulate` (off in the library as installed) adds
//! emulated speeds, hosts, sites and storage delays (the config's `emulate`
//! section, module `emulate`), the scenarios of emulated heterogeneity
//! (`scenario`) and the simulator (`sim`), which runs them without MPI:
//!
//! ```
//! # #[cfg(feature = "emulate")] {
//! use soslb::{config::Config, policy::Params, scenario::{Factor, Scenario}, sim};
//! let scenario = Scenario {
//!     name: "two speeds".into(), ranks: 8, realisations: 2000, base: 0.01,
//!     speed: vec![Factor::Classes(vec![1.0, 0.25], 4)], cost: None, layout: None,
//! };
//! let out = sim::simulate(&scenario, &Params::from(&Config::default()), &sim::Options::default())?;
//! assert!(out.counts.iter().all(|&c| c == 1));       // every id exactly once
//! println!("efficiency {:.2}", scenario.ideal(8) / out.makespan);
//! # }
//! # Ok::<(), soslb::Error>(())
//! ```
#![deny(missing_docs)]

pub mod balancer;
pub mod batch;
pub mod board;
pub mod clerk;
mod comm;
pub mod config;
pub mod cost;
pub mod deadline;
#[cfg(feature = "emulate")]
pub mod emulate;
pub mod error;
pub mod ffi;
pub mod ids;
pub mod monitor;
pub mod params;
mod phases;
pub mod plan;
pub mod policy;
pub mod progress;
pub mod protocol;
pub mod report;
pub mod resume;
#[cfg(feature = "emulate")]
pub mod scenario;
pub mod seed;
#[cfg(feature = "emulate")]
pub mod sim;
pub mod speed;
pub mod stats;
pub mod topology;
pub mod transfer;
pub mod verdict;

pub use balancer::{Balancer, Summary};
pub use config::Config;
pub use error::{Error, Result};
pub use seed::splitmix64;
