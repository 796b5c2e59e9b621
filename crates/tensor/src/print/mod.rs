//! Seeing what the compiler did: a tensor's values laid out by the kinds of their axes, the tree
//! of the operations computing a tensor, and assignments in `cd!` notation.
//!
//! - [`Context::print`](crate::Context::print): a tensor's values (and gradient) as tables,
//!   columns and rows and blocks chosen by axis kind (`layout`), and optionally the assignments
//!   computing it and its operands' gradients.
//! - [`Context::print_tree`](crate::Context::print_tree): the tensor's graph as a tree (`tree`),
//!   each node its label, shape, the assignment computing it and optionally its values and
//!   gradient, down to a depth, shared operands drawn once.
//! - [`Routine::code`](crate::Routine::code): the assignments a routine was compiled from, in
//!   `cd!` notation (`code`), before optimization; [`Routine::describe`](crate::Routine::describe)
//!   prints the loops they became.
//! - [`Array::to_grid`](crate::Array::to_grid): an array's values as a layout print, axes
//!   named by kind and place.
//!
//! Each returns the text, for `print!` or a test to compare.

mod code;
mod grid;
mod layout;
mod tree;

pub(crate) use code::{Notation, cd_logic};
pub use layout::Layout;
pub(crate) use layout::{axis_names, render};
pub(crate) use tree::{Node, draw as draw_tree};

/// What [`Context::print`](crate::Context::print) prints besides the tensor's values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// The gradient too (of a tensor whose gradient a backprop routine keeps, after it ran).
    pub grad: bool,
    /// The assignments computing the tensor (`forward:`) and accumulating its operands'
    /// gradients (`backprop:`), in `cd!` notation.
    pub code: bool,
    /// How the values are laid out.
    pub layout: Layout,
}

/// What [`Context::print_tree`](crate::Context::print_tree) shows of each node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeOptions {
    /// The levels drawn below the root (default 2): 0 draws the root alone.
    pub depth: usize,
    /// Each node's values, where it holds any (a computed tensor holds values after a routine
    /// that keeps it ran).
    pub values: bool,
    /// Each node's gradient, where a backprop routine that ran keeps it.
    pub grad: bool,
    /// How values and gradients are laid out.
    pub layout: Layout,
}

impl Default for TreeOptions {
    fn default() -> TreeOptions {
        TreeOptions {
            depth: 2,
            values: false,
            grad: false,
            layout: Layout::default(),
        }
    }
}
