// The prelude's functions on f64, for a routine holding f64 tensors (on a device with shader-f64
// and shader-int64): f64 values compute in f64, as the interpreter computes them, and so do the
// routine's conditions (rc_cond is f64). The GPU's own exp, log, sin and the like take 16- and
// 32-bit floats only, so these compute them: range reduction, then a Taylor polynomial whose
// cut-off term lies below 1e-17 of the result; within a few units in the last place of the
// correctly rounded value.

fn rc_nan_d() -> f64 { return bitcast<f64>(0x7ff8000000000000lu); }
fn rc_inf_d() -> f64 { return bitcast<f64>(0x7ff0000000000000lu); }
fn rc_isnan_d(x: f64) -> bool {
  return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu;
}
fn rc_isinf_d(x: f64) -> bool {
  return (bitcast<u64>(x) & 0x7ffffffffffffffflu) == 0x7ff0000000000000lu;
}
// rc_cond is f64.
fn rc_cond_isnan(x: f64) -> bool { return rc_isnan_d(x); }

fn rc_relu_d(x: f64) -> f64 { return select(select(x, 0.0lf, x <= 0.0lf), x, rc_isnan_d(x)); }
fn rc_relu_gate_d(a: f64, b: f64) -> f64 {
  return select(select(0.0lf, b, a > 0.0lf), a, rc_isnan_d(a));
}
fn rc_sat01_gate_d(a: f64, b: f64) -> f64 {
  return select(select(0.0lf, b, a > 0.0lf && a < 1.0lf), a, rc_isnan_d(a));
}
fn rc_max_d(a: f64, b: f64) -> f64 {
  return select(b, a, rc_isnan_d(a) || (!rc_isnan_d(b) && a >= b));
}
fn rc_min_d(a: f64, b: f64) -> f64 {
  return select(b, a, rc_isnan_d(a) || (!rc_isnan_d(b) && a <= b));
}
fn rc_sat01_d(x: f64) -> f64 {
  return select(select(select(x, 1.0lf, x > 1.0lf), 0.0lf, x < 0.0lf), x, rc_isnan_d(x));
}
fn rc_truth_d(c: bool) -> f64 { return select(0.0lf, 1.0lf, c); }
fn rc_fmod_d(a: f64, b: f64) -> f64 {
  let r = fma(-b, trunc(a / b), a);
  return select(r, r + b, r != 0.0lf && ((r < 0.0lf) != (b < 0.0lf)));
}

// Floats into integers as the interpreter converts them: truncated and saturated into 64 bits
// (NaN 0), then wrapped to rc_int. A conversion out of range has no defined value in SPIR-V.
fn rc_f2i64_d(x: f64) -> i64 {
  if (rc_isnan_d(x)) { return 0li; }
  if (x >= 9223372036854775808.0lf) { return 9223372036854775807li; }
  if (x < -9223372036854775808.0lf) { return -9223372036854775807li - 1li; }
  return i64(x);
}
fn rc_f2i_d(x: f64) -> rc_int { return rc_int(rc_f2i64_d(x)); }
// Into u64's bits: truncated and saturated into [0, 2^64), NaN 0.
fn rc_f2u_d(x: f64) -> i64 {
  if (!(x > 0.0lf) || rc_isnan_d(x)) { return 0li; }
  if (x >= 18446744073709551616.0lf) { return -1li; }
  return bitcast<i64>(u64(x));
}
fn rc_u2f_d(v: i64) -> f64 { return f64(bitcast<u64>(v)); }

// An f64 as a 128-bit word, as the interpreter makes one: its bits, low half first.
fn rc_word_f64(x: f64) -> vec4<u32> {
  let bits = bitcast<u64>(x);
  return vec4<u32>(u32(bits & 0xFFFFFFFFlu), u32(bits >> 32u), 0u, 0u);
}
// The k-th uniform f64 of a word: the top 53 bits of its k-th 64-bit half, exact.
fn rc_uniform_f64(w: vec4<u32>, k: u32) -> f64 {
  let bits = u64(w[2u * k]) | (u64(w[2u * k + 1u]) << 32u);
  return f64(bits >> 11u) * 1.1102230246251565e-16lf;
}

// 2^n for n in -1022..1023.
fn rc_pow2_d(n: i32) -> f64 { return bitcast<f64>(u64(n + 1023) << 52u); }

// e^r for |r| <= ln(2)/2, by its Taylor polynomial of degree 13.
fn rc_exp_reduced_d(r: f64) -> f64 {
  var p = 1.6059043836821613e-10lf;
  p = fma(p, r, 2.08767569878681e-9lf);
  p = fma(p, r, 2.505210838544172e-8lf);
  p = fma(p, r, 2.755731922398589e-7lf);
  p = fma(p, r, 2.7557319223985893e-6lf);
  p = fma(p, r, 2.48015873015873e-5lf);
  p = fma(p, r, 1.984126984126984e-4lf);
  p = fma(p, r, 1.3888888888888889e-3lf);
  p = fma(p, r, 8.333333333333333e-3lf);
  p = fma(p, r, 4.1666666666666664e-2lf);
  p = fma(p, r, 0.16666666666666666lf);
  p = fma(p, r, 0.5lf);
  p = fma(p, r, 1.0lf);
  return fma(p, r, 1.0lf);
}

// y · 2^k, for k in -1080..1030, rounded once (two exact steps of at most 2^±540, then one that
// may round into the subnormals).
fn rc_scale_d(y: f64, k: i32) -> f64 {
  let half = k / 2;
  return y * rc_pow2_d(half) * rc_pow2_d(k - half);
}

fn rc_exp_d(x: f64) -> f64 {
  if (rc_isnan_d(x)) { return x; }
  if (x > 709.782712893384lf) { return rc_inf_d(); }
  if (x < -745.1332191019412lf) { return 0.0lf; }
  let k = round(x * 1.4426950408889634lf);
  // ln 2 in two parts, the first of 32 bits, so that k times it is exact.
  let r = fma(-k, 1.9082149292705877e-10lf, fma(-k, 6.93147180369123816490e-01lf, x));
  return rc_scale_d(rc_exp_reduced_d(r), i32(k));
}

fn rc_exp2_d(x: f64) -> f64 {
  if (rc_isnan_d(x)) { return x; }
  if (x >= 1024.0lf) { return rc_inf_d(); }
  if (x < -1080.0lf) { return 0.0lf; }
  let k = round(x);
  return rc_scale_d(rc_exp_reduced_d((x - k) * 0.6931471805599453lf), i32(k));
}

// e^y - 1, without the cancellation of e^y - 1 near 0.
fn rc_expm1_d(y: f64) -> f64 {
  if (abs(y) >= 0.34657359027997264lf) { return rc_exp_d(y) - 1.0lf; }
  var p = 4.779477332387385e-14lf;
  p = fma(p, y, 7.647163731819816e-13lf);
  p = fma(p, y, 1.1470745597729725e-11lf);
  p = fma(p, y, 1.6059043836821613e-10lf);
  p = fma(p, y, 2.08767569878681e-9lf);
  p = fma(p, y, 2.505210838544172e-8lf);
  p = fma(p, y, 2.755731922398589e-7lf);
  p = fma(p, y, 2.7557319223985893e-6lf);
  p = fma(p, y, 2.48015873015873e-5lf);
  p = fma(p, y, 1.984126984126984e-4lf);
  p = fma(p, y, 1.3888888888888889e-3lf);
  p = fma(p, y, 8.333333333333333e-3lf);
  p = fma(p, y, 4.1666666666666664e-2lf);
  p = fma(p, y, 0.16666666666666666lf);
  p = fma(p, y, 0.5lf);
  return fma(p * y, y, y);
}

// For a positive, finite x = 2^k · m with m in [√2/2, √2): k, and ln m as 2 atanh(s) with
// s = (m - 1) / (m + 1), |s| <= 0.172, by the series 2s (1 + s²/3 + s⁴/5 + …) to s²⁰/21.
struct RcLog {
  k: f64,
  log_m: f64,
}
fn rc_log_parts_d(x: f64) -> RcLog {
  var bits = bitcast<u64>(x);
  var k = 0;
  if (bits < 0x0010000000000000lu) {
    // Subnormal: scaled by 2^54 first.
    bits = bitcast<u64>(x * 18014398509481984.0lf);
    k = -54;
  }
  k += i32(bits >> 52u) - 1023;
  var m = bitcast<f64>((bits & 0x000ffffffffffffflu) | 0x3ff0000000000000lu);
  if (m > 1.4142135623730951lf) {
    m = m * 0.5lf;
    k += 1;
  }
  let f = m - 1.0lf;
  let s = f / (2.0lf + f);
  let z = s * s;
  var p = 1.0lf / 21.0lf;
  p = fma(p, z, 1.0lf / 19.0lf);
  p = fma(p, z, 1.0lf / 17.0lf);
  p = fma(p, z, 1.0lf / 15.0lf);
  p = fma(p, z, 1.0lf / 13.0lf);
  p = fma(p, z, 1.0lf / 11.0lf);
  p = fma(p, z, 1.0lf / 9.0lf);
  p = fma(p, z, 1.0lf / 7.0lf);
  p = fma(p, z, 1.0lf / 5.0lf);
  p = fma(p, z, 1.0lf / 3.0lf);
  // 2s + 2s·z·p, the leading term kept apart.
  let log_m = fma(2.0lf * s, z * p, 2.0lf * s);
  return RcLog(f64(k), log_m);
}

// Whether x is NaN, not positive or +inf, whose logarithms the series does not give, and their
// logarithms: NaN for NaN and a negative x, -inf for 0, +inf for +inf.
fn rc_log_special_d(x: f64) -> bool {
  return rc_isnan_d(x) || x <= 0.0lf || rc_isinf_d(x);
}
fn rc_log_special_value_d(x: f64) -> f64 {
  if (rc_isnan_d(x) || x < 0.0lf) { return rc_nan_d(); }
  if (x == 0.0lf) { return -rc_inf_d(); }
  return x;
}

fn rc_log_d(x: f64) -> f64 {
  if (rc_log_special_d(x)) { return rc_log_special_value_d(x); }
  let parts = rc_log_parts_d(x);
  // ln 2 in two parts: k times the first, of 32 bits, is exact.
  return fma(parts.k, 6.93147180369123816490e-01lf, fma(parts.k, 1.9082149292705877e-10lf,
    parts.log_m));
}

fn rc_log2_d(x: f64) -> f64 {
  if (rc_log_special_d(x)) { return rc_log_special_value_d(x); }
  let parts = rc_log_parts_d(x);
  return fma(parts.log_m, 1.4426950408889634lf, parts.k);
}

// sin and cos of x reduced to r = x - q·π/2, |r| <= π/4, π/2 in three parts (fdlibm's), each
// product subtracted with one rounding; then their Taylor polynomials in r² to r¹⁷ and r¹⁸.
fn rc_sin_reduced_d(r: f64) -> f64 {
  let z = r * r;
  var p = 2.8114572543455206e-15lf;
  p = fma(p, z, -7.647163731819816e-13lf);
  p = fma(p, z, 1.6059043836821613e-10lf);
  p = fma(p, z, -2.505210838544172e-8lf);
  p = fma(p, z, 2.7557319223985893e-6lf);
  p = fma(p, z, -1.984126984126984e-4lf);
  p = fma(p, z, 8.333333333333333e-3lf);
  p = fma(p, z, -0.16666666666666666lf);
  return fma(r * z, p, r);
}
fn rc_cos_reduced_d(r: f64) -> f64 {
  let z = r * r;
  var p = 1.5619206968586225e-16lf;
  p = fma(p, z, -4.779477332387385e-14lf);
  p = fma(p, z, 1.1470745597729725e-11lf);
  p = fma(p, z, -2.08767569878681e-9lf);
  p = fma(p, z, 2.755731922398589e-7lf);
  p = fma(p, z, -2.48015873015873e-5lf);
  p = fma(p, z, 1.3888888888888889e-3lf);
  p = fma(p, z, -4.1666666666666664e-2lf);
  p = fma(p, z, 0.5lf);
  return fma(-z, p, 1.0lf);
}
// The reduced argument and q mod 4.
struct RcQuadrant {
  r: f64,
  q: i32,
}

// Bits p to p + 31 of 2/π after the binary point (0 first), zeros before it.
fn rc_two_over_pi_bits(p: i32) -> u32 {
  let t = array<u32, 40>(
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu,
    0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu,
    0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu,
    0xbdf9283bu, 0x1ff897ffu, 0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u,
    0x4f463f66u, 0x9e5fea2du, 0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u,
    0x1f8d5d08u, 0x56033046u, 0xfc7b6babu, 0xf0cfbc20u, 0x9af4361du);
  if (p <= -32) { return 0u; }
  if (p < 0) { return t[0] >> u32(-p); }
  let i = p / 32;
  let shift = u32(p % 32);
  if (shift == 0u) { return t[i]; }
  return (t[i] << shift) | (t[i + 1] >> (32u - shift));
}

// |x| from 2^20 on (finite): |x|·2/π mod 4 in integers, as fdlibm's __kernel_rem_pio2 reduces.
// With |x| = m·2^(e-52), the bits of 2/π from e - 54 on (those before make multiples of 4) in a
// window of 160, times m, mod 2^160: the top two bits are q, the rest the fraction, within 2^-105.
fn rc_quadrant_large_d(a: f64) -> RcQuadrant {
  let bits = bitcast<u64>(a);
  let e = i32(bits >> 52u) - 1023;
  let m = (bits & 0x000ffffffffffffflu) | 0x0010000000000000lu;
  let m0 = m & 0xFFFFFFFFlu;
  let m1 = m >> 32u;
  // The window, its least significant word first.
  var w: array<u64, 5>;
  for (var j = 0; j < 5; j++) {
    w[j] = u64(rc_two_over_pi_bits(e - 54 + 32 * (4 - j)));
  }
  // m times the window in 32-bit limbs, carried after.
  var limbs: array<u64, 6>;
  for (var j = 0; j < 5; j++) {
    let low = m0 * w[j];
    let high = m1 * w[j];
    limbs[j] += low & 0xFFFFFFFFlu;
    limbs[j + 1] += (low >> 32u) + (high & 0xFFFFFFFFlu);
    if (j + 2 < 6) { limbs[j + 2] += high >> 32u; }
  }
  for (var j = 0; j < 5; j++) {
    limbs[j + 1] += limbs[j] >> 32u;
    limbs[j] &= 0xFFFFFFFFlu;
  }
  var q = i32((limbs[4] >> 30u) & 3lu);
  let top = ((limbs[4] & 0x3FFFFFFFlu) << 32u) | limbs[3];
  var f = f64(top) * 2.168404344971009e-19lf + f64(limbs[2]) * 5.048709793414476e-29lf;
  if (f >= 0.5lf) {
    f -= 1.0lf;
    q += 1;
  }
  return RcQuadrant(f * 1.5707963267948966lf, q & 3);
}

// Below 2^20·π/2, q = round(x·2/π) and π/2 in three parts of at most 33 bits (fdlibm's), so that
// each product with q is exact; beyond, the reduction above.
fn rc_quadrant_d(x: f64) -> RcQuadrant {
  if (abs(x) >= 1647099.0lf) {
    let a = rc_quadrant_large_d(abs(x));
    if (x < 0.0lf) { return RcQuadrant(-a.r, (4 - a.q) & 3); }
    return a;
  }
  let k = round(x * 0.6366197723675814lf);
  var r = fma(-k, 1.57079632673412561417e+00lf, x);
  r = fma(-k, 6.07710050630396597660e-11lf, r);
  r = fma(-k, 2.02226624879595063154e-21lf, r);
  return RcQuadrant(r, i32(k - 4.0lf * floor(k * 0.25lf)));
}
fn rc_sin_d(x: f64) -> f64 {
  if (rc_isnan_d(x) || rc_isinf_d(x)) { return rc_nan_d(); }
  let a = rc_quadrant_d(x);
  switch a.q {
    case 0: { return rc_sin_reduced_d(a.r); }
    case 1: { return rc_cos_reduced_d(a.r); }
    case 2: { return -rc_sin_reduced_d(a.r); }
    default: { return -rc_cos_reduced_d(a.r); }
  }
}
fn rc_cos_d(x: f64) -> f64 {
  if (rc_isnan_d(x) || rc_isinf_d(x)) { return rc_nan_d(); }
  let a = rc_quadrant_d(x);
  switch a.q {
    case 0: { return rc_cos_reduced_d(a.r); }
    case 1: { return -rc_sin_reduced_d(a.r); }
    case 2: { return -rc_cos_reduced_d(a.r); }
    default: { return rc_sin_reduced_d(a.r); }
  }
}

// tanh x = e / (e + 2) with e = e^{2|x|} - 1, its sign x's; ±1 beyond 22, where it rounds to 1.
fn rc_tanh_d(x: f64) -> f64 {
  if (rc_isnan_d(x)) { return x; }
  let a = abs(x);
  var t = 1.0lf;
  if (a <= 22.0lf) {
    let e = rc_expm1_d(2.0lf * a);
    t = e / (e + 2.0lf);
  }
  return select(t, -t, x < 0.0lf);
}

// x^y as the f32 rc_pow: small integer exponents exactly, negative bases under integer
// exponents signed by parity, 2^(y·log2|x|) otherwise.
fn rc_pow_d(a: f64, b: f64) -> f64 {
  if (b == 0.0lf || a == 1.0lf) { return 1.0lf; }
  if (b == 1.0lf) { return a; }
  if (b == 2.0lf) { return a * a; }
  if (a == 0.0lf) { return select(rc_inf_d(), 0.0lf, b > 0.0lf); }
  let m = rc_exp2_d(b * rc_log2_d(abs(a)));
  if (a < 0.0lf) {
    if (trunc(b) != b) { return rc_nan_d(); }
    return select(m, -m, trunc(b * 0.5lf) != b * 0.5lf);
  }
  return m;
}
