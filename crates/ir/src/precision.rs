//! Precisions: the element types of tensor buffers, their sizes, which one dominates when
//! operands differ, and how a value is rounded to each.
//!
//! Values travel between precisions as `f64` (exact for every precision but `i64` beyond 2⁵³ and
//! the 128-bit word), rounded by [`Precision::round`]; the 128-bit `uint4x32` word has its own
//! conversions ([`to_uint4x32`]), which the counter-based random numbers rely on bit for bit.

use std::fmt;

use half::{bf16, f16};

/// `x` with its lower 32 bits of significand folded into one sticky bit just above them: `half`'s
/// conversions from `f64` read only the upper 32 bits, which holds every bit that decides a
/// correct rounding to f16 or bf16 once the bits below say whether anything is left.
fn sticky_upper_half(x: f64) -> f64 {
    let bits = x.to_bits();
    let sticky = u64::from(bits & 0xFFFF_FFFF != 0) << 32;
    f64::from_bits((bits & !0xFFFF_FFFF) | sticky)
}

/// The element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE half precision: 5 exponent bits, 10 significand bits.
    F16,
    /// bfloat16: f32's 8 exponent bits, 7 significand bits.
    Bf16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Four 32-bit words: random bits and their generator's state.
    Uint4x32,
}

impl Precision {
    /// Every precision: integers, floats, then the 128-bit word.
    pub const ALL: [Precision; 10] = [
        Precision::U8,
        Precision::I8,
        Precision::I32,
        Precision::U32,
        Precision::I64,
        Precision::F16,
        Precision::Bf16,
        Precision::F32,
        Precision::F64,
        Precision::Uint4x32,
    ];

    /// The size of one cell, in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            Precision::U8 | Precision::I8 => 1,
            Precision::F16 | Precision::Bf16 => 2,
            Precision::I32 | Precision::U32 | Precision::F32 => 4,
            Precision::I64 | Precision::F64 => 8,
            Precision::Uint4x32 => 16,
        }
    }

    /// Whether values are floating point (f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Precision::F16 | Precision::Bf16 | Precision::F32 | Precision::F64
        )
    }

    /// Rank in the promotion order: when operands differ, the higher one is computed in. The
    /// 128-bit word wins over everything (its operations take nothing else), then floats by
    /// range and precision, then integers by width.
    fn rank(self) -> u8 {
        match self {
            Precision::I8 => 0,
            Precision::U8 => 1,
            Precision::I32 => 2,
            Precision::U32 => 3,
            Precision::I64 => 4,
            Precision::F16 => 5,
            Precision::Bf16 => 6,
            Precision::F32 => 7,
            Precision::F64 => 8,
            Precision::Uint4x32 => 9,
        }
    }

    /// The precision two operands are computed in.
    pub fn promote(self, other: Precision) -> Precision {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// `x` as the nearest value of this precision: floats round to nearest even, integers
    /// truncate toward zero and saturate at their bounds (NaN becomes 0). The 128-bit word is
    /// not a number: its `f64` view is its first word (see [`to_uint4x32`]).
    pub fn round(self, x: f64) -> f64 {
        match self {
            Precision::F64 => x,
            Precision::F32 => f64::from(x as f32),
            Precision::F16 => f16::from_f64(sticky_upper_half(x)).to_f64(),
            Precision::Bf16 => bf16::from_f64(sticky_upper_half(x)).to_f64(),
            // `as` from a float truncates toward zero and saturates, NaN to 0.
            Precision::U8 => f64::from(x as u8),
            Precision::I8 => f64::from(x as i8),
            Precision::I32 => f64::from(x as i32),
            Precision::U32 | Precision::Uint4x32 => f64::from(x as u32),
            Precision::I64 => (x as i64) as f64,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::U8 => "u8",
            Precision::I8 => "i8",
            Precision::I32 => "i32",
            Precision::U32 => "u32",
            Precision::I64 => "i64",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
            Precision::F32 => "f32",
            Precision::F64 => "f64",
            Precision::Uint4x32 => "uint4x32",
        })
    }
}

/// A value of precision `from` (given as its `f64` view) as a 128-bit word: 32-bit integers
/// spread their bits over all four words, so that nearby counters give unrelated words; 64-bit
/// values and doubles fill the first two words (low, high); an `f32` its bits in the first; the
/// narrow types their value in the first.
pub fn to_uint4x32(x: f64, from: Precision) -> [u32; 4] {
    match from {
        Precision::I32 | Precision::U32 => {
            let u = if from == Precision::I32 {
                (x as i32) as u32
            } else {
                x as u32
            };
            [u, u ^ 0x9E37_79B9, u ^ 0x6C07_8965, u ^ u.rotate_left(16)]
        }
        Precision::I64 | Precision::F64 => {
            let bits = if from == Precision::I64 {
                (x as i64) as u64
            } else {
                x.to_bits()
            };
            [bits as u32, (bits >> 32) as u32, 0, 0]
        }
        Precision::F32 => [(x as f32).to_bits(), 0, 0, 0],
        Precision::F16 => [u32::from(f16::from_f64(x).to_bits()), 0, 0, 0],
        Precision::Bf16 => [u32::from(bf16::from_f64(x).to_bits()), 0, 0, 0],
        Precision::U8 | Precision::I8 | Precision::Uint4x32 => [x as u32, 0, 0, 0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_kinds() {
        let bytes: Vec<usize> = Precision::ALL.iter().map(|p| p.size_in_bytes()).collect();
        assert_eq!(bytes, vec![1, 1, 4, 4, 8, 2, 2, 4, 8, 16]);
        let floats: Vec<Precision> = Precision::ALL
            .into_iter()
            .filter(|p| p.is_float())
            .collect();
        assert_eq!(
            floats,
            vec![
                Precision::F16,
                Precision::Bf16,
                Precision::F32,
                Precision::F64
            ]
        );
    }

    #[test]
    fn promotion_is_an_order_with_the_word_on_top() {
        for a in Precision::ALL {
            assert_eq!(a.promote(Precision::Uint4x32), Precision::Uint4x32);
            for b in Precision::ALL {
                assert_eq!(a.promote(b), b.promote(a), "{a} {b}");
                for c in Precision::ALL {
                    assert_eq!(a.promote(b).promote(c), a.promote(b.promote(c)));
                }
            }
        }
        assert_eq!(Precision::F16.promote(Precision::I64), Precision::F16);
        assert_eq!(Precision::F32.promote(Precision::Bf16), Precision::F32);
    }

    #[test]
    fn rounding_to_each_precision() {
        assert_eq!(Precision::F32.round(0.1), f64::from(0.1f32));
        // f16 has 10 mantissa bits: 1 + 2⁻¹¹ is halfway, ties to even (1).
        assert_eq!(Precision::F16.round(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(Precision::F16.round(65520.0), f64::INFINITY);
        // bf16 keeps 8 bits of mantissa and f32's range.
        assert_eq!(Precision::Bf16.round(1.0 + 2f64.powi(-9)), 1.0);
        assert_eq!(
            Precision::Bf16.round(3.0e38),
            bf16::from_f64(3.0e38).to_f64()
        );
        assert_eq!(Precision::I32.round(-2.7), -2.0);
        assert_eq!(Precision::U8.round(300.0), 255.0);
        assert_eq!(Precision::U8.round(-1.0), 0.0);
        assert_eq!(Precision::I8.round(f64::NAN), 0.0);
        assert_eq!(Precision::I64.round(1e300), i64::MAX as f64);
    }

    #[test]
    fn halves_round_correctly_when_only_the_lowest_bits_break_a_tie() {
        // Past the halfway bit, only bits below f64's upper 32 are set: above halfway, so up.
        // (f32 values, as the C backend rounds them with rc_f32_to_f16 and rc_f32_to_bf16.)
        let f16_case = 1.0 + 2f64.powi(-11) + 2f64.powi(-23);
        assert_eq!(Precision::F16.round(f16_case), 1.0 + 2f64.powi(-10));
        assert_eq!(Precision::F16.round(-f16_case), -1.0 - 2f64.powi(-10));
        let bf16_case = 938.0 + 2f64.powi(-14);
        assert_eq!(Precision::Bf16.round(bf16_case), 940.0);
        // Subnormal f16: 2^-25 is halfway between 0 and 2^-24; a little more rounds up.
        assert_eq!(
            Precision::F16.round(2f64.powi(-25) + 2f64.powi(-60)),
            2f64.powi(-24)
        );
        assert_eq!(Precision::F16.round(2f64.powi(-25)), 0.0);
        assert!(
            Precision::Bf16
                .round(f64::from_bits(0x7FF0_0000_0000_0001))
                .is_nan()
        );
    }

    #[test]
    fn words_from_each_precision() {
        assert_eq!(
            to_uint4x32(1.0, Precision::U32),
            [1, 1 ^ 0x9E37_79B9, 1 ^ 0x6C07_8965, 1 ^ 0x0001_0000]
        );
        assert_eq!(to_uint4x32(-1.0, Precision::I32)[0], u32::MAX);
        assert_eq!(to_uint4x32(1.5, Precision::F64), {
            let bits = 1.5f64.to_bits();
            [bits as u32, (bits >> 32) as u32, 0, 0]
        });
        assert_eq!(
            to_uint4x32(1.5, Precision::F32),
            [1.5f32.to_bits(), 0, 0, 0]
        );
        assert_eq!(to_uint4x32(7.0, Precision::U8), [7, 0, 0, 0]);
    }
}
