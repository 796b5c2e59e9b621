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
//! its terms in order. A product of few tiles ([`split`]) instead cuts a long reduction into
//! slices computed at once, each workgroup summing one slice of one tile into partial sums, which
//! a second kernel ([`COMBINE`]) adds to C's starting value in the order of the slices: matrix
//! products sum in any order (as the C backend's do), and a weight gradient over a large batch
//! then occupies the GPU instead of a workgroup per tile.

use rcannl_ir::{GemmPlan, Index, LoopVar, NodeId, PlanOperand, Precision, Routine, Var};

use rcannl_backends::emit::{CodegenError, CodegenErrorKind, var_name};

use crate::kernel::{Kernel, Layout, WORKGROUP};
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
{GROUP}{BASES}{CHUNK}  let batch = tile / (TILES_M * TILES_N);
  let row0 = (tile / TILES_N) % TILES_M * 64i;
  let column0 = tile % TILES_N * 64i;
  let a_base = a_start + a_batch(batch);
  let b_base = b_start + b_batch(batch);
{C_BASE}  let me = i32(invocation);
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
        {STORE}
      }
    }
  }
}
";

/// The kernel adding a split reduction's partial sums to C, in the order of their slices, with
/// an invocation per cell of C's tiles; `{NAME}` placeholders as in [`TEMPLATE`].
const COMBINE: &str = r"
const M: i32 = {M}i;
const N: i32 = {N}i;
const TILES_M: i32 = {TILES_M}i;
const TILES_N: i32 = {TILES_N}i;
const TILES: i32 = {TILES}i;
const SLICES: i32 = {SLICES}i;

fn c_batch(t: i32) -> i32 { return {C_BATCH}; }
fn c_rows(t: i32) -> i32 { return {C_ROWS}; }
fn c_columns(t: i32) -> i32 { return {C_COLUMNS}; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let cell = i32(gid.x + gid.y * groups.x * 64u);
  if (cell >= TILES * 4096i) { return; }
{BASES}  let tile = cell / 4096i;
  let local = cell % 4096i;
  let m = (tile / TILES_N) % TILES_M * 64i + local / 64i;
  let n = tile % TILES_N * 64i + local % 64i;
  if (m >= M || n >= N) { return; }
  let c_base = c_start + c_batch(tile / (TILES_M * TILES_N));
  var sum = {START};
  for (var slice = 0i; slice < SLICES; slice++) {
    sum = sum + rc_partial[(slice * TILES + tile) * 4096i + local];
  }
  {C}[c_base + c_rows(m) + c_columns(n)] = {ELEMENT}(sum);
}
";

/// The fewest reduction steps a slice of a split reduction takes.
const SLICE_STEPS: usize = 1024;
/// A product of fewer tiles than this splits a long reduction into slices computed at once.
const FEW_TILES: usize = 128;
/// The most cells of partial sums a split keeps (64 MiB of f32).
const MOST_PARTIALS: usize = 1 << 24;

/// How a reduction of `k` steps over `tiles` tiles is split into slices computed at once: the
/// slices and the steps of each, or `None` to run it whole (in ordered dispatches where it is
/// longer than one may take). A product of few tiles leaves most of a GPU idle while one
/// workgroup per tile walks the whole reduction: slices give it more workgroups.
fn split(tiles: usize, k: usize) -> Option<(usize, usize)> {
    if tiles >= FEW_TILES || k < 2 * SLICE_STEPS {
        return None;
    }
    let slices = k
        .div_ceil(SLICE_STEPS)
        .min((2 * FEW_TILES / tiles).max(2))
        .max(k.div_ceil(STEPS_PER_DISPATCH));
    let steps = k.div_ceil(slices).next_multiple_of(DEPTH);
    let slices = k.div_ceil(steps);
    (slices > 1 && slices * tiles * TILE * TILE <= MOST_PARTIALS).then_some((slices, steps))
}

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
pub(crate) fn kernels(
    layout: &Layout,
    plan: &GemmPlan,
) -> Result<Option<Vec<Kernel>>, CodegenError> {
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
    let a_b_bases = format!(
        "  let a_start = {} + {};\n  let b_start = {} + {};\n",
        at(plan.a),
        start(&a),
        at(plan.b),
        start(&b)
    );
    let c_bases = format!("  let c_start = {} + {};\n", at(plan.c), start(&c));
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
    let c_store = format!("{c_arena}[c_base + c_rows(m) + c_columns(n)] = {element}(sums[r][s]);");
    let one_tile =
        "  let tile = i32(place.x + place.y * grid.x);\n  if (tile >= TILES) { return; }\n";
    let c_base = "  let c_base = c_start + c_batch(batch);\n";
    let substitute = |template: &str, extra: &[(&str, String)]| {
        let common: [(&str, String); 22] = [
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
            ("{A_ROW_OF_E}", a_row.clone()),
            ("{A_STEP_OF_E}", a_step.clone()),
            ("{B_COLUMN_OF_E}", b_column.clone()),
            ("{B_STEP_OF_E}", b_step.clone()),
            ("{A}", layout.arena(plan.a).to_string()),
            ("{B}", layout.arena(plan.b).to_string()),
            ("{C}", c_arena.to_string()),
        ];
        let mut body = template.to_owned();
        // The plan's own placeholders first: their values may hold the common ones.
        for (name, value) in extra.iter().chain(&common) {
            body = body.replace(name, value);
        }
        body
    };
    // A kernel's source: its header (the arenas of `nodes`, the parameters), then the buffer
    // `more` declares at the binding after them, then `body` reading `bases`.
    let kernel = |nodes: &[NodeId], bases: &str, more: Option<&str>, body: String| {
        let (mut source, arenas) = layout.header(bases, nodes);
        if let Some(more) = more {
            let binding = arenas.len() + 1;
            source.push_str(&format!("@group(0) @binding({binding}) {more}\n"));
        }
        source.push_str(&body.replace("{BASES}", &(layout.lets(bases, nodes) + bases)));
        (source, arenas)
    };
    let partial_sums = "var<storage, read_write> rc_partial: array<f32>;";
    if let Some((slices, steps)) = split(tiles, k) {
        let group = format!(
            "  let group = i32(place.x + place.y * grid.x);\n  if (group >= TILES * {slices}i) \
             {{ return; }}\n  let tile = group % TILES;\n  let slice = group / TILES;\n"
        );
        let chunk = format!(
            "  let k_first = slice * {steps}i;\n  let k_end = min(K, k_first + {steps}i);\n"
        );
        let store =
            "rc_partial[(slice * TILES + tile) * 4096i + (m - row0) * 64i + (n - column0)] \
                     = sums[r][s];"
                .to_owned();
        let body = substitute(
            TEMPLATE,
            &[
                ("{GROUP}", group),
                ("{CHUNK}", chunk),
                ("{C_BASE}", String::new()),
                ("{START}", "0.0".to_owned()),
                ("{STORE}", store),
                ("{ELEMENT}", element.to_owned()),
            ],
        );
        let nodes = sorted(vec![plan.a, plan.b]);
        let (source, arenas) = kernel(&nodes, &a_b_bases, Some(partial_sums), body);
        let partials = (slices * tiles * TILE * TILE) as u64;
        let slices_kernel = Kernel {
            source,
            nodes,
            arenas,
            parameters: true,
            invocations: (slices * tiles * INVOCATIONS) as u64,
            workgroup: INVOCATIONS as u32,
            spills: Vec::new(),
            partials,
            dispatches: 1,
        };
        let body = substitute(
            COMBINE,
            &[
                ("{SLICES}", slices.to_string()),
                ("{START}", first.to_owned()),
                ("{ELEMENT}", element.to_owned()),
            ],
        );
        let (source, arenas) = kernel(&[plan.c], &c_bases, Some(partial_sums), body);
        let combine = Kernel {
            source,
            nodes: vec![plan.c],
            arenas,
            parameters: true,
            invocations: (tiles * TILE * TILE) as u64,
            workgroup: WORKGROUP,
            spills: Vec::new(),
            partials,
            dispatches: 1,
        };
        return Ok(Some(vec![slices_kernel, combine]));
    }
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
    let body = substitute(
        TEMPLATE,
        &[
            ("{GROUP}", one_tile.to_owned()),
            ("{CHUNK}", chunk),
            ("{C_BASE}", c_base.to_owned()),
            ("{START}", start_value),
            ("{STORE}", c_store),
            ("{ELEMENT}", element.to_owned()),
        ],
    );
    let bases = a_b_bases + &c_bases;
    let nodes = sorted(vec![plan.a, plan.b, plan.c]);
    let chunk_number = "var<storage, read> rc_chunk: array<i32>;";
    let (source, arenas) = kernel(
        &nodes,
        &bases,
        (dispatches > 1).then_some(chunk_number),
        body,
    );
    Ok(Some(vec![Kernel {
        source,
        nodes,
        arenas,
        parameters: true,
        invocations: (tiles * INVOCATIONS) as u64,
        workgroup: INVOCATIONS as u32,
        spills: Vec::new(),
        partials: 0,
        dispatches: dispatches as u64,
    }]))
}

fn sorted(mut nodes: Vec<NodeId>) -> Vec<NodeId> {
    nodes.sort();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reductions_over_few_tiles_split_into_slices_within_the_budget() {
        // A weight gradient over 60,000 rows into one tile: slices of whole depth steps, each
        // within one dispatch, covering the reduction once.
        let (slices, steps) = split(1, 60_000).unwrap();
        assert!(slices > 1 && steps % DEPTH == 0 && steps <= STEPS_PER_DISPATCH);
        assert!(steps * slices >= 60_000 && steps * (slices - 1) < 60_000);
        // A million steps: more slices, still within a dispatch each.
        let (slices, steps) = split(2, 1_000_000).unwrap();
        assert!(steps <= STEPS_PER_DISPATCH && steps * slices >= 1_000_000);
        // Enough tiles to fill a GPU, or a short reduction: whole.
        assert_eq!(split(FEW_TILES, 1_000_000), None);
        assert_eq!(split(1, SLICE_STEPS), None);
        // Partial sums beyond their cap: whole, in ordered dispatches.
        assert_eq!(split(FEW_TILES - 1, 100_000_000), None);
    }
}
