// The prelude's functions whose bodies are those of integers computing in i32 (rc_int is i32).

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

// The bits of a u32 word, as i32: the bits of values from 2^31 on read as negative, wrapped as
// every i32 computation is.
fn rc_uniform_u32(w: vec4<u32>, k: u32) -> i32 { return bitcast<i32>(w[k]); }
