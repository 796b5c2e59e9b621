//! Embeddings: a learned vector per token, looked up by one-hot comparison against the vocabulary.

use rcannl_tensor::{Graph, Tensor};

/// One-hot rows: for token ids `batch | -> ` (one id per example, no output axis), the result
/// `batch | -> vocabulary` is 1 at each id.
pub fn one_hot(ids: &Tensor, vocabulary: usize) -> Tensor {
    ids.eq(&ids.graph().range(vocabulary))
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
