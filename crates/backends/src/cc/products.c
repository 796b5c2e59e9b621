/* Our own kernels for matrix products, built with the routine's compiler and flags.

   Dot products and scaled-column sums, for products with one row or one column. The dot
   products take 32 partial sums (sum l takes the terms
   at t = l mod 32), then added pairwise; the compiler vectorizes the sums, and the order of the
   additions is the same as the portable version's in gemm.rs, so the result is too.

   Single-precision matrix products for machines with AVX-512, in the manner of BLIS: blocks of B
   packed into panels of NR columns, blocks of A into panels of MR rows, and a register-tiled
   MR x NR kernel. C += A B (or C = A B), every matrix with its own row and column strides.
   Packing buffers are per thread and kept between calls. Without AVX-512, rc_sgemm_available
   says so and rc_sgemm is left out; the caller then uses another product. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

#ifdef __AVX512F__
#include <immintrin.h>

#define MR 14
#define NR 32
#define KC 384
#define MC 168
#define NC 3072

int rc_sgemm_available(void) { return 1; }

static void pack_a(int64_t mc, int64_t kc, const float *a, int64_t rsa, int64_t csa, float *out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    int64_t rows = mc - i0 < MR ? mc - i0 : MR;
    for (int64_t p = 0; p < kc; ++p) {
      int64_t i = 0;
      for (; i < rows; ++i) out[i] = a[(i0 + i) * rsa + p * csa];
      for (; i < MR; ++i) out[i] = 0;
      out += MR;
    }
  }
}

static void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rsb, int64_t csb, float *out) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    if (rsb == 1 && csb != 1) {
      /* B's columns lie consecutively (a transposed operand): each is read along k and written
         down the panel, rather than gathering one cell of every column per k. */
      int64_t j = 0;
      for (; j < cols; ++j) {
        const float *column = b + (j0 + j) * csb;
        for (int64_t p = 0; p < kc; ++p) out[p * NR + j] = column[p];
      }
      for (; j < NR; ++j)
        for (int64_t p = 0; p < kc; ++p) out[p * NR + j] = 0;
      out += kc * NR;
      continue;
    }
    for (int64_t p = 0; p < kc; ++p) {
      const float *row = b + p * rsb + j0 * csb;
      if (csb == 1 && cols == NR) {
        memcpy(out, row, NR * sizeof(float));
      } else {
        int64_t j = 0;
        for (; j < cols; ++j) out[j] = row[j * csb];
        for (; j < NR; ++j) out[j] = 0;
      }
      out += NR;
    }
  }
}

/* Adds the tile's products to C, or stores them when `store` (the first block of a product
   that overwrites C). */
static void kernel(int64_t kc, const float *restrict a, const float *restrict b, float *c,
                   int64_t rsc, int64_t csc, int64_t rows, int64_t cols, int store) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
  if (rows == MR && cols == NR && csc == 1) {
    for (int i = 0; i < MR; ++i) {
      float *ci = c + i * rsc;
      if (store) {
        _mm512_storeu_ps(ci, acc[i][0]);
        _mm512_storeu_ps(ci + 16, acc[i][1]);
      } else {
        _mm512_storeu_ps(ci, _mm512_add_ps(_mm512_loadu_ps(ci), acc[i][0]));
        _mm512_storeu_ps(ci + 16, _mm512_add_ps(_mm512_loadu_ps(ci + 16), acc[i][1]));
      }
    }
  } else {
    float tile[MR][NR] __attribute__((aligned(64)));
    for (int i = 0; i < MR; ++i) {
      _mm512_store_ps(tile[i], acc[i][0]);
      _mm512_store_ps(tile[i] + 16, acc[i][1]);
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        c[i * rsc + j * csc] = store ? tile[i][j] : c[i * rsc + j * csc] + tile[i][j];
  }
}

static _Thread_local float *packed_a, *packed_b;

/* C += A B, or C = A B when `overwrite` (C is then never read). Returns 0, or -1 when the
   packing buffers cannot be allocated (C is then unchanged). */
int rc_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
             const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc, int64_t csc,
             int overwrite) {
  if (!packed_a) packed_a = aligned_alloc(64, sizeof(float) * MC * KC);
  if (!packed_b) packed_b = aligned_alloc(64, sizeof(float) * KC * (NC + NR));
  if (!packed_a || !packed_b) return -1;
  if (k == 0 && overwrite)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * rsc + j * csc] = 0;
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    int64_t nc = n - j0 < NC ? n - j0 : NC;
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      int64_t kc = k - p0 < KC ? k - p0 : KC;
      pack_b(kc, nc, b + p0 * rsb + j0 * csb, rsb, csb, packed_b);
      for (int64_t i0 = 0; i0 < m; i0 += MC) {
        int64_t mc = m - i0 < MC ? m - i0 : MC;
        pack_a(mc, kc, a + i0 * rsa + p0 * csa, rsa, csa, packed_a);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int64_t cols = nc - jr < NR ? nc - jr : NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int64_t rows = mc - ir < MR ? mc - ir : MR;
            kernel(kc, packed_a + ir * kc, packed_b + jr * kc,
                   c + (i0 + ir) * rsc + (j0 + jr) * csc, rsc, csc, rows, cols,
                   overwrite && p0 == 0);
          }
        }
      }
    }
  }
  return 0;
}
#else
int rc_sgemm_available(void) { return 0; }
#endif
