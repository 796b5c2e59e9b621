//! The operator sugar of tensors: `+`, `-`, `/` pointwise with broadcasting, `*` composition
//! (a scaling where one side is a number), unary `-`; a number on either side is a constant of
//! the tensor's graph.
//!
//! `w * x` is [`Tensor::compose`]: it contracts *every* output axis of `x` with `w`'s input
//! axes, so on a sequence `batch | -> t, d` it mixes the positions too; a per-position layer
//! over the last axis is an einsum (`"...|...->..., d; d -> f => ...|...->..., f"`) or
//! `rcannl_nn`'s `blocks::Linear`. Pointwise products are [`Tensor::pmul`].

use std::ops;

use crate::elementwise::BinaryOp;
use crate::tensor::Tensor;

impl Tensor {
    /// A number combined with this tensor: held in f64 beside an f64 tensor (an ε, a scale, a
    /// mask's offset keeps every digit the tensor can use), in the graph's default precision
    /// otherwise.
    fn constant(&self, value: f64) -> Tensor {
        match self.precision() {
            rcannl_ir::Precision::F64 => self.graph.number_in(value, rcannl_ir::Precision::F64),
            _ => self.graph.number(value),
        }
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
