/* The definitions every generated routine starts with: the 128-bit word, choices between values,
   conversions between precisions with the same rounding as the interpreter, Threefry-4x32-20, and
   random bits as uniform values.

   No helper here reads memory, and none branches on anything but values every path has already
   computed: a choice between two values is a blend of their bits (rc_select and kin), never
   `?:` on them. So a generated expression, whose every read is an argument, reads everything
   unconditionally, and a vectorizer has no conditional read to turn into masked loads (which gcc
   12 gets wrong for AVX2 in some nests). */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { uint32_t w[4]; } rc_word;

/* `c ? a : b` for values of each compute type, as a blend of bits: no branch, no conditional
   read, whatever the compiler makes of it. */
static inline int64_t rc_iselect(int64_t c, int64_t a, int64_t b) {
  uint64_t m = (uint64_t)0 - (uint64_t)(c != 0);
  return (int64_t)(((uint64_t)a & m) | ((uint64_t)b & ~m));
}
static inline double rc_select(int64_t c, double a, double b) {
  uint64_t x, y, m = (uint64_t)0 - (uint64_t)(c != 0);
  memcpy(&x, &a, 8);
  memcpy(&y, &b, 8);
  x = (x & m) | (y & ~m);
  double r;
  memcpy(&r, &x, 8);
  return r;
}
static inline float rc_selectf(int64_t c, float a, float b) {
  uint32_t x, y, m = (uint32_t)0 - (uint32_t)(c != 0);
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  x = (x & m) | (y & ~m);
  float r;
  memcpy(&r, &x, 4);
  return r;
}
static inline rc_word rc_wselect(int64_t c, rc_word a, rc_word b) {
  uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
  rc_word r;
  for (int i = 0; i < 4; ++i) r.w[i] = (a.w[i] & m) | (b.w[i] & ~m);
  return r;
}

/* A gather's id: whether it selects a cell along an axis of `size` (an integer in 0..size; NaN,
   −1 and anything past the axis select none), and the position it selects, 0 where none, so
   that the read or store stays inside the axis whatever the data; comparisons as values. */
static inline int64_t rc_row_ok(double id, int64_t size) {
  return (int64_t)((id >= 0.0) & (id < (double)size) & (floor(id) == id));
}
static inline int64_t rc_row(double id, int64_t size) {
  /* The conversion sees only a value inside the axis, where C defines it. */
  return (int64_t)rc_select(rc_row_ok(id, size), id, 0.0);
}

/* The operations whose meaning is a choice, each argument computed once by the caller. */
/* NaN propagates through every choice as the interpreter (and numpy) has it: relu(NaN) is NaN,
   a gate at NaN passes the NaN on, max and min with a NaN operand are that NaN (ties keep the
   first operand). */
static inline double rc_relu(double x) { return rc_select(x <= 0, 0.0, x); }
static inline float rc_reluf(float x) { return rc_selectf(x <= 0, 0.0f, x); }
static inline int64_t rc_irelu(int64_t x) { return rc_iselect(x > 0, x, 0); }
static inline double rc_relu_gate(double a, double b) {
  return rc_select(a > 0, b, rc_select(a <= 0, 0.0, a));
}
static inline float rc_relu_gatef(float a, float b) {
  return rc_selectf(a > 0, b, rc_selectf(a <= 0, 0.0f, a));
}
static inline int64_t rc_irelu_gate(int64_t a, int64_t b) { return rc_iselect(a > 0, b, 0); }
static inline double rc_sat01_gate(double a, double b) {
  return rc_select((a > 0) & (a < 1), b, rc_select(a != a, a, 0.0));
}
static inline float rc_sat01_gatef(float a, float b) {
  return rc_selectf((a > 0) & (a < 1), b, rc_selectf(a != a, a, 0.0f));
}
static inline double rc_max(double a, double b) { return rc_select((a >= b) | (a != a), a, b); }
static inline float rc_maxf(float a, float b) { return rc_selectf((a >= b) | (a != a), a, b); }
static inline double rc_min(double a, double b) { return rc_select((a <= b) | (a != a), a, b); }
static inline float rc_minf(float a, float b) { return rc_selectf((a <= b) | (a != a), a, b); }
static inline int64_t rc_imax(int64_t a, int64_t b) { return rc_iselect(a > b, a, b); }
static inline int64_t rc_imin(int64_t a, int64_t b) { return rc_iselect(a < b, a, b); }
/* Clamped into [0, 1] as the interpreter clamps: NaN stays NaN and -0 stays -0 (fmin and fmax
   would make NaN 0). */
static inline double rc_sat01(double x) { return rc_select(x < 0, 0.0, rc_select(x > 1, 1.0, x)); }
static inline float rc_sat01f(float x) { return rc_selectf(x < 0, 0.0f, rc_selectf(x > 1, 1.0f, x)); }
static inline int64_t rc_isat01(int64_t x) { return rc_iselect(x < 0, 0, rc_iselect(x > 1, 1, x)); }

static inline float rc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0) {
    float magnitude = (float)mantissa * 5.9604644775390625e-8f; /* 2^-24 */
    memcpy(&bits, &magnitude, 4);
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* f32 to a float of 5 exponent bits and `m` significand bits, as its bits (f16: m = 10; fp8,
   E5M2: m = 2): rounded to nearest, ties to even, straight from f32 (through a wider format
   would round twice). From the largest finite value plus half a step up it overflows to infinity;
   below 2^-14 the step is the subnormals', 2^-(14 + m). */
static inline uint32_t rc_f32_to_e5(float f, uint32_t m) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 31) << (5 + m);
  uint32_t magnitude = x & 0x7FFFFFFFu;
  uint32_t infinity = 0x1Fu << m;
  if (magnitude > 0x7F800000u) return sign | infinity | (1u << (m - 1));
  uint32_t overflow = (142u << 23) | (((1u << m) - 1) << (23 - m)) | (1u << (22 - m));
  if (magnitude >= overflow) return sign | infinity;
  if (magnitude < 0x38800000u) {
    float a;
    memcpy(&a, &magnitude, 4);
    return sign | (uint32_t)nearbyintf(a * (float)(1u << (14 + m)));
  }
  uint32_t bits = ((magnitude >> 23) - 112) << m | ((magnitude & 0x7FFFFFu) >> (23 - m));
  uint32_t rest = magnitude & ((1u << (23 - m)) - 1);
  uint32_t half = 1u << (22 - m);
  if (rest > half || (rest == half && (bits & 1u))) bits += 1;
  return sign | bits;
}

static inline uint16_t rc_f32_to_f16(float f) { return (uint16_t)rc_f32_to_e5(f, 10); }

static inline float rc_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t rc_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* fp8 (E5M2) is the upper byte of the f16 of the same value. */
static inline float rc_fp8_to_f32(uint8_t b) { return rc_f16_to_f32((uint16_t)((uint32_t)b << 8)); }

static inline uint8_t rc_f32_to_fp8(float f) { return (uint8_t)rc_f32_to_e5(f, 2); }

/* Floats into integers truncate toward zero and saturate; NaN is 0. (Branches on the value every
   path reads: C's conversion of an out-of-range float is undefined, so it must not run.) */
static inline int64_t rc_f2i(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}

static inline int64_t rc_iadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t rc_isub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t rc_imul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
/* Compiled code does not trap: an integer division or remainder by zero gives 0. The divisor is
   made safe first and the special cases chosen after, so no branch skips a computed value. */
static inline int64_t rc_idiv(int64_t a, int64_t b) {
  int64_t special = (b == 0) | (b == -1);
  int64_t q = a / rc_iselect(special, 1, b);
  return rc_iselect(b == 0, 0, rc_iselect(b == -1, (int64_t)(0 - (uint64_t)a), q));
}
static inline int64_t rc_imod(int64_t a, int64_t b) {
  int64_t special = (b == 0) | (b == -1);
  int64_t r = a % rc_iselect(special, 1, b);
  r = rc_iselect((r != 0) & ((r < 0) != (b < 0)), r + b, r);
  return rc_iselect(special, 0, r);
}
static inline int64_t rc_ipow(int64_t a, int64_t b) {
  if (b < 0) return rc_f2i(pow((double)a, (double)b));
  uint64_t result = 1, base = (uint64_t)a;
  while (b > 0) {
    if (b & 1) result *= base;
    base *= base;
    b >>= 1;
  }
  return (int64_t)result;
}
/* u64 cells hold their bits in int64_t; these read them as unsigned where a sign matters, as the
   interpreter does (Binop::apply_int_in). A division or remainder by zero gives 0, as above. */
static inline int64_t rc_iudiv(int64_t a, int64_t b) {
  uint64_t q = (uint64_t)a / (uint64_t)rc_iselect(b == 0, 1, b);
  return rc_iselect(b == 0, 0, (int64_t)q);
}
static inline int64_t rc_iumod(int64_t a, int64_t b) {
  uint64_t r = (uint64_t)a % (uint64_t)rc_iselect(b == 0, 1, b);
  return rc_iselect(b == 0, 0, (int64_t)r);
}
static inline int64_t rc_iupow(int64_t a, int64_t b) {
  uint64_t result = 1, base = (uint64_t)a, exponent = (uint64_t)b;
  while (exponent > 0) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return (int64_t)result;
}
static inline int64_t rc_iumax(int64_t a, int64_t b) { return rc_iselect((uint64_t)a > (uint64_t)b, a, b); }
static inline int64_t rc_iumin(int64_t a, int64_t b) { return rc_iselect((uint64_t)a < (uint64_t)b, a, b); }
static inline int64_t rc_iult(int64_t a, int64_t b) { return (int64_t)((uint64_t)a < (uint64_t)b); }
static inline int64_t rc_iurelu_gate(int64_t a, int64_t b) { return rc_iselect(a != 0, b, 0); }
/* A float into u64's range, as Rust's `as u64`: NaN and negatives 0, beyond it the largest. */
static inline int64_t rc_f2u(double x) {
  if (x != x || x <= 0) return 0;
  if (x >= 18446744073709551616.0) return -1;
  return (int64_t)(uint64_t)x;
}
static inline double rc_fmod(double a, double b) {
  double r = fmod(a, b);
  return rc_select((r != 0) & ((r < 0) != (b < 0)), r + b, r);
}
static inline float rc_fmodf(float a, float b) {
  float r = fmodf(a, b);
  return rc_selectf((r != 0) & ((r < 0) != (b < 0)), r + b, r);
}

static inline rc_word rc_word_bits(uint32_t u) {
  rc_word r = {{u, 0, 0, 0}};
  return r;
}
static inline rc_word rc_word_u32(uint32_t u) {
  rc_word r = {{u, u ^ 0x9E3779B9u, u ^ 0x6C078965u, u ^ ((u << 16) | (u >> 16))}};
  return r;
}
static inline rc_word rc_word_i64(int64_t i) {
  uint64_t u = (uint64_t)i;
  rc_word r = {{(uint32_t)u, (uint32_t)(u >> 32), 0, 0}};
  return r;
}
static inline rc_word rc_word_f64(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  rc_word r = {{(uint32_t)u, (uint32_t)(u >> 32), 0, 0}};
  return r;
}
static inline rc_word rc_word_f32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return rc_word_bits(u);
}

static inline uint32_t rc_rotl(uint32_t x, uint32_t r) { return (x << r) | (x >> (32 - r)); }

/* `rounds` rounds, with a key injection after every fourth round and after the last. */
static inline rc_word rc_threefry(rc_word key, rc_word counter, int rounds) {
  static const uint32_t rotations[8][2] = {{10, 26}, {11, 21}, {13, 27}, {23, 5},
                                           {6, 20},  {17, 11}, {25, 10}, {18, 20}};
  uint32_t ks[5] = {key.w[0], key.w[1], key.w[2], key.w[3],
                    0x1BD11BDAu ^ key.w[0] ^ key.w[1] ^ key.w[2] ^ key.w[3]};
  uint32_t x[4];
  for (int i = 0; i < 4; ++i) x[i] = counter.w[i] + ks[i];
  for (int round = 0; round < rounds; ++round) {
    uint32_t r0 = rotations[round % 8][0], r1 = rotations[round % 8][1];
    if (round % 2 == 0) {
      x[0] += x[1]; x[1] = rc_rotl(x[1], r0) ^ x[0];
      x[2] += x[3]; x[3] = rc_rotl(x[3], r1) ^ x[2];
    } else {
      x[0] += x[3]; x[3] = rc_rotl(x[3], r0) ^ x[0];
      x[2] += x[1]; x[1] = rc_rotl(x[1], r1) ^ x[2];
    }
    if (round % 4 == 3 || round + 1 == rounds) {
      uint32_t s = (uint32_t)(round / 4 + 1);
      for (int i = 0; i < 4; ++i) x[i] += ks[(s + i) % 5];
      x[3] += s;
    }
  }
  rc_word r = {{x[0], x[1], x[2], x[3]}};
  return r;
}

/* The k-th uniform value a word makes in each precision (see value.rs). */
static inline uint32_t rc_half_word(rc_word w, int k) { return (w.w[k / 2] >> (16 * (k % 2))) & 0xFFFFu; }
static inline uint64_t rc_double_word(rc_word w, int k) {
  return (uint64_t)w.w[2 * k] | ((uint64_t)w.w[2 * k + 1] << 32);
}
static inline float rc_uniform_f32(rc_word w, int k) { return (float)(w.w[k] >> 8) * 5.9604644775390625e-8f; }
static inline double rc_uniform_f64(rc_word w, int k) {
  return (double)(rc_double_word(w, k) >> 11) * 1.1102230246251565404e-16;
}
static inline float rc_uniform_f16(rc_word w, int k) { return (float)(rc_half_word(w, k) >> 5) * 4.8828125e-4f; }
static inline float rc_uniform_bf16(rc_word w, int k) { return (float)(rc_half_word(w, k) >> 8) * 3.90625e-3f; }
static inline float rc_uniform_fp8(rc_word w, int k) { return (float)((w.w[k / 4] >> (8 * (k % 4) + 5)) & 7u) * 0.125f; }
static inline int64_t rc_uniform_u16(rc_word w, int k) { return (int64_t)rc_half_word(w, k); }
static inline int64_t rc_uniform_u64(rc_word w, int k) { return (int64_t)rc_double_word(w, k); }
static inline int64_t rc_uniform_u8(rc_word w, int k) { return (int64_t)((w.w[k / 4] >> (8 * (k % 4))) & 0xFFu); }
static inline int64_t rc_uniform_i8(rc_word w, int k) { return (int64_t)(int8_t)rc_uniform_u8(w, k); }
static inline int64_t rc_uniform_i32(rc_word w, int k) { return (int64_t)(int32_t)w.w[k]; }
static inline int64_t rc_uniform_u32(rc_word w, int k) { return (int64_t)w.w[k]; }
static inline int64_t rc_uniform_i64(rc_word w, int k) { return (int64_t)rc_double_word(w, k); }
static inline rc_word rc_uniform_uint4x32(rc_word w, int k) { (void)k; return w; }

/* The transcendental functions of f32 compute precision, as crates/ir/src/fmath.rs defines them
   (read its documentation): the same double operations in the same order, so that compiled code
   and the interpreter agree bit for bit on every target. Only IEEE additions, multiplications,
   divisions and integer operations on bits, no library call, no table, and every choice a blend
   of computed values: a loop calling them vectorizes. Each is inlined wherever it is called
   (clang leaves a function called twice, as sin and cos call their reduction, out of line,
   which keeps the calling loops from vectorizing). */
#define RC_MATH static inline __attribute__((always_inline))
RC_MATH uint64_t rc_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
RC_MATH double rc_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}
RC_MATH double rc_fabs(double x) { return rc_from_bits(rc_bits(x) & 0x7FFFFFFFFFFFFFFFull); }
RC_MATH float rc_fabsf(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u &= 0x7FFFFFFFu;
  memcpy(&x, &u, 4);
  return x;
}
/* A blend by a mask of all ones or all zeros. */
RC_MATH double rc_blend(uint64_t m, double a, double b) {
  return rc_from_bits((rc_bits(a) & m) | (rc_bits(b) & ~m));
}
#define RC_ROUNDER 6755399441055744.0
#define RC_ROUNDER4 18014398509481984.0
#define RC_INV_LN2 1.4426950408889634
#define RC_LN2_HI 0.6931471803691238
#define RC_LN2_LO 1.9082149292705877e-10
#define RC_LN2 0.6931471805599453
#define RC_HALF_PI 1.5707963267948966
#define RC_SQRT_HALF_BITS 0x3FE6A09E667F3BCDull
#define RC_ONE_BITS 0x3FF0000000000000ull

RC_MATH double rc_expm1_poly(double r) {
  double p = 1.0 / 362880.0;
  p = 1.0 / 40320.0 + r * p;
  p = 1.0 / 5040.0 + r * p;
  p = 1.0 / 720.0 + r * p;
  p = 1.0 / 120.0 + r * p;
  p = 1.0 / 24.0 + r * p;
  p = 1.0 / 6.0 + r * p;
  p = 0.5 + r * p;
  p = 1.0 + r * p;
  return r * p;
}
/* 2^k from the bits of k + 1.5*2^52. */
RC_MATH double rc_power_of_two(uint64_t k_bits) { return rc_from_bits((k_bits + 1023) << 52); }
typedef struct { double scale, expm1; } rc_exp_parts;
RC_MATH rc_exp_parts rc_exp_split(double y) {
  double shifted = y * RC_INV_LN2 + RC_ROUNDER;
  double k = shifted - RC_ROUNDER;
  double r = (y - k * RC_LN2_HI) - k * RC_LN2_LO;
  rc_exp_parts parts = {rc_power_of_two(rc_bits(shifted)), rc_expm1_poly(r)};
  return parts;
}
RC_MATH double rc_exp2_f64(double y) {
  double shifted = y + RC_ROUNDER;
  double r = (y - (shifted - RC_ROUNDER)) * RC_LN2;
  return rc_power_of_two(rc_bits(shifted)) * (1.0 + rc_expm1_poly(r));
}
/* Arguments are clamped as floats: gcc vectorizes a float's blend at every x86-64 level. */
RC_MATH float rc_clampf(float x, float low, float high) {
  x = rc_selectf(x < low, low, x);
  return rc_selectf(x > high, high, x);
}
/* exp in float throughout, as fmath's `exp`: x = k ln2 + r, e^r = 1 + (r + r^2 u(r)), then 2^k
   in two halves, each a normal float. */
RC_MATH uint32_t rc_bitsf(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
RC_MATH float rc_power_of_twof(int32_t k) {
  uint32_t u = (uint32_t)(k + 127) << 23;
  float x;
  memcpy(&x, &u, 4);
  return x;
}
RC_MATH float rc_expf(float x) {
  x = rc_clampf(x, -104.0f, 89.0f);
  float shifted = x * 1.44269502f + 12582912.0f;
  float k = shifted - 12582912.0f;
  float r = (x - k * 0.69314575f) - k * 1.4286068e-6f;
  float u = 1.3814571e-3f;
  u = 8.368731e-3f + r * u;
  u = 4.166839e-2f + r * u;
  u = 1.6666521e-1f + r * u;
  u = 4.9999994e-1f + r * u;
  float e_r = 1.0f + (r * r * u + r);
  int32_t k_int = (int32_t)(rc_bitsf(shifted) - rc_bitsf(12582912.0f));
  int32_t half = k_int >> 1;
  return (e_r * rc_power_of_twof(half)) * rc_power_of_twof(k_int - half);
}
RC_MATH float rc_exp2f(float x) { return (float)rc_exp2_f64((double)rc_clampf(x, -160.0f, 140.0f)); }
RC_MATH float rc_tanhf(float x) {
  double d = (double)x;
  float abs_x = rc_fabsf(x);
  double a = (double)rc_selectf(abs_x > 20.0f, 20.0f, abs_x);
  rc_exp_parts parts = rc_exp_split(a + a);
  double em1 = parts.scale * parts.expm1 + (parts.scale - 1.0);
  double t = em1 / (em1 + 2.0);
  return (float)rc_from_bits(rc_bits(t) | (rc_bits(d) & 0x8000000000000000ull));
}
typedef struct { double ln_m, e; } rc_log_parts;
RC_MATH rc_log_parts rc_log_split(double d) {
  uint64_t u = rc_bits(d) + (RC_ONE_BITS - RC_SQRT_HALF_BITS);
  double e = rc_from_bits((u >> 52) | 0x4330000000000000ull) - 4503599627371519.0;
  double m = rc_from_bits((u & 0x000FFFFFFFFFFFFFull) + RC_SQRT_HALF_BITS);
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double r = 2.0 / 15.0;
  r = 2.0 / 13.0 + z * r;
  r = 2.0 / 11.0 + z * r;
  r = 2.0 / 9.0 + z * r;
  r = 2.0 / 7.0 + z * r;
  r = 2.0 / 5.0 + z * r;
  r = 2.0 / 3.0 + z * r;
  rc_log_parts parts = {(s + s) + s * (z * r), e};
  return parts;
}
RC_MATH double rc_nan(void) { return rc_from_bits(0x7FF8000000000000ull); }
RC_MATH double rc_log_special(double x, double core) {
  double special = rc_select(x == 0.0, -HUGE_VAL, rc_select(x < 0.0, rc_nan(), x));
  return rc_select((x > 0.0) & (x < HUGE_VAL), core, special);
}
/* log in float throughout, as fmath's `log`: x = 2^k m, m in [sqrt(1/2), sqrt(2)) (a subnormal x
   scaled by 2^25 first), f = m - 1, s = f / (2 + f), ln m = f - f^2/2 + s (f^2/2 + R(s^2)). */
RC_MATH float rc_from_bitsf(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
RC_MATH float rc_logf(float x) {
  int64_t subnormal = x < 0x1p-126f;
  float scaled = rc_selectf(subnormal, x * 0x1p25f, x);
  uint32_t u = rc_bitsf(scaled) + (0x3F800000u - 0x3F3504F3u);
  float k = (float)((int32_t)(u >> 23) - 127) - rc_selectf(subnormal, 25.0f, 0.0f);
  float f = rc_from_bitsf((u & 0x007FFFFFu) + 0x3F3504F3u) - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s;
  float w = z * z;
  float r = z * (0x1.555554p-1f + w * 0x1.23d3dcp-2f) + w * (0x1.999c26p-2f + w * 0x1.f13c4cp-3f);
  float half_square = 0.5f * f * f;
  float core = s * (half_square + r) + k * 0x1.2fefa2p-17f - half_square + f + k * 0x1.62e3p-1f;
  float special = rc_selectf(x == 0.0f, -HUGE_VALF, rc_selectf(x < 0.0f, rc_from_bitsf(0x7FC00000u), x));
  return rc_selectf((x > 0.0f) & (x < HUGE_VALF), core, special);
}
RC_MATH float rc_log2f(float x) {
  double d = (double)x;
  rc_log_parts parts = rc_log_split(d);
  return (float)rc_log_special(d, parts.e + parts.ln_m * RC_INV_LN2);
}
/* One piece of 2/pi times a (exact), reduced by a multiple of 4 (a product of 2^54 or more is
   one), added to a sum whose rounding errors are kept apart (Knuth's two-sum). */
typedef struct { double sum, error; } rc_reduction;
RC_MATH rc_reduction rc_reduce_piece(rc_reduction acc, double a, double piece) {
  double p = a * piece;
  /* p < 2^54, told by its bits (p is not negative), as gcc vectorizes on every x86-64 level. */
  uint64_t small = (uint64_t)0 - ((rc_bits(p) - 0x4350000000000000ull) >> 63);
  double reduced = rc_from_bits(rc_bits(p - ((p + RC_ROUNDER4) - RC_ROUNDER4)) & small);
  double next = acc.sum + reduced;
  double back = next - acc.sum;
  acc.error += (acc.sum - (next - back)) + (reduced - back);
  acc.sum = next;
  return acc;
}
/* sin(a + quarter*pi/2) for a nonnegative finite a, a*(2/pi) reduced exactly for every float. */
RC_MATH double rc_sin_quadrant(double a, uint64_t quarter) {
  rc_reduction acc = {0.0, 0.0};
  acc = rc_reduce_piece(acc, a, 0.6366197690367699);
  acc = rc_reduce_piece(acc, a, 3.3308114738561656e-09);
  acc = rc_reduce_piece(acc, a, 2.276010047810136e-18);
  acc = rc_reduce_piece(acc, a, 2.5268260189002822e-26);
  acc = rc_reduce_piece(acc, a, 1.6682867657019525e-34);
  acc = rc_reduce_piece(acc, a, 1.158871328288855e-43);
  acc = rc_reduce_piece(acc, a, 7.053959174404295e-52);
  double sum = acc.sum, error = acc.error;
  double shifted = sum + RC_ROUNDER;
  double turns = (sum - (shifted - RC_ROUNDER)) + error;
  double r = turns * RC_HALF_PI;
  uint64_t quadrant = rc_bits(shifted) + quarter;
  double z = r * r;
  double sp = -1.0 / 39916800.0;
  sp = 1.0 / 362880.0 + z * sp;
  sp = -1.0 / 5040.0 + z * sp;
  sp = 1.0 / 120.0 + z * sp;
  sp = -1.0 / 6.0 + z * sp;
  double sine = r + r * (z * sp);
  double cp = 1.0 / 479001600.0;
  cp = -1.0 / 3628800.0 + z * cp;
  cp = 1.0 / 40320.0 + z * cp;
  cp = -1.0 / 720.0 + z * cp;
  cp = 1.0 / 24.0 + z * cp;
  cp = -0.5 + z * cp;
  double cosine = 1.0 + z * cp;
  double value = rc_blend((uint64_t)0 - (quadrant & 1), cosine, sine);
  return rc_from_bits(rc_bits(value) ^ ((quadrant & 2) << 62));
}
RC_MATH float rc_sinf(float x) {
  double d = (double)x;
  double a = rc_fabs(d);
  double value = rc_sin_quadrant(a, 0);
  float signed_value = (float)rc_from_bits(rc_bits(value) ^ (rc_bits(d) & 0x8000000000000000ull));
  return rc_selectf(rc_fabsf(x) < HUGE_VALF, signed_value, x * 0.0f);
}
RC_MATH float rc_cosf(float x) {
  double d = (double)x;
  double a = rc_fabs(d);
  return rc_selectf(rc_fabsf(x) < HUGE_VALF, (float)rc_sin_quadrant(a, 1), x * 0.0f);
}
/* Masks for doubles are made from their bits (gcc vectorizes a double's comparison only from
   SSE4.1 on), masks for floats by comparing floats; no choice mixes the two. */
RC_MATH uint64_t rc_below(uint64_t u, uint64_t limit) { return (uint64_t)0 - ((u - limit) >> 63); }
RC_MATH uint32_t rc_fbits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
RC_MATH float rc_ffrom_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
RC_MATH float rc_powf(float x, float y) {
  double a = rc_fabs((double)x);
  uint64_t a_bits = rc_bits(a);
  rc_log_parts parts = rc_log_split(a);
  double log2_a = parts.e + parts.ln_m * RC_INV_LN2;
  log2_a = rc_blend(rc_below(a_bits, 1), -HUGE_VAL, log2_a);
  log2_a = rc_blend(rc_below(0x7FEFFFFFFFFFFFFFull, a_bits), a, log2_a);
  double t = (double)y * log2_a;
  uint64_t t_bits = rc_bits(t), t_magnitude = t_bits & 0x7FFFFFFFFFFFFFFFull;
  uint64_t not_nan = rc_below(t_magnitude, 0x7FF0000000000001ull);
  uint64_t negative_t = (uint64_t)0 - (t_bits >> 63);
  t = rc_blend(negative_t & not_nan & rc_below(0x406CC00000000000ull, t_magnitude), -230.0, t);
  t = rc_blend(~negative_t & not_nan & rc_below(0x4067C00000000000ull, t_magnitude), 190.0, t);
  float magnitude = (float)rc_exp2_f64(t);
  float y_abs = rc_fabsf(y);
  int32_t big = y_abs >= 8388608.0f;
  float y_shifted = rc_selectf(big, 0.0f, y_abs) + 8388608.0f;
  int32_t whole = (y_shifted - 8388608.0f) == y_abs;
  uint32_t odd = ((uint32_t)0 - (uint32_t)whole) & ((uint32_t)0 - (rc_fbits(y_shifted) & 1));
  odd |= ((uint32_t)0 - (uint32_t)(big & (y_abs < 16777216.0f))) & ((uint32_t)0 - (rc_fbits(y) & 1));
  float result = rc_ffrom_bits(rc_fbits(magnitude) | (rc_fbits(x) & odd & 0x80000000u));
  result = rc_selectf((x < 0.0f) & (x > -HUGE_VALF) & !(big | whole), (float)rc_nan(), result);
  result = rc_selectf((x == 1.0f) | (y == 0.0f) | ((x == -1.0f) & (y_abs == HUGE_VALF)), 1.0f, result);
  result = rc_selectf(y == 3.0f, (x * x) * x, result);
  result = rc_selectf(y == -1.0f, 1.0f / x, result);
  result = rc_selectf(y == 1.0f, x, result);
  return rc_selectf(y == 2.0f, x * x, result);
}
/* The strength-reduced powers with a constant exponent, their argument computed once. */
RC_MATH float rc_squaref(float x) { return x * x; }
RC_MATH float rc_cubef(float x) { return (x * x) * x; }
RC_MATH double rc_square(double x) { return x * x; }
/* f64 pow: the square is the correctly rounded product, which the library's pow need not be. */
RC_MATH double rc_pow(double x, double y) { return rc_select(y == 2.0, x * x, pow(x, y)); }
