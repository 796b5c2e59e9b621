//! C source from a routine's loop IR.
//!
//! The routine's top-level statements are grouped into kernels, each a C function
//! `void rc_kN(void *const *buffers, const int64_t *statics, int64_t begin, int64_t end)`. A
//! top-level loop whose iterations write disjoint cells and read nothing another iteration writes
//! is a kernel of its own that runs `begin..end` of its range, so that the caller can split the
//! range across threads (each cell is then computed by the same operations in the same order, so
//! the result does not depend on the split). Other statements are gathered into serial kernels
//! (`begin` and `end` ignored). A matrix product (`Stmt::Gemm`) is a step of its own, run by the
//! `gemm` crate; its nest is only checked.
//!
//! Values are computed as the interpreter computes them, but in C's own types: f16, bf16 and f32
//! in `float`, f64 in `double`, integers in wrapping `int64_t`, words as `rc_word`; f16 and bf16
//! are stored as their bits and converted by the prelude's round-to-nearest-even helpers. f32's
//! transcendental functions are the prelude's (`rc_expf` …), which the interpreter mirrors bit
//! for bit (`rcannl_ir::fmath`); a constant exponent of 1, 2, 3 or −1 becomes a product or a
//! quotient, as `pow` defines it.

use std::collections::HashMap;
use std::fmt::Write;

use crate::nests::{Group, index_bounds, kernel_groups};

use rcannl_ir::optimize::hoist::hoist_invariants_into_nests;
use rcannl_ir::{
    Binop, GemmPlan, Index, Kind, LocalId, Lookup, LoopVar, MemoryMode, NodeId, Precision, Routine,
    Scalar, Stmt, Symbol, Ternop, Unop, Value, Var,
};

/// The definitions every generated routine starts with.
pub const PRELUDE: &str = include_str!("prelude.c");

/// The parameters of every kernel function, as the source spells them.
pub const KERNEL_PARAMETERS: &str =
    "(void *const *buffers, const int64_t *statics, int64_t begin, int64_t end)";

/// Why a routine cannot be turned into C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenError {
    /// What cannot be generated, in words (what `Display` prints).
    pub message: String,
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodegenError {}

fn error(message: String) -> CodegenError {
    CodegenError { message }
}

/// One generated C function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The C function's name, the symbol it is loaded by (`rc_k0`, …).
    pub name: String,
    /// The range of the outer loop the caller may split across threads; `None` for a serial
    /// kernel.
    pub parallel: Option<usize>,
    /// An estimate of the work of one iteration of the split loop (cells written times loop
    /// trips inside), to decide whether splitting pays.
    pub work_per_iteration: usize,
}

/// One step of a compiled routine, run in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A call of a generated kernel function.
    Kernel(Kernel),
    /// A matrix product, run by the `gemm` crate instead of C.
    Gemm(GemmPlan),
}

/// The C source of a routine and how to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The C source: [`PRELUDE`], then the kernel functions.
    pub source: String,
    /// What running the routine does, in order.
    pub steps: Vec<Step>,
    /// The nodes whose buffers are passed, in the order of the `buffers` argument.
    pub buffers: Vec<NodeId>,
    /// The static indices, in the order of the `statics` argument.
    pub statics: Vec<Symbol>,
}

/// The C type values of a precision are computed in.
fn compute_type(precision: Precision) -> &'static str {
    match precision {
        Precision::F16 | Precision::Bf16 | Precision::F32 => "float",
        Precision::F64 => "double",
        Precision::Uint4x32 => "rc_word",
        _ => "int64_t",
    }
}

/// The C type cells of a precision are stored as.
fn storage_type(precision: Precision) -> &'static str {
    match precision {
        Precision::U8 => "uint8_t",
        Precision::I8 => "int8_t",
        Precision::I32 => "int32_t",
        Precision::U32 => "uint32_t",
        Precision::I64 => "int64_t",
        Precision::F16 | Precision::Bf16 => "uint16_t",
        Precision::F32 => "float",
        Precision::F64 => "double",
        Precision::Uint4x32 => "rc_word",
    }
}

/// The suffix of the prelude's helpers for a precision.
fn suffix(precision: Precision) -> String {
    precision.to_string()
}

/// A C literal of type `compute_type(precision)` for the constant `c`, as the interpreter reads a
/// constant in that kind.
fn literal(c: f64, precision: Precision) -> String {
    match Value::Float(c).to_kind(precision.kind(), Precision::I64) {
        Value::Float(x) => float_literal(x, precision == Precision::F64),
        Value::Int(i) => int_literal(i),
        Value::Word(w) => word_literal(w),
    }
}

fn float_literal(x: f64, double: bool) -> String {
    let f = if double { "" } else { "f" };
    if x.is_nan() {
        "NAN".to_owned()
    } else if x.is_infinite() {
        format!("{}INFINITY", if x < 0.0 { "-" } else { "" })
    } else if double {
        format!("{x:e}")
    } else {
        format!("{:e}{f}", x as f32)
    }
}

fn int_literal(i: i64) -> String {
    if i == i64::MIN {
        "INT64_MIN".to_owned()
    } else {
        format!("INT64_C({i})")
    }
}

fn word_literal(w: [u32; 4]) -> String {
    format!(
        "((rc_word){{{{{}u, {}u, {}u, {}u}}}})",
        w[0], w[1], w[2], w[3]
    )
}

/// A stored cell's literal: the constant as the node's precision holds it, in its storage type.
fn storage_literal(c: f64, precision: Precision) -> String {
    match Value::Float(c).stored_as(precision) {
        Value::Float(x) => match precision {
            Precision::F16 => format!("{}u", half::f16::from_f64(x).to_bits()),
            Precision::Bf16 => format!("{}u", half::bf16::from_f64(x).to_bits()),
            _ => float_literal(x, precision == Precision::F64),
        },
        Value::Int(i) => int_literal(i),
        Value::Word(w) => word_literal(w),
    }
}

/// `value`, of type `compute_type(precision)`, as a cell of `precision` stores it.
fn to_storage(value: &str, precision: Precision) -> String {
    match precision {
        Precision::F16 => format!("rc_f32_to_f16({value})"),
        Precision::Bf16 => format!("rc_f32_to_bf16({value})"),
        Precision::F32 | Precision::F64 | Precision::I64 | Precision::Uint4x32 => value.to_owned(),
        _ => format!("({})({value})", storage_type(precision)),
    }
}

/// A stored cell, in `compute_type(precision)`.
fn from_storage(cell: &str, precision: Precision) -> String {
    match precision {
        Precision::F16 => format!("rc_f16_to_f32({cell})"),
        Precision::Bf16 => format!("rc_bf16_to_f32({cell})"),
        Precision::F32 | Precision::F64 | Precision::Uint4x32 => cell.to_owned(),
        _ => format!("(int64_t)({cell})"),
    }
}

/// `value`, of type `compute_type(precision)`, rounded to what a cell of `precision` holds but
/// kept in the compute type (a local's store).
fn round_to(value: &str, precision: Precision) -> String {
    match precision {
        Precision::F16
        | Precision::Bf16
        | Precision::U8
        | Precision::I8
        | Precision::I32
        | Precision::U32 => from_storage(&to_storage(value, precision), precision),
        _ => value.to_owned(),
    }
}

/// `value`, held as a value of precision `from` in `compute_type(from)`, converted to the kind
/// of `to` (in `compute_type(to)`), as `Value::to_kind` converts.
fn convert(value: &str, from: Precision, to: Precision) -> String {
    let target = compute_type(to);
    if compute_type(from) == target {
        return value.to_owned();
    }
    match (from.kind(), to.kind()) {
        (Kind::Float, Kind::Float) | (Kind::Int, Kind::Float) => {
            format!("({target})({value})")
        }
        (Kind::Float, Kind::Int) => format!("rc_f2i((double)({value}))"),
        (Kind::Word, _) => format!("({target})({value}).w[0]"),
        (_, Kind::Word) => match from {
            Precision::F16 => format!("rc_word_bits(rc_f32_to_f16({value}))"),
            Precision::Bf16 => format!("rc_word_bits(rc_f32_to_bf16({value}))"),
            Precision::F32 => format!("rc_word_f32({value})"),
            Precision::F64 => format!("rc_word_f64({value})"),
            Precision::I32 | Precision::U32 => format!("rc_word_u32((uint32_t)({value}))"),
            Precision::I64 => format!("rc_word_i64({value})"),
            _ => format!("rc_word_bits((uint32_t)({value}))"),
        },
        // Integers all compute in `int64_t`: returned above.
        (Kind::Int, Kind::Int) => value.to_owned(),
    }
}

fn index_expr(index: &Index) -> String {
    let mut parts: Vec<String> = index
        .terms
        .iter()
        .map(|(c, var)| match c {
            1 => var_name(*var),
            c => format!("{c}*{}", var_name(*var)),
        })
        .collect();
    if index.offset != 0 || parts.is_empty() {
        parts.push(index.offset.to_string());
    }
    format!("({})", parts.join(" + "))
}

fn var_name(var: Var) -> String {
    match var {
        Var::Loop(LoopVar(v)) => format!("l{v}"),
        Var::Static(Symbol(s)) => format!("s{s}"),
    }
}

/// What the generator knows of the routine while it writes statements.
struct Writer<'a> {
    routine: &'a Routine,
    locals: HashMap<LocalId, Precision>,
    /// The ranges of the loops around the statement being written.
    loops: HashMap<LoopVar, usize>,
    /// Whether accesses are checked against their axes; off while writing a coalesced nest,
    /// whose accesses were checked on the nest as written.
    checking: bool,
}

impl Writer<'_> {
    fn precision(&self, node: NodeId) -> Result<Precision, CodegenError> {
        self.routine
            .nodes
            .get(&node)
            .map(|n| n.precision)
            .ok_or_else(|| error(format!("codegen: unknown node {node}")))
    }

    /// The row-major flat offset of `index` in `node`'s buffer.
    fn offset(&self, node: NodeId, index: &[Index]) -> Result<String, CodegenError> {
        let info = &self.routine.nodes[&node];
        let dims = info.buffer_dims();
        if dims.len() != index.len() {
            return Err(error(format!(
                "codegen: {node} '{}' has {} axes, indexed with {}",
                info.label,
                dims.len(),
                index.len()
            )));
        }
        let mut offset = String::new();
        for (axis, (position, dim)) in index.iter().zip(&dims).enumerate() {
            if let Some((low, high)) = self.bounds(position)?
                && (low < 0 || (self.checking && high >= *dim as i128))
            {
                return Err(error(format!(
                    "codegen: {node} '{}' is addressed at {low}..={high} on axis {axis}, outside \
                     its buffer of {dim}",
                    info.label
                )));
            }
            offset = if axis == 0 {
                index_expr(position)
            } else {
                format!("({offset}*{dim} + {})", index_expr(position))
            };
        }
        Ok(if offset.is_empty() {
            "0".to_owned()
        } else {
            offset
        })
    }

    /// The flat offset of the cell `lookup`'s id selects (the axis's first cell where it selects
    /// none), and the C condition that it selects one. Every cell of the axis is checked here,
    /// so that whatever the data holds, the access stays inside the buffer.
    fn lookup_offset(&self, lookup: &Lookup) -> Result<(String, String), CodegenError> {
        let node = lookup.node;
        let info = self.routine.nodes.get(&node).ok_or_else(|| {
            error(format!(
                "codegen: the routine reads {node}, which it does not declare"
            ))
        })?;
        let Some(last) = lookup.last_cell() else {
            return Err(error(format!(
                "codegen: a lookup into {node} '{}' selects along axis {}, which it lacks",
                info.label, lookup.axis
            )));
        };
        let stride = lookup.stride(&info.buffer_dims());
        let base = self.offset(node, &lookup.index)?;
        self.offset(node, &last)?;
        let id = self.expr(&lookup.id, Precision::F64)?;
        let size = lookup.size;
        Ok((
            format!("({base} + rc_row({id}, {size})*{stride})"),
            format!("rc_row_ok({id}, {size})"),
        ))
    }

    /// [`index_bounds`] under the loops around the statement being written.
    fn bounds(&self, index: &Index) -> Result<Option<(i128, i128)>, CodegenError> {
        index_bounds(index, &self.loops, &self.routine.statics)
            .map_err(|e| error(format!("codegen: {e}")))
    }

    /// `scalar` computed in the kind of `precision`, as C of type `compute_type(precision)`.
    fn expr(&self, scalar: &Scalar, precision: Precision) -> Result<String, CodegenError> {
        let ty = compute_type(precision);
        let kind = precision.kind();
        let double = precision == Precision::F64;
        Ok(match scalar {
            Scalar::Const(c) => literal(*c, precision),
            Scalar::Get(node, index) => {
                let from = self.precision(*node)?;
                let cell = format!("{node}[{}]", self.offset(*node, index)?);
                convert(&from_storage(&cell, from), from, precision)
            }
            Scalar::Lookup(lookup) => {
                let from = self.precision(lookup.node)?;
                let (offset, ok) = self.lookup_offset(lookup)?;
                let cell = format!("{}[{offset}]", lookup.node);
                format!(
                    "{}({ok}, {}, {})",
                    select(precision),
                    convert(&from_storage(&cell, from), from, precision),
                    literal(0.0, precision)
                )
            }
            Scalar::Embed(index) => convert(
                &format!("(int64_t){}", index_expr(index)),
                Precision::U32,
                precision,
            ),
            Scalar::Local(id) => {
                let from = *self
                    .locals
                    .get(id)
                    .ok_or_else(|| error(format!("codegen: {id} is read before it is declared")))?;
                convert(&id.to_string(), from, precision)
            }
            Scalar::Unop(Unop::Uint4x32ToPrecUniform1, x) => {
                let word = self.expr(x, Precision::Uint4x32)?;
                format!("rc_uniform_{}({word}, 0)", suffix(precision))
            }
            Scalar::Unop(op, x) => {
                let x = self.expr(x, precision)?;
                match kind {
                    Kind::Float => float_unop(*op, &x, ty, double),
                    Kind::Int => int_unop(*op, &x),
                    Kind::Word if *op == Unop::Identity => x,
                    Kind::Word => {
                        return Err(error(format!(
                            "codegen: {op} is not defined on 128-bit words"
                        )));
                    }
                }
            }
            Scalar::Binop(Binop::Pow, base, exponent) if kind == Kind::Float => {
                if let Scalar::Const(c) = **exponent
                    && let Some(power) = constant_power(&self.expr(base, precision)?, c, double)
                {
                    return Ok(power);
                }
                let (a, b) = (self.expr(base, precision)?, self.expr(exponent, precision)?);
                float_binop(Binop::Pow, &a, &b, ty, double)
            }
            Scalar::Binop(op, a, b) => {
                let (a, b) = (self.expr(a, precision)?, self.expr(b, precision)?);
                match (kind, op) {
                    (_, Binop::Arg1) => a,
                    (_, Binop::Arg2) => b,
                    (Kind::Word, Binop::Threefry4x32) => format!("rc_threefry({a}, {b}, 20)"),
                    (Kind::Word, Binop::Threefry4x32Light) => {
                        format!("rc_threefry({a}, {b}, 2)")
                    }
                    (_, Binop::Threefry4x32 | Binop::Threefry4x32Light) => {
                        return Err(error(format!(
                            "codegen: threefry4x32 yields 128-bit words; a {precision} value \
                             cannot hold one"
                        )));
                    }
                    (Kind::Float, op) => float_binop(*op, &a, &b, ty, double),
                    (Kind::Int, op) => int_binop(*op, &a, &b),
                    (Kind::Word, op) => {
                        return Err(error(format!(
                            "codegen: {op} is not defined on 128-bit words"
                        )));
                    }
                }
            }
            Scalar::Ternop(Ternop::Where, condition, then, otherwise) => {
                let condition = self.expr(condition, Precision::F64)?;
                format!(
                    "{}(({condition}) != 0, {}, {})",
                    select(precision),
                    self.expr(then, precision)?,
                    self.expr(otherwise, precision)?
                )
            }
            Scalar::Ternop(op, a, b, c) => {
                let (a, b, c) = (
                    self.expr(a, precision)?,
                    self.expr(b, precision)?,
                    self.expr(c, precision)?,
                );
                match (kind, op) {
                    (Kind::Float, Ternop::Fma) => {
                        format!("{}({a}, {b}, {c})", if double { "fma" } else { "fmaf" })
                    }
                    (Kind::Float, _) => format!("({a} * {b} * {c})"),
                    (Kind::Int, Ternop::Fma) => format!("rc_iadd(rc_imul({a}, {b}), {c})"),
                    (Kind::Int, _) => format!("rc_imul(rc_imul({a}, {b}), {c})"),
                    (Kind::Word, op) => {
                        return Err(error(format!(
                            "codegen: {op} is not defined on 128-bit words"
                        )));
                    }
                }
            }
        })
    }

    fn stmt(&mut self, stmt: &Stmt, out: &mut String, depth: usize) -> Result<(), CodegenError> {
        let pad = "  ".repeat(depth);
        match stmt {
            Stmt::For { var, range, body } => {
                if let Some((chain, inner)) = self.coalescible(*var, *range, body) {
                    return self.coalesced(&chain, inner, out, depth);
                }
                if let Some(id) = summed_local(body, &self.locals) {
                    writeln!(out, "{pad}#pragma omp simd reduction(+:{id})")
                        .expect("writing to a string");
                }
                writeln!(
                    out,
                    "{pad}for (int64_t {var} = 0; {var} < {range}; ++{var}) {{"
                )
                .expect("writing to a string");
                self.loops.insert(*var, *range);
                self.body(body, out, depth + 1)?;
                self.loops.remove(var);
                writeln!(out, "{pad}}}").expect("writing to a string");
            }
            Stmt::Set { node, index, value } => {
                let precision = self.precision(*node)?;
                let value = self.expr(value, precision)?;
                writeln!(
                    out,
                    "{pad}{node}[{}] = {};",
                    self.offset(*node, index)?,
                    to_storage(&value, precision)
                )
                .expect("writing to a string");
            }
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => {
                let info = &self.routine.nodes[node];
                let precision = info.precision;
                let word = self.expr(arg, Precision::Uint4x32)?;
                // Cells past the end are skipped at run time; none may lie before the start.
                if self.bounds(offset)?.is_some_and(|(low, _)| low < 0) {
                    return Err(error(format!(
                        "codegen: a vector store into {node} '{}' starts before its buffer",
                        info.label
                    )));
                }
                writeln!(
                    out,
                    "{pad}{{ rc_word w = {word}; int64_t o = {};",
                    index_expr(offset)
                )
                .expect("writing to a string");
                for k in 0..op.length(precision) {
                    let value = format!("rc_uniform_{}(w, {k})", suffix(precision));
                    writeln!(
                        out,
                        "{pad}  if (o + {k} < {}) {node}[o + {k}] = {};",
                        info.buffer_len(),
                        to_storage(&value, precision)
                    )
                    .expect("writing to a string");
                }
                writeln!(out, "{pad}}}").expect("writing to a string");
            }
            Stmt::Fill { node, value } => {
                let info = &self.routine.nodes[node];
                writeln!(
                    out,
                    "{pad}for (int64_t i = 0; i < {}; ++i) {node}[i] = {};",
                    info.buffer_len(),
                    storage_literal(*value, info.precision)
                )
                .expect("writing to a string");
            }
            Stmt::FillMargins { node, value } => {
                let info = &self.routine.nodes[node];
                let dims = info.buffer_dims();
                let mut outside = Vec::new();
                let mut flat = String::new();
                for (axis, (dim, (before, _))) in dims.iter().zip(&info.padding).enumerate() {
                    writeln!(
                        out,
                        "{pad}for (int64_t m{axis} = 0; m{axis} < {dim}; ++m{axis})"
                    )
                    .expect("writing to a string");
                    outside.push(format!(
                        "m{axis} < {before} || m{axis} >= {}",
                        before + info.dims[axis]
                    ));
                    flat = if axis == 0 {
                        format!("m{axis}")
                    } else {
                        format!("({flat}*{dim} + m{axis})")
                    };
                }
                if !outside.is_empty() {
                    writeln!(
                        out,
                        "{pad}  if ({}) {node}[{flat}] = {};",
                        outside.join(" || "),
                        storage_literal(*value, info.precision)
                    )
                    .expect("writing to a string");
                }
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                let value = self.expr(value, *precision)?;
                writeln!(
                    out,
                    "{pad}{} {id} = {};",
                    compute_type(*precision),
                    round_to(&value, *precision)
                )
                .expect("writing to a string");
                self.locals.insert(*id, *precision);
            }
            Stmt::SetLocal { id, value } => {
                let precision = *self
                    .locals
                    .get(id)
                    .ok_or_else(|| error(format!("codegen: {id} is set before it is declared")))?;
                let value = self.expr(value, precision)?;
                writeln!(out, "{pad}{id} = {};", round_to(&value, precision))
                    .expect("writing to a string");
            }
            Stmt::ScatterAdd { target, value } => {
                let node = target.node;
                let precision = self.precision(node)?;
                let (offset, ok) = self.lookup_offset(target)?;
                let value = self.expr(value, precision)?;
                let old = convert(
                    &from_storage(&format!("{node}[o]"), precision),
                    precision,
                    precision,
                );
                let sum = match precision.kind() {
                    Kind::Float => float_binop(
                        Binop::Add,
                        &old,
                        &value,
                        compute_type(precision),
                        precision == Precision::F64,
                    ),
                    Kind::Int => int_binop(Binop::Add, &old, &value),
                    Kind::Word => {
                        return Err(error(format!(
                            "codegen: a scatter into {node} adds, which 128-bit words do not"
                        )));
                    }
                };
                // Where the id selects no cell, the axis's first cell gets its own value back:
                // the store happens whatever the data, and changes nothing there.
                writeln!(
                    out,
                    "{pad}{{ int64_t o = {offset}; {node}[o] = {}; }}",
                    to_storage(
                        &format!("{}({ok}, {sum}, {old})", select(precision)),
                        precision
                    )
                )
                .expect("writing to a string");
            }
            Stmt::Gemm { plan, .. } => {
                return Err(error(format!(
                    "codegen: the matrix product into {} must be a statement of its own",
                    plan.c
                )));
            }
        }
        Ok(())
    }

    /// The loops from `var` down that can run as one loop, outermost first, with the body inside
    /// them, if more than one: each holds only the next, and every index moves by as much over a
    /// whole run of the next loop as over one step of this one (`(a·B + b)·s` for loops `a`, `b`
    /// of ranges `A`, `B`): consecutive cells across the loops stay consecutive in one loop,
    /// which vector units and vectorized sums run longer over.
    fn coalescible<'s>(
        &self,
        var: LoopVar,
        range: usize,
        body: &'s [Stmt],
    ) -> Option<(Vec<Loop>, &'s [Stmt])> {
        let mut chain = vec![(var, range)];
        let mut inner = body;
        while let [Stmt::For { var, range, body }] = inner {
            chain.push((*var, *range));
            inner = body;
        }
        if chain.len() < 2 {
            return None;
        }
        let mut strides: Vec<Vec<i64>> = Vec::new();
        for stmt in inner {
            stmt.walk(&mut |s| self.strides_in(s, &chain, &mut strides));
        }
        // The longest prefix of the chain whose neighbours nest in every index.
        let nests = |k: usize| {
            strides.iter().all(|coefficients| {
                coefficients[k - 1] == coefficients[k].saturating_mul(chain[k].1 as i64)
            })
        };
        let length = (1..chain.len()).take_while(|&k| nests(k)).count() + 1;
        if length < 2 {
            return None;
        }
        chain.truncate(length);
        let mut inner = body;
        for _ in 1..length {
            let [Stmt::For { body, .. }] = inner else {
                unreachable!("the chain is a run of single loops");
            };
            inner = body;
        }
        Some((chain, inner))
    }

    /// For each index `stmt` evaluates itself, the flat step each of `chain`'s loops moves it by.
    fn strides_in(&self, stmt: &Stmt, chain: &[Loop], strides: &mut Vec<Vec<i64>>) {
        let flat = |index: &[Index], dims: &[usize]| -> Vec<i64> {
            let mut steps = vec![0i64; chain.len()];
            let mut stride = 1i64;
            for (axis, dim) in index.iter().zip(dims).rev() {
                for (c, v) in &axis.terms {
                    if let Some(k) = chain.iter().position(|(var, _)| Var::Loop(*var) == *v) {
                        steps[k] = steps[k].saturating_add(c.saturating_mul(stride));
                    }
                }
                stride = stride.saturating_mul(*dim as i64);
            }
            steps
        };
        let dims = |node: &NodeId| {
            self.routine
                .nodes
                .get(node)
                .map(|n| n.buffer_dims())
                .unwrap_or_default()
        };
        match stmt {
            Stmt::Set { node, index, .. } => strides.push(flat(index, &dims(node))),
            Stmt::ScatterAdd { target, .. } => {
                strides.push(flat(&target.index, &dims(&target.node)));
            }
            Stmt::SetVec { offset, .. } => strides.push(flat(std::slice::from_ref(offset), &[1])),
            _ => {}
        }
        for value in stmt.values() {
            scalar_strides(value, &mut |node, index| match node {
                Some(node) => strides.push(flat(index, &dims(&node))),
                None => strides.push(flat(index, &[1])),
            });
        }
    }

    /// Writes `chain` (loops from outermost, each holding only the next) as one loop over the
    /// innermost variable, running over every cell of the chain, the outer variables 0: every
    /// index then addresses what it did (see [`Writer::coalescible`]). Accesses are checked on
    /// the nest as written first.
    fn coalesced(
        &mut self,
        chain: &[Loop],
        inner: &[Stmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        for &(var, range) in chain {
            self.loops.insert(var, range);
        }
        let checked = self.body(inner, &mut String::new(), depth + 1);
        let (last, _) = *chain.last().expect("a chain of two or more");
        let total = chain
            .iter()
            .map(|(_, range)| *range)
            .fold(1usize, usize::saturating_mul);
        let pad = "  ".repeat(depth);
        if let Some(id) = checked
            .as_ref()
            .ok()
            .and_then(|()| summed_local(inner, &self.locals))
        {
            writeln!(out, "{pad}#pragma omp simd reduction(+:{id})").expect("writing to a string");
        }
        writeln!(
            out,
            "{pad}for (int64_t {last} = 0; {last} < {total}; ++{last}) {{"
        )
        .expect("writing to a string");
        for &(var, _) in &chain[..chain.len() - 1] {
            writeln!(out, "{pad}  const int64_t {var} = 0;").expect("writing to a string");
            self.loops.insert(var, 1);
        }
        self.loops.insert(last, total);
        let checking = std::mem::replace(&mut self.checking, false);
        let written = checked.and_then(|()| self.body(inner, out, depth + 1));
        self.checking = checking;
        for (var, _) in chain {
            self.loops.remove(var);
        }
        written?;
        writeln!(out, "{pad}}}").expect("writing to a string");
        Ok(())
    }

    fn body(&mut self, body: &[Stmt], out: &mut String, depth: usize) -> Result<(), CodegenError> {
        // A local lives until the end of the body that declares it.
        let outer = self.locals.clone();
        for stmt in body {
            self.stmt(stmt, out, depth)?;
        }
        self.locals = outer;
        Ok(())
    }
}

fn float_unop(op: Unop, x: &str, ty: &str, double: bool) -> String {
    let f = if double { "" } else { "f" };
    // In double, the library's functions, as the interpreter computes them; in float, the
    // prelude's, which the interpreter mirrors bit for bit (`rcannl_ir::fmath`) and which
    // vectorize.
    let math = |name: &str| {
        if double {
            format!("{name}({x})")
        } else {
            format!("rc_{name}f({x})")
        }
    };
    match op {
        Unop::Identity => x.to_owned(),
        Unop::Neg => format!("(-{x})"),
        Unop::Relu => format!("rc_relu{f}({x})"),
        Unop::Sat01 => format!("rc_sat01{f}({x})"),
        Unop::Exp => math("exp"),
        Unop::Log => math("log"),
        Unop::Exp2 => math("exp2"),
        Unop::Log2 => math("log2"),
        Unop::Sin => math("sin"),
        Unop::Cos => math("cos"),
        Unop::Sqrt => format!("sqrt{f}({x})"),
        Unop::Recip => format!("(({ty})1 / {x})"),
        // One rounding of 1/√x, as the interpreter's single operation.
        Unop::RecipSqrt if double => format!("(1.0 / sqrt({x}))"),
        Unop::RecipSqrt => format!("(float)(1.0 / sqrt((double)({x})))"),
        Unop::Tanh => math("tanh"),
        Unop::Not => format!("({ty})({x} == 0)"),
        Unop::Trunc => format!("trunc{f}({x})"),
        Unop::Uint4x32ToPrecUniform1 => unreachable!("handled with its word argument"),
    }
}

fn int_unop(op: Unop, x: &str) -> String {
    match op {
        Unop::Identity | Unop::Trunc => x.to_owned(),
        Unop::Neg => format!("rc_isub(0, {x})"),
        Unop::Relu => format!("rc_irelu({x})"),
        Unop::Sat01 => format!("rc_isat01({x})"),
        Unop::Not => format!("(int64_t)({x} == 0)"),
        // No integer meaning: computed on doubles and truncated.
        other => format!(
            "rc_f2i({})",
            float_unop(other, &format!("(double)({x})"), "double", true)
        ),
    }
}

/// The prelude's blend `c ? a : b` for values of `compute_type(precision)`.
fn select(precision: Precision) -> &'static str {
    match compute_type(precision) {
        "float" => "rc_selectf",
        "double" => "rc_select",
        "rc_word" => "rc_wselect",
        _ => "rc_iselect",
    }
}

fn float_binop(op: Binop, a: &str, b: &str, ty: &str, double: bool) -> String {
    let f = if double { "" } else { "f" };
    match op {
        Binop::Add => format!("({a} + {b})"),
        Binop::Sub => format!("({a} - {b})"),
        Binop::Mul => format!("({a} * {b})"),
        Binop::Div => format!("({a} / {b})"),
        Binop::Pow if double => format!("rc_pow({a}, {b})"),
        Binop::Pow => format!("rc_powf({a}, {b})"),
        Binop::Max => format!("rc_max{f}({a}, {b})"),
        Binop::Min => format!("rc_min{f}({a}, {b})"),
        Binop::ReluGate => format!("rc_relu_gate{f}({a}, {b})"),
        Binop::Sat01Gate => format!("rc_sat01_gate{f}({a}, {b})"),
        Binop::Or => format!("({ty})(({a} != 0) | ({b} != 0))"),
        Binop::And => format!("({ty})(({a} != 0) & ({b} != 0))"),
        Binop::Lt => format!("({ty})({a} < {b})"),
        Binop::Eq => format!("({ty})({a} == {b})"),
        Binop::Ne => format!("({ty})({a} != {b})"),
        Binop::Mod => format!("rc_fmod{f}({a}, {b})"),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
    }
}

/// `base` to a constant power that multiplication or division computes as `pow` defines it (see
/// `rcannl_ir::fmath::pow`; in double, only the square), the base computed once.
fn constant_power(base: &str, exponent: f64, double: bool) -> Option<String> {
    if double {
        return (exponent == 2.0).then(|| format!("rc_square({base})"));
    }
    // The exponent as the interpreter reads it: rounded to the compute precision.
    match exponent as f32 {
        1.0 => Some(base.to_owned()),
        2.0 => Some(format!("rc_squaref({base})")),
        3.0 => Some(format!("rc_cubef({base})")),
        -1.0 => Some(format!("(1.0f / {base})")),
        _ => None,
    }
}

fn int_binop(op: Binop, a: &str, b: &str) -> String {
    match op {
        Binop::Add => format!("rc_iadd({a}, {b})"),
        Binop::Sub => format!("rc_isub({a}, {b})"),
        Binop::Mul => format!("rc_imul({a}, {b})"),
        Binop::Div => format!("rc_idiv({a}, {b})"),
        Binop::Pow => format!("rc_ipow({a}, {b})"),
        Binop::Max => format!("rc_imax({a}, {b})"),
        Binop::Min => format!("rc_imin({a}, {b})"),
        Binop::ReluGate => format!("rc_irelu_gate({a}, {b})"),
        // No integer lies strictly between 0 and 1.
        Binop::Sat01Gate => "(int64_t)0".to_owned(),
        Binop::Or => format!("(int64_t)(({a} != 0) | ({b} != 0))"),
        Binop::And => format!("(int64_t)(({a} != 0) & ({b} != 0))"),
        Binop::Lt => format!("(int64_t)({a} < {b})"),
        Binop::Eq => format!("(int64_t)({a} == {b})"),
        Binop::Ne => format!("(int64_t)({a} != {b})"),
        Binop::Mod => format!("rc_imod({a}, {b})"),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
    }
}

/// The C source for `routine` (optimized or not; virtual nodes must not be accessed).
/// Invariant operations are first hoisted out of every nested loop, the chains of loops nested
/// alone included: a kernel splits only its top-level loop across threads.
pub fn generate(routine: &Routine) -> Result<Generated, CodegenError> {
    generate_named(routine, "rc_k")
}

/// [`generate`] with kernels named `{prefix}0`, `{prefix}1`, …, so that the kernels of several
/// routines can share one library.
pub fn generate_named(routine: &Routine, prefix: &str) -> Result<Generated, CodegenError> {
    let routine = &hoist_invariants_into_nests(routine);
    let buffers: Vec<NodeId> = routine
        .nodes
        .values()
        .filter(|n| n.memory_mode != Some(MemoryMode::Virtual))
        .map(|n| n.id)
        .collect();
    let statics: Vec<Symbol> = routine.statics.keys().copied().collect();
    let mut source = String::from(PRELUDE);
    let mut steps = Vec::new();
    let mut kernels = 0;
    let mut writer = Writer {
        routine,
        locals: HashMap::new(),
        loops: HashMap::new(),
        checking: true,
    };
    for group in kernel_groups(routine, &routine.body) {
        let name = format!("{prefix}{kernels}");
        let mut body = String::new();
        match group {
            Group::Gemm { plan, nest } => {
                // The bounds of every access are checked on the nest the plan stands for, and on
                // the plan itself where its indices are its own.
                writer.body(nest, &mut String::new(), 0)?;
                if !plan.a_margins.is_empty() && !super::gemm::in_bounds(plan, routine) {
                    return Err(error(format!(
                        "codegen: the matrix product into {} reads outside a buffer",
                        plan.c
                    )));
                }
                steps.push(Step::Gemm(plan.clone()));
                continue;
            }
            Group::Parallel { preamble, stmt } => {
                let Stmt::For {
                    var,
                    range,
                    body: inner,
                } = stmt
                else {
                    unreachable!("parallel groups are loops");
                };
                // The preamble's locals live through the loop.
                let outer = writer.locals.clone();
                for stmt in preamble {
                    writer.stmt(stmt, &mut body, 1)?;
                }
                writeln!(
                    body,
                    "  for (int64_t {var} = begin; {var} < end; ++{var}) {{"
                )
                .expect("writing to a string");
                writer.loops.insert(*var, *range);
                writer.body(inner, &mut body, 2)?;
                writer.loops.remove(var);
                writer.locals = outer;
                body.push_str("  }\n");
                steps.push(Step::Kernel(Kernel {
                    name: name.clone(),
                    parallel: Some(*range),
                    work_per_iteration: inner.iter().map(work).sum(),
                }));
            }
            Group::Serial { stmts } => {
                writer.body(stmts, &mut body, 1)?;
                steps.push(Step::Kernel(Kernel {
                    name: name.clone(),
                    parallel: None,
                    work_per_iteration: stmts.iter().map(work).sum(),
                }));
            }
        }
        write_kernel(&mut source, &name, routine, &buffers, &statics, &body);
        kernels += 1;
    }
    Ok(Generated {
        source,
        steps,
        buffers,
        statics,
    })
}

/// The local a loop's body only adds into, if that is all it does besides declaring locals of
/// its own: `v = v + e` with `v` a float or double declared outside and `e` not reading `v`. Such
/// a loop may add its terms in any order, so it is compiled as a vectorized sum (the order then
/// differs from the interpreter's, as a matrix product's does).
fn summed_local(body: &[Stmt], declared: &HashMap<LocalId, Precision>) -> Option<LocalId> {
    let mut sum = None;
    for stmt in body {
        match stmt {
            Stmt::Local { .. } => {}
            Stmt::SetLocal {
                id,
                value: Scalar::Binop(Binop::Add, a, b),
            } if sum.is_none() => {
                let term = match (a.as_ref(), b.as_ref()) {
                    (Scalar::Local(v), term) | (term, Scalar::Local(v)) if v == id => term,
                    _ => return None,
                };
                sum = Some((*id, term));
            }
            _ => return None,
        }
    }
    let (id, term) = sum?;
    let reads = |scalar: &Scalar| {
        let mut found = false;
        scalar.for_each_local(&mut |v| found |= v == id);
        found
    };
    let others_read = body.iter().any(|stmt| match stmt {
        Stmt::Local { value, .. } => reads(value),
        _ => false,
    });
    let float = matches!(declared.get(&id), Some(Precision::F32 | Precision::F64));
    (float && !others_read && !reads(term)).then_some(id)
}

/// A loop's variable and range.
type Loop = (LoopVar, usize);

/// Calls `visit` on every index `scalar` evaluates: a read's (with its node), an embedded one's.
fn scalar_strides(scalar: &Scalar, visit: &mut impl FnMut(Option<NodeId>, &[Index])) {
    match scalar {
        Scalar::Const(_) | Scalar::Local(_) => {}
        Scalar::Get(node, index) => visit(Some(*node), index),
        Scalar::Lookup(lookup) => {
            visit(Some(lookup.node), &lookup.index);
            scalar_strides(&lookup.id, visit);
        }
        Scalar::Embed(index) => visit(None, std::slice::from_ref(index)),
        Scalar::Unop(_, a) => scalar_strides(a, visit),
        Scalar::Binop(_, a, b) => {
            scalar_strides(a, visit);
            scalar_strides(b, visit);
        }
        Scalar::Ternop(_, a, b, c) => {
            scalar_strides(a, visit);
            scalar_strides(b, visit);
            scalar_strides(c, visit);
        }
    }
}

fn write_kernel(
    source: &mut String,
    name: &str,
    routine: &Routine,
    buffers: &[NodeId],
    statics: &[Symbol],
    body: &str,
) {
    writeln!(source, "\nvoid {name}{KERNEL_PARAMETERS} {{").expect("writing to a string");
    source.push_str("  (void)statics; (void)begin; (void)end;\n");
    for (i, node) in buffers.iter().enumerate() {
        // Only the buffers the kernel names are declared, so that the compiler sees no unused ones.
        if body.contains(&format!("{node}[")) {
            let ty = storage_type(routine.nodes[node].precision);
            writeln!(source, "  {ty} *restrict {node} = ({ty} *)buffers[{i}];")
                .expect("writing to a string");
        }
    }
    for (i, symbol) in statics.iter().enumerate() {
        let name = var_name(Var::Static(*symbol));
        if body.contains(&name) {
            writeln!(source, "  const int64_t {name} = statics[{i}];")
                .expect("writing to a string");
        }
    }
    source.push_str(body);
    source.push_str("}\n");
}

/// The cells a statement writes, times the trips of the loops around them, roughly.
fn work(stmt: &Stmt) -> usize {
    match stmt {
        Stmt::For { range, body, .. } => range.saturating_mul(body.iter().map(work).sum()),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcannl_ir::TensorNode;

    /// Row sums of a 4×8 node in `precision`: a local per row, added into along the row.
    fn row_sums(precision: Precision) -> Routine {
        let at = |var: u32| Index::var(LoopVar(var), 0);
        let (sum, x) = (LocalId(0), NodeId(0));
        let add = Scalar::Binop(
            Binop::Add,
            Box::new(Scalar::Local(sum)),
            Box::new(Scalar::Get(x, vec![at(0), at(1)])),
        );
        let row = vec![
            Stmt::Local {
                id: sum,
                precision,
                value: Scalar::Const(0.0),
            },
            Stmt::For {
                var: LoopVar(1),
                range: 8,
                body: vec![Stmt::SetLocal {
                    id: sum,
                    value: add,
                }],
            },
            Stmt::Set {
                node: NodeId(1),
                index: vec![at(0)],
                value: Scalar::Local(sum),
            },
        ];
        Routine {
            name: "r".to_owned(),
            nodes: [
                TensorNode::new(0, "x", precision, &[4, 8]),
                TensorNode::new(1, "s", precision, &[4]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body: vec![Stmt::For {
                var: LoopVar(0),
                range: 4,
                body: row,
            }],
        }
    }

    #[test]
    fn float_sums_into_a_local_are_free_to_reorder_and_integer_ones_are_not() {
        for (precision, marked) in [
            (Precision::F32, true),
            (Precision::F64, true),
            (Precision::I32, false),
            (Precision::F16, false),
        ] {
            let source = generate(&row_sums(precision)).unwrap().source;
            assert_eq!(
                source.contains("#pragma omp simd reduction(+:v0)\n"),
                marked,
                "{precision:?}: {source}"
            );
        }
    }

    /// The sum of a 4×8×2 node into one cell, read in order or with its last two axes swapped.
    fn total(swapped: bool) -> Routine {
        let at = |var: u32| Index::var(LoopVar(var), 0);
        let (sum, x) = (LocalId(0), NodeId(0));
        let read = if swapped {
            vec![at(0), at(2), at(1)]
        } else {
            vec![at(0), at(1), at(2)]
        };
        let add = Scalar::Binop(
            Binop::Add,
            Box::new(Scalar::Local(sum)),
            Box::new(Scalar::Get(x, read)),
        );
        let nest = [(0, 4), (1, 8), (2, 2)].iter().rev().fold(
            vec![Stmt::SetLocal {
                id: sum,
                value: add,
            }],
            |body, &(var, range)| {
                vec![Stmt::For {
                    var: LoopVar(var),
                    range,
                    body,
                }]
            },
        );
        let body = [
            vec![Stmt::Local {
                id: sum,
                precision: Precision::F32,
                value: Scalar::Const(0.0),
            }],
            nest,
            vec![Stmt::Set {
                node: NodeId(1),
                index: vec![Index::constant(0)],
                value: Scalar::Local(sum),
            }],
        ]
        .concat();
        Routine {
            name: "r".to_owned(),
            nodes: [
                TensorNode::new(
                    0,
                    "x",
                    Precision::F32,
                    if swapped { &[4, 2, 8] } else { &[4, 8, 2] },
                ),
                TensorNode::new(1, "s", Precision::F32, &[1]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body,
        }
    }

    #[test]
    fn loops_over_consecutive_cells_run_as_one() {
        let source = generate(&total(false)).unwrap().source;
        assert!(
            source.contains(
                "  #pragma omp simd reduction(+:v0)\n  for (int64_t l2 = 0; l2 < 64; ++l2) {\n    \
                 const int64_t l0 = 0;\n    const int64_t l1 = 0;\n"
            ),
            "{source}"
        );
        // Read across its axes, the node is not consecutive over the loops: they stay apart.
        let source = generate(&total(true)).unwrap().source;
        assert!(
            source.contains("for (int64_t l0 = 0; l0 < 4; ++l0)"),
            "{source}"
        );
        assert!(
            source.contains("for (int64_t l2 = 0; l2 < 2; ++l2)"),
            "{source}"
        );
    }

    #[test]
    fn bounds_beyond_64_bits_are_reported_unwrapped() {
        // s[0] = x[c·l0 + offset] over l0 < 4, with a coefficient and an offset near i64::MAX:
        // the greatest index is about 4·2^63, which 64-bit arithmetic would wrap.
        let (coefficient, offset) = (i64::MAX, i64::MAX - 1);
        let read = Index {
            terms: vec![(coefficient, Var::Loop(LoopVar(0)))],
            offset,
        };
        let routine = Routine {
            name: "r".to_owned(),
            nodes: [
                TensorNode::new(0, "x", Precision::F64, &[5]),
                TensorNode::new(1, "s", Precision::F64, &[1]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body: vec![Stmt::For {
                var: LoopVar(0),
                range: 4,
                body: vec![Stmt::Set {
                    node: NodeId(1),
                    index: vec![Index::constant(0)],
                    value: Scalar::Get(NodeId(0), vec![read]),
                }],
            }],
        };
        let high = i128::from(offset) + 3 * i128::from(coefficient);
        let err = generate(&routine).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "n0 'x' is addressed at {offset}..={high} on axis 0, outside its buffer of 5"
            )),
            "{err}"
        );
    }
}
