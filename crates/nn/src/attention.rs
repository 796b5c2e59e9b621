//! Attention and the transformer block over sequences laid out `batch | -> time, model`:
//! multi-head attention (heads first inside, `heads, time, head`), an optional causal mask,
//! rotary position embeddings, and the pre-norm transformer block.

use rcannl_tensor::{Graph, Tensor};

use crate::norm::{LayerNorm, softmax};

/// `x` (`… | -> t, d`) projected by `w` (`d -> h, t?, e`): per head, per position.
fn project(x: &Tensor, w: &Tensor) -> Tensor {
    x.einsum("...|...->t, d; d -> h, e => ...|...->h, t, e", w)
}

/// `time × time` with −10⁹ where a position would look ahead (`s > t`), else 0.
fn causal_mask(graph: &Graph, time: usize) -> Tensor {
    let positions = graph.range(time);
    let ahead = positions.outer_sum("t; s => t, s", &(-&positions));
    // t − s < 0: the key comes after the query.
    ahead.lt(&graph.number(0.0)) * -1e9
}

/// Rotary position embeddings for sequences of `time` positions and heads of `head` values
/// (even): each pair of values `(2i, 2i+1)` is rotated by `position · base^(−2i/head)`.
#[derive(Debug, Clone)]
pub struct Rotary {
    cos: Tensor,
    sin: Tensor,
}

impl Rotary {
    pub fn new(graph: &Graph, time: usize, head: usize) -> Rotary {
        let angle = |t: usize, e: usize| {
            let pair = (e / 2) as f64;
            t as f64 * 10_000f64.powf(-2.0 * pair / head as f64)
        };
        let table = |f: fn(f64) -> f64| -> Vec<f64> {
            (0..time)
                .flat_map(|t| (0..head).map(move |e| f(angle(t, e))))
                .collect()
        };
        let shape = format!("{time},{head}");
        Rotary {
            cos: graph
                .data("rotary cos")
                .shape(&shape)
                .values(table(f64::cos))
                .build(),
            sin: graph
                .data("rotary sin")
                .shape(&shape)
                .values(table(f64::sin))
                .build(),
        }
    }

    /// `x` (`… | -> h, t, e`) rotated: `x·cos + rotate(x)·sin`, with `rotate` taking each pair
    /// `(a, b)` to `(−b, a)`.
    pub fn apply(&self, x: &Tensor) -> Tensor {
        let (even, odd) = (x.deinterleave(false), x.deinterleave(true));
        let rotated = Tensor::interleave(&(-&odd), &even);
        &x.pmul(&self.cos) + &rotated.pmul(&self.sin)
    }
}

/// Self-attention of `x` (`batch | -> time, model`) with the projections `[query, key, value,
/// output]` (`model -> heads, head` three times, then `heads, head -> model`), a causal mask over
/// `time` positions when given, and rotary embeddings when given.
pub fn attend(
    x: &Tensor,
    [query, key, value, output]: [&Tensor; 4],
    head: usize,
    causal: Option<usize>,
    rotary: Option<&Rotary>,
) -> Tensor {
    let (mut q, mut k) = (project(x, query), project(x, key));
    if let Some(rotary) = rotary {
        q = rotary.apply(&q);
        k = rotary.apply(&k);
    }
    let v = project(x, value);
    let mut scores = q.einsum("...|...->h, t, e; ...|...->h, s, e => ...|...->h, t, s", &k)
        * (1.0 / (head as f64).sqrt());
    if let Some(time) = causal {
        scores = &scores + &causal_mask(x.graph(), time);
    }
    let weights = softmax(&scores);
    let mixed = weights.einsum("...|...->h, t, s; ...|...->h, s, e => ...|...->h, t, e", &v);
    mixed.einsum("...|...->h, t, e; h, e -> d => ...|...->t, d", output)
}

/// Multi-head self-attention: `heads` heads of `head` values each, back to `model` values per
/// position (the input width comes from use).
#[derive(Debug, Clone)]
pub struct Attention {
    pub query: Tensor,
    pub key: Tensor,
    pub value: Tensor,
    pub output: Tensor,
    pub head: usize,
    pub causal: bool,
}

impl Attention {
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        head: usize,
        causal: bool,
    ) -> Attention {
        let projection = |name: &str| {
            graph
                .param(&format!("{label}.{name}"))
                .output([heads, head])
                .build()
        };
        Attention {
            query: projection("query"),
            key: projection("key"),
            value: projection("value"),
            output: graph
                .param(&format!("{label}.output"))
                .input([heads, head])
                .output([model])
                .build(),
            head,
            causal,
        }
    }

    /// Attention over `x` (`batch | -> time, model`), with rotary embeddings on queries and keys
    /// if given; `time` is the sequence length (for the causal mask).
    pub fn apply(&self, x: &Tensor, time: usize, rotary: Option<&Rotary>) -> Tensor {
        attend(
            x,
            [&self.query, &self.key, &self.value, &self.output],
            self.head,
            self.causal.then_some(time),
            rotary,
        )
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![
            self.query.clone(),
            self.key.clone(),
            self.value.clone(),
            self.output.clone(),
        ]
    }
}

/// A per-position dense layer over the last output axis: `… -> t, d` to `… -> t, width`.
#[derive(Debug, Clone)]
pub struct PositionDense {
    pub w: Tensor,
    pub b: Tensor,
}

impl PositionDense {
    pub fn new(graph: &Graph, label: &str, width: usize) -> PositionDense {
        PositionDense {
            w: graph.param(&format!("{label}.w")).output([width]).build(),
            b: graph.param(&format!("{label}.b")).output([width]).build(),
        }
    }

    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.einsum("...|...->t, d; d -> f => ...|...->t, f", &self.w)
            .outer_sum("...|...->t, f; f => ...|...->t, f", &self.b)
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.b.clone()]
    }
}

/// The pre-norm transformer block: `x + attention(norm(x))`, then `x + mlp(norm(x))` with a
/// hidden width of `hidden`.
#[derive(Debug, Clone)]
pub struct TransformerBlock {
    pub attention: Attention,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub up: PositionDense,
    pub down: PositionDense,
}

impl TransformerBlock {
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        causal: bool,
    ) -> TransformerBlock {
        TransformerBlock {
            attention: Attention::new(
                graph,
                &format!("{label}.attention"),
                model,
                heads,
                model / heads,
                causal,
            ),
            norm1: LayerNorm::new(graph, &format!("{label}.norm1")),
            norm2: LayerNorm::new(graph, &format!("{label}.norm2")),
            up: PositionDense::new(graph, &format!("{label}.up"), hidden),
            down: PositionDense::new(graph, &format!("{label}.down"), model),
        }
    }

    pub fn apply(&self, x: &Tensor, time: usize, rotary: Option<&Rotary>) -> Tensor {
        let attended = x + &self.attention.apply(&self.norm1.apply(x), time, rotary);
        let hidden = self.up.apply(&self.norm2.apply(&attended)).relu();
        &attended + &self.down.apply(&hidden)
    }

    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.attention.params();
        params.extend(self.norm1.params());
        params.extend(self.norm2.params());
        params.extend(self.up.params());
        params.extend(self.down.params());
        params
    }
}
