// The definitions every generated kernel starts with: choices between values with the
// interpreter's NaN rules, integer division and powers that never trap, Threefry-4x32, and random
// bits as uniform values. Floats compute in f32, integers in i32, 128-bit words in vec4<u32>.

fn rc_nan() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn rc_inf() -> f32 { return bitcast<f32>(0x7f800000u); }

// NaN is told by its bits: a driver may take `x != x` to be false and a choice between compared
// values to be a minimum or maximum (SPIR-V without NaN preservation), which drop a NaN.
fn rc_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn rc_relu(x: f32) -> f32 { return select(select(x, 0.0, x <= 0.0), x, rc_isnan(x)); }
fn rc_irelu(x: i32) -> i32 { return max(x, 0); }
fn rc_relu_gate(a: f32, b: f32) -> f32 { return select(select(0.0, b, a > 0.0), a, rc_isnan(a)); }
fn rc_irelu_gate(a: i32, b: i32) -> i32 { return select(0, b, a > 0); }
fn rc_sat01_gate(a: f32, b: f32) -> f32 {
  return select(select(0.0, b, a > 0.0 && a < 1.0), a, rc_isnan(a));
}
fn rc_max(a: f32, b: f32) -> f32 { return select(b, a, rc_isnan(a) || (!rc_isnan(b) && a >= b)); }
fn rc_min(a: f32, b: f32) -> f32 { return select(b, a, rc_isnan(a) || (!rc_isnan(b) && a <= b)); }
fn rc_sat01(x: f32) -> f32 {
  return select(select(select(x, 1.0, x > 1.0), 0.0, x < 0.0), x, rc_isnan(x));
}
fn rc_isat01(x: i32) -> i32 { return clamp(x, 0, 1); }
fn rc_truth(c: bool) -> f32 { return select(0.0, 1.0, c); }
// A condition holds where it is not 0: NaN holds.
fn rc_holds(c: f32) -> bool { return c != 0.0 || rc_isnan(c); }
fn rc_itruth(c: bool) -> i32 { return select(0, 1, c); }

// Floats into integers as the interpreter converts them before an i32 store: truncated and
// saturated into 64 bits (NaN is 0), then wrapped to the low 32 bits. Beyond 2^31 in magnitude an
// f32 is an integer, its low 32 bits its mantissa shifted; from 2^63 on it saturates.
fn rc_f2i(x: f32) -> i32 {
  let bits = bitcast<u32>(x);
  let magnitude = bits & 0x7fffffffu;
  let negative = bits >= 0x80000000u;
  if (magnitude > 0x7f800000u) { return 0; }
  if (magnitude < 0x4f000000u) { return i32(x); }
  if (magnitude >= 0x5f000000u) { return select(-1, 0, negative); }
  let shift = (magnitude >> 23u) - 150u;
  let mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  let low = select(0u, mantissa << min(shift, 31u), shift < 32u);
  return bitcast<i32>(select(low, 0u - low, negative));
}

// A gather's id: whether it selects a cell along an axis of `size` (an integer in 0..size; NaN,
// -1 and anything past the axis select none), and the position it selects, 0 where none, so
// that the access stays inside the axis whatever the data.
fn rc_row_ok(id: f32, size: i32) -> bool {
  return !rc_isnan(id) && id >= 0.0 && id < f32(size) && floor(id) == id;
}
fn rc_row(id: f32, size: i32) -> i32 {
  let ok = rc_row_ok(id, size);
  return select(0, min(i32(select(0.0, id, ok)), size - 1), ok);
}

// An integer division or remainder by zero gives 0, as on the C backend.
fn rc_idiv(a: i32, b: i32) -> i32 {
  let special = b == 0 || b == -1;
  let q = a / select(b, 1, special);
  return select(select(q, 0 - a, b == -1), 0, b == 0);
}
fn rc_imod(a: i32, b: i32) -> i32 {
  let special = b == 0 || b == -1;
  var r = a % select(b, 1, special);
  r = select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
  return select(r, 0, special);
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
fn rc_ipow(a: i32, b: i32) -> i32 {
  if (b < 0) { return rc_f2i(rc_pow(f32(a), f32(b))); }
  var result = 1;
  var base = a;
  var e = b;
  loop {
    if (e <= 0) { break; }
    if ((e & 1) != 0) { result = result * base; }
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
fn rc_uniform_i32(w: vec4<u32>, k: u32) -> i32 { return bitcast<i32>(w[k]); }
fn rc_uniform_u32(w: vec4<u32>, k: u32) -> i32 { return bitcast<i32>(w[k]); }
fn rc_uniform_uint4x32(w: vec4<u32>, k: u32) -> vec4<u32> { return w; }
