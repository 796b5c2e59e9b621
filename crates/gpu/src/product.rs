//! Matrix products on the GPU: one tiled compute kernel per [`GemmPlan`].
//!
//! Every operand's flat offset is linear in the plan's loops ([`flat_coefficients`]), so the
//! position of a group — the batch, row, column or reduction loops, several of them flattened
//! into one index in the nest's order — is decoded with divisions by constants into its offset in
//! each operand; static indices and the indices' constants make up each operand's base offset.
//! The kernel is [`TEMPLATE`] with those offsets substituted.
//!
//! A workgroup of 16×16 invocations computes a 64×64 tile of C, each invocation a 4×4 block held
//! in registers; the reduction passes through workgroup memory 16 steps at a time. Each cell of C
//! starts from its old value (or from 0 when the plan fills C with zeros first) and receives its
//! terms one by one in the nest's order, summed in f32: f16 cells are converted on load and the
//! sum rounded once on store (the interpreter rounds after every term). Only cells inside C and
//! steps inside the reduction are computed, so any sizes work.
//!
//! A reduction longer than one invocation may loop ([`STEPS_PER_DISPATCH`] steps, within the
//! schedule's iteration budget) runs as a sequence of dispatches, each taking the next steps:
//! every cell carries its sum from one dispatch to the next in C itself, so that it still receives
//! its terms in order.

use rcannl_ir::{GemmPlan, Index, LoopVar, NodeId, PlanOperand, Precision, Routine, Var};

use rcannl_backends::emit::{CodegenError, CodegenErrorKind, var_name};

use crate::kernel::{Kernel, Layout};
use crate::schedule::ITERATION_BUDGET;

/// Rows (and columns) of C one workgroup computes.
const TILE: usize = 64;
/// Reduction steps the operands' tiles in workgroup memory hold.
const DEPTH: usize = 16;
/// Invocations of a workgroup: 16 × 16, each computing 4 × 4 cells of the tile.
const INVOCATIONS: usize = 256;

/// The loop iterations an invocation runs per [`DEPTH`] reduction steps (the step loop, the 4
/// loads, the 16 terms), and around them (starting and storing its 16 cells, with slack).
const ITERATIONS_PER_DEPTH: u64 = 21;
const ITERATIONS_AROUND: u64 = 64;

/// The reduction steps one dispatch takes: a multiple of [`DEPTH`] within the budget.
pub(crate) const STEPS_PER_DISPATCH: usize =
    ((ITERATION_BUDGET - ITERATIONS_AROUND) / ITERATIONS_PER_DEPTH) as usize * DEPTH;

/// The kernel, with `{NAME}` placeholders for the plan. `tx`, `ty` place an invocation in the
/// 16 × 16 grid; its cells of C are rows `ty + 16r` and columns `tx + 16s` of the tile, so that
/// neighbouring invocations read neighbouring columns of B's tile. Its own names never take the
/// form of the nodes' (`n3`) or static indices' (`s1`). Its numbers are those of [`TILE`],
/// [`DEPTH`] and [`INVOCATIONS`].
const TEMPLATE: &str = r"
const M: i32 = {M}i;
const N: i32 = {N}i;
const K: i32 = {K}i;
const TILES_M: i32 = {TILES_M}i;
const TILES_N: i32 = {TILES_N}i;
const TILES: i32 = {TILES}i;

// The operands' tiles, one row per reduction step: A's rows of C and B's columns. A row holds
// 65 cells, one more than it uses, so that invocations storing down a column of a tile store
// into different memory banks.
const ROW: i32 = 65i;
var<workgroup> a_tile: array<f32, 1040>;
var<workgroup> b_tile: array<f32, 1040>;

// Each operand's offset contributed by a position of a group (its loops flattened, the nest's
// outermost loop first).
fn a_batch(t: i32) -> i32 { return {A_BATCH}; }
fn a_rows(t: i32) -> i32 { return {A_ROWS}; }
fn a_steps(t: i32) -> i32 { return {A_STEPS}; }
fn b_batch(t: i32) -> i32 { return {B_BATCH}; }
fn b_steps(t: i32) -> i32 { return {B_STEPS}; }
fn b_columns(t: i32) -> i32 { return {B_COLUMNS}; }
fn c_batch(t: i32) -> i32 { return {C_BATCH}; }
fn c_rows(t: i32) -> i32 { return {C_ROWS}; }
fn c_columns(t: i32) -> i32 { return {C_COLUMNS}; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) place: vec3<u32>, @builtin(num_workgroups) grid: vec3<u32>,
        @builtin(local_invocation_index) invocation: u32) {
  let tile = i32(place.x + place.y * grid.x);
  if (tile >= TILES) { return; }
{BASES}{CHUNK}  let batch = tile / (TILES_M * TILES_N);
  let row0 = (tile / TILES_N) % TILES_M * 64i;
  let column0 = tile % TILES_N * 64i;
  let a_base = a_start + a_batch(batch);
  let b_base = b_start + b_batch(batch);
  let c_base = c_start + c_batch(batch);
  let me = i32(invocation);
  let tx = me % 16i;
  let ty = me / 16i;

  // sums[r][s]: the cell of row row0 + ty + 16r and column column0 + tx + 16s.
  var sums: array<vec4<f32>, 4>;
  for (var r = 0i; r < 4i; r++) {
    for (var s = 0i; s < 4i; s++) {
      let m = row0 + ty + 16i * r;
      let n = column0 + tx + 16i * s;
      if (m < M && n < N) {
        sums[r][s] = {START};
      }
    }
  }

  for (var step0 = k_first; step0 < k_end; step0 += 16i) {
    // 1024 cells of each tile, 4 per invocation: consecutive invocations take consecutive cells
    // of the operand along the group it moves least in.
    for (var p = 0i; p < 4i; p++) {
      let e = me + 256i * p;
      let a_row = {A_ROW_OF_E};
      let a_step = {A_STEP_OF_E};
      var a_value = 0.0;
      if (row0 + a_row < M && step0 + a_step < k_end) {
        a_value = f32({A}[a_base + a_rows(row0 + a_row) + a_steps(step0 + a_step)]);
      }
      a_tile[a_step * ROW + a_row] = a_value;
      let b_column = {B_COLUMN_OF_E};
      let b_step = {B_STEP_OF_E};
      var b_value = 0.0;
      if (column0 + b_column < N && step0 + b_step < k_end) {
        b_value = f32({B}[b_base + b_steps(step0 + b_step) + b_columns(column0 + b_column)]);
      }
      b_tile[b_step * ROW + b_column] = b_value;
    }
    workgroupBarrier();
    // The last steps may not fill a tile: no term past the end is added, not even a 0 (which
    // would turn a sum of -0 into +0).
    let steps = min(16i, k_end - step0);
    for (var k = 0i; k < steps; k++) {
      // Every cell adds a[r] · b[s] on its own: the vectors only hold 4 cells each.
      let at = k * ROW + ty;
      let bt = k * ROW + tx;
      let a = vec4<f32>(a_tile[at], a_tile[at + 16i], a_tile[at + 32i], a_tile[at + 48i]);
      let b = vec4<f32>(b_tile[bt], b_tile[bt + 16i], b_tile[bt + 32i], b_tile[bt + 48i]);
      sums[0] = sums[0] + a.x * b;
      sums[1] = sums[1] + a.y * b;
      sums[2] = sums[2] + a.z * b;
      sums[3] = sums[3] + a.w * b;
    }
    workgroupBarrier();
  }

  for (var r = 0i; r < 4i; r++) {
    for (var s = 0i; s < 4i; s++) {
      let m = row0 + ty + 16i * r;
      let n = column0 + tx + 16i * s;
      if (m < M && n < N) {
        {C}[c_base + c_rows(m) + c_columns(n)] = {ELEMENT}(sums[r][s]);
      }
    }
  }
}
";

/// One operand's flat offset as the product sees it.
type Offsets = PlanOperand;

/// The offset of `operand`'s constant and static indices, as WGSL.
fn start(operand: &Offsets) -> String {
    let mut parts = vec![format!("{}i", operand.constant)];
    for (symbol, c) in &operand.statics {
        parts.push(format!("{c}i * {}", var_name(Var::Static(*symbol))));
    }
    parts.join(" + ")
}

/// The offset in `operand` of position `t` of `group` (its loops flattened, outermost first),
/// as WGSL.
fn group_offset(operand: &Offsets, group: &[(LoopVar, usize)]) -> String {
    let total: usize = group.iter().map(|(_, range)| range).product();
    let mut terms = Vec::new();
    let mut stride = 1usize;
    for &(var, range) in group.iter().rev() {
        let c = operand.coefficient(var);
        if c != 0 && range > 1 {
            let outermost = stride * range == total;
            let position = match (stride, outermost) {
                (1, true) => "t".to_owned(),
                (1, false) => format!("(t % {range}i)"),
                (_, true) => format!("(t / {stride}i)"),
                (_, false) => format!("(t / {stride}i % {range}i)"),
            };
            terms.push(format!("{c}i * {position}"));
        }
        stride *= range;
    }
    if terms.is_empty() {
        "0i".to_owned()
    } else {
        terms.join(" + ")
    }
}

fn size(group: &[(LoopVar, usize)]) -> usize {
    group.iter().map(|(_, range)| range).product()
}

fn offsets(routine: &Routine, node: NodeId, index: &[Index]) -> Result<Offsets, CodegenError> {
    let info = routine.nodes.get(&node).ok_or_else(|| {
        CodegenError::new(
            CodegenErrorKind::Malformed,
            format!("wgsl: a matrix product names unknown node {node}"),
        )
    })?;
    let offsets = Offsets::new(index, &info.buffer_dims());
    if !offsets.fits_i32() {
        return Err(CodegenError::new(
            CodegenErrorKind::TooLarge,
            format!(
                "wgsl: a matrix product addresses tensor '{}' ({node}) with strides beyond \
                 32-bit integers",
                info.label
            ),
        ));
    }
    Ok(offsets)
}

/// Whether the product writes every cell of C's buffer, so that a plan filling C with zeros
/// first needs no fill of its own.
pub(crate) fn writes_every_cell(routine: &Routine, plan: &GemmPlan) -> bool {
    let c = &routine.nodes[&plan.c];
    let loops = plan.written_loops();
    Offsets::new(&plan.c_index, &c.buffer_dims()).covers(&loops, c.buffer_len())
}

/// The kernel computing `plan` (its tensors laid out as `layout` says), or `None` where its
/// cells are of a precision other than f32 and f16 (which the nest's own kernels compute). The
/// plan's accesses must have been checked against the buffers: the kernel reads and writes
/// without checks.
pub(crate) fn kernel(layout: &Layout, plan: &GemmPlan) -> Result<Option<Kernel>, CodegenError> {
    let routine = layout.routine;
    let element = match routine.nodes.get(&plan.c).map(|c| c.precision) {
        Some(Precision::F32) => "f32",
        Some(Precision::F16) => "f16",
        _ => return Ok(None),
    };
    // A plan reading a zero-widened copy of `a` (a convolution's input gradient) runs as its
    // nest.
    if !plan.a_margins.is_empty() {
        return Ok(None);
    }
    let a = offsets(routine, plan.a, &plan.a_index)?;
    let b = offsets(routine, plan.b, &plan.b_index)?;
    let c = offsets(routine, plan.c, &plan.c_index)?;
    let (m, n, k) = (size(&plan.m), size(&plan.n), size(&plan.k));
    let (tiles_m, tiles_n) = (m.div_ceil(TILE), n.div_ceil(TILE));
    let tiles = size(&plan.batch) * tiles_m * tiles_n;
    if tiles > i32::MAX as usize || k > i32::MAX as usize {
        return Err(CodegenError::new(
            CodegenErrorKind::TooLarge,
            format!(
                "wgsl: a matrix product into {} of {tiles} tiles and {k} steps exceeds 32-bit \
                 indices",
                plan.c
            ),
        ));
    }
    let at = Layout::offset_name;
    let bases = format!(
        "  let a_start = {} + {};\n  let b_start = {} + {};\n  let c_start = {} + {};\n",
        at(plan.a),
        start(&a),
        at(plan.b),
        start(&b),
        at(plan.c),
        start(&c)
    );
    // Consecutive invocations load consecutive cells where the operand allows: along the
    // reduction when it moves less per step there than per row (or column).
    let (a_row, a_step) = if a.unit(&plan.k) < a.unit(&plan.m) {
        (format!("e / {DEPTH}i"), format!("e % {DEPTH}i"))
    } else {
        (format!("e % {TILE}i"), format!("e / {TILE}i"))
    };
    let (b_column, b_step) = if b.unit(&plan.k) < b.unit(&plan.n) {
        (format!("e / {DEPTH}i"), format!("e % {DEPTH}i"))
    } else {
        (format!("e % {TILE}i"), format!("e / {TILE}i"))
    };
    let c_arena = layout.arena(plan.c);
    let old = format!("f32({c_arena}[c_base + c_rows(m) + c_columns(n)])");
    let first = if plan.zero_first { "0.0" } else { &old };
    let dispatches = k.div_ceil(STEPS_PER_DISPATCH).max(1);
    // Past the first dispatch, a cell starts from the sum the previous ones stored.
    let (chunk, start_value) = if dispatches > 1 {
        (
            format!(
                "  let k_first = rc_chunk[0] * {STEPS_PER_DISPATCH}i;\n  let k_end = min(K, \
                 k_first + {STEPS_PER_DISPATCH}i);\n"
            ),
            format!("select({first}, {old}, k_first > 0i)"),
        )
    } else {
        (
            "  let k_first = 0i;\n  let k_end = K;\n".to_owned(),
            first.to_owned(),
        )
    };
    let mut nodes = vec![plan.a, plan.b, plan.c];
    nodes.sort();
    nodes.dedup();
    let substitutions: [(&str, String); 26] = [
        ("{M}", m.to_string()),
        ("{N}", n.to_string()),
        ("{K}", k.to_string()),
        ("{TILES_M}", tiles_m.to_string()),
        ("{TILES_N}", tiles_n.to_string()),
        ("{TILES}", tiles.to_string()),
        ("{A_BATCH}", group_offset(&a, &plan.batch)),
        ("{A_ROWS}", group_offset(&a, &plan.m)),
        ("{A_STEPS}", group_offset(&a, &plan.k)),
        ("{B_BATCH}", group_offset(&b, &plan.batch)),
        ("{B_STEPS}", group_offset(&b, &plan.k)),
        ("{B_COLUMNS}", group_offset(&b, &plan.n)),
        ("{C_BATCH}", group_offset(&c, &plan.batch)),
        ("{C_ROWS}", group_offset(&c, &plan.m)),
        ("{C_COLUMNS}", group_offset(&c, &plan.n)),
        ("{BASES}", layout.lets(&bases, &nodes) + &bases),
        ("{CHUNK}", chunk),
        ("{START}", start_value),
        ("{A_ROW_OF_E}", a_row),
        ("{A_STEP_OF_E}", a_step),
        ("{B_COLUMN_OF_E}", b_column),
        ("{B_STEP_OF_E}", b_step),
        ("{A}", layout.arena(plan.a).to_string()),
        ("{B}", layout.arena(plan.b).to_string()),
        ("{C}", c_arena.to_string()),
        ("{ELEMENT}", element.to_owned()),
    ];
    let mut body = TEMPLATE.to_owned();
    for (name, value) in &substitutions {
        body = body.replace(name, value);
    }
    let (mut source, arenas) = layout.header(&bases, &nodes);
    if dispatches > 1 {
        source.push_str(&format!(
            "@group(0) @binding({}) var<storage, read> rc_chunk: array<i32>;\n",
            arenas.len() + 1
        ));
    }
    source.push_str(&body);
    Ok(Some(Kernel {
        source,
        nodes,
        arenas,
        parameters: true,
        invocations: (tiles * INVOCATIONS) as u64,
        workgroup: INVOCATIONS as u32,
        spills: Vec::new(),
        dispatches: dispatches as u64,
    }))
}
