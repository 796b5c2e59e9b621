//! Property test: constraint order does not change the shapes (DESIGN invariant 9).
//!
//! Random well-formed operation graphs are built through the one constraint generator; their
//! constraints are added in a random permutation, in any number of `add` calls, and closed with
//! the same leaves. Every tensor must get the same shape as with the constraints added in
//! generation order, or both runs must fail. A successful close leaves no variable in any shape,
//! and a companion test checks that most generated graphs solve, so that the property is not
//! vacuously about failures.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use rcannl_shape::ShapeError;
use rcannl_shape::constraint::Constraint;
use rcannl_shape::logic::{Logic, TerminalInit, generate, terminal_constraints};
use rcannl_shape::solver::{Leaf, Solver};
use rcannl_shape::spec::{Kind, parse_einsum};
use rcannl_shape::term::{Basis, Dim, Row, Shape, VarSupply};

use crate::common::{config, pool_dim};

// ---------------------------------------------------------------------------------------------
// Well-formed operation graphs
// ---------------------------------------------------------------------------------------------

/// The concrete rows (batch, input, output) a tensor is meant to have. Operations are emitted only
/// where these agree, which keeps most graphs solvable; the solver never sees them, and where its
/// closing policy legitimately picks something else (a join, a `1*`) nothing is asserted about it.
type Truth = [Vec<Dim>; 3];

const BATCH: usize = 0;
const INPUT: usize = 1;
const OUTPUT: usize = 2;

/// Small choices read out of one generated number (mixed radix), so that shrinking the number
/// towards 0 moves every choice towards its first option.
struct Choices(u32);

impl Choices {
    fn pick(&mut self, n: u32) -> u32 {
        let choice = self.0 % n;
        self.0 /= n;
        choice
    }

    fn dims(&mut self, max_len: u32) -> Vec<Dim> {
        let len = self.pick(max_len + 1);
        (0..len).map(|_| pool_dim(self.pick(4))).collect()
    }

    fn truth(&mut self) -> Truth {
        [self.dims(2), self.dims(1), self.dims(2)]
    }
}

/// One step of graph construction, read against the graph built so far: `op` picks what to add,
/// `x` the tensor it applies to, `variant` a variant of the operation, `bits` the rest.
#[derive(Debug, Clone)]
struct Step {
    op: u8,
    x: u8,
    variant: u8,
    bits: u32,
}

/// The kinds of step (see `Graph::step`): a data leaf, then one per operation kind.
const N_OPS: u8 = 11;

fn steps() -> impl Strategy<Value = Vec<Step>> {
    vec(
        (0..N_OPS, any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(op, x, variant, bits)| {
            Step {
                op,
                x,
                variant,
                bits,
            }
        }),
        1..16,
    )
}

/// Specs of one operand: `...` in every row, and what they do to the rows' last axes.
const PERMUTES: [&str; 8] = [
    "...|...->... => ...|...->...",
    "...|i->o => ...|o->i",
    "...|..., i -> ... => ...|... -> ..., i",
    "...|...->..., i => ...|...->...",
    "...|...->..., 0 => ...|...->...",
    "...|...->..., 1 => ...|...->...",
    "...|...->..., 2*o => ...|...->..., o",
    "...|...->... => ...|...->..., 0",
];

const DOT: &str = "...|...->..., i; ...|...->..., i => ...|...->...";
const CONCAT: &str = "...|...->..., a; ...|...->..., b => ...|...->..., a^b";
/// `c` is a discardable component: it closes to 0.
const CONCAT_PADDED: &str = "...|...->..., a; ...|...->..., b => ...|...->..., a^b^c";
const CONV: &str = "...|...->..., o<+k; k => ...|...->..., o";

#[derive(Debug, Clone)]
struct Tensor {
    shape: Shape,
    truth: Truth,
}

/// A generated graph: the solver holding every variable but no constraint yet, the constraints in
/// generation order, the leaves, and every tensor.
#[derive(Debug, Clone, Default)]
struct Graph {
    solver: Solver,
    constraints: Vec<Constraint>,
    leaves: Vec<Leaf>,
    tensors: Vec<Tensor>,
    /// One line per tensor saying where it comes from, for failure messages.
    log: Vec<String>,
}

fn build(steps: &[Step]) -> Graph {
    let mut graph = Graph::default();
    for step in steps {
        graph.step(step);
    }
    graph
}

fn closed_shape(truth: &Truth) -> Shape {
    Shape {
        batch: Row::closed(truth[BATCH].clone()),
        input: Row::closed(truth[INPUT].clone()),
        output: Row::closed(truth[OUTPUT].clone()),
    }
}

fn open_shape(vars: &mut VarSupply) -> Shape {
    Shape {
        batch: Row::var(vars.row()),
        input: Row::var(vars.row()),
        output: Row::var(vars.row()),
    }
}

/// The broadcast of two rows of atoms: the longer one, if the shorter is its suffix.
fn broadcast_row(a: &[Dim], b: &[Dim]) -> Option<Vec<Dim>> {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.ends_with(short).then(|| long.to_vec())
}

fn broadcast(a: &Truth, b: &Truth) -> Option<Truth> {
    Some([
        broadcast_row(&a[BATCH], &b[BATCH])?,
        broadcast_row(&a[INPUT], &b[INPUT])?,
        broadcast_row(&a[OUTPUT], &b[OUTPUT])?,
    ])
}

/// The size of a concatenation as the solver evaluates it (a named basis wins).
fn concat_dim(parts: &[&Dim]) -> Dim {
    let size = parts.iter().filter_map(|d| d.ground_size()).sum();
    let basis = parts
        .iter()
        .filter_map(|d| match d {
            Dim::Atom {
                basis: basis @ Basis::Named(_),
                ..
            } => Some(basis.clone()),
            _ => None,
        })
        .next_back()
        .unwrap_or(Basis::Default);
    Dim::Atom { size, basis }
}

fn with_size(model: &Dim, size: usize) -> Dim {
    match model {
        Dim::Atom { basis, .. } => Dim::Atom {
            size,
            basis: basis.clone(),
        },
        _ => Dim::size(size),
    }
}

fn with_last_removed(t: &Truth) -> Truth {
    let [batch, input, output] = t.clone();
    [batch, input, output[..output.len() - 1].to_vec()]
}

/// The result rows of `PERMUTES[index]` on `t`, if the spec applies to it.
fn permute_truth(index: usize, t: &Truth) -> Option<Truth> {
    let [batch, input, output] = t.clone();
    let last = output.last().and_then(Dim::ground_size);
    let init = |row: &[Dim]| row[..row.len().saturating_sub(1)].to_vec();
    Some(match index {
        0 => t.clone(),
        1 if input.len() == 1 && output.len() == 1 => [batch, output, input],
        2 if !input.is_empty() => {
            let mut output = output;
            output.push(input.last()?.clone());
            [batch, init(&input), output]
        }
        3 | 4 if last.is_some() => [batch, input, init(&output)],
        5 if last >= Some(2) => [batch, input, init(&output)],
        6 if last.is_some_and(|n| n % 2 == 0) => {
            let mut halved = init(&output);
            halved.push(with_size(output.last()?, last? / 2));
            [batch, input, halved]
        }
        7 => {
            // Closing makes the written-at-0 axis `1` or, once a use gives it a cap, `1*`.
            let mut output = output;
            output.push(Dim::Unit);
            [batch, input, output]
        }
        _ => return None,
    })
}

impl Graph {
    fn push_leaf(
        &mut self,
        shape: Shape,
        truth: Truth,
        is_param: bool,
        init: TerminalInit,
    ) -> usize {
        let index = self.tensors.len();
        let kind = if is_param { "param" } else { "data" };
        self.log
            .push(format!("t{index} = {kind} {shape}, {init:?}"));
        self.constraints.extend(terminal_constraints(&shape, &init));
        self.leaves.push(Leaf {
            label: format!("t{index}"),
            shape: shape.clone(),
            is_param,
        });
        self.tensors.push(Tensor { shape, truth });
        index
    }

    fn data(&mut self, truth: Truth) -> usize {
        self.push_leaf(
            closed_shape(&truth),
            truth,
            false,
            TerminalInit::Unconstrained,
        )
    }

    /// A parameter: no batch axes; an open input or output row is left for inference. Only rows
    /// meant to have axes are left open: nothing would tell an empty one from an undetermined one.
    fn param(&mut self, truth: Truth, open_input: bool, open_output: bool) -> usize {
        debug_assert!(truth[BATCH].is_empty(), "parameters have no batch axes");
        let mut shape = closed_shape(&truth);
        if open_input && !truth[INPUT].is_empty() {
            shape.input = Row::var(self.solver.vars().row());
        }
        if open_output && !truth[OUTPUT].is_empty() {
            shape.output = Row::var(self.solver.vars().row());
        }
        self.push_leaf(shape, truth, true, TerminalInit::Unconstrained)
    }

    fn op(&mut self, logic: Logic, operands: &[usize], truth: Truth) -> usize {
        let result = open_shape(self.solver.vars());
        let shapes: Vec<Shape> = operands
            .iter()
            .map(|&i| self.tensors[i].shape.clone())
            .collect();
        let generated = generate(&logic, &result, &shapes, self.solver.vars())
            .unwrap_or_else(|err| panic!("{logic:?} should generate, got:\n{err}"));
        let name = match &logic {
            Logic::Spec(spec) | Logic::Block(spec) => format!("{spec}"),
            _ => format!("{logic:?}"),
        };
        let operands: Vec<String> = operands.iter().map(|i| format!("t{i}")).collect();
        self.log.push(format!(
            "t{} = {name} ({}) : {result}",
            self.tensors.len(),
            operands.join(", ")
        ));
        self.solver.add_discardable(generated.discardable);
        self.constraints.extend(generated.constraints);
        self.tensors.push(Tensor {
            shape: result,
            truth,
        });
        self.tensors.len() - 1
    }

    fn spec_op(&mut self, text: &str, operands: &[usize], truth: Truth) -> usize {
        let spec = parse_einsum(text).unwrap_or_else(|err| panic!("{text:?}: {err}"));
        let logic = if text.contains('^') {
            Logic::Block(spec)
        } else {
            Logic::Spec(spec)
        };
        self.op(logic, operands, truth)
    }

    /// An existing tensor, searching from a chosen one, whose truth satisfies `fits`.
    fn find(&self, choices: &mut Choices, fits: impl Fn(&Truth) -> bool) -> Option<usize> {
        let n = self.tensors.len();
        let start = choices.pick(n as u32) as usize;
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| fits(&self.tensors[i].truth))
    }

    fn step(&mut self, step: &Step) {
        let mut choices = Choices(step.bits);
        if self.tensors.is_empty() || step.op == 0 {
            let truth = choices.truth();
            self.data(truth);
            return;
        }
        let x = step.x as usize % self.tensors.len();
        let t = self.tensors[x].truth.clone();
        let variant = u32::from(step.variant);
        let added = match step.op {
            1 => Some(self.op(Logic::Pointwise(1), &[x], t.clone())),
            2 => {
                let y = self.broadcast_partner(&t, variant, &mut choices);
                let truth = broadcast(&t, &self.tensors[y].truth);
                truth.map(|truth| self.op(Logic::Pointwise(2), &[x, y], truth))
            }
            3 => Some(self.compose(x, &t, variant, &mut choices)),
            4 => {
                let [batch, input, output] = t.clone();
                Some(self.op(Logic::Transpose, &[x], [batch, output, input]))
            }
            5 => {
                let n = PERMUTES.len();
                (0..n)
                    .map(|k| (variant as usize + k) % n)
                    .find_map(|i| Some((i, permute_truth(i, &t)?)))
                    .map(|(i, truth)| self.spec_op(PERMUTES[i], &[x], truth))
            }
            6 => self.binary_spec(x, &t, variant, &mut choices),
            7 => self.batch_slice(x, &t, variant),
            8 => Some(self.terminal_leaf(variant, &mut choices)),
            9 => {
                let y = self.broadcast_partner(&t, variant, &mut choices);
                let z = self.broadcast_partner(&t, variant / 4, &mut choices);
                let truth = broadcast(&t, &self.tensors[y].truth)
                    .and_then(|t| broadcast(&t, &self.tensors[z].truth));
                truth.map(|truth| self.op(Logic::Pointwise(3), &[x, y, z], truth))
            }
            _ => {
                let axes: Vec<&Dim> = t.iter().flatten().collect();
                match axes[..] {
                    [axis] => {
                        let coefficient = [1, 2, 4][variant as usize % 3];
                        let size = coefficient * axis.ground_size().unwrap_or(1);
                        let truth = [vec![], vec![], vec![Dim::size(size)]];
                        Some(self.op(Logic::Uint4x32ToPrec { coefficient }, &[x], truth))
                    }
                    _ => None,
                }
            }
        };
        if added.is_none() {
            self.op(Logic::Pointwise(1), &[x], t);
        }
    }

    /// A second operand for a pointwise operation on a tensor of truth `t`.
    fn broadcast_partner(&mut self, t: &Truth, variant: u32, choices: &mut Choices) -> usize {
        match variant % 4 {
            0 => self.data(t.clone()),
            1 => {
                // Fewer leading axes: it broadcasts.
                let suffix = |row: &Vec<Dim>, keep: u32| row[row.len() - keep as usize..].to_vec();
                let truth = t
                    .clone()
                    .map(|row| suffix(&row, choices.pick(row.len() as u32 + 1)));
                self.data(truth)
            }
            2 => self.param([vec![], t[INPUT].clone(), t[OUTPUT].clone()], true, true),
            _ => match self.find(choices, |u| broadcast(t, u).is_some()) {
                Some(y) => y,
                None => self.data(t.clone()),
            },
        }
    }

    /// `w * x` for a `w` whose input row is `x`'s output row.
    fn compose(&mut self, x: usize, t: &Truth, variant: u32, choices: &mut Choices) -> usize {
        let contracted = t[OUTPUT].clone();
        let fits =
            |u: &Truth| u[INPUT] == contracted && broadcast_row(&u[BATCH], &t[BATCH]).is_some();
        let existing = if variant % 3 == 2 {
            self.find(choices, fits)
        } else {
            None
        };
        let w = match existing {
            Some(w) => w,
            None => {
                let output = choices.dims(2);
                let truth = [vec![], contracted, output];
                if variant % 3 == 1 {
                    self.data(truth)
                } else {
                    // Only a later use could determine an open output row: give its axes.
                    self.param(truth, true, false)
                }
            }
        };
        let u = self.tensors[w].truth.clone();
        let batch = broadcast_row(&u[BATCH], &t[BATCH]).expect("checked above");
        let truth = [batch, t[INPUT].clone(), u[OUTPUT].clone()];
        self.op(Logic::Compose, &[w, x], truth)
    }

    /// Two-operand specs over the last output axis: a dot product, concatenations, a convolution.
    fn binary_spec(
        &mut self,
        x: usize,
        t: &Truth,
        variant: u32,
        choices: &mut Choices,
    ) -> Option<usize> {
        let last = t[OUTPUT].last()?.clone();
        let size = last.ground_size()?;
        let init = || t[OUTPUT][..t[OUTPUT].len() - 1].to_vec();
        let with_last = |dim: Dim| {
            let mut output = init();
            output.push(dim);
            [t[BATCH].clone(), t[INPUT].clone(), output]
        };
        match variant % 4 {
            0 => {
                let y = match choices.pick(3) {
                    0 if t[BATCH].is_empty() => {
                        self.param([vec![], t[INPUT].clone(), t[OUTPUT].clone()], true, true)
                    }
                    1 => match self.find(choices, |u| u == t) {
                        Some(y) => y,
                        None => self.data(t.clone()),
                    },
                    _ => self.data(t.clone()),
                };
                Some(self.spec_op(DOT, &[x, y], with_last_removed(t)))
            }
            1 | 2 => {
                let other = pool_dim(choices.pick(4));
                let y = self.data(with_last(other.clone()));
                let (text, truth) = if variant % 4 == 1 {
                    (CONCAT, with_last(concat_dim(&[&last, &other])))
                } else {
                    (
                        CONCAT_PADDED,
                        with_last(concat_dim(&[&last, &other, &Dim::size(0)])),
                    )
                };
                Some(self.spec_op(text, &[x, y], truth))
            }
            _ => {
                let kernel = [2, 3][choices.pick(2) as usize];
                if kernel > size {
                    return None;
                }
                let kernel_truth = [vec![], vec![], vec![Dim::size(kernel)]];
                let k = if choices.pick(2) == 0 {
                    self.data(kernel_truth)
                } else {
                    self.param(kernel_truth, false, false)
                };
                let truth = with_last(with_size(&last, size - kernel + 1));
                Some(self.spec_op(CONV, &[x, k], truth))
            }
        }
    }

    /// Slices a tensor whose batch row is given. Slicing a computed tensor is left out: its open
    /// batch row becomes `[a]·ρ` (an axis, then the broadcast point), and when a use also aligns
    /// it at its trailing end with a one-axis row, the two minimal solutions are the same axis
    /// with the broadcast point on either side; which one solving keeps depends on the order
    /// (the known gap the solver's module documentation describes).
    fn batch_slice(&mut self, x: usize, t: &Truth, variant: u32) -> Option<usize> {
        if self.tensors[x].shape.batch.var.is_some() {
            return None;
        }
        let first = t[BATCH].first()?;
        let static_range = match first {
            Dim::Atom {
                size,
                basis: Basis::Default,
            } if variant % 2 == 1 => Some(*size),
            _ => None,
        };
        let truth = [t[BATCH][1..].to_vec(), t[INPUT].clone(), t[OUTPUT].clone()];
        Some(self.op(Logic::BatchSlice { static_range }, &[x], truth))
    }

    /// A data leaf whose rows come from an initializer: an element count or exact axes.
    fn terminal_leaf(&mut self, variant: u32, choices: &mut Choices) -> usize {
        if variant.is_multiple_of(2) {
            let [batch, input, _] = choices.truth();
            let n = pool_dim(choices.pick(3)).ground_size().expect("an atom");
            let count: usize = batch
                .iter()
                .chain(&input)
                .filter_map(Dim::ground_size)
                .product();
            let mut shape = closed_shape(&[batch.clone(), input.clone(), vec![]]);
            shape.output = Row::var(self.solver.vars().row());
            let truth = [batch, input, vec![Dim::size(n)]];
            self.push_leaf(shape, truth, false, TerminalInit::NElements(n * count))
        } else {
            let mut dims = choices.dims(2);
            dims.push(pool_dim(choices.pick(4)));
            let shape = open_shape(self.solver.vars());
            let truth = [vec![], vec![], dims.clone()];
            self.push_leaf(shape, truth, false, TerminalInit::ExactDims(dims))
        }
    }

    /// Adds the constraints of `batches` (indices in generation order) with one `add` call per
    /// batch, closes, and resolves every tensor's shape.
    fn solve(&self, batches: &[Vec<usize>]) -> Outcome {
        let mut solver = self.solver.clone();
        for batch in batches {
            solver.add(batch.iter().map(|&i| self.constraints[i].clone()))?;
        }
        solver.close(&self.leaves)?;
        Ok(self
            .tensors
            .iter()
            .map(|tensor| solver.resolve_shape(&tensor.shape).without_markers())
            .collect())
    }

    /// Graph-level shrinking leaves more constraints than matter (dropping a step renumbers the
    /// tensors after it), so a failure also shows a subset the two orders still disagree on,
    /// found by dropping constraints one at a time while they do. That costs quadratically many
    /// solves, and the message is built for every failing case shrinking tries: large cases,
    /// which shrinking soon leaves behind, skip it.
    fn smallest_disagreement(&self, batches: &[Vec<usize>]) -> String {
        if self.constraints.len() > 400 {
            return String::new();
        }
        let runs = |keep: &[usize]| {
            let restricted: Vec<Vec<usize>> = batches
                .iter()
                .map(|batch| batch.iter().copied().filter(|i| keep.contains(i)).collect())
                .collect();
            (
                self.solve(&[keep.to_vec()]),
                self.solve(&restricted),
                restricted,
            )
        };
        let mut keep: Vec<usize> = (0..self.constraints.len()).collect();
        loop {
            let before = keep.len();
            let mut i = 0;
            while i < keep.len() {
                let mut fewer = keep.clone();
                fewer.remove(i);
                let (a, b, _) = runs(&fewer);
                if agree(&a, &b) {
                    i += 1;
                } else {
                    keep = fewer;
                }
            }
            if keep.len() == before {
                break;
            }
        }
        let (a, b, restricted) = runs(&keep);
        let constraints: Vec<String> = keep
            .iter()
            .map(|&i| format!("  c{i}: {}", render(&self.constraints[i])))
            .collect();
        format!(
            "the orders still disagree on these constraints alone (batches {restricted:?}):\n{}\n\
             in generation order:\n{}\nreordered:\n{}",
            constraints.join("\n"),
            outcome(&a),
            outcome(&b)
        )
    }

    /// The tensors and the numbered constraints, for failure messages.
    fn describe(&self) -> String {
        let constraints = self
            .constraints
            .iter()
            .enumerate()
            .map(|(i, c)| format!("  c{i}: {}", render(c)));
        self.log
            .iter()
            .map(|line| format!("  {line}"))
            .chain(["constraints:".to_owned()])
            .chain(constraints)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The indices of `n` constraints permuted by sorting on `keys` (a stable sort: shrinking keys to
/// 0 moves towards generation order) and cut into batches after the positions `cuts` marks.
fn reorder(n: usize, keys: &[u16], cuts: &[bool]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| keys.get(i).copied().unwrap_or(0));
    let mut batches = vec![Vec::new()];
    for (position, &i) in order.iter().enumerate() {
        batches.last_mut().expect("never empty").push(i);
        if cuts.get(position) == Some(&true) {
            batches.push(Vec::new());
        }
    }
    batches
}

/// A constraint as the failure messages show it.
fn render(constraint: &Constraint) -> String {
    let rows = |rows: &[Row]| {
        rows.iter()
            .map(|row| format!("[{row}]"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    match constraint {
        Constraint::DimEq(a, b) => format!("{a} = {b}"),
        Constraint::DimLe { res, opnd } => format!("{res} ⊑ {opnd}"),
        Constraint::AtLeast { dim, size } => format!("{dim} ≥ {size}"),
        Constraint::RowEq(a, b) => format!("[{a}] = [{b}]"),
        Constraint::RowLe { res, opnd } => format!("[{res}] ⊑ [{opnd}]"),
        Constraint::TotalElems {
            rows: r,
            total,
            coefficient,
        } => format!("#{} = {coefficient}·{total}", rows(r)),
        Constraint::Exact { rows: r, dims } => {
            let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
            format!("{} is [{}]", rows(r), dims.join(","))
        }
    }
}

fn is_ground(shape: &Shape) -> bool {
    Kind::ALL.into_iter().all(|kind| {
        let row = shape.row(kind);
        row.var.is_none() && row.dims().all(Dim::is_ground)
    })
}

type Outcome = Result<Vec<Shape>, ShapeError>;

/// Both runs give the same shapes, or both fail (possibly on different constraints).
fn agree(a: &Outcome, b: &Outcome) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

fn outcome(result: &Outcome) -> String {
    match result {
        Ok(shapes) => shown(shapes),
        Err(err) => format!("error: {err}"),
    }
}

fn shown(shapes: &[Shape]) -> String {
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| format!("t{i}: {shape}"))
        .collect::<Vec<_>>()
        .join("\n")
}

proptest! {
    #![proptest_config(config(100_000))]

    #[test]
    fn constraint_order_does_not_change_the_shapes(
        steps in steps(),
        keys in vec(any::<u16>(), 0..400),
        cuts in vec(proptest::bool::weighted(0.1), 0..400),
    ) {
        let graph = build(&steps);
        let in_order = [(0..graph.constraints.len()).collect()];
        let batches = reorder(graph.constraints.len(), &keys, &cuts);
        let reference = graph.solve(&in_order);
        let reordered = graph.solve(&batches);
        let context = || format!("{}\nreordered batches: {batches:?}", graph.describe());
        if let Ok(shapes) = &reference {
            prop_assert!(
                shapes.iter().all(is_ground),
                "a variable survives closing:\n{}\n{}",
                shown(shapes),
                context()
            );
        }
        prop_assert!(
            agree(&reference, &reordered),
            "in generation order:\n{}\nreordered:\n{}\n{}\n{}",
            outcome(&reference),
            outcome(&reordered),
            context(),
            graph.smallest_disagreement(&batches)
        );
    }
}

/// The order property says little if most graphs fail: require a large solvable share (of graphs
/// drawn with a fixed seed, so the count is stable).
#[test]
fn most_generated_graphs_are_solvable() {
    let mut runner = TestRunner::deterministic();
    let strategy = steps();
    let n = 1000;
    let solved = (0..n)
        .filter(|_| {
            let steps = strategy.new_tree(&mut runner).expect("a tree").current();
            let graph = build(&steps);
            graph
                .solve(&[(0..graph.constraints.len()).collect()])
                .is_ok()
        })
        .count();
    eprintln!("{solved} of {n} generated graphs solve");
    assert!(
        solved * 10 >= n * 7,
        "only {solved} of {n} generated graphs solve"
    );
}
