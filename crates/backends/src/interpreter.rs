//! The reference interpreter: runs loop IR over [`Buffers`]. It is the oracle the other backends are tested against, so
//! it is written for obviousness, not speed.
//!
//! What a store computes in follows the loop IR's rule: the written precision's kind. Floats are
//! computed in the compute precision (f32 for f16, bf16 and f32; f64 for f64), every result
//! rounded to it (f32's transcendental functions computed by [`rcannl_ir::fmath`], as compiled
//! code computes them), and rounded to the node's precision on the store; integers in wrapping
//! `i64`, wrapped to their width on the store; 128-bit words as words.

use std::collections::HashMap;
use std::io::Write;

use rcannl_ir::value::{uniform, uniform1};
use rcannl_ir::{
    Binop, Index, Kind, LocalId, Lookup, LoopVar, NodeId, Precision, Routine, Scalar, Stmt, Symbol,
    Ternop, Unop, Value, Var, threefry4x32, threefry4x32_light,
};

pub use crate::buffers::Buffers;
use crate::buffers::Storage;
pub use crate::error::RunError;
use crate::error::{RunErrorKind, static_values};
use crate::trace;

fn error(kind: RunErrorKind, message: String) -> RunError {
    RunError::new(kind, message)
}

/// Runs `stmts`, which use no static index, over `buffers`.
pub fn run(stmts: &[Stmt], buffers: &mut Buffers) -> Result<(), RunError> {
    buffers.hand_to_host()?;
    buffers.allocate_all()?;
    let mut state = State {
        buffers,
        loops: HashMap::new(),
        statics: HashMap::new(),
        locals: HashMap::new(),
        trace: None,
    };
    state.block(stmts)
}

/// Runs `routine` over `buffers`, with a value for each of its static indices.
pub fn run_routine(
    routine: &Routine,
    buffers: &mut Buffers,
    statics: &HashMap<Symbol, i64>,
) -> Result<(), RunError> {
    run_writing(routine, buffers, statics, None)
}

/// [`run_routine`] of a routine in its tracing form ([`trace::tracing_form`]), writing a line to
/// `out` for every store into a buffer as it is made ([`trace::line`]). An error for a routine
/// not in that form, and for lines that cannot be written.
pub fn run_routine_traced(
    routine: &Routine,
    buffers: &mut Buffers,
    statics: &HashMap<Symbol, i64>,
    out: &mut dyn Write,
) -> Result<(), RunError> {
    if routine.body.iter().any(trace::untraceable) {
        return Err(error(
            RunErrorKind::Malformed,
            format!(
                "routine {}: traced, but not in its tracing form (a fill or a matrix product \
                 remains)",
                routine.name
            ),
        ));
    }
    run_writing(routine, buffers, statics, Some((&routine.name, out)))
}

/// Runs `routine` over `buffers`, writing each store's line to `trace` where given.
fn run_writing<'a>(
    routine: &Routine,
    buffers: &'a mut Buffers,
    statics: &HashMap<Symbol, i64>,
    trace: Option<(&'a str, &'a mut dyn Write)>,
) -> Result<(), RunError> {
    static_values(routine, statics)?;
    buffers.hand_to_host()?;
    buffers.allocate_all()?;
    let mut state = State {
        buffers,
        loops: HashMap::new(),
        statics: statics.clone(),
        locals: HashMap::new(),
        trace,
    };
    state.block(&routine.body)
}

struct State<'a> {
    buffers: &'a mut Buffers,
    loops: HashMap<LoopVar, i64>,
    statics: HashMap<Symbol, i64>,
    locals: HashMap<LocalId, (Precision, Value)>,
    /// Where stores are traced: the routine's name and where its lines go.
    trace: Option<(&'a str, &'a mut dyn Write)>,
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
                self.traced(*node, position)?;
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
                    return Err(error(
                        RunErrorKind::OutOfBounds,
                        format!("{node}: vector store at offset {start}"),
                    ));
                }
                for (k, value) in uniform(word, precision).into_iter().enumerate() {
                    let position = start as usize + k;
                    if position < len {
                        self.data(*node).set(position, value.stored_as(precision));
                        self.traced(*node, position)?;
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
            Stmt::Gemm { nest, .. } => self.block(nest)?,
            Stmt::ScatterAdd { target, value } => {
                let Some(index) = self.selected(target)? else {
                    return Ok(());
                };
                // The store an accumulation makes, at the selected cell.
                let sum = Scalar::Binop(
                    Binop::Add,
                    Box::new(Scalar::Get(target.node, index.clone())),
                    Box::new(value.clone()),
                );
                let precision = self.buffers.node(target.node)?.precision;
                let sum = self.eval(&sum, precision)?.stored_as(precision);
                let position = self.position(target.node, &index)?;
                self.data(target.node).set(position, sum);
                self.traced(target.node, position)?;
            }
            Stmt::SetLocal { id, value } => {
                let (precision, _) = *self.local(*id)?;
                let value = self.eval(value, precision)?.stored_as(precision);
                self.locals.insert(*id, (precision, value));
            }
        }
        Ok(())
    }

    /// Writes the line of the store just made into `node` at `position`, where stores are
    /// traced.
    fn traced(&mut self, node: NodeId, position: usize) -> Result<(), RunError> {
        let Some((routine, out)) = &mut self.trace else {
            return Ok(());
        };
        let value = (self.buffers.storage_mut(node))
            .expect("checked by the caller")
            .get(position);
        let info = self.buffers.node(node)?;
        let line = trace::line(routine, info, position, value);
        out.write_all(line.as_bytes()).map_err(|e| {
            error(
                RunErrorKind::Io,
                format!("the trace of stores of routine {routine}: {e}"),
            )
        })
    }

    fn data(&mut self, node: NodeId) -> &mut Storage {
        self.buffers
            .storage_mut(node)
            .expect("checked by the caller")
    }

    fn local(&self, id: LocalId) -> Result<&(Precision, Value), RunError> {
        self.locals.get(&id).ok_or_else(|| {
            error(
                RunErrorKind::Malformed,
                format!("the local {id} is read before it is declared"),
            )
        })
    }

    /// `scalar` computed in the kind of `precision`: floats in its compute precision (f32 for
    /// f16, bf16 and f32; f64 for f64), every value rounded to it as C computes.
    fn eval(&self, scalar: &Scalar, precision: Precision) -> Result<Value, RunError> {
        let value = self.eval_unrounded(scalar, precision)?;
        Ok(match value {
            Value::Float(x) => Value::Float(precision.compute().round(x)),
            other => other,
        })
    }

    fn eval_unrounded(&self, scalar: &Scalar, precision: Precision) -> Result<Value, RunError> {
        let kind = precision.kind();
        Ok(match scalar {
            Scalar::Const(c) => Value::Float(*c).to_kind(kind, Precision::I64),
            Scalar::Get(node, index) => {
                let from = self.buffers.node(*node)?.precision;
                let position = self.position(*node, index)?;
                self.buffers
                    .storage(*node)?
                    .get(position)
                    .to_compute(precision, from)
            }
            Scalar::Lookup(lookup) => {
                let from = self.buffers.node(lookup.node)?.precision;
                match self.selected(lookup)? {
                    Some(index) => {
                        let position = self.position(lookup.node, &index)?;
                        self.buffers
                            .storage(lookup.node)?
                            .get(position)
                            .to_compute(precision, from)
                    }
                    None => Value::Float(0.0).to_kind(kind, Precision::I64),
                }
            }
            Scalar::Embed(index) => {
                Value::Int(self.index_value(index)?).to_kind(kind, Precision::U32)
            }
            Scalar::Local(id) => {
                let (from, value) = *self.local(*id)?;
                value.to_compute(precision, from)
            }
            Scalar::Unop(Unop::Uint4x32ToPrecUniform1, x) => {
                let word = self
                    .eval(x, Precision::Uint4x32)?
                    .as_word(Precision::Uint4x32);
                uniform1(word, precision)
            }
            Scalar::Unop(op, x) => match (kind, self.eval(x, precision)?) {
                (Kind::Float, x) => Value::Float(op.apply_in(precision, x.as_f64())),
                (Kind::Int, x) => Value::Int(op.apply_int_in(precision, x.as_i64())),
                (Kind::Word, word) if *op == Unop::Identity => word,
                (Kind::Word, _) => return Err(undefined_on_words(op.name())),
            },
            Scalar::Binop(op @ (Binop::Threefry4x32 | Binop::Threefry4x32Light), a, b) => {
                if kind != Kind::Word {
                    return Err(error(
                        RunErrorKind::Malformed,
                        format!(
                            "threefry4x32 yields 128-bit words; a {precision} value cannot hold one"
                        ),
                    ));
                }
                let key = self.eval(a, precision)?.as_word(precision);
                let counter = self.eval(b, precision)?.as_word(precision);
                Value::Word(if *op == Binop::Threefry4x32 {
                    threefry4x32(key, counter)
                } else {
                    threefry4x32_light(key, counter)
                })
            }
            Scalar::Binop(op, a, b) => {
                let (a, b) = (self.eval(a, precision)?, self.eval(b, precision)?);
                match kind {
                    Kind::Float => Value::Float(op.apply_in(precision, a.as_f64(), b.as_f64())),
                    Kind::Int => Value::Int(
                        op.apply_int_in(precision, a.as_i64(), b.as_i64())
                            .ok_or_else(|| {
                                error(
                                    RunErrorKind::Malformed,
                                    format!("{op} has no meaning on integers ({precision})"),
                                )
                            })?,
                    ),
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

    /// The cell `lookup`'s id selects, as a buffer index, if it selects one: the id computed as
    /// a number in f64.
    fn selected(&self, lookup: &Lookup) -> Result<Option<Vec<Index>>, RunError> {
        let id = self.eval(&lookup.id, Precision::F64)?.as_f64();
        Ok(lookup.selected(id).map(|row| {
            let mut index = lookup.index.clone();
            index[lookup.axis].offset += row;
            index
        }))
    }

    fn index_value(&self, index: &Index) -> Result<i64, RunError> {
        let mut value = index.offset;
        for (c, var) in &index.terms {
            let v = match var {
                Var::Loop(var) => self.loops.get(var).copied(),
                Var::Static(symbol) => self.statics.get(symbol).copied(),
            }
            .ok_or_else(|| error(RunErrorKind::Malformed, format!("{var} has no value here")))?;
            value += c * v;
        }
        Ok(value)
    }

    /// The row-major buffer position of `index`, checked against the buffer's dims.
    fn position(&self, node: NodeId, index: &[Index]) -> Result<usize, RunError> {
        let info = self.buffers.node(node)?;
        let dims = info.buffer_dims();
        if index.len() != dims.len() {
            return Err(error(
                RunErrorKind::Malformed,
                format!(
                    "{node} '{}' has {} axes, indexed with {}",
                    info.label,
                    dims.len(),
                    index.len()
                ),
            ));
        }
        let mut position = 0usize;
        for (axis, (index, dim)) in index.iter().zip(&dims).enumerate() {
            let value = self.index_value(index)?;
            if value < 0 || value >= *dim as i64 {
                return Err(error(
                    RunErrorKind::OutOfBounds,
                    format!(
                        "{node} '{}': position {value} on axis {axis} is outside its buffer of {dim}",
                        info.label
                    ),
                ));
            }
            position = position * dim + value as usize;
        }
        Ok(position)
    }
}

fn undefined_on_words(op: &str) -> RunError {
    error(
        RunErrorKind::Malformed,
        format!("{op} is not defined on 128-bit words"),
    )
}
