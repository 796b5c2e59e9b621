//! Embeddings: a learned vector per token, looked up by gathering the table's rows at the ids
//! (a cost that does not grow with the vocabulary).

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Tensor};

/// One-hot rows: for token ids of any shape (`batch | -> positions…`), the result has one more
/// output axis of `vocabulary` positions, 1 at each id (and all 0 for an id outside it, such as
/// −1 for a position to ignore). A table composed with them (`&table * &one_hot(…)`) is computed
/// as a gather of the table's rows (see [`Tensor::one_hot`]).
#[track_caller]
pub fn one_hot(ids: &Tensor, vocabulary: usize) -> Tensor {
    ids.graph().called("nn::embedding::one_hot", || {
        Tensor::one_hot(ids, vocabulary)
    })
}

/// `vocabulary` learned vectors of `width` values.
#[derive(Debug, Clone)]
pub struct Embedding {
    /// The table, labelled `<label>.table`: `| vocabulary -> width`, token `i`'s vector at input
    /// position `i`.
    pub table: Tensor,
    /// The number of tokens: ids are `0..vocabulary`.
    pub vocabulary: usize,
}

impl Embedding {
    /// The table `| vocabulary -> width`, a parameter labelled `<label>.table` of the precision
    /// inferred from use.
    pub fn new(graph: &Graph, label: &str, vocabulary: usize, width: usize) -> Embedding {
        Embedding::with_precision(graph, label, vocabulary, width, None)
    }

    /// The same with a table of `precision` (the vectors come out in it).
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        vocabulary: usize,
        width: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Embedding {
        let precision = precision.into();
        Embedding {
            table: graph
                .param(&format!("{label}.table"))
                .precision(precision)
                .input([vocabulary])
                .output([width])
                .build(),
            vocabulary,
        }
    }

    /// The vectors of `ids` (`batch | -> positions…`): `batch | -> positions…, width`, in the
    /// table's precision; a row of zeros for an id outside the vocabulary (−1 for padding).
    #[track_caller]
    pub fn apply(&self, ids: &Tensor) -> Tensor {
        ids.graph().called("nn::embedding::Embedding::apply", || {
            Tensor::gather(&self.table, ids)
        })
    }

    /// The table.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.table.clone()]
    }
}
