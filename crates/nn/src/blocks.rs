//! Blocks whose sizes come from use: a dense layer and a multi-layer perceptron.

use rcannl_tensor::{Graph, Tensor, op};

/// `w * x + b`: a layer of `width` outputs; its input size comes from `x`.
#[derive(Debug, Clone)]
pub struct Dense {
    pub w: Tensor,
    pub b: Tensor,
}

impl Dense {
    pub fn new(graph: &Graph, label: &str, width: usize) -> Dense {
        Dense {
            w: graph.param(&format!("{label}.w")).output([width]).build(),
            b: graph.param(&format!("{label}.b")).build(),
        }
    }

    pub fn apply(&self, x: &Tensor) -> Tensor {
        let (w, b) = (&self.w, &self.b);
        op! { w * x + b }
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.b.clone()]
    }
}

/// Dense layers of the given widths with `relu` between them (none after the last).
#[derive(Debug, Clone)]
pub struct Mlp {
    pub layers: Vec<Dense>,
}

impl Mlp {
    pub fn new(graph: &Graph, label: &str, widths: &[usize]) -> Mlp {
        Mlp {
            layers: widths
                .iter()
                .enumerate()
                .map(|(i, &width)| Dense::new(graph, &format!("{label}.{i}"), width))
                .collect(),
        }
    }

    /// The network applied to `x` (the parameters are shared by every application).
    pub fn apply(&self, x: &Tensor) -> Tensor {
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.apply(&h);
            if i + 1 < self.layers.len() {
                h = h.relu();
            }
        }
        h
    }

    pub fn params(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(Dense::params).collect()
    }
}
