//! `Tensor`: a handle to a tensor of a [`Graph`], with the operator sugar of the library
//! (`+`, `-`, `/` pointwise with broadcasting, `*` composition, unary `-`; a number on either
//! side is a constant).

use std::ops;

use crate::elementwise::BinaryOp;
use crate::graph::Graph;

/// A tensor of a graph: a cheap handle (cloning it clones a reference).
#[derive(Debug, Clone)]
pub struct Tensor {
    pub(crate) graph: Graph,
    pub(crate) index: usize,
}

impl PartialEq for Tensor {
    /// The same tensor of the same graph.
    fn eq(&self, other: &Tensor) -> bool {
        self.index == other.index && self.graph.owns(other)
    }
}

impl Tensor {
    /// The graph the tensor belongs to.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The tensor's label (a leaf's name, or the expression that computed it).
    pub fn label(&self) -> String {
        self.graph.state.lock().tensors[self.index].label.clone()
    }

    /// The precision of the tensor's cells.
    pub fn precision(&self) -> rcannl_ir::Precision {
        self.graph.state.lock().tensors[self.index].precision
    }

    /// Whether gradients flow into the tensor (it is a parameter or computed from one).
    pub fn is_differentiable(&self) -> bool {
        self.graph.state.lock().tensors[self.index].differentiable
    }

    /// The shape as known now: `batch|input->output`, with `$n` for sizes not known yet.
    pub fn shape(&self) -> String {
        let state = self.graph.state.lock();
        state
            .inference
            .shape(state.tensors[self.index].shape)
            .to_string()
    }

    /// The error that made this tensor fail, if one did.
    pub fn error(&self) -> Option<crate::graph::TensorError> {
        self.graph.state.lock().tensors[self.index].failed.clone()
    }

    /// A number combined with this tensor: held in f64 beside an f64 tensor (an ε, a scale, a
    /// mask's offset keeps every digit the tensor can use), in f32 otherwise.
    fn constant(&self, value: f64) -> Tensor {
        let precision = match self.precision() {
            rcannl_ir::Precision::F64 => rcannl_ir::Precision::F64,
            _ => rcannl_ir::Precision::F32,
        };
        self.graph.number_in(value, precision)
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $build:expr) => {
        impl ops::$trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, other: &Tensor) -> Tensor {
                $build(self, other)
            }
        }

        impl ops::$trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, other: Tensor) -> Tensor {
                $build(&self, &other)
            }
        }

        impl ops::$trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, other: &Tensor) -> Tensor {
                $build(&self, other)
            }
        }

        impl ops::$trait<Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, other: Tensor) -> Tensor {
                $build(self, &other)
            }
        }

        impl ops::$trait<f64> for &Tensor {
            type Output = Tensor;
            fn $method(self, other: f64) -> Tensor {
                $build(self, &self.constant(other))
            }
        }

        impl ops::$trait<f64> for Tensor {
            type Output = Tensor;
            fn $method(self, other: f64) -> Tensor {
                $build(&self, &self.constant(other))
            }
        }

        impl ops::$trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, other: &Tensor) -> Tensor {
                $build(&other.constant(self), other)
            }
        }

        impl ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, other: Tensor) -> Tensor {
                $build(&other.constant(self), &other)
            }
        }
    };
}

binary_operator!(Add, add, |a: &Tensor, b: &Tensor| a
    .binary(BinaryOp::Add, b));
binary_operator!(Sub, sub, |a: &Tensor, b: &Tensor| a
    .binary(BinaryOp::Sub, b));
binary_operator!(Div, div, |a: &Tensor, b: &Tensor| a
    .binary(BinaryOp::Div, b));
binary_operator!(Mul, mul, |a: &Tensor, b: &Tensor| {
    // A number times a tensor scales it; two tensors compose.
    if a.graph.is_scalar_constant(a) || a.graph.is_scalar_constant(b) {
        a.pmul(b)
    } else {
        a.compose(b)
    }
});

impl ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
