//! Embedding-lookup benchmark: the forward time of `Embedding::apply` (a gather) on the same
//! 64×32 ids with a table of width 64, for a vocabulary of 1k and of 100k, on the default
//! backend (C when a compiler runs here). A gather reads one row per id, so the two times should
//! be close: the ratio 100k / 1k is printed, with whether it is within 1.5.
//!
//! Run with `cargo bench -p rcannl-nn --bench embedding`.

use std::time::{Duration, Instant};

use rcannl_backends::default_backend;
use rcannl_nn::embedding::Embedding;
use rcannl_tensor::{Context, Graph, TensorError};

const BATCH: usize = 64;
const POSITIONS: usize = 32;
const WIDTH: usize = 64;
/// Ids are drawn below the smaller vocabulary, so that both lookups read the same rows.
const IDS_BELOW: u64 = 1000;
const WARMUP: usize = 20;
const REPEATS: usize = 201;
/// Rounds of both cases, taking turns; each case's best median counts, so that a noisy moment
/// on a shared machine hurts neither.
const ROUNDS: usize = 3;

/// The same ids every time: a fixed linear congruential sequence below [`IDS_BELOW`].
fn ids() -> Vec<f64> {
    let mut state = 12345u64;
    (0..BATCH * POSITIONS)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % IDS_BELOW) as f64
        })
        .collect()
}

/// The median time of one forward run of the lookup with `vocabulary` rows.
fn forward_time(vocabulary: usize) -> Result<Duration, TensorError> {
    let graph = Graph::new();
    let embedding = Embedding::new(&graph, "embedding", vocabulary, WIDTH);
    let ids = graph
        .data("ids")
        .shape(&format!("{BATCH}|->{POSITIONS}"))
        .values(ids())
        .build();
    let vectors = embedding.apply(&ids);
    let mut ctx = Context::with_backend(&graph, default_backend());
    ctx.init_params()?;
    let forward = ctx.forward(&[&vectors])?;
    forward.finish_compiling()?;
    for _ in 0..WARMUP {
        ctx.run(&forward)?;
    }
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let start = Instant::now();
        ctx.run(&forward)?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[REPEATS / 2])
}

fn main() -> Result<(), TensorError> {
    let (mut small, mut large) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        small = small.min(forward_time(1_000)?);
        large = large.min(forward_time(100_000)?);
    }
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    println!(
        "embedding lookup, {BATCH}×{POSITIONS} ids, width {WIDTH} ({}):",
        default_backend().name()
    );
    println!("  vocabulary   1k: {:>10.1} µs", small.as_secs_f64() * 1e6);
    println!("  vocabulary 100k: {:>10.1} µs", large.as_secs_f64() * 1e6);
    println!(
        "  ratio 100k / 1k: {ratio:.2} ({} 1.5)",
        if ratio <= 1.5 { "within" } else { "beyond" }
    );
    Ok(())
}
