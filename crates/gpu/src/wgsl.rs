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
//! Values are computed as the interpreter computes them, in WGSL's types: floats in `f32` (f16
//! cells converted on load and rounded on store) and f64 values in `f64`, integers in `i32`,
//! 128-bit words in `vec4<u32>`. A routine holding 64-bit integers (i64, u64 cells, on a device
//! with `shader-int64`) computes its integers in `i64`, as the interpreter computes every
//! integer; elsewhere `i32` arithmetic wraps, and results agree with the interpreter's while
//! every intermediate fits in 32 bits. A routine holding f64 values (on a device with
//! `shader-f64` and `shader-int64`) computes its conditions and gather ids in f64, and its
//! transcendental functions through the prelude's (the device's own take 32-bit floats only).
//! Precisions WGSL has no type for are held widened (bf16 and fp8 in `f32` cells, u8, i8 and u16
//! in `i32` cells), rounded or wrapped where they are stored. A precision the device does not
//! offer is an error naming the tensor.

use std::fmt::Write;

use rcannl_backends::emit::{CodegenErrorKind, Dialect, Writer, kind_name};
use rcannl_backends::nests::{Group, kernel_groups, splittable};
use rcannl_ir::{
    Kind, LoopVar, MemoryMode, NodeId, Precision, Routine, Stmt, Symbol, TensorNode, Ternop, Value,
};

pub use crate::kernel::{Arena, Class, Kernel, Placement, Program, WORKGROUP, prelude};
pub use rcannl_backends::emit::CodegenError;

use crate::kernel::{
    Layout, compute_type, computes_f64, computes_int64, placed_nodes, spill_declaration,
    spill_precision,
};

use crate::product;
use crate::schedule::{self, ITERATION_BUDGET};

/// An error of `kind` saying `message`.
pub(crate) fn error(kind: CodegenErrorKind, message: String) -> CodegenError {
    CodegenError::new(kind, message)
}

/// What the device offers that code generation depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceFeatures {
    /// `shader-f16`: f16 cells in storage buffers.
    pub f16: bool,
    /// `shader-int64`: 64-bit integers in shaders.
    pub int64: bool,
    /// `shader-f64`: 64-bit floats in shaders, through Vulkan (held where `int64` is offered
    /// too: the f64 functions of the prelude read their bits as 64-bit integers).
    pub f64: bool,
}

/// WGSL as the prelude extends it, with tensors in arenas laid out as `layout` says: the dialect
/// of the GPU backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wgsl<'a> {
    layout: Layout<'a>,
}

/// Whether a device with `features` holds cells of `precision`.
pub fn holds(precision: Precision, features: DeviceFeatures) -> bool {
    match precision {
        Precision::F32 | Precision::I32 | Precision::U32 | Precision::Uint4x32 => true,
        // Held widened: see `Class::of`.
        Precision::Bf16 | Precision::Fp8 | Precision::U8 | Precision::I8 | Precision::U16 => true,
        Precision::F16 => features.f16,
        Precision::I64 | Precision::U64 => features.int64,
        Precision::F64 => features.f64 && features.int64,
    }
}

/// The error for a node of a precision the device lacks.
pub(crate) fn lacks(node: NodeId, label: &str, precision: Precision) -> CodegenError {
    let why = match precision {
        Precision::F16 => "this device does not offer shader-f16".to_owned(),
        Precision::I64 | Precision::U64 => "this device does not offer shader-int64".to_owned(),
        _ => "this device does not offer shader-f64 and shader-int64".to_owned(),
    };
    error(
        CodegenErrorKind::Unsupported,
        format!(
            "the GPU cannot hold tensor '{label}' ({node}) in {precision}: {why}; compute it in \
             f32 (f32, bf16, fp8, i32, u32, u16, u8 and i8 are held, f16, i64, u64 and f64 \
             where the device offers them)"
        ),
    )
}

/// The suffix of the prelude's functions on values of float `precision`: `_d` on f64's.
fn suffix(precision: Precision) -> &'static str {
    if precision == Precision::F64 {
        "_d"
    } else {
        ""
    }
}

/// An f64 literal.
fn f64_literal(x: f64) -> String {
    if x.is_nan() {
        "rc_nan_d()".to_owned()
    } else if x.is_infinite() {
        format!("{}rc_inf_d()", if x < 0.0 { "-" } else { "" })
    } else {
        format!("f64({x:e})")
    }
}

/// An `i32` literal: `i` clamped into i32's range.
fn i32_literal(i: i64) -> String {
    let i = i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    if i == i32::MIN {
        "(-2147483647i - 1i)".to_owned()
    } else {
        format!("{i}i")
    }
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

/// The store of `literal` into `cell`, the cell of `info` at flat buffer position `flat`, if the
/// cell lies in a margin.
fn margin_store(info: &TensorNode, literal: &str, flat: &str, cell: &str, pad: &str) -> String {
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
        "{pad}if ({}) {{ {cell} = {literal}; }}\n",
        outside.join(" || ")
    )
}

impl Dialect for Wgsl<'_> {
    fn name(&self) -> &'static str {
        "wgsl"
    }

    /// Floats compute in `f32`, integers in `i32` (`i64` in a routine holding 64-bit integers),
    /// words in `vec4<u32>`.
    fn compute_type(&self, precision: Precision) -> &'static str {
        compute_type(precision, self.layout.int64)
    }

    /// f64 in a routine holding f64 values, as the interpreter computes conditions; f32
    /// elsewhere.
    fn condition_precision(&self) -> Precision {
        if self.layout.float64 {
            Precision::F64
        } else {
            Precision::F32
        }
    }

    fn float_literal(&self, x: f64, precision: Precision) -> String {
        if precision == Precision::F64 {
            f64_literal(x)
        } else {
            float_literal(x)
        }
    }

    fn int_literal(&self, i: i64) -> String {
        if !self.layout.int64 {
            return i32_literal(i);
        }
        if i == i64::MIN {
            "(-9223372036854775807li - 1li)".to_owned()
        } else {
            format!("{i}li")
        }
    }

    fn word_literal(&self, w: [u32; 4]) -> String {
        format!("vec4<u32>({}u, {}u, {}u, {}u)", w[0], w[1], w[2], w[3])
    }

    fn storage_literal(&self, c: f64, precision: Precision) -> String {
        match Value::Float(c).stored_as(precision) {
            Value::Float(x) if precision == Precision::F16 => format!("f16({})", float_literal(x)),
            Value::Float(x) => self.float_literal(x, precision),
            Value::Int(i) if precision == Precision::U32 => format!("{}u", i.clamp(0, 0xFFFF_FFFF)),
            Value::Int(i) if precision == Precision::U64 => format!("{}lu", i as u64),
            Value::Int(i) if precision == Precision::I64 => self.int_literal(i),
            Value::Int(i) => i32_literal(i),
            Value::Word(w) => self.word_literal(w),
        }
    }

    fn index_constant(&self, c: i64) -> String {
        i32_literal(c)
    }

    fn size(&self, n: usize) -> String {
        format!("{n}i")
    }

    /// f16 cells converted on store; u32 and u64 cells hold the integer's bits; widened cells
    /// the value rounded or wrapped to their precision. Integers computing in `i64` are
    /// truncated into 32-bit cells.
    fn stored(&self, value: &str, precision: Precision) -> String {
        let int64 = self.layout.int64;
        match precision {
            Precision::F16 => format!("f16({value})"),
            Precision::U32 if int64 => format!("u32({value})"),
            Precision::U32 => format!("bitcast<u32>({value})"),
            Precision::U64 => format!("bitcast<u64>({value})"),
            Precision::I32 if int64 => format!("i32({value})"),
            Precision::U8 | Precision::I8 | Precision::U16 if int64 => {
                format!("i32({})", self.round_to(value, precision))
            }
            _ => self.round_to(value, precision),
        }
    }

    /// Integers computing in `i64` widen a u32 as unsigned, other 32-bit cells as signed.
    fn loaded(&self, cell: &str, precision: Precision) -> String {
        let int64 = self.layout.int64;
        match precision {
            Precision::F16 => format!("f32({cell})"),
            Precision::U32 if int64 => format!("rc_u32_value({cell})"),
            Precision::U32 => format!("bitcast<i32>({cell})"),
            Precision::U64 => format!("bitcast<i64>({cell})"),
            Precision::I32 | Precision::U8 | Precision::I8 | Precision::U16 if int64 => {
                format!("i64({cell})")
            }
            _ => cell.to_owned(),
        }
    }

    fn round_to(&self, value: &str, precision: Precision) -> String {
        match precision {
            Precision::F16 => format!("f32(f16({value}))"),
            Precision::Bf16 => format!("rc_bf16({value})"),
            Precision::Fp8 => format!("rc_fp8({value})"),
            Precision::U8 => format!("rc_wrap_u8({value})"),
            Precision::I8 => format!("rc_wrap_i8({value})"),
            Precision::U16 => format!("rc_wrap_u16({value})"),
            Precision::I32 | Precision::U32 if self.layout.int64 => {
                self.loaded(&self.stored(value, precision), precision)
            }
            _ => value.to_owned(),
        }
    }

    /// A u64's bits count as unsigned, to and from floats.
    fn convert(&self, value: &str, from: Precision, to: Precision) -> String {
        let int64 = self.layout.int64;
        // The low 32 bits of an integer.
        let low = |value: &str| {
            if int64 {
                format!("u32({value})")
            } else {
                format!("bitcast<u32>({value})")
            }
        };
        let target = self.compute_type(to);
        match (from.kind(), to.kind()) {
            (Kind::Float, Kind::Float) if self.compute_type(from) != target => {
                format!("{target}({value})")
            }
            (a, b) if a == b => value.to_owned(),
            (Kind::Int, Kind::Float) if from == Precision::U64 => {
                format!("rc_u2f{}({value})", suffix(to))
            }
            (Kind::Int, Kind::Float) => format!("{target}({value})"),
            (Kind::Float, Kind::Int) if to == Precision::U64 => {
                format!("rc_f2u{}({value})", suffix(from))
            }
            (Kind::Float, Kind::Int) => format!("rc_f2i{}({value})", suffix(from)),
            (Kind::Word, Kind::Float) => format!("{target}(({value}).x)"),
            (Kind::Word, Kind::Int) if int64 => format!("rc_u32_value(({value}).x)"),
            (Kind::Word, Kind::Int) => format!("bitcast<i32>(({value}).x)"),
            (_, Kind::Word) => match from {
                Precision::F16 => format!("rc_word_f16({value})"),
                Precision::Bf16 => format!("vec4<u32>(rc_bf16_bits({value}), 0u, 0u, 0u)"),
                Precision::Fp8 => format!("vec4<u32>(rc_e5_bits({value}, 2u), 0u, 0u, 0u)"),
                Precision::I32 | Precision::U32 => format!("rc_word_u32({})", low(value)),
                Precision::I64 | Precision::U64 => format!("rc_word_i64({value})"),
                Precision::F32 => format!("rc_word_f32({value})"),
                Precision::F64 => format!("rc_word_f64({value})"),
                _ => format!("vec4<u32>({}, 0u, 0u, 0u)", low(value)),
            },
            _ => unreachable!("every pair of kinds is covered"),
        }
    }

    fn position_value(&self, index: &str) -> String {
        if self.layout.int64 {
            format!("i64({index})")
        } else {
            index.to_owned()
        }
    }

    /// Integer helpers start with `i` (`rc_imod`), but for WGSL's own `max` and `min`; f64
    /// ones end in `_d` (`rc_max_d`).
    fn helper(&self, kind: Kind, name: &str, precision: Precision, args: &[&str]) -> String {
        let args = args.join(", ");
        match (kind, name) {
            (Kind::Int, "max" | "min") => format!("{name}({args})"),
            (Kind::Int, _) => format!("rc_i{name}({args})"),
            _ => format!("rc_{name}{}({args})", suffix(precision)),
        }
    }

    fn library(&self, name: &str, _: Precision, args: &[&str]) -> String {
        format!("{name}({})", args.join(", "))
    }

    /// `tanh` through the prelude, which keeps its argument where drivers do not overflow; in
    /// f64, every transcendental function (the device's take 32-bit floats only).
    fn prelude_math(&self, name: &str, precision: Precision) -> bool {
        name == "tanh" || precision == Precision::F64
    }

    fn truth_value(&self, precision: Precision, condition: &str) -> String {
        match precision.kind() {
            Kind::Int => format!("rc_itruth({condition})"),
            _ => format!("rc_truth{}({condition})", suffix(precision)),
        }
    }

    fn zero(&self, kind: Kind) -> &'static str {
        match kind {
            Kind::Int => self.int_zero(),
            _ => "0.0",
        }
    }

    fn logical(&self, and: bool) -> &'static str {
        if and { "&&" } else { "||" }
    }

    /// Integer arithmetic wraps in WGSL.
    fn wrapping(&self, _: &str, symbol: &str, a: &str, b: &str) -> String {
        format!("({a} {symbol} {b})")
    }

    fn int_zero(&self) -> &'static str {
        if self.layout.int64 { "0li" } else { "0i" }
    }

    fn one(&self, _: Precision) -> String {
        "1.0".to_owned()
    }

    /// In f64, as the interpreter computes it: a division by the square root.
    fn recip_sqrt(&self, x: &str, precision: Precision) -> String {
        if precision == Precision::F64 {
            format!("(1.0 / sqrt({x}))")
        } else {
            format!("inverseSqrt({x})")
        }
    }

    fn int_ternop(&self, op: Ternop, a: &str, b: &str, c: &str) -> String {
        match op {
            Ternop::Fma => format!("({a} * {b} + {c})"),
            _ => format!("({a} * {b} * {c})"),
        }
    }

    fn blend(&self, _: Precision, condition: &str, then: &str, otherwise: &str) -> String {
        format!("select({otherwise}, {then}, {condition})")
    }

    fn truth(&self, value: &str) -> String {
        format!("rc_holds({value})")
    }

    fn unsigned(&self, n: u64) -> String {
        format!("{n}u")
    }

    fn loop_header(&self, var: &str, start: &str, end: &str) -> String {
        format!("for (var {var}: i32 = {start}; {var} < {end}; {var}++) {{")
    }

    fn declare(&self, name: &str, ty: &str, value: &str, mutable: bool) -> String {
        let keyword = if mutable { "var" } else { "let" };
        format!("{keyword} {name}: {ty} = {value};")
    }

    fn fill(&self, pad: &str, node: NodeId, len: usize, literal: &str) -> String {
        format!(
            "{pad}for (var i: i32 = 0i; i < {len}i; i++) {{ {} = {literal}; }}\n",
            self.cell(node, "i")
        )
    }

    /// One loop over the buffer's cells, decoding each cell's coordinates.
    fn fill_margins(&self, pad: &str, info: &TensorNode, literal: &str) -> String {
        format!(
            "{pad}for (var i: i32 = 0i; i < {}i; i++) {{\n{}{pad}}}\n",
            info.buffer_len(),
            margin_store(
                info,
                literal,
                "i",
                &self.cell(info.id, "i"),
                &format!("{pad}  ")
            )
        )
    }

    /// A constant a line, its type inferred.
    fn open_block(&self, pad: &str, constants: &[(&str, &str, String)]) -> String {
        let mut out = format!("{pad}{{\n");
        for (name, _, value) in constants {
            writeln!(out, "{pad}  let {name} = {value};").expect("writing to a string");
        }
        out
    }

    fn guarded(&self, condition: &str, statement: &str) -> String {
        format!("if ({condition}) {{ {statement} }}")
    }

    fn index_type(&self) -> &'static str {
        "i32"
    }

    fn scatter_store(&self, pad: &str, node: NodeId, offset: &str, value: &str) -> String {
        format!(
            "{pad}{{\n{pad}  let o = {offset};\n{pad}  {} = {value};\n{pad}}}\n",
            self.cell(node, "o")
        )
    }

    /// The cell in the tensor's arena, past the tensor's offset there.
    fn cell(&self, node: NodeId, offset: &str) -> String {
        format!(
            "{}[{} + {offset}]",
            self.layout.arena(node),
            Layout::offset_name(node)
        )
    }

    /// A cell per invocation: the slot's cells of all invocations lie together.
    fn spill_cell(&self, kind: Kind, slot: usize) -> String {
        format!(
            "rc_spill_{}[{slot}i * rc_invocations + rc_id]",
            kind_name(kind)
        )
    }

    fn spill_precision(&self, precision: Precision) -> Precision {
        let Layout { int64, float64, .. } = self.layout;
        spill_precision(precision.kind(), int64, float64)
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
        Some((id, precision)) => Err(error(
            CodegenErrorKind::Unsupported,
            format!(
                "routine {}: the GPU cannot compute the value {id} in {precision}",
                routine.name
            ),
        )),
        None => Ok(()),
    }
}

/// The largest flat position a kernel may compute: WGSL indexes with 32-bit integers.
const MAX_CELLS: usize = i32::MAX as usize;

/// The WGSL program of `routine` on a device with `features`, its tensors in arena 0 of their
/// class unless `placement` says otherwise.
pub fn generate(
    routine: &Routine,
    features: DeviceFeatures,
    placement: &Placement,
) -> Result<Program, CodegenError> {
    check_precisions(routine, features)?;
    for node in routine.nodes.values() {
        if node.memory_mode != Some(MemoryMode::Virtual)
            && node.buffer_dims_checked().is_none_or(|d| {
                d.iter()
                    .try_fold(1usize, |n, &x| n.checked_mul(x))
                    .is_none_or(|n| n > MAX_CELLS)
            })
        {
            return Err(error(
                CodegenErrorKind::TooLarge,
                format!(
                    "the GPU addresses at most {MAX_CELLS} cells of a buffer: tensor '{}' ({}) of \
                     dims {:?} has more",
                    node.label, node.id, node.dims
                ),
            ));
        }
    }
    let statics: Vec<Symbol> = routine.statics.keys().copied().collect();
    let placed = placed_nodes(routine);
    let dialect = Wgsl {
        layout: Layout {
            routine,
            statics: &statics,
            placed: &placed,
            placement,
            int64: computes_int64(routine),
            float64: computes_f64(routine),
        },
    };
    let mut kernels = Vec::new();
    generate_body(&dialect, &routine.body, &mut kernels)?;
    Ok(Program {
        kernels,
        statics,
        placed,
    })
}

/// How the invocations of a kernel are laid over loops: `chain`'s loops (outermost first)
/// flattened into the invocation's number, `invocations` of them in workgroups of `workgroup`.
#[derive(Debug, Clone)]
struct Lanes {
    chain: Vec<(LoopVar, usize)>,
    invocations: u64,
    workgroup: u32,
}

impl Lanes {
    /// One invocation.
    fn serial() -> Lanes {
        Lanes {
            chain: Vec::new(),
            invocations: 1,
            workgroup: 1,
        }
    }

    /// The lines giving each loop of the chain its position, decoded from `rc_id`; the writer
    /// then stands inside those loops (until [`Lanes::leave`]).
    fn enter(&self, writer: &mut Writer<Wgsl>) -> String {
        let mut code = String::new();
        let mut stride = self.invocations;
        for (var, range) in &self.chain {
            stride /= (*range).max(1) as u64;
            let position = format!("(rc_id / {stride}i) % {range}i");
            let line = writer.index_let(&var.to_string(), &position);
            writeln!(code, "  {line}").expect("writing to a string");
            writer.enter_loop(*var, *range);
        }
        code
    }

    fn leave(&self, writer: &mut Writer<Wgsl>) {
        for (var, _) in &self.chain {
            writer.leave_loop(*var);
        }
    }
}

fn generate_body(
    dialect: &Wgsl,
    body: &[Stmt],
    kernels: &mut Vec<Kernel>,
) -> Result<(), CodegenError> {
    let routine = dialect.layout.routine;
    let mut writer = Writer::new(routine, dialect);
    let body = schedule::hoist_parallel_loops(routine, body);
    for group in kernel_groups(routine, &body) {
        match group {
            Group::Gemm { plan, nest } => {
                // The product kernel makes the nest's accesses unchecked: check them as the
                // nest's own kernels would.
                writer.check(nest)?;
                let Some(product) = product::kernels(&dialect.layout, plan)? else {
                    generate_body(dialect, nest, kernels)?;
                    continue;
                };
                // A plan's fill of zeros runs first only for cells the product leaves alone.
                if let [fill @ Stmt::Fill { .. }, ..] = nest
                    && !product::writes_every_cell(routine, plan)
                {
                    generate_body(dialect, std::slice::from_ref(fill), kernels)?;
                }
                kernels.extend(product);
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
                    return Err(error(
                        CodegenErrorKind::TooLarge,
                        format!(
                            "wgsl: a kernel of routine {} would run more than {MAX_CELLS} \
                             invocations",
                            routine.name
                        ),
                    ));
                };
                if invocations == 0 {
                    // A loop of no iterations: nothing to run.
                    continue;
                }
                let lanes = Lanes {
                    chain,
                    invocations: invocations as u64,
                    workgroup: WORKGROUP,
                };
                // The preamble's locals live through the loop.
                let run: Vec<Stmt> = preamble.iter().chain(inner).cloned().collect();
                if schedule::iterations(routine, &run) > ITERATION_BUDGET {
                    in_chunks(&mut writer, &lanes, &run, kernels)?;
                    continue;
                }
                let mut code = lanes.enter(&mut writer);
                writer.scoped(|writer| writer.body(&run, &mut code, 1))?;
                lanes.leave(&mut writer);
                kernels.push(assemble(&writer, &lanes, &code, 1));
            }
            Group::Serial { stmts } => {
                for (run, parallel) in split_fills(stmts) {
                    if let Some(fill) = parallel {
                        kernels.extend(fill_kernel(&writer, fill));
                    } else if schedule::iterations(routine, run) > ITERATION_BUDGET {
                        in_chunks(&mut writer, &Lanes::serial(), run, kernels)?;
                    } else {
                        let mut code = String::new();
                        writer.body(run, &mut code, 1)?;
                        kernels.push(assemble(&writer, &Lanes::serial(), &code, 1));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The kernel of a fill or a margin fill, with an invocation per cell of its buffer; `None` for
/// an empty buffer or another statement.
fn fill_kernel(writer: &Writer<Wgsl>, fill: &Stmt) -> Option<Kernel> {
    let routine = writer.routine;
    let d = writer.dialect;
    let mut code = String::new();
    let (Stmt::Fill { node, value } | Stmt::FillMargins { node, value }) = fill else {
        return None;
    };
    let info = &routine.nodes[node];
    let literal = d.storage_literal(*value, info.precision);
    let cell = d.cell(*node, "rc_id");
    if matches!(fill, Stmt::Fill { .. }) {
        writeln!(code, "  {cell} = {literal};").expect("writing to a string");
    } else {
        code.push_str(&margin_store(info, &literal, "rc_id", &cell, "  "));
    }
    let cells = info.buffer_len() as u64;
    let lanes = Lanes {
        chain: Vec::new(),
        invocations: cells,
        workgroup: WORKGROUP,
    };
    (cells > 0).then(|| assemble(writer, &lanes, &code, 1))
}

/// Statements each invocation of `lanes` runs, beyond the iteration budget, as several kernels
/// run one after another: their top-level locals kept in memory (a cell per invocation),
/// consecutive statements within the budget together, and a statement beyond it dispatched in
/// chunks of one of its loops ([`schedule::chunked`]), every invocation taking the same chunk
/// in a dispatch.
fn in_chunks(
    writer: &mut Writer<Wgsl>,
    lanes: &Lanes,
    run: &[Stmt],
    kernels: &mut Vec<Kernel>,
) -> Result<(), CodegenError> {
    let routine = writer.routine;
    let serial = lanes.invocations == 1 && lanes.chain.is_empty();
    for stmt in run {
        if let Stmt::Local { id, precision, .. } = stmt {
            writer.spill(*id, *precision);
        }
    }
    let is_fill = |s: &Stmt| serial && matches!(s, Stmt::Fill { .. } | Stmt::FillMargins { .. });
    let mut start = 0;
    while start < run.len() {
        let stmt = &run[start];
        if is_fill(stmt) {
            kernels.extend(fill_kernel(writer, stmt));
            start += 1;
            continue;
        }
        if schedule::iterations(routine, std::slice::from_ref(stmt)) <= ITERATION_BUDGET {
            let mut end = start + 1;
            while end < run.len()
                && !is_fill(&run[end])
                && schedule::iterations(routine, &run[start..=end]) <= ITERATION_BUDGET
            {
                end += 1;
            }
            let mut code = lanes.enter(writer);
            for stmt in &run[start..end] {
                writer.stmt(stmt, &mut code, 1)?;
            }
            lanes.leave(writer);
            kernels.push(assemble(writer, lanes, &code, 1));
            start = end;
            continue;
        }
        let Some(plan) = schedule::chunked(routine, stmt) else {
            return Err(error(
                CodegenErrorKind::TooLarge,
                format!(
                    "wgsl: routine {} has a statement of {} loop iterations that cannot be cut \
                     into dispatches of at most {ITERATION_BUDGET}",
                    routine.name,
                    schedule::iterations(routine, std::slice::from_ref(stmt))
                ),
            ));
        };
        if plan.dispatches > schedule::MAX_DISPATCHES {
            return Err(error(
                CodegenErrorKind::TooLarge,
                format!(
                    "wgsl: routine {} has a statement needing {} dispatches, more than {}",
                    routine.name,
                    plan.dispatches,
                    schedule::MAX_DISPATCHES
                ),
            ));
        }
        let mut code = lanes.enter(writer);
        code.push_str("  let rc_k = rc_chunk[0];\n");
        let mut stride = plan.dispatches / plan.chunks as u64;
        for (var, range) in &plan.outer {
            stride /= (*range).max(1) as u64;
            let position = format!("(rc_k / {}i) % {range}i", stride * plan.chunks as u64);
            let line = writer.index_let(&var.to_string(), &position);
            writeln!(code, "  {line}").expect("writing to a string");
            writer.enter_loop(*var, *range);
        }
        let (var, per_chunk) = (plan.var, plan.per_chunk);
        let end = format!("min(rc_first + {per_chunk}i, {}i)", plan.range);
        writeln!(
            code,
            "  let rc_first = (rc_k % {}i) * {per_chunk}i;\n  {}",
            plan.chunks,
            writer
                .dialect
                .loop_header(&var.to_string(), "rc_first", &end)
        )
        .expect("writing to a string");
        writer.enter_loop(var, plan.range);
        writer.body(plan.body, &mut code, 2)?;
        code.push_str("  }\n");
        writer.leave_loop(var);
        for (var, _) in &plan.outer {
            writer.leave_loop(*var);
        }
        lanes.leave(writer);
        kernels.push(assemble(writer, lanes, &code, plan.dispatches));
        start += 1;
    }
    writer.clear_spills();
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

/// The kernel running `code` (which reads `rc_id`, its invocation's number) in the invocations
/// of `lanes`, dispatched `dispatches` times in order (reading `rc_chunk`).
fn assemble(writer: &Writer<Wgsl>, lanes: &Lanes, code: &str, dispatches: u64) -> Kernel {
    let layout = writer.dialect.layout;
    let nodes = layout.nodes_in(code);
    let (mut source, arenas) = layout.header(code, &nodes);
    let parameters = layout.reads_parameters(code, &nodes);
    let mut next = arenas.len() + usize::from(parameters);
    let mut spills = Vec::new();
    for kind in [Kind::Float, Kind::Int, Kind::Word] {
        let slots = writer.spill_slots(kind);
        if slots > 0 && code.contains(&format!("rc_spill_{}[", kind_name(kind))) {
            source.push_str(&spill_declaration(next, kind, layout.int64, layout.float64));
            spills.push((kind, slots));
            next += 1;
        }
    }
    if dispatches > 1 {
        writeln!(
            source,
            "@group(0) @binding({next}) var<storage, read> rc_chunk: array<i32>;"
        )
        .expect("writing to a string");
    }
    let (invocations, workgroup) = (lanes.invocations, lanes.workgroup);
    writeln!(
        source,
        "\nconst rc_invocations: i32 = {invocations}i;\n\n@compute @workgroup_size({workgroup})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: \
         vec3<u32>) {{\n  let rc_id = i32(gid.x + gid.y * groups.x * {workgroup}u);\n  if (rc_id \
         >= rc_invocations) {{ return; }}"
    )
    .expect("writing to a string");
    source.push_str(&layout.lets(code, &nodes));
    source.push_str(code);
    source.push_str("}\n");
    Kernel {
        source,
        nodes,
        arenas,
        parameters,
        invocations,
        workgroup,
        spills,
        partials: 0,
        dispatches,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcannl_ir::{Binop, Index, Scalar};

    /// `y[i] = x[i] + 1` over 4 cells of `x` in `input`, `y` in `output`.
    fn increment(input: Precision, output: Precision) -> Routine {
        let at = vec![Index::var(LoopVar(0), 0)];
        Routine {
            name: "increment".to_owned(),
            nodes: [
                TensorNode::new(0, "x", input, &[4]),
                TensorNode::new(1, "y", output, &[4]),
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
                    index: at.clone(),
                    value: Scalar::Binop(
                        Binop::Add,
                        Box::new(Scalar::Get(NodeId(0), at)),
                        Box::new(Scalar::Const(1.0)),
                    ),
                }],
            }],
        }
    }

    #[test]
    fn integers_compute_in_i64_only_in_a_routine_holding_64_bit_integers() {
        let features = DeviceFeatures {
            f16: false,
            int64: true,
            f64: true,
        };
        // Each kernel whole, its prelude included.
        let source = |input, output| {
            let program = generate(&increment(input, output), features, &Placement::new());
            let kernels = program.unwrap().kernels;
            kernels.into_iter().map(|k| k.source).collect::<String>()
        };
        let narrow = source(Precision::I32, Precision::I32);
        assert!(narrow.contains("alias rc_int = i32;"), "{narrow}");
        assert!(
            !narrow.contains("i64(") && !narrow.contains("1li"),
            "{narrow}"
        );
        // The i32 cells of a routine with an i64 one widen on load and wrap on store.
        let wide = source(Precision::I32, Precision::I64);
        assert!(wide.contains("alias rc_int = i64;"), "{wide}");
        assert!(
            wide.contains("array<i64>") && wide.contains("1li"),
            "{wide}"
        );
        assert!(wide.contains("i64(rc_i32_0["), "{wide}");
        let unsigned = source(Precision::U64, Precision::U32);
        assert!(unsigned.contains("bitcast<i64>(rc_u64_0["), "{unsigned}");
        assert!(unsigned.contains("u32(("), "{unsigned}");
        // An f64 routine computes its conditions in f64; its f32 values stay f32.
        let double = source(Precision::F32, Precision::F64);
        assert!(double.contains("alias rc_cond = f64;"), "{double}");
        assert!(
            double.contains("array<f64>") && double.contains("f64(1e0)"),
            "{double}"
        );
        assert!(narrow.contains("alias rc_cond = f32;"), "{narrow}");
    }

    #[test]
    fn a_64_bit_precision_on_a_device_without_shader_int64_is_an_error_naming_the_tensor() {
        let features = DeviceFeatures {
            f16: true,
            int64: false,
            f64: true,
        };
        for precision in [Precision::I64, Precision::U64] {
            let e = generate(
                &increment(Precision::I32, precision),
                features,
                &Placement::new(),
            )
            .unwrap_err();
            let message = e.to_string();
            assert!(message.contains("'y'"), "{message}");
            assert!(message.contains("shader-int64"), "{message}");
        }
        let e = generate(
            &increment(Precision::F32, Precision::F64),
            features,
            &Placement::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("shader-f64 and shader-int64"), "{e}");
    }
}
