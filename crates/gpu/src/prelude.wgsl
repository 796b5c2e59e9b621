// The definitions every generated kernel starts with: choices between values with the
// interpreter's NaN rules, integer division and powers that never trap, Threefry-4x32, and random
// bits as uniform values. Floats compute in f32 (f64 values in f64), integers in rc_int (i32, or
// i64 in a routine holding 64-bit integers), 128-bit words in vec4<u32>, conditions and gather
// ids in rc_cond (f32, or f64 in a routine holding f64 tensors). The functions whose bodies differ
// with rc_int's width follow, in prelude_i32.wgsl or prelude_i64.wgsl, and those of rc_cond in
// prelude_f32.wgsl or prelude_f64.wgsl.

fn rc_nan() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn rc_inf() -> f32 { return bitcast<f32>(0x7f800000u); }

// NaN is told by its bits: a driver may take `x != x` to be false and a choice between compared
// values to be a minimum or maximum (SPIR-V without NaN preservation), which drop a NaN.
fn rc_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn rc_relu(x: f32) -> f32 { return select(select(x, 0.0, x <= 0.0), x, rc_isnan(x)); }
fn rc_irelu(x: rc_int) -> rc_int { return max(x, rc_int(0)); }
fn rc_relu_gate(a: f32, b: f32) -> f32 { return select(select(0.0, b, a > 0.0), a, rc_isnan(a)); }
fn rc_irelu_gate(a: rc_int, b: rc_int) -> rc_int { return select(rc_int(0), b, a > rc_int(0)); }
fn rc_sat01_gate(a: f32, b: f32) -> f32 {
  return select(select(0.0, b, a > 0.0 && a < 1.0), a, rc_isnan(a));
}
fn rc_max(a: f32, b: f32) -> f32 { return select(b, a, rc_isnan(a) || (!rc_isnan(b) && a >= b)); }
fn rc_min(a: f32, b: f32) -> f32 { return select(b, a, rc_isnan(a) || (!rc_isnan(b) && a <= b)); }
fn rc_sat01(x: f32) -> f32 {
  return select(select(select(x, 1.0, x > 1.0), 0.0, x < 0.0), x, rc_isnan(x));
}
fn rc_isat01(x: rc_int) -> rc_int { return clamp(x, rc_int(0), rc_int(1)); }
fn rc_truth(c: bool) -> f32 { return select(0.0, 1.0, c); }
// A condition holds where it is not 0: NaN holds.
fn rc_holds(c: rc_cond) -> bool { return c != rc_cond(0) || rc_cond_isnan(c); }
fn rc_itruth(c: bool) -> rc_int { return select(rc_int(0), rc_int(1), c); }

// A gather's id: whether it selects a cell along an axis of `size` (an integer in 0..size; NaN,
// -1 and anything past the axis select none), and the position it selects, 0 where none, so
// that the access stays inside the axis whatever the data.
fn rc_row_ok(id: rc_cond, size: i32) -> bool {
  return !rc_cond_isnan(id) && id >= rc_cond(0) && id < rc_cond(size) && floor(id) == id;
}
fn rc_row(id: rc_cond, size: i32) -> i32 {
  let ok = rc_row_ok(id, size);
  return select(0, min(i32(select(rc_cond(0), id, ok)), size - 1), ok);
}

// An integer division or remainder by zero gives 0, as on the C backend.
fn rc_idiv(a: rc_int, b: rc_int) -> rc_int {
  let special = b == rc_int(0) || b == rc_int(-1);
  let q = a / select(b, rc_int(1), special);
  return select(select(q, rc_int(0) - a, b == rc_int(-1)), rc_int(0), b == rc_int(0));
}
fn rc_imod(a: rc_int, b: rc_int) -> rc_int {
  let special = b == rc_int(0) || b == rc_int(-1);
  var r = a % select(b, rc_int(1), special);
  r = select(r, r + b, r != rc_int(0) && ((r < rc_int(0)) != (b < rc_int(0))));
  return select(r, rc_int(0), special);
}

// x^y with the meaning of the C library's pow on the values training meets: small integer
// exponents exactly, negative bases under integer exponents signed by parity.
fn rc_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (a == 0.0) { return select(rc_inf(), 0.0, b > 0.0); }
  let m = exp2(b * log2(abs(a)));
  if (a < 0.0) {
    if (trunc(b) != b) { return rc_nan(); }
    return select(m, -m, trunc(b * 0.5) != b * 0.5);
  }
  return m;
}
fn rc_ipow(a: rc_int, b: rc_int) -> rc_int {
  if (b < rc_int(0)) { return rc_f2i(rc_pow(f32(a), f32(b))); }
  var result = rc_int(1);
  var base = a;
  var e = b;
  loop {
    if (e <= rc_int(0)) { break; }
    if ((e & rc_int(1)) != rc_int(0)) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return result;
}
fn rc_fmod(a: f32, b: f32) -> f32 {
  let r = a - b * trunc(a / b);
  return select(r, r + b, r != 0.0 && ((r < 0.0) != (b < 0.0)));
}
// tanh is ±1 in f32 beyond ±15; some drivers overflow inside tanh far beyond.
fn rc_tanh(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }

fn rc_rotl(x: u32, r: u32) -> u32 { return (x << r) | (x >> (32u - r)); }

// `rounds` rounds of Threefry-4x32, with a key injection after every fourth round and after the
// last.
fn rc_threefry(key: vec4<u32>, counter: vec4<u32>, rounds: u32) -> vec4<u32> {
  let rotations = array<vec2<u32>, 8>(
    vec2<u32>(10u, 26u), vec2<u32>(11u, 21u), vec2<u32>(13u, 27u), vec2<u32>(23u, 5u),
    vec2<u32>(6u, 20u), vec2<u32>(17u, 11u), vec2<u32>(25u, 10u), vec2<u32>(18u, 20u));
  let ks = array<u32, 5>(key.x, key.y, key.z, key.w, 0x1BD11BDAu ^ key.x ^ key.y ^ key.z ^ key.w);
  var x = counter + key;
  for (var round = 0u; round < rounds; round++) {
    let r = rotations[round % 8u];
    if (round % 2u == 0u) {
      x.x = x.x + x.y; x.y = rc_rotl(x.y, r.x) ^ x.x;
      x.z = x.z + x.w; x.w = rc_rotl(x.w, r.y) ^ x.z;
    } else {
      x.x = x.x + x.w; x.w = rc_rotl(x.w, r.x) ^ x.x;
      x.z = x.z + x.y; x.y = rc_rotl(x.y, r.y) ^ x.z;
    }
    if (round % 4u == 3u || round + 1u == rounds) {
      let s = round / 4u + 1u;
      x = x + vec4<u32>(ks[s % 5u], ks[(s + 1u) % 5u], ks[(s + 2u) % 5u], ks[(s + 3u) % 5u]);
      x.w = x.w + s;
    }
  }
  return x;
}

// A value as a 128-bit word, as the interpreter makes one (see precision.rs).
fn rc_word_u32(u: u32) -> vec4<u32> {
  return vec4<u32>(u, u ^ 0x9E3779B9u, u ^ 0x6C078965u, u ^ ((u << 16u) | (u >> 16u)));
}
fn rc_word_f32(x: f32) -> vec4<u32> { return vec4<u32>(bitcast<u32>(x), 0u, 0u, 0u); }
fn rc_word_f16(x: f32) -> vec4<u32> {
  return vec4<u32>(pack2x16float(vec2<f32>(x, 0.0)) & 0xFFFFu, 0u, 0u, 0u);
}

// The k-th uniform value a word makes in each precision (see value.rs): exact in f32.
fn rc_uniform_f32(w: vec4<u32>, k: u32) -> f32 { return f32(w[k] >> 8u) * 5.9604644775390625e-8; }
fn rc_uniform_f16(w: vec4<u32>, k: u32) -> f32 {
  return f32(((w[k / 2u] >> (16u * (k % 2u))) & 0xFFFFu) >> 5u) * 4.8828125e-4;
}
fn rc_uniform_bf16(w: vec4<u32>, k: u32) -> f32 {
  return f32(((w[k / 2u] >> (16u * (k % 2u))) & 0xFFFFu) >> 8u) * 3.90625e-3;
}
fn rc_uniform_fp8(w: vec4<u32>, k: u32) -> f32 {
  return f32((w[k / 4u] >> (8u * (k % 4u) + 5u)) & 7u) * 0.125;
}
fn rc_uniform_u8(w: vec4<u32>, k: u32) -> rc_int {
  return rc_int((w[k / 4u] >> (8u * (k % 4u))) & 0xFFu);
}
fn rc_uniform_i8(w: vec4<u32>, k: u32) -> rc_int { return rc_wrap_i8(rc_uniform_u8(w, k)); }
fn rc_uniform_u16(w: vec4<u32>, k: u32) -> rc_int {
  return rc_int((w[k / 2u] >> (16u * (k % 2u))) & 0xFFFFu);
}
fn rc_uniform_i32(w: vec4<u32>, k: u32) -> rc_int { return rc_int(bitcast<i32>(w[k])); }
fn rc_uniform_uint4x32(w: vec4<u32>, k: u32) -> vec4<u32> { return w; }

// Cells WGSL has no type for, held widened: bf16 and fp8 in f32 cells, u8, i8 and u16 in i32
// cells, each value rounded or wrapped to its precision where it is stored, so that a cell holds
// exactly what the precision's own cell would (the host narrows it back when it reads).
// Functions rather than expressions: a shift or a mask of a constant would be evaluated when the
// shader is made, where an overflow is an error.
fn rc_wrap_u8(v: rc_int) -> rc_int { return v & rc_int(255); }
fn rc_wrap_i8(v: rc_int) -> rc_int { return ((v & rc_int(255)) ^ rc_int(128)) - rc_int(128); }
fn rc_wrap_u16(v: rc_int) -> rc_int { return v & rc_int(65535); }

// bf16's bits: the upper half of the f32's, rounded to nearest, ties to even; a NaN stays quiet.
fn rc_bf16_bits(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) { return (x >> 16u) | 0x40u; }
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
fn rc_bf16(f: f32) -> f32 { return bitcast<f32>(rc_bf16_bits(f) << 16u); }

// The bits of f32 `f` as a float of 5 exponent bits and `m` significand bits (fp8, E5M2: m = 2),
// rounded to nearest, ties to even, as the C prelude's rc_f32_to_e5: from the largest finite
// value plus half a step up it overflows to infinity; below 2^-14 the step is the subnormals'.
fn rc_e5_bits(f: f32, m: u32) -> u32 {
  let x = bitcast<u32>(f);
  let sign = (x >> 31u) << (5u + m);
  let magnitude = x & 0x7fffffffu;
  let infinity = 0x1fu << m;
  if (magnitude > 0x7f800000u) { return sign | infinity | (1u << (m - 1u)); }
  let overflow = (142u << 23u) | (((1u << m) - 1u) << (23u - m)) | (1u << (22u - m));
  if (magnitude >= overflow) { return sign | infinity; }
  if (magnitude < 0x38800000u) {
    // round() takes ties to even.
    return sign | u32(round(bitcast<f32>(magnitude) * bitcast<f32>((127u + 14u + m) << 23u)));
  }
  var bits = (((magnitude >> 23u) - 112u) << m) | ((magnitude & 0x7fffffu) >> (23u - m));
  let rest = magnitude & ((1u << (23u - m)) - 1u);
  let half = 1u << (22u - m);
  if (rest > half || (rest == half && (bits & 1u) == 1u)) { bits += 1u; }
  return sign | bits;
}

// The value of `bits`, a float of 5 exponent bits and `m` significand bits: exact in f32.
fn rc_e5_value(bits: u32, m: u32) -> f32 {
  let negative = ((bits >> (5u + m)) & 1u) == 1u;
  let exponent = (bits >> m) & 31u;
  let mantissa = bits & ((1u << m) - 1u);
  var magnitude: f32;
  if (exponent == 31u) {
    magnitude = select(rc_inf(), rc_nan(), mantissa != 0u);
  } else if (exponent == 0u) {
    magnitude = f32(mantissa) * bitcast<f32>((127u - 14u - m) << 23u);
  } else {
    magnitude = bitcast<f32>(((exponent + 112u) << 23u) | (mantissa << (23u - m)));
  }
  return select(magnitude, -magnitude, negative);
}
fn rc_fp8(f: f32) -> f32 { return rc_e5_value(rc_e5_bits(f, 2u), 2u); }
