//! The one kernel writer: source text from a routine's loop IR, for any target language.
//!
//! [`Writer`] walks statements and expressions once for every target. It computes each cell's
//! row-major offset and proves, while it writes, that every access stays inside its buffer (a
//! routine whose bounds cannot be proved is refused, never guarded at run time); it converts
//! every value through the target's one conversion function; it stores cells through the
//! target's one rounding rule; it never reads conditionally (a lookup whose id selects no cell
//! reads the axis's first cell and blends in a zero). What differs between targets is only how
//! things are spelled: a [`Dialect`] gives the types, literals, conversions, operations, the blend
//! primitive, loops and locals, and the few statements whose shape is the target's own (fills,
//! vector stores, scatters). Hooks cover what only one target has: C's coalesced loop chains,
//! sums, maxima and minima kept in vector lanes (`coalesces_loops`, `lane_array`); the GPU's locals kept in one-cell buffers across kernels ([`Writer::spill`]).
//! A writer made [`Writer::tracing`] follows every store with the statement that logs it
//! ([`Dialect::trace_store`]), which only a target that can print has.
//!
//! The C dialect is `cc::codegen`'s, the WGSL one `rcannl_gpu::wgsl`'s; each target also
//! assembles the written statements into its kernels (functions split across threads, compute
//! shaders and their bindings).

mod coalesce;
mod ops;
mod walk;

pub use walk::Writer;

use rcannl_ir::{Kind, LoopVar, NodeId, Precision, Symbol, TensorNode, Ternop, Var};

/// What kind of problem kept a routine from being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CodegenErrorKind {
    /// The routine is not well formed: a node or local it does not declare, an index of the
    /// wrong number of axes, a matrix product where none may stand.
    Malformed,
    /// An access that may fall outside its buffer.
    OutOfBounds,
    /// A precision or an operation the target does not have (an f64 tensor on WGSL, arithmetic
    /// on 128-bit words).
    Unsupported,
    /// More than the target can address or run: cells beyond its integers, invocations or loop
    /// iterations beyond its limits.
    TooLarge,
}

/// Why a routine cannot be turned into a target's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenError {
    /// What kind of problem it is.
    pub kind: CodegenErrorKind,
    /// What cannot be generated, in words (what `Display` prints), naming the tensor concerned.
    pub message: String,
}

impl CodegenError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: CodegenErrorKind, message: impl Into<String>) -> CodegenError {
        CodegenError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodegenError {}

/// The name a loop variable or a static index has in every target's source: `l3`, `s1`.
pub fn var_name(var: Var) -> String {
    let mut name = String::new();
    write_var_name(&mut name, var);
    name
}

/// [`var_name`] appended to `out`.
pub fn write_var_name(out: &mut String, var: Var) {
    use std::fmt::Write;
    match var {
        Var::Loop(LoopVar(v)) => write!(out, "l{v}"),
        Var::Static(Symbol(s)) => write!(out, "s{s}"),
    }
    .expect("writing to a string");
}

/// How a target language spells what [`Writer`] writes. Every `value` argument is an expression
/// of the compute type of the precision named beside it; every returned statement ends with a
/// newline and starts with `pad` where it takes one.
pub trait Dialect {
    /// The prefix of the target's error messages (`codegen`, `wgsl`).
    fn name(&self) -> &'static str;

    /// The type values of `precision` are computed in.
    fn compute_type(&self, precision: Precision) -> &'static str;
    /// The float precision lookup ids and conditions are computed in.
    fn condition_precision(&self) -> Precision;

    /// A float literal of the compute type of `precision`.
    fn float_literal(&self, x: f64, precision: Precision) -> String;
    /// An integer literal of the integers' compute type.
    fn int_literal(&self, i: i64) -> String;
    /// A 128-bit word literal.
    fn word_literal(&self, w: [u32; 4]) -> String;
    /// A stored cell's literal: the constant as `precision` holds it, in its storage type.
    fn storage_literal(&self, c: f64, precision: Precision) -> String;
    /// A constant of a position's arithmetic: a coefficient or offset of an index.
    fn index_constant(&self, c: i64) -> String;
    /// A size (a dim, a range, a length, a stride) in a position's arithmetic.
    fn size(&self, n: usize) -> String;

    /// `value` as a cell of `precision` stores it.
    fn stored(&self, value: &str, precision: Precision) -> String;
    /// A stored cell of `precision`, in the compute type.
    fn loaded(&self, cell: &str, precision: Precision) -> String;
    /// `value` rounded to what a cell of `precision` holds, kept in the compute type (a local's
    /// store).
    fn round_to(&self, value: &str, precision: Precision) -> String;
    /// `value`, a value of precision `from`, converted to the kind of `to`, as
    /// `rcannl_ir::Value::to_kind` converts.
    fn convert(&self, value: &str, from: Precision, to: Precision) -> String;
    /// A position (an index expression) as a u32 value, before its conversion.
    fn position_value(&self, index: &str) -> String;

    /// A call of the prelude's helper `name` for values of `kind` (`rc_max`, `rc_imod`, …), in
    /// `precision`.
    fn helper(&self, kind: Kind, name: &str, precision: Precision, args: &[&str]) -> String;
    /// A call of the language's own float function `name` (`sqrt`, `trunc`, `fma`) in
    /// `precision`.
    fn library(&self, name: &str, precision: Precision, args: &[&str]) -> String;
    /// Whether the transcendental function `name` in `precision` is the prelude's helper rather
    /// than the language's own.
    fn prelude_math(&self, name: &str, precision: Precision) -> bool;
    /// 1 where `condition` holds, else 0, as a value of `precision`.
    fn truth_value(&self, precision: Precision, condition: &str) -> String;
    /// The zero a value of `kind` is compared with.
    fn zero(&self, kind: Kind) -> &'static str;
    /// The operator joining two conditions: both (`and`) or either.
    fn logical(&self, and: bool) -> &'static str;
    /// The integer `a symbol b` (`helper` the prelude's name for it), wrapping on overflow.
    fn wrapping(&self, helper: &str, symbol: &str, a: &str, b: &str) -> String;
    /// The integer 0 as a value.
    fn int_zero(&self) -> &'static str;
    /// The float 1 of `precision`.
    fn one(&self, precision: Precision) -> String;
    /// `1/√x`, rounded once, in `precision`.
    fn recip_sqrt(&self, x: &str, precision: Precision) -> String;
    /// `Fma` or `Mul3` of three integers.
    fn int_ternop(&self, op: Ternop, a: &str, b: &str, c: &str) -> String;
    /// `base` to a constant power, where the target computes it otherwise than its `pow`.
    fn constant_power(&self, _base: &str, _exponent: f64, _precision: Precision) -> Option<String> {
        None
    }
    /// `then` where `condition` holds, else `otherwise`, both evaluated: the target's blend.
    fn blend(&self, precision: Precision, condition: &str, then: &str, otherwise: &str) -> String;
    /// The condition that a value of the condition precision is not zero.
    fn truth(&self, value: &str) -> String;
    /// An unsigned integer literal (a draw's index in its word, a number of rounds).
    fn unsigned(&self, n: u64) -> String;

    /// The opening line of a loop of `var` from `start` while below `end` (ending with `{`).
    fn loop_header(&self, var: &str, start: &str, end: &str) -> String;
    /// The declaration of `name` of type `ty` holding `value`: a variable where `mutable`, else a
    /// constant.
    fn declare(&self, name: &str, ty: &str, value: &str, mutable: bool) -> String;
    /// Whether chains of loops over consecutive cells are written as one loop.
    fn coalesces_loops(&self) -> bool {
        false
    }
    /// The declaration of `name`, an array of `len` values of type `ty`, where the target keeps
    /// a loop's sum, maximum or minimum in lanes that vectorize; `None` where it runs such loops
    /// as written.
    fn lane_array(&self, _name: &str, _ty: &str, _len: usize) -> Option<String> {
        None
    }
    /// A line telling the compiler that the next loop's iterations are independent.
    fn simd_hint(&self) -> Option<&'static str> {
        None
    }

    /// Every cell of `node`'s buffer of `len` cells set to `literal`.
    fn fill(&self, pad: &str, node: NodeId, len: usize, literal: &str) -> String;
    /// Every cell of `info`'s margins set to `literal`.
    fn fill_margins(&self, pad: &str, info: &TensorNode, literal: &str) -> String;
    /// The opening of a block declaring constants, each `(name, type, value)`.
    fn open_block(&self, pad: &str, constants: &[(&str, &str, String)]) -> String;
    /// `statement`, run only where `condition` holds.
    fn guarded(&self, condition: &str, statement: &str) -> String;
    /// The type of positions and offsets.
    fn index_type(&self) -> &'static str;
    /// `value` (reading the cell `{node}[o]`) stored at offset `o`.
    fn scatter_store(&self, pad: &str, node: NodeId, offset: &str, value: &str) -> String;
    /// The cell at flat position `offset` of `node`'s buffer: `node[offset]` where each buffer
    /// is an array of its own.
    fn cell(&self, node: NodeId, offset: &str) -> String {
        format!("{node}[{offset}]")
    }
    /// The statement logging a store into the cell at flat position `offset` of `info`'s
    /// buffer, which now holds `value` (in the compute type of its precision): the line
    /// [`crate::trace::line`] writes, to where the run's trace goes. `None` where the target
    /// cannot print, the default.
    fn trace_store(&self, _info: &TensorNode, _offset: &str, _value: &str) -> Option<String> {
        None
    }
    /// The memory cell holding the `slot`-th spilled local of compute kind `kind` (see
    /// [`Writer::spill`]); only a target that splits a statement across kernels spills.
    fn spill_cell(&self, kind: Kind, slot: usize) -> String {
        format!("rc_spill_{}[{slot}]", kind_name(kind))
    }
    /// The precision a spilled local of `precision` is held in: the cells of one kind's spill
    /// array share a type, the widest its locals compute in. Its own, by default.
    fn spill_precision(&self, precision: Precision) -> Precision {
        precision
    }
}

/// A short name of a compute kind, for the names of what holds values of that kind.
pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Float => "f",
        Kind::Int => "i",
        Kind::Word => "w",
    }
}
