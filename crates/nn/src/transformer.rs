//! The encoder–decoder transformer over sequences laid out `batch | -> time, model`: the encoder
//! block (self-attention, then a position-wise MLP), the decoder block (causal self-attention,
//! cross-attention to the encoder's output, the MLP), each with its layer norms before or after
//! the residual sums, the whole model from token ids to logits, and its loss: cross-entropy over
//! target positions under teacher forcing, padded positions left out.

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Tensor};

use crate::attention::{AttendOptions, Attention, PositionDense, causal_mask};
use crate::embedding::Embedding;
use crate::loss::sequence_cross_entropy;
use crate::norm::LayerNorm;
use crate::position::{PositionKind, Positions};

/// Where a block's layer norms sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `x + f(norm(x))`: the residual path is never normalized, so deep stacks train without
    /// warm-up; the model normalizes each stack's output once at its end.
    Pre,
    /// `norm(x + f(x))`, as in "Attention is all you need".
    Post,
}

impl Placement {
    /// The residual sublayer `f` around `x` with its norm placed.
    fn around(self, x: &Tensor, norm: &LayerNorm, f: impl FnOnce(&Tensor) -> Tensor) -> Tensor {
        match self {
            Placement::Pre => x + &f(&norm.apply(x)),
            Placement::Post => norm.apply(&(x + &f(x))),
        }
    }
}

/// The position-wise MLP: `model → hidden` (relu) `→ model`.
#[derive(Debug, Clone)]
pub struct FeedForward {
    /// `model -> hidden` per position, followed by `relu`; labelled `<label>.up`.
    pub up: PositionDense,
    /// `hidden -> model` per position; labelled `<label>.down`.
    pub down: PositionDense,
}

impl FeedForward {
    /// The layers of `label`, of the precision inferred from use, `hidden` wide inside, back to `model`.
    pub fn new(graph: &Graph, label: &str, model: usize, hidden: usize) -> FeedForward {
        FeedForward::with_precision(graph, label, model, hidden, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        model: usize,
        hidden: usize,
        precision: impl Into<Option<Precision>>,
    ) -> FeedForward {
        let precision = precision.into();
        FeedForward {
            up: PositionDense::with_precision(graph, &format!("{label}.up"), hidden, precision),
            down: PositionDense::with_precision(graph, &format!("{label}.down"), model, precision),
        }
    }

    /// The MLP at every position of `x` (`batch | -> time, model`).
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::transformer::FeedForward::apply", || {
            self.down.apply(&self.up.apply(x).relu())
        })
    }

    /// Both layers' parameters.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.up.params();
        params.extend(self.down.params());
        params
    }
}

/// The encoder block: self-attention, then the MLP, each a residual sublayer with its norm
/// placed as `placement` says (post-norm, as in "Attention is all you need", or pre-norm).
#[derive(Debug, Clone)]
pub struct EncoderBlock {
    /// The self-attention, labelled `<label>.attention`.
    pub attention: Attention,
    /// The position-wise MLP, labelled `<label>.mlp`.
    pub feed_forward: FeedForward,
    /// The norm of the attention sublayer, labelled `<label>.norm1`.
    pub norm1: LayerNorm,
    /// The norm of the MLP sublayer, labelled `<label>.norm2`.
    pub norm2: LayerNorm,
    /// Where the norms sit.
    pub placement: Placement,
}

impl EncoderBlock {
    /// The block of `label`, its parameters of the precision inferred from use: `heads` heads of `model / heads` values, an MLP
    /// `hidden` wide.
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        placement: Placement,
    ) -> EncoderBlock {
        EncoderBlock::with_precision(graph, label, model, heads, hidden, placement, None)
    }

    /// The same with every parameter (attention, MLP, norms) of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        placement: Placement,
        precision: impl Into<Option<Precision>>,
    ) -> EncoderBlock {
        let precision = precision.into();
        let sub = |name: &str| format!("{label}.{name}");
        EncoderBlock {
            attention: Attention::with_precision(
                graph,
                &sub("attention"),
                model,
                heads,
                model / heads,
                false,
                precision,
            ),
            feed_forward: FeedForward::with_precision(graph, &sub("mlp"), model, hidden, precision),
            norm1: LayerNorm::with_precision(graph, &sub("norm1"), precision),
            norm2: LayerNorm::with_precision(graph, &sub("norm2"), precision),
            placement,
        }
    }

    /// The block over `x` (`batch | -> time, model`), its self-attention masked (a padding mask
    /// `batch | -> time`, say), scaled and dropped out as `options` say.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, options: &AttendOptions) -> Tensor {
        x.graph()
            .called("nn::transformer::EncoderBlock::apply", || {
                let attended = self
                    .placement
                    .around(x, &self.norm1, |h| self.attention.apply_with(h, h, options));
                self.placement
                    .around(&attended, &self.norm2, |h| self.feed_forward.apply(h))
            })
    }

    /// Every parameter of the block.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.attention.params();
        params.extend(self.feed_forward.params());
        params.extend(self.norm1.params());
        params.extend(self.norm2.params());
        params
    }
}

/// The decoder block: self-attention (causal through the masks it is given), cross-attention
/// from its positions to the encoder's output, then the MLP, each a residual sublayer with its
/// norm placed as `placement` says.
#[derive(Debug, Clone)]
pub struct DecoderBlock {
    /// The decoder's attention over its own positions, labelled `<label>.self_attention`.
    pub self_attention: Attention,
    /// The attention from the decoder's positions to the encoder's output, labelled
    /// `<label>.cross_attention`.
    pub cross_attention: Attention,
    /// The position-wise MLP, labelled `<label>.mlp`.
    pub feed_forward: FeedForward,
    /// The norm of the self-attention sublayer, labelled `<label>.norm1`.
    pub norm1: LayerNorm,
    /// The norm of the cross-attention sublayer, labelled `<label>.norm2`.
    pub norm2: LayerNorm,
    /// The norm of the MLP sublayer, labelled `<label>.norm3`.
    pub norm3: LayerNorm,
    /// Where the norms sit.
    pub placement: Placement,
}

impl DecoderBlock {
    /// The block of `label`, its parameters of the precision inferred from use: `heads` heads of `model / heads` values in both
    /// attentions, an MLP `hidden` wide.
    pub fn new(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        placement: Placement,
    ) -> DecoderBlock {
        DecoderBlock::with_precision(graph, label, model, heads, hidden, placement, None)
    }

    /// The same with every parameter (both attentions, MLP, norms) of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        model: usize,
        heads: usize,
        hidden: usize,
        placement: Placement,
        precision: impl Into<Option<Precision>>,
    ) -> DecoderBlock {
        let precision = precision.into();
        let sub = |name: &str| format!("{label}.{name}");
        let attention = |name: &str| {
            Attention::with_precision(
                graph,
                &sub(name),
                model,
                heads,
                model / heads,
                false,
                precision,
            )
        };
        let norm = |name: &str| LayerNorm::with_precision(graph, &sub(name), precision);
        DecoderBlock {
            self_attention: attention("self_attention"),
            cross_attention: attention("cross_attention"),
            feed_forward: FeedForward::with_precision(graph, &sub("mlp"), model, hidden, precision),
            norm1: norm("norm1"),
            norm2: norm("norm2"),
            norm3: norm("norm3"),
            placement,
        }
    }

    /// The block over `x` (`batch | -> t, model`) attending to `memory` (`batch | -> s, model`,
    /// the encoder's output): self-attention as `self_options` say (give it [`causal_mask`]),
    /// cross-attention as `cross_options` say (give it the source's padding mask).
    #[track_caller]
    pub fn apply(
        &self,
        x: &Tensor,
        memory: &Tensor,
        self_options: &AttendOptions,
        cross_options: &AttendOptions,
    ) -> Tensor {
        x.graph()
            .called("nn::transformer::DecoderBlock::apply", || {
                let attended = self.placement.around(x, &self.norm1, |h| {
                    self.self_attention.apply_with(h, h, self_options)
                });
                let informed = self.placement.around(&attended, &self.norm2, |h| {
                    self.cross_attention.apply_with(h, memory, cross_options)
                });
                self.placement
                    .around(&informed, &self.norm3, |h| self.feed_forward.apply(h))
            })
    }

    /// Every parameter of the block.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.self_attention.params();
        params.extend(self.cross_attention.params());
        params.extend(self.feed_forward.params());
        params.extend(self.norm1.params());
        params.extend(self.norm2.params());
        params.extend(self.norm3.params());
        params
    }
}

/// The sizes and choices of an [`EncoderDecoder`] (its parameters' precision is an argument of
/// [`EncoderDecoder::with_precision`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderDecoderConfig {
    /// The number of source tokens: source ids are `0..source_vocabulary`.
    pub source_vocabulary: usize,
    /// The number of target tokens: target ids are `0..target_vocabulary`, and the logits have one
    /// value per token.
    pub target_vocabulary: usize,
    /// Positions of a source sequence (padded to it).
    pub source_time: usize,
    /// Positions of a target sequence (padded to it).
    pub target_time: usize,
    /// Values per position.
    pub model: usize,
    /// The number of attention heads; each has `model / heads` values.
    pub heads: usize,
    /// The MLPs' inner width.
    pub hidden: usize,
    /// The number of encoder blocks stacked.
    pub encoder_blocks: usize,
    /// The number of decoder blocks stacked.
    pub decoder_blocks: usize,
    /// Where every block's layer norms sit.
    pub placement: Placement,
    /// The positional encoding of both sequences.
    pub positions: PositionKind,
}

/// Sequence pairs as tensors of token ids, for the loss under teacher forcing.
#[derive(Debug, Clone)]
pub struct SequencePairs {
    /// `batch | -> s`: source token ids.
    pub source: Tensor,
    /// `batch | -> s`: 1 at a source token, 0 at padding.
    pub source_mask: Tensor,
    /// `batch | -> t`: what the decoder reads: a start token, then the targets but the last.
    pub target_inputs: Tensor,
    /// `batch | -> t`: the tokens to predict at each position.
    pub targets: Tensor,
    /// `batch | -> t`: 1 at a position to score, 0 at padding.
    pub target_mask: Tensor,
}

/// The encoder–decoder transformer: token embeddings plus positional encodings, a stack of
/// encoder blocks over the source, a stack of decoder blocks over the target attending to the
/// encoder's output, and a per-position dense layer to the target vocabulary's logits.
#[derive(Debug, Clone)]
pub struct EncoderDecoder {
    /// The sizes and choices the model was built with.
    pub config: EncoderDecoderConfig,
    /// The source tokens' vectors, `| source_vocabulary -> model`, labelled
    /// `<label>.source_embedding`.
    pub source_embedding: Embedding,
    /// The target tokens' vectors, `| target_vocabulary -> model`, labelled
    /// `<label>.target_embedding`.
    pub target_embedding: Embedding,
    /// The positional encoding added to the embedded source (`source_time` positions).
    pub source_positions: Positions,
    /// The positional encoding added to the embedded target inputs (`target_time` positions).
    pub target_positions: Positions,
    /// The encoder blocks, applied in order; block `i` is labelled `<label>.encoder<i>`.
    pub encoder: Vec<EncoderBlock>,
    /// The decoder blocks, applied in order; block `i` is labelled `<label>.decoder<i>`.
    pub decoder: Vec<DecoderBlock>,
    /// The norms at the end of each stack (pre-norm only: post-norm blocks end normalized).
    pub final_norms: Option<(LayerNorm, LayerNorm)>,
    /// The per-position dense layer from `model` values to the target vocabulary's logits, labelled
    /// `<label>.head`.
    pub head: PositionDense,
}

impl EncoderDecoder {
    /// The model of `label` as `config` says, with parameters and positional tables of
    /// the precision inferred from use.
    pub fn new(graph: &Graph, label: &str, config: EncoderDecoderConfig) -> EncoderDecoder {
        EncoderDecoder::with_precision(graph, label, config, None)
    }

    /// The same with every parameter and the positional tables (fixed or learned) of
    /// `precision`. The precision is an argument rather than a field of the config, so that
    /// configs written out field by field keep building.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        config: EncoderDecoderConfig,
        precision: impl Into<Option<Precision>>,
    ) -> EncoderDecoder {
        let precision = precision.into();
        let c = config;
        let sub = |name: &str| format!("{label}.{name}");
        let embedding = |name: &str, vocabulary: usize| {
            Embedding::with_precision(graph, &sub(name), vocabulary, c.model, precision)
        };
        let positions = |name: &str, time: usize| {
            Positions::with_precision(graph, &sub(name), c.positions, time, c.model, precision)
        };
        let norm = |name: &str| LayerNorm::with_precision(graph, &sub(name), precision);
        EncoderDecoder {
            config,
            source_embedding: embedding("source_embedding", c.source_vocabulary),
            target_embedding: embedding("target_embedding", c.target_vocabulary),
            source_positions: positions("source_positions", c.source_time),
            target_positions: positions("target_positions", c.target_time),
            encoder: (0..c.encoder_blocks)
                .map(|i| {
                    EncoderBlock::with_precision(
                        graph,
                        &sub(&format!("encoder{i}")),
                        c.model,
                        c.heads,
                        c.hidden,
                        c.placement,
                        precision,
                    )
                })
                .collect(),
            decoder: (0..c.decoder_blocks)
                .map(|i| {
                    DecoderBlock::with_precision(
                        graph,
                        &sub(&format!("decoder{i}")),
                        c.model,
                        c.heads,
                        c.hidden,
                        c.placement,
                        precision,
                    )
                })
                .collect(),
            final_norms: (c.placement == Placement::Pre)
                .then(|| (norm("encoder_norm"), norm("decoder_norm"))),
            head: PositionDense::with_precision(
                graph,
                &sub("head"),
                c.target_vocabulary,
                precision,
            ),
        }
    }

    /// The encoder's output (`batch | -> s, model`) for `source` ids (`batch | -> s`) with their
    /// padding mask (`batch | -> s`); `options` give every attention its temperature and
    /// dropout (and rotary embeddings to the self-attentions, whose tables need the sequence's
    /// length: cross-attention never takes them).
    #[track_caller]
    pub fn encode(&self, source: &Tensor, source_mask: &Tensor, options: &AttendOptions) -> Tensor {
        source
            .graph()
            .called("nn::transformer::EncoderDecoder::encode", || {
                let options = options.clone().mask(source_mask);
                let mut h = self
                    .source_positions
                    .apply(&embed_sequence(&self.source_embedding, source));
                for block in &self.encoder {
                    h = block.apply(&h, &options);
                }
                match &self.final_norms {
                    Some((encoder_norm, _)) => encoder_norm.apply(&h),
                    None => h,
                }
            })
    }

    /// The logits (`batch | -> t, target_vocabulary`) at each position of `target_inputs` ids
    /// (`batch | -> t`), given the encoder's output `memory` and the source's padding mask.
    /// Position `t` sees the inputs up to `t` only, so one run scores every position under
    /// teacher forcing, and greedy decoding may fill the inputs one position per run.
    #[track_caller]
    pub fn decode(
        &self,
        memory: &Tensor,
        source_mask: &Tensor,
        target_inputs: &Tensor,
        options: &AttendOptions,
    ) -> Tensor {
        memory
            .graph()
            .called("nn::transformer::EncoderDecoder::decode", || {
                let graph = memory.graph();
                let self_options = options
                    .clone()
                    .mask(&causal_mask(graph, self.config.target_time));
                let cross_options = options.clone().without_rotary().mask(source_mask);
                let mut h = self
                    .target_positions
                    .apply(&embed_sequence(&self.target_embedding, target_inputs));
                for block in &self.decoder {
                    h = block.apply(&h, memory, &self_options, &cross_options);
                }
                if let Some((_, decoder_norm)) = &self.final_norms {
                    h = decoder_norm.apply(&h);
                }
                self.head.apply(&h)
            })
    }

    /// [`EncoderDecoder::encode`] then [`EncoderDecoder::decode`].
    #[track_caller]
    pub fn logits(
        &self,
        source: &Tensor,
        source_mask: &Tensor,
        target_inputs: &Tensor,
        options: &AttendOptions,
    ) -> Tensor {
        source
            .graph()
            .called("nn::transformer::EncoderDecoder::logits", || {
                let memory = self.encode(source, source_mask, options);
                self.decode(&memory, source_mask, target_inputs, options)
            })
    }

    /// The mean cross-entropy over the scored target positions of `pairs`, under teacher
    /// forcing (see [`crate::loss::sequence_cross_entropy`]).
    pub fn loss(&self, pairs: &SequencePairs, options: &AttendOptions) -> Tensor {
        let logits = self.logits(
            &pairs.source,
            &pairs.source_mask,
            &pairs.target_inputs,
            options,
        );
        sequence_cross_entropy(&logits, &pairs.targets, &pairs.target_mask)
    }

    /// Every parameter of the model.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.source_embedding.params();
        params.extend(self.target_embedding.params());
        params.extend(self.source_positions.params());
        params.extend(self.target_positions.params());
        for block in &self.encoder {
            params.extend(block.params());
        }
        for block in &self.decoder {
            params.extend(block.params());
        }
        if let Some((encoder_norm, decoder_norm)) = &self.final_norms {
            params.extend(encoder_norm.params());
            params.extend(decoder_norm.params());
        }
        params.extend(self.head.params());
        params
    }
}

/// The embeddings (`batch | -> t, width`) of token ids laid out `batch | -> t`: the positions
/// move into the batch row for the lookup, which takes ids without output axes.
#[track_caller]
pub fn embed_sequence(embedding: &Embedding, ids: &Tensor) -> Tensor {
    ids.graph().called("nn::transformer::embed_sequence", || {
        let per_position = ids.einsum1("...|...->t => ..., t|...->");
        embedding
            .apply(&per_position)
            .einsum1("..., t|...->d => ...|...->t, d")
    })
}
