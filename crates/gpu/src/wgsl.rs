//! WGSL compute shaders from a routine's loop IR.
//!
//! The routine's top-level statements are grouped into kernels as on the C backend
//! ([`kernel_groups`]). A loop whose iterations write disjoint cells becomes a kernel with one
//! invocation per iteration — and per iteration of every loop nested alone inside it whose
//! iterations are disjoint too, the loops flattened into one invocation index — each running
//! the rest of the nest, reductions in its own registers, in the interpreter's order. A fill is a
//! kernel with one invocation per cell. Other statements run in a kernel of one invocation. A
//! matrix product of f32 or f16 cells runs on the tiled kernel of the `product` module; one of
//! another precision runs as the nest it was recognized in.
//!
//! Values are computed as the interpreter computes them, in WGSL's types: f32 and f16 in `f32`
//! (f16 cells converted on load and rounded on store), integers in `i32` (wrapping: WGSL has no
//! 64-bit integers, so results agree with the interpreter's `i64` while every intermediate fits in
//! 32 bits), 128-bit words in `vec4<u32>`. A precision WGSL lacks (f64, bf16, i64, 8-bit
//! integers), and f16 on a device without `shader-f16`, is an error naming the tensor.

use std::collections::HashMap;
use std::fmt::Write;

use rcannl_backends::nests::{Group, index_bounds, kernel_groups, splittable};
use rcannl_ir::{
    Binop, Index, Kind, LocalId, Lookup, LoopVar, MemoryMode, NodeId, Precision, Routine, Scalar,
    Stmt, Symbol, Ternop, Unop, Value, Var,
};

use crate::product;
use crate::schedule::{self, ITERATION_BUDGET};

/// The definitions every kernel starts with.
pub const PRELUDE: &str = include_str!("prelude.wgsl");

/// Invocations per workgroup of a parallel kernel.
pub const WORKGROUP: u32 = 64;

/// Why a routine cannot be turned into WGSL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenError {
    /// What cannot be generated, in words (what `Display` prints), naming the tensor (a precision
    /// WGSL or the device lacks, say).
    pub message: String,
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodegenError {}

pub(crate) fn error(message: String) -> CodegenError {
    CodegenError { message }
}

/// What the device offers that code generation depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceFeatures {
    /// `shader-f16`: f16 cells in storage buffers.
    pub f16: bool,
}

/// One compute shader and how to dispatch it.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The whole WGSL module; its entry point is `main`.
    pub source: String,
    /// The nodes bound, binding `i` the `i`-th; the static indices (when used) come after.
    pub bindings: Vec<NodeId>,
    /// Whether the kernel reads the static indices (an `array<i32>` in routine order).
    pub reads_statics: bool,
    /// The invocations it runs, in workgroups of `workgroup` along x (and y past the device's
    /// limit of workgroups per dimension).
    pub invocations: u64,
    /// Invocations per workgroup: [`WORKGROUP`] for a parallel kernel, 1 for a kernel of one
    /// invocation, the tiled product kernel's own size for a matrix product.
    pub workgroup: u32,
    /// The top-level locals of a serial run cut into several kernels, kept in one-cell buffers
    /// of their own (bound after the static indices) instead of registers.
    pub spills: Vec<LocalId>,
    /// How many times the kernel is dispatched, one after another, each time with its number in
    /// `rc_chunk` (bound last): more than 1 for a serial loop run in chunks.
    pub dispatches: u64,
}

/// A routine as kernels run one after another.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The kernels, run in order.
    pub kernels: Vec<Kernel>,
    /// The static indices, in the order kernels read them.
    pub statics: Vec<Symbol>,
}

impl Program {
    /// Every kernel's source, one after another, each under a comment line naming it.
    pub fn source(&self) -> String {
        let mut out = String::new();
        for (i, kernel) in self.kernels.iter().enumerate() {
            writeln!(
                out,
                "// kernel {i}: {} invocation(s) in workgroups of {}{}",
                kernel.invocations,
                kernel.workgroup,
                if kernel.dispatches > 1 {
                    format!(", dispatched {} times in order", kernel.dispatches)
                } else {
                    String::new()
                }
            )
            .expect("writing to a string");
            out.push_str(&kernel.source.replace(PRELUDE, ""));
            out.push('\n');
        }
        out
    }
}

/// The WGSL type values of a precision are computed in.
pub(crate) fn compute_type(precision: Precision) -> &'static str {
    match precision.kind() {
        Kind::Float => "f32",
        Kind::Int => "i32",
        Kind::Word => "vec4<u32>",
    }
}

/// The WGSL type cells of a precision are stored as (for the precisions a device holds).
pub(crate) fn storage_type(precision: Precision) -> &'static str {
    match precision {
        Precision::F16 => "f16",
        Precision::I32 => "i32",
        Precision::U32 => "u32",
        Precision::Uint4x32 => "vec4<u32>",
        _ => "f32",
    }
}

/// Whether a device with `features` holds cells of `precision`.
pub fn holds(precision: Precision, features: DeviceFeatures) -> bool {
    match precision {
        Precision::F32 | Precision::I32 | Precision::U32 | Precision::Uint4x32 => true,
        Precision::F16 => features.f16,
        Precision::U8 | Precision::I8 | Precision::I64 | Precision::Bf16 | Precision::F64 => false,
    }
}

/// The error for a node of a precision the device lacks.
pub(crate) fn lacks(node: NodeId, label: &str, precision: Precision) -> CodegenError {
    let why = if precision == Precision::F16 {
        "this device does not offer shader-f16".to_owned()
    } else {
        format!("WGSL has no {precision}")
    };
    error(format!(
        "the GPU cannot hold tensor '{label}' ({node}) in {precision}: {why}; compute it in f32 \
         (f32, i32, u32{} are held)",
        if precision == Precision::F16 {
            ""
        } else {
            " and f16 where the device offers it"
        }
    ))
}

fn float_literal(x: f64) -> String {
    let x = x as f32;
    if x.is_nan() {
        "rc_nan()".to_owned()
    } else if x.is_infinite() {
        format!("{}rc_inf()", if x < 0.0 { "-" } else { "" })
    } else {
        format!("f32({x:e})")
    }
}

fn int_literal(i: i64) -> String {
    let i = i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    if i == i32::MIN {
        "(-2147483647i - 1i)".to_owned()
    } else {
        format!("{i}i")
    }
}

fn word_literal(w: [u32; 4]) -> String {
    format!("vec4<u32>({}u, {}u, {}u, {}u)", w[0], w[1], w[2], w[3])
}

/// A literal of `compute_type(precision)` for the constant `c`, as the interpreter reads a
/// constant in that kind.
fn literal(c: f64, precision: Precision) -> String {
    match Value::Float(c).to_kind(precision.kind(), Precision::I64) {
        Value::Float(x) => float_literal(x),
        Value::Int(i) => int_literal(i),
        Value::Word(w) => word_literal(w),
    }
}

/// A stored cell's literal: the constant as the node's precision holds it, in its storage type.
fn storage_literal(c: f64, precision: Precision) -> String {
    match Value::Float(c).stored_as(precision) {
        Value::Float(x) if precision == Precision::F16 => format!("f16({})", float_literal(x)),
        Value::Float(x) => float_literal(x),
        Value::Int(i) if precision == Precision::U32 => format!("{}u", i.clamp(0, 0xFFFF_FFFF)),
        Value::Int(i) => int_literal(i),
        Value::Word(w) => word_literal(w),
    }
}

/// `value`, of `compute_type(precision)`, as a cell of `precision` stores it.
fn to_storage(value: &str, precision: Precision) -> String {
    match precision {
        Precision::F16 => format!("f16({value})"),
        Precision::U32 => format!("bitcast<u32>({value})"),
        _ => value.to_owned(),
    }
}

/// A stored cell, in `compute_type(precision)`.
fn from_storage(cell: &str, precision: Precision) -> String {
    match precision {
        Precision::F16 => format!("f32({cell})"),
        Precision::U32 => format!("bitcast<i32>({cell})"),
        _ => cell.to_owned(),
    }
}

/// `value` rounded to what a cell of `precision` holds, kept in the compute type.
fn round_to(value: &str, precision: Precision) -> String {
    match precision {
        Precision::F16 => format!("f32(f16({value}))"),
        _ => value.to_owned(),
    }
}

/// `value`, held as a value of precision `from` in `compute_type(from)`, converted to the kind
/// of `to`, as `Value::to_kind` converts.
fn convert(value: &str, from: Precision, to: Precision) -> String {
    match (from.kind(), to.kind()) {
        (a, b) if a == b => value.to_owned(),
        (Kind::Int, Kind::Float) => format!("f32({value})"),
        (Kind::Float, Kind::Int) => format!("rc_f2i({value})"),
        (Kind::Word, Kind::Float) => format!("f32(({value}).x)"),
        (Kind::Word, Kind::Int) => format!("bitcast<i32>(({value}).x)"),
        (_, Kind::Word) => match from {
            Precision::F16 => format!("rc_word_f16({value})"),
            Precision::I32 | Precision::U32 => format!("rc_word_u32(bitcast<u32>({value}))"),
            Precision::F32 => format!("rc_word_f32({value})"),
            _ => format!("vec4<u32>(bitcast<u32>({value}), 0u, 0u, 0u)"),
        },
        _ => unreachable!("every pair of kinds is covered"),
    }
}

pub(crate) fn var_name(var: Var) -> String {
    match var {
        Var::Loop(LoopVar(v)) => format!("l{v}"),
        Var::Static(Symbol(s)) => format!("s{s}"),
    }
}

pub(crate) fn index_expr(index: &Index) -> String {
    let mut parts: Vec<String> = index
        .terms
        .iter()
        .map(|(c, var)| match c {
            1 => var_name(*var),
            c => format!("{}*{}", int_literal(*c), var_name(*var)),
        })
        .collect();
    if index.offset != 0 || parts.is_empty() {
        parts.push(int_literal(index.offset));
    }
    format!("({})", parts.join(" + "))
}

/// What the generator knows of the routine while it writes statements.
struct Writer<'a> {
    routine: &'a Routine,
    locals: HashMap<LocalId, Precision>,
    /// Locals kept in one-cell buffers (`rc_v3`) rather than registers.
    spilled: HashMap<LocalId, Precision>,
    loops: HashMap<LoopVar, usize>,
}

impl Writer<'_> {
    fn precision(&self, node: NodeId) -> Result<Precision, CodegenError> {
        self.routine
            .nodes
            .get(&node)
            .map(|n| n.precision)
            .ok_or_else(|| error(format!("wgsl: unknown node {node}")))
    }

    fn bounds(&self, index: &Index) -> Result<Option<(i128, i128)>, CodegenError> {
        index_bounds(index, &self.loops, &self.routine.statics)
            .map_err(|e| error(format!("wgsl: {e}")))
    }

    /// The row-major flat offset of `index` in `node`'s buffer, every position checked against
    /// its axis.
    fn offset(&self, node: NodeId, index: &[Index]) -> Result<String, CodegenError> {
        let info = &self.routine.nodes[&node];
        let dims = info.buffer_dims();
        if dims.len() != index.len() {
            return Err(error(format!(
                "wgsl: {node} '{}' has {} axes, indexed with {}",
                info.label,
                dims.len(),
                index.len()
            )));
        }
        let mut offset = String::new();
        for (axis, (position, dim)) in index.iter().zip(&dims).enumerate() {
            if let Some((low, high)) = self.bounds(position)?
                && (low < 0 || high >= *dim as i128)
            {
                return Err(error(format!(
                    "wgsl: {node} '{}' is addressed at {low}..={high} on axis {axis}, outside \
                     its buffer of {dim}",
                    info.label
                )));
            }
            offset = if axis == 0 {
                index_expr(position)
            } else {
                format!("({offset}*{dim}i + {})", index_expr(position))
            };
        }
        Ok(if offset.is_empty() {
            "0i".to_owned()
        } else {
            offset
        })
    }

    /// The flat offset of the cell `lookup`'s id selects (the axis's first cell where it selects
    /// none), and the WGSL condition that it selects one; every cell of the axis is checked.
    /// The id is computed in f32.
    fn lookup_offset(&self, lookup: &Lookup) -> Result<(String, String), CodegenError> {
        let node = lookup.node;
        let info = self
            .routine
            .nodes
            .get(&node)
            .ok_or_else(|| error(format!("wgsl: unknown node {node}")))?;
        let Some(last) = lookup.last_cell() else {
            return Err(error(format!(
                "wgsl: a lookup into {node} '{}' selects along axis {}, which it lacks",
                info.label, lookup.axis
            )));
        };
        let stride = lookup.stride(&info.buffer_dims());
        let base = self.offset(node, &lookup.index)?;
        self.offset(node, &last)?;
        let id = self.expr(&lookup.id, Precision::F32)?;
        let size = lookup.size;
        Ok((
            format!("({base} + rc_row({id}, {size}i)*{stride}i)"),
            format!("rc_row_ok({id}, {size}i)"),
        ))
    }

    /// `scalar` computed in the kind of `precision`, as WGSL of `compute_type(precision)`.
    fn expr(&self, scalar: &Scalar, precision: Precision) -> Result<String, CodegenError> {
        let kind = precision.kind();
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
                    "select({}, {}, {ok})",
                    literal(0.0, precision),
                    convert(&from_storage(&cell, from), from, precision)
                )
            }
            Scalar::Embed(index) => convert(&index_expr(index), Precision::U32, precision),
            Scalar::Local(id) => {
                if let Some(from) = self.spilled.get(id) {
                    return Ok(convert(&format!("rc_{id}[0]"), *from, precision));
                }
                let from = *self
                    .locals
                    .get(id)
                    .ok_or_else(|| error(format!("wgsl: {id} is read before it is declared")))?;
                convert(&id.to_string(), from, precision)
            }
            Scalar::Unop(Unop::Uint4x32ToPrecUniform1, x) => {
                let word = self.expr(x, Precision::Uint4x32)?;
                format!("rc_uniform_{precision}({word}, 0u)")
            }
            Scalar::Unop(op, x) => {
                let x = self.expr(x, precision)?;
                match kind {
                    Kind::Float => float_unop(*op, &x),
                    Kind::Int => int_unop(*op, &x),
                    Kind::Word if *op == Unop::Identity => x,
                    Kind::Word => {
                        return Err(error(format!("wgsl: {op} is not defined on 128-bit words")));
                    }
                }
            }
            Scalar::Binop(op, a, b) => {
                let (a, b) = (self.expr(a, precision)?, self.expr(b, precision)?);
                match (kind, op) {
                    (_, Binop::Arg1) => a,
                    (_, Binop::Arg2) => b,
                    (Kind::Word, Binop::Threefry4x32) => format!("rc_threefry({a}, {b}, 20u)"),
                    (Kind::Word, Binop::Threefry4x32Light) => {
                        format!("rc_threefry({a}, {b}, 2u)")
                    }
                    (_, Binop::Threefry4x32 | Binop::Threefry4x32Light) => {
                        return Err(error(format!(
                            "wgsl: threefry4x32 yields 128-bit words; a {precision} value cannot \
                             hold one"
                        )));
                    }
                    (Kind::Float, op) => float_binop(*op, &a, &b),
                    (Kind::Int, op) => int_binop(*op, &a, &b),
                    (Kind::Word, op) => {
                        return Err(error(format!("wgsl: {op} is not defined on 128-bit words")));
                    }
                }
            }
            Scalar::Ternop(Ternop::Where, condition, then, otherwise) => {
                let condition = self.expr(condition, Precision::F32)?;
                format!(
                    "select({}, {}, rc_holds({condition}))",
                    self.expr(otherwise, precision)?,
                    self.expr(then, precision)?,
                )
            }
            Scalar::Ternop(op, a, b, c) => {
                let (a, b, c) = (
                    self.expr(a, precision)?,
                    self.expr(b, precision)?,
                    self.expr(c, precision)?,
                );
                match (kind, op) {
                    (Kind::Float, Ternop::Fma) => format!("fma({a}, {b}, {c})"),
                    (Kind::Int, Ternop::Fma) => format!("({a} * {b} + {c})"),
                    (Kind::Float | Kind::Int, _) => format!("({a} * {b} * {c})"),
                    (Kind::Word, op) => {
                        return Err(error(format!("wgsl: {op} is not defined on 128-bit words")));
                    }
                }
            }
        })
    }

    fn stmt(&mut self, stmt: &Stmt, out: &mut String, depth: usize) -> Result<(), CodegenError> {
        let pad = "  ".repeat(depth);
        match stmt {
            Stmt::For { var, range, body } => {
                writeln!(
                    out,
                    "{pad}for (var {var}: i32 = 0i; {var} < {range}i; {var}++) {{"
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
                if self.bounds(offset)?.is_some_and(|(low, _)| low < 0) {
                    return Err(error(format!(
                        "wgsl: a vector store into {node} '{}' starts before its buffer",
                        info.label
                    )));
                }
                writeln!(
                    out,
                    "{pad}{{\n{pad}  let w = {word};\n{pad}  let o = {};",
                    index_expr(offset)
                )
                .expect("writing to a string");
                for k in 0..op.length(precision) {
                    let value = format!("rc_uniform_{precision}(w, {k}u)");
                    writeln!(
                        out,
                        "{pad}  if (o + {k}i < {}i) {{ {node}[o + {k}i] = {}; }}",
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
                    "{pad}for (var i: i32 = 0i; i < {}i; i++) {{ {node}[i] = {}; }}",
                    info.buffer_len(),
                    storage_literal(*value, info.precision)
                )
                .expect("writing to a string");
            }
            Stmt::FillMargins { node, value } => {
                writeln!(
                    out,
                    "{pad}for (var i: i32 = 0i; i < {}i; i++) {{",
                    self.routine.nodes[node].buffer_len()
                )
                .expect("writing to a string");
                out.push_str(&margin_store(self.routine, *node, *value, "i", depth + 1));
                writeln!(out, "{pad}}}").expect("writing to a string");
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                let value = self.expr(value, *precision)?;
                if self.spilled.contains_key(id) {
                    writeln!(out, "{pad}rc_{id}[0] = {};", round_to(&value, *precision))
                        .expect("writing to a string");
                } else {
                    writeln!(
                        out,
                        "{pad}var {id}: {} = {};",
                        compute_type(*precision),
                        round_to(&value, *precision)
                    )
                    .expect("writing to a string");
                    self.locals.insert(*id, *precision);
                }
            }
            Stmt::SetLocal { id, value } => {
                if let Some(&precision) = self.spilled.get(id) {
                    let value = self.expr(value, precision)?;
                    writeln!(out, "{pad}rc_{id}[0] = {};", round_to(&value, precision))
                        .expect("writing to a string");
                    return Ok(());
                }
                let precision = *self
                    .locals
                    .get(id)
                    .ok_or_else(|| error(format!("wgsl: {id} is set before it is declared")))?;
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
                    Kind::Float => float_binop(Binop::Add, &old, &value),
                    Kind::Int => int_binop(Binop::Add, &old, &value),
                    Kind::Word => {
                        return Err(error(format!(
                            "wgsl: a scatter into {node} adds, which 128-bit words do not"
                        )));
                    }
                };
                // Where the id selects no cell, the axis's first cell gets its own value back.
                writeln!(
                    out,
                    "{pad}{{\n{pad}  let o = {offset};\n{pad}  {node}[o] = {};\n{pad}}}",
                    to_storage(&format!("select({old}, {sum}, {ok})"), precision)
                )
                .expect("writing to a string");
            }
            Stmt::Gemm { nest, .. } => {
                // Inside a serial kernel a product runs as the nest it stands for.
                self.body(nest, out, depth)?;
            }
        }
        Ok(())
    }

    fn body(&mut self, body: &[Stmt], out: &mut String, depth: usize) -> Result<(), CodegenError> {
        let outer = self.locals.clone();
        for stmt in body {
            self.stmt(stmt, out, depth)?;
        }
        self.locals = outer;
        Ok(())
    }
}

/// The store of `value` into the cell of `node` at flat buffer position `flat`, if the cell
/// lies in a margin.
fn margin_store(routine: &Routine, node: NodeId, value: f64, flat: &str, depth: usize) -> String {
    let pad = "  ".repeat(depth);
    let info = &routine.nodes[&node];
    let dims = info.buffer_dims();
    let mut outside = Vec::new();
    let mut stride = 1usize;
    for (axis, dim) in dims.iter().enumerate().rev() {
        let (before, _) = info.padding[axis];
        let coordinate = format!("(({flat} / {stride}i) % {dim}i)");
        outside.push(format!(
            "{coordinate} < {before}i || {coordinate} >= {}i",
            before + info.dims[axis]
        ));
        stride *= dim;
    }
    if outside.is_empty() {
        return String::new();
    }
    format!(
        "{pad}if ({}) {{ {node}[{flat}] = {}; }}\n",
        outside.join(" || "),
        storage_literal(value, info.precision)
    )
}

fn float_unop(op: Unop, x: &str) -> String {
    match op {
        Unop::Identity => x.to_owned(),
        Unop::Neg => format!("(-{x})"),
        Unop::Relu => format!("rc_relu({x})"),
        Unop::Sat01 => format!("rc_sat01({x})"),
        Unop::Exp => format!("exp({x})"),
        Unop::Log => format!("log({x})"),
        Unop::Exp2 => format!("exp2({x})"),
        Unop::Log2 => format!("log2({x})"),
        Unop::Sin => format!("sin({x})"),
        Unop::Cos => format!("cos({x})"),
        Unop::Sqrt => format!("sqrt({x})"),
        Unop::Recip => format!("(1.0 / {x})"),
        Unop::RecipSqrt => format!("inverseSqrt({x})"),
        Unop::Tanh => format!("rc_tanh({x})"),
        Unop::Not => format!("rc_truth({x} == 0.0)"),
        Unop::Trunc => format!("trunc({x})"),
        Unop::Uint4x32ToPrecUniform1 => unreachable!("handled with its word argument"),
    }
}

fn int_unop(op: Unop, x: &str) -> String {
    match op {
        Unop::Identity | Unop::Trunc => x.to_owned(),
        Unop::Neg => format!("(0i - {x})"),
        Unop::Relu => format!("rc_irelu({x})"),
        Unop::Sat01 => format!("rc_isat01({x})"),
        Unop::Not => format!("rc_itruth({x} == 0i)"),
        // No integer meaning: computed on floats and truncated.
        other => format!("rc_f2i({})", float_unop(other, &format!("f32({x})"))),
    }
}

fn float_binop(op: Binop, a: &str, b: &str) -> String {
    match op {
        Binop::Add => format!("({a} + {b})"),
        Binop::Sub => format!("({a} - {b})"),
        Binop::Mul => format!("({a} * {b})"),
        Binop::Div => format!("({a} / {b})"),
        Binop::Pow => format!("rc_pow({a}, {b})"),
        Binop::Max => format!("rc_max({a}, {b})"),
        Binop::Min => format!("rc_min({a}, {b})"),
        Binop::ReluGate => format!("rc_relu_gate({a}, {b})"),
        Binop::Sat01Gate => format!("rc_sat01_gate({a}, {b})"),
        Binop::Or => format!("rc_truth(({a} != 0.0) || ({b} != 0.0))"),
        Binop::And => format!("rc_truth(({a} != 0.0) && ({b} != 0.0))"),
        Binop::Lt => format!("rc_truth({a} < {b})"),
        Binop::Eq => format!("rc_truth({a} == {b})"),
        Binop::Ne => format!("rc_truth({a} != {b})"),
        Binop::Mod => format!("rc_fmod({a}, {b})"),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
    }
}

fn int_binop(op: Binop, a: &str, b: &str) -> String {
    match op {
        Binop::Add => format!("({a} + {b})"),
        Binop::Sub => format!("({a} - {b})"),
        Binop::Mul => format!("({a} * {b})"),
        Binop::Div => format!("rc_idiv({a}, {b})"),
        Binop::Pow => format!("rc_ipow({a}, {b})"),
        Binop::Max => format!("max({a}, {b})"),
        Binop::Min => format!("min({a}, {b})"),
        Binop::ReluGate => format!("rc_irelu_gate({a}, {b})"),
        // No integer lies strictly between 0 and 1.
        Binop::Sat01Gate => "0i".to_owned(),
        Binop::Or => format!("rc_itruth(({a} != 0i) || ({b} != 0i))"),
        Binop::And => format!("rc_itruth(({a} != 0i) && ({b} != 0i))"),
        Binop::Lt => format!("rc_itruth({a} < {b})"),
        Binop::Eq => format!("rc_itruth({a} == {b})"),
        Binop::Ne => format!("rc_itruth({a} != {b})"),
        Binop::Mod => format!("rc_imod({a}, {b})"),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
    }
}

/// Checks that the device holds every node and local of `routine`, naming the first it lacks.
pub fn check_precisions(routine: &Routine, features: DeviceFeatures) -> Result<(), CodegenError> {
    for node in routine.nodes.values() {
        if !holds(node.precision, features) {
            return Err(lacks(node.id, &node.label, node.precision));
        }
    }
    let mut lacking = None;
    for stmt in &routine.body {
        stmt.walk(&mut |s| {
            if let Stmt::Local { id, precision, .. } = s
                && lacking.is_none()
                && !holds(*precision, features)
            {
                lacking = Some((*id, *precision));
            }
        });
    }
    match lacking {
        Some((id, precision)) => Err(error(format!(
            "routine {}: the GPU cannot compute the value {id} in {precision}",
            routine.name
        ))),
        None => Ok(()),
    }
}

/// The largest flat position a kernel may compute: WGSL indexes with 32-bit integers.
const MAX_CELLS: usize = i32::MAX as usize;

/// The WGSL program of `routine` on a device with `features`.
pub fn generate(routine: &Routine, features: DeviceFeatures) -> Result<Program, CodegenError> {
    check_precisions(routine, features)?;
    for node in routine.nodes.values() {
        if node.memory_mode != Some(MemoryMode::Virtual)
            && node.buffer_dims_checked().is_none_or(|d| {
                d.iter()
                    .try_fold(1usize, |n, &x| n.checked_mul(x))
                    .is_none_or(|n| n > MAX_CELLS)
            })
        {
            return Err(error(format!(
                "the GPU addresses at most {MAX_CELLS} cells of a buffer: tensor '{}' ({}) of dims \
                 {:?} has more",
                node.label, node.id, node.dims
            )));
        }
    }
    let statics: Vec<Symbol> = routine.statics.keys().copied().collect();
    let mut kernels = Vec::new();
    generate_body(routine, &routine.body, &statics, &mut kernels)?;
    Ok(Program { kernels, statics })
}

fn generate_body(
    routine: &Routine,
    body: &[Stmt],
    statics: &[Symbol],
    kernels: &mut Vec<Kernel>,
) -> Result<(), CodegenError> {
    let mut writer = Writer {
        routine,
        locals: HashMap::new(),
        spilled: HashMap::new(),
        loops: HashMap::new(),
    };
    let body = schedule::hoist_parallel_loops(routine, body);
    for group in kernel_groups(routine, &body) {
        match group {
            Group::Gemm { plan, nest } => {
                // The product kernel makes the nest's accesses unchecked: check them as the
                // nest's own kernels would.
                writer.body(nest, &mut String::new(), 0)?;
                let Some(product) = product::kernel(routine, plan, statics)? else {
                    generate_body(routine, nest, statics, kernels)?;
                    continue;
                };
                // A plan's fill of zeros runs first only for cells the product leaves alone.
                if let [fill @ Stmt::Fill { .. }, ..] = nest
                    && !product::writes_every_cell(routine, plan)
                {
                    generate_body(routine, std::slice::from_ref(fill), statics, kernels)?;
                }
                kernels.push(product);
            }
            Group::Parallel { preamble, stmt } => {
                let mut chain = Vec::new();
                let mut inner = std::slice::from_ref(stmt);
                while let [loop_stmt @ Stmt::For { var, range, body }] = inner {
                    if !splittable(loop_stmt, routine) {
                        break;
                    }
                    chain.push((*var, *range));
                    inner = body;
                }
                let invocations = chain
                    .iter()
                    .try_fold(1usize, |n, (_, r)| n.checked_mul(*r))
                    .filter(|&n| n <= MAX_CELLS);
                let Some(invocations) = invocations else {
                    return Err(error(format!(
                        "wgsl: a kernel of routine {} would run more than {MAX_CELLS} invocations",
                        routine.name
                    )));
                };
                let per_invocation = schedule::iterations(routine, inner);
                if per_invocation > ITERATION_BUDGET {
                    return Err(error(format!(
                        "wgsl: a kernel of routine {} runs {per_invocation} loop iterations in \
                         each invocation, more than the {ITERATION_BUDGET} one GPU invocation may \
                         run (lavapipe ends a shader after 65535)",
                        routine.name
                    )));
                }
                let mut code = String::new();
                let mut stride = invocations;
                for (var, range) in &chain {
                    stride /= range.max(&1);
                    writeln!(code, "  let {var}: i32 = (rc_id / {stride}i) % {range}i;")
                        .expect("writing to a string");
                    writer.loops.insert(*var, *range);
                }
                // The preamble's locals live through the loop.
                let outer = writer.locals.clone();
                for stmt in preamble {
                    writer.stmt(stmt, &mut code, 1)?;
                }
                writer.body(inner, &mut code, 1)?;
                writer.locals = outer;
                for (var, _) in &chain {
                    writer.loops.remove(var);
                }
                kernels.push(assemble(
                    &writer,
                    statics,
                    &code,
                    invocations as u64,
                    WORKGROUP,
                    1,
                ));
            }
            Group::Serial { stmts } => {
                for (run, parallel) in split_fills(stmts) {
                    if let Some(fill) = parallel {
                        kernels.extend(fill_kernel(&writer, fill, statics));
                    } else if schedule::iterations(routine, run) > ITERATION_BUDGET {
                        serial_in_chunks(&mut writer, run, statics, kernels)?;
                    } else {
                        let mut code = String::new();
                        writer.body(run, &mut code, 1)?;
                        kernels.push(assemble(&writer, statics, &code, 1, 1, 1));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The kernel of a fill or a margin fill, with an invocation per cell of its buffer; `None` for
/// an empty buffer or another statement.
fn fill_kernel(writer: &Writer, fill: &Stmt, statics: &[Symbol]) -> Option<Kernel> {
    let routine = writer.routine;
    let mut code = String::new();
    let (Stmt::Fill { node, value } | Stmt::FillMargins { node, value }) = fill else {
        return None;
    };
    let info = &routine.nodes[node];
    if matches!(fill, Stmt::Fill { .. }) {
        writeln!(
            code,
            "  {node}[rc_id] = {};",
            storage_literal(*value, info.precision)
        )
        .expect("writing to a string");
    } else {
        code.push_str(&margin_store(routine, *node, *value, "rc_id", 1));
    }
    let cells = info.buffer_len() as u64;
    (cells > 0).then(|| assemble(writer, statics, &code, cells, WORKGROUP, 1))
}

/// A serial run beyond the iteration budget as several kernels, run one after another: its
/// top-level locals kept in one-cell buffers, consecutive statements within the budget together,
/// and a statement beyond it dispatched in chunks ([`schedule::chunked`]).
fn serial_in_chunks(
    writer: &mut Writer,
    run: &[Stmt],
    statics: &[Symbol],
    kernels: &mut Vec<Kernel>,
) -> Result<(), CodegenError> {
    let routine = writer.routine;
    for stmt in run {
        if let Stmt::Local { id, precision, .. } = stmt {
            writer.spilled.insert(*id, *precision);
        }
    }
    let mut start = 0;
    while start < run.len() {
        let stmt = &run[start];
        if matches!(stmt, Stmt::Fill { .. } | Stmt::FillMargins { .. }) {
            kernels.extend(fill_kernel(writer, stmt, statics));
            start += 1;
            continue;
        }
        if schedule::iterations(routine, std::slice::from_ref(stmt)) <= ITERATION_BUDGET {
            let mut end = start + 1;
            while end < run.len()
                && !matches!(run[end], Stmt::Fill { .. } | Stmt::FillMargins { .. })
                && schedule::iterations(routine, &run[start..=end]) <= ITERATION_BUDGET
            {
                end += 1;
            }
            let mut code = String::new();
            for stmt in &run[start..end] {
                writer.stmt(stmt, &mut code, 1)?;
            }
            kernels.push(assemble(writer, statics, &code, 1, 1, 1));
            start = end;
            continue;
        }
        let Some(plan) = schedule::chunked(routine, stmt) else {
            return Err(error(format!(
                "wgsl: routine {} has a serial statement of {} loop iterations that cannot be cut \
                 into dispatches of at most {ITERATION_BUDGET}",
                routine.name,
                schedule::iterations(routine, std::slice::from_ref(stmt))
            )));
        };
        if plan.dispatches > schedule::MAX_DISPATCHES {
            return Err(error(format!(
                "wgsl: routine {} has a serial statement needing {} dispatches, more than {}",
                routine.name,
                plan.dispatches,
                schedule::MAX_DISPATCHES
            )));
        }
        let mut code = String::from("  let rc_k = rc_chunk[0];\n");
        let mut stride = plan.dispatches / plan.chunks as u64;
        for (var, range) in &plan.outer {
            stride /= (*range).max(1) as u64;
            writeln!(
                code,
                "  let {var}: i32 = (rc_k / {}i) % {range}i;",
                stride * plan.chunks as u64
            )
            .expect("writing to a string");
            writer.loops.insert(*var, *range);
        }
        let (var, per_chunk) = (plan.var, plan.per_chunk);
        writeln!(
            code,
            "  let rc_first = (rc_k % {}i) * {per_chunk}i;\n  for (var {var}: i32 = rc_first; {var} \
             < min(rc_first + {per_chunk}i, {}i); {var}++) {{",
            plan.chunks, plan.range
        )
        .expect("writing to a string");
        writer.loops.insert(var, plan.range);
        writer.body(plan.body, &mut code, 2)?;
        code.push_str("  }\n");
        writer.loops.remove(&var);
        for (var, _) in &plan.outer {
            writer.loops.remove(var);
        }
        kernels.push(assemble(writer, statics, &code, 1, 1, plan.dispatches));
        start += 1;
    }
    writer.spilled.clear();
    Ok(())
}

/// A serial run split around its top-level fills, which run as kernels of their own with an
/// invocation per cell: `(statements, None)` for a serial stretch, `(_, Some(fill))` for a fill.
fn split_fills(stmts: &[Stmt]) -> Vec<(&[Stmt], Option<&Stmt>)> {
    // A local declared at this level must stay in one kernel with every statement after it.
    if stmts.iter().any(|s| matches!(s, Stmt::Local { .. })) {
        return vec![(stmts, None)];
    }
    let mut runs = Vec::new();
    let mut start = 0;
    for (i, stmt) in stmts.iter().enumerate() {
        if matches!(stmt, Stmt::Fill { .. } | Stmt::FillMargins { .. }) {
            if start < i {
                runs.push((&stmts[start..i], None));
            }
            runs.push((&stmts[i..=i], Some(stmt)));
            start = i + 1;
        }
    }
    if start < stmts.len() {
        runs.push((&stmts[start..], None));
    }
    runs
}

/// The bindings of the nodes `code` names, in routine order.
fn bound_nodes(routine: &Routine, code: &str) -> Vec<NodeId> {
    routine
        .nodes
        .values()
        .filter(|n| n.memory_mode != Some(MemoryMode::Virtual))
        .map(|n| n.id)
        .filter(|id| {
            let name = format!("{id}[");
            code.contains(&name)
        })
        .collect()
}

/// The declarations a kernel's body needs: `enable f16` where it binds f16 cells, a binding per
/// node it names, the static indices where it reads any.
pub(crate) fn header(
    routine: &Routine,
    statics: &[Symbol],
    code: &str,
    bindings: &[NodeId],
) -> (String, bool) {
    let mut head = String::new();
    if bindings
        .iter()
        .any(|id| routine.nodes[id].precision == Precision::F16)
    {
        head.push_str("enable f16;\n");
    }
    head.push_str(PRELUDE);
    for (i, id) in bindings.iter().enumerate() {
        let ty = storage_type(routine.nodes[id].precision);
        writeln!(
            head,
            "@group(0) @binding({i}) var<storage, read_write> {id}: array<{ty}>;"
        )
        .expect("writing to a string");
    }
    let read = statics
        .iter()
        .any(|s| code.contains(&var_name(Var::Static(*s))));
    if read {
        writeln!(
            head,
            "@group(0) @binding({}) var<storage, read> rc_statics: array<i32>;",
            bindings.len()
        )
        .expect("writing to a string");
    }
    (head, read)
}

/// The lines reading the static indices `code` uses into their names.
pub(crate) fn static_lets(statics: &[Symbol], code: &str) -> String {
    let mut lets = String::new();
    for (i, symbol) in statics.iter().enumerate() {
        let name = var_name(Var::Static(*symbol));
        if code.contains(&name) {
            writeln!(lets, "  let {name}: i32 = rc_statics[{i}];").expect("writing to a string");
        }
    }
    lets
}

/// The kernel running `code` (which reads `rc_id`, its invocation's number) in `invocations`
/// invocations, dispatched `dispatches` times in order (reading `rc_chunk`).
fn assemble(
    writer: &Writer,
    statics: &[Symbol],
    code: &str,
    invocations: u64,
    workgroup: u32,
    dispatches: u64,
) -> Kernel {
    let routine = writer.routine;
    let bindings = bound_nodes(routine, code);
    let (mut source, reads_statics) = header(routine, statics, code, &bindings);
    let mut next = bindings.len() + usize::from(reads_statics);
    let mut spills: Vec<LocalId> = writer
        .spilled
        .keys()
        .copied()
        .filter(|id| code.contains(&format!("rc_{id}[")))
        .collect();
    spills.sort();
    for id in &spills {
        writeln!(
            source,
            "@group(0) @binding({next}) var<storage, read_write> rc_{id}: array<{}>;",
            compute_type(writer.spilled[id])
        )
        .expect("writing to a string");
        next += 1;
    }
    if dispatches > 1 {
        writeln!(
            source,
            "@group(0) @binding({next}) var<storage, read> rc_chunk: array<i32>;"
        )
        .expect("writing to a string");
    }
    writeln!(
        source,
        "\n@compute @workgroup_size({workgroup})\nfn main(@builtin(global_invocation_id) gid: \
         vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n  let rc_id = i32(gid.x + \
         gid.y * groups.x * {workgroup}u);\n  if (rc_id >= {invocations}i) {{ return; }}"
    )
    .expect("writing to a string");
    source.push_str(&static_lets(statics, code));
    source.push_str(code);
    source.push_str("}\n");
    Kernel {
        source,
        bindings,
        reads_statics,
        invocations,
        workgroup,
        spills,
        dispatches,
    }
}
