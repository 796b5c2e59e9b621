//! Blocks whose sizes come from use: a dense layer and a multi-layer perceptron.

use rcannl_tensor::{Graph, Tensor, op};

/// `w * x + b`: a layer of `width` outputs; its input size comes from `x`.
#[derive(Debug, Clone)]
pub struct Dense {
    /// The weights, labelled `<label>.w`: `input -> width`, the input axes from use.
    pub w: Tensor,
    /// The bias, labelled `<label>.b`: its rows from use (`-> width` when added to `w * x`).
    pub b: Tensor,
}

impl Dense {
    /// A layer of `width` outputs: the parameters `<label>.w` (output axis `width`, input axes from
    /// use, no batch axes) and `<label>.b` (rows from use), both starting from the graph's default
    /// [`Init`](rcannl_tensor::Init) (LeCun uniform unless changed), under which the bias, which
    /// has no input axes, starts at 0.
    pub fn new(graph: &Graph, label: &str, width: usize) -> Dense {
        Dense {
            w: graph.param(&format!("{label}.w")).output([width]).build(),
            b: graph.param(&format!("{label}.b")).build(),
        }
    }

    /// `w * x + b`: `x`'s output axes contracted with `w`'s input axes, `x`'s batch axes kept.
    pub fn apply(&self, x: &Tensor) -> Tensor {
        let (w, b) = (&self.w, &self.b);
        op! { w * x + b }
    }

    /// The weights and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.b.clone()]
    }
}

/// Dense layers of the given widths with `relu` between them (none after the last).
#[derive(Debug, Clone)]
pub struct Mlp {
    /// The layers, first applied first; layer `i` is labelled `<label>.<i>`.
    pub layers: Vec<Dense>,
}

impl Mlp {
    /// One [`Dense`] layer per entry of `widths`, in order, labelled `<label>.0`, `<label>.1`, …;
    /// each layer's input width comes from the one before it (the first's from use).
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

    /// Every layer's weights and bias, first layer first.
    pub fn params(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(Dense::params).collect()
    }
}
