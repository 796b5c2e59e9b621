//! Tracing stores (OCANNL's `debug_log_from_routines`): routines built so that every store into
//! a tensor's buffer writes a line as it runs, to see what a routine computed cell by cell.
//!
//! With the `trace_stores` setting on, or on a backend wrapped in [`Tracing`], the interpreter
//! and the C backend build each routine in its tracing form ([`tracing_form`]) and log every
//! store into a buffer (stores into a routine's scalar locals are not logged), one line each:
//!
//! ```text
//! forward 'h'[1, 2] = 0.375
//! backprop 'grad w'[0] = -1.25
//! ```
//!
//! The routine's name, the label of the tensor written (a gradient's is `grad` and its tensor's
//! label), the cell's position along each axis (a margin cell's is below 0 or past the axis's
//! size), and the value the cell holds after the store: a float with 9 significant digits (17 for
//! f64) as C's `%.9g` writes it (`nan`, `inf` and `-inf` otherwise), an integer in decimal, a
//! 128-bit word as its four 32-bit words in hex ([`line()`]).
//!
//! **Where the lines go.** Where the `debug_dir` setting names a folder, each routine's lines are
//! appended to `trace.log` ([`TRACE_FILE`]) in the routine's own folder there (beside its
//! generated code, see the tensor crate's `debug_dir` folders); elsewhere to standard error. A
//! [`Tracing`] backend takes its own [`Sink`].
//!
//! **Order.** A traced routine runs on one thread, its statements in the order the routine
//! writes them: the C backend splits no loop across threads, runs matrix products as the loops
//! they stand for, and leaves out its own passes that move or cut stores (merging loops, cutting
//! sums into parts, hoisting), so that its lines are the interpreter's, line for line. Tracing
//! is slow: it is for small programs being debugged.
//!
//! **Compiled code.** A traced routine's C holds the calls that print, an untraced one none; the
//! library cache is keyed by the source, so the two builds are never confused. The GPU cannot
//! print: compiling a routine there with tracing on is an error naming the setting (WGSL has no
//! output but buffers), never a silent fallback.

use std::io::Write;
use std::path::PathBuf;

use rcannl_ir::optimize::margins::margin_slabs;
use rcannl_ir::{Index, LoopVar, Precision, Routine, Scalar, Stmt, TensorNode, Value};

use crate::backend::{Backend, Executable};
use crate::error::{CompileError, CompileErrorKind, RunError, RunErrorKind};
use crate::settings;

/// The file, in a routine's folder of the `debug_dir` setting, its traced runs append to.
pub const TRACE_FILE: &str = "trace.log";

/// Where a traced routine's lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Standard error.
    StandardError,
    /// A file, created if missing, each run appending its lines.
    File(PathBuf),
}

impl Sink {
    /// The writer of one run's lines; an error names the file that cannot be opened.
    pub fn open(&self) -> Result<Box<dyn Write>, RunError> {
        match self {
            Sink::StandardError => Ok(Box::new(std::io::stderr().lock())),
            Sink::File(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map(|file| Box::new(std::io::BufWriter::new(file)) as Box<dyn Write>)
                .map_err(|e| unwritable(path, &e)),
        }
    }
}

/// The error of a trace that cannot be written to `path`.
pub(crate) fn unwritable(path: &std::path::Path, e: &dyn std::fmt::Display) -> RunError {
    RunError::new(
        RunErrorKind::Io,
        format!("the trace of stores: cannot write {}: {e}", path.display()),
    )
}

/// Whether the `trace_stores` setting asks for routines to be built in their tracing form; an
/// error names a value that is neither true nor false.
pub fn requested() -> Result<bool, CompileError> {
    settings::flag(&settings::TRACE_STORES)
        .map_err(|e| CompileError::new(CompileErrorKind::Setting, e.to_string()))
}

/// The error of a backend that cannot trace stores, for `routine`.
pub fn unsupported(backend: &str, routine: &Routine, why: &str) -> CompileError {
    CompileError::new(
        CompileErrorKind::Setting,
        format!(
            "routine {}: the {backend} backend cannot trace stores ({why}), which the \
             trace_stores setting (RCANNL_TRACE_STORES) asks for: trace the routine on the cc or \
             interp backend, or turn the setting off",
            routine.name
        ),
    )
}

/// A backend whose every routine is built in its tracing form, its lines going to the sink
/// given, whatever the `trace_stores` setting says:
/// `Tracing::new(Box::new(Interpreter), Sink::File(path))`.
#[derive(Debug)]
pub struct Tracing {
    backend: Box<dyn Backend>,
    sink: Sink,
}

impl Tracing {
    /// `backend`, tracing into `sink`.
    pub fn new(backend: Box<dyn Backend>, sink: Sink) -> Tracing {
        Tracing { backend, sink }
    }
}

impl Backend for Tracing {
    fn name(&self) -> &'static str {
        self.backend.name()
    }

    fn target(&self) -> Option<String> {
        self.backend.target()
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        self.backend.compile_traced(routine, self.sink.clone())
    }

    fn compile_traced(
        &self,
        routine: &Routine,
        sink: Sink,
    ) -> Result<Box<dyn Executable>, CompileError> {
        self.backend.compile_traced(routine, sink)
    }
}

/// `routine` with every store into a buffer a `Set`, `SetVec` or `ScatterAdd` statement, which
/// the tracing backends log: a fill becomes loops storing every cell, a margin fill loops over
/// its margins' slabs, a matrix product the loops it stands for. Each fill stores the value its
/// precision holds, so the stores leave the buffers as the fills did.
pub fn tracing_form(routine: &Routine) -> Routine {
    let mut next = 0;
    for stmt in &routine.body {
        stmt.walk(&mut |s| {
            if let Stmt::For { var, .. } = s {
                next = next.max(var.0 + 1);
            }
        });
    }
    let mut fresh = || {
        next += 1;
        LoopVar(next - 1)
    };
    let body = traced_body(routine, &routine.body, &mut fresh);
    Routine {
        body,
        ..routine.clone()
    }
}

fn traced_body(routine: &Routine, body: &[Stmt], fresh: &mut impl FnMut() -> LoopVar) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for stmt in body {
        match stmt {
            Stmt::For { var, range, body } => out.push(Stmt::For {
                var: *var,
                range: *range,
                body: traced_body(routine, body, fresh),
            }),
            Stmt::Gemm { nest, .. } => out.extend(traced_body(routine, nest, fresh)),
            Stmt::Fill { node, value } => {
                let info = &routine.nodes[node];
                let every = info.buffer_dims().into_iter().map(|d| 0..d).collect();
                out.extend(stores_over(info, every, *value, fresh));
            }
            Stmt::FillMargins { node, value } => {
                let info = &routine.nodes[node];
                for slab in margin_slabs(info) {
                    out.extend(stores_over(info, slab, *value, fresh));
                }
            }
            other => out.push(other.clone()),
        }
    }
    out
}

/// Loops storing `value` (as `info`'s precision holds it) at every buffer position of `ranges`.
fn stores_over(
    info: &TensorNode,
    ranges: Vec<std::ops::Range<usize>>,
    value: f64,
    fresh: &mut impl FnMut() -> LoopVar,
) -> Option<Stmt> {
    if ranges.iter().any(|r| r.is_empty()) {
        return None;
    }
    // The value the fill stores, which a store of it rounds to itself in any precision; a
    // word's is converted from the number as the fill converts it.
    let stored = match Value::Float(value).stored_as(info.precision) {
        Value::Float(x) => x,
        Value::Int(i) => i as f64,
        Value::Word(_) => value,
    };
    let vars: Vec<LoopVar> = ranges.iter().map(|_| fresh()).collect();
    let mut stmt = Stmt::Set {
        node: info.id,
        index: (vars.iter().zip(&ranges))
            .map(|(var, range)| Index::var(*var, range.start as i64))
            .collect(),
        value: Scalar::Const(stored),
    };
    for (var, range) in vars.iter().zip(&ranges).rev() {
        stmt = Stmt::For {
            var: *var,
            range: range.len(),
            body: vec![stmt],
        };
    }
    Some(stmt)
}

/// Whether `stmt`, or one nested in it, stores in a way the tracing form has none of (a fill, a
/// margin fill, a matrix product).
pub fn untraceable(stmt: &Stmt) -> bool {
    let mut found = false;
    stmt.walk(&mut |s| {
        found |= matches!(
            s,
            Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. }
        );
    });
    found
}

/// The line of a store into the cell at flat buffer position `offset` of `info`, in routine
/// `routine`, the cell then holding `value` (see the module's documentation).
pub fn line(routine: &str, info: &TensorNode, offset: usize, value: Value) -> String {
    let dims = info.buffer_dims();
    let mut position = vec![0i64; dims.len()];
    let mut rest = offset;
    for axis in (0..dims.len()).rev() {
        position[axis] = (rest % dims[axis]) as i64 - info.padding[axis].0 as i64;
        rest /= dims[axis];
    }
    let position: Vec<String> = position.iter().map(ToString::to_string).collect();
    format!(
        "{routine} '{}'[{}] = {}\n",
        info.label,
        position.join(", "),
        value_text(value, info.precision)
    )
}

/// The significant digits a traced value of `precision` is written with: 9 for values computed
/// in f32, which tell every f32 apart, 17 for f64.
pub fn digits(precision: Precision) -> usize {
    if precision.compute() == Precision::F64 {
        17
    } else {
        9
    }
}

/// `value`, a cell of `precision`, as a traced line writes it.
fn value_text(value: Value, precision: Precision) -> String {
    match value {
        Value::Float(x) => general(x, digits(precision)),
        Value::Int(i) => i.to_string(),
        Value::Word(w) => format!(
            "[0x{:08x}, 0x{:08x}, 0x{:08x}, 0x{:08x}]",
            w[0], w[1], w[2], w[3]
        ),
    }
}

/// `x` with `digits` significant digits as C's `printf("%.*g", digits, x)` writes it, but for
/// NaN (`nan`, whatever its sign) and infinities (`inf`, `-inf`).
pub fn general(x: f64, digits: usize) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let digits = digits.max(1);
    // The exponent of `x` rounded to `digits` digits decides between the two forms, as in C.
    let scientific = format!("{:.*e}", digits - 1, x);
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's exponent form has an e");
    let exponent: i64 = exponent.parse().expect("an exponent");
    if exponent < -4 || exponent >= digits as i64 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            without_trailing_zeros(mantissa),
            exponent.abs()
        )
    } else {
        let decimals = (digits as i64 - 1 - exponent) as usize;
        without_trailing_zeros(&format!("{x:.decimals$}")).to_owned()
    }
}

/// `number` without the zeros ending its fraction, nor a point left ending it.
fn without_trailing_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_c_writes_them() {
        for (x, digits, want) in [
            (0.5, 9, "0.5"),
            (1.0 / 3.0, 9, "0.333333333"),
            (1.0 / 3.0, 17, "0.33333333333333331"),
            (-2.0, 9, "-2"),
            (123456789.0, 9, "123456789"),
            (1234567890.0, 9, "1.23456789e+09"),
            (0.0001, 9, "0.0001"),
            (0.00001, 9, "1e-05"),
            (9.9999999999, 9, "10"),
            (1e100, 17, "1e+100"),
            (-0.0, 9, "-0"),
            (f64::NAN, 9, "nan"),
            (f64::NEG_INFINITY, 9, "-inf"),
        ] {
            assert_eq!(general(x, digits), want, "{x} with {digits} digits");
        }
    }

    #[test]
    fn a_line_names_the_label_and_the_position_inside_the_margins() {
        let mut node = TensorNode::new(3, "grad w", Precision::F32, &[2, 3]);
        node.padding = vec![(1, 0), (0, 2)];
        // The buffer is 3 × 5; offset 7 is row 1, column 2: position [0, 2].
        assert_eq!(
            line("backprop", &node, 7, Value::Float(0.25)),
            "backprop 'grad w'[0, 2] = 0.25\n"
        );
        // Row 0 is the margin before the first axis.
        assert_eq!(
            line("backprop", &node, 4, Value::Float(0.0)),
            "backprop 'grad w'[-1, 4] = 0\n"
        );
        let scalar = TensorNode::new(0, "n", Precision::I32, &[]);
        assert_eq!(line("r", &scalar, 0, Value::Int(-7)), "r 'n'[] = -7\n");
    }
}
