//! A WGSL compute shader as the GPU backend runs it: the prelude every kernel starts with, the
//! declarations of what it binds, and how it is dispatched; a routine as the kernels it runs in
//! order.
//!
//! Tensors live in arenas: a few storage buffers, one or more per WGSL storage type
//! ([`Class`]), each holding many tensors at offsets, so that a kernel binds a handful of
//! buffers however many tensors it touches (a device binds few storage buffers per kernel:
//! 8 to 32 on common drivers, 31 on Metal). A tensor's cells are read as
//! `rc_f32_0[rc_n3_at + offset]`: the arena the tensor lies in is fixed when the kernel is
//! written (arena 0 unless the [`Placement`] says otherwise), its offset there (`rc_n3_at`) is
//! read at run time from the kernel's parameters, `rc_statics`, which hold the routine's static
//! indices followed by the offsets of its tensors.

use std::collections::BTreeMap;
use std::fmt::Write;

use rcannl_backends::emit::{kind_name, var_name};
use rcannl_ir::{Kind, MemoryMode, NodeId, Precision, Routine, Stmt, Symbol, Var};

/// The definitions a kernel starts with: `rc_int` names the type integers compute in and
/// `rc_cond` the type of conditions and gather ids, and the functions whose bodies differ with
/// them follow the shared ones.
macro_rules! prelude {
    ($int:literal, $cond:literal) => {
        concat!(
            "alias rc_int = ",
            $int,
            ";\nalias rc_cond = ",
            $cond,
            ";\n",
            include_str!("prelude.wgsl"),
            include_str!(concat!("prelude_", $int, ".wgsl")),
            include_str!(concat!("prelude_", $cond, ".wgsl"))
        )
    };
}

/// The prelude of each routine, by whether its integers compute in `i64` ([`computes_int64`])
/// and whether it computes f64 ([`computes_f64`]).
const PRELUDES: [[&str; 2]; 2] = [
    [prelude!("i32", "f32"), prelude!("i32", "f64")],
    [prelude!("i64", "f32"), prelude!("i64", "f64")],
];

/// The prelude of a routine whose integers compute in `i64` where `int64`, and which computes
/// f64 where `float64`.
pub fn prelude(int64: bool, float64: bool) -> &'static str {
    PRELUDES[usize::from(int64)][usize::from(float64)]
}

/// Invocations per workgroup of a parallel kernel.
pub const WORKGROUP: u32 = 64;

/// The WGSL type a tensor's cells are stored as: tensors of one class share arenas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// `f32` cells.
    F32,
    /// `f16` cells (on devices with `shader-f16`).
    F16,
    /// `i32` cells.
    I32,
    /// `u32` cells.
    U32,
    /// `i64` cells (on devices with `shader-int64`).
    I64,
    /// `u64` cells (on devices with `shader-int64`).
    U64,
    /// `f64` cells (on devices with `shader-f64` and `shader-int64`).
    F64,
    /// 128-bit words, `vec4<u32>`.
    Word,
}

impl Class {
    /// Every class, in the order kernels bind them.
    pub const ALL: [Class; 8] = [
        Class::F32,
        Class::F16,
        Class::I32,
        Class::U32,
        Class::I64,
        Class::U64,
        Class::F64,
        Class::Word,
    ];

    /// The class cells of `precision` are stored in (for the precisions a device holds): bf16
    /// and fp8 widened to `f32`, u8, i8 and u16 to `i32` (see [`Class::widens`]).
    pub fn of(precision: Precision) -> Class {
        match precision {
            Precision::F16 => Class::F16,
            Precision::I32 | Precision::U8 | Precision::I8 | Precision::U16 => Class::I32,
            Precision::U32 => Class::U32,
            Precision::I64 => Class::I64,
            Precision::U64 => Class::U64,
            Precision::F64 => Class::F64,
            Precision::Uint4x32 => Class::Word,
            _ => Class::F32,
        }
    }

    /// Whether cells of `precision` are held in a wider class than their own: their bytes on
    /// the device differ from the host's.
    pub fn widens(precision: Precision) -> bool {
        Class::of(precision).cell_bytes() != precision.size_in_bytes() as u64
    }

    /// The WGSL type of a cell.
    pub fn wgsl(self) -> &'static str {
        match self {
            Class::F32 => "f32",
            Class::F16 => "f16",
            Class::I32 => "i32",
            Class::U32 => "u32",
            Class::I64 => "i64",
            Class::U64 => "u64",
            Class::F64 => "f64",
            Class::Word => "vec4<u32>",
        }
    }

    /// The bytes of a cell.
    pub fn cell_bytes(self) -> u64 {
        match self {
            Class::F16 => 2,
            Class::I64 | Class::U64 | Class::F64 => 8,
            Class::Word => 16,
            _ => 4,
        }
    }

    /// A short name, in the arenas' names.
    pub fn name(self) -> &'static str {
        match self {
            Class::F32 => "f32",
            Class::F16 => "f16",
            Class::I32 => "i32",
            Class::U32 => "u32",
            Class::I64 => "i64",
            Class::U64 => "u64",
            Class::F64 => "f64",
            Class::Word => "w",
        }
    }

    /// The class named `name`.
    pub fn named(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One arena: the `index`-th storage buffer of cells of `class`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arena {
    /// The type of its cells.
    pub class: Class,
    /// Which of the arenas of that class.
    pub index: u32,
}

impl std::fmt::Display for Arena {
    /// The arena's name in kernels: `rc_f32_0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rc_{}_{}", self.class.name(), self.index)
    }
}

/// The arena of each tensor that does not lie in arena 0 of its class.
pub type Placement = BTreeMap<NodeId, u32>;

/// One compute shader and how to dispatch it.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The whole WGSL module; its entry point is `main`.
    pub source: String,
    /// The tensors it reads or writes.
    pub nodes: Vec<NodeId>,
    /// The arenas it binds, binding `i` the `i`-th; the parameters (`rc_statics`, where it
    /// reads them) come next, then the spilled locals, the partial sums, the chunk number.
    pub arenas: Vec<Arena>,
    /// Whether it reads the parameters: the static indices, or the tensors' offsets.
    pub parameters: bool,
    /// The invocations it runs, in workgroups of `workgroup` along x (and y past the device's
    /// limit of workgroups per dimension).
    pub invocations: u64,
    /// Invocations per workgroup: [`WORKGROUP`] for a parallel kernel, 1 for a kernel of one
    /// invocation, the tiled product kernel's own size for a matrix product.
    pub workgroup: u32,
    /// The locals of a statement split across kernels, kept in memory instead of registers: for
    /// each compute kind it keeps, how many locals of that kind (each a cell per invocation, in
    /// `rc_spill_f`, `rc_spill_i` or `rc_spill_w`).
    pub spills: Vec<(Kind, usize)>,
    /// The cells of partial sums it writes or reads (`rc_partial`, f32), where a matrix
    /// product's reduction is split into slices computed at once; 0 for none.
    pub partials: u64,
    /// How many times the kernel is dispatched, one after another, each time with its number in
    /// `rc_chunk` (bound last): more than 1 for a loop run in chunks.
    pub dispatches: u64,
}

/// A routine as kernels run one after another.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The kernels, run in order.
    pub kernels: Vec<Kernel>,
    /// The static indices, in the order the parameters hold them.
    pub statics: Vec<Symbol>,
    /// The tensors whose offsets follow the static indices in the parameters, in that order:
    /// every tensor of the routine with a buffer.
    pub placed: Vec<NodeId>,
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
            let prelude = PRELUDES
                .iter()
                .flatten()
                .find(|p| kernel.source.contains(*p));
            out.push_str(
                &kernel
                    .source
                    .replace(prelude.copied().unwrap_or_default(), ""),
            );
            out.push('\n');
        }
        out
    }

    /// How many cells of kind `kind` the spilled locals of the kernels need.
    pub fn spill_cells(&self, kind: Kind) -> u64 {
        self.kernels
            .iter()
            .flat_map(|k| {
                k.spills
                    .iter()
                    .filter(move |(of, _)| *of == kind)
                    .map(|(_, slots)| *slots as u64 * k.invocations)
            })
            .max()
            .unwrap_or(0)
    }

    /// The most cells of partial sums a kernel needs.
    pub fn partial_cells(&self) -> u64 {
        self.kernels.iter().map(|k| k.partials).max().unwrap_or(0)
    }
}

/// Every tensor of `routine` with a buffer, in routine order: [`Program::placed`].
pub(crate) fn placed_nodes(routine: &Routine) -> Vec<NodeId> {
    routine
        .nodes
        .values()
        .filter(|n| n.memory_mode != Some(MemoryMode::Virtual))
        .map(|n| n.id)
        .collect()
}

/// What the kernels of one routine share: its static indices, its tensors' positions among the
/// parameters and their arenas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout<'a> {
    pub routine: &'a Routine,
    pub statics: &'a [Symbol],
    pub placed: &'a [NodeId],
    pub placement: &'a Placement,
    /// Whether integers compute in `i64` ([`computes_int64`]).
    pub int64: bool,
    /// Whether the routine computes f64 values ([`computes_f64`]).
    pub float64: bool,
}

impl Layout<'_> {
    /// The arena `node` lies in.
    pub fn arena(&self, node: NodeId) -> Arena {
        Arena {
            class: Class::of(self.routine.nodes[&node].precision),
            index: self.placement.get(&node).copied().unwrap_or(0),
        }
    }

    /// The name of `node`'s offset in its arena.
    pub fn offset_name(node: NodeId) -> String {
        format!("rc_{node}_at")
    }

    /// The tensors `code` reads or writes (naming their offsets), in routine order.
    pub fn nodes_in(&self, code: &str) -> Vec<NodeId> {
        self.placed
            .iter()
            .copied()
            .filter(|id| code.contains(&Layout::offset_name(*id)))
            .collect()
    }

    /// Whether a kernel running `code` over `nodes` reads the parameters.
    pub fn reads_parameters(&self, code: &str, nodes: &[NodeId]) -> bool {
        !nodes.is_empty()
            || self
                .statics
                .iter()
                .any(|s| code.contains(&var_name(Var::Static(*s))))
    }

    /// The declarations of a kernel running `code` over `nodes`: `enable f16` where it binds f16
    /// cells, the prelude, a binding per arena, the parameters where it reads them; and the
    /// arenas in binding order.
    pub fn header(&self, code: &str, nodes: &[NodeId]) -> (String, Vec<Arena>) {
        let mut arenas: Vec<Arena> = nodes.iter().map(|n| self.arena(*n)).collect();
        arenas.sort();
        arenas.dedup();
        let mut head = String::new();
        if arenas.iter().any(|a| a.class == Class::F16) {
            head.push_str("enable f16;\n");
        }
        head.push_str(prelude(self.int64, self.float64));
        for (i, arena) in arenas.iter().enumerate() {
            writeln!(
                head,
                "@group(0) @binding({i}) var<storage, read_write> {arena}: array<{}>;",
                arena.class.wgsl()
            )
            .expect("writing to a string");
        }
        if self.reads_parameters(code, nodes) {
            writeln!(
                head,
                "@group(0) @binding({}) var<storage, read> rc_statics: array<i32>;",
                arenas.len()
            )
            .expect("writing to a string");
        }
        (head, arenas)
    }

    /// The lines reading the static indices `code` uses and the offsets of `nodes` from the
    /// parameters.
    pub fn lets(&self, code: &str, nodes: &[NodeId]) -> String {
        let mut lets = String::new();
        for (i, symbol) in self.statics.iter().enumerate() {
            let name = var_name(Var::Static(*symbol));
            if code.contains(&name) {
                writeln!(lets, "  let {name}: i32 = rc_statics[{i}];")
                    .expect("writing to a string");
            }
        }
        for node in nodes {
            let position = self.statics.len()
                + self
                    .placed
                    .iter()
                    .position(|p| p == node)
                    .expect("every node a kernel names has a buffer");
            writeln!(
                lets,
                "  let {}: i32 = rc_statics[{position}];",
                Layout::offset_name(*node)
            )
            .expect("writing to a string");
        }
        lets
    }
}

/// Whether the integers of `routine` compute in `i64`: where it holds 64-bit integers (cells or
/// locals), which only a device with `shader-int64` runs. Elsewhere they compute in `i32`, which
/// every device has and which runs faster.
pub(crate) fn computes_int64(routine: &Routine) -> bool {
    holds_any(routine, &[Precision::I64, Precision::U64])
}

/// Whether `routine` computes f64 values (cells or locals), which only a device with
/// `shader-f64` and `shader-int64` runs: its conditions and gather ids compute in f64 too, as
/// the interpreter computes them.
pub(crate) fn computes_f64(routine: &Routine) -> bool {
    holds_any(routine, &[Precision::F64])
}

/// Whether a node or local of `routine` is in one of `precisions`.
fn holds_any(routine: &Routine, precisions: &[Precision]) -> bool {
    let mut found = routine
        .nodes
        .values()
        .any(|n| precisions.contains(&n.precision));
    for stmt in &routine.body {
        stmt.walk(&mut |s| {
            if let Stmt::Local { precision, .. } = s {
                found |= precisions.contains(precision);
            }
        });
    }
    found
}

/// The WGSL type values of `precision` are computed in: floats in `f32` but f64 in `f64`,
/// integers in `i32` (`i64` where `int64`), words in `vec4<u32>`.
pub(crate) fn compute_type(precision: Precision, int64: bool) -> &'static str {
    match precision.kind() {
        Kind::Float if precision == Precision::F64 => "f64",
        Kind::Float => "f32",
        Kind::Int if int64 => "i64",
        Kind::Int => "i32",
        Kind::Word => "vec4<u32>",
    }
}

/// The precision of the cells of the spill array of `kind`: the widest its locals compute in.
pub(crate) fn spill_precision(kind: Kind, int64: bool, float64: bool) -> Precision {
    match kind {
        Kind::Float if float64 => Precision::F64,
        Kind::Float => Precision::F32,
        Kind::Int if int64 => Precision::I64,
        Kind::Int => Precision::I32,
        Kind::Word => Precision::Uint4x32,
    }
}

/// The declaration of the spill array of `kind`, bound at `binding`.
pub(crate) fn spill_declaration(binding: usize, kind: Kind, int64: bool, float64: bool) -> String {
    let ty = compute_type(spill_precision(kind, int64, float64), int64);
    format!(
        "@group(0) @binding({binding}) var<storage, read_write> rc_spill_{}: array<{ty}>;\n",
        kind_name(kind)
    )
}
