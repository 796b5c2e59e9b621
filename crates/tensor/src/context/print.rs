//! Printing a context's tensors: layout prints of values and gradients, trees of the graph, and
//! the notation (`cd!`'s) that routines' and operations' assignments are printed in; the
//! printing itself is [`crate::print`]'s.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use rcannl_ir::{Assignment, NodeId};
use rcannl_shape::spec::Kind;
use rcannl_shape::term::{Basis, Dim};

use crate::array::Array;
use crate::graph::{Asg, Graph, LeafKind, TensorError, error};
use crate::print::{
    Layout, Node, Notation, PrintOptions, TreeOptions, axis_names, cd_logic, draw_tree, render,
};
use crate::tensor::Tensor;

use super::{Context, FIRST_SCRATCH, grad_node, value_node};

impl Context {
    /// The tensor printed: its values laid out by the kinds of their axes (see
    /// [`crate::print`]), then, as `options` asks, its gradient and the assignments computing
    /// it (`forward:`) and its operands' gradients (`backprop:`) in `cd!` notation (none for a
    /// leaf). An error for a tensor that holds no
    /// values (or gradient, when asked for) to read, as [`Context::array`] and
    /// [`Context::grad`] refuse it.
    ///
    /// ```
    /// use rcannl_tensor::print::PrintOptions;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let x = graph.data("x").shape("2|->3").values(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).build();
    /// let mut ctx = Context::new(&graph);
    /// let forward = ctx.forward(&[&x])?;
    /// ctx.run(&forward)?;
    /// assert_eq!(
    ///     ctx.print(&x, &PrintOptions::default())?,
    ///     "x: b0=2|->o0=3\n\
    ///      ┌─────────┬───────┐\n\
    ///      │ b0 \\ o0 │ 0 1 2 │\n\
    ///      ├─────────┼───────┤\n\
    ///      │       0 │ 1 2 3 │\n\
    ///      │       1 │ 4 5 6 │\n\
    ///      └─────────┴───────┘\n"
    /// );
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn print(&mut self, t: &Tensor, options: &PrintOptions) -> Result<String, TensorError> {
        let mut out = self.laid_out(t, false, &options.layout)?;
        if options.grad {
            out += &self.laid_out(t, true, &options.layout)?;
        }
        if options.code {
            let (forward, backward) = self.operation_code(t)?;
            for (heading, code) in [("forward", forward), ("backprop", backward)] {
                if !code.is_empty() {
                    out += &format!("{heading}:\n{}", indented(&code));
                }
            }
        }
        Ok(out)
    }

    /// The graph computing `t`, drawn as a tree (see [`crate::print`]): each node a tensor's
    /// label and shape (a leaf's kind after it), the assignment computing it in `cd!` notation,
    /// and, as `options` asks, its values and gradient where the context holds them; its
    /// operands under it, down to `options.depth` levels, a tensor read in several places
    /// drawn once.
    ///
    /// ```
    /// use rcannl_tensor::print::TreeOptions;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let x = graph.data("x").shape("2").values(vec![1.0, -2.0]).build();
    /// let y = (&x + &x).relu();
    /// let mut ctx = Context::new(&graph);
    /// let forward = ctx.forward(&[&y])?;
    /// ctx.run(&forward)?;
    /// // Operations are labelled by their operator and number: `+#1`, `relu#2`.
    /// assert_eq!(
    ///     ctx.print_tree(&y, &TreeOptions::default())?,
    ///     "relu#2: |->2\n\
    ///      │ relu#2 =:+ relu(+#1);\n\
    ///      └─ +#1: |->2\n   \
    ///         │ +#1 =:+ x + x;\n   \
    ///         ├─ x: |->2 data\n   \
    ///         └─ x (see above)\n"
    /// );
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn print_tree(&mut self, t: &Tensor, options: &TreeOptions) -> Result<String, TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let notation = self.notation();
        let mut node = |index: usize| -> Result<Node, TensorError> {
            let tensor = Tensor {
                graph: self.graph.clone(),
                index,
            };
            let (label, leaf, operation) = {
                let state = self.graph.state.lock();
                let data = &state.tensors[index];
                let operation = data
                    .op
                    .map(|op| &state.ops[op])
                    .filter(|op| op.result == index)
                    .map(|op| (op.forward.clone(), op.operands.clone()));
                (
                    data.label.clone(),
                    data.leaf.as_ref().map(leaf_kind),
                    operation,
                )
            };
            let about = match &leaf {
                Some(kind) => format!(": {} {kind}", tensor.shape()),
                None => format!(": {}", tensor.shape()),
            };
            let (forward, operands) = operation.unwrap_or_default();
            let mut body: Vec<String> = notation
                .assignments(&self.assignments(&forward)?)
                .lines()
                .map(str::to_owned)
                .collect();
            if options.values {
                body.extend(
                    self.held_layout(&tensor, false, &options.layout)?
                        .lines()
                        .map(str::to_owned),
                );
            }
            if options.grad && tensor.is_differentiable() {
                body.extend(
                    self.held_layout(&tensor, true, &options.layout)?
                        .lines()
                        .map(str::to_owned),
                );
            }
            Ok(Node {
                label,
                about,
                body,
                operands,
            })
        };
        draw_tree(t.index, options.depth, &mut node)
    }

    /// How printed assignments name this context's nodes (tensors by label, gradients as
    /// `label.grad`, a routine's own nodes by theirs) and the logics of the graph's operations.
    pub(super) fn notation(&self) -> Notation {
        notation(
            &self.graph,
            self.nodes
                .iter()
                .map(|(&id, node)| (id, node.label.as_str())),
        )
    }

    /// The assignments `asgs` stand for over this context's nodes.
    fn assignments(&self, asgs: &[Asg]) -> Result<Vec<Assignment>, TensorError> {
        asgs.iter().map(|asg| self.assignment(asg)).collect()
    }

    /// The assignments computing `t` and those accumulating its operands' gradients, in `cd!`
    /// notation (nothing for a leaf).
    fn operation_code(&mut self, t: &Tensor) -> Result<(String, String), TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let (forward, backward) = {
            let state = self.graph.state.lock();
            match state.tensors[t.index].op {
                Some(op) if state.ops[op].result == t.index => (
                    state.ops[op].forward.clone(),
                    state.ops[op].backward.clone(),
                ),
                _ => (Vec::new(), Vec::new()),
            }
        };
        let notation = self.notation();
        Ok((
            notation.assignments(&self.assignments(&forward)?),
            notation.assignments(&self.assignments(&backward)?),
        ))
    }

    /// The layout print of `t`'s values (or gradient), titled by its label (or `label.grad`).
    fn laid_out(&mut self, t: &Tensor, grad: bool, layout: &Layout) -> Result<String, TensorError> {
        let array = self.array(t)?;
        let (title, array) = if grad {
            let values = self.grad(t)?;
            let array = Array::new(
                array.batch_dims().to_vec(),
                array.output_dims().to_vec(),
                array.input_dims().to_vec(),
                values,
            )
            .map_err(|e| error(format!("gradient of '{}': {e}", t.label())))?;
            (format!("{}.grad", t.label()), array)
        } else {
            (t.label(), array)
        };
        let axes = axis_names(&array, &self.bases(t)?);
        Ok(render(&title, &array, &axes, layout))
    }

    /// [`Context::laid_out`] where the context holds the values (or keeps the gradient), else
    /// a line saying it does not.
    fn held_layout(
        &mut self,
        t: &Tensor,
        grad: bool,
        layout: &Layout,
    ) -> Result<String, TensorError> {
        let held = if grad {
            self.grads_kept.contains(&t.index) && self.holds.contains(&grad_node(t.index))
        } else {
            self.holds.contains(&value_node(t.index))
        };
        match (held, grad) {
            (true, _) => self.laid_out(t, grad, layout),
            (false, false) => Ok("(no values held)".to_owned()),
            (false, true) => Ok("(no gradient kept)".to_owned()),
        }
    }

    /// The basis of each of `t`'s axes that has a named one, in memory order.
    fn bases(&self, t: &Tensor) -> Result<Vec<Option<String>>, TensorError> {
        let state = self.graph.state.lock();
        let shape = state.inference.closed_shape(state.tensors[t.index].shape)?;
        Ok([Kind::Batch, Kind::Output, Kind::Input]
            .iter()
            .flat_map(|&kind| shape.row(kind).dims().cloned().collect::<Vec<_>>())
            .map(|dim| match dim {
                Dim::Atom {
                    basis: Basis::Named(name),
                    ..
                } => Some(name.to_string()),
                _ => None,
            })
            .collect())
    }
}

/// What a leaf is, as a tree prints it after its shape.
fn leaf_kind(leaf: &LeafKind) -> String {
    match leaf {
        LeafKind::Data(_) => "data".to_owned(),
        LeafKind::Param(_) => "param".to_owned(),
        LeafKind::Constant(c) => format!("constant {c}"),
        LeafKind::RangeOverOffsets => "range".to_owned(),
        LeafKind::SelfId => "self id".to_owned(),
        LeafKind::Dim(_) => "dim".to_owned(),
        LeafKind::Seed => "seed".to_owned(),
        LeafKind::Static(symbol) => format!("static index s{}", symbol.0),
    }
}

/// `text`'s lines, each indented by two spaces.
fn indented(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

/// How printed assignments name `nodes`, given with their labels (tensors by the graph's
/// label, gradients as `label.grad`, scratch nodes by the label given), and the logics of the
/// graph's operations.
fn notation<'a>(graph: &Graph, nodes: impl IntoIterator<Item = (NodeId, &'a str)>) -> Notation {
    let state = graph.state.lock();
    let mut notation = Notation::default();
    for (id, label) in nodes {
        let name = if id.0 >= FIRST_SCRATCH {
            label.to_owned()
        } else {
            let tensor = &state.tensors[(id.0 / 2) as usize].label;
            if id == grad_node((id.0 / 2) as usize) {
                format!("{tensor}.grad")
            } else {
                tensor.clone()
            }
        };
        notation.nodes.insert(id, name);
    }
    for op in state.inference.ops() {
        let logic = &state.inference.op(op).logic;
        if let Some(written) = cd_logic(logic) {
            notation.logics.insert(logic.to_string(), written);
        }
    }
    notation
}

/// A routine's assignments in `cd!` notation, written the first time they are asked for: a
/// deep model's step has thousands, and most programs never print them.
#[derive(Debug)]
pub(super) struct Code {
    text: OnceLock<String>,
    assignments: Assignment,
    graph: Graph,
    /// The nodes the assignments use, with the labels of those the graph does not name
    /// (scratch nodes).
    nodes: Vec<(NodeId, String)>,
}

impl Code {
    /// The code of `assignments`, over `nodes` of `ctx`.
    pub(super) fn new(ctx: &Context, assignments: Assignment, nodes: &BTreeSet<NodeId>) -> Code {
        Code {
            text: OnceLock::new(),
            assignments,
            graph: ctx.graph.clone(),
            nodes: nodes
                .iter()
                .map(|&id| {
                    let label = match ctx.nodes.get(&id) {
                        Some(node) if id.0 >= FIRST_SCRATCH => node.label.clone(),
                        _ => String::new(),
                    };
                    (id, label)
                })
                .collect(),
        }
    }

    pub(super) fn text(&self) -> &str {
        self.text.get_or_init(|| {
            let names = self.nodes.iter().map(|(id, label)| (*id, label.as_str()));
            notation(&self.graph, names).assignments([&self.assignments])
        })
    }
}
