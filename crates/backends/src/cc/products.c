/* Our own kernels for matrix products, built with the routine's compiler and flags.

   Dot products and scaled-column sums, for products with one row or one column. The dot
   products take 32 partial sums (sum l takes the terms
   at t = l mod 32), then added pairwise; the compiler vectorizes the sums, and the order of the
   additions is the same as the portable version's in gemm.rs, so the result is too.

   Single-precision matrix products for x86-64, in the manner of BLIS: blocks of B packed into
   panels of NR columns, blocks of A into panels of MR rows, and a register-tiled MR x NR kernel.
   C += A B (or C = A B), every matrix with its own row and column strides, and A and B each
   with optional tables of row and column offsets in place of strides: a convolution's windows
   are packed straight from the image into the panels (an implicit im2col), never copied whole,
   and A is read where it lies, unpacked, where B has few panels and either its rows' cells are
   consecutive (a layer's product with its weights) or its rows lie side by side (a weight
   gradient's transposed activations).
   Packing buffers are per thread and kept between calls. Two kernels share the blocking and the packing: rc_sgemm
   (14 x 32, AVX-512) is built only when the flags enable AVX-512, and rc_sgemm_available says
   whether it was; rc_sgemm_avx2 (6 x 16, AVX2 and FMA) is built for every x86-64 target, its
   kernel compiled for AVX2 by a function attribute whatever the flags, and the caller calls it
   only on a CPU that has both. Both sum every cell's terms the same way: one fused multiply-add
   per term in k order within each KC block, each block's sum then added to C, so they give the
   same bits. Elsewhere the caller uses another product. */
#include <stdint.h>
#include <stdlib.h>

#define DOT_LANES 32

#define DOT(name, type)                                                                         \
  type name(int64_t len, const type *restrict a, const type *restrict b) {                     \
    type lanes[DOT_LANES] = {0};                                                                \
    int64_t t = 0;                                                                              \
    for (; t + DOT_LANES <= len; t += DOT_LANES)                                                \
      for (int l = 0; l < DOT_LANES; ++l) lanes[l] += a[t + l] * b[t + l];                      \
    for (int l = 0; t + l < len; ++l) lanes[l] += a[t + l] * b[t + l];                          \
    for (int width = DOT_LANES / 2; width >= 1; width /= 2)                                     \
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];                             \
    return lanes[0];                                                                            \
  }

DOT(rc_sdot, float)
DOT(rc_ddot, double)

/* sums[i] += column_j[i] * scales[j * scale_stride] for j = 0, 1, ..., count - 1 in that order,
   column j starting at matrix + j * stride: the product of a matrix that runs down its columns.
   Four columns at a time, each cell's running sum kept in a register between them, so the sums
   are read and written a quarter as often; every cell still adds its terms in column order. */
#define ADD_SCALED(name, type)                                                                  \
  void name(int64_t len, int64_t count, type *restrict sums, const type *restrict matrix,       \
            int64_t stride, const type *restrict scales, int64_t scale_stride) {               \
    int64_t j = 0;                                                                              \
    for (; j + 4 <= count; j += 4) {                                                            \
      const type *c0 = matrix + j * stride, *c1 = c0 + stride, *c2 = c1 + stride,               \
                 *c3 = c2 + stride;                                                             \
      type s0 = scales[j * scale_stride], s1 = scales[(j + 1) * scale_stride],                  \
           s2 = scales[(j + 2) * scale_stride], s3 = scales[(j + 3) * scale_stride];            \
      for (int64_t i = 0; i < len; ++i) {                                                       \
        type t = sums[i];                                                                       \
        t += c0[i] * s0;                                                                        \
        t += c1[i] * s1;                                                                        \
        t += c2[i] * s2;                                                                        \
        t += c3[i] * s3;                                                                        \
        sums[i] = t;                                                                            \
      }                                                                                         \
    }                                                                                           \
    for (; j < count; ++j) {                                                                    \
      const type *c = matrix + j * stride;                                                      \
      type scale = scales[j * scale_stride];                                                    \
      for (int64_t i = 0; i < len; ++i) sums[i] += c[i] * scale;                                \
    }                                                                                           \
  }

ADD_SCALED(rc_sadd_scaled, float)
ADD_SCALED(rc_dadd_scaled, double)

#if defined(__x86_64__)
#include <immintrin.h>

#define KC 384
/* A multiple of both kernels' MR, so that a block of A packs into MC x KC cells. */
#define MC 168
#define NC 3072
/* The widest NR: packed B holds one partial panel past NC. */
#define NR_MAX 32

/* A tile kernel's A cell (i, p) of a run where it lies, through the rows' starts in the run;
   its B panel's row p where it lies, through B's table of row offsets. */
#define IN_PLACE(i, p) run[i][p]
#define B_IN_PLACE(p) (b + b_rows[p])

/* The largest MR: the row starts a panel of A keeps. */
#define MR_MAX 14

/* An operand of a product: cell (i, p) lies at base + row(i) + col(p), each offset the table's
   entry where a table is given (a convolution's windows, whose loops do not merge into one
   stride), else the index times the stride. Tables make the packing read the operand where it
   lies, so no copy of a gathered operand is ever made beyond the packed panels. */
typedef struct {
  const float *base;
  int64_t rs, cs;
  const int64_t *rows, *cols;
} operand;

static inline int64_t row_offset(const operand *x, int64_t i) {
  return x->rows ? x->rows[i] : i * x->rs;
}

static inline int64_t col_offset(const operand *x, int64_t p) {
  return x->cols ? x->cols[p] : p * x->cs;
}

/* Copies and clears of a panel's few cells, a vector of four at a time. Written as plain loops
   or memcpy, compilers make them calls or `rep` string instructions, whose start-up costs more
   than the copy of a panel's row: each vector passes through an empty asm statement, which
   hides the pattern. */
static inline void copy_floats(float *out, const float *from, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_loadu_ps(from + i);
    __asm__("" : "+x"(v));
    _mm_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) {
    __m128 v = _mm_load_ss(from + i);
    __asm__("" : "+x"(v));
    _mm_store_ss(out + i, v);
  }
}

static inline void zero_floats(float *out, int64_t n) {
  __m128 zero = _mm_setzero_ps();
  __asm__("" : "+x"(zero));
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, zero);
  for (; i < n; ++i) _mm_store_ss(out + i, zero);
}

/* Whether the `count` offsets from `from` on run consecutively (a run of `count` cells). */
static int consecutive(const operand *x, int by_rows, int64_t from, int64_t count) {
  const int64_t *table = by_rows ? x->rows : x->cols;
  if (!table) return (by_rows ? x->rs : x->cs) == 1 || count <= 1;
  for (int64_t t = 1; t < count; ++t)
    if (table[from + t] != table[from] + t) return 0;
  return 1;
}

/* Rows i0..i0+mc and columns p0..p0+kc of A, in panels of mr rows: out[p * mr + i]. */
static void pack_a(int64_t mr, int64_t mc, int64_t kc, const operand *a, int64_t i0,
                   int64_t p0, float *out) {
  for (int64_t r0 = 0; r0 < mc; r0 += mr) {
    int64_t rows = mc - r0 < mr ? mc - r0 : mr;
    const float *row[MR_MAX];
    for (int64_t i = 0; i < rows; ++i) row[i] = a->base + row_offset(a, i0 + r0 + i);
    if (consecutive(a, 1, i0 + r0, rows)) {
      /* The panel's rows lie side by side (a kernel gradient's channels): one run per p, the
         rows past the end zeroed. */
      for (int64_t p = 0; p < kc; ++p) {
        copy_floats(out, row[0] + col_offset(a, p0 + p), rows);
        zero_floats(out + rows, mr - rows);
        out += mr;
      }
      continue;
    }
    for (int64_t p = 0; p < kc;) {
      int64_t at = col_offset(a, p0 + p);
      int64_t i = 0;
      if (p + 4 <= kc && consecutive(a, 0, p0 + p, 4)) {
        /* Four columns side by side in every row (a row-major A, a channels-last image's
           windows): read four cells of four rows at once and transpose them in registers. */
        for (; i + 4 <= rows; i += 4) {
          __m128 r0 = _mm_loadu_ps(row[i] + at), r1 = _mm_loadu_ps(row[i + 1] + at),
                 r2 = _mm_loadu_ps(row[i + 2] + at), r3 = _mm_loadu_ps(row[i + 3] + at);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          _mm_storeu_ps(out + i, r0);
          _mm_storeu_ps(out + mr + i, r1);
          _mm_storeu_ps(out + 2 * mr + i, r2);
          _mm_storeu_ps(out + 3 * mr + i, r3);
        }
        for (; i < rows; ++i)
          for (int t = 0; t < 4; ++t) out[t * mr + i] = row[i][at + t];
        for (; i < mr; ++i)
          for (int t = 0; t < 4; ++t) out[t * mr + i] = 0;
        out += 4 * mr;
        p += 4;
        continue;
      }
      for (; i < rows; ++i) out[i] = row[i][at];
      zero_floats(out + i, mr - i);
      out += mr;
      ++p;
    }
  }
}

/* Rows p0..p0+kc and columns j0..j0+nc of B, in panels of nr columns: out[p * nr + j]. */
static void pack_b(int64_t nr, int64_t kc, int64_t nc, const operand *b, int64_t p0,
                   int64_t j0, float *out) {
  if (!b->rows && !b->cols && b->cs == 1) {
    /* A row-major B goes row by row, each row read once straight through and its cells copied
       into row p of every panel. Panel by panel, the reads would step a whole row of B at a
       time, each on another page, where no prefetcher follows them. */
    int64_t full = nc - nc % nr;
    for (int64_t p = 0; p < kc; ++p) {
      const float *row = b->base + (p0 + p) * b->rs + j0;
      float *at = out + p * nr;
      for (int64_t c0 = 0; c0 < full; c0 += nr) copy_floats(at + c0 * kc, row + c0, nr);
      if (full < nc) {
        copy_floats(at + full * kc, row + full, nc - full);
        zero_floats(at + full * kc + nc - full, nr - (nc - full));
      }
    }
    return;
  }
  for (int64_t c0 = 0; c0 < nc; c0 += nr) {
    int64_t cols = nc - c0 < nr ? nc - c0 : nr;
    if (!b->rows && !b->cols && b->rs == 1 && b->cs != 1) {
      /* B's columns lie consecutively (a transposed operand): each is read along k and written
         down the panel, rather than gathering one cell of every column per k. */
      int64_t j = 0;
      for (; j < cols; ++j) {
        const float *column = b->base + p0 + (j0 + c0 + j) * b->cs;
        for (int64_t p = 0; p < kc; ++p) out[p * nr + j] = column[p];
      }
      for (; j < nr; ++j)
        for (int64_t p = 0; p < kc; ++p) out[p * nr + j] = 0;
      out += kc * nr;
      continue;
    }
    /* The panel's columns as runs of consecutive cells (one run for a row-major B; two where
       a panel of a convolution's pixels wraps onto the next image row): each run is copied
       whole, the columns past the end zeroed. Columns mostly apart are gathered one by one. */
    int64_t col[NR_MAX], run_from[NR_MAX], run_length[NR_MAX], runs = 0;
    for (int64_t j = 0; j < cols; ++j) {
      col[j] = col_offset(b, j0 + c0 + j);
      if (runs > 0 && col[j] == col[run_from[runs - 1]] + run_length[runs - 1]) {
        ++run_length[runs - 1];
      } else {
        run_from[runs] = j;
        run_length[runs++] = 1;
      }
    }
    int by_runs = runs * 4 <= cols;
    for (int64_t p = 0; p < kc; ++p) {
      const float *row = b->base + row_offset(b, p0 + p);
      if (by_runs) {
        for (int64_t r = 0; r < runs; ++r)
          copy_floats(out + run_from[r], row + col[run_from[r]], run_length[r]);
      } else {
        for (int64_t j = 0; j < cols; ++j) out[j] = row[col[j]];
      }
      zero_floats(out + cols, nr - cols);
      out += nr;
    }
  }
}

/* A tile's products, kernel(kc, a, lda, packed b, c, rsc, csc, rows, cols, store): added to C,
   or stored when `store` (the first block of a product that overwrites C). The panel of A holds
   its rows' cells of column p side by side from a + p lda: a packed panel (lda = mr), or A
   itself where its rows lie side by side (lda its column stride). */
typedef void tile_kernel(int64_t, const float *restrict, int64_t, const float *restrict, float *,
                         int64_t, int64_t, int64_t, int64_t, int);

/* The same, for A read where it lies in runs of consecutive cells: kernel(rows, offsets,
   lengths, runs, packed b, ...), row i's cells of run r from rows[i] + offsets[r] on, each
   run's columns following the last's in packed b; every run's terms are summed in registers
   before the tile is added to C. */
typedef void rows_kernel(const float *const *, const int64_t *, const int64_t *, int64_t,
                         const float *restrict, float *, int64_t, int64_t, int64_t, int64_t, int);

/* The same, for B read where it lies: kernel(kc, a, lda, b, b_rows, ...), the panel's row p
   at b + b_rows[p]. */
typedef void b_rows_kernel(int64_t, const float *restrict, int64_t, const float *,
                           const int64_t *, float *, int64_t, int64_t, int64_t, int64_t, int);

/* Whether every panel of columns j0..j0+nc of B is a run of consecutive cells and its rows come
   from a table (a kernel gradient's windows): the kernel then reads each panel row where it
   lies instead of a packed copy. */
static int b_in_place(const operand *b, int64_t nr, int64_t j0, int64_t nc) {
  if (!b->rows || nc % nr != 0) return 0;
  for (int64_t jr = 0; jr < nc; jr += nr)
    if (!consecutive(b, 0, j0 + jr, nr)) return 0;
  return 1;
}

static _Thread_local float *packed_a, *packed_b;

/* The shortest run of consecutive columns of A read in place. Shorter runs cost a few more
   pointer updates in the kernel, far less than packing: on AVX2, a 3x3 convolution of 3
   channels (runs of 9) ran twice as fast read in place as packed, and so did attention's
   output projection over heads of 4 and 8 (512 x 32 by 32 x 32); heads of 16 and wide
   convolutions ran the same. */
#define MIN_RUN 4

/* Splits columns p0..p0+kc of A into runs of consecutive cells (starts and lengths) when A has
   a table of column offsets (a convolution's windows: each run a pixel's channels) and no run
   is shorter than MIN_RUN, and returns their count; else 0. Packing such an A would copy every
   cell of every window, while a product with few columns (a convolution's output channels)
   multiplies each by only a few columns: read in place, it is never copied. */
static int64_t column_runs(const operand *a, int64_t p0, int64_t kc, int64_t *start,
                           int64_t *length) {
  if (!a->cols) return 0;
  int64_t runs = 0;
  for (int64_t p = 0; p < kc; ++p) {
    if (runs > 0 && a->cols[p0 + p] == a->cols[start[runs - 1]] + length[runs - 1]) {
      ++length[runs - 1];
    } else {
      if (runs > 0 && length[runs - 1] < MIN_RUN) return 0;
      start[runs] = p0 + p;
      length[runs++] = 1;
    }
  }
  return runs > 0 && length[runs - 1] >= MIN_RUN ? runs : 0;
}

/* Panels of B up to which an A whose rows lie in consecutive cells is read where it lies, not
   packed: packing transposes every cell of A once, which costs about as much as the cell's
   products with a few panels of B. (On AVX2, read in place, a 2048 x 64 by 64 x 64 product ran
   25% faster, a 2048 x 256 by 256 x 64 one 20%, a 2048 x 64 by 64 x 256 one 10%, a 64 x 64 by
   64 x 16 one twice as fast, and a 1024 x 1024 square one no faster.) */
#define IN_PLACE_PANELS 16

/* The runs of columns p0..p0+kc of A read where they lie, as column_runs counts them, or one
   run of all kc columns where A's rows lie in consecutive cells and B's block has at most
   IN_PLACE_PANELS panels of nr columns. */
static int64_t in_place_runs(const operand *a, int64_t nr, int64_t nc, int64_t p0, int64_t kc,
                             int64_t *start, int64_t *length) {
  if (!a->cols && a->cs == 1 && nc <= IN_PLACE_PANELS * nr) {
    start[0] = p0;
    length[0] = kc;
    return 1;
  }
  return column_runs(a, p0, kc, start, length);
}

/* C += A B, or C = A B when `overwrite` (C is then never read), in mr x nr tiles. Returns 0, or
   -1 when the packing buffers cannot be allocated (C is then unchanged). */
static int blocked(int64_t mr, int64_t nr, tile_kernel *kernel, rows_kernel *in_place,
                   b_rows_kernel *b_kernel, int64_t m, int64_t n, int64_t k, const operand *a,
                   const operand *b, float *c, int64_t rsc, int64_t csc, int overwrite) {
  if (!packed_a) packed_a = aligned_alloc(64, sizeof(float) * MC * KC);
  if (!packed_b) packed_b = aligned_alloc(64, sizeof(float) * KC * (NC + NR_MAX));
  if (!packed_a || !packed_b) return -1;
  int a_by_columns = !a->rows && !a->cols && a->rs == 1;
  if (k == 0 && overwrite)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * rsc + j * csc] = 0;
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      int64_t kc = k - p0 < KC ? k - p0 : KC;
      int64_t run_start[KC], run_length[KC], run_offset[KC];
      int64_t runs = in_place_runs(a, nr, nc, p0, kc, run_start, run_length);
      int read_b = runs == 0 && b_in_place(b, nr, j0, nc);
      if (!read_b) pack_b(nr, kc, nc, b, p0, j0, packed_b);
      if (runs > 0) {
        /* Each panel of rows multiplies every panel of B, run after run. Rows past the end of A
           read the first row again: their sums are never stored. */
        for (int64_t r = 0; r < runs; ++r) run_offset[r] = col_offset(a, run_start[r]);
        for (int64_t ir = 0; ir < m; ir += mr) {
          int64_t rows = m - ir < mr ? m - ir : mr;
          const float *at[MR_MAX];
          for (int64_t i = 0; i < mr; ++i) at[i] = a->base + row_offset(a, ir + (i < rows ? i : 0));
          for (int64_t jr = 0; jr < nc; jr += nr) {
            int64_t cols = nc - jr < nr ? nc - jr : nr;
            in_place(at, run_offset, run_length, runs, packed_b + jr * kc,
                     c + ir * rsc + (j0 + jr) * csc, rsc, csc, rows, cols, overwrite && p0 == 0);
          }
        }
        continue;
      }
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        int64_t mc = m - i0 < MC ? m - i0 : MC;
        /* Where A's rows lie side by side (a weight gradient's transposed activations) and B
           has few panels, each full panel of rows is read where it lies, as a packed panel
           would hold it but a column stride apart: only a last panel cut short is packed, so
           that no read passes the end of A. */
        int64_t in_place = a_by_columns && nc <= IN_PLACE_PANELS * nr ? mc - mc % mr : 0;
        if (in_place < mc) pack_a(mr, mc - in_place, kc, a, i0 + in_place, p0, packed_a);
        for (int64_t jr = 0; jr < nc; jr += nr) {
          int64_t cols = nc - jr < nr ? nc - jr : nr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            int64_t rows = mc - ir < mr ? mc - ir : mr;
            float *tile = c + (i0 + ir) * rsc + (j0 + jr) * csc;
            int store = overwrite && p0 == 0;
            const float *panel = ir < in_place ? a->base + i0 + ir + p0 * a->cs
                                               : packed_a + (ir - in_place) * kc;
            int64_t lda = ir < in_place ? a->cs : mr;
            if (read_b)
              b_kernel(kc, panel, lda, b->base + col_offset(b, j0 + jr), b->rows + p0, tile,
                       rsc, csc, rows, cols, store);
            else
              kernel(kc, panel, lda, packed_b + jr * kc, tile, rsc, csc, rows, cols, store);
          }
        }
      }
    }
  }
  return 0;
}

/* The products' entry points: A's cell (i, p) at a + a_rows[i] + a_cols[p], or a + i rsa + p csa
   where the table is null; B's alike. */
#define SGEMM(name, mr, nr, kernel, in_place, b_kernel, small)                                 \
  int name(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,          \
           const int64_t *a_rows, const int64_t *a_cols, const float *b, int64_t rsb,          \
           int64_t csb, const int64_t *b_rows, const int64_t *b_cols, float *c, int64_t rsc,   \
           int64_t csc, int overwrite) {                                                       \
    operand a_operand = {a, rsa, csa, a_rows, a_cols}, b_operand = {b, rsb, csb, b_rows, b_cols}; \
    if (k > 0 && k <= KC && n <= (nr) && m <= 2 * (mr))                                       \
      return small(m, n, k, &a_operand, &b_operand, c, rsc, csc, overwrite);                   \
    return blocked(mr, nr, kernel, in_place, b_kernel, m, n, k, &a_operand, &b_operand, c, rsc,\
                   csc, overwrite);                                                            \
  }

/* Products of one panel of B and a few panels of A (attention's per-head products, 16 x 16 by
   16 x 16), where packing A and running the MR-row kernel over a last panel of two rows would
   cost more than the sums: B is packed once, A read where it lies, and rows of C are summed
   SMALL_ROWS at a time. Every cell's terms are summed as the kernels sum them (one fused
   multiply-add per term in k order, then stored or added to C), so the bits are the same. */
#define SMALL_ROWS 4

/* Row i (0 <= i < SMALL_ROWS) of a small product's block of rows from i0: the block's last
   rows past the end of A read its first row again, their sums never stored. */
static inline const float *small_row(const operand *a, int64_t i0, int64_t rows, int64_t i) {
  return a->base + row_offset(a, i0 + (i < rows ? i : 0));
}

/* The packed panel of B, allocated on first use; null when it cannot be. */
static float *small_panel(void) {
  if (!packed_b) packed_b = aligned_alloc(64, sizeof(float) * KC * (NC + NR_MAX));
  return packed_b;
}

/* Asks for a tile of C ahead of the kernel's sums, which then find it in cache when they are
   added: rows of C a power of two apart fall in one set of the cache, and read only at the
   end, their misses would stall the next tile. */
static inline void prefetch_tile(const float *c, int64_t rsc, int64_t csc, int64_t rows,
                                 int64_t cols) {
  if (csc != 1) return;
  for (int64_t i = 0; i < rows; ++i) {
    _mm_prefetch((const char *)(c + i * rsc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * rsc + cols - 1), _MM_HINT_T0);
  }
}

#ifdef __AVX512F__
#define MR_512 14
#define NR_512 32

int rc_sgemm_available(void) { return 1; }

/* The tile's sums added to C (stored when `store`). */
static inline void finish_512(__m512 acc[MR_512][2], float *c, int64_t rsc, int64_t csc,
                              int64_t rows, int64_t cols, int store) {
  if (rows == MR_512 && cols == NR_512 && csc == 1) {
    for (int i = 0; i < MR_512; ++i) {
      float *ci = c + i * rsc;
      if (store) {
        _mm512_storeu_ps(ci, acc[i][0]);
        _mm512_storeu_ps(ci + 16, acc[i][1]);
      } else {
        _mm512_storeu_ps(ci, _mm512_add_ps(_mm512_loadu_ps(ci), acc[i][0]));
        _mm512_storeu_ps(ci + 16, _mm512_add_ps(_mm512_loadu_ps(ci + 16), acc[i][1]));
      }
    }
  } else if (csc == 1) {
    /* A tile cut short by the edge of C: its rows, masked to its columns. */
    __mmask16 low = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    __mmask16 high = cols >= 32 ? 0xffff : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1) : 0;
    for (int64_t i = 0; i < rows; ++i) {
      float *ci = c + i * rsc;
      __m512 sum0 = acc[i][0], sum1 = acc[i][1];
      if (!store) {
        sum0 = _mm512_add_ps(_mm512_maskz_loadu_ps(low, ci), sum0);
        sum1 = _mm512_add_ps(_mm512_maskz_loadu_ps(high, ci + 16), sum1);
      }
      _mm512_mask_storeu_ps(ci, low, sum0);
      _mm512_mask_storeu_ps(ci + 16, high, sum1);
    }
  } else {
    float tile[MR_512][NR_512] __attribute__((aligned(64)));
    for (int i = 0; i < MR_512; ++i) {
      _mm512_store_ps(tile[i], acc[i][0]);
      _mm512_store_ps(tile[i] + 16, acc[i][1]);
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        c[i * rsc + j * csc] = store ? tile[i][j] : c[i * rsc + j * csc] + tile[i][j];
  }
}

/* A tile's accumulators, zero. */
#define ACC_512                                                                                 \
  __m512 acc[MR_512][2];                                                                        \
  for (int i = 0; i < MR_512; ++i) {                                                            \
    acc[i][0] = _mm512_setzero_ps();                                                            \
    acc[i][1] = _mm512_setzero_ps();                                                            \
  }

/* A tile's terms for p = 0..count, row i's A cell p at A_AT(i, p), the B panel's row p at
   B_ROW(p). */
#define STEPS_512(A_AT, B_ROW, count)                                                           \
  if (cols <= 16) {                                                                             \
    /* The panel's second half lies past the edge of C: its sums are not needed. */             \
    for (int64_t p = 0; p < (count); ++p) {                                                     \
      __m512 b0 = _mm512_loadu_ps(B_ROW(p));                                                    \
      _Pragma("GCC unroll 14") for (int i = 0; i < MR_512; ++i)                                 \
          acc[i][0] = _mm512_fmadd_ps(_mm512_set1_ps(A_AT(i, p)), b0, acc[i][0]);               \
    }                                                                                           \
  } else {                                                                                      \
    for (int64_t p = 0; p < (count); ++p) {                                                     \
      __m512 b0 = _mm512_loadu_ps(B_ROW(p)), b1 = _mm512_loadu_ps(B_ROW(p) + 16);               \
      _Pragma("GCC unroll 14") for (int i = 0; i < MR_512; ++i) {                               \
        __m512 ai = _mm512_set1_ps(A_AT(i, p));                                                 \
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                                         \
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                                         \
      }                                                                                         \
    }                                                                                           \
  }

#define PACKED_512(i, p) a[(p) * lda + (i)]
#define PANEL_512(p) (b + (p) * NR_512)

static void kernel_512(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                       float *c, int64_t rsc, int64_t csc, int64_t rows, int64_t cols,
                       int store) {
  prefetch_tile(c, rsc, csc, rows, cols);
  ACC_512
  STEPS_512(PACKED_512, PANEL_512, kc)
  finish_512(acc, c, rsc, csc, rows, cols, store);
}

static void in_place_512(const float *const *a, const int64_t *offsets, const int64_t *lengths,
                         int64_t runs, const float *restrict b, float *c, int64_t rsc,
                         int64_t csc, int64_t rows, int64_t cols, int store) {
  ACC_512
  for (int64_t r = 0; r < runs; ++r) {
    const float *run[MR_512];
    for (int i = 0; i < MR_512; ++i) run[i] = a[i] + offsets[r];
    STEPS_512(IN_PLACE, PANEL_512, lengths[r])
    b += lengths[r] * NR_512;
  }
  finish_512(acc, c, rsc, csc, rows, cols, store);
}

static void b_rows_512(int64_t kc, const float *restrict a, int64_t lda, const float *b,
                       const int64_t *b_rows, float *c, int64_t rsc, int64_t csc, int64_t rows,
                       int64_t cols, int store) {
  ACC_512
  STEPS_512(PACKED_512, B_IN_PLACE, kc)
  finish_512(acc, c, rsc, csc, rows, cols, store);
}

static int small_512(int64_t m, int64_t n, int64_t k, const operand *a, const operand *b,
                     float *c, int64_t rsc, int64_t csc, int store) {
  float *panel = small_panel();
  if (!panel) return -1;
  pack_b(NR_512, k, n, b, 0, 0, panel);
  for (int64_t i0 = 0; i0 < m; i0 += SMALL_ROWS) {
    int64_t rows = m - i0 < SMALL_ROWS ? m - i0 : SMALL_ROWS;
    const float *row[SMALL_ROWS];
    for (int i = 0; i < SMALL_ROWS; ++i) row[i] = small_row(a, i0, rows, i);
    __m512 acc[MR_512][2];
    for (int i = 0; i < MR_512; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
      int64_t at = col_offset(a, p);
      __m512 b0 = _mm512_loadu_ps(panel + p * NR_512);
      if (n <= 16) {
        for (int i = 0; i < SMALL_ROWS; ++i)
          acc[i][0] = _mm512_fmadd_ps(_mm512_set1_ps(row[i][at]), b0, acc[i][0]);
      } else {
        __m512 b1 = _mm512_loadu_ps(panel + p * NR_512 + 16);
        for (int i = 0; i < SMALL_ROWS; ++i) {
          __m512 ai = _mm512_set1_ps(row[i][at]);
          acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
      }
    }
    /* The tile's other rows are zeros that finish_512 never stores. */
    finish_512(acc, c + i0 * rsc, rsc, csc, rows, n, store);
  }
  return 0;
}

SGEMM(rc_sgemm, MR_512, NR_512, kernel_512, in_place_512, b_rows_512, small_512)
#else
int rc_sgemm_available(void) { return 0; }
#endif

/* 6 x 16: twelve accumulators, two rows of B and a broadcast of A fill fifteen of the sixteen
   AVX registers. The accumulators are named variables, not an array: gcc keeps an array that is
   later stored whole in memory, storing it back on every step of k. */
#define MR_256 6
#define NR_256 16

/* The tile's sums added to C (stored when `store`). */
__attribute__((target("avx2,fma"))) static inline void finish_256(__m256 acc[MR_256][2],
                                                                  float *c, int64_t rsc,
                                                                  int64_t csc, int64_t rows,
                                                                  int64_t cols, int store) {
  if (rows == MR_256 && cols == NR_256 && csc == 1) {
    for (int i = 0; i < MR_256; ++i) {
      float *ci = c + i * rsc;
      if (store) {
        _mm256_storeu_ps(ci, acc[i][0]);
        _mm256_storeu_ps(ci + 8, acc[i][1]);
      } else {
        _mm256_storeu_ps(ci, _mm256_add_ps(_mm256_loadu_ps(ci), acc[i][0]));
        _mm256_storeu_ps(ci + 8, _mm256_add_ps(_mm256_loadu_ps(ci + 8), acc[i][1]));
      }
    }
  } else {
    float tile[MR_256][NR_256] __attribute__((aligned(32)));
    for (int i = 0; i < MR_256; ++i) {
      _mm256_store_ps(tile[i], acc[i][0]);
      _mm256_store_ps(tile[i] + 8, acc[i][1]);
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        c[i * rsc + j * csc] = store ? tile[i][j] : c[i * rsc + j * csc] + tile[i][j];
  }
}

#define ROW_256(A_AT, i)                                                                        \
  do {                                                                                          \
    __m256 ai = _mm256_broadcast_ss(&A_AT(i, p));                                               \
    acc##i##0 = _mm256_fmadd_ps(ai, b0, acc##i##0);                                             \
    acc##i##1 = _mm256_fmadd_ps(ai, b1, acc##i##1);                                             \
  } while (0)

/* A tile's accumulators, zero. */
#define ACC_256                                                                                 \
  __m256 acc00 = _mm256_setzero_ps(), acc01 = acc00, acc10 = acc00, acc11 = acc00,              \
         acc20 = acc00, acc21 = acc00, acc30 = acc00, acc31 = acc00, acc40 = acc00,             \
         acc41 = acc00, acc50 = acc00, acc51 = acc00;

/* A tile's terms for p = 0..count, row i's A cell p at A_AT(i, p), the B panel's row p at
   B_ROW(p). */
#define STEPS_256(A_AT, B_ROW, count)                                                           \
  for (int64_t p = 0; p < (count); ++p) {                                                       \
    __m256 b0 = _mm256_loadu_ps(B_ROW(p)), b1 = _mm256_loadu_ps(B_ROW(p) + 8);                  \
    ROW_256(A_AT, 0);                                                                           \
    ROW_256(A_AT, 1);                                                                           \
    ROW_256(A_AT, 2);                                                                           \
    ROW_256(A_AT, 3);                                                                           \
    ROW_256(A_AT, 4);                                                                           \
    ROW_256(A_AT, 5);                                                                           \
  }

/* The tile's sums added to C. */
#define FINISH_256                                                                              \
  __m256 acc[MR_256][2] = {{acc00, acc01}, {acc10, acc11}, {acc20, acc21},                      \
                           {acc30, acc31}, {acc40, acc41}, {acc50, acc51}};                     \
  finish_256(acc, c, rsc, csc, rows, cols, store);

#define PACKED_256(i, p) a[(p) * lda + (i)]
#define PANEL_256(p) (b + (p) * NR_256)

__attribute__((target("avx2,fma"))) static void kernel_256(int64_t kc, const float *restrict a,
                                                           int64_t lda,
                                                           const float *restrict b, float *c,
                                                           int64_t rsc, int64_t csc,
                                                           int64_t rows, int64_t cols,
                                                           int store) {
  ACC_256
  STEPS_256(PACKED_256, PANEL_256, kc)
  FINISH_256
}

__attribute__((target("avx2,fma"))) static void in_place_256(
    const float *const *a, const int64_t *offsets, const int64_t *lengths, int64_t runs,
    const float *restrict b, float *c, int64_t rsc, int64_t csc, int64_t rows, int64_t cols,
    int store) {
  ACC_256
  for (int64_t r = 0; r < runs; ++r) {
    const float *run[MR_256];
    for (int i = 0; i < MR_256; ++i) run[i] = a[i] + offsets[r];
    STEPS_256(IN_PLACE, PANEL_256, lengths[r])
    b += lengths[r] * NR_256;
  }
  FINISH_256
}

__attribute__((target("avx2,fma"))) static void b_rows_256(int64_t kc, const float *restrict a,
                                                           int64_t lda, const float *b,
                                                           const int64_t *b_rows, float *c,
                                                           int64_t rsc, int64_t csc,
                                                           int64_t rows, int64_t cols,
                                                           int store) {
  ACC_256
  STEPS_256(PACKED_256, B_IN_PLACE, kc)
  FINISH_256
}

__attribute__((target("avx2,fma"))) static int small_256(int64_t m, int64_t n, int64_t k,
                                                         const operand *a, const operand *b,
                                                         float *c, int64_t rsc, int64_t csc,
                                                         int store) {
  float *panel = small_panel();
  if (!panel) return -1;
  pack_b(NR_256, k, n, b, 0, 0, panel);
  for (int64_t i0 = 0; i0 < m; i0 += SMALL_ROWS) {
    int64_t rows = m - i0 < SMALL_ROWS ? m - i0 : SMALL_ROWS;
    const float *row[SMALL_ROWS];
    for (int i = 0; i < SMALL_ROWS; ++i) row[i] = small_row(a, i0, rows, i);
    __m256 acc[MR_256][2];
    for (int i = 0; i < MR_256; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
      int64_t at = col_offset(a, p);
      __m256 b0 = _mm256_loadu_ps(panel + p * NR_256),
             b1 = _mm256_loadu_ps(panel + p * NR_256 + 8);
      for (int i = 0; i < SMALL_ROWS; ++i) {
        __m256 ai = _mm256_broadcast_ss(&row[i][at]);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
    finish_256(acc, c + i0 * rsc, rsc, csc, rows, n, store);
  }
  return 0;
}

SGEMM(rc_sgemm_avx2, MR_256, NR_256, kernel_256, in_place_256, b_rows_256, small_256)
#else
int rc_sgemm_available(void) { return 0; }
#endif
