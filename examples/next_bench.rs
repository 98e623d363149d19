//! Micro-benchmark of the fast path of `Balancer::next` (no check due): each
//! call hands out one realisation that costs nothing, so the time per call is
//! the library's own. Mode `Full` after the warm-up, monitor log on: the
//! production path. Prints the median over batches of calls, on each rank.
//!
//! Run with `scripts/bench.sh next` (2 ranks).

use mpi::traits::*;
use soslb::config::{Config, Mode};
use std::time::Instant;

const BATCH: usize = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let universe = mpi::initialize().ok_or("MPI already initialised")?;
    let world = universe.world();
    let config = Config {
        mode: Mode::Full,
        warmup: 0.2,
        chunk_time: 0.0,
        ..Config::load(None)?
    };
    let total = 30_000_000 * world.size() as u64;
    let mut lb = soslb::Balancer::new(&world, total, config)?;
    let start = Instant::now();
    let mut batches: Vec<f64> = Vec::new();
    let mut calls = 0u64;
    'run: loop {
        let t = Instant::now();
        for _ in 0..BATCH {
            match lb.next()? {
                Some(ids) => calls += std::hint::black_box(ids).count() as u64,
                None => break 'run,
            }
        }
        // Past the warm-up: the steady state.
        if start.elapsed().as_secs_f64() > 0.5 {
            batches.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
        }
    }
    let ops = lb.file_ops();
    let elapsed = start.elapsed().as_secs_f64();
    lb.finish()?;
    batches.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        batches
            .get(((batches.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "next: rank {} calls={calls} batches={} median_ns_per_call={:.1} p10={:.1} p90={:.1} max={:.1} \
         file_ops={ops} file_ops_per_s={:.1}",
        world.rank(),
        batches.len(),
        pick(0.5),
        pick(0.1),
        pick(0.9),
        pick(1.0),
        ops as f64 / elapsed
    );
    Ok(())
}
