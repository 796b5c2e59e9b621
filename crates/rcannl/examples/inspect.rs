//! Seeing what the compiler did, on one training step of a tiny version of the `names`
//! example's transformer (embedding, rotary positions, a causal block, a final norm, a linear
//! head, a cross-entropy over next characters): the tree of the logits, the assignments the step
//! was compiled from, and the token embeddings and their gradient laid out by axis kind. The
//! output is the one `docs/printing.md` shows.
//!
//! `cargo run --release --example inspect`

use rcannl::nn::attention::{Rotary, TransformerBlock};
use rcannl::nn::blocks::Linear;
use rcannl::nn::embedding::Embedding;
use rcannl::nn::loss::{IdsOptions, cross_entropy_ids_with};
use rcannl::nn::norm::LayerNorm;
use rcannl::prelude::*;
use rcannl::tensor::print::Layout;

/// `.` (the boundary before and after a name) and `a`–`z`.
const VOCABULARY: usize = 27;
/// The window of characters the model reads.
const WINDOW: usize = 4;
const MODEL: usize = 8;
const HEADS: usize = 2;

/// The token of a character: 0 for `.`, 1 to 26 for `a` to `z`.
fn token(c: char) -> f64 {
    match c {
        'a'..='z' => f64::from(c as u8 - b'a' + 1),
        _ => 0.0,
    }
}

fn main() -> Result<(), TensorError> {
    // Two windows of "emma" and "ava": each character predicts the next.
    let (inputs, targets) = (".emm.ava", "emmaava.");
    let graph = Graph::new();
    let windows = graph
        .data("windows")
        .shape(&format!("2|->{WINDOW}"))
        .values(inputs.chars().map(token).collect())
        .build();
    let next = graph
        .data("next")
        .shape(&format!("2|->{WINDOW}"))
        .values(targets.chars().map(token).collect())
        .build();
    let embedding = Embedding::new(&graph, "embedding", VOCABULARY, MODEL);
    let rotary = Rotary::new(&graph, WINDOW, MODEL / HEADS);
    let block = TransformerBlock::new(&graph, "block", MODEL, HEADS, 4 * MODEL, true);
    let norm = LayerNorm::new(&graph, "final norm");
    let head = Linear::new(&graph, "head", VOCABULARY);
    let hidden = block.apply(&embedding.apply(&windows), WINDOW, Some(&rotary));
    let logits = head.apply(&norm.apply(&hidden));
    let loss = cross_entropy_ids_with(&logits, &next, &IdsOptions::new());

    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let step = ctx.train_step(&loss, &[])?;
    ctx.run(&step)?;

    // The logits are fused away inside the step: a forward routine keeps them.
    let forward = ctx.forward(&[&logits])?;
    ctx.run(&forward)?;
    let layout = Layout {
        edge: 2,
        precision: Some(3),
    };
    println!("== the logits' tree, two levels deep ==");
    let tree = TreeOptions {
        depth: 2,
        values: true,
        grad: false,
        layout: layout.clone(),
    };
    print!("{}", ctx.print_tree(&logits, &tree)?);

    let code = step.code();
    println!(
        "\n== the step's assignments: {} lines; the last five ==",
        code.lines().count()
    );
    let lines: Vec<&str> = code.lines().collect();
    for line in &lines[lines.len().saturating_sub(5)..] {
        println!("{line}");
    }

    println!("\n== the token embeddings and their gradient ==");
    let options = PrintOptions {
        grad: true,
        code: false,
        layout,
    };
    print!("{}", ctx.print(&embedding.table, &options)?);
    Ok(())
}
