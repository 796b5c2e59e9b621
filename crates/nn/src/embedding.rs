//! Embeddings: a learned vector per token, looked up by one-hot comparison against the vocabulary.

use rcannl_tensor::{Graph, Tensor};

/// One-hot rows: for token ids of any shape (`batch | -> positions…`), the result has one more
/// output axis of `vocabulary` positions, 1 at each id (and all 0 for an id outside it, such as
/// −1 for a position to ignore).
pub fn one_hot(ids: &Tensor, vocabulary: usize) -> Tensor {
    let graph = ids.graph();
    // id − v for every v: zero exactly at the id.
    let difference = ids.outer_sum(
        "...|...->...; v => ...|...->..., v",
        &(-&graph.range(vocabulary)),
    );
    difference.eq(&graph.number(0.0))
}

/// `vocabulary` learned vectors of `width` values.
#[derive(Debug, Clone)]
pub struct Embedding {
    pub table: Tensor,
    pub vocabulary: usize,
}

impl Embedding {
    pub fn new(graph: &Graph, label: &str, vocabulary: usize, width: usize) -> Embedding {
        Embedding {
            table: graph
                .param(&format!("{label}.table"))
                .input([vocabulary])
                .output([width])
                .build(),
            vocabulary,
        }
    }

    /// The vectors of `ids` (`batch | -> `): `batch | -> width`.
    pub fn apply(&self, ids: &Tensor) -> Tensor {
        &self.table * &one_hot(ids, self.vocabulary)
    }
}
