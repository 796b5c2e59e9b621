// The prelude's functions whose bodies are those of integers computing in i64 (rc_int is i64),
// as the interpreter computes every integer. A u32 becomes an i64 through u64: naga converts a
// u32 into a wider signed integer by sign extension.

fn rc_u32_value(u: u32) -> i64 { return bitcast<i64>(u64(u)); }

// Floats into integers as the interpreter converts them: truncated and saturated into 64 bits,
// NaN 0 (`f32` 2^63 is 0x5f000000). A conversion out of range has no defined value in SPIR-V:
// those are decided first.
fn rc_f2i(x: f32) -> i64 {
  let magnitude = bitcast<u32>(x) & 0x7fffffffu;
  if (magnitude > 0x7f800000u) { return 0li; }
  if (magnitude >= 0x5f000000u) {
    return select(9223372036854775807li, -9223372036854775807li - 1li, x < 0.0);
  }
  return i64(x);
}

// Floats into u64's bits, as the interpreter stores them: truncated and saturated into
// [0, 2^64), NaN 0 (`f32` 2^64 is 0x5f800000).
fn rc_f2u(x: f32) -> i64 {
  if (!(x > 0.0) || rc_isnan(x)) { return 0li; }
  if (bitcast<u32>(x) >= 0x5f800000u) { return -1li; }
  return bitcast<i64>(u64(x));
}

// A u64's bits as the float they count as: unsigned.
fn rc_u2f(v: i64) -> f32 { return f32(bitcast<u64>(v)); }

fn rc_uniform_u32(w: vec4<u32>, k: u32) -> i64 { return rc_u32_value(w[k]); }
fn rc_uniform_i64(w: vec4<u32>, k: u32) -> i64 {
  return bitcast<i64>(u64(w[2u * k]) | (u64(w[2u * k + 1u]) << 32u));
}
fn rc_uniform_u64(w: vec4<u32>, k: u32) -> i64 { return rc_uniform_i64(w, k); }

// A 64-bit integer as a 128-bit word, as the interpreter makes one: its low and high halves.
fn rc_word_i64(v: i64) -> vec4<u32> {
  let bits = bitcast<u64>(v);
  return vec4<u32>(u32(bits & 0xFFFFFFFFlu), u32(bits >> 32u), 0u, 0u);
}

// u64 cells hold their bits in the i64; these read them as unsigned where a sign matters, as the
// interpreter does (Binop::apply_int_in). A division or remainder by zero gives 0.
fn rc_iudiv(a: i64, b: i64) -> i64 {
  let q = bitcast<u64>(a) / bitcast<u64>(select(b, 1li, b == 0li));
  return select(bitcast<i64>(q), 0li, b == 0li);
}
fn rc_iumod(a: i64, b: i64) -> i64 {
  let r = bitcast<u64>(a) % bitcast<u64>(select(b, 1li, b == 0li));
  return select(bitcast<i64>(r), 0li, b == 0li);
}
fn rc_iupow(a: i64, b: i64) -> i64 {
  var result = 1lu;
  var base = bitcast<u64>(a);
  var e = bitcast<u64>(b);
  loop {
    if (e == 0lu) { break; }
    if ((e & 1lu) != 0lu) { result = result * base; }
    base = base * base;
    e = e >> 1u;
  }
  return bitcast<i64>(result);
}
fn rc_iumax(a: i64, b: i64) -> i64 { return select(b, a, bitcast<u64>(a) > bitcast<u64>(b)); }
fn rc_iumin(a: i64, b: i64) -> i64 { return select(b, a, bitcast<u64>(a) < bitcast<u64>(b)); }
fn rc_iult(a: i64, b: i64) -> i64 { return select(0li, 1li, bitcast<u64>(a) < bitcast<u64>(b)); }
fn rc_iurelu_gate(a: i64, b: i64) -> i64 { return select(0li, b, a != 0li); }
