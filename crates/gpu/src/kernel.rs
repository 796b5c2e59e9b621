//! A WGSL compute shader as the GPU backend runs it: the prelude every kernel starts with, the
//! declarations of its bindings and static indices, and how it is dispatched; a routine as the
//! kernels it runs in order.

use std::fmt::Write;

use rcannl_backends::emit::var_name;
use rcannl_ir::{LocalId, NodeId, Precision, Routine, Symbol, Var};

/// The definitions every kernel starts with.
pub const PRELUDE: &str = include_str!("prelude.wgsl");

/// Invocations per workgroup of a parallel kernel.
pub const WORKGROUP: u32 = 64;

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
