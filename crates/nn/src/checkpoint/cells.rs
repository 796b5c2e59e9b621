//! How each precision's cells are stored in a checkpoint: the safetensors dtype, the extra axis
//! of a 128-bit word, and the little-endian bytes of a cell.

use half::{bf16, f16};
use rcannl_ir::{Precision, Value};
use safetensors::Dtype;

/// Appends a cell's little-endian bytes.
type Encode = fn(Value, &mut Vec<u8>);

/// A cell from its little-endian bytes.
type Decode = fn(&[u8]) -> Value;

/// How one precision's cells are stored.
pub(super) struct Format {
    pub(super) dtype: Dtype,
    /// The axes each cell takes in the file after the tensor's own: none, or 4 for a word.
    pub(super) cell_axes: &'static [usize],
    pub(super) encode: Encode,
    pub(super) decode: Decode,
}

/// The first `N` bytes of a cell (its length is the precision's size, by construction).
fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut array = [0; N];
    array.copy_from_slice(&bytes[..N]);
    array
}

/// The storage of `precision`.
pub(super) fn format(precision: Precision) -> Format {
    let (dtype, encode, decode): (Dtype, Encode, Decode) = match precision {
        Precision::U8 => (
            Dtype::U8,
            |v, out| out.push(v.as_i64() as u8),
            |b| Value::Int(i64::from(b[0])),
        ),
        Precision::I8 => (
            Dtype::I8,
            |v, out| out.extend((v.as_i64() as i8).to_le_bytes()),
            |b| Value::Int(i64::from(b[0] as i8)),
        ),
        Precision::U16 => (
            Dtype::U16,
            |v, out| out.extend((v.as_i64() as u16).to_le_bytes()),
            |b| Value::Int(i64::from(u16::from_le_bytes(le(b)))),
        ),
        Precision::I32 => (
            Dtype::I32,
            |v, out| out.extend((v.as_i64() as i32).to_le_bytes()),
            |b| Value::Int(i64::from(i32::from_le_bytes(le(b)))),
        ),
        Precision::U32 => (
            Dtype::U32,
            |v, out| out.extend((v.as_i64() as u32).to_le_bytes()),
            |b| Value::Int(i64::from(u32::from_le_bytes(le(b)))),
        ),
        Precision::I64 => (
            Dtype::I64,
            |v, out| out.extend(v.as_i64().to_le_bytes()),
            |b| Value::Int(i64::from_le_bytes(le(b))),
        ),
        // The cell holds the u64's bits (see `Precision::U64`).
        Precision::U64 => (
            Dtype::U64,
            |v, out| out.extend(v.as_i64().to_le_bytes()),
            |b| Value::Int(i64::from_le_bytes(le(b))),
        ),
        // safetensors' F8_E5M2 is OCANNL's fp8, byte for byte.
        Precision::Fp8 => (
            Dtype::F8_E5M2,
            |v, out| out.push(rcannl_ir::fp8_bits(v.as_f64())),
            |b| Value::Float(rcannl_ir::fp8_value(b[0])),
        ),
        Precision::F16 => (
            Dtype::F16,
            |v, out| out.extend(f16::from_f64(v.as_f64()).to_le_bytes()),
            |b| Value::Float(f16::from_le_bytes(le(b)).to_f64()),
        ),
        Precision::Bf16 => (
            Dtype::BF16,
            |v, out| out.extend(bf16::from_f64(v.as_f64()).to_le_bytes()),
            |b| Value::Float(bf16::from_le_bytes(le(b)).to_f64()),
        ),
        Precision::F32 => (
            Dtype::F32,
            |v, out| out.extend((v.as_f64() as f32).to_le_bytes()),
            |b| Value::Float(f64::from(f32::from_le_bytes(le(b)))),
        ),
        Precision::F64 => (
            Dtype::F64,
            |v, out| out.extend(v.as_f64().to_le_bytes()),
            |b| Value::Float(f64::from_le_bytes(le(b))),
        ),
        Precision::Uint4x32 => {
            return Format {
                dtype: Dtype::U32,
                cell_axes: &[4],
                encode: |v, out| {
                    for word in v.as_word(Precision::Uint4x32) {
                        out.extend(word.to_le_bytes());
                    }
                },
                decode: |b| {
                    Value::Word(std::array::from_fn(|k| u32::from_le_bytes(le(&b[4 * k..]))))
                },
            };
        }
    };
    Format {
        dtype,
        cell_axes: &[],
        encode,
        decode,
    }
}
