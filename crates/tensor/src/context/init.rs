//! Parameter initialization: counter-based draws keyed by (seed, tensor id), computed in f64 so
//! every backend gives the same bits, then init expressions in creation order.

use std::collections::BTreeMap;

use rcannl_ir::{
    Binop, Index, LoopVar, MemoryMode, NodeId, Precision, Routine as IrRoutine, Scalar, Stmt,
    TensorNode, Unop, Var, VecUnop,
};
use rcannl_shape::spec::Kind;

use crate::graph::{Draw, Init, LeafKind, TensorError, error};
use crate::tensor::Tensor;

use super::{Context, value_node};

impl Context {
    /// Initializes every parameter not initialized yet in this context (each exactly once; a
    /// parameter whose values were set from the host keeps them). A routine reading a parameter
    /// that holds no values refuses to run.
    pub fn init_params(&mut self) -> Result<(), TensorError> {
        self.concretize()?;
        let (params, default): (Vec<(usize, Init)>, Init) = {
            let state = self.graph.state.lock();
            let params = state
                .tensors
                .iter()
                .enumerate()
                .filter(|(t, _)| !self.holds.contains(&value_node(*t)))
                .filter_map(|(t, data)| match &data.leaf {
                    Some(LeafKind::Param(init)) if data.failed.is_none() => Some((t, init.clone())),
                    _ => None,
                })
                .collect();
            (params, state.default_init.clone())
        };
        let mut body = Vec::new();
        let mut scratch = Vec::new();
        let mut vars = 0u32;
        let mut expressions = Vec::new();
        for (t, init) in &params {
            let node = self.nodes[&value_node(*t)].clone();
            let (fan_in, fan_out) = self.fans_of(*t)?;
            match init.draw(&default, fan_in, fan_out) {
                Draw::Values(values) => {
                    self.buffers
                        .set_values(node.id, &values)
                        .map_err(|e| error(format!("parameter '{}': {e}", node.label)))?;
                }
                Draw::Fill(value) => body.push(Stmt::Fill {
                    node: node.id,
                    value,
                }),
                Draw::Uniform(low, high) => {
                    let range = (low, high);
                    body.extend(self.random_init(&node, *t, range, None, &mut scratch, &mut vars));
                }
                Draw::Normal(mean, std) => {
                    body.extend(self.random_init(
                        &node,
                        *t,
                        (0.0, 1.0),
                        Some((mean, std)),
                        &mut scratch,
                        &mut vars,
                    ));
                }
                Draw::Expr(e) => expressions.push((*t, e)),
            }
        }
        if !body.is_empty() {
            let mut nodes: BTreeMap<NodeId, TensorNode> =
                scratch.into_iter().map(|n: TensorNode| (n.id, n)).collect();
            for (t, _) in &params {
                let node = self.nodes[&value_node(*t)].clone();
                nodes.insert(node.id, node.with_mode(MemoryMode::Materialized));
            }
            let routine = IrRoutine {
                name: "init".to_owned(),
                nodes,
                statics: BTreeMap::new(),
                body,
            };
            // It writes the parameters: none has to hold values before.
            let routine = self.compile_routine(routine, Vec::new(), Vec::new())?;
            self.run(&routine)?;
        }
        self.holds.extend(
            params
                .iter()
                .map(|(t, _)| *t)
                .filter(|t| expressions.iter().all(|(e, _)| e != t))
                .map(value_node),
        );
        // In creation order, so that an expression may read a parameter an earlier one set.
        for (t, e) in expressions {
            let label = self.graph.state.lock().tensors[t].label.clone();
            let failed = |e: TensorError| {
                let message = format!("parameter '{label}': its init expression: {}", e.message);
                e.reworded(message)
            };
            let routine = self.forward(&[&e]).map_err(failed)?;
            self.run(&routine).map_err(failed)?;
            let values = self.values(&e).map_err(failed)?;
            self.buffers
                .set_values(value_node(t), &values)
                .map_err(|e| error(format!("parameter '{label}': {e}")))?;
            self.holds.insert(value_node(t));
        }
        Ok(())
    }

    /// The fan-in and fan-out of `param` as the fan-based [`Init`]s read them, PyTorch's
    /// `torch.nn.init._calculate_fan_in_and_fan_out`: the fan-in is the number of its input
    /// cells (the product of its input axes), the fan-out the number of its output cells times
    /// the size of its window (the input axes [`LeafBuilder::window_axes`] declares, none
    /// unless declared); either is 0 without axes in its row. An error when `param` declares
    /// more window axes than it has input axes.
    ///
    /// [`LeafBuilder::window_axes`]: crate::LeafBuilder::window_axes
    pub fn fans(&mut self, param: &Tensor) -> Result<(usize, usize), TensorError> {
        self.concretize()?;
        self.check_tensor(param)?;
        self.fans_of(param.index)
    }

    /// The fans of the tensor of index `t` (see [`Context::fans`]).
    fn fans_of(&self, t: usize) -> Result<(usize, usize), TensorError> {
        let state = self.graph.state.lock();
        let shape = state.inference.shape(state.tensors[t].shape);
        let sizes = |kind: Kind| -> Vec<usize> {
            let row = shape.row(kind);
            row.dims().map(|d| d.ground_size().unwrap_or(1)).collect()
        };
        let (input, output) = (sizes(Kind::Input), sizes(Kind::Output));
        let window = state.window_axes.get(&t).copied().unwrap_or(0);
        if window > input.len() {
            return Err(error(format!(
                "parameter '{}': {window} window axes declared, but it has {} input axes",
                state.tensors[t].label,
                input.len()
            )));
        }
        let cells = |dims: &[usize]| match dims {
            [] => 0,
            _ => dims.iter().product(),
        };
        let receptive: usize = input[..window].iter().product();
        Ok((cells(&input), cells(&output) * receptive))
    }

    /// Statements filling `node` with random values keyed by (seed, tensor): uniform in
    /// `range`, or normal with `(mean, std)` by Box–Muller from two uniform draws. Cell `i` takes
    /// its bits from counter `i / k` (k values per 128-bit word), so values do not depend on the
    /// backend or the order of anything.
    fn random_init(
        &mut self,
        node: &TensorNode,
        t: usize,
        (low, high): (f64, f64),
        normal: Option<(f64, f64)>,
        scratch: &mut Vec<TensorNode>,
        next_var: &mut u32,
    ) -> Vec<Stmt> {
        let mut fresh = || {
            *next_var += 1;
            LoopVar(*next_var - 1)
        };
        let cells = node.len();
        let draws = if normal.is_some() { 2 } else { 1 };
        let mut body = Vec::new();
        let mut uniforms = Vec::new();
        for draw in 0..draws {
            let uniform = TensorNode::new(self.scratch(), "uniform", Precision::F64, &[cells])
                .with_mode(MemoryMode::Local);
            let length = VecUnop::Uint4x32ToPrecUniform.length(Precision::F64);
            let words = cells.div_ceil(length);
            let w = fresh();
            // The key: threefry(seed, tensor id); the counter: the word's position, shifted per
            // draw.
            let key = Scalar::Binop(
                Binop::Threefry4x32,
                Box::new(Scalar::Const(self.seed as f64)),
                Box::new(Scalar::Const(t as f64)),
            );
            let counter = Scalar::Embed(Index {
                terms: vec![(1, Var::Loop(w))],
                offset: (draw * words) as i64,
            });
            body.push(Stmt::For {
                var: w,
                range: words,
                body: vec![Stmt::SetVec {
                    node: uniform.id,
                    offset: Index {
                        terms: vec![(length as i64, Var::Loop(w))],
                        offset: 0,
                    },
                    op: VecUnop::Uint4x32ToPrecUniform,
                    arg: Scalar::Binop(Binop::Threefry4x32, Box::new(key), Box::new(counter)),
                }],
            });
            uniforms.push(uniform.id);
            scratch.push(uniform);
        }
        // The node's cells, row-major over its dims (inside its margins).
        let vars: Vec<LoopVar> = node.dims.iter().map(|_| fresh()).collect();
        let mut flat = Index::constant(0);
        let mut stride = 1i64;
        for (var, dim) in vars.iter().zip(&node.dims).rev() {
            flat.terms.push((stride, Var::Loop(*var)));
            stride *= *dim as i64;
        }
        let read = |id: NodeId| Box::new(Scalar::Get(id, vec![flat.clone()]));
        let value = match normal {
            None => Scalar::Binop(
                Binop::Add,
                Box::new(Scalar::Const(low)),
                Box::new(Scalar::Binop(
                    Binop::Mul,
                    Box::new(Scalar::Const(high - low)),
                    read(uniforms[0]),
                )),
            ),
            Some((mean, std)) => {
                // √(−2 ln(1 − u₁)) · cos(2π u₂): 1 − u₁ lies in (0, 1].
                let radius = Scalar::Unop(
                    Unop::Sqrt,
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Const(-2.0)),
                        Box::new(Scalar::Unop(
                            Unop::Log,
                            Box::new(Scalar::Binop(
                                Binop::Sub,
                                Box::new(Scalar::Const(1.0)),
                                read(uniforms[0]),
                            )),
                        )),
                    )),
                );
                let angle = Scalar::Unop(
                    Unop::Cos,
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Const(std::f64::consts::TAU)),
                        read(uniforms[1]),
                    )),
                );
                Scalar::Ternop(
                    rcannl_ir::Ternop::Fma,
                    Box::new(Scalar::Const(std)),
                    Box::new(Scalar::Binop(Binop::Mul, Box::new(radius), Box::new(angle))),
                    Box::new(Scalar::Const(mean)),
                )
            }
        };
        let index: Vec<Index> = vars
            .iter()
            .zip(&node.padding)
            .map(|(var, (left, _))| Index::var(*var, *left as i64))
            .collect();
        // Computed in f64 (where every backend's math library agrees bit for bit), rounded once
        // into the parameter.
        let local = rcannl_ir::LocalId(0);
        let mut stmt = Stmt::For {
            var: fresh(),
            range: 1,
            body: vec![
                Stmt::Local {
                    id: local,
                    precision: Precision::F64,
                    value,
                },
                Stmt::Set {
                    node: node.id,
                    index,
                    value: Scalar::Local(local),
                },
            ],
        };
        for (var, dim) in vars.iter().zip(&node.dims).rev() {
            stmt = Stmt::For {
                var: *var,
                range: *dim,
                body: vec![stmt],
            };
        }
        body.push(stmt);
        body
    }

    pub(super) fn scratch(&mut self) -> u32 {
        let id = self.next_scratch;
        self.next_scratch += 1;
        id
    }
}
