//! A character-level GPT, written from the docs: token ids gathered from an `Embedding`, learned
//! positions added, two causal pre-norm `TransformerBlock`s (layer norm, two-head causal
//! self-attention, ReLU MLP, residual sums), a final layer norm and a per-position dense head to
//! the vocabulary's logits, scored by `cross_entropy_ids` against the next token at every
//! position. From PyTorch's parameters and tokens (`gpt/reference.py`), the logits, the loss and
//! the loss's gradient with respect to every parameter are checked in f64 and in f32, and the
//! parameters after two AdamW steps (`Adam` with decoupled weight decay) in f64.

use rcannl::nn::attention::{Attention, PositionDense, TransformerBlock};
use rcannl::nn::embedding::Embedding;
use rcannl::nn::loss::{cross_entropy_ids, mean};
use rcannl::nn::norm::LayerNorm;
use rcannl::nn::optim::Adam;
use rcannl::nn::position::LearnedPositions;
use rcannl::prelude::*;

use crate::support;

/// The folder of the reference arrays.
const PROGRAM: &str = "gpt";
const VOCABULARY: usize = 11;
const BATCH: usize = 2;
const TIME: usize = 5;
const MODEL: usize = 8;
const HEADS: usize = 2;
const HIDDEN: usize = 16;
const BLOCKS: usize = 2;
/// AdamW's settings (betas and epsilon are the defaults of both libraries).
const LEARNING_RATE: f64 = 0.01;
const WEIGHT_DECAY: f64 = 0.1;
const ADAMW_STEPS: usize = 2;

/// The model: every parameter is named by its label, which is also the name of its reference
/// arrays (`<label>.npy` its starting values, `<label>.grad.npy` the loss's gradient).
struct Gpt {
    embedding: Embedding,
    positions: LearnedPositions,
    blocks: Vec<TransformerBlock>,
    final_norm: LayerNorm,
    head: PositionDense,
}

impl Gpt {
    /// The model with parameters of `precision`. The library's constructors make f32
    /// parameters; at another precision the same blocks are built from their public fields, with
    /// the axes those constructors give.
    fn new(graph: &Graph, precision: Precision) -> Gpt {
        if precision == Precision::F32 {
            return Gpt {
                embedding: Embedding::new(graph, "embedding", VOCABULARY, MODEL),
                positions: LearnedPositions::new(graph, "positions", TIME, MODEL),
                blocks: (0..BLOCKS)
                    .map(|i| {
                        TransformerBlock::new(
                            graph,
                            &format!("block{i}"),
                            MODEL,
                            HEADS,
                            HIDDEN,
                            true,
                        )
                    })
                    .collect(),
                final_norm: LayerNorm::new(graph, "final_norm"),
                head: PositionDense::new(graph, "head", VOCABULARY),
            };
        }
        let param = |label: &str| graph.param(label).precision(precision);
        let dense = |label: &str, width: usize| PositionDense {
            w: param(&format!("{label}.w")).output([width]).build(),
            b: param(&format!("{label}.b")).output([width]).build(),
        };
        let head_width = MODEL / HEADS;
        let attention = |label: &str| {
            let projection = |name: &str| {
                param(&format!("{label}.{name}"))
                    .output([HEADS, head_width])
                    .build()
            };
            Attention {
                query: projection("query"),
                key: projection("key"),
                value: projection("value"),
                output: param(&format!("{label}.output"))
                    .input([HEADS, head_width])
                    .output([MODEL])
                    .build(),
                head: head_width,
                causal: true,
            }
        };
        Gpt {
            embedding: Embedding {
                table: param("embedding.table")
                    .input([VOCABULARY])
                    .output([MODEL])
                    .build(),
                vocabulary: VOCABULARY,
            },
            positions: LearnedPositions {
                table: param("positions.table").output([TIME, MODEL]).build(),
            },
            blocks: (0..BLOCKS)
                .map(|i| TransformerBlock {
                    attention: attention(&format!("block{i}.attention")),
                    norm1: LayerNorm::with_precision(graph, &format!("block{i}.norm1"), precision),
                    norm2: LayerNorm::with_precision(graph, &format!("block{i}.norm2"), precision),
                    up: dense(&format!("block{i}.up"), HIDDEN),
                    down: dense(&format!("block{i}.down"), MODEL),
                })
                .collect(),
            final_norm: LayerNorm::with_precision(graph, "final_norm", precision),
            head: dense("head", VOCABULARY),
        }
    }

    /// The logits (`batch | -> time, vocabulary`) of the token ids `tokens` (`batch | -> time`).
    fn logits(&self, tokens: &Tensor) -> Tensor {
        let mut h = self.positions.apply(&self.embedding.apply(tokens));
        for block in &self.blocks {
            h = block.apply(&h, TIME, None);
        }
        self.head.apply(&self.final_norm.apply(&h))
    }

    /// Every parameter.
    fn params(&self) -> Vec<Tensor> {
        let mut params = vec![self.embedding.table.clone()];
        params.extend(self.positions.params());
        for block in &self.blocks {
            params.extend(block.params());
        }
        params.extend(self.final_norm.params());
        params.extend(self.head.params());
        params
    }
}

/// The model in `precision` over PyTorch's tokens, with its logits and loss.
struct Program {
    graph: Graph,
    gpt: Gpt,
    logits: Tensor,
    loss: Tensor,
    tokens: Tensor,
    next_tokens: Tensor,
}

impl Program {
    fn new(precision: Precision) -> Program {
        let graph = Graph::new();
        let shape = format!("{BATCH}|->{TIME}");
        let tokens = graph.data("tokens").shape(&shape).build();
        let next_tokens = graph.data("next_tokens").shape(&shape).build();
        let gpt = Gpt::new(&graph, precision);
        let logits = gpt.logits(&tokens);
        let loss = mean(&cross_entropy_ids(&logits, &next_tokens));
        Program {
            graph,
            gpt,
            logits,
            loss,
            tokens,
            next_tokens,
        }
    }

    /// A context on `backend` holding PyTorch's starting parameters and tokens.
    fn context(&self, backend: Box<dyn rcannl::backends::Backend>) -> Context {
        let mut ctx = Context::with_backend(&self.graph, backend);
        for param in self.gpt.params() {
            support::set_from_reference(&mut ctx, &param, PROGRAM, &param.label());
        }
        support::set_from_reference(&mut ctx, &self.tokens, PROGRAM, "tokens");
        support::set_from_reference(&mut ctx, &self.next_tokens, PROGRAM, "next_tokens");
        ctx
    }
}

/// The logits, the loss and every parameter's gradient on both CPU backends, against PyTorch's.
fn forward_and_gradients(precision: Precision) {
    let program = Program::new(precision);
    let params = program.gpt.params();
    // The embedding and positions, 12 per block, the final norm and the head.
    assert_eq!(params.len(), 2 + 12 * BLOCKS + 4, "parameters of the model");
    for backend in support::backends(precision) {
        let name = backend.name();
        let mut ctx = program.context(backend);
        let forward = ctx.forward(&[&program.logits, &program.loss]).unwrap();
        ctx.run(&forward).unwrap();
        for (what, t) in [("logits", &program.logits), ("loss", &program.loss)] {
            let values = ctx.values(t).unwrap();
            support::check(
                &format!("{name}: {what}"),
                &values,
                PROGRAM,
                what,
                precision,
            );
        }
        let backprop = ctx.backprop(&program.loss).unwrap();
        ctx.run(&backprop).unwrap();
        for param in &params {
            let label = param.label();
            support::check(
                &format!("{name}: gradient of '{label}'"),
                &ctx.grad(param).unwrap(),
                PROGRAM,
                &format!("{label}.grad"),
                precision,
            );
        }
    }
}

#[test]
fn gpt_forward_and_gradients_f64() {
    forward_and_gradients(Precision::F64);
}

#[test]
fn gpt_forward_and_gradients_f32() {
    forward_and_gradients(Precision::F32);
}

/// Two AdamW steps on both CPU backends: every parameter afterwards, against
/// `torch.optim.AdamW`'s.
#[test]
fn gpt_adamw_steps_f64() {
    let precision = Precision::F64;
    let program = Program::new(precision);
    let params = program.gpt.params();
    for backend in support::backends(precision) {
        let name = backend.name();
        let mut ctx = program.context(backend);
        let mut adamw =
            Adam::new(&program.graph, &params, LEARNING_RATE).weight_decay(WEIGHT_DECAY);
        let step = adamw.compile_step(&mut ctx, &program.loss).unwrap();
        for _ in 0..ADAMW_STEPS {
            ctx.run(&step).unwrap();
        }
        for param in &params {
            let label = param.label();
            support::check(
                &format!("{name}: '{label}' after {ADAMW_STEPS} AdamW steps"),
                &ctx.values(param).unwrap(),
                PROGRAM,
                &format!("{label}.adamw"),
                precision,
            );
        }
    }
}
