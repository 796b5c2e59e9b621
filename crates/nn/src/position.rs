//! Positional encodings added to sequences laid out `batch | -> time, model`: the fixed sinusoids
//! of "Attention is all you need" and a learned vector per position.

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Init, Tensor};

/// The fixed encoding: at position `p`, value `2i` is `sin(p / 10000^(2i/model))` and value
/// `2i + 1` is `cos(p / 10000^(2i/model))`.
#[derive(Debug, Clone)]
pub struct Sinusoidal {
    /// `time, model`, data (it takes no gradient).
    pub table: Tensor,
}

impl Sinusoidal {
    /// The table of `time` positions of `model` values, in the precision of what it is added to.
    pub fn new(graph: &Graph, time: usize, model: usize) -> Sinusoidal {
        Sinusoidal::with_precision(graph, time, model, None)
    }

    /// The table of `time` positions of `model` values in `precision` (that of the model it is
    /// added to: an f64 model's positions keep every digit).
    pub fn with_precision(
        graph: &Graph,
        time: usize,
        model: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Sinusoidal {
        let precision = precision.into();
        let value = |p: usize, e: usize| {
            let pair = (e / 2 * 2) as f64;
            let angle = p as f64 / 10_000f64.powf(pair / model as f64);
            if e.is_multiple_of(2) {
                angle.sin()
            } else {
                angle.cos()
            }
        };
        Sinusoidal {
            table: graph
                .data("sinusoidal positions")
                .shape(&format!("{time},{model}"))
                .precision(precision)
                .values(
                    (0..time)
                        .flat_map(|p| (0..model).map(move |e| value(p, e)))
                        .collect(),
                )
                .build(),
        }
    }

    /// `x` (`batch | -> time, model`) plus the table.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph()
            .called("nn::position::Sinusoidal::apply", || x + &self.table)
    }
}

/// A learned vector per position, starting small and random (normal, deviation 0.02), so that
/// positions differ from the first step.
#[derive(Debug, Clone)]
pub struct LearnedPositions {
    /// `time, model`, a parameter.
    pub table: Tensor,
}

impl LearnedPositions {
    /// The table of `label`: `time` positions of `model` values, of the precision inferred from
    /// use.
    pub fn new(graph: &Graph, label: &str, time: usize, model: usize) -> LearnedPositions {
        LearnedPositions::with_precision(graph, label, time, model, None)
    }

    /// The same with a table of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        time: usize,
        model: usize,
        precision: impl Into<Option<Precision>>,
    ) -> LearnedPositions {
        let precision = precision.into();
        LearnedPositions {
            table: graph
                .param(&format!("{label}.table"))
                .precision(precision)
                .output([time, model])
                .init(Init::Normal(0.0, 0.02))
                .build(),
        }
    }

    /// `x` (`batch | -> time, model`) plus the table.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph()
            .called("nn::position::LearnedPositions::apply", || x + &self.table)
    }

    /// The table.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.table.clone()]
    }
}

/// Which positional encoding a model adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionKind {
    /// Fixed sinusoids ([`Sinusoidal`]).
    Sinusoidal,
    /// A learned table ([`LearnedPositions`]).
    Learned,
}

/// A positional encoding of either kind.
#[derive(Debug, Clone)]
pub enum Positions {
    /// Fixed sinusoids.
    Sinusoidal(Sinusoidal),
    /// A learned table.
    Learned(LearnedPositions),
}

impl Positions {
    /// An encoding of `kind` for `time` positions of `model` values, of the precision inferred from use (`label` names a
    /// learned table).
    pub fn new(
        graph: &Graph,
        label: &str,
        kind: PositionKind,
        time: usize,
        model: usize,
    ) -> Positions {
        Positions::with_precision(graph, label, kind, time, model, None)
    }

    /// [`Positions::new`] with a table (fixed or learned) of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        kind: PositionKind,
        time: usize,
        model: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Positions {
        let precision = precision.into();
        match kind {
            PositionKind::Sinusoidal => {
                Positions::Sinusoidal(Sinusoidal::with_precision(graph, time, model, precision))
            }
            PositionKind::Learned => Positions::Learned(LearnedPositions::with_precision(
                graph, label, time, model, precision,
            )),
        }
    }

    /// `x` (`batch | -> time, model`) plus the encoding.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph()
            .called("nn::position::Positions::apply", || match self {
                Positions::Sinusoidal(s) => s.apply(x),
                Positions::Learned(l) => l.apply(x),
            })
    }

    /// The learned table, if any.
    pub fn params(&self) -> Vec<Tensor> {
        match self {
            Positions::Sinusoidal(_) => Vec::new(),
            Positions::Learned(l) => l.params(),
        }
    }
}
