//! Running a matrix-product plan on `products.c`'s kernels or the `gemm` crate.
//!
//! How a plan runs is worked out once, when its routine loads ([`Prepared`]): a run only moves
//! the operands' starts by the static indices and calls the kernels, which matters for the many
//! small products of a small model's training step.
//!
//! Every operand's flat offset is linear in the plan's loops. Within each operand, the loops of a
//! group (rows, columns, reduction) merge into one strided dimension when their strides nest
//! (each outer stride is the inner stride times the inner range); an operand whose groups do not
//! merge (a transposed-and-reshaped view, a convolution's windows) is read where it lies through
//! tables of its rows' and columns' offsets by `products.c`'s f32 kernels, and is otherwise first
//! copied into a packed matrix for the `gemm` crate; a result that does not merge is computed
//! packed and scattered back (unless moving its outermost row or column loops outside, among the
//! batch loops, lets it merge). The batch loops run outside, in parallel when there are enough
//! of them. f32 products run on one of `products.c`'s kernels where the target and CPU allow
//! ([`F32Product`]), else on the crate.

use std::collections::HashMap;
use std::sync::Mutex;

use half::f16;
use rcannl_ir::{GemmPlan, Index, LoopVar, NodeId, PlanOperand, Precision, Routine, Symbol, Var};

mod kernels;

use super::{Target, pool};
use kernels::{Element, Kernels, Matrix, Side, pack, product};

/// One operand as the product sees it.
type Operand = PlanOperand;

/// Where the operand starts, as the run's static index values (those of `order`) move it.
fn start(operand: &Operand, order: &[Symbol]) -> Start {
    Start {
        offset: operand.constant,
        statics: operand
            .statics
            .iter()
            .filter_map(|(symbol, c)| Some((order.iter().position(|s| s == symbol)?, *c)))
            .collect(),
    }
}

/// The order a group's loops are merged and packed in, the same for both operands that share the
/// group (so that position `t` of the merged dimension is the same loop values in both): the
/// order of one operand's strides, chosen so that as many of the two as possible need no copy.
/// Loops of one trip are left out.
fn group_order(group: &[(LoopVar, usize)], operands: [&Operand; 2]) -> Vec<(LoopVar, usize)> {
    let loops: Vec<(LoopVar, usize)> = group.iter().copied().filter(|(_, r)| *r > 1).collect();
    let mut best: Option<(usize, Vec<(LoopVar, usize)>)> = None;
    for by in operands {
        let mut order = loops.clone();
        order.sort_by_key(|(var, _)| std::cmp::Reverse(by.coefficient(*var).unsigned_abs()));
        let in_place = operands
            .iter()
            .filter(|o| o.merged(&order).is_some())
            .count();
        if best.as_ref().is_none_or(|(count, _)| in_place > *count) {
            best = Some((in_place, order));
        }
    }
    best.map(|(_, order)| order).unwrap_or_default()
}

/// A buffer's start, shared by the threads of one product (which write disjoint cells).
#[derive(Clone, Copy)]
struct Base(*mut u8);

// SAFETY: the batch elements run at once write disjoint cells of `c` and only read `a` and `b`.
unsafe impl Send for Base {}
// SAFETY: as above.
unsafe impl Sync for Base {}

impl Base {
    /// The start as cells of `T` (a method, so that closures capture the whole `Base`, which
    /// crosses into other threads, not its field, which does not).
    fn cells<T>(self) -> *mut T {
        self.0.cast()
    }
}

/// The fewest multiply-adds each product keeps when a result's outer loops are moved among the
/// batch loops to make it nest: fewer, larger products and one scatter beat many tiny ones.
const MIN_BATCHED_WORK: usize = 1 << 15;

/// Where an operand starts: a constant offset, plus each static index's value (by its position
/// among the routine's static indices) times its coefficient.
#[derive(Debug)]
struct Start {
    offset: i64,
    statics: Vec<(usize, i64)>,
}

impl Start {
    fn at(&self, statics: &[i64]) -> i64 {
        self.statics
            .iter()
            .fold(self.offset, |at, &(position, c)| at + c * statics[position])
    }
}

/// How the product reads an operand: with a stride along its rows and one along its columns, by
/// our f32 kernels through a table of offsets for a side whose loops do not merge, or from a
/// packed copy made of the cells at these (stride, range) loops.
#[derive(Debug)]
enum Layout {
    Strided(isize, isize),
    Sides([Side; 2]),
    Packed(Vec<(i64, usize)>),
}

impl Layout {
    fn of(
        x: &Operand,
        rows: &[(LoopVar, usize)],
        columns: &[(LoopVar, usize)],
        gathers: bool,
    ) -> Layout {
        if let (Some((rs, _)), Some((cs, _))) = (x.merged(rows), x.merged(columns)) {
            return Layout::Strided(rs, cs);
        }
        if gathers {
            let side = |group: &[(LoopVar, usize)]| match x.merged(group) {
                Some((stride, _)) => Side {
                    stride,
                    table: None,
                },
                None => Side {
                    stride: 0,
                    table: Some(x.offsets(group)),
                },
            };
            return Layout::Sides([side(rows), side(columns)]);
        }
        Layout::Packed(x.strides(&[rows, columns].concat()))
    }

    /// The operand from `start`, `columns` wide when it is packed (into `copy`).
    ///
    /// # Safety
    /// Every cell the layout addresses from `start` must lie inside its buffer.
    unsafe fn matrix<T: Element>(
        &self,
        start: *mut T,
        columns: usize,
        copy: &mut Vec<T>,
    ) -> Matrix<T> {
        match self {
            Layout::Strided(rs, cs) => Matrix::strided(start, *rs, *cs),
            Layout::Sides(sides) => Side::matrix(start, sides),
            Layout::Packed(loops) => {
                // SAFETY: the caller's contract.
                *copy = unsafe { pack::<T>(start, loops) };
                Matrix::row_major(copy.as_mut_ptr(), columns)
            }
        }
    }
}

/// How the product writes its result: in place with a row and a column stride, or computed
/// packed and added back at these offsets of its rows and, run by run, of its columns.
#[derive(Debug)]
enum Destination {
    Strided(isize, isize),
    Scattered(Vec<i64>, Vec<Run>),
}

/// Columns of a scattered result that lie next to each other in `c` (a head's features, when
/// the heads' columns are apart): `len` columns from column `from` on, at offset `offset` on.
#[derive(Debug)]
struct Run {
    from: usize,
    len: usize,
    offset: i64,
}

/// `offsets` (the columns' offsets, in order) as runs of consecutive cells.
fn runs(offsets: &[i64]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (column, &offset) in offsets.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if run.offset + run.len as i64 == offset => run.len += 1,
            _ => runs.push(Run {
                from: column,
                len: 1,
                offset,
            }),
        }
    }
    runs
}

/// Rows of a scattered result below which one thread computes and scatters them all.
const MIN_SCATTERED_ROWS: usize = 32;

/// A plan ready to run: everything about it that does not change from run to run, worked out
/// once when its routine loads, so that a run only adds the static indices to the operands'
/// starts and calls the kernels.
#[derive(Debug)]
pub(crate) struct Prepared {
    precision: Precision,
    /// The multiply-adds it does.
    work: usize,
    /// The positions of `c`, `a` and `b` among the routine's buffers.
    buffers: [usize; 3],
    /// `c`'s cells.
    len: usize,
    /// Some loop runs over an empty axis: no product term exists, only the fill happens.
    empty: bool,
    /// Whether `c` is zeroed before the products add into it.
    fill_first: bool,
    /// Whether the products overwrite the cells they write rather than adding to them.
    overwrite: bool,
    /// `a`'s buffer dims.
    a_dims: Vec<usize>,
    /// The zero margins `a`'s widened copy adds around its axes: none but for a gathering plan.
    a_margins: Vec<(usize, usize)>,
    /// Where `c`, `a` and `b` start.
    starts: [Start; 3],
    m: usize,
    n: usize,
    k: usize,
    lhs: Layout,
    rhs: Layout,
    dst: Destination,
    /// The offsets in `c`, `a` and `b` of every product of the batch.
    batches: Vec<[i64; 3]>,
    widened: Widened,
    /// The kernels the layouts were chosen for.
    native: Native,
}

impl Prepared {
    /// `plan` of `routine`, whose buffers' positions are `buffers` and whose static indices
    /// come in `statics`' order, run with the kernels of `native`.
    ///
    /// # Panics
    /// If a node of the plan has no buffer among `buffers` (the code generator gives each one).
    pub(crate) fn new(
        plan: &GemmPlan,
        routine: &Routine,
        buffers: &HashMap<NodeId, usize>,
        statics: &[Symbol],
        native: &Native,
    ) -> Prepared {
        let position = |id: NodeId| *buffers.get(&id).expect("a product's nodes have buffers");
        let loops = || {
            plan.batch
                .iter()
                .chain(&plan.m)
                .chain(&plan.n)
                .chain(&plan.k)
        };
        let work = loops().fold(1usize, |total, (_, range)| total.saturating_mul(*range));
        let precision = routine.nodes[&plan.c].precision;
        let len = routine.nodes[&plan.c].buffer_len();
        let dims = |id: NodeId| routine.nodes[&id].buffer_dims();
        let a_dims = dims(plan.a);
        let wide_dims = if plan.a_margins.is_empty() {
            a_dims.clone()
        } else {
            widened_dims(&a_dims, &plan.a_margins)
        };
        let c = Operand::new(&plan.c_index, &dims(plan.c));
        let a = Operand::new(&plan.a_index, &wide_dims);
        let b = Operand::new(&plan.b_index, &dims(plan.b));
        let size = |group: &[(LoopVar, usize)]| group.iter().map(|(_, r)| r).product::<usize>();
        let depth = group_order(&plan.k, [&a, &b]);
        let k = size(&depth);
        // A result whose rows (or columns) do not nest — a convolution's batch axis sits outside
        // its channels — is computed in place all the same when its outermost row (or column)
        // loops run outside as batch loops, as long as each product stays large.
        let (mut batch, mut row_loops, mut column_loops) =
            (plan.batch.clone(), plan.m.clone(), plan.n.clone());
        let (rows, columns) = loop {
            let rows = group_order(&row_loops, [&c, &a]);
            let columns = group_order(&column_loops, [&c, &b]);
            let group = match (c.merged(&rows), c.merged(&columns)) {
                (Some(_), Some(_)) => break (rows, columns),
                (None, _) => (&mut row_loops, &rows),
                (Some(_), None) => (&mut column_loops, &columns),
            };
            let outermost = group.1[0].0;
            let smaller = size(&rows) * size(&columns) * k / group.1[0].1;
            if group.1.len() < 2 || smaller < MIN_BATCHED_WORK {
                break (rows, columns);
            }
            group.0.retain(|(var, _)| *var != outermost);
            batch.extend(
                plan.m
                    .iter()
                    .chain(&plan.n)
                    .filter(|(var, _)| *var == outermost),
            );
        };
        // Batching outer loops pays only when the products then write `c` in place: else each
        // product of the batch is scattered in turn (repacking an operand the batch loops may
        // not even move), where one larger product is scattered once.
        let (batch, rows, columns) = if c.merged(&rows).is_some() && c.merged(&columns).is_some() {
            (batch, rows, columns)
        } else {
            (
                plan.batch.clone(),
                group_order(&plan.m, [&c, &a]),
                group_order(&plan.n, [&c, &b]),
            )
        };
        let (m, n) = (size(&rows), size(&columns));
        let dst = match (c.merged(&rows), c.merged(&columns)) {
            (Some((rs, _)), Some((cs, _))) => Destination::Strided(rs, cs),
            _ => Destination::Scattered(c.offsets(&rows), runs(&c.offsets(&columns))),
        };
        // A result the products write, in place or scattered, every cell once, is overwritten by
        // them: a fill first would only cost a pass over memory.
        let overwritten = c.covers(&[&plan.batch[..], &plan.m, &plan.n].concat(), len);
        // Our f32 kernels read an operand whose loops do not merge where it lies, through
        // tables of its rows' and columns' offsets, so that no packed copy of it is made.
        let gathers = m > 1 && n > 1 && precision == Precision::F32 && native.sgemm.is_some();
        let batches = c
            .offsets(&batch)
            .into_iter()
            .zip(a.offsets(&batch))
            .zip(b.offsets(&batch))
            .map(|((c, a), b)| [c, a, b])
            .collect();
        Prepared {
            precision,
            work,
            buffers: [position(plan.c), position(plan.a), position(plan.b)],
            len,
            empty: loops().any(|&(_, range)| range == 0),
            fill_first: plan.zero_first && !overwritten,
            overwrite: plan.zero_first,
            a_dims,
            a_margins: plan.a_margins.clone(),
            starts: [start(&c, statics), start(&a, statics), start(&b, statics)],
            m,
            n,
            k,
            lhs: Layout::of(&a, &rows, &depth, gathers),
            rhs: Layout::of(&b, &depth, &columns, gathers),
            dst,
            batches,
            widened: Widened::default(),
            native: *native,
        }
    }

    /// The multiply-adds one run does.
    pub(crate) fn work(&self) -> usize {
        self.work
    }

    /// Runs the product over the routine's buffers, given in `pointers` (each node's first cell,
    /// in the order [`Prepared::new`] was given), with these values of the static indices.
    ///
    /// # Safety
    /// The buffers must have the dims and precision the routine gives their nodes, and the
    /// plan's indices must stay inside them (the code generator checks this).
    pub(crate) unsafe fn run(&self, pointers: &[*mut u8], statics: &[i64], threads: usize) {
        let kernels = Kernels {
            native: self.native,
            threads,
        };
        let bases = self.buffers.map(|position| Base(pointers[position]));
        // SAFETY: passed on from the caller.
        unsafe {
            match self.precision {
                Precision::F32 => self.run_typed::<f32>(bases, statics, kernels),
                Precision::F64 => self.run_typed::<f64>(bases, statics, kernels),
                Precision::F16 => self.run_typed::<f16>(bases, statics, kernels),
                other => {
                    unreachable!("the plan's precision is a float the gemm crate runs: {other}")
                }
            }
        }
    }

    unsafe fn run_typed<T: Element>(
        &self,
        [c_base, a_base, b_base]: [Base; 3],
        statics: &[i64],
        kernels: Kernels,
    ) {
        let threads = kernels.threads;
        if self.fill_first || (self.empty && self.overwrite) {
            // In stretches on the threads: a whole image's gradient is megabytes, and the other
            // threads would wait.
            let parts = threads.min(self.len / MIN_FILL_PART).max(1);
            pool::for_each_part(parts, &|part| {
                let stretch = pool::stretch(self.len, parts, part);
                // SAFETY: `c` holds `len` cells of `T`; the stretches are disjoint.
                unsafe {
                    let start = c_base.cells::<T>().add(stretch.start);
                    std::slice::from_raw_parts_mut(start, stretch.len()).fill(T::ZERO);
                }
            });
        }
        if self.empty {
            return;
        }
        // A gathering plan reads `a` from a copy widened by zeros, kept from run to run (and
        // locked while the product reads it).
        let mut copy;
        let a_base = if self.a_margins.is_empty() {
            a_base
        } else {
            copy = self
                .widened
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let a = a_base.0.cast::<T>();
            // SAFETY: `a` holds the cells of its buffer dims (the caller's contract).
            Base(unsafe { widen(a, &self.a_dims, &self.a_margins, &mut copy, threads) }.cast())
        };
        let [c_start, a_start, b_start] = self.starts.each_ref().map(|start| start.at(statics));
        let (m, n, k) = (self.m, self.n, self.k);
        let one_product = |[c_at, a_at, b_at]: [i64; 3], threads: usize| {
            // Whole `Base`s, not their raw-pointer fields, cross into other threads.
            let (c_base, a_base, b_base) = (c_base, a_base, b_base);
            // SAFETY: the offsets stay inside the buffers (the caller's contract); packed copies
            // are owned here.
            unsafe {
                let a_ptr = a_base.0.cast::<T>().offset((a_start + a_at) as isize);
                let b_ptr = b_base.0.cast::<T>().offset((b_start + b_at) as isize);
                let c_ptr = c_base.0.cast::<T>().offset((c_start + c_at) as isize);
                let (mut packed_a, mut packed_b) = (Vec::new(), Vec::new());
                let lhs = self.lhs.matrix(a_ptr, k, &mut packed_a);
                let rhs = self.rhs.matrix(b_ptr, n, &mut packed_b);
                match &self.dst {
                    Destination::Strided(rs, cs) => {
                        let dst = Matrix::strided(c_ptr, *rs, *cs);
                        product(
                            m,
                            n,
                            k,
                            dst,
                            !self.overwrite,
                            lhs,
                            rhs,
                            kernels.split(threads),
                        );
                    }
                    Destination::Scattered(rows, runs) => {
                        // Without a fill first (every cell is written once), the sums are
                        // stored; otherwise added.
                        let store = self.overwrite && !self.fill_first;
                        let c_cells = Base(c_ptr.cast());
                        // Each thread computes a stretch of the rows packed and scatters it
                        // while it is in cache; the rows' cells are distinct (the plan's
                        // result index is injective), so the stretches write apart.
                        let split = threads.min(m / MIN_SCATTERED_ROWS).max(1);
                        pool::for_each_part(split, &|part| {
                            let stretch = pool::stretch(m, split, part);
                            let mut packed = vec![T::ZERO; stretch.len() * n];
                            let dst = Matrix::row_major(packed.as_mut_ptr(), n);
                            let lhs = lhs.rows_from(stretch.start);
                            let c = c_cells.cells::<T>();
                            // The stretch's rows of `lhs`; the cells scattered into
                            // lie inside `c` (the caller's contract) and no other stretch
                            // writes them.
                            product(stretch.len(), n, k, dst, false, lhs, rhs, kernels.split(1));
                            for (sums, row) in packed.chunks_exact(n).zip(&rows[stretch]) {
                                for run in runs {
                                    let at = c.offset((row + run.offset) as isize);
                                    let cells = std::slice::from_raw_parts_mut(at, run.len);
                                    let sums = &sums[run.from..run.from + run.len];
                                    if store {
                                        cells.copy_from_slice(sums);
                                    } else {
                                        for (cell, sum) in cells.iter_mut().zip(sums) {
                                            *cell = cell.add(*sum);
                                        }
                                    }
                                }
                            }
                        });
                    }
                }
            }
        };
        if self.batches.len() >= 2 * threads {
            let batches = self.batches.len();
            pool::for_each_part(threads, &|part| {
                for offsets in &self.batches[pool::stretch(batches, threads, part)] {
                    one_product(*offsets, 1);
                }
            });
        } else {
            for offsets in &self.batches {
                one_product(*offsets, threads);
            }
        }
    }
}

/// A buffer's dims with `margins` added around its axes.
fn widened_dims(dims: &[usize], margins: &[(usize, usize)]) -> Vec<usize> {
    dims.iter()
        .zip(margins)
        .map(|(dim, (before, after))| dim + before + after)
        .collect()
}

/// Where a product keeps the copy of its operand widened by zero margins, between runs: its
/// margins are written once, when it is made.
#[derive(Debug, Default)]
pub(crate) struct Widened(Mutex<Vec<u64>>);

/// The fewest cells a thread zeroes or copies for a product: fewer cost more to hand over than
/// to do.
const MIN_FILL_PART: usize = 1 << 14;

/// Copies the buffer of `dims` at `start` inside `margins` of zeros around its axes, into
/// `copy` (made the size of the widened buffer, zeroed, if it is not yet), in stretches on up to
/// `threads` threads: the copy's start.
///
/// # Safety
/// `start` must hold the cells of `dims`; `copy` must have been made by this function for the
/// same `dims`, `margins` and `T`, or be empty.
unsafe fn widen<T: Element>(
    start: *const T,
    dims: &[usize],
    margins: &[(usize, usize)],
    copy: &mut Vec<u64>,
    threads: usize,
) -> *mut T {
    let wide = widened_dims(dims, margins);
    let words = (wide.iter().product::<usize>() * std::mem::size_of::<T>()).div_ceil(8);
    if copy.len() != words {
        // Zero bits are zero in every element type.
        *copy = vec![0; words];
    }
    let target_start = copy.as_mut_ptr().cast::<T>();
    if dims.is_empty() {
        // SAFETY: a buffer without axes holds one cell, and so does the copy.
        unsafe { *target_start = *start };
        return target_start;
    }
    if dims.contains(&0) {
        return target_start;
    }
    // The cells are copied in runs: the innermost axes without margins, and the one around
    // them, lie in one stretch of both the buffer and the copy (an image's rows of pixels with
    // all their channels, when only its height and width are padded).
    let inner = margins
        .iter()
        .rposition(|&margin| margin != (0, 0))
        .unwrap_or(0);
    let (outer, inner_dims) = dims.split_at(inner);
    let run: usize = inner_dims.iter().product();
    let inner_wide: usize = wide[inner + 1..].iter().product();
    let runs: usize = outer.iter().product();
    let (source_start, copy_start) = (Base(start.cast_mut().cast()), Base(target_start.cast()));
    let parts = threads.min(runs * run / MIN_FILL_PART).max(1);
    pool::for_each_part(parts, &|part| {
        let (source_start, copy_start) = (source_start, copy_start);
        for index in pool::stretch(runs, parts, part) {
            // The run's position over the outer axes, the last moving fastest.
            let mut rest = index;
            let mut target = 0;
            let mut scale = wide[inner] * inner_wide;
            for ((dim, (before, _)), wide) in outer.iter().zip(margins).zip(&wide).rev() {
                target += (rest % dim + before) * scale;
                rest /= dim;
                scale *= wide;
            }
            target += margins[inner].0 * inner_wide;
            // SAFETY: run `index` lies in the buffer (the caller's contract); `target` is a run
            // inside the copy's margins, and no other run's.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    source_start.cells::<T>().add(index * run),
                    copy_start.cells::<T>().add(target),
                    run,
                );
            }
        }
    });
    target_start
}

/// Whether every access of `plan` stays inside its operand's buffer (its widened copy for `a`),
/// axis by axis, over its loops' ranges; `false` for indices with static terms.
pub(crate) fn in_bounds(plan: &GemmPlan, routine: &Routine) -> bool {
    let ranges: HashMap<LoopVar, usize> = [&plan.batch, &plan.m, &plan.n, &plan.k]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let within = |index: &[Index], dims: &[usize]| {
        index.len() == dims.len()
            && index.iter().zip(dims).all(|(axis, &dim)| {
                let (mut low, mut high) = (axis.offset as i128, axis.offset as i128);
                for (coefficient, var) in &axis.terms {
                    let Var::Loop(var) = var else {
                        return false;
                    };
                    let Some(&range) = ranges.get(var) else {
                        return false;
                    };
                    let reach = *coefficient as i128 * (range as i128 - 1);
                    if reach < 0 {
                        low += reach;
                    } else {
                        high += reach;
                    }
                }
                ranges.values().any(|&range| range == 0) || (low >= 0 && high < dim as i128)
            })
    };
    let dims = |id: NodeId| routine.nodes.get(&id).map(|node| node.buffer_dims());
    let (Some(c), Some(a), Some(b)) = (dims(plan.c), dims(plan.a), dims(plan.b)) else {
        return false;
    };
    let a = if plan.a_margins.is_empty() {
        a
    } else if plan.a_margins.len() == a.len() {
        widened_dims(&a, &plan.a_margins)
    } else {
        return false;
    };
    within(&plan.c_index, &c) && within(&plan.a_index, &a) && within(&plan.b_index, &b)
}

/// `rc_sgemm` (and `rc_sgemm_avx2`) of `products.c`: `c += a·b` in f32 (`c = a·b` when the
/// last argument is nonzero), each matrix with row and column strides, `a` and `b` each also
/// with a table of row and of column offsets that replaces the stride where it is not null;
/// nonzero when it could not allocate its packing buffers (nothing is then written).
pub(crate) type Sgemm = unsafe extern "C" fn(
    i64,
    i64,
    i64,
    *const f32,
    i64,
    i64,
    *const i64,
    *const i64,
    *const f32,
    i64,
    i64,
    *const i64,
    *const i64,
    *mut f32,
    i64,
    i64,
    i32,
) -> i32;

/// Which kernel runs f32 matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F32Product {
    /// `rc_sgemm` of `products.c` (14×32 tiles): where the flags enable AVX-512.
    Avx512,
    /// `rc_sgemm_avx2` of `products.c` (6×16 tiles, the same sums as [`F32Product::Avx512`]):
    /// on x86-64 where the CPU has AVX2 and FMA and the flags do not enable AVX-512.
    Avx2,
    /// The `gemm` crate: everywhere else.
    GemmCrate,
}

impl F32Product {
    /// The rows and columns of the kernel's register tile (`None` for the crate, whose blocking
    /// is its own): a product split among threads is cut at multiples of them, so that no part
    /// ends in a tile cut short and a panel of columns that lies in place stays whole.
    pub(crate) fn tile(self) -> Option<(usize, usize)> {
        match self {
            F32Product::Avx512 => Some((14, 32)),
            F32Product::Avx2 => Some((6, 16)),
            F32Product::GemmCrate => None,
        }
    }

    /// The kernel for `target` on this `cpu`: AVX-512 where `rc_sgemm` was built
    /// (`avx512_built`: the flags enable AVX-512), else AVX2 on x86-64 where this CPU has AVX2
    /// and FMA, whatever level the flags choose (the kernel is compiled for AVX2 by a function
    /// attribute, and called only on such a CPU), else the crate. A `forced` kernel (tests and
    /// benchmarks comparing kernels on one machine) is taken instead, if this CPU and build can
    /// run it; the error says why not.
    pub(crate) fn choose(
        target: &Target,
        cpu: &[&str],
        avx512_built: bool,
        forced: Option<F32Product>,
    ) -> Result<F32Product, String> {
        let avx2 =
            |extensions: &[&str]| extensions.contains(&"avx2") && extensions.contains(&"fma");
        let Some(forced) = forced else {
            return Ok(if avx512_built {
                F32Product::Avx512
            } else if target.x86_64 && avx2(cpu) {
                F32Product::Avx2
            } else {
                F32Product::GemmCrate
            });
        };
        match forced {
            F32Product::Avx512 if !avx512_built => Err(format!(
                "the AVX-512 f32 product was asked for, but {} does not enable AVX-512",
                target.flags.join(" ")
            )),
            F32Product::Avx2 if !target.x86_64 => {
                Err("the AVX2 f32 product was asked for, but the target is not x86-64".to_owned())
            }
            F32Product::Avx2 if !avx2(cpu) => {
                Err("the AVX2 f32 product was asked for, but this CPU lacks AVX2 or FMA".to_owned())
            }
            chosen => Ok(chosen),
        }
    }
}

/// The kernels of `products.c`, where it was built: our f32 matrix product (where
/// [`F32Product::choose`] picks one of ours), dot products and scaled-column sums.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Native {
    /// The kernel `sgemm` is (`None` where `products.c` was not loaded).
    pub(crate) f32_product: Option<F32Product>,
    pub(crate) sgemm: Option<Sgemm>,
    pub(crate) sdot: Option<Dot<f32>>,
    pub(crate) ddot: Option<Dot<f64>>,
    pub(crate) sadd_scaled: Option<AddScaled<f32>>,
    pub(crate) dadd_scaled: Option<AddScaled<f64>>,
}

/// `rc_sdot` and `rc_ddot` of `products.c`: the dot product of two contiguous vectors of the
/// given length.
pub(crate) type Dot<T> = unsafe extern "C" fn(i64, *const T, *const T) -> T;
/// `rc_sadd_scaled` and `rc_dadd_scaled`: for `len` sums, `count` columns starting `stride`
/// apart and their scales `scale_stride` apart, `sums[i] += column_j[i]·scale_j`, column by
/// column.
pub(crate) type AddScaled<T> = unsafe extern "C" fn(i64, i64, *mut T, *const T, i64, *const T, i64);

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::on_sgemm;

    fn target(x86_64: bool, extensions: &[&'static str]) -> Target {
        Target {
            compiler: "cc".to_owned(),
            flags: vec!["-O3".to_owned()],
            extensions: extensions.to_vec(),
            x86_64,
            fingerprint: String::new(),
        }
    }

    #[test]
    fn the_f32_product_follows_the_flags_and_forcing_checks_the_cpu() {
        use F32Product::*;
        let v3 = ["avx", "avx2", "fma", "bmi2", "f16c"];
        let v4 = [
            &v3[..],
            &["avx512f", "avx512bw", "avx512dq", "avx512vl"][..],
        ]
        .concat();
        let choose = |target: &Target, cpu: &[&str], built, forced| {
            F32Product::choose(target, cpu, built, forced)
        };
        assert_eq!(choose(&target(true, &v4), &v4, true, None), Ok(Avx512));
        assert_eq!(choose(&target(true, &v3), &v4, false, None), Ok(Avx2));
        // At any x86-64 level, the AVX2 kernel runs where the CPU has AVX2 and FMA, and only
        // there.
        assert_eq!(choose(&target(true, &[]), &v4, false, None), Ok(Avx2));
        assert_eq!(choose(&target(true, &[]), &v3, false, None), Ok(Avx2));
        assert_eq!(
            choose(&target(true, &[]), &["avx", "avx2"], false, None),
            Ok(GemmCrate)
        );
        assert_eq!(
            choose(&target(true, &[]), &["avx", "fma"], false, None),
            Ok(GemmCrate)
        );
        assert_eq!(choose(&target(true, &[]), &[], false, None), Ok(GemmCrate));
        assert_eq!(choose(&target(false, &[]), &v4, false, None), Ok(GemmCrate));
        // Forced: AVX2 at any x86-64 level the CPU runs it on, never where it cannot.
        assert_eq!(choose(&target(true, &[]), &v3, false, Some(Avx2)), Ok(Avx2));
        assert_eq!(choose(&target(true, &v4), &v4, true, Some(Avx2)), Ok(Avx2));
        assert_eq!(
            choose(&target(true, &v4), &v4, true, Some(GemmCrate)),
            Ok(GemmCrate)
        );
        let refused = |result: Result<F32Product, String>, says: &str| {
            let error = result.expect_err("refused");
            assert!(error.contains(says), "{error}");
        };
        refused(
            choose(&target(true, &[]), &["avx2"], false, Some(Avx2)),
            "lacks AVX2 or FMA",
        );
        refused(
            choose(&target(false, &[]), &[], false, Some(Avx2)),
            "not x86-64",
        );
        refused(
            choose(&target(true, &v3), &v4, false, Some(Avx512)),
            "does not enable AVX-512",
        );
    }

    /// A matrix's (row, column) strides, row-major or column-major.
    fn strides(rows: usize, columns: usize, column_major: bool) -> (i64, i64) {
        if column_major {
            (1, rows.max(1) as i64)
        } else {
            (columns.max(1) as i64, 1)
        }
    }

    /// `products.c`'s AVX2 kernel, built for this machine, beside the library that holds it;
    /// `None`, after saying so, on a CPU without AVX2 and FMA.
    fn avx2_sgemm() -> Option<(Option<std::sync::Arc<libloading::Library>>, Sgemm)> {
        let cpu = super::super::cpu_extensions();
        if !(cpu.contains(&"avx2") && cpu.contains(&"fma")) {
            eprintln!("this CPU lacks AVX2 or FMA: the AVX2 kernel is not run");
            return None;
        }
        let compiler = super::super::Compiler::find()
            .expect("a C compiler (cc or $CC)")
            .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
            .with_f32_product(F32Product::Avx2);
        let (library, native) = compiler.products().unwrap();
        Some((library, native.sgemm.expect("the AVX2 kernel")))
    }

    #[test]
    fn the_avx2_kernel_handles_single_cells_empty_sums_and_every_layout() {
        let Some((_library, sgemm)) = avx2_sgemm() else {
            return;
        };
        // Quarter-integers: every sum is exact, so the naive sum below is the kernel's too.
        let values = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 7 + seed * 3) % 17) as f32 / 4.0 - 2.0)
                .collect()
        };
        for (m, n, k) in [
            (1, 1, 1),
            (1, 1, 0),
            (3, 2, 0),
            (1, 20, 3),
            (20, 1, 3),
            (7, 17, 385),
            (9, 45, 7),
            (12, 32, 400),
        ] {
            for layout in 0..8 {
                let [a_t, b_t, c_t] = [1, 2, 4].map(|bit| layout & bit != 0);
                let ((rsa, csa), (rsb, csb)) = (strides(m, k, a_t), strides(k, n, b_t));
                let (rsc, csc) = strides(m, n, c_t);
                let (a, b) = (values(m * k, 1), values(k * n, 2));
                for overwrite in [false, true] {
                    let mut c = values(m * n, 3);
                    let mut want = c.clone();
                    for i in 0..m as i64 {
                        for j in 0..n as i64 {
                            let cell = (i * rsc + j * csc) as usize;
                            let sum: f32 = (0..k as i64)
                                .map(|p| {
                                    a[(i * rsa + p * csa) as usize]
                                        * b[(p * rsb + j * csb) as usize]
                                })
                                .sum();
                            want[cell] = if overwrite { sum } else { want[cell] + sum };
                        }
                    }
                    let strided = |start: *mut f32, rs: i64, cs: i64| {
                        Matrix::strided(start, rs as isize, cs as isize)
                    };
                    // SAFETY: every matrix holds the cells its sizes and strides address.
                    let failed = unsafe {
                        on_sgemm(
                            sgemm,
                            m,
                            n,
                            k,
                            strided(c.as_mut_ptr(), rsc, csc),
                            overwrite,
                            strided(a.as_ptr().cast_mut(), rsa, csa),
                            strided(b.as_ptr().cast_mut(), rsb, csb),
                        )
                    };
                    assert_eq!(failed, 0);
                    assert_eq!(
                        c, want,
                        "{m}x{n}x{k}, layout {layout}, overwrite {overwrite}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_small_result_of_a_long_sum_is_summed_in_parts_whatever_the_threads() {
        // A first convolution's kernel gradient (27 window cells by 16 channels over a batch's
        // pixels) is cut into parts; a large product and a short sum are not.
        assert_eq!(kernels::k_parts(27, 16, 32768), 16);
        assert_eq!(kernels::k_parts(16, 144, 2048), 2);
        assert_eq!(kernels::k_parts(16, 144, 2047), 1);
        assert_eq!(kernels::k_parts(1024, 1024, 1 << 20), 1);
        let Some((_library, sgemm)) = avx2_sgemm() else {
            return;
        };
        let (m, n, k) = (27, 16, 5000);
        // Quarter-integers: every sum is exact in f32, so it does not depend on the parts; odd
        // thirds: it does, on their order.
        let exact = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 7 + seed * 3) % 17) as f32 / 4.0 - 2.0)
                .collect()
        };
        let inexact = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 11 + seed * 5) % 29) as f32 / 3.0 - 4.7)
                .collect()
        };
        for on_sgemm in [true, false] {
            let native = Native {
                sgemm: on_sgemm.then_some(sgemm),
                ..Native::default()
            };
            for column_major in [false, true] {
                let (rsc, csc) = strides(m, n, column_major);
                let (a, b) = (exact(m * k, 1), exact(k * n, 2));
                // A's columns and B's rows are the sum's terms, k apart and n apart.
                for read_dst in [false, true] {
                    let start = exact(m * n, 3);
                    let mut want = start.clone();
                    for i in 0..m {
                        for j in 0..n {
                            let sum: f32 = (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum();
                            let cell = i * rsc as usize + j * csc as usize;
                            want[cell] = if read_dst { want[cell] + sum } else { sum };
                        }
                    }
                    let run = |a: &[f32], b: &[f32], threads: usize| {
                        let mut c = start.clone();
                        pool::with_team(threads, |threads| {
                            // SAFETY: every matrix holds the cells its sizes and strides
                            // address.
                            unsafe {
                                product(
                                    m,
                                    n,
                                    k,
                                    Matrix::strided(c.as_mut_ptr(), rsc as isize, csc as isize),
                                    read_dst,
                                    Matrix::strided(a.as_ptr().cast_mut(), 1, m as isize),
                                    Matrix::strided(b.as_ptr().cast_mut(), n as isize, 1),
                                    Kernels { native, threads },
                                )
                            }
                        });
                        c
                    };
                    let context = format!("sgemm {on_sgemm}, column-major {column_major}");
                    assert_eq!(run(&a, &b, 2), want, "{context}, read {read_dst}");
                    let (a, b) = (inexact(m * k, 4), inexact(k * n, 5));
                    let one = run(&a, &b, 1);
                    assert_eq!(run(&a, &b, 2), one, "{context}");
                    assert_eq!(run(&a, &b, 3), one, "{context}");
                }
            }
        }
    }

    #[test]
    fn a_widened_copy_holds_the_buffer_inside_zero_margins_whatever_the_threads() {
        // A batch of images padded on height and width (runs of a row's pixels with their
        // channels), and a buffer padded on its last axis (runs of single cells).
        for (dims, margins) in [
            (vec![2, 40, 30, 16], vec![(0, 0), (2, 1), (1, 2), (0, 0)]),
            (vec![3, 5000], vec![(0, 0), (1, 3)]),
        ] {
            let wide = widened_dims(&dims, &margins);
            let cells: usize = dims.iter().product();
            let source: Vec<f32> = (0..cells).map(|i| i as f32 + 1.0).collect();
            let mut want = vec![0.0f32; wide.iter().product()];
            for (i, value) in source.iter().enumerate() {
                let (mut rest, mut at, mut scale) = (i, 0, 1);
                for ((dim, (before, _)), wide) in dims.iter().zip(&margins).zip(&wide).rev() {
                    at += (rest % dim + before) * scale;
                    rest /= dim;
                    scale *= wide;
                }
                want[at] = *value;
            }
            for threads in [1, 2, 3] {
                let mut copy = Vec::new();
                let got = pool::with_team(threads, |threads| {
                    // SAFETY: `source` holds the cells of `dims`; `copy` starts empty.
                    let start =
                        unsafe { widen(source.as_ptr(), &dims, &margins, &mut copy, threads) };
                    // SAFETY: the copy holds the widened buffer's cells.
                    unsafe { std::slice::from_raw_parts(start, want.len()) }.to_vec()
                });
                assert_eq!(got, want, "{dims:?} {margins:?} on {threads} threads");
            }
        }
    }

    #[test]
    fn the_avx2_kernel_reads_windows_of_short_runs_where_they_lie() {
        let Some((_library, sgemm)) = avx2_sgemm() else {
            return;
        };
        // A's rows and columns through tables, as attention's heads or a convolution's windows
        // are read: `groups` runs of `run` consecutive cells per row, the runs `gap` apart, the
        // rows `row_gap` apart (a run past the end of B's 16 columns and a last short panel of
        // rows included). Quarter-integers: every sum is exact in any order.
        for (m, n, groups, run) in [(13, 20, 3, 9), (25, 16, 8, 4), (7, 5, 5, 5), (6, 33, 2, 3)] {
            let (gap, row_gap) = (run + 2, groups * (run + 2) + 1);
            let k = groups * run;
            let rows: Vec<i64> = (0..m).map(|i| (i * row_gap) as i64).collect();
            let cols: Vec<i64> = (0..groups)
                .flat_map(|g| (0..run).map(move |e| (g * gap + e) as i64))
                .collect();
            let a: Vec<f32> = (0..m * row_gap)
                .map(|i| ((i * 7) % 17) as f32 / 4.0 - 2.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5) % 13) as f32 / 4.0 - 1.5)
                .collect();
            let mut c = vec![0.0f32; m * n];
            let tables = [&rows, &cols].map(|table| Side {
                stride: 0,
                table: Some(table.clone()),
            });
            // SAFETY: every offset the tables and strides give lies inside its matrix.
            let failed = unsafe {
                on_sgemm(
                    sgemm,
                    m,
                    n,
                    k,
                    Matrix::row_major(c.as_mut_ptr(), n),
                    true,
                    Side::matrix(a.as_ptr().cast_mut(), &tables),
                    Matrix::row_major(b.as_ptr().cast_mut(), n),
                )
            };
            assert_eq!(failed, 0);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k)
                        .map(|p| a[(rows[i] + cols[p]) as usize] * b[p * n + j])
                        .sum();
                    assert_eq!(
                        c[i * n + j],
                        want,
                        "{m}x{n}, runs of {run}: cell ({i}, {j})"
                    );
                }
            }
        }
    }
}
