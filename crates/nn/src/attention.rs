//! Attention over sequences laid out `batch | -> time, model`: multi-head attention (heads first
//! inside, `heads, time, head`) of queries from one sequence over keys and values from the same
//! sequence or another of a different length, with or without biases on its projections (PyTorch's
//! `nn.MultiheadAttention`), masks as tensors (1 = attend, 0 = ignore; or true = ignored, as
//! PyTorch's boolean `attn_mask`; or added to the scores; broadcast over heads), softmax
//! temperature, dropout of the attention weights, rotary position embeddings, per-position dense
//! layers, and the pre-norm transformer block.

use half::{bf16, f16};
use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Init, Tensor, TensorError};

use crate::blocks::dense_over_trailing_axes;
use crate::dropout::dropout;
use crate::norm::{LayerNorm, softmax};

/// `value` as a scalar held in `precision` (a number alone is held in f32, which would round a
/// factor of an f64 model).
fn scalar(x: &Tensor, label: &str, precision: Precision, value: f64) -> Tensor {
    (x.graph().data(label).shape("").precision(precision))
        .values(vec![value])
        .build()
}

/// `x` times `factor`, held in `x`'s precision.
fn times(x: &Tensor, factor: f64) -> Tensor {
    x.pmul(&scalar(x, &format!("{factor}"), x.precision(), factor))
}

/// What a masked score becomes: the lowest finite value of the scores' precision (f32's for
/// precisions other than the float ones, which no attention computes scores in). It replaces
/// the score rather than being added to it, so that whatever the scores and the precision:
/// - a masked key's weight is exactly 0 beside any unmasked one, since `exp` of the lowest value
///   minus a finite maximum (−∞ where the difference overflows) is 0;
/// - a query whose every key is masked has every score equal, their difference 0, and uniform
///   weights; being finite, the lowest value never makes the softmax's shift `−∞ − (−∞)`, NaN.
///
/// A finite amount subtracted instead (−10⁹, say) only drowns the scores where the precision
/// rounds them away: f64 keeps them, and a fully masked query got the unmasked softmax.
fn masked_score(precision: Precision) -> f64 {
    match precision {
        Precision::F64 => f64::MIN,
        Precision::F16 => f16::MIN.to_f64(),
        Precision::Bf16 => bf16::MIN.to_f64(),
        _ => f64::from(f32::MIN),
    }
}

/// `x` (`… | -> t, d`) projected by `w` (`d -> h, e`), plus `b` (`-> h, e`) if given: per head,
/// per position.
fn project(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let projected = x.einsum("...|...->t, d; d -> h, e => ...|...->h, t, e", w);
    match b {
        Some(b) => projected.outer_sum("...|...->h, t, e; h, e => ...|...->h, t, e", b),
        None => projected,
    }
}

/// The causal mask as a tensor: `time × time` (`-> t, s`), 1 where the key is at or before the
/// query (`s ≤ t`), 0 where it would look ahead.
#[track_caller]
pub fn causal_mask(graph: &Graph, time: usize) -> Tensor {
    graph.called("nn::attention::causal_mask", || {
        let positions = graph.range(time);
        let ahead = positions.outer_sum("t; s => t, s", &(-&positions));
        // t − s < 0: the key comes after the query.
        ahead.lt(&graph.number(0.0)).not()
    })
}

/// How attention weighs the keys, besides the scores: masks, each broadcast against the scores
/// `batch | -> heads, t, s` from the right (so `batch | -> s` is a padding mask per key
/// position, `t, s` or `batch | -> t, s` a mask per query and key, such as [`causal_mask`]); a
/// softmax temperature (scores are divided by `√head · temperature`); dropout of the weights;
/// and rotary embeddings of queries and keys (for self-attention, where both have the rotary
/// tables' length).
///
/// Masks come in three conventions, which may be mixed:
/// - [`AttendOptions::mask`]: 1 (nonzero) = attend, 0 = ignore — the convention of
///   `torch.nn.functional.scaled_dot_product_attention`'s boolean `attn_mask`;
/// - [`AttendOptions::mask_where_true`]: true (nonzero) = ignore, 0 = attend — the convention of
///   `torch.nn.MultiheadAttention`'s boolean `attn_mask` and `key_padding_mask`;
/// - [`AttendOptions::additive_mask`]: a float added to the scaled scores (0 keeps a key, −∞
///   removes it, other values bias it), PyTorch's float masks.
///
/// An ignored key's weight is exactly 0, and a query whose every key is ignored (by the first
/// two conventions) weighs them all alike, where PyTorch gives NaN; additive masks are added
/// first, so −∞ added to every key of a query gives NaN, as in PyTorch.
#[derive(Debug, Clone)]
pub struct AttendOptions {
    /// Masks of the scores (1 = attend, 0 = ignore), each broadcast from the right against
    /// `batch | -> heads, t, s`; empty by default.
    pub masks: Vec<Tensor>,
    /// Masks added to the scaled scores (before the softmax and before `masks`), each broadcast
    /// from the right against `batch | -> heads, t, s`; empty by default.
    pub additive_masks: Vec<Tensor>,
    /// The softmax temperature: scores are divided by `√head · temperature` (1 by default; finite
    /// and above 0).
    pub temperature: f64,
    /// The probability of dropping a weight, and the step tensor that draws the masks afresh
    /// (see [`dropout`]).
    pub dropout: Option<(f64, Tensor)>,
    /// Rotary embeddings of queries and keys, or `None` (the default) for none.
    pub rotary: Option<Rotary>,
}

impl Default for AttendOptions {
    fn default() -> AttendOptions {
        AttendOptions {
            masks: Vec::new(),
            additive_masks: Vec::new(),
            temperature: 1.0,
            dropout: None,
            rotary: None,
        }
    }
}

impl AttendOptions {
    /// No mask, temperature 1, no dropout, no rotary embeddings.
    pub fn new() -> AttendOptions {
        AttendOptions::default()
    }

    /// The same with one more mask: 1 (nonzero) = attend, 0 = ignore.
    pub fn mask(mut self, mask: &Tensor) -> AttendOptions {
        self.masks.push(mask.clone());
        self
    }

    /// The same with one more boolean mask in PyTorch's `nn.MultiheadAttention` convention:
    /// true (nonzero) = ignore the key, false (0) = attend. It is kept in `masks` as its
    /// negation.
    pub fn mask_where_true(mut self, ignored: &Tensor) -> AttendOptions {
        self.masks.push(ignored.not());
        self
    }

    /// The same with one more mask added to the scaled scores (0 = keep, −∞ = ignore, other
    /// values bias the key).
    pub fn additive_mask(mut self, mask: &Tensor) -> AttendOptions {
        self.additive_masks.push(mask.clone());
        self
    }

    /// The same with this softmax temperature.
    pub fn temperature(mut self, temperature: f64) -> AttendOptions {
        self.temperature = temperature;
        self
    }

    /// The same with dropout of the weights: probability `p`, masks drawn afresh per `step`.
    pub fn dropout(mut self, p: f64, step: &Tensor) -> AttendOptions {
        self.dropout = Some((p, step.clone()));
        self
    }

    /// The same with rotary embeddings of queries and keys.
    pub fn rotary(mut self, rotary: &Rotary) -> AttendOptions {
        self.rotary = Some(rotary.clone());
        self
    }

    /// The same without rotary embeddings (what cross-attention between sequences of different
    /// lengths takes from options shared with self-attention).
    pub fn without_rotary(mut self) -> AttendOptions {
        self.rotary = None;
        self
    }

    /// What makes the settings meaningless, if anything.
    fn problem(&self) -> Option<String> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Some(format!(
                "attention: the softmax temperature must be finite and above 0, not {}",
                self.temperature
            ));
        }
        match self.dropout {
            Some((p, _)) if !(0.0..1.0).contains(&p) => Some(format!(
                "attention: the dropout probability must be in [0, 1), not {p}"
            )),
            _ => None,
        }
    }
}

/// The attention weights (`batch | -> heads, t, s`) of queries from `queries` (`batch | -> t,
/// model`) over keys from `memory` (`batch | -> s, model`), with the projections `[query, key]`
/// (`model -> heads, head`): the softmax over `s` of the scaled, masked scores, dropped out if
/// the options say so.
#[track_caller]
pub fn attention_weights(
    queries: &Tensor,
    memory: &Tensor,
    projections: [&Tensor; 2],
    head: usize,
    options: &AttendOptions,
) -> Tensor {
    queries
        .graph()
        .called("nn::attention::attention_weights", || {
            biased_attention_weights(queries, memory, projections, [None, None], head, options)
        })
}

/// [`attention_weights`] with the query and key projections' biases (`-> heads, head`), where
/// given.
fn biased_attention_weights(
    queries: &Tensor,
    memory: &Tensor,
    [query, key]: [&Tensor; 2],
    [query_bias, key_bias]: [Option<&Tensor>; 2],
    head: usize,
    options: &AttendOptions,
) -> Tensor {
    let graph = queries.graph();
    if let Some(message) = options.problem() {
        return graph.failed_with(TensorError::new(message));
    }
    let (mut q, mut k) = (
        project(queries, query, query_bias),
        project(memory, key, key_bias),
    );
    if let Some(rotary) = &options.rotary {
        q = rotary.apply(&q);
        k = rotary.apply(&k);
    }
    let scores = q.einsum("...|...->h, t, e; ...|...->h, s, e => ...|...->h, t, s", &k);
    let mut scores = times(&scores, 1.0 / ((head as f64).sqrt() * options.temperature));
    for mask in &options.additive_masks {
        scores = &scores + mask;
    }
    for mask in &options.masks {
        // The scores' precision, as the result's promotes with the mask's.
        let precision = scores.precision().promote(mask.precision());
        let masked = scalar(&scores, "masked score", precision, masked_score(precision));
        scores = Tensor::where_(mask, &scores, &masked);
    }
    let weights = softmax(&scores);
    match &options.dropout {
        Some((p, step)) => dropout(&weights, *p, step),
        None => weights,
    }
}

/// Attention of queries from `queries` (`batch | -> t, model`) over keys and values from
/// `memory` (`batch | -> s, model`; the same tensor for self-attention), with the projections
/// `[query, key, value, output]` (`model -> heads, head` three times, then `heads, head ->
/// model`): `batch | -> t, model`.
#[track_caller]
pub fn attend_with(
    queries: &Tensor,
    memory: &Tensor,
    projections: [&Tensor; 4],
    head: usize,
    options: &AttendOptions,
) -> Tensor {
    queries.graph().called("nn::attention::attend_with", || {
        attend_with_biases(queries, memory, projections, None, head, options)
    })
}

/// [`attend_with`] with the projections' biases, if given (PyTorch's `nn.MultiheadAttention`
/// with `bias=True`): each projection's bias is added after it.
#[track_caller]
pub fn attend_with_biases(
    queries: &Tensor,
    memory: &Tensor,
    [query, key, value, output]: [&Tensor; 4],
    biases: Option<&AttentionBiases>,
    head: usize,
    options: &AttendOptions,
) -> Tensor {
    queries
        .graph()
        .called("nn::attention::attend_with_biases", || {
            let bias = |pick: fn(&AttentionBiases) -> &Tensor| biases.map(pick);
            let weights = biased_attention_weights(
                queries,
                memory,
                [query, key],
                [bias(|b| &b.query), bias(|b| &b.key)],
                head,
                options,
            );
            let v = project(memory, value, bias(|b| &b.value));
            let mixed =
                weights.einsum("...|...->h, t, s; ...|...->h, s, e => ...|...->h, t, e", &v);
            let out = mixed.einsum("...|...->h, t, e; h, e -> d => ...|...->t, d", output);
            match bias(|b| &b.output) {
                Some(b) => out.outer_sum("...|...->t, d; d => ...|...->t, d", b),
                None => out,
            }
        })
}

/// Self-attention of `x` (`batch | -> time, model`) with the projections `[query, key, value,
/// output]` (`model -> heads, head` three times, then `heads, head -> model`), a causal mask over
/// `time` positions when given, and rotary embeddings when given.
#[track_caller]
pub fn attend(
    x: &Tensor,
    projections: [&Tensor; 4],
    head: usize,
    causal: Option<usize>,
    rotary: Option<&Rotary>,
) -> Tensor {
    x.graph().called("nn::attention::attend", || {
        let mut options = AttendOptions::new();
        if let Some(time) = causal {
            options = options.mask(&causal_mask(x.graph(), time));
        }
        if let Some(rotary) = rotary {
            options = options.rotary(rotary);
        }
        attend_with(x, x, projections, head, &options)
    })
}

/// Rotary position embeddings for sequences of `time` positions and heads of `head` values
/// (even): each pair of values `(2i, 2i+1)` is rotated by `position · base^(−2i/head)`.
#[derive(Debug, Clone)]
pub struct Rotary {
    cos: Tensor,
    sin: Tensor,
}

impl Rotary {
    /// The cosine and sine tables (`time, head`) of `time` positions, in the precision of what
    /// they rotate.
    pub fn new(graph: &Graph, time: usize, head: usize) -> Rotary {
        Rotary::with_precision(graph, time, head, None)
    }

    /// The tables in `precision` (that of the queries and keys they rotate: an f64 model's
    /// angles keep every digit).
    pub fn with_precision(
        graph: &Graph,
        time: usize,
        head: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Rotary {
        let precision = precision.into();
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
                .precision(precision)
                .values(table(f64::cos))
                .build(),
            sin: graph
                .data("rotary sin")
                .shape(&shape)
                .precision(precision)
                .values(table(f64::sin))
                .build(),
        }
    }

    /// `x` (`… | -> h, t, e`) rotated: `x·cos + rotate(x)·sin`, with `rotate` taking each pair
    /// `(a, b)` to `(−b, a)`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::attention::Rotary::apply", || {
            let (even, odd) = (x.deinterleave(false), x.deinterleave(true));
            let rotated = Tensor::interleave(&(-&odd), &even);
            &x.pmul(&self.cos) + &rotated.pmul(&self.sin)
        })
    }
}

/// Multi-head attention: `heads` heads of `head` values each, back to `model` values per
/// position (the input width comes from use).
#[derive(Debug, Clone)]
pub struct Attention {
    /// `model -> heads, head`.
    pub query: Tensor,
    /// `model -> heads, head`.
    pub key: Tensor,
    /// `model -> heads, head`.
    pub value: Tensor,
    /// `heads, head -> model`.
    pub output: Tensor,
    /// The number of values per head (the `head` axis's size); scores are scaled by `1/√head`.
    pub head: usize,
    /// Whether [`Attention::apply`] masks keys after the query ([`Attention::apply_with`] takes
    /// its masks from its options only).
    pub causal: bool,
}

impl Attention {
    /// The projections of `label`, initialized by their fan-in, of the precision inferred from
    /// use.
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        head: usize,
        causal: bool,
    ) -> Attention {
        Attention::with_precision(graph, label, model, heads, head, causal, None)
    }

    /// The same with projections of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        head: usize,
        causal: bool,
        precision: impl Into<Option<Precision>>,
    ) -> Attention {
        let precision = precision.into();
        let param = |name: &str| graph.param(&format!("{label}.{name}")).precision(precision);
        let projection = |name: &str| param(name).output([heads, head]).build();
        Attention {
            query: projection("query"),
            key: projection("key"),
            value: projection("value"),
            output: param("output").input([heads, head]).output([model]).build(),
            head,
            causal,
        }
    }

    /// Attention over `x` (`batch | -> time, model`), with rotary embeddings on queries and keys
    /// if given; `time` is the sequence length (for the causal mask).
    #[track_caller]
    pub fn apply(&self, x: &Tensor, time: usize, rotary: Option<&Rotary>) -> Tensor {
        x.graph().called("nn::attention::Attention::apply", || {
            attend(
                x,
                [&self.query, &self.key, &self.value, &self.output],
                self.head,
                self.causal.then_some(time),
                rotary,
            )
        })
    }

    /// Attention of queries from `queries` (`batch | -> t, model`) over keys and values from
    /// `memory` (`batch | -> s, model`: `queries` again for self-attention, another sequence for
    /// cross-attention), masked, scaled and dropped out as `options` say.
    #[track_caller]
    pub fn apply_with(&self, queries: &Tensor, memory: &Tensor, options: &AttendOptions) -> Tensor {
        queries
            .graph()
            .called("nn::attention::Attention::apply_with", || {
                attend_with(
                    queries,
                    memory,
                    [&self.query, &self.key, &self.value, &self.output],
                    self.head,
                    options,
                )
            })
    }

    /// The weights of [`Attention::apply_with`]: `batch | -> heads, t, s`, summing to 1 over `s`
    /// (before dropout).
    #[track_caller]
    pub fn weights(&self, queries: &Tensor, memory: &Tensor, options: &AttendOptions) -> Tensor {
        queries
            .graph()
            .called("nn::attention::Attention::weights", || {
                attention_weights(
                    queries,
                    memory,
                    [&self.query, &self.key],
                    self.head,
                    options,
                )
            })
    }

    /// The four projections.
    pub fn params(&self) -> Vec<Tensor> {
        vec![
            self.query.clone(),
            self.key.clone(),
            self.value.clone(),
            self.output.clone(),
        ]
    }
}

/// The biases of an attention's four projections, each starting at 0: added to the queries,
/// keys and values per head (`-> heads, head`) and to the output (`-> model`).
#[derive(Debug, Clone)]
pub struct AttentionBiases {
    /// `-> heads, head`, labelled `<label>.query_bias`.
    pub query: Tensor,
    /// `-> heads, head`, labelled `<label>.key_bias`.
    pub key: Tensor,
    /// `-> heads, head`, labelled `<label>.value_bias`.
    pub value: Tensor,
    /// `-> model`, labelled `<label>.output_bias`.
    pub output: Tensor,
}

impl AttentionBiases {
    /// The biases of attention `label` with parameters of `precision`.
    pub fn new(
        graph: &Graph,
        label: &str,
        [model, heads, head]: [usize; 3],
        precision: impl Into<Option<Precision>>,
    ) -> AttentionBiases {
        let precision = precision.into();
        let bias = |name: &str, dims: &[usize]| {
            graph
                .param(&format!("{label}.{name}_bias"))
                .precision(precision)
                .output(dims.iter().copied())
                .init(Init::Constant(0.0))
                .build()
        };
        AttentionBiases {
            query: bias("query", &[heads, head]),
            key: bias("key", &[heads, head]),
            value: bias("value", &[heads, head]),
            output: bias("output", &[model]),
        }
    }

    /// The four biases, in the order of the projections.
    pub fn params(&self) -> Vec<Tensor> {
        vec![
            self.query.clone(),
            self.key.clone(),
            self.value.clone(),
            self.output.clone(),
        ]
    }
}

/// PyTorch's `nn.MultiheadAttention`: an [`Attention`] (`heads` heads of `model / heads`
/// values) with biases on its four projections unless built without (`bias=False`).
#[derive(Debug, Clone)]
pub struct MultiheadAttention {
    /// The projections and the head size (`causal` is not read: give [`causal_mask`] as a
    /// mask).
    pub attention: Attention,
    /// The projections' biases, or `None`.
    pub biases: Option<AttentionBiases>,
}

impl MultiheadAttention {
    /// The attention of `label`, its parameters of the precision inferred from use: `heads` heads of `model / heads` values,
    /// with biases if `bias`; an error unless `heads` (at least 1) divides `model`.
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        bias: bool,
    ) -> Result<MultiheadAttention, TensorError> {
        MultiheadAttention::with_precision(graph, label, [model, heads], bias, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        [model, heads]: [usize; 2],
        bias: bool,
        precision: impl Into<Option<Precision>>,
    ) -> Result<MultiheadAttention, TensorError> {
        let precision = precision.into();
        if heads == 0 || !model.is_multiple_of(heads) {
            return Err(TensorError::new(format!(
                "MultiheadAttention '{label}': {heads} heads do not divide the model width {model}"
            )));
        }
        let head = model / heads;
        Ok(MultiheadAttention {
            attention: Attention::with_precision(
                graph, label, model, heads, head, false, precision,
            ),
            biases: bias
                .then(|| AttentionBiases::new(graph, label, [model, heads, head], precision)),
        })
    }

    /// Attention of queries from `queries` (`batch | -> t, model`) over keys and values from
    /// `memory` (`batch | -> s, model`), masked, scaled and dropped out as `options` say.
    #[track_caller]
    pub fn apply_with(&self, queries: &Tensor, memory: &Tensor, options: &AttendOptions) -> Tensor {
        queries
            .graph()
            .called("nn::attention::MultiheadAttention::apply_with", || {
                let a = &self.attention;
                attend_with_biases(
                    queries,
                    memory,
                    [&a.query, &a.key, &a.value, &a.output],
                    self.biases.as_ref(),
                    a.head,
                    options,
                )
            })
    }

    /// The attention weights of [`MultiheadAttention::apply_with`]: `batch | -> heads, t, s`.
    #[track_caller]
    pub fn weights(&self, queries: &Tensor, memory: &Tensor, options: &AttendOptions) -> Tensor {
        queries
            .graph()
            .called("nn::attention::MultiheadAttention::weights", || {
                let a = &self.attention;
                let bias = |pick: fn(&AttentionBiases) -> &Tensor| self.biases.as_ref().map(pick);
                biased_attention_weights(
                    queries,
                    memory,
                    [&a.query, &a.key],
                    [bias(|b| &b.query), bias(|b| &b.key)],
                    a.head,
                    options,
                )
            })
    }

    /// The four projections, then the biases if there are any.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.attention.params();
        params.extend(self.biases.iter().flat_map(AttentionBiases::params));
        params
    }
}

/// A per-position dense layer over the last output axis: `… -> t, d` to `… -> t, width`, with a
/// bias: the layer of [`Linear`](crate::blocks::Linear) with its default options, as a struct
/// whose bias is always there.
#[derive(Debug, Clone)]
pub struct PositionDense {
    /// `d -> width`.
    pub w: Tensor,
    /// `width`, starting at 0.
    pub b: Tensor,
}

impl PositionDense {
    /// The weights and bias of `label`; their precision and the input width come from use.
    pub fn new(graph: &Graph, label: &str, width: usize) -> PositionDense {
        PositionDense::with_precision(graph, label, width, None)
    }

    /// The same with weights and bias of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        width: usize,
        precision: impl Into<Option<Precision>>,
    ) -> PositionDense {
        let precision = precision.into();
        let param = |name: &str| {
            graph
                .param(&format!("{label}.{name}"))
                .precision(precision)
                .output([width])
                .build()
        };
        PositionDense {
            w: param("w"),
            b: param("b"),
        }
    }

    /// `x·w + b` at every position of `x` (`… | -> …, d`, such as `… | -> t, d`).
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::attention::PositionDense::apply", || {
            dense_over_trailing_axes(x, &self.w, Some(&self.b), 1, 1)
        })
    }

    /// The weights and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.b.clone()]
    }
}

/// The pre-norm transformer block: `x + attention(norm(x))`, then `x + mlp(norm(x))` with a
/// hidden width of `hidden`.
#[derive(Debug, Clone)]
pub struct TransformerBlock {
    /// The self-attention, labelled `<label>.attention`.
    pub attention: Attention,
    /// The norm before the attention, labelled `<label>.norm1`.
    pub norm1: LayerNorm,
    /// The norm before the MLP, labelled `<label>.norm2`.
    pub norm2: LayerNorm,
    /// The MLP's first layer, labelled `<label>.up`: `model -> hidden` per position, followed by
    /// `relu`.
    pub up: PositionDense,
    /// The MLP's second layer, labelled `<label>.down`: `hidden -> model` per position.
    pub down: PositionDense,
}

impl TransformerBlock {
    /// The block of `label`, its parameters of the precision inferred from use: `heads` heads of `model / heads` values, causal
    /// if asked.
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        causal: bool,
    ) -> TransformerBlock {
        TransformerBlock::with_precision(graph, label, model, heads, hidden, causal, None)
    }

    /// The same with every parameter (attention, norms, MLP) of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        causal: bool,
        precision: impl Into<Option<Precision>>,
    ) -> TransformerBlock {
        let precision = precision.into();
        let sub = |name: &str| format!("{label}.{name}");
        TransformerBlock {
            attention: Attention::with_precision(
                graph,
                &sub("attention"),
                model,
                heads,
                model / heads,
                causal,
                precision,
            ),
            norm1: LayerNorm::with_precision(graph, &sub("norm1"), precision),
            norm2: LayerNorm::with_precision(graph, &sub("norm2"), precision),
            up: PositionDense::with_precision(graph, &sub("up"), hidden, precision),
            down: PositionDense::with_precision(graph, &sub("down"), model, precision),
        }
    }

    /// The block over `x` (`batch | -> time, model`), causal over `time` positions if the block
    /// is, with rotary embeddings if given.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, time: usize, rotary: Option<&Rotary>) -> Tensor {
        x.graph()
            .called("nn::attention::TransformerBlock::apply", || {
                let attended = x + &self.attention.apply(&self.norm1.apply(x), time, rotary);
                self.feed_forward(&attended)
            })
    }

    /// The block over `x` with its attention as `options` say (masks, temperature, dropout,
    /// rotary embeddings; the block's own `causal` is not read: give [`causal_mask`] as a mask).
    #[track_caller]
    pub fn apply_with(&self, x: &Tensor, options: &AttendOptions) -> Tensor {
        x.graph()
            .called("nn::attention::TransformerBlock::apply_with", || {
                let normalized = self.norm1.apply(x);
                let attended = x + &self.attention.apply_with(&normalized, &normalized, options);
                self.feed_forward(&attended)
            })
    }

    /// The second half: `x + mlp(norm(x))`.
    fn feed_forward(&self, x: &Tensor) -> Tensor {
        let hidden = self.up.apply(&self.norm2.apply(x)).relu();
        x + &self.down.apply(&hidden)
    }

    /// Every parameter of the block.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.attention.params();
        params.extend(self.norm1.params());
        params.extend(self.norm2.params());
        params.extend(self.up.params());
        params.extend(self.down.params());
        params
    }
}
