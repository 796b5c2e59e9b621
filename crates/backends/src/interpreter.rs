//! The reference interpreter: runs loop IR over typed buffers (one array of the node's own element
//! type per node, margins included). It is the oracle the other backends are tested against, so
//! it is written for obviousness, not speed.
//!
//! What a store computes in follows the loop IR's rule: the written precision's kind. Floats are
//! computed in `f64` and rounded once, on the store; integers in wrapping `i64`, wrapped to their
//! width on the store; 128-bit words as words.

use std::collections::HashMap;

use half::{bf16, f16};
use rcannl_ir::value::{uniform, uniform1};
use rcannl_ir::{
    Binop, Index, Kind, LocalId, LoopVar, MemoryMode, NodeId, Precision, Routine, Scalar, Stmt,
    Symbol, TensorNode, Ternop, Unop, Value, Var, threefry4x32,
};

/// Why a routine cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    pub message: String,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RunError {}

fn error(message: String) -> RunError {
    RunError { message }
}

/// The cells of one buffer, in the node's element type.
#[derive(Debug, Clone)]
enum Data {
    U8(Vec<u8>),
    I8(Vec<i8>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Word(Vec<[u32; 4]>),
}

impl Data {
    fn zeroed(precision: Precision, len: usize) -> Data {
        match precision {
            Precision::U8 => Data::U8(vec![0; len]),
            Precision::I8 => Data::I8(vec![0; len]),
            Precision::I32 => Data::I32(vec![0; len]),
            Precision::U32 => Data::U32(vec![0; len]),
            Precision::I64 => Data::I64(vec![0; len]),
            Precision::F16 => Data::F16(vec![f16::ZERO; len]),
            Precision::Bf16 => Data::Bf16(vec![bf16::ZERO; len]),
            Precision::F32 => Data::F32(vec![0.0; len]),
            Precision::F64 => Data::F64(vec![0.0; len]),
            Precision::Uint4x32 => Data::Word(vec![[0; 4]; len]),
        }
    }

    fn get(&self, i: usize) -> Value {
        match self {
            Data::U8(d) => Value::Int(i64::from(d[i])),
            Data::I8(d) => Value::Int(i64::from(d[i])),
            Data::I32(d) => Value::Int(i64::from(d[i])),
            Data::U32(d) => Value::Int(i64::from(d[i])),
            Data::I64(d) => Value::Int(d[i]),
            Data::F16(d) => Value::Float(d[i].to_f64()),
            Data::Bf16(d) => Value::Float(d[i].to_f64()),
            Data::F32(d) => Value::Float(f64::from(d[i])),
            Data::F64(d) => Value::Float(d[i]),
            Data::Word(d) => Value::Word(d[i]),
        }
    }

    /// Stores `value`, already converted by [`Value::stored_as`] to this buffer's precision.
    fn set(&mut self, i: usize, value: Value) {
        match self {
            Data::U8(d) => d[i] = value.as_i64() as u8,
            Data::I8(d) => d[i] = value.as_i64() as i8,
            Data::I32(d) => d[i] = value.as_i64() as i32,
            Data::U32(d) => d[i] = value.as_i64() as u32,
            Data::I64(d) => d[i] = value.as_i64(),
            Data::F16(d) => d[i] = f16::from_f64(value.as_f64()),
            Data::Bf16(d) => d[i] = bf16::from_f64(value.as_f64()),
            Data::F32(d) => d[i] = value.as_f64() as f32,
            Data::F64(d) => d[i] = value.as_f64(),
            Data::Word(d) => d[i] = value.as_word(Precision::Uint4x32),
        }
    }
}

/// The buffers of a routine's nodes: each a row-major array over the node's buffer dims.
#[derive(Debug, Clone, Default)]
pub struct Buffers {
    nodes: HashMap<NodeId, TensorNode>,
    data: HashMap<NodeId, Data>,
}

impl Buffers {
    /// Allocates a zeroed buffer for each node.
    pub fn new(nodes: impl IntoIterator<Item = TensorNode>) -> Buffers {
        let mut buffers = Buffers::default();
        for node in nodes {
            buffers
                .data
                .insert(node.id, Data::zeroed(node.precision, node.buffer_len()));
            buffers.nodes.insert(node.id, node);
        }
        buffers
    }

    /// Zeroed buffers for every node of `routine` that has storage (all but virtual ones).
    pub fn for_routine(routine: &Routine) -> Buffers {
        Buffers::new(
            routine
                .nodes
                .values()
                .filter(|node| node.memory_mode != Some(MemoryMode::Virtual))
                .cloned(),
        )
    }

    pub fn nodes(&self) -> &HashMap<NodeId, TensorNode> {
        &self.nodes
    }

    fn node(&self, node: NodeId) -> Result<&TensorNode, RunError> {
        self.nodes
            .get(&node)
            .ok_or_else(|| error(format!("no buffer for {node}")))
    }

    /// The whole buffer as numbers, margins included.
    pub fn buffer(&self, node: NodeId) -> Vec<f64> {
        let data = &self.data[&node];
        (0..self.nodes[&node].buffer_len())
            .map(|i| data.get(i).as_f64())
            .collect()
    }

    /// Sets the cells inside the margins (row-major over the node's dims) to `values`, stored as
    /// the node's precision holds them.
    pub fn set_cells(&mut self, node: NodeId, values: &[Value]) -> Result<(), RunError> {
        let info = self.node(node)?;
        let n = info.len();
        if values.len() != n {
            return Err(error(format!(
                "{node} '{}' has {n} cells, {} values given",
                info.label,
                values.len()
            )));
        }
        let positions: Vec<usize> = (0..n).map(|cell| interior_offset(info, cell)).collect();
        let precision = info.precision;
        let data = self.data.get_mut(&node).expect("allocated");
        for (position, value) in positions.into_iter().zip(values) {
            data.set(position, value.stored_as(precision));
        }
        Ok(())
    }

    /// [`Buffers::set_cells`] from numbers.
    pub fn set_values(&mut self, node: NodeId, values: &[f64]) -> Result<(), RunError> {
        let cells: Vec<Value> = values.iter().map(|x| Value::Float(*x)).collect();
        self.set_cells(node, &cells)
    }

    /// The cells inside the margins, row-major over the node's dims.
    pub fn cells(&self, node: NodeId) -> Vec<Value> {
        let info = &self.nodes[&node];
        (0..info.len())
            .map(|cell| self.data[&node].get(interior_offset(info, cell)))
            .collect()
    }

    /// The cells inside the margins as numbers (a word as its first 32-bit word).
    pub fn values(&self, node: NodeId) -> Vec<f64> {
        self.cells(node).into_iter().map(Value::as_f64).collect()
    }
}

/// The buffer position of the `cell`-th interior cell (row-major over the unpadded dims).
fn interior_offset(node: &TensorNode, cell: usize) -> usize {
    let buffer_dims = node.buffer_dims();
    let mut rest = cell;
    let mut position = 0;
    let mut stride = 1;
    for axis in (0..node.dims.len()).rev() {
        let coordinate = rest % node.dims[axis] + node.padding[axis].0;
        rest /= node.dims[axis];
        position += coordinate * stride;
        stride *= buffer_dims[axis];
    }
    position
}

/// Runs `stmts`, which use no static index, over `buffers`.
pub fn run(stmts: &[Stmt], buffers: &mut Buffers) -> Result<(), RunError> {
    let mut state = State {
        buffers,
        loops: HashMap::new(),
        statics: HashMap::new(),
        locals: HashMap::new(),
    };
    state.block(stmts)
}

/// Runs `routine` over `buffers`, with a value for each of its static indices.
pub fn run_routine(
    routine: &Routine,
    buffers: &mut Buffers,
    statics: &HashMap<Symbol, i64>,
) -> Result<(), RunError> {
    for (symbol, range) in &routine.statics {
        match statics.get(symbol) {
            Some(value) if (0..*range as i64).contains(value) => {}
            Some(value) => {
                return Err(error(format!(
                    "routine {}: the static index s{} is {value}, outside 0..{range}",
                    routine.name, symbol.0
                )));
            }
            None => {
                return Err(error(format!(
                    "routine {}: no value given for the static index s{}",
                    routine.name, symbol.0
                )));
            }
        }
    }
    let mut state = State {
        buffers,
        loops: HashMap::new(),
        statics: statics.clone(),
        locals: HashMap::new(),
    };
    state.block(&routine.body)
}

struct State<'a> {
    buffers: &'a mut Buffers,
    loops: HashMap<LoopVar, i64>,
    statics: HashMap<Symbol, i64>,
    locals: HashMap<LocalId, (Precision, Value)>,
}

impl State<'_> {
    fn block(&mut self, stmts: &[Stmt]) -> Result<(), RunError> {
        for stmt in stmts {
            self.exec(stmt)?;
        }
        Ok(())
    }

    fn exec(&mut self, stmt: &Stmt) -> Result<(), RunError> {
        match stmt {
            Stmt::For { var, range, body } => {
                for i in 0..*range as i64 {
                    self.loops.insert(*var, i);
                    self.block(body)?;
                }
                self.loops.remove(var);
            }
            Stmt::Set { node, index, value } => {
                let precision = self.buffers.node(*node)?.precision;
                let value = self.eval(value, precision)?.stored_as(precision);
                let position = self.position(*node, index)?;
                self.data(*node).set(position, value);
            }
            Stmt::SetVec {
                node,
                offset,
                op: _,
                arg,
            } => {
                let info = self.buffers.node(*node)?;
                let (precision, len) = (info.precision, info.buffer_len());
                let word = self
                    .eval(arg, Precision::Uint4x32)?
                    .as_word(Precision::Uint4x32);
                let start = self.index_value(offset)?;
                if start < 0 {
                    return Err(error(format!("{node}: vector store at offset {start}")));
                }
                let data = self.data(*node);
                for (k, value) in uniform(word, precision).into_iter().enumerate() {
                    let position = start as usize + k;
                    if position < len {
                        data.set(position, value.stored_as(precision));
                    }
                }
            }
            Stmt::Fill { node, value } => {
                let info = self.buffers.node(*node)?;
                let value = Value::Float(*value).stored_as(info.precision);
                let len = info.buffer_len();
                let data = self.data(*node);
                for i in 0..len {
                    data.set(i, value);
                }
            }
            Stmt::FillMargins { node, value } => {
                let info = self.buffers.node(*node)?.clone();
                let value = Value::Float(*value).stored_as(info.precision);
                let buffer_dims = info.buffer_dims();
                let data = self.data(*node);
                for i in 0..info.buffer_len() {
                    let mut rest = i;
                    let mut in_margin = false;
                    for axis in (0..buffer_dims.len()).rev() {
                        let coordinate = rest % buffer_dims[axis];
                        rest /= buffer_dims[axis];
                        let (before, _) = info.padding[axis];
                        in_margin |= coordinate < before || coordinate >= before + info.dims[axis];
                    }
                    if in_margin {
                        data.set(i, value);
                    }
                }
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                let value = self.eval(value, *precision)?.stored_as(*precision);
                self.locals.insert(*id, (*precision, value));
            }
            Stmt::SetLocal { id, value } => {
                let (precision, _) = *self.local(*id)?;
                let value = self.eval(value, precision)?.stored_as(precision);
                self.locals.insert(*id, (precision, value));
            }
        }
        Ok(())
    }

    fn data(&mut self, node: NodeId) -> &mut Data {
        self.buffers.data.get_mut(&node).expect("allocated")
    }

    fn local(&self, id: LocalId) -> Result<&(Precision, Value), RunError> {
        self.locals
            .get(&id)
            .ok_or_else(|| error(format!("the local {id} is read before it is declared")))
    }

    /// `scalar` computed in the kind of `precision`.
    fn eval(&self, scalar: &Scalar, precision: Precision) -> Result<Value, RunError> {
        let kind = precision.kind();
        Ok(match scalar {
            Scalar::Const(c) => Value::Float(*c).to_kind(kind, Precision::I64),
            Scalar::Get(node, index) => {
                let from = self.buffers.node(*node)?.precision;
                let position = self.position(*node, index)?;
                self.buffers.data[node].get(position).to_kind(kind, from)
            }
            Scalar::Embed(index) => {
                Value::Int(self.index_value(index)?).to_kind(kind, Precision::U32)
            }
            Scalar::Local(id) => {
                let (from, value) = *self.local(*id)?;
                value.to_kind(kind, from)
            }
            Scalar::Unop(Unop::Uint4x32ToPrecUniform1, x) => {
                let word = self
                    .eval(x, Precision::Uint4x32)?
                    .as_word(Precision::Uint4x32);
                uniform1(word, precision)
            }
            Scalar::Unop(op, x) => match (kind, self.eval(x, precision)?) {
                (Kind::Float, x) => Value::Float(op.apply(x.as_f64())),
                (Kind::Int, x) => Value::Int(op.apply_int(x.as_i64())),
                (Kind::Word, word) if *op == Unop::Identity => word,
                (Kind::Word, _) => return Err(undefined_on_words(op.name())),
            },
            Scalar::Binop(Binop::Threefry4x32, a, b) => {
                if kind != Kind::Word {
                    return Err(error(format!(
                        "threefry4x32 yields 128-bit words; a {precision} value cannot hold one"
                    )));
                }
                let key = self.eval(a, precision)?.as_word(precision);
                let counter = self.eval(b, precision)?.as_word(precision);
                Value::Word(threefry4x32(key, counter))
            }
            Scalar::Binop(op, a, b) => {
                let (a, b) = (self.eval(a, precision)?, self.eval(b, precision)?);
                match kind {
                    Kind::Float => Value::Float(op.apply(a.as_f64(), b.as_f64())),
                    Kind::Int => {
                        Value::Int(op.apply_int(a.as_i64(), b.as_i64()).ok_or_else(|| {
                            error(format!("{op}: integer division by zero ({precision})"))
                        })?)
                    }
                    Kind::Word => match op {
                        Binop::Arg1 => a,
                        Binop::Arg2 => b,
                        _ => return Err(undefined_on_words(op.name())),
                    },
                }
            }
            Scalar::Ternop(Ternop::Where, condition, then, otherwise) => {
                // The condition keeps its own kind: any nonzero number selects `then`.
                let chosen = if self.eval(condition, Precision::F64)?.as_f64() != 0.0 {
                    then
                } else {
                    otherwise
                };
                self.eval(chosen, precision)?
            }
            Scalar::Ternop(op, a, b, c) => {
                let (a, b, c) = (
                    self.eval(a, precision)?,
                    self.eval(b, precision)?,
                    self.eval(c, precision)?,
                );
                match kind {
                    Kind::Float => Value::Float(op.apply(a.as_f64(), b.as_f64(), c.as_f64())),
                    Kind::Int => Value::Int(op.apply_int(a.as_i64(), b.as_i64(), c.as_i64())),
                    Kind::Word => return Err(undefined_on_words(op.name())),
                }
            }
        })
    }

    fn index_value(&self, index: &Index) -> Result<i64, RunError> {
        let mut value = index.offset;
        for (c, var) in &index.terms {
            let v = match var {
                Var::Loop(var) => self.loops.get(var).copied(),
                Var::Static(symbol) => self.statics.get(symbol).copied(),
            }
            .ok_or_else(|| error(format!("{var} has no value here")))?;
            value += c * v;
        }
        Ok(value)
    }

    /// The row-major buffer position of `index`, checked against the buffer's dims.
    fn position(&self, node: NodeId, index: &[Index]) -> Result<usize, RunError> {
        let info = self.buffers.node(node)?;
        let dims = info.buffer_dims();
        if index.len() != dims.len() {
            return Err(error(format!(
                "{node} '{}' has {} axes, indexed with {}",
                info.label,
                dims.len(),
                index.len()
            )));
        }
        let mut position = 0usize;
        for (axis, (index, dim)) in index.iter().zip(&dims).enumerate() {
            let value = self.index_value(index)?;
            if value < 0 || value >= *dim as i64 {
                return Err(error(format!(
                    "{node} '{}': position {value} on axis {axis} is outside its buffer of {dim}",
                    info.label
                )));
            }
            position = position * dim + value as usize;
        }
        Ok(position)
    }
}

fn undefined_on_words(op: &str) -> RunError {
    error(format!("{op} is not defined on 128-bit words"))
}
