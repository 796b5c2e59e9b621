//! The operation library: each operation is its shape logic, its forward computation and its
//! gradient, written over the forward operation's slots (`g` the result's gradient, `v` its
//! value, `operand(i)` the operands; a gradient accumulates into an operand through the forward
//! record with the slots exchanged, so broadcast axes are summed by the same emergent reduction).
//! The operations of one or two operands that compute cell by cell live in
//! [`crate::elementwise`]; here are the others: composition, selection, einsums, maxima, layout,
//! slices, static indices as values, and random draws.

use rcannl_ir::{Binop, Expr, Ternop, Unop};
use rcannl_shape::logic::Logic;
use rcannl_shape::spec::parse_einsum;

use crate::define::{Formula, accumulate_formula};
use crate::graph::{Forward, GradBuilder, GradRhs, Graph, OpSpec, StaticIndex, TensorError, error};
// The operations of `elementwise` name it through this module too.
pub(crate) use crate::graph::spec_logic;
use crate::tensor::Tensor;

use GradRhs::{Binop as B, Ternop as T, Unop as U};

fn pointwise_unary(t: &Tensor, op: Unop, spec: OpSpec) -> Tensor {
    t.graph.apply(op.name(), Logic::Pointwise(1), &[t], spec)
}

impl Tensor {
    /// The same values in `precision`, converted as a store into it converts (floats round to
    /// nearest, floats into integers truncate and saturate, integers into narrower ones wrap).
    /// Between floats the gradient flows back, converted to the operand's precision; a cast
    /// from or to an integer or a 128-bit word takes none.
    pub fn cast(&self, precision: rcannl_ir::Precision) -> Tensor {
        let spec = OpSpec::new(Binop::Arg2, Forward::Unop(Unop::Identity)).precision(precision);
        let spec = if self.precision().is_float() && precision.is_float() {
            spec.gradient(|grad| {
                let g = grad.g();
                grad.accumulate(0, Binop::Add, U(Unop::Identity, g));
                Ok(())
            })
        } else {
            spec.not_differentiable()
        };
        self.graph.apply("cast", Logic::Pointwise(1), &[self], spec)
    }

    /// `self(other(x))`: `self`'s input axes contract with `other`'s output axes (a matrix
    /// product for matrices, a matrix-vector product for a vector on the right).
    ///
    /// *All* of `other`'s output axes contract, not only its last: for a sequence `x`
    /// (`batch | -> t, d`) and weights `w` whose input axes come from use, `w * x` infers `w`'s
    /// input axes as `t, d` and sums over the positions and the features together — a layer over
    /// the whole sequence (OCANNL's semantics, what a flattening dense layer wants). A layer
    /// applied at every position, over the last axis only (PyTorch's `nn.Linear`), is the einsum
    /// `x.einsum("...|...->..., d; d -> f => ...|...->..., f", &w)`, or `rcannl_nn`'s
    /// `blocks::Linear`. Batch axes never contract.
    ///
    /// A table composed with one-hot rows [`Tensor::one_hot`] made is computed as a
    /// [`Tensor::gather`] of its rows by their ids.
    pub fn compose(&self, other: &Tensor) -> Tensor {
        if let Some(gathered) = crate::gather::composed_with_one_hot(self, other) {
            return gathered;
        }
        self.graph.apply(
            "*",
            Logic::Compose,
            &[self, other],
            OpSpec::new(Binop::Add, Forward::Binop(Binop::Mul)).gradient(product_gradient),
        )
    }

    /// `then` where `condition` is nonzero, else `otherwise` (pointwise, broadcasting); the
    /// condition takes no gradient.
    pub fn where_(condition: &Tensor, then: &Tensor, otherwise: &Tensor) -> Tensor {
        select(condition, then, otherwise, Logic::Pointwise(3))
    }

    /// `where` following `spec`, a spec of three operands (`"i;i;i=>i"`, `"p;ij;ij=>i"`): at
    /// every assignment of the spec's labels, the `then` cell where the condition's cell is
    /// nonzero, else the `otherwise` cell, added into the result's cell (so summed over the
    /// labels the result leaves out: the choice comes before the sum, so a branch without such
    /// a label counts once per position of it where the branch is chosen).
    pub fn where_spec(spec: &str, condition: &Tensor, then: &Tensor, otherwise: &Tensor) -> Tensor {
        match spec_logic("where", spec) {
            Ok(logic) => select(condition, then, otherwise, logic),
            Err(e) => condition.graph.failed(e),
        }
    }

    /// `a·b + c`, pointwise with broadcasting.
    pub fn fma(a: &Tensor, b: &Tensor, c: &Tensor) -> Tensor {
        fused_multiply_add(a, b, c, Logic::Pointwise(3))
    }

    /// `fma` following `spec`, a spec of three operands (`"i;i;i=>i"`, `"ij;jk;ik=>ik"`): at
    /// every assignment of the spec's labels, `a·b + c` of the operands' cells there, added into
    /// the result's cell (so summed over the labels the result leaves out, `c` included).
    pub fn fma_spec(spec: &str, a: &Tensor, b: &Tensor, c: &Tensor) -> Tensor {
        match spec_logic("fma", spec) {
            Ok(logic) => fused_multiply_add(a, b, c, logic),
            Err(e) => a.graph.failed(e),
        }
    }

    /// A unary einsum (`++`): the spec's result, summing over labels it leaves out
    /// (`"ij=>ji"` transposes, `"ij=>i"` sums rows, `"ii=>i"` takes the diagonal).
    pub fn einsum1(&self, spec: &str) -> Tensor {
        self.einsum1_named("einsum", spec)
    }

    /// [`Tensor::einsum1`] as the operation `name` (what its result's label and its errors say).
    pub(crate) fn einsum1_named(&self, name: &str, spec: &str) -> Tensor {
        spec_op(
            name,
            spec,
            &[self],
            Binop::Add,
            Forward::Unop(Unop::Identity),
            |grad| {
                let g = grad.g();
                grad.accumulate(0, Binop::Add, U(Unop::Identity, g));
                Ok(())
            },
        )
    }

    /// A binary einsum (`+*`): products summed over the labels the result leaves out.
    pub fn einsum(&self, spec: &str, other: &Tensor) -> Tensor {
        spec_op(
            "einsum",
            spec,
            &[self, other],
            Binop::Add,
            Forward::Binop(Binop::Mul),
            product_gradient,
        )
    }

    /// A ternary einsum: products of three, summed over the labels the result leaves out.
    pub fn einsum3(&self, spec: &str, b: &Tensor, c: &Tensor) -> Tensor {
        spec_op(
            "einsum",
            spec,
            &[self, b, c],
            Binop::Add,
            Forward::Ternop(Ternop::Mul3),
            |grad| {
                let (g, a, b, c) = (grad.g(), grad.operand(0), grad.operand(1), grad.operand(2));
                grad.accumulate(0, Binop::Add, T(Ternop::Mul3, g, b, c));
                grad.accumulate(1, Binop::Add, T(Ternop::Mul3, a, g, c));
                grad.accumulate(2, Binop::Add, T(Ternop::Mul3, a, b, g));
                Ok(())
            },
        )
    }

    /// Sums of pairs (`a + b` at every combination of the spec's labels), added up over the
    /// labels the result leaves out (`"ab;bc=>ac"` is `Σ_b a[a,b] + b[b,c]`).
    pub fn outer_sum(&self, spec: &str, other: &Tensor) -> Tensor {
        spec_op(
            "einsum",
            spec,
            &[self, other],
            Binop::Add,
            Forward::Binop(Binop::Add),
            |grad| {
                let g = grad.g();
                grad.accumulate(0, Binop::Add, U(Unop::Identity, g));
                grad.accumulate(1, Binop::Add, U(Unop::Identity, g));
                Ok(())
            },
        )
    }
}

/// The kind of axis [`Tensor::stack_along`] stacks along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StackAxis {
    /// Output axes.
    Output,
    /// Input axes.
    Input,
    /// Batch axes.
    Batch,
}

impl Tensor {
    /// Concatenation (`++^`): the spec's result assembled from the operands' stretches
    /// (`"a; b => a^b"` end to end along the first output axis), each added up over the labels
    /// the result leaves out (`"a, c; b => a^b"` puts the row sums of the first operand before
    /// the second); the gradient scatters back.
    pub fn concat(spec: &str, operands: &[&Tensor]) -> Tensor {
        let Some(first) = operands.first() else {
            return Graph::new().failed(error("concat: no operands"));
        };
        let graph = &first.graph;
        let parsed = match parse_einsum(spec) {
            Ok(parsed) => parsed,
            Err(e) => return graph.failed(error(format!("concat {spec:?}: {e}"))),
        };
        graph.apply(
            "concat",
            Logic::Block(parsed),
            operands,
            OpSpec::new(Binop::Add, Forward::Block(Unop::Identity)).gradient(|grad| {
                grad.scatter();
                Ok(())
            }),
        )
    }

    /// The tensor at position `at` of its first batch axis (`@|`), chosen when a routine runs.
    /// A static index with a range ([`Graph::static_index_with_range`]) gives that axis its size.
    pub fn slice(&self, at: &StaticIndex) -> Tensor {
        if at.graph != self.graph.id() {
            return self.graph.failed(crate::graph::error(format!(
                "slice of '{}': the static index belongs to another graph",
                self.label()
            )));
        }
        self.graph.apply(
            "slice",
            Logic::BatchSlice {
                static_range: at.range,
            },
            &[self],
            OpSpec::new(Binop::Arg2, Forward::Unop(Unop::Identity))
                .slice(at.symbol)
                .gradient(|grad| {
                    let g = grad.g();
                    grad.accumulate(0, Binop::Add, U(Unop::Identity, g));
                    Ok(())
                }),
        )
    }

    /// `a` and `b` interleaved along their last output axis: `a` at even positions, `b` at odd
    /// ones (the result's axis is twice as long).
    pub fn interleave(a: &Tensor, b: &Tensor) -> Tensor {
        let graph = &a.graph;
        let even = match parse_einsum("...|...->..., i => ...|...->..., 2*i") {
            Ok(spec) => spec,
            Err(e) => return graph.failed(error(format!("interleave: {e}"))),
        };
        let odd = match parse_einsum("...|...->..., i => ...|...->..., 2*i + 1") {
            Ok(spec) => spec,
            Err(e) => return graph.failed(error(format!("interleave: {e}"))),
        };
        let pass_back = |grad: &mut GradBuilder<'_>| {
            let g = grad.g();
            grad.accumulate(0, Binop::Add, U(Unop::Identity, g));
            Ok(())
        };
        let t = graph.apply(
            "interleave",
            Logic::Spec(even),
            &[a],
            OpSpec::new(Binop::Add, Forward::Unop(Unop::Identity)).gradient(pass_back),
        );
        graph.also(
            &t,
            Logic::Spec(odd),
            &[b],
            OpSpec::new(Binop::Add, Forward::Unop(Unop::Identity)).gradient(pass_back),
        );
        t
    }

    /// The even positions (`odd == false`) or the odd ones of the last output axis.
    pub fn deinterleave(&self, odd: bool) -> Tensor {
        let spec = if odd {
            "...|...->..., 2*i + 1 => ...|...->..., i"
        } else {
            "...|...->..., 2*i => ...|...->..., i"
        };
        self.einsum1(spec)
    }

    /// The tensors stacked along a new leading output axis (one position per tensor).
    pub fn stack(tensors: &[&Tensor]) -> Tensor {
        Tensor::stack_along(StackAxis::Output, tensors)
    }

    /// The tensors stacked along a new leading axis of kind `axis` (one position per tensor,
    /// in order): each gets a leading axis of one position, and those are concatenated.
    pub fn stack_along(axis: StackAxis, tensors: &[&Tensor]) -> Tensor {
        let names: Vec<String> = (0..tensors.len()).map(|i| format!("s{i}")).collect();
        // The slot of a tensor with `lead` as its new leading axis of that kind.
        let with_leading = |lead: &str| match axis {
            StackAxis::Output => format!("...|...->{lead}, ..."),
            StackAxis::Input => format!("...|{lead}, ...->..."),
            StackAxis::Batch => format!("{lead}, ...|...->..."),
        };
        let unsqueeze = format!("...|...->... => {}", with_leading("0"));
        let lifted: Vec<Tensor> = tensors.iter().map(|t| t.einsum1(&unsqueeze)).collect();
        let operands: Vec<String> = names.iter().map(|n| with_leading(n)).collect();
        let spec = format!(
            "{} => {}",
            operands.join("; "),
            with_leading(&names.join("^"))
        );
        let refs: Vec<&Tensor> = lifted.iter().collect();
        Tensor::concat(&spec, &refs)
    }

    /// The max-plus (tropical) product: the largest `a + b` over the labels the result leaves
    /// out (`"ij;jk=>ik"`). The gradient flows to the pairs that attain the maximum.
    pub fn tropical(&self, spec: &str, other: &Tensor) -> Tensor {
        spec_op(
            "einsum",
            spec,
            &[self, other],
            Binop::Max,
            Forward::Binop(Binop::Add),
            |grad| {
                // where(a + b == v, g, 0), over the forward product space.
                let mask = where_equal(Expr::Binop(
                    Binop::Add,
                    Box::new(Expr::Operand(1)),
                    Box::new(Expr::Operand(2)),
                ));
                let args = vec![grad.g(), grad.operand(0), grad.operand(1), grad.v()];
                grad.accumulate(0, Binop::Add, GradRhs::Expr(mask.clone(), args.clone()));
                grad.accumulate(1, Binop::Add, GradRhs::Expr(mask, args));
                Ok(())
            },
        )
    }

    /// The largest value over the labels the result leaves out (`"ij=>i"` row maxima; with a
    /// window axis, `"o<+k=>o"` or `"2*o<+k=>o"`, max-pooling). The gradient flows to the
    /// positions that attain the maximum.
    pub fn einmax1(&self, spec: &str) -> Tensor {
        self.einmax1_named("einsum", spec)
    }

    /// [`Tensor::einmax1`] as the operation `name` (what its result's label and its errors say).
    pub(crate) fn einmax1_named(&self, name: &str, spec: &str) -> Tensor {
        spec_op(
            name,
            spec,
            &[self],
            Binop::Max,
            Forward::Unop(Unop::Identity),
            |grad| {
                let args = vec![grad.g(), grad.operand(0), grad.v()];
                grad.accumulate(
                    0,
                    Binop::Add,
                    GradRhs::Expr(where_equal(Expr::Operand(1)), args),
                );
                Ok(())
            },
        )
    }

    /// Random 128-bit words fanned out into values of `precision`: uniform in [0, 1) for floats,
    /// over the whole range for integers, as many per word as its bits make (4 for f32). The
    /// words are one axis; the result has that many times their cells, in whatever shape its
    /// uses give it.
    pub fn to_uniform(&self, precision: rcannl_ir::Precision) -> Tensor {
        let coefficient = rcannl_ir::VecUnop::Uint4x32ToPrecUniform.length(precision);
        self.graph.apply(
            "uniform",
            Logic::Uint4x32ToPrec { coefficient },
            &[self],
            OpSpec::new(
                Binop::Arg2,
                Forward::SetVec(rcannl_ir::VecUnop::Uint4x32ToPrecUniform),
            )
            .precision(precision)
            .not_differentiable(),
        )
    }

    /// 128 random bits per cell from a key (`self`) and a counter (pointwise, 128-bit words):
    /// Threefry-4×32 with 20 rounds.
    pub fn threefry(&self, counter: &Tensor) -> Tensor {
        random_bits(self, counter, Binop::Threefry4x32)
    }

    /// The same with 2 rounds: cheaper, weaker bits.
    pub fn threefry_light(&self, counter: &Tensor) -> Tensor {
        random_bits(self, counter, Binop::Threefry4x32Light)
    }
}

impl Graph {
    /// The value the static index `index` holds when a routine runs, as a tensor of one cell
    /// that broadcasts wherever it is used (OCANNL's `embed_symbol`, `!@index` in
    /// [`op!`](crate::op)), so that a routine computes with the position it runs at: a rate
    /// that falls with the step, a mask that depends on the batch.
    ///
    /// An index without a range ([`Graph::static_index`]) is embedded directly: the tensor
    /// labelled `label` holds the index's value, read when the routine runs. Such a value is a
    /// position from 0 below 2³¹ (a run with another is an error naming the tensor), or one
    /// within the range of a slice the routine also selects with that index.
    ///
    /// An index with a range ([`Graph::static_index_with_range`]) is the positions `0..range`, a
    /// data tensor labelled `label`, sliced at `index`: a run checks the index's value against
    /// that range as it checks any slice's, and its errors name `label`.
    ///
    /// An index of another graph is an error naming `label`.
    pub fn embed_static(&self, label: &str, index: &StaticIndex) -> Tensor {
        if index.graph != self.id() {
            return self.failed(error(format!(
                "embed_static '{label}': the static index belongs to another graph"
            )));
        }
        match index.range {
            Some(range) => self
                .data(label)
                .shape(&format!("{range}|->1*"))
                .values((0..range).map(|position| position as f64).collect())
                .build()
                .slice(index),
            None => self.static_leaf(label, index.symbol),
        }
    }
}

fn random_bits(key: &Tensor, counter: &Tensor, op: Binop) -> Tensor {
    key.graph.apply(
        op.name(),
        Logic::Pointwise(2),
        &[key, counter],
        OpSpec::new(Binop::Arg2, Forward::Binop(op))
            .precision(rcannl_ir::Precision::Uint4x32)
            .not_differentiable(),
    )
}

/// `v =:+ where(v1, v2, v3)` under `logic`; the gradient goes to the branch chosen.
fn select(condition: &Tensor, then: &Tensor, otherwise: &Tensor, logic: Logic) -> Tensor {
    let spec = OpSpec::new(Binop::Add, Forward::Ternop(Ternop::Where)).gradient(|grad| {
        let (c, g) = (Formula::input(0), Formula::result_grad());
        let zero = || Formula::Const(0.0);
        accumulate_formula(grad, 1, 3, &c.clone().select(g.clone(), zero()))?;
        accumulate_formula(grad, 2, 3, &c.select(zero(), g))
    });
    condition
        .graph
        .apply("where", logic, &[condition, then, otherwise], spec)
}

/// `v =:+ fma(v1, v2, v3)` under `logic`.
fn fused_multiply_add(a: &Tensor, b: &Tensor, c: &Tensor, logic: Logic) -> Tensor {
    let spec = OpSpec::new(Binop::Add, Forward::Ternop(Ternop::Fma)).gradient(|grad| {
        let (g, a, b) = (grad.g(), grad.operand(0), grad.operand(1));
        grad.accumulate(0, Binop::Add, B(Binop::Mul, g, b));
        grad.accumulate(1, Binop::Add, B(Binop::Mul, a, g));
        grad.accumulate(2, Binop::Add, U(Unop::Identity, g));
        Ok(())
    });
    a.graph.apply("fma", logic, &[a, b, c], spec)
}

/// `where(candidate == v, g, 0)`, with `g` operand 0 and `v` the last operand (operand 3 of a
/// binary operation's four, operand 2 of a unary one's three).
fn where_equal(candidate: Expr) -> Expr {
    let v = match &candidate {
        Expr::Operand(_) => 2,
        _ => 3,
    };
    Expr::Ternop(
        Ternop::Where,
        Box::new(Expr::Binop(
            Binop::Eq,
            Box::new(candidate),
            Box::new(Expr::Operand(v)),
        )),
        Box::new(Expr::Operand(0)),
        Box::new(Expr::Const(0.0)),
    )
}

/// The gradient of a product (pointwise, composed, or an einsum): each factor's gradient is the
/// result's gradient times the other factor, summed over whatever the factor does not have.
fn product_gradient(grad: &mut GradBuilder<'_>) -> Result<(), TensorError> {
    let (g, a, b) = (grad.g(), grad.operand(0), grad.operand(1));
    grad.accumulate(0, Binop::Add, B(Binop::Mul, g, b));
    grad.accumulate(1, Binop::Add, B(Binop::Mul, a, g));
    Ok(())
}

/// An operation whose shapes follow an einsum spec.
fn spec_op(
    name: &str,
    spec: &str,
    operands: &[&Tensor],
    accum: Binop,
    rhs: Forward,
    gradient: impl FnOnce(&mut GradBuilder<'_>) -> Result<(), TensorError> + 'static,
) -> Tensor {
    let graph = &operands[0].graph;
    match spec_logic(name, spec) {
        Ok(logic) => graph.apply(
            name,
            logic,
            operands,
            OpSpec::new(accum, rhs).gradient(gradient),
        ),
        Err(e) => graph.failed(e),
    }
}

impl Graph {
    /// Uniform values in [0, 1), keyed by the context's seed and this tensor's id and counted by
    /// cell, in the shape its uses give it: one 128-bit draw per cell. The same seed gives the
    /// same values on every run and backend. They are drawn in the float precision their users
    /// compute in (the widest; the default precision where none computes in a float), as
    /// OCANNL's `uniform1` is: 53 random bits in f64, 24 in f32, 11 in f16, 8 in bf16, and no
    /// f32 draw promotes a bf16 model's arithmetic to f32.
    pub fn uniform(&self, label: &str) -> Tensor {
        self.uniform_keyed(label, None)
    }

    /// [`Graph::uniform`] drawn afresh for each value of `step` (a u32 tensor of one cell, such
    /// as a training step counter): the key also depends on it.
    pub fn uniform_at(&self, label: &str, step: &Tensor) -> Tensor {
        self.uniform_keyed(label, Some(step))
    }

    fn uniform_keyed(&self, label: &str, step: Option<&Tensor>) -> Tensor {
        let mut key = self.seed().threefry(&self.embed_self_id(label));
        if let Some(step) = step {
            key = key.threefry(step);
        }
        let counters = self
            .range_of_shape(&format!("{label} counters"))
            .precision(rcannl_ir::Precision::U32)
            .build();
        let bits = key.threefry(&counters);
        let u = pointwise_unary(
            &bits,
            Unop::Uint4x32ToPrecUniform1,
            OpSpec::new(Binop::Arg2, Forward::Unop(Unop::Uint4x32ToPrecUniform1))
                .precision_of_users()
                .not_differentiable(),
        );
        self.same_shape(&u, &counters);
        u
    }

    /// Standard normal values by Box–Muller from two uniform draws, in the shape its uses give
    /// it, computed in the graph's default precision (the precision of its numbers).
    pub fn normal(&self, label: &str) -> Tensor {
        let u1 = self.uniform(&format!("{label} u1"));
        let u2 = self.uniform(&format!("{label} u2"));
        // √(−2 ln(1 − u₁)) · cos(2π u₂): 1 − u₁ lies in (0, 1].
        let radius = (-2.0 * (1.0 - &u1).log()).sqrt();
        let angle = (std::f64::consts::TAU * &u2).cos();
        let z = radius.pmul(&angle);
        self.same_shape(&u1, &u2);
        self.same_shape(&u1, &z);
        z
    }

    /// Constrains `a` and `b` to have the same shape (each broadcasts into the other); a
    /// clash is recorded in the graph, reported by [`Graph::check`].
    pub fn same_shape(&self, a: &Tensor, b: &Tensor) {
        if let Err(e) = self.require_same_shape(a, b) {
            self.record(e);
        }
    }

    /// [`Graph::same_shape`], returning the clash (found with the shapes known so far) instead
    /// of recording it, for the caller to word in its own terms.
    pub fn require_same_shape(&self, a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
        self.check_owns("same_shape", &[a, b])?;
        let mut state = self.state.lock();
        let (sa, sb) = (state.tensors[a.index].shape, state.tensors[b.index].shape);
        for (x, y) in [(sa, sb), (sb, sa)] {
            if let Err(e) = state.inference.relate(Logic::Pointwise(1), x, &[y]) {
                return Err(state.locate(e.into()));
            }
        }
        Ok(())
    }
}

impl Tensor {
    /// Uniform values in [0, 1) of this tensor's shape (see [`Graph::uniform`]).
    pub fn uniform_like(&self) -> Tensor {
        let u = self
            .graph
            .uniform(&format!("uniform like {}", self.label()));
        self.graph.same_shape(&u, self);
        u
    }

    /// `value` in every cell, of this tensor's shape and precision: a mask or a count's ones
    /// whose sizes come from the tensor, whatever it holds.
    pub fn full_like(&self, value: f64) -> Tensor {
        let filled = self.graph.leaf(
            &format!("{value} like {}", self.label()),
            rcannl_shape::LeafDecl::data(),
            crate::graph::LeafKind::Constant(value),
            self.precision(),
            false,
        );
        self.graph.same_shape(&filled, self);
        filled
    }

    /// Standard normal values of this tensor's shape (see [`Graph::normal`]).
    pub fn normal_like(&self) -> Tensor {
        let z = self.graph.normal(&format!("normal like {}", self.label()));
        self.graph.same_shape(&z, self);
        z
    }
}

impl Graph {
    /// A tensor standing for an error (found while building a block, say): it fails everything
    /// built on it, and compiling reports the error.
    pub fn failed_with(&self, e: TensorError) -> Tensor {
        self.failed(e)
    }

    /// A tensor standing for an error found before any operation could be built.
    pub(crate) fn failed(&self, e: TensorError) -> Tensor {
        let e = self.state.lock().locate(e);
        self.record(e.clone());
        let t = self.leaf(
            "failed",
            rcannl_shape::LeafDecl::data(),
            crate::graph::LeafKind::Constant(0.0),
            rcannl_ir::Precision::F32,
            false,
        );
        self.state.lock().tensors[t.index].failed = Some(e);
        t
    }
}
