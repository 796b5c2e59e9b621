//! C source from a routine's loop IR.
//!
//! The routine's top-level statements are grouped into kernels, each a call of a C function
//! `void rc_kN(void *const *buffers, const int64_t *statics, int64_t begin, int64_t end)` whose
//! `buffers` are the kernel's own, in the order it first names them (it passes them on as the
//! `restrict` parameters of the function holding the statements, `rc_kN_cells`): kernels that
//! differ only in which buffers they read and write (a deep model's layers) are one function,
//! written and compiled once (`cc::identity`); a group of statements alike an earlier group in
//! their own names (`rcannl_ir::canonical`) is not even written again. A
//! top-level loop whose iterations write disjoint cells and read nothing another iteration writes
//! is a kernel of its own that runs `begin..end` of its range, so that the caller can split the
//! range across threads (each cell is then computed by the same operations in the same order, so
//! the result does not depend on the split). Since nothing inside an iteration runs at once,
//! sibling loops merge there even where a chain of loops nested alone shortens
//! (`rcannl_ir::optimize::merge`: a softmax's or a layer norm's steps over a row become one loop
//! over the rows). A loop that adds into the same few float cells at
//! every iteration (a bias's gradient) is first cut into a fixed number of parts, each adding
//! into its own scratch copy of the cells (`rcannl_ir::optimize::split_sums`), so that its
//! parts split across threads too. A loop adding into a float local, or keeping a maximum or
//! minimum in one, keeps it in up to sixteen lanes, which vectorize, combined pairwise (the
//! shared writer's `in_lanes`): the order of a sum's terms is then fixed by the loop's range, the
//! same whatever the compiler, its optimization level or the target; an extremum is exact, the
//! loop run again as written where the lanes' result is a zero or a NaN. Other statements are
//! gathered into serial kernels
//! (`begin` and `end` ignored). A matrix product (`Stmt::Gemm`) is a step of its own, run by the
//! backend's product kernels (`cc::gemm`); its nest is only checked.
//!
//! Values are computed as the interpreter computes them, but in C's own types: f16, bf16 and f32
//! in `float`, f64 in `double`, integers in wrapping `int64_t`, words as `rc_word`; f16 and bf16
//! are stored as their bits and converted by the prelude's round-to-nearest-even helpers. f32's
//! transcendental functions are the prelude's (`rc_expf` …), which the interpreter mirrors bit
//! for bit (`rcannl_ir::fmath`); a constant exponent of 1, 2, 3 or −1 becomes a product or a
//! quotient, as `pow` defines it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write;

use super::identity::{self, Renamed};
use crate::emit::{CodegenErrorKind, Dialect, Writer, var_name};
use crate::nests::{Group, kernel_groups};
use rcannl_ir::canonical::{Alike, OwnKey};
use rcannl_ir::in_parallel::map_in_order;

use rcannl_ir::optimize::hoist::hoist_invariants_into_nests;
use rcannl_ir::optimize::in_chunks;
use rcannl_ir::optimize::margins::{margin_slabs, margins_as_loops};
use rcannl_ir::optimize::merge::{Chains, merge_loops};
use rcannl_ir::optimize::split_sums::split_sums;
use rcannl_ir::{
    GemmPlan, Kind, MemoryMode, NodeId, Precision, Routine, Stmt, Symbol, TensorNode, Ternop,
    Value, Var,
};

pub use crate::emit::CodegenError;

/// The definitions every generated routine starts with.
pub const PRELUDE: &str = include_str!("prelude.c");

/// How each kernel begins in the source: the function holding its statements, with its buffers
/// as parameters, followed by the function of [`KERNEL_PARAMETERS`] that calls it.
pub const KERNEL_START: &str = "\nstatic inline void ";

/// The parameters of every kernel function, as the source spells them.
pub const KERNEL_PARAMETERS: &str =
    "(void *const *buffers, const int64_t *statics, int64_t begin, int64_t end)";

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
    /// The function's `buffers` argument: the positions, among the routine's buffer pointers
    /// ([`Generated::buffers`], then its scratch), of the buffers the kernel reads and writes,
    /// in the function's order. Kernels that differ only in these share one function.
    pub arguments: Vec<usize>,
}

/// One step of a compiled routine, run in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A call of a generated kernel function.
    Kernel(Kernel),
    /// A matrix product, run by the backend's product kernels instead of generated C.
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
    /// The scratch buffers passed after them, in order: the parts of sums cut for threads
    /// ([`split_sums`]), which hold nothing before a run and nothing after.
    pub scratch: Vec<TensorNode>,
    /// The static indices, in the order of the `statics` argument.
    pub statics: Vec<Symbol>,
}

/// C as the prelude extends it: the dialect of the C backend.
#[derive(Debug, Clone, Copy)]
struct C;

/// The C type cells of a precision are stored as.
fn storage_type(precision: Precision) -> &'static str {
    match precision {
        Precision::U8 => "uint8_t",
        Precision::I8 => "int8_t",
        Precision::U16 => "uint16_t",
        Precision::I32 => "int32_t",
        Precision::U32 => "uint32_t",
        Precision::I64 => "int64_t",
        Precision::U64 => "uint64_t",
        Precision::Fp8 => "uint8_t",
        Precision::F16 | Precision::Bf16 => "uint16_t",
        Precision::F32 => "float",
        Precision::F64 => "double",
        Precision::Uint4x32 => "rc_word",
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

/// The suffix of a float helper or library function in `precision`: `f` for float.
fn float_suffix(precision: Precision) -> &'static str {
    if precision == Precision::F64 { "" } else { "f" }
}

/// The prelude's blend `c ? a : b` for values of the compute type of `precision`.
fn select(precision: Precision) -> &'static str {
    match C.compute_type(precision) {
        "float" => "rc_selectf",
        "double" => "rc_select",
        "rc_word" => "rc_wselect",
        _ => "rc_iselect",
    }
}

impl Dialect for C {
    fn name(&self) -> &'static str {
        "codegen"
    }

    /// fp8, f16, bf16 and f32 compute in `float`, f64 in `double`, integers in `int64_t`.
    fn compute_type(&self, precision: Precision) -> &'static str {
        match precision {
            Precision::Fp8 | Precision::F16 | Precision::Bf16 | Precision::F32 => "float",
            Precision::F64 => "double",
            Precision::Uint4x32 => "rc_word",
            _ => "int64_t",
        }
    }

    fn condition_precision(&self) -> Precision {
        Precision::F64
    }

    fn float_literal(&self, x: f64, precision: Precision) -> String {
        float_literal(x, precision == Precision::F64)
    }

    fn int_literal(&self, i: i64) -> String {
        if i == i64::MIN {
            "INT64_MIN".to_owned()
        } else {
            format!("INT64_C({i})")
        }
    }

    fn word_literal(&self, w: [u32; 4]) -> String {
        format!(
            "((rc_word){{{{{}u, {}u, {}u, {}u}}}})",
            w[0], w[1], w[2], w[3]
        )
    }

    /// fp8, f16 and bf16 cells are their bits.
    fn storage_literal(&self, c: f64, precision: Precision) -> String {
        match Value::Float(c).stored_as(precision) {
            Value::Float(x) => match precision {
                Precision::Fp8 => format!("{}u", rcannl_ir::fp8_bits(x)),
                Precision::F16 => format!("{}u", half::f16::from_f64(x).to_bits()),
                Precision::Bf16 => format!("{}u", half::bf16::from_f64(x).to_bits()),
                _ => float_literal(x, precision == Precision::F64),
            },
            Value::Int(i) => self.int_literal(i),
            Value::Word(w) => self.word_literal(w),
        }
    }

    fn index_constant(&self, c: i64) -> String {
        c.to_string()
    }

    fn size(&self, n: usize) -> String {
        n.to_string()
    }

    /// fp8, f16 and bf16 through the prelude's round-to-nearest-even helpers.
    fn stored(&self, value: &str, precision: Precision) -> String {
        match precision {
            Precision::Fp8 => format!("rc_f32_to_fp8({value})"),
            Precision::F16 => format!("rc_f32_to_f16({value})"),
            Precision::Bf16 => format!("rc_f32_to_bf16({value})"),
            Precision::F32 | Precision::F64 | Precision::I64 | Precision::Uint4x32 => {
                value.to_owned()
            }
            _ => format!("({})({value})", storage_type(precision)),
        }
    }

    fn loaded(&self, cell: &str, precision: Precision) -> String {
        match precision {
            Precision::Fp8 => format!("rc_fp8_to_f32({cell})"),
            Precision::F16 => format!("rc_f16_to_f32({cell})"),
            Precision::Bf16 => format!("rc_bf16_to_f32({cell})"),
            Precision::F32 | Precision::F64 | Precision::Uint4x32 => cell.to_owned(),
            _ => format!("(int64_t)({cell})"),
        }
    }

    fn round_to(&self, value: &str, precision: Precision) -> String {
        match precision {
            Precision::Fp8
            | Precision::F16
            | Precision::Bf16
            | Precision::U8
            | Precision::I8
            | Precision::U16
            | Precision::I32
            | Precision::U32 => self.loaded(&self.stored(value, precision), precision),
            _ => value.to_owned(),
        }
    }

    fn convert(&self, value: &str, from: Precision, to: Precision) -> String {
        let target = self.compute_type(to);
        if self.compute_type(from) == target {
            return value.to_owned();
        }
        match (from.kind(), to.kind()) {
            // A u64's bits count as unsigned.
            (Kind::Int, Kind::Float) if from == Precision::U64 => {
                format!("({target})(uint64_t)({value})")
            }
            (Kind::Float, Kind::Float) | (Kind::Int, Kind::Float) => {
                format!("({target})({value})")
            }
            (Kind::Float, Kind::Int) if to == Precision::U64 => {
                format!("rc_f2u((double)({value}))")
            }
            (Kind::Float, Kind::Int) => format!("rc_f2i((double)({value}))"),
            (Kind::Word, _) => format!("({target})({value}).w[0]"),
            (_, Kind::Word) => match from {
                Precision::Fp8 => format!("rc_word_bits(rc_f32_to_fp8({value}))"),
                Precision::F16 => format!("rc_word_bits(rc_f32_to_f16({value}))"),
                Precision::Bf16 => format!("rc_word_bits(rc_f32_to_bf16({value}))"),
                Precision::F32 => format!("rc_word_f32({value})"),
                Precision::F64 => format!("rc_word_f64({value})"),
                Precision::I32 | Precision::U32 => format!("rc_word_u32((uint32_t)({value}))"),
                Precision::I64 | Precision::U64 => format!("rc_word_i64({value})"),
                _ => format!("rc_word_bits((uint32_t)({value}))"),
            },
            // Integers all compute in `int64_t`: returned above.
            (Kind::Int, Kind::Int) => value.to_owned(),
        }
    }

    fn position_value(&self, index: &str) -> String {
        format!("(int64_t){index}")
    }

    /// Float helpers end in `f` for f32 (`rc_maxf`), integer ones start with `i` (`rc_imax`).
    fn helper(&self, kind: Kind, name: &str, precision: Precision, args: &[&str]) -> String {
        let args = args.join(", ");
        match kind {
            Kind::Int => format!("rc_i{name}({args})"),
            _ => format!("rc_{name}{}({args})", float_suffix(precision)),
        }
    }

    fn library(&self, name: &str, precision: Precision, args: &[&str]) -> String {
        format!("{name}{}({})", float_suffix(precision), args.join(", "))
    }

    /// In double, the library's functions, as the interpreter computes them; in float, the
    /// prelude's, which the interpreter mirrors bit for bit (`rcannl_ir::fmath`) and which
    /// vectorize.
    fn prelude_math(&self, _: &str, precision: Precision) -> bool {
        precision != Precision::F64
    }

    fn truth_value(&self, precision: Precision, condition: &str) -> String {
        format!("({})({condition})", self.compute_type(precision))
    }

    fn zero(&self, _: Kind) -> &'static str {
        "0"
    }

    /// Bitwise, so that both sides are evaluated and the code stays branch-free.
    fn logical(&self, and: bool) -> &'static str {
        if and { "&" } else { "|" }
    }

    fn wrapping(&self, helper: &str, _: &str, a: &str, b: &str) -> String {
        format!("rc_i{helper}({a}, {b})")
    }

    fn int_zero(&self) -> &'static str {
        "(int64_t)0"
    }

    fn one(&self, precision: Precision) -> String {
        format!("({})1", self.compute_type(precision))
    }

    /// One rounding of 1/√x, as the interpreter's single operation.
    fn recip_sqrt(&self, x: &str, precision: Precision) -> String {
        if precision == Precision::F64 {
            format!("(1.0 / sqrt({x}))")
        } else {
            format!("(float)(1.0 / sqrt((double)({x})))")
        }
    }

    fn int_ternop(&self, op: Ternop, a: &str, b: &str, c: &str) -> String {
        let product = self.wrapping("mul", "*", a, b);
        match op {
            Ternop::Fma => self.wrapping("add", "+", &product, c),
            _ => self.wrapping("mul", "*", &product, c),
        }
    }

    /// Multiplication or division where they compute the power as `pow` defines it (see
    /// `rcannl_ir::fmath::pow`; in double, only the square), the base computed once.
    fn constant_power(&self, base: &str, exponent: f64, precision: Precision) -> Option<String> {
        if precision == Precision::F64 {
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

    fn blend(&self, precision: Precision, condition: &str, then: &str, otherwise: &str) -> String {
        format!("{}({condition}, {then}, {otherwise})", select(precision))
    }

    fn truth(&self, value: &str) -> String {
        format!("({value}) != 0")
    }

    fn unsigned(&self, n: u64) -> String {
        n.to_string()
    }

    fn loop_header(&self, var: &str, start: &str, end: &str) -> String {
        format!("for (int64_t {var} = {start}; {var} < {end}; ++{var}) {{")
    }

    fn declare(&self, name: &str, ty: &str, value: &str, mutable: bool) -> String {
        let constant = if mutable { "" } else { "const " };
        format!("{constant}{ty} {name} = {value};")
    }

    fn coalesces_loops(&self) -> bool {
        true
    }

    fn lane_array(&self, name: &str, ty: &str, len: usize) -> Option<String> {
        Some(format!("{ty} {name}[{len}];"))
    }

    fn simd_hint(&self) -> Option<&'static str> {
        Some("#pragma omp simd")
    }

    fn fill(&self, pad: &str, node: NodeId, len: usize, literal: &str) -> String {
        format!("{pad}for (int64_t i = 0; i < {len}; ++i) {node}[i] = {literal};\n")
    }

    /// The margins slab by slab (`margin_slabs`), each a nest of plain loops whose innermost runs
    /// over consecutive cells: no test per cell, and no visit to the interior (a convolution's
    /// padded image is mostly interior). Only the fills that `margins_as_loops` leaves get here
    /// (a value no constant reproduces).
    fn fill_margins(&self, pad: &str, info: &TensorNode, literal: &str) -> String {
        let node = info.id;
        let dims = info.buffer_dims();
        let mut out = String::new();
        for slab in margin_slabs(info) {
            let mut inner = pad.to_string();
            let mut flat = String::new();
            for (a, (range, dim)) in slab.iter().zip(&dims).enumerate() {
                let (low, high) = (range.start, range.end);
                writeln!(
                    out,
                    "{inner}for (int64_t m{a} = {low}; m{a} < {high}; ++m{a})"
                )
                .expect("writing to a string");
                inner.push_str("  ");
                flat = if a == 0 {
                    format!("m{a}")
                } else {
                    format!("({flat}*{dim} + m{a})")
                };
            }
            writeln!(out, "{inner}{node}[{flat}] = {literal};").expect("writing to a string");
        }
        out
    }

    /// Constants on the opening line.
    fn open_block(&self, pad: &str, constants: &[(&str, &str, String)]) -> String {
        let constants: Vec<String> = constants
            .iter()
            .map(|(name, ty, value)| format!("{ty} {name} = {value};"))
            .collect();
        format!("{pad}{{ {}\n", constants.join(" "))
    }

    fn guarded(&self, condition: &str, statement: &str) -> String {
        format!("if ({condition}) {statement}")
    }

    fn index_type(&self) -> &'static str {
        "int64_t"
    }

    fn scatter_store(&self, pad: &str, node: NodeId, offset: &str, value: &str) -> String {
        format!("{pad}{{ int64_t o = {offset}; {node}[o] = {value}; }}\n")
    }

    fn trace_store(&self, info: &TensorNode, offset: &str, value: &str) -> Option<String> {
        Some(super::trace::store(info, offset, value))
    }
}

/// The C source for `routine` (optimized or not; virtual nodes must not be accessed).
/// Margin fills first become loops over their slabs, invariant operations are hoisted out of
/// every nested loop, the chains of loops nested alone included, and sibling loops merged even
/// where a chain shortens: a kernel splits only its top-level loop across threads.
pub fn generate(routine: &Routine) -> Result<Generated, CodegenError> {
    generate_named(routine, "rc_k")
}

/// [`generate`] with kernels named `{prefix}0`, `{prefix}1`, …, so that the kernels of several
/// routines can share one library.
pub fn generate_named(routine: &Routine, prefix: &str) -> Result<Generated, CodegenError> {
    // A deep model's repeated layers are rewritten once each kind, cut only between statements
    // the merge would not join (see `optimize::in_chunks`): a top-level loop merges only into
    // the loop before it, of the same range.
    let may_cut = |first: &Stmt, second: &Stmt| !matches!((first, second), (Stmt::For { range: a, .. }, Stmt::For { range: b, .. }) if a == b);
    let Ok(in_order) = in_chunks(Cow::Borrowed(routine), may_cut, |routine| {
        let looped = match margins_as_loops(&routine) {
            Cow::Owned(looped) => Some(looped),
            Cow::Borrowed(_) => None,
        };
        Ok::<_, Infallible>(merge_loops(
            hoist_invariants_into_nests(looped.unwrap_or(routine)),
            Chains::MayShorten,
        ))
    });
    let split = split_sums(in_order);
    generate_kernels(&split.routine, &split.scratch, prefix, false)
}

/// The C source for `routine` in its tracing form (`crate::trace::tracing_form`), every store
/// followed by the call logging it (`cc::trace`). The passes that move or cut stores are left
/// out (merging loops, hoisting, cutting sums into parts), so that the stores run in the
/// routine's order, as the interpreter runs them; the caller runs every kernel on one thread.
pub fn generate_traced(routine: &Routine) -> Result<Generated, CodegenError> {
    generate_kernels(routine, &[], "rc_k", true)
}

/// The kernels of `routine` whose `scratch` nodes are passed after its buffers, traced where
/// `traced`.
fn generate_kernels(
    routine: &Routine,
    scratch: &[NodeId],
    prefix: &str,
    traced: bool,
) -> Result<Generated, CodegenError> {
    let buffers: Vec<NodeId> = routine
        .nodes
        .values()
        .filter(|n| n.memory_mode != Some(MemoryMode::Virtual) && !scratch.contains(&n.id))
        .map(|n| n.id)
        .collect();
    // The scratch nodes' pointers follow the buffers'.
    let pointers: Vec<NodeId> = buffers.iter().chain(scratch).copied().collect();
    let statics: Vec<Symbol> = routine.statics.keys().copied().collect();
    let mut functions = Functions {
        prefix,
        routine,
        position: pointers
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect(),
        statics: &statics,
        names: HashMap::new(),
        source: String::from(PRELUDE),
    };
    if traced {
        functions.source.push_str(super::trace::HELPERS);
    }
    // A kernel's writer starts outside every loop and forgets its locals at the kernel's end, so
    // kernels are written each on its own, on every core, then named in order: the source and
    // the steps are the same however the work was split, and an error is the first kernel's.
    let groups = kernel_groups(routine, &routine.body);
    // A group alike an earlier one in its own names is that one's kernel over its own buffers:
    // only the first of each kind is written. (A traced kernel names its tensors: each is
    // written.)
    let Alike {
        nodes: own,
        first: first_alike,
    } = Alike::of(
        &groups,
        &routine.nodes,
        super::kernel_threads(),
        |group| match group {
            _ if traced => None,
            Group::Gemm { .. } => None,
            Group::Parallel { preamble, stmt } => Some(OwnKey::of(preamble.iter().chain([*stmt]))),
            Group::Serial { stmts } => Some(OwnKey::of(*stmts)),
        },
    );
    let firsts: Vec<usize> = (0..groups.len()).filter(|&i| first_alike[i] == i).collect();
    let mut written = map_in_order(&firsts, super::kernel_threads(), |&i| {
        write_group(routine, groups[i], traced)
    })
    .into_iter();
    let mut steps = Vec::with_capacity(groups.len());
    // Each first kernel's nodes, in its function's order, and the kernel.
    let mut kernels: HashMap<usize, (Vec<NodeId>, Kernel)> = HashMap::new();
    for (i, &first) in first_alike.iter().enumerate() {
        if first != i {
            let (first_nodes, kernel) = &kernels[&first];
            let (mine, theirs) = (&own[i], &own[first]);
            let (Some(mine), Some(theirs)) = (mine, theirs) else {
                unreachable!("only groups in their own names are alike")
            };
            let nodes: Vec<NodeId> = first_nodes
                .iter()
                .map(|node| {
                    let number = theirs.iter().position(|n| n == node);
                    mine[number.expect("a kernel names its statements' nodes")]
                })
                .collect();
            steps.push(Step::Kernel(Kernel {
                arguments: functions.arguments(&nodes)?,
                ..kernel.clone()
            }));
            continue;
        }
        let written = written.next().expect("one written group per first")?;
        steps.push(match written {
            Written::Gemm(plan) => Step::Gemm(plan),
            Written::Kernel {
                renamed,
                parallel,
                work_per_iteration,
            } => {
                let nodes = renamed.nodes.clone();
                let kernel = functions.kernel(renamed, parallel, work_per_iteration)?;
                kernels.insert(i, (nodes, kernel.clone()));
                Step::Kernel(kernel)
            }
        });
    }
    let scratch = scratch.iter().map(|id| routine.nodes[id].clone()).collect();
    Ok(Generated {
        source: functions.source,
        steps,
        buffers,
        scratch,
        statics,
    })
}

/// A kernel group as written: a matrix product's plan, or a kernel's statements with their own
/// names.
enum Written {
    Gemm(GemmPlan),
    Kernel {
        renamed: Renamed,
        parallel: Option<usize>,
        work_per_iteration: usize,
    },
}

/// Writes `group` of `routine`'s statements (checking every access, tracing every store where
/// `traced`), with its own names.
fn write_group(routine: &Routine, group: Group<'_>, traced: bool) -> Result<Written, CodegenError> {
    let mut writer = Writer::new(routine, &C);
    if traced {
        writer = writer.tracing();
    }
    let mut body = String::new();
    let (parallel, work_per_iteration) = match group {
        Group::Gemm { plan, nest } => {
            // The bounds of every access are checked on the nest the plan stands for, and on
            // the plan itself where its indices are its own.
            writer.check(nest)?;
            if !plan.a_margins.is_empty() && !super::gemm::in_bounds(plan, routine) {
                return Err(CodegenError::new(
                    CodegenErrorKind::OutOfBounds,
                    format!(
                        "codegen: the matrix product into {} reads outside a buffer",
                        plan.c
                    ),
                ));
            }
            return Ok(Written::Gemm(plan.clone()));
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
            writer.scoped(|writer| {
                for stmt in preamble {
                    writer.stmt(stmt, &mut body, 1)?;
                }
                let header = C.loop_header(&var.to_string(), "begin", "end");
                writeln!(body, "  {header}").expect("writing to a string");
                writer.enter_loop(*var, *range);
                writer.body(inner, &mut body, 2)?;
                writer.leave_loop(*var);
                Ok::<(), CodegenError>(())
            })?;
            body.push_str("  }\n");
            (Some(*range), inner.iter().map(Stmt::stored_cells).sum())
        }
        Group::Serial { stmts } => {
            writer.body(stmts, &mut body, 1)?;
            (None, stmts.iter().map(Stmt::stored_cells).sum())
        }
    };
    Ok(Written::Kernel {
        renamed: identity::rename(&body),
        parallel,
        work_per_iteration,
    })
}

/// The kernel functions of a routine's source, each distinct kernel once.
struct Functions<'a> {
    prefix: &'a str,
    routine: &'a Routine,
    /// Each node's position among the routine's buffer pointers.
    position: HashMap<NodeId, usize>,
    statics: &'a [Symbol],
    /// Each distinct kernel's text (all but its name), with its name.
    names: HashMap<String, String>,
    /// The prelude, then the functions.
    source: String,
}

impl Functions<'_> {
    /// The kernel whose statements are `body` (as the writer wrote them, with the routine's
    /// names): a new function unless a kernel of the same text is one already.
    fn kernel(
        &mut self,
        Renamed { body, nodes }: Renamed,
        parallel: Option<usize>,
        work_per_iteration: usize,
    ) -> Result<Kernel, CodegenError> {
        let arguments = self.arguments(&nodes)?;
        // The buffers are the statements' function's parameters, declared `restrict`: compilers
        // trust `restrict` on parameters, and on pointers declared in a body only in part, so
        // that there a loop storing to several buffers is compiled for their overlap too, or
        // not vectorized at all.
        let mut parameters = String::new();
        let mut casts = String::new();
        for (i, node) in nodes.iter().enumerate() {
            let ty = storage_type(self.routine.nodes[node].precision);
            write!(parameters, "{ty} *restrict n{i}, ").expect("writing to a string");
            write!(casts, "({ty} *)buffers[{i}], ").expect("writing to a string");
        }
        let mut text = format!(
            "({parameters}const int64_t *statics, int64_t begin, int64_t end) {{\n  \
             (void)statics; (void)begin; (void)end;\n"
        );
        for (i, symbol) in self.statics.iter().enumerate() {
            let name = var_name(Var::Static(*symbol));
            if body.contains(&name) {
                writeln!(text, "  const int64_t {name} = statics[{i}];")
                    .expect("writing to a string");
            }
        }
        text.push_str(&body);
        let count = self.names.len();
        let name = match self.names.get(&text) {
            Some(name) => name.clone(),
            None => {
                let name = format!("{}{count}", self.prefix);
                writeln!(self.source, "{KERNEL_START}{name}_cells{text}}}")
                    .expect("writing to a string");
                writeln!(
                    self.source,
                    "void {name}{KERNEL_PARAMETERS} {{\n  {name}_cells({casts}statics, begin, end);\n}}"
                )
                .expect("writing to a string");
                self.names.insert(text, name.clone());
                name
            }
        };
        Ok(Kernel {
            name,
            parallel,
            work_per_iteration,
            arguments,
        })
    }

    /// The positions of `nodes`' buffers among the routine's pointers.
    fn arguments(&self, nodes: &[NodeId]) -> Result<Vec<usize>, CodegenError> {
        nodes
            .iter()
            .map(|node| {
                self.position.get(node).copied().ok_or_else(|| {
                    CodegenError::new(
                        CodegenErrorKind::Malformed,
                        format!("codegen: a kernel reads {node}, which has no buffer"),
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcannl_ir::{Binop, Index, LocalId, LoopVar, Scalar, Unop};

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
    fn float_sums_into_a_local_are_kept_in_lanes_and_integer_ones_are_not() {
        for (precision, lanes) in [
            (Precision::F32, Some("float v0_lanes[8];")),
            (Precision::F64, Some("double v0_lanes[8];")),
            (Precision::I32, None),
            (Precision::F16, None),
        ] {
            let source = generate(&row_sums(precision)).unwrap().source;
            assert_eq!(
                lanes.is_some_and(|array| source.contains(array)),
                lanes.is_some(),
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

    /// `target[l] := tanh(source[l]) + source[l]` over `cells` cells, in loop variable `var`.
    fn tanh_plus(var: u32, source: u32, target: u32, cells: usize) -> Stmt {
        let at = |var: u32| Index::var(LoopVar(var), 0);
        let read = || Box::new(Scalar::Get(NodeId(source), vec![at(var)]));
        Stmt::For {
            var: LoopVar(var),
            range: cells,
            body: vec![Stmt::Set {
                node: NodeId(target),
                index: vec![at(var)],
                value: Scalar::Binop(
                    Binop::Add,
                    Box::new(Scalar::Unop(Unop::Tanh, read())),
                    read(),
                ),
            }],
        }
    }

    #[test]
    fn kernels_alike_in_their_own_names_share_a_function_over_their_own_buffers() {
        // n0 → n1 and n2 → n3 alike; n4 → n5 the same over f64 cells.
        let precision = |i: u32| {
            if i < 4 {
                Precision::F32
            } else {
                Precision::F64
            }
        };
        let routine = Routine {
            name: "r".to_owned(),
            nodes: (0..6)
                .map(|i| TensorNode::new(i, &format!("t{i}"), precision(i), &[8]))
                .map(|n| (n.id, n))
                .collect(),
            statics: Default::default(),
            body: vec![
                tanh_plus(0, 0, 1, 8),
                tanh_plus(1, 2, 3, 8),
                tanh_plus(2, 4, 5, 8),
            ],
        };
        // Written as they stand (`generate` would first merge the two loops over 8 cells).
        let generated = generate_kernels(&routine, &[], "rc_k", false).unwrap();
        let kernels: Vec<&Kernel> = (generated.steps.iter())
            .map(|step| match step {
                Step::Kernel(kernel) => kernel,
                Step::Gemm(_) => panic!("no product here"),
            })
            .collect();
        let position = |node: u32| generated.buffers.iter().position(|&n| n == NodeId(node));
        let arguments = |nodes: [u32; 2]| nodes.map(|n| position(n).unwrap()).to_vec();
        assert_eq!(kernels.len(), 3);
        assert_eq!(kernels[0].name, kernels[1].name);
        assert_ne!(kernels[0].name, kernels[2].name);
        // In the order the function names them: the target first.
        assert_eq!(kernels[0].arguments, arguments([1, 0]));
        assert_eq!(kernels[1].arguments, arguments([3, 2]));
        assert_eq!(kernels[2].arguments, arguments([5, 4]));
        assert_eq!(generated.source.matches("_cells(").count(), 2 * 2);
    }

    #[test]
    fn loops_over_consecutive_cells_run_as_one() {
        let source = generate(&total(false)).unwrap().source;
        assert!(
            source.contains(
                "for (int64_t l0_group = 0; l0_group < 4; ++l0_group) {\n      \
                 #pragma omp simd\n      for (int64_t l0_lane = 0; l0_lane < 16; ++l0_lane) {\n        \
                 const int64_t l0 = l0_group * 16 + l0_lane; const int64_t l1 = 0; \
                 const int64_t l2 = 0;\n"
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
            terms: vec![(coefficient, Var::Loop(LoopVar(0)))].into(),
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
