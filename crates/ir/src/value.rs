//! Typed scalar values: what a computation yields in each kind of precision (float, integer,
//! 128-bit word), the conversions between kinds, and the conversion of random bits into uniform
//! values of a precision.

use half::{bf16, f16};
use smallvec::{SmallVec, smallvec};

use crate::precision::{Precision, to_uint4x32};

/// How values of a precision are computed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// In the precision's compute type ([`Precision::compute`]), every operation's result rounded
    /// to it, and rounded to the precision on store.
    Float,
    /// In wrapping `i64`, wrapped to the precision's width on store.
    Int,
    /// As four 32-bit words.
    Word,
}

impl Precision {
    /// How values of this precision are computed: as floats, integers or 128-bit words.
    pub fn kind(self) -> Kind {
        match self {
            Precision::Fp8 | Precision::F16 | Precision::Bf16 | Precision::F32 | Precision::F64 => {
                Kind::Float
            }
            Precision::U8
            | Precision::I8
            | Precision::U16
            | Precision::I32
            | Precision::U32
            | Precision::I64
            | Precision::U64 => Kind::Int,
            Precision::Uint4x32 => Kind::Word,
        }
    }

    /// The precision values of this one are computed in, as C computes them: fp8, f16, bf16 and
    /// f32 in f32, f64 in f64, integers in i64, words as words.
    pub fn compute(self) -> Precision {
        match self.kind() {
            Kind::Float if self == Precision::F64 => Precision::F64,
            Kind::Float => Precision::F32,
            Kind::Int => Precision::I64,
            Kind::Word => Precision::Uint4x32,
        }
    }
}

/// A value of some kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A float, held as `f64` whatever its precision.
    Float(f64),
    /// An integer, in wrapping `i64`.
    Int(i64),
    /// A 128-bit word, as four 32-bit words.
    Word([u32; 4]),
}

impl Value {
    /// The value as a number: a word counts as its first 32-bit word.
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Float(x) => x,
            Value::Int(i) => i as f64,
            Value::Word(w) => f64::from(w[0]),
        }
    }

    /// The value as an integer: floats truncate toward zero and saturate (NaN is 0); a word counts
    /// as its first 32-bit word.
    pub fn as_i64(self) -> i64 {
        match self {
            Value::Float(x) => x as i64,
            Value::Int(i) => i,
            Value::Word(w) => i64::from(w[0]),
        }
    }

    /// The value, held in a cell of precision `from`, as a 128-bit word (see [`to_uint4x32`]).
    pub fn as_word(self, from: Precision) -> [u32; 4] {
        match self {
            Value::Word(w) => w,
            Value::Float(x) => to_uint4x32(x, from),
            Value::Int(i) => match from {
                Precision::I64 | Precision::U64 => [i as u32, ((i as u64) >> 32) as u32, 0, 0],
                Precision::I32 => to_uint4x32(f64::from(i as i32), from),
                Precision::U32 => to_uint4x32(f64::from(i as u32), from),
                _ => [i as u32, 0, 0, 0],
            },
        }
    }

    /// The value converted to `kind`, held in a cell of precision `from`: a u64's integer is
    /// its bits, which count as unsigned.
    pub fn to_kind(self, kind: Kind, from: Precision) -> Value {
        match kind {
            Kind::Float => Value::Float(match (self, from) {
                (Value::Int(i), Precision::U64) => i as u64 as f64,
                _ => self.as_f64(),
            }),
            Kind::Int => Value::Int(self.as_i64()),
            Kind::Word => Value::Word(self.as_word(from)),
        }
    }

    /// The value converted to what `precision` computes in ([`Precision::compute`]), held in a
    /// cell of precision `from`: as [`Value::to_kind`], but an integer into an f32 computation
    /// is rounded to f32 once, from the integer, as C's conversion is (through f64, an integer
    /// beyond 2⁵³ would be rounded twice, and could land a bit away).
    ///
    /// A float into a u64 computation is truncated into u64's range (saturating, NaN to 0), as
    /// it is stored.
    pub fn to_compute(self, precision: Precision, from: Precision) -> Value {
        match (self, precision.compute()) {
            (Value::Int(i), Precision::F32) => Value::Float(f64::from(match from {
                Precision::U64 => i as u64 as f32,
                _ => i as f32,
            })),
            (Value::Float(x), _) if precision == Precision::U64 => Value::Int(x as u64 as i64),
            _ => self.to_kind(precision.kind(), from),
        }
    }

    /// The value as a cell of `precision` holds it: floats rounded to nearest, floats into
    /// integers truncated and saturated, integers into narrower integers wrapped.
    pub fn stored_as(self, precision: Precision) -> Value {
        match (precision.kind(), self) {
            (Kind::Float, value) => Value::Float(precision.round(value.as_f64())),
            // A u64 holds its bits in the `i64`.
            (Kind::Int, Value::Float(x)) if precision == Precision::U64 => {
                Value::Int(x as u64 as i64)
            }
            (Kind::Int, Value::Float(x)) => Value::Int(precision.round(x) as i64),
            (Kind::Int, value) => {
                let i = value.as_i64();
                Value::Int(match precision {
                    Precision::U8 => i64::from(i as u8),
                    Precision::I8 => i64::from(i as i8),
                    Precision::U16 => i64::from(i as u16),
                    Precision::I32 => i64::from(i as i32),
                    Precision::U32 => i64::from(i as u32),
                    _ => i,
                })
            }
            (Kind::Word, value) => Value::Word(value.as_word(precision)),
        }
    }
}

/// The values one 128-bit word of random bits makes in `precision`, as many as its bits fill
/// (16 bytes, 8 half-words, 4 words, 2 double-words, or the word itself). Floats are uniform in
/// [0, 1) (the top bits of each part, as many as the precision holds exactly, scaled, so that 1
/// is never reached after rounding: fp8 takes the top 3 bits of each byte);
/// integers take the bits as they are. Kept inline: a parameter's initial values draw one word
/// per few cells.
pub fn uniform(word: [u32; 4], precision: Precision) -> Uniforms {
    let halves = || word.iter().flat_map(|w| [*w & 0xFFFF, *w >> 16]);
    let pairs = || {
        [
            u64::from(word[0]) | (u64::from(word[1]) << 32),
            u64::from(word[2]) | (u64::from(word[3]) << 32),
        ]
    };
    match precision {
        Precision::F32 => word
            .iter()
            .map(|w| Value::Float(f64::from(w >> 8) * 2f64.powi(-24)))
            .collect(),
        Precision::F64 => pairs()
            .into_iter()
            .map(|x| Value::Float((x >> 11) as f64 * 2f64.powi(-53)))
            .collect(),
        Precision::F16 => halves()
            .map(|h| Value::Float(f16::from_f64(f64::from(h >> 5) * 2f64.powi(-11)).to_f64()))
            .collect(),
        Precision::Bf16 => halves()
            .map(|h| Value::Float(bf16::from_f64(f64::from(h >> 8) * 2f64.powi(-8)).to_f64()))
            .collect(),
        Precision::Fp8 => word
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|byte| Value::Float(f64::from(byte >> 5) * 0.125))
            .collect(),
        Precision::U16 => halves().map(|h| Value::Int(i64::from(h))).collect(),
        Precision::U64 => pairs().into_iter().map(|x| Value::Int(x as i64)).collect(),
        Precision::U8 | Precision::I8 => word
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|byte| {
                Value::Int(if precision == Precision::I8 {
                    i64::from(byte as i8)
                } else {
                    i64::from(byte)
                })
            })
            .collect(),
        Precision::I32 => word
            .iter()
            .map(|w| Value::Int(i64::from(*w as i32)))
            .collect(),
        Precision::U32 => word.iter().map(|w| Value::Int(i64::from(*w))).collect(),
        Precision::I64 => pairs().into_iter().map(|x| Value::Int(x as i64)).collect(),
        Precision::Uint4x32 => smallvec![Value::Word(word)],
    }
}

/// The values of one word of random bits: at most 16 (bytes).
pub type Uniforms = SmallVec<[Value; 16]>;

/// One value of `precision` from the first bits of a 128-bit word: the first of [`uniform`].
pub fn uniform1(word: [u32; 4], precision: Precision) -> Value {
    uniform(word, precision)[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_values_fill_the_word_and_stay_below_one() {
        let ones = [u32::MAX; 4];
        for precision in Precision::ALL {
            let values = uniform(ones, precision);
            assert_eq!(values.len(), 16 / precision.size_in_bytes(), "{precision}");
            if precision.is_float() {
                // fp8 holds 3 significant bits: its largest draw is 7/8.
                let largest = if precision == Precision::Fp8 {
                    0.875
                } else {
                    0.99
                };
                for value in &values {
                    let x = value.as_f64();
                    assert!(x < 1.0 && x >= largest, "{precision}: {x}");
                    assert_eq!(precision.round(x), x, "{precision}: {x} is exact");
                }
            }
        }
        let zeros = uniform([0; 4], Precision::F32);
        assert!(zeros.iter().all(|v| v.as_f64() == 0.0));
        // The parts in order: low half-words first, bytes little-end first.
        assert_eq!(
            uniform([0x0403_0201, 0, 0, 0], Precision::U8)[..5],
            [
                Value::Int(1),
                Value::Int(2),
                Value::Int(3),
                Value::Int(4),
                Value::Int(0)
            ]
        );
        assert_eq!(
            uniform([0x8000_0000, 1, 2, 3], Precision::I32)[..],
            [
                Value::Int(i64::from(i32::MIN)),
                Value::Int(1),
                Value::Int(2),
                Value::Int(3)
            ]
        );
        assert_eq!(
            uniform([5, 1, 0, 0], Precision::I64)[0],
            Value::Int((1 << 32) + 5)
        );
        assert_eq!(
            uniform1([0x0000_0100, 0, 0, 0], Precision::F32),
            Value::Float(2f64.powi(-24))
        );
    }

    #[test]
    fn sixteen_and_sixty_four_bit_unsigned_values_wrap_and_read_as_unsigned() {
        assert_eq!(
            Value::Int(65536 + 7).stored_as(Precision::U16),
            Value::Int(7)
        );
        assert_eq!(Value::Int(-1).stored_as(Precision::U16), Value::Int(65535));
        // u64 keeps its 64 bits in the i64: -1 is 2^64 - 1, read as a float unsigned.
        let all_ones = Value::Int(-1).stored_as(Precision::U64);
        assert_eq!(all_ones, Value::Int(-1));
        assert_eq!(
            all_ones.to_kind(Kind::Float, Precision::U64),
            Value::Float(u64::MAX as f64)
        );
        assert_eq!(
            Value::Float(1.5e19).stored_as(Precision::U64),
            Value::Int(15_000_000_000_000_000_000u64 as i64)
        );
        assert_eq!(
            Value::Float(1.0).stored_as(Precision::Fp8),
            Value::Float(1.0)
        );
        assert_eq!(
            Value::Float(1.2).stored_as(Precision::Fp8),
            Value::Float(1.25)
        );
        assert_eq!(
            uniform([0xFFFF_0001, 0, 0, 0], Precision::U16)[..2],
            [Value::Int(1), Value::Int(0xFFFF)]
        );
        assert_eq!(
            uniform([0x0000_00E0, 0, 0, 0], Precision::Fp8)[..2],
            [Value::Float(0.875), Value::Float(0.0)]
        );
    }

    #[test]
    fn stores_round_saturate_or_wrap() {
        assert_eq!(
            Value::Float(300.7).stored_as(Precision::U8),
            Value::Int(255)
        );
        assert_eq!(Value::Int(300).stored_as(Precision::U8), Value::Int(44));
        assert_eq!(
            Value::Int(-1).stored_as(Precision::U32),
            Value::Int(4_294_967_295)
        );
        assert_eq!(
            Value::Int(i64::MAX).stored_as(Precision::I64),
            Value::Int(i64::MAX)
        );
        assert_eq!(
            Value::Float(0.1).stored_as(Precision::F32),
            Value::Float(f64::from(0.1f32))
        );
        assert_eq!(
            Value::Int(-1).stored_as(Precision::Uint4x32),
            Value::Word([u32::MAX, 0, 0, 0])
        );
        assert_eq!(
            Value::Int(-1).as_word(Precision::I64),
            [u32::MAX, u32::MAX, 0, 0]
        );
        assert_eq!(Value::Word([7, 1, 2, 3]).as_f64(), 7.0);
    }
}
