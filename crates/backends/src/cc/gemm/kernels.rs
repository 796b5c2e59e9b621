//! The kernels a prepared matrix product runs: `products.c`'s where they were built, the
//! `gemm` crate's, and our own for skinny products (matrix-vector and dot products), over
//! strided or gathered matrices; and the packing of an operand whose loops do not merge.

use std::any::TypeId;
use std::sync::Mutex;

use half::f16;

use super::{AddScaled, Dot, F32Product, Native, Sgemm, pool};

/// The element types the product runs on.
pub(super) trait Element: Copy + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    /// Whether matrix-vector products and dot products run on [`skinny`]'s kernels (in this
    /// type's own arithmetic) rather than the general product.
    const SKINNY: bool;
    fn add(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    /// This type's dot product in `products.c`, if it has one and it was built.
    fn native_dot(_: &Native) -> Option<Dot<Self>> {
        None
    }
    /// This type's scaled-column sums in `products.c`, if it has them and they were built.
    fn native_add_scaled(_: &Native) -> Option<AddScaled<Self>> {
        None
    }
}

impl Element for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const SKINNY: bool = true;
    fn add(self, other: f32) -> f32 {
        self + other
    }
    fn mul(self, other: f32) -> f32 {
        self * other
    }
    fn native_dot(native: &Native) -> Option<Dot<f32>> {
        native.sdot
    }
    fn native_add_scaled(native: &Native) -> Option<AddScaled<f32>> {
        native.sadd_scaled
    }
}

impl Element for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const SKINNY: bool = true;
    fn add(self, other: f64) -> f64 {
        self + other
    }
    fn mul(self, other: f64) -> f64 {
        self * other
    }
    fn native_dot(native: &Native) -> Option<Dot<f64>> {
        native.ddot
    }
    fn native_add_scaled(native: &Native) -> Option<AddScaled<f64>> {
        native.dadd_scaled
    }
}

impl Element for f16 {
    const ZERO: f16 = f16::ZERO;
    const ONE: f16 = f16::ONE;
    // The `gemm` crate keeps its own f16 accumulation; a skinny f16 product stays with it.
    const SKINNY: bool = false;
    fn add(self, other: f16) -> f16 {
        self + other
    }
    fn mul(self, other: f16) -> f16 {
        self * other
    }
}

/// The products at hand, and how many threads a product may use.
#[derive(Clone, Copy)]
pub(super) struct Kernels {
    pub(super) native: Native,
    pub(super) threads: usize,
}

impl Kernels {
    pub(super) fn split(self, threads: usize) -> Kernels {
        Kernels { threads, ..self }
    }
}

/// `dst := lhs·rhs` (`dst += lhs·rhs` unless `overwrite`), `m×k` times `k×n`, on `sgemm`, one
/// of `products.c`'s f32 kernels: nonzero where the kernel could not allocate its panels (and
/// computed nothing).
///
/// # Safety
/// As [`product`]'s, and the three matrices hold `f32`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn on_sgemm<T>(
    sgemm: Sgemm,
    m: usize,
    n: usize,
    k: usize,
    dst: Matrix<T>,
    overwrite: bool,
    lhs: Matrix<T>,
    rhs: Matrix<T>,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        sgemm(
            m as i64,
            n as i64,
            k as i64,
            lhs.start.cast::<f32>(),
            lhs.rs as i64,
            lhs.cs as i64,
            lhs.rows,
            lhs.cols,
            rhs.start.cast::<f32>(),
            rhs.rs as i64,
            rhs.cs as i64,
            rhs.rows,
            rhs.cols,
            dst.start.cast::<f32>(),
            dst.rs as i64,
            dst.cs as i64,
            i32::from(overwrite),
        )
    }
}

/// A strided matrix: element `(i, j)` at `start + i·rs + j·cs`, or, where a table is given, at
/// `start + rows[i] + cols[j]` with that table's entry in place of the stride's multiple (an
/// operand whose loops do not merge, read where it lies by `products.c`'s kernels only).
pub(super) struct Matrix<T> {
    start: *mut T,
    rs: isize,
    cs: isize,
    rows: *const i64,
    cols: *const i64,
}

impl<T> Clone for Matrix<T> {
    fn clone(&self) -> Matrix<T> {
        *self
    }
}

impl<T> Copy for Matrix<T> {}

// SAFETY: the threads of one product read the operands and write disjoint stretches of the result.
unsafe impl<T> Send for Matrix<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Matrix<T> {}

impl<T> Matrix<T> {
    pub(super) fn strided(start: *mut T, rs: isize, cs: isize) -> Matrix<T> {
        Matrix {
            start,
            rs,
            cs,
            rows: std::ptr::null(),
            cols: std::ptr::null(),
        }
    }

    pub(super) fn row_major(start: *mut T, columns: usize) -> Matrix<T> {
        Matrix::strided(start, columns as isize, 1)
    }

    /// The matrix from row `i` on.
    pub(super) fn rows_from(self, i: usize) -> Matrix<T> {
        self.at(i, 0)
    }

    /// The matrix from row `i` and column `j` on.
    fn at(self, i: usize, j: usize) -> Matrix<T> {
        let (mut start, mut rows, mut cols) = (self.start, self.rows, self.cols);
        // SAFETY: only used for positions inside the matrix (and its tables).
        unsafe {
            if rows.is_null() {
                start = start.offset(i as isize * self.rs);
            } else {
                rows = rows.add(i);
            }
            if cols.is_null() {
                start = start.offset(j as isize * self.cs);
            } else {
                cols = cols.add(j);
            }
        }
        Matrix {
            start,
            rows,
            cols,
            ..self
        }
    }

    /// The same cells, rows and columns swapped.
    fn transposed(self) -> Matrix<T> {
        Matrix {
            start: self.start,
            rs: self.cs,
            cs: self.rs,
            rows: self.cols,
            cols: self.rows,
        }
    }

    fn gathered(&self) -> bool {
        !self.rows.is_null() || !self.cols.is_null()
    }
}

impl<T: Element> Matrix<T> {
    /// The `rows × columns` cells copied row-major: a gathered matrix for the `gemm` crate.
    ///
    /// # Safety
    /// Every cell must lie inside the buffer.
    unsafe fn packed(self, rows: usize, columns: usize) -> Vec<T> {
        (0..rows)
            .flat_map(|i| {
                // SAFETY: the caller's contract.
                (0..columns).map(move |j| unsafe { *self.at(i, j).start })
            })
            .collect()
    }
}

/// The least stretch of `k` a part of a product's sum takes when the sum is cut into parts.
const K_PART: usize = 1024;
/// The most parts a product's sum is cut into.
const MAX_K_PARTS: usize = 16;
/// The most cells of a result whose sum is cut into parts: each part sums into a copy of its own.
const MAX_K_PART_CELLS: usize = 1 << 14;

/// How many parts the sum of an `m×n` result over `k` terms is cut into: more than one only for a
/// small result of a long sum (a weight's gradient summed over a batch's pixels or tokens), whose
/// rows and columns are too few to share among threads evenly (sixteen columns of a first
/// convolution's three input channels are one tile of the kernel) while its terms are many. The
/// count depends on the shape alone, never on the threads, so that what a product computes does
/// not depend on how many threads run it.
pub(super) fn k_parts(m: usize, n: usize, k: usize) -> usize {
    if m * n <= MAX_K_PART_CELLS {
        (k / K_PART).clamp(1, MAX_K_PARTS)
    } else {
        1
    }
}

/// `dst := lhs·rhs` (or `dst += lhs·rhs` when `read_dst`), `m×k` times `k×n`, split into
/// `threads` stretches of rows (or of columns, when there are more of them) that run at once,
/// or, for a small result of a long sum ([`k_parts`]), into parts of the sum, each computed
/// into a copy of the result of its own and then added up in order.
/// The `gemm` crate's own threads scale poorly on two cores; each stretch here runs one thread.
///
/// # Safety
/// The three matrices must address valid cells for their sizes, `dst` none that the others read.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product<T: Element>(
    m: usize,
    n: usize,
    k: usize,
    dst: Matrix<T>,
    read_dst: bool,
    lhs: Matrix<T>,
    rhs: Matrix<T>,
    kernels: Kernels,
) {
    if dst.cs != 1 && dst.rs == 1 {
        // The result runs down its columns: its transpose, `rhsᵀ·lhsᵀ`, is stored row by row,
        // which is how the kernels write best.
        let t = Matrix::transposed;
        // SAFETY: the same cells, addressed transposed.
        unsafe { product(n, m, k, t(dst), read_dst, t(rhs), t(lhs), kernels) };
        return;
    }
    let threads = kernels.threads;
    if T::SKINNY && (m == 1 || n == 1) && !lhs.gathered() && !rhs.gathered() {
        // SAFETY: the caller's contract.
        unsafe { skinny(m, n, k, dst, read_dst, lhs, rhs, kernels) };
        return;
    }
    let run = |m: usize,
               n: usize,
               k: usize,
               dst: Matrix<T>,
               read_dst: bool,
               lhs: Matrix<T>,
               rhs: Matrix<T>| {
        if let Some(sgemm) = kernels
            .native
            .sgemm
            .filter(|_| TypeId::of::<T>() == TypeId::of::<f32>())
        {
            // SAFETY: the caller's contract, for the stretch; `T` is `f32`.
            let failed = unsafe { on_sgemm(sgemm, m, n, k, dst, !read_dst, lhs, rhs) };
            if failed == 0 {
                return;
            }
        }
        // The crate reads strided matrices only: gathered operands (where our kernel could not
        // allocate its panels) are copied first.
        let (packed_lhs, packed_rhs);
        let (lhs, rhs) = (
            if lhs.gathered() {
                // SAFETY: the caller's contract.
                packed_lhs = unsafe { lhs.packed(m, k) };
                Matrix::row_major(packed_lhs.as_ptr().cast_mut(), k)
            } else {
                lhs
            },
            if rhs.gathered() {
                // SAFETY: the caller's contract.
                packed_rhs = unsafe { rhs.packed(k, n) };
                Matrix::row_major(packed_rhs.as_ptr().cast_mut(), n)
            } else {
                rhs
            },
        );
        // SAFETY: the caller's contract, for the stretch.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.start,
                dst.cs,
                dst.rs,
                read_dst,
                lhs.start,
                lhs.cs,
                lhs.rs,
                rhs.start,
                rhs.cs,
                rhs.rs,
                T::ONE,
                T::ONE,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    };
    let parts = k_parts(m, n, k);
    if parts > 1 {
        let mut copies = vec![T::ZERO; parts * m * n];
        // Part p's copy is rows p·m.. of one row-major matrix; the parts write apart.
        let copy = Matrix::row_major(copies.as_mut_ptr(), n);
        let shared = threads.min(parts);
        pool::for_each_part(shared, &|share| {
            for part in pool::stretch(parts, shared, share) {
                let terms = pool::stretch(k, parts, part);
                let (lhs, rhs) = (lhs.at(0, terms.start), rhs.at(terms.start, 0));
                run(m, n, terms.len(), copy.rows_from(part * m), false, lhs, rhs);
            }
        });
        let (first, rest) = copies.split_at_mut(m * n);
        for later in rest.chunks_exact(m * n) {
            for (sum, term) in first.iter_mut().zip(later) {
                *sum = sum.add(*term);
            }
        }
        for (i, row) in first.chunks_exact(n).enumerate() {
            for (j, sum) in row.iter().enumerate() {
                // SAFETY: (i, j) lies in `dst` (the caller's contract).
                unsafe {
                    let cell = dst.at(i, j).start;
                    *cell = if read_dst { (*cell).add(*sum) } else { *sum };
                }
            }
        }
        return;
    }
    // Split along the longer side, at multiples of the kernel's tile on that side.
    let (tile_rows, tile_columns) = kernels
        .native
        .f32_product
        .and_then(F32Product::tile)
        .filter(|_| TypeId::of::<T>() == TypeId::of::<f32>())
        .unwrap_or((1, 1));
    let (side, tile) = if m >= n {
        (m, tile_rows)
    } else {
        (n, tile_columns)
    };
    let split = threads.min(side / 16).min(side.div_ceil(tile)).max(1);
    if split == 1 {
        run(m, n, k, dst, read_dst, lhs, rhs);
        return;
    }
    pool::for_each_part(split, &|part| {
        let stretch = tiled_stretch(side, tile, split, part);
        if m >= n {
            let (dst, lhs) = (dst.at(stretch.start, 0), lhs.at(stretch.start, 0));
            run(stretch.len(), n, k, dst, read_dst, lhs, rhs);
        } else {
            let (dst, rhs) = (dst.at(0, stretch.start), rhs.at(0, stretch.start));
            run(m, stretch.len(), k, dst, read_dst, lhs, rhs);
        }
    });
}

/// The stretch of `0..total` that part `part` of `parts` takes, cut at multiples of `tile` (the
/// last takes what is left of a tile): no part but the last ends in a tile cut short, and a
/// panel of columns read where it lies stays whole. Parts differ by at most one tile.
fn tiled_stretch(total: usize, tile: usize, parts: usize, part: usize) -> std::ops::Range<usize> {
    let tiles = pool::stretch(total.div_ceil(tile), parts, part);
    (tiles.start * tile).min(total)..(tiles.end * tile).min(total)
}

/// A product with one row or one column (a matrix-vector or dot product), which a blocked
/// matrix kernel would mostly spend on padding its tiles. A one-row product is computed as its
/// transpose, a one-column one; each result cell is a dot product along `k` (split into fixed
/// blocks run at once when there is only one cell, so the sum's order does not depend on the
/// thread count), unless the matrix runs down its columns in memory, when whole columns are added
/// into the result (each cell's terms still summed in order).
///
/// # Safety
/// As for [`product`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn skinny<T: Element>(
    m: usize,
    n: usize,
    k: usize,
    dst: Matrix<T>,
    read_dst: bool,
    lhs: Matrix<T>,
    rhs: Matrix<T>,
    kernels: Kernels,
) {
    let threads = kernels.threads;
    // As one column: `y (rows) = matrix (rows × k) · x (k)`.
    let (rows, matrix, x, y) = if n == 1 {
        (m, lhs, (rhs.start, rhs.rs), (dst.start, dst.rs))
    } else {
        (
            n,
            rhs.transposed(),
            (lhs.start, lhs.cs),
            (dst.start, dst.cs),
        )
    };
    let x = Matrix::strided(x.0, x.1, 0);
    let y = Matrix::strided(y.0, y.1, 0);
    let store = |i: usize, value: T| {
        // SAFETY: `i < rows`, inside the result.
        unsafe {
            let cell = y.at(i, 0).start;
            *cell = if read_dst { (*cell).add(value) } else { value };
        }
    };
    if rows == 1 {
        let blocks = k.div_ceil(DOT_BLOCK);
        let partial = |block: usize| {
            let from = block * DOT_BLOCK;
            let len = DOT_BLOCK.min(k - from);
            // SAFETY: `from + len <= k`, inside both operands.
            unsafe { dot(len, matrix.at(0, from), x.at(from, 0), kernels.native) }
        };
        let sums: Vec<Mutex<T>> = (0..blocks).map(|_| Mutex::new(T::ZERO)).collect();
        let parts = threads.min(blocks);
        pool::for_each_part(parts, &|part| {
            for block in pool::stretch(blocks, parts, part) {
                *sums[block].lock().unwrap_or_else(|e| e.into_inner()) = partial(block);
            }
        });
        let sums = sums
            .into_iter()
            .map(|sum| sum.into_inner().unwrap_or_else(|e| e.into_inner()));
        store(0, sums.fold(T::ZERO, T::add));
        return;
    }
    let columns_first = matrix.rs == 1 && matrix.cs != 1;
    let stretch = |from: usize, to: usize| {
        if columns_first {
            let mut sums = vec![T::ZERO; to - from];
            // SAFETY: rows `from..to` of the `k` columns, and the `k` scales, lie inside the
            // operands.
            unsafe {
                add_scaled(
                    &mut sums,
                    Columns {
                        start: matrix.at(from, 0).start,
                        stride: matrix.cs,
                        count: k,
                    },
                    Columns {
                        start: x.start,
                        stride: x.rs,
                        count: k,
                    },
                    kernels.native,
                );
            }
            for (i, sum) in (from..to).zip(sums) {
                store(i, sum);
            }
        } else {
            for i in from..to {
                // SAFETY: row `i` lies inside the matrix.
                store(i, unsafe { dot(k, matrix.at(i, 0), x, kernels.native) });
            }
        }
    };
    let split = threads.min(rows * k / MIN_SPLIT_WORK).min(rows).max(1);
    if split == 1 {
        stretch(0, rows);
        return;
    }
    pool::for_each_part(split, &|part| {
        let rows = pool::stretch(rows, split, part);
        stretch(rows.start, rows.end);
    });
}

/// The length of the blocks a lone dot product is cut into.
pub(super) const DOT_BLOCK: usize = 1 << 15;
/// Multiply-adds below which a skinny product runs on one thread.
pub(super) const MIN_SPLIT_WORK: usize = 1 << 15;
/// Independent partial sums of a contiguous dot product (`DOT_LANES` of `products.c`): a few of
/// the widest vectors' worth, so that additions overlap.
pub(super) const LANES: usize = 32;

/// `count` vectors (columns of a matrix, or the cells of one) starting `stride` apart.
pub(super) struct Columns<T> {
    start: *const T,
    stride: isize,
    count: usize,
}

/// `sums[i] += column_j[i]·scale_j` for each column `j` in order (`scales` holds one cell per
/// column).
///
/// # Safety
/// Every column holds `sums.len()` cells, and every scale lies inside its operand.
pub(super) unsafe fn add_scaled<T: Element>(
    sums: &mut [T],
    columns: Columns<T>,
    scales: Columns<T>,
    native: Native,
) {
    let (len, count) = (sums.len() as i64, columns.count as i64);
    let (stride, scale_stride) = (columns.stride as i64, scales.stride as i64);
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(kernel) = T::native_add_scaled(&native) {
            let sums = sums.as_mut_ptr();
            return kernel(
                len,
                count,
                sums,
                columns.start,
                stride,
                scales.start,
                scale_stride,
            );
        }
        for j in 0..columns.count as isize {
            let column = columns.start.offset(j * columns.stride);
            let scale = *scales.start.offset(j * scales.stride);
            for (i, sum) in sums.iter_mut().enumerate() {
                *sum = sum.add((*column.add(i)).mul(scale));
            }
        }
    }
}

/// `Σ_t a(0, t)·b(t, 0)` for `t < len`: row 0 of `a` against column 0 of `b`.
///
/// # Safety
/// Both must address `len` valid cells.
pub(super) unsafe fn dot<T: Element>(len: usize, a: Matrix<T>, b: Matrix<T>, native: Native) -> T {
    if a.cs == 1 && b.rs == 1 {
        if let Some(kernel) = T::native_dot(&native) {
            // SAFETY: the caller's contract.
            return unsafe { kernel(len as i64, a.start, b.start) };
        }
        // SAFETY: the caller's contract.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(a.start, len),
                std::slice::from_raw_parts(b.start, len),
            )
        };
        return contiguous_dot(a, b);
    }
    let mut sum = T::ZERO;
    for t in 0..len {
        // SAFETY: the caller's contract.
        sum = sum.add(unsafe { (*a.at(0, t).start).mul(*b.at(t, 0).start) });
    }
    sum
}

/// `Σ a[t]·b[t]`, lane `l` summing the terms at `t ≡ l (mod LANES)`, the lanes then added
/// pairwise: `rc_sdot` and `rc_ddot` of `products.c`, where they were not built.
pub(super) fn contiguous_dot<T: Element>(a: &[T], b: &[T]) -> T {
    let mut lanes = [T::ZERO; LANES];
    let (a_body, b_body) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_tail, b_tail) = (a_body.remainder(), b_body.remainder());
    for (a, b) in a_body.zip(b_body) {
        let a: &[T; LANES] = a.try_into().expect("chunks of LANES");
        let b: &[T; LANES] = b.try_into().expect("chunks of LANES");
        for l in 0..LANES {
            lanes[l] = lanes[l].add(a[l].mul(b[l]));
        }
    }
    for (l, (a, b)) in a_tail.iter().zip(b_tail).enumerate() {
        lanes[l] = lanes[l].add(a.mul(*b));
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] = lanes[l].add(lanes[l + width]);
        }
    }
    lanes[0]
}

/// One side (rows or columns) of an operand our f32 kernels read where it lies: a stride, or,
/// where the side's loops do not merge, the offset of each of its positions.
#[derive(Debug)]
pub(super) struct Side {
    pub(super) stride: isize,
    pub(super) table: Option<Vec<i64>>,
}

impl Side {
    /// The operand from `start` with these rows and columns.
    pub(super) fn matrix<T>(start: *mut T, [rows, columns]: &[Side; 2]) -> Matrix<T> {
        let table = |side: &Side| side.table.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        Matrix {
            start,
            rs: rows.stride,
            cs: columns.stride,
            rows: table(rows),
            cols: table(columns),
        }
    }
}

/// The side of the square tiles [`pack`] copies in.
pub(super) const TILE: usize = 32;

/// The cells at every combination of `loops` (stride, range) from `start`, copied row-major in
/// the loops' order. When the last loop does not read consecutive cells and an earlier one reads
/// with a smaller stride (a transposed operand), the copy goes in square tiles of those two
/// loops, so that each cache line read is used whole rather than once per cell.
///
/// # Safety
/// Every offset must lie inside the buffer `start` points into.
pub(super) unsafe fn pack<T: Element>(start: *mut T, loops: &[(i64, usize)]) -> Vec<T> {
    let total: usize = loops.iter().map(|(_, range)| range).product();
    let Some(&(last_stride, last_range)) = loops.last() else {
        // SAFETY: the caller's contract.
        return vec![unsafe { *start }];
    };
    // Every cell is written exactly once below (the loops' combinations map one-to-one onto
    // the destination's positions), so the copy starts from uninitialized memory.
    let mut packed: Vec<T> = Vec::with_capacity(total);
    let into_packed = packed.as_mut_ptr();
    let last = loops.len() - 1;
    let across = (0..last)
        .filter(|&p| loops[p].1 > 1)
        .min_by_key(|&p| loops[p].0.unsigned_abs())
        .filter(|&p| loops[p].0.unsigned_abs() < last_stride.unsigned_abs());
    // Each destination position's stride: row-major over the loops.
    let mut into = vec![1usize; loops.len()];
    for d in (0..last).rev() {
        into[d] = into[d + 1] * loops[d + 1].1;
    }
    // The loops the tiles leave outside, as (destination, source) offsets of every combination.
    let outer: Vec<usize> = (0..last).filter(|&d| Some(d) != across).collect();
    let mut bases = vec![(0usize, 0i64)];
    for &d in &outer {
        let (stride, range, step) = (loops[d].0, loops[d].1, into[d]);
        bases = bases
            .iter()
            .flat_map(|&(to, from)| {
                (0..range).map(move |i| (to + i * step, from + i as i64 * stride))
            })
            .collect();
    }
    let (across_stride, across_range, across_into) =
        across.map_or((0, 1, 0), |p| (loops[p].0, loops[p].1, into[p]));
    let tile = if across.is_some() {
        TILE
    } else {
        last_range.max(1)
    };
    for (to, from) in bases {
        for p0 in (0..across_range).step_by(tile) {
            for l0 in (0..last_range).step_by(tile) {
                for p in p0..(p0 + tile).min(across_range) {
                    for l in l0..(l0 + tile).min(last_range) {
                        let offset = from + p as i64 * across_stride + l as i64 * last_stride;
                        // SAFETY: the source offset is the caller's contract; the destination
                        // position is below `total`.
                        unsafe {
                            into_packed
                                .add(to + p * across_into + l)
                                .write(*start.offset(offset as isize));
                        }
                    }
                }
            }
        }
    }
    // SAFETY: all `total` cells are written.
    unsafe { packed.set_len(total) };
    packed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cells `pack` should copy: every combination of the loops, row-major, one at a time.
    fn gathered(source: &[f64], loops: &[(i64, usize)]) -> Vec<f64> {
        let mut offsets = vec![0i64];
        for &(stride, range) in loops {
            offsets = offsets
                .iter()
                .flat_map(|o| (0..range as i64).map(move |i| o + stride * i))
                .collect();
        }
        offsets.iter().map(|&o| source[o as usize]).collect()
    }

    #[test]
    fn a_split_product_is_cut_at_whole_tiles() {
        // A kernel gradient's 144 columns in panels of 16 on 2 threads, the rows of a layer's
        // product in tiles of 6 on 3, and sides shorter than their parts' tiles.
        for (total, tile, parts) in [(144, 16, 2), (2048, 6, 3), (20, 16, 2), (7, 1, 7)] {
            let stretches: Vec<_> = (0..parts)
                .map(|part| tiled_stretch(total, tile, parts, part))
                .collect();
            assert_eq!(stretches[0].start, 0);
            assert_eq!(stretches[parts - 1].end, total);
            for pair in stretches.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert_eq!(
                    pair[0].end % tile,
                    0,
                    "{total} in tiles of {tile}: {stretches:?}"
                );
            }
            let tiles: Vec<usize> = stretches.iter().map(|s| s.len().div_ceil(tile)).collect();
            let (fewest, most) = (tiles.iter().min(), tiles.iter().max());
            assert!(most.unwrap() - fewest.unwrap() <= 1, "{stretches:?}");
        }
        assert_eq!(tiled_stretch(144, 16, 2, 0), 0..64);
    }

    #[test]
    fn packing_in_tiles_copies_every_cell_in_order() {
        // A 3×70×45 source (strides 3150, 45, 1) read as (45, 3, 70): the last loop reads with
        // stride 45 and the first consecutively, so the copy goes in tiles, with partial tiles
        // at both edges; and read as it lies, and in other orders.
        let source: Vec<f64> = (0..3 * 70 * 45).map(f64::from).collect();
        for loops in [
            vec![(1, 45), (3150, 3), (45, 70)],
            vec![(3150, 3), (1, 45), (45, 70)],
            vec![(3150, 3), (45, 70), (1, 45)],
            vec![(45, 70), (3150, 3)],
            vec![(45, 70)],
            vec![],
        ] {
            // SAFETY: every offset is below 3·70·45.
            let packed = unsafe { pack(source.as_ptr().cast_mut(), &loops) };
            assert_eq!(packed, gathered(&source, &loops), "{loops:?}");
        }
    }
}
