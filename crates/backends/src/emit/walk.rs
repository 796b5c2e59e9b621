//! The walk over statements and expressions every target shares: offsets and their bounds
//! proofs, reads and conversions, stores, lookups and scatters, loops and locals.

use std::collections::HashMap;
use std::fmt::Write;

use rcannl_ir::{
    Binop, Index, Kind, LocalId, Lookup, LoopVar, NodeId, Precision, Routine, Scalar, Stmt, Ternop,
    Unop, Value,
};

use super::coalesce::{Loop, coalescible, extremum_local, summed_local};
use super::{CodegenError, CodegenErrorKind, Dialect, ops, write_var_name};
use crate::nests::index_bounds;

/// The name of the array of lanes local `id` is kept in.
fn lanes_of(id: LocalId) -> String {
    format!("{id}_lanes")
}

/// The most lanes a loop's float sum, maximum or minimum is kept in where the dialect
/// vectorizes it ([`Dialect::lane_array`]): sixteen f32 fill the widest vector registers.
const LANES: usize = 16;
/// The shortest loop whose reduction is kept in lanes; a shorter one runs as written.
const MIN_LANES: usize = 4;

/// A loop's reduction kept in lanes: the float local it reduces into, the operation (a sum, a
/// maximum or a minimum), the declaration of the lanes and their number.
struct Reduction {
    id: LocalId,
    op: Binop,
    array: String,
    lanes: usize,
}

/// What the generator knows of the routine while it writes statements in dialect `D`.
#[derive(Debug)]
pub struct Writer<'a, D> {
    /// The routine being written.
    pub routine: &'a Routine,
    /// How the target spells what is written.
    pub dialect: &'a D,
    /// The locals declared around the statement being written.
    locals: HashMap<LocalId, Precision>,
    /// Locals kept in memory ([`Dialect::spill_cell`]) rather than registers, with their
    /// precisions and slots.
    spilled: HashMap<LocalId, (Precision, usize)>,
    /// The ranges of the loops around the statement being written.
    loops: HashMap<LoopVar, usize>,
    /// Whether accesses are checked against their axes; off while writing a coalesced chain,
    /// whose accesses were checked on the nest as written.
    checking: bool,
    /// Whether every store into a buffer is followed by its trace ([`Dialect::trace_store`]).
    tracing: bool,
}

impl<'a, D: Dialect> Writer<'a, D> {
    /// A writer of `routine`'s statements in `dialect`, outside every loop.
    pub fn new(routine: &'a Routine, dialect: &'a D) -> Writer<'a, D> {
        Writer {
            routine,
            dialect,
            locals: HashMap::new(),
            spilled: HashMap::new(),
            loops: HashMap::new(),
            checking: true,
            tracing: false,
        }
    }

    /// The same writer, following every store into a buffer with the statement that logs it
    /// ([`Dialect::trace_store`]): for a routine in its tracing form
    /// ([`crate::trace::tracing_form`]), whose fills and matrix products are loops of stores.
    /// Writing a statement that stores otherwise is then an error, as is a dialect that cannot
    /// print.
    pub fn tracing(mut self) -> Writer<'a, D> {
        self.tracing = true;
        self
    }

    /// The statement logging the store just made into the cell at flat `offset` of `node`,
    /// indented by `pad`, where stores are traced; nothing otherwise.
    fn trace_line(&self, pad: &str, node: NodeId, offset: &str) -> Result<String, CodegenError> {
        if !self.tracing {
            return Ok(String::new());
        }
        let info = &self.routine.nodes[&node];
        let d = self.dialect;
        let value = d.loaded(&d.cell(node, offset), info.precision);
        let statement = d.trace_store(info, offset, &value).ok_or_else(|| {
            self.error(
                CodegenErrorKind::Unsupported,
                format!(
                    "cannot trace the stores into {node} '{}': the target has no way to print \
                     (the trace_stores setting)",
                    info.label
                ),
            )
        })?;
        Ok(format!("{pad}{statement}\n"))
    }

    fn error(&self, kind: CodegenErrorKind, message: impl std::fmt::Display) -> CodegenError {
        CodegenError::new(kind, format!("{}: {message}", self.dialect.name()))
    }

    /// Statements written from here on lie inside the loop of `var` over `range`.
    pub fn enter_loop(&mut self, var: LoopVar, range: usize) {
        self.loops.insert(var, range);
    }

    /// Statements written from here on lie outside the loop of `var`.
    pub fn leave_loop(&mut self, var: LoopVar) {
        self.loops.remove(&var);
    }

    /// Runs `write`, then forgets the locals it declared: they live until the end of the code
    /// `write` writes.
    pub fn scoped<R>(&mut self, write: impl FnOnce(&mut Self) -> R) -> R {
        let outer = self.locals.clone();
        let result = write(self);
        self.locals = outer;
        result
    }

    /// Keeps local `id` of `precision` in memory from now on, in the next slot of its compute
    /// kind, so that statements written into different kernels share it.
    pub fn spill(&mut self, id: LocalId, precision: Precision) {
        let slot = self.spill_slots(precision.kind());
        self.spilled.insert(id, (precision, slot));
    }

    /// How many locals of compute kind `kind` are kept in memory.
    pub fn spill_slots(&self, kind: Kind) -> usize {
        self.spilled
            .values()
            .filter(|(p, _)| p.kind() == kind)
            .count()
    }

    /// The memory cell of spilled local `id`, with its precision.
    fn spilled_cell(&self, id: LocalId) -> Option<(String, Precision)> {
        let &(precision, slot) = self.spilled.get(&id)?;
        Some((self.dialect.spill_cell(precision.kind(), slot), precision))
    }

    /// The value of spilled local `id` in `cell`, in the compute type of its precision.
    fn spilled_value(&self, cell: &str, precision: Precision) -> String {
        let held = self.dialect.spill_precision(precision);
        self.dialect.convert(cell, held, precision)
    }

    /// The statement storing `value`, of local precision `precision`, into spilled `cell`.
    fn spill_store(&self, pad: &str, cell: &str, value: &str, precision: Precision) -> String {
        let held = self.dialect.spill_precision(precision);
        format!(
            "{pad}{cell} = {};\n",
            self.dialect.convert(value, precision, held)
        )
    }

    /// Keeps every local in registers again.
    pub fn clear_spills(&mut self) {
        self.spilled.clear();
    }

    /// Checks the bounds of every access of `stmts` as if writing them, writing nothing.
    pub fn check(&mut self, stmts: &[Stmt]) -> Result<(), CodegenError> {
        self.body(stmts, &mut String::new(), 0)
    }

    fn precision(&self, node: NodeId) -> Result<Precision, CodegenError> {
        self.routine
            .nodes
            .get(&node)
            .map(|n| n.precision)
            .ok_or_else(|| self.error(CodegenErrorKind::Malformed, format!("unknown node {node}")))
    }

    /// A position, in the dialect's arithmetic.
    pub fn index_expr(&self, index: &Index) -> String {
        // Written into one string: a kernel's text is mostly offsets.
        let mut out = String::from("(");
        for (i, (c, var)) in index.terms.iter().enumerate() {
            if i > 0 {
                out.push_str(" + ");
            }
            if *c != 1 {
                out.push_str(&self.dialect.index_constant(*c));
                out.push('*');
            }
            write_var_name(&mut out, *var);
        }
        if index.offset != 0 || index.terms.is_empty() {
            if !index.terms.is_empty() {
                out.push_str(" + ");
            }
            out.push_str(&self.dialect.index_constant(index.offset));
        }
        out.push(')');
        out
    }

    /// The declaration of the constant position `name`, holding `value` (a loop variable fixed, or
    /// decoded from an invocation's number).
    pub fn index_let(&self, name: &str, value: &str) -> String {
        self.dialect
            .declare(name, self.dialect.index_type(), value, false)
    }

    /// A literal of the compute type of `precision` for the constant `c`, as the interpreter
    /// reads a constant in that kind.
    pub fn literal(&self, c: f64, precision: Precision) -> String {
        match Value::Float(c).to_kind(precision.kind(), Precision::I64) {
            Value::Float(x) => self.dialect.float_literal(x, precision),
            Value::Int(i) => self.dialect.int_literal(i),
            Value::Word(w) => self.dialect.word_literal(w),
        }
    }

    /// The row-major flat offset of `index` in `node`'s buffer, every position checked against
    /// its axis.
    fn offset(&self, node: NodeId, index: &[Index]) -> Result<String, CodegenError> {
        let info = &self.routine.nodes[&node];
        let dims = info.buffer_dims();
        if dims.len() != index.len() {
            return Err(self.error(
                CodegenErrorKind::Malformed,
                format!(
                    "{node} '{}' has {} axes, indexed with {}",
                    info.label,
                    dims.len(),
                    index.len()
                ),
            ));
        }
        let mut offset = String::new();
        for (axis, (position, dim)) in index.iter().zip(&dims).enumerate() {
            if let Some((low, high)) = self.bounds(position)?
                && (low < 0 || (self.checking && high >= *dim as i128))
            {
                return Err(self.error(
                    CodegenErrorKind::OutOfBounds,
                    format!(
                        "{node} '{}' is addressed at {low}..={high} on axis {axis}, outside its \
                         buffer of {dim}",
                        info.label
                    ),
                ));
            }
            offset = if axis == 0 {
                self.index_expr(position)
            } else {
                format!(
                    "({offset}*{} + {})",
                    self.dialect.size(*dim),
                    self.index_expr(position)
                )
            };
        }
        Ok(if offset.is_empty() {
            self.dialect.size(0)
        } else {
            offset
        })
    }

    /// The flat offset of the cell `lookup`'s id selects (the axis's first cell where it selects
    /// none), and the condition that it selects one. Every cell of the axis is checked here, so
    /// that whatever the data holds, the access stays inside the buffer.
    fn lookup_offset(&self, lookup: &Lookup) -> Result<(String, String), CodegenError> {
        let node = lookup.node;
        let info = self.routine.nodes.get(&node).ok_or_else(|| {
            self.error(
                CodegenErrorKind::Malformed,
                format!("the routine reads {node}, which it does not declare"),
            )
        })?;
        let Some(last) = lookup.last_cell() else {
            return Err(self.error(
                CodegenErrorKind::Malformed,
                format!(
                    "a lookup into {node} '{}' selects along axis {}, which it lacks",
                    info.label, lookup.axis
                ),
            ));
        };
        let stride = lookup.stride(&info.buffer_dims());
        let base = self.offset(node, &lookup.index)?;
        self.offset(node, &last)?;
        let id = self.expr(&lookup.id, self.dialect.condition_precision())?;
        let size = self.dialect.size(lookup.size);
        Ok((
            format!(
                "({base} + rc_row({id}, {size})*{})",
                self.dialect.size(stride)
            ),
            format!("rc_row_ok({id}, {size})"),
        ))
    }

    /// [`index_bounds`] under the loops around the statement being written.
    fn bounds(&self, index: &Index) -> Result<Option<(i128, i128)>, CodegenError> {
        index_bounds(index, &self.loops, &self.routine.statics)
            .map_err(|e| self.error(CodegenErrorKind::TooLarge, e))
    }

    fn on_words(&self, op: impl std::fmt::Display) -> CodegenError {
        self.error(
            CodegenErrorKind::Unsupported,
            format!("{op} is not defined on 128-bit words"),
        )
    }

    /// `scalar` computed in the kind of `precision`, in the compute type of `precision`.
    pub fn expr(&self, scalar: &Scalar, precision: Precision) -> Result<String, CodegenError> {
        let d = self.dialect;
        let kind = precision.kind();
        Ok(match scalar {
            Scalar::Const(c) => self.literal(*c, precision),
            Scalar::Get(node, index) => {
                let from = self.precision(*node)?;
                let cell = d.cell(*node, &self.offset(*node, index)?);
                d.convert(&d.loaded(&cell, from), from, precision)
            }
            Scalar::Lookup(lookup) => {
                let from = self.precision(lookup.node)?;
                let (offset, ok) = self.lookup_offset(lookup)?;
                let cell = d.cell(lookup.node, &offset);
                d.blend(
                    precision,
                    &ok,
                    &d.convert(&d.loaded(&cell, from), from, precision),
                    &self.literal(0.0, precision),
                )
            }
            Scalar::Embed(index) => d.convert(
                &d.position_value(&self.index_expr(index)),
                Precision::U32,
                precision,
            ),
            Scalar::Local(id) => {
                if let Some((cell, from)) = self.spilled_cell(*id) {
                    return Ok(d.convert(&self.spilled_value(&cell, from), from, precision));
                }
                let from = *self.locals.get(id).ok_or_else(|| {
                    self.error(
                        CodegenErrorKind::Malformed,
                        format!("{id} is read before it is declared"),
                    )
                })?;
                d.convert(&id.to_string(), from, precision)
            }
            Scalar::Unop(Unop::Uint4x32ToPrecUniform1, x) => {
                let word = self.expr(x, Precision::Uint4x32)?;
                uniform(d, precision, &word, 0)
            }
            Scalar::Unop(op, x) => {
                let x = self.expr(x, precision)?;
                match kind {
                    Kind::Float => ops::float_unop(d, *op, &x, precision),
                    Kind::Int => ops::int_unop(d, *op, &x, precision),
                    Kind::Word if *op == Unop::Identity => x,
                    Kind::Word => return Err(self.on_words(op)),
                }
            }
            Scalar::Binop(Binop::Pow, base, exponent) if kind == Kind::Float => {
                if let Scalar::Const(c) = **exponent
                    && let Some(power) =
                        d.constant_power(&self.expr(base, precision)?, c, precision)
                {
                    return Ok(power);
                }
                let (a, b) = (self.expr(base, precision)?, self.expr(exponent, precision)?);
                ops::float_binop(d, Binop::Pow, &a, &b, precision)
            }
            Scalar::Binop(op, a, b) => {
                let (a, b) = (self.expr(a, precision)?, self.expr(b, precision)?);
                match (kind, op) {
                    (_, Binop::Arg1) => a,
                    (_, Binop::Arg2) => b,
                    (Kind::Word, Binop::Threefry4x32) => threefry(d, &a, &b, 20),
                    (Kind::Word, Binop::Threefry4x32Light) => threefry(d, &a, &b, 2),
                    (_, Binop::Threefry4x32 | Binop::Threefry4x32Light) => {
                        return Err(self.error(
                            CodegenErrorKind::Unsupported,
                            format!(
                                "threefry4x32 yields 128-bit words; a {precision} value cannot \
                                 hold one"
                            ),
                        ));
                    }
                    (Kind::Float, op) => ops::float_binop(d, *op, &a, &b, precision),
                    (Kind::Int, op) => ops::int_binop(d, *op, &a, &b, precision),
                    (Kind::Word, op) => return Err(self.on_words(op)),
                }
            }
            Scalar::Ternop(Ternop::Where, condition, then, otherwise) => {
                let condition = self.expr(condition, d.condition_precision())?;
                d.blend(
                    precision,
                    &d.truth(&condition),
                    &self.expr(then, precision)?,
                    &self.expr(otherwise, precision)?,
                )
            }
            Scalar::Ternop(op, a, b, c) => {
                let (a, b, c) = (
                    self.expr(a, precision)?,
                    self.expr(b, precision)?,
                    self.expr(c, precision)?,
                );
                match kind {
                    Kind::Float | Kind::Int => ops::ternop(d, *op, &a, &b, &c, precision),
                    Kind::Word => return Err(self.on_words(op)),
                }
            }
        })
    }

    /// Writes `stmt` into `out`, indented `depth` levels.
    pub fn stmt(
        &mut self,
        stmt: &Stmt,
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        let d = self.dialect;
        let pad = "  ".repeat(depth);
        match stmt {
            Stmt::For { var, range, body } => {
                if d.coalesces_loops()
                    && let Some((chain, inner)) = coalescible(self.routine, *var, *range, body)
                {
                    return self.coalesced(&chain, inner, out, depth);
                }
                if let Some(reduction) = self.lanes_for(body, *range) {
                    return self.in_lanes((*var, *range), &[], body, &reduction, out, depth);
                }
                let header = d.loop_header(&var.to_string(), &d.size(0), &d.size(*range));
                writeln!(out, "{pad}{header}").expect("writing to a string");
                self.body_of_loop((*var, *range), body, out, depth + 1)?;
                writeln!(out, "{pad}}}").expect("writing to a string");
            }
            Stmt::Set { node, index, value } => {
                let precision = self.precision(*node)?;
                let value = self.expr(value, precision)?;
                let offset = self.offset(*node, index)?;
                writeln!(
                    out,
                    "{pad}{} = {};",
                    d.cell(*node, &offset),
                    d.stored(&value, precision)
                )
                .expect("writing to a string");
                out.push_str(&self.trace_line(&pad, *node, &offset)?);
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
                    return Err(self.error(
                        CodegenErrorKind::OutOfBounds,
                        format!(
                            "a vector store into {node} '{}' starts before its buffer",
                            info.label
                        ),
                    ));
                }
                // Cells past the end are skipped, each store guarded.
                let constants = [
                    ("w", d.compute_type(Precision::Uint4x32), word),
                    ("o", d.index_type(), self.index_expr(offset)),
                ];
                out.push_str(&d.open_block(&pad, &constants));
                let len = d.size(info.buffer_len());
                for k in 0..op.length(precision) {
                    let value = d.stored(&uniform(d, precision, "w", k), precision);
                    let k = d.size(k);
                    let at = format!("o + {k}");
                    let mut store = format!("{} = {value};", d.cell(*node, &at));
                    if self.tracing {
                        store =
                            format!("{{ {store} {} }}", self.trace_line("", *node, &at)?.trim());
                    }
                    let guarded = d.guarded(&format!("o + {k} < {len}"), &store);
                    writeln!(out, "{pad}  {guarded}").expect("writing to a string");
                }
                writeln!(out, "{pad}}}").expect("writing to a string");
            }
            Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } if self.tracing => {
                return Err(self.error(
                    CodegenErrorKind::Malformed,
                    format!(
                        "routine {}: traced, but not in its tracing form (a fill or a matrix \
                         product remains)",
                        self.routine.name
                    ),
                ));
            }
            Stmt::Fill { node, value } => {
                let info = &self.routine.nodes[node];
                let literal = d.storage_literal(*value, info.precision);
                out.push_str(&d.fill(&pad, *node, info.buffer_len(), &literal));
            }
            Stmt::FillMargins { node, value } => {
                let info = &self.routine.nodes[node];
                let literal = d.storage_literal(*value, info.precision);
                out.push_str(&d.fill_margins(&pad, info, &literal));
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                let value = d.round_to(&self.expr(value, *precision)?, *precision);
                if let Some((cell, _)) = self.spilled_cell(*id) {
                    out.push_str(&self.spill_store(&pad, &cell, &value, *precision));
                } else {
                    let ty = d.compute_type(*precision);
                    let declared = d.declare(&id.to_string(), ty, &value, true);
                    writeln!(out, "{pad}{declared}").expect("writing to a string");
                    self.locals.insert(*id, *precision);
                }
            }
            Stmt::SetLocal { id, value } => {
                if let Some((cell, precision)) = self.spilled_cell(*id) {
                    let value = d.round_to(&self.expr(value, precision)?, precision);
                    out.push_str(&self.spill_store(&pad, &cell, &value, precision));
                    return Ok(());
                }
                let precision = *self.locals.get(id).ok_or_else(|| {
                    self.error(
                        CodegenErrorKind::Malformed,
                        format!("{id} is set before it is declared"),
                    )
                })?;
                let value = self.expr(value, precision)?;
                writeln!(out, "{pad}{id} = {};", d.round_to(&value, precision))
                    .expect("writing to a string");
            }
            Stmt::ScatterAdd { target, value } => {
                let node = target.node;
                let precision = self.precision(node)?;
                let (offset, ok) = self.lookup_offset(target)?;
                let value = self.expr(value, precision)?;
                let old = d.convert(
                    &d.loaded(&d.cell(node, "o"), precision),
                    precision,
                    precision,
                );
                let sum = match precision.kind() {
                    Kind::Float => ops::float_binop(d, Binop::Add, &old, &value, precision),
                    Kind::Int => ops::int_binop(d, Binop::Add, &old, &value, precision),
                    Kind::Word => {
                        return Err(self.error(
                            CodegenErrorKind::Unsupported,
                            format!("a scatter into {node} adds, which 128-bit words do not"),
                        ));
                    }
                };
                // Where the id selects no cell, the axis's first cell gets its own value back:
                // the store happens whatever the data, and changes nothing there.
                let stored = d.stored(&d.blend(precision, &ok, &sum, &old), precision);
                out.push_str(&d.scatter_store(&pad, node, &offset, &stored));
                // Traced only where the id selects a cell, as the interpreter stores only there.
                let traced = self.trace_line("", node, &offset)?;
                if !traced.is_empty() {
                    writeln!(out, "{pad}{}", d.guarded(&ok, traced.trim()))
                        .expect("writing to a string");
                }
            }
            Stmt::Gemm { nest, .. } => {
                // A product inside other statements runs as the nest it stands for.
                self.body(nest, out, depth)?;
            }
        }
        Ok(())
    }

    /// Writes `body`; the locals it declares live until its end.
    pub fn body(
        &mut self,
        body: &[Stmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        self.scoped(|writer| {
            for stmt in body {
                writer.stmt(stmt, out, depth)?;
            }
            Ok(())
        })
    }

    /// Writes `for var in 0..range { body }`, a loop that only adds its terms into the float
    /// local `id` (`op` [`Binop::Add`]) or keeps their maximum or minimum in it, with the local
    /// kept in `lanes` lanes (declared by `array`: the [`Reduction`]), which vectorize: lane `i` takes the terms at
    /// positions `i` modulo `lanes`; the lanes are then combined pairwise (lane `i` with lane
    /// `i + width`, the width halving down to one), into the local's value, followed by the
    /// terms past the last whole group. The order depends on the range alone, so the result is
    /// the same whatever the compiler, its optimization level or the target; `fixed` are
    /// variables of loops of one iteration around it (a coalesced chain's), set to 0 inside.
    ///
    /// A sum's lanes start at −0, which leaves every term as it is. The extremum of values none
    /// of which is a zero or a NaN is one value whatever the order (equal floats but ±0 have
    /// equal bits), so that is the loop's result; where it is a zero or a NaN (which zero,
    /// which NaN, depends on the order: ties keep the first), the loop runs again as written,
    /// from the local's value before it, to the interpreter's result.
    fn in_lanes(
        &mut self,
        (var, range): Loop,
        fixed: &[LoopVar],
        body: &[Stmt],
        reduction: &Reduction,
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        let &Reduction {
            id,
            op,
            ref array,
            lanes,
        } = reduction;
        let d = self.dialect;
        let pad = "  ".repeat(depth);
        let precision = self.locals[&id];
        let ty = d.compute_type(precision);
        let (array_name, lane, group, kept) = (
            lanes_of(id),
            format!("{var}_lane"),
            format!("{var}_group"),
            format!("{id}_kept"),
        );
        let whole = range / lanes * lanes;
        let header =
            |var: &str, start: usize, end: usize| d.loop_header(var, &d.size(start), &d.size(end));
        // The fixed variables' declarations, each line that opens an iteration followed by them.
        let zeros: String = fixed
            .iter()
            .map(|v| format!(" {}", self.index_let(&v.to_string(), &d.size(0))))
            .collect();
        let opened = |line: String| format!("{line}{zeros}");
        let start = if op == Binop::Add {
            d.float_literal(-0.0, precision)
        } else {
            id.to_string()
        };
        writeln!(out, "{pad}{{\n{pad}  {array}").expect("to a string");
        let every_lane = header(&lane, 0, lanes);
        writeln!(
            out,
            "{pad}  {every_lane} {array_name}[{lane}] = {start}; }}"
        )
        .expect("to a string");
        writeln!(out, "{pad}  {}", header(&group, 0, whole / lanes)).expect("to a string");
        if let Some(hint) = d.simd_hint() {
            writeln!(out, "{pad}    {hint}").expect("to a string");
        }
        writeln!(out, "{pad}    {}", header(&lane, 0, lanes)).expect("to a string");
        let position = self.index_let(&var.to_string(), &format!("{group} * {lanes} + {lane}"));
        let own = d.declare(&id.to_string(), ty, &format!("{array_name}[{lane}]"), true);
        writeln!(out, "{pad}      {}\n{pad}      {own}", opened(position)).expect("to a string");
        self.body_of_loop((var, range), body, out, depth + 3)?;
        writeln!(
            out,
            "{pad}      {array_name}[{lane}] = {id};\n{pad}    }}\n{pad}  }}"
        )
        .expect("to a string");
        // Lane `i` with lane `i + width`, the width halving; then the local's value with lane 0.
        let mut width = lanes / 2;
        while width >= 1 {
            let pair = ops::float_binop(
                d,
                op,
                &format!("{array_name}[{lane}]"),
                &format!("{array_name}[{lane} + {width}]"),
                precision,
            );
            let halves = header(&lane, 0, width);
            writeln!(out, "{pad}  {halves} {array_name}[{lane}] = {pair}; }}")
                .expect("to a string");
            width /= 2;
        }
        let combined = ops::float_binop(
            d,
            op,
            &id.to_string(),
            &format!("{array_name}[0]"),
            precision,
        );
        writeln!(out, "{pad}  {}", d.declare(&kept, ty, &combined, true)).expect("to a string");
        if whole < range {
            let tail = opened(header(&var.to_string(), whole, range));
            writeln!(out, "{pad}  {tail}").expect("to a string");
            let own = d.declare(&id.to_string(), ty, &kept, true);
            writeln!(out, "{pad}    {own}").expect("to a string");
            self.body_of_loop((var, range), body, out, depth + 2)?;
            writeln!(out, "{pad}    {kept} = {id};\n{pad}  }}").expect("to a string");
        }
        if op == Binop::Add {
            writeln!(out, "{pad}  {id} = {kept};\n{pad}}}").expect("to a string");
            return Ok(());
        }
        // A zero or a NaN: the loop as written.
        let zero = d.float_literal(0.0, precision);
        writeln!(out, "{pad}  if ({kept} == {zero} || {kept} != {kept}) {{").expect("to a string");
        let again = opened(header(&var.to_string(), 0, range));
        writeln!(out, "{pad}    {again}").expect("to a string");
        self.body_of_loop((var, range), body, out, depth + 3)?;
        writeln!(
            out,
            "{pad}    }}\n{pad}  }} else {{\n{pad}    {id} = {kept};\n{pad}  }}\n{pad}}}"
        )
        .expect("to a string");
        Ok(())
    }

    /// The reduction of a loop over `range` with `body` (only adding into a local, or keeping its
    /// maximum or minimum), in the largest power of two of lanes not above the range, at most
    /// [`LANES`], where the dialect keeps such a local in lanes and the range has at least
    /// [`MIN_LANES`].
    fn lanes_for(&self, body: &[Stmt], range: usize) -> Option<Reduction> {
        if range < MIN_LANES {
            return None;
        }
        let lanes = LANES.min(1 << range.ilog2());
        let (id, op) = extremum_local(body, &self.locals)
            .or_else(|| summed_local(body, &self.locals).map(|id| (id, Binop::Add)))?;
        let ty = self.dialect.compute_type(self.locals[&id]);
        let array = self.dialect.lane_array(&lanes_of(id), ty, lanes)?;
        Some(Reduction {
            id,
            op,
            array,
            lanes,
        })
    }

    /// Writes `body` as run by the loop of `var` over `range`, whose header is written.
    fn body_of_loop(
        &mut self,
        (var, range): Loop,
        body: &[Stmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        self.enter_loop(var, range);
        let written = self.body(body, out, depth);
        self.leave_loop(var);
        written
    }

    /// Writes `chain` (loops from outermost, each holding only the next) as one loop over the
    /// innermost variable, running over every cell of the chain, the outer variables 0: every
    /// index then addresses what it did (see [`coalescible`]). Accesses are checked on the nest
    /// as written first.
    fn coalesced(
        &mut self,
        chain: &[Loop],
        inner: &[Stmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), CodegenError> {
        let d = self.dialect;
        for &(var, range) in chain {
            self.enter_loop(var, range);
        }
        let checked = self.body(inner, &mut String::new(), depth + 1);
        let (last, _) = *chain.last().expect("a chain of two or more");
        let total = chain
            .iter()
            .map(|(_, range)| *range)
            .fold(1usize, usize::saturating_mul);
        let pad = "  ".repeat(depth);
        let outer: Vec<LoopVar> = chain[..chain.len() - 1]
            .iter()
            .map(|&(var, _)| var)
            .collect();
        if checked.is_ok()
            && let Some(reduction) = self.lanes_for(inner, total)
        {
            for &var in &outer {
                self.enter_loop(var, 1);
            }
            self.leave_loop(last);
            let checking = std::mem::replace(&mut self.checking, false);
            let written = self.in_lanes((last, total), &outer, inner, &reduction, out, depth);
            self.checking = checking;
            for var in outer {
                self.leave_loop(var);
            }
            return written;
        }
        let header = d.loop_header(&last.to_string(), &d.size(0), &d.size(total));
        writeln!(out, "{pad}{header}").expect("writing to a string");
        for &var in &outer {
            let fixed = self.index_let(&var.to_string(), &d.size(0));
            writeln!(out, "{pad}  {fixed}").expect("writing to a string");
            self.enter_loop(var, 1);
        }
        self.enter_loop(last, total);
        let checking = std::mem::replace(&mut self.checking, false);
        let written = checked.and_then(|()| self.body(inner, out, depth + 1));
        self.checking = checking;
        for &(var, _) in chain {
            self.leave_loop(var);
        }
        written?;
        writeln!(out, "{pad}}}").expect("writing to a string");
        Ok(())
    }
}

/// Value `k` of `precision` drawn from the 128-bit word of random bits `word`.
fn uniform(d: &impl Dialect, precision: Precision, word: &str, k: usize) -> String {
    format!("rc_uniform_{precision}({word}, {})", d.unsigned(k as u64))
}

/// The Threefry-4×32 bits of `key` and `counter` after `rounds` rounds.
fn threefry(d: &impl Dialect, key: &str, counter: &str, rounds: u64) -> String {
    format!("rc_threefry({key}, {counter}, {})", d.unsigned(rounds))
}
