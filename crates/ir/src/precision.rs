//! Precisions: the element types of tensor buffers, their sizes, which one dominates when
//! operands differ, and how a value is rounded to each.
//!
//! Values travel between precisions as `f64` (exact for every precision but `i64` beyond 2⁵³ and
//! the 128-bit word), rounded by [`Precision::round`]; the 128-bit `uint4x32` word has its own
//! conversions ([`to_uint4x32`]), which the counter-based random numbers rely on bit for bit.
//!
//! fp8 is OCANNL's 8-bit float, E5M2: f16's sign and 5 exponent bits with 2 significand bits, so
//! that its byte is the upper byte of the f16 of the same value (infinities and NaNs as IEEE's).

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
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer, its bits held in the `i64` the other integers compute in: sums,
    /// differences, products and negations wrap modulo 2⁶⁴, and what a sign would change reads
    /// the bits as unsigned (comparisons, quotients, remainders, powers, extrema, relu,
    /// conversions to and from floats, which saturate into its range).
    U64,
    /// 8-bit float, E5M2: 5 exponent bits (bias 15), 2 significand bits, computed in f32.
    Fp8,
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
    pub const ALL: [Precision; 13] = [
        Precision::U8,
        Precision::I8,
        Precision::U16,
        Precision::I32,
        Precision::U32,
        Precision::I64,
        Precision::U64,
        Precision::Fp8,
        Precision::F16,
        Precision::Bf16,
        Precision::F32,
        Precision::F64,
        Precision::Uint4x32,
    ];

    /// The size of one cell, in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            Precision::U8 | Precision::I8 | Precision::Fp8 => 1,
            Precision::U16 | Precision::F16 | Precision::Bf16 => 2,
            Precision::I32 | Precision::U32 | Precision::F32 => 4,
            Precision::I64 | Precision::U64 | Precision::F64 => 8,
            Precision::Uint4x32 => 16,
        }
    }

    /// Whether values are floating point (fp8, f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Precision::Fp8 | Precision::F16 | Precision::Bf16 | Precision::F32 | Precision::F64
        )
    }

    /// Whether this is a half precision or narrower float whose range ends near 2¹⁶ (fp8 and
    /// f16; bf16 has f32's range): the precisions OCANNL's `check_half_prec_constants_cutoff`
    /// guards against constants that would overflow them.
    pub fn is_up_to_fp16(self) -> bool {
        matches!(self, Precision::Fp8 | Precision::F16)
    }

    /// Rank in the promotion order: when operands differ, the higher one is computed in. The
    /// 128-bit word wins over everything (its operations take nothing else), then floats by
    /// range and precision, then integers by width.
    fn rank(self) -> u8 {
        match self {
            Precision::I8 => 0,
            Precision::U8 => 1,
            Precision::U16 => 2,
            Precision::I32 => 3,
            Precision::U32 => 4,
            Precision::I64 => 5,
            Precision::U64 => 6,
            Precision::Fp8 => 7,
            Precision::F16 => 8,
            Precision::Bf16 => 9,
            Precision::F32 => 10,
            Precision::F64 => 11,
            Precision::Uint4x32 => 12,
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
            Precision::Fp8 => round_fp8(x),
            // `as` from a float truncates toward zero and saturates, NaN to 0.
            Precision::U8 => f64::from(x as u8),
            Precision::I8 => f64::from(x as i8),
            Precision::U16 => f64::from(x as u16),
            Precision::I32 => f64::from(x as i32),
            Precision::U32 | Precision::Uint4x32 => f64::from(x as u32),
            Precision::I64 => (x as i64) as f64,
            Precision::U64 => (x as u64) as f64,
        }
    }
}

/// The largest finite fp8 (E5M2): 1.75 · 2¹⁵.
pub const FP8_MAX: f64 = 57344.0;

/// `x` rounded to the nearest fp8 (E5M2), ties to even: beyond the largest finite value by half a
/// step or more it is an infinity, below 2⁻¹⁴ the step is that of the subnormals, 2⁻¹⁶.
fn round_fp8(x: f64) -> f64 {
    if x.is_nan() || x.is_infinite() {
        return x;
    }
    let a = x.abs();
    // Halfway between the largest finite value and the next power of two, 2¹⁶, ties to the
    // even one, which is beyond the range.
    if a >= 61440.0 {
        return f64::INFINITY.copysign(x);
    }
    // The binary exponent of `a` (f64 subnormals are far below fp8's and round to 0 alike).
    let exponent = ((a.to_bits() >> 52) as i32 - 1023).max(-14);
    // Two significand bits after the leading one: steps of 2^(e-2). Scaling by a power of two is
    // exact, so the only rounding is `round_ties_even`'s.
    let step = 2f64.powi(exponent - 2);
    ((a / step).round_ties_even() * step).copysign(x)
}

/// The byte of an fp8 value: `x` rounded to fp8, as the upper byte of its f16 (exact, as every
/// fp8 value is an f16). A NaN is the quiet one, `0x7E`, with its sign, as the C backend writes
/// it.
pub fn fp8_bits(x: f64) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | 0x7E;
    }
    (f16::from_f64(round_fp8(x)).to_bits() >> 8) as u8
}

/// The value of an fp8 byte.
pub fn fp8_value(bits: u8) -> f64 {
    f16::from_bits(u16::from(bits) << 8).to_f64()
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::U8 => "u8",
            Precision::I8 => "i8",
            Precision::I32 => "i32",
            Precision::U16 => "u16",
            Precision::U32 => "u32",
            Precision::I64 => "i64",
            Precision::U64 => "u64",
            Precision::Fp8 => "fp8",
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
        Precision::I64 | Precision::U64 | Precision::F64 => {
            let bits = match from {
                Precision::I64 => (x as i64) as u64,
                Precision::U64 => x as u64,
                _ => x.to_bits(),
            };
            [bits as u32, (bits >> 32) as u32, 0, 0]
        }
        Precision::F32 => [(x as f32).to_bits(), 0, 0, 0],
        Precision::F16 => [u32::from(f16::from_f64(x).to_bits()), 0, 0, 0],
        Precision::Bf16 => [u32::from(bf16::from_f64(x).to_bits()), 0, 0, 0],
        Precision::Fp8 => [u32::from(fp8_bits(x)), 0, 0, 0],
        Precision::U8 | Precision::I8 | Precision::U16 | Precision::Uint4x32 => [x as u32, 0, 0, 0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_kinds() {
        let bytes: Vec<usize> = Precision::ALL.iter().map(|p| p.size_in_bytes()).collect();
        assert_eq!(bytes, vec![1, 1, 2, 4, 4, 8, 8, 1, 2, 2, 4, 8, 16]);
        let floats: Vec<Precision> = Precision::ALL
            .into_iter()
            .filter(|p| p.is_float())
            .collect();
        assert_eq!(
            floats,
            vec![
                Precision::Fp8,
                Precision::F16,
                Precision::Bf16,
                Precision::F32,
                Precision::F64
            ]
        );
    }

    /// Every fp8 byte, in order of value, paired with its value: the finite ones, positive.
    fn finite_fp8_ascending() -> Vec<(u8, f64)> {
        (0u8..0x7C).map(|bits| (bits, fp8_value(bits))).collect()
    }

    #[test]
    fn every_fp8_byte_is_its_own_rounding() {
        for bits in 0..=255u8 {
            let x = fp8_value(bits);
            if x.is_nan() {
                // E5M2 NaNs: exponent all ones, significand not zero.
                assert_eq!(bits & 0x7C, 0x7C, "{bits:#04x}");
                assert_ne!(bits & 3, 0, "{bits:#04x}");
                assert!(Precision::Fp8.round(x).is_nan());
                assert_eq!(fp8_bits(x) & 0x7F, 0x7E, "a NaN stays a NaN");
                continue;
            }
            assert_eq!(
                Precision::Fp8.round(x).to_bits(),
                x.to_bits(),
                "{bits:#04x}"
            );
            assert_eq!(fp8_bits(x), bits, "{bits:#04x} = {x}");
            // As an f32 (the C backend's compute type) too.
            let y = f64::from(x as f32);
            assert_eq!(Precision::Fp8.round(y).to_bits(), x.to_bits());
        }
        assert_eq!(fp8_value(0x7B), FP8_MAX);
        assert_eq!(fp8_value(0x7C), f64::INFINITY);
        assert_eq!(fp8_value(0xFC), f64::NEG_INFINITY);
        assert_eq!(fp8_value(0x01), 2f64.powi(-16));
        assert_eq!(fp8_value(0x04), 2f64.powi(-14));
        assert_eq!(fp8_value(0x3C), 1.0);
        assert_eq!(fp8_bits(-0.0), 0x80);
    }

    #[test]
    fn fp8_rounds_to_nearest_with_ties_to_even() {
        let values = finite_fp8_ascending();
        for pair in values.windows(2) {
            let ((low_bits, low), (_, high)) = (pair[0], pair[1]);
            let middle = (low + high) / 2.0;
            let even = if low_bits % 2 == 0 { low } else { high };
            for sign in [1.0, -1.0] {
                assert_eq!(Precision::Fp8.round(sign * middle), sign * even, "{middle}");
                let below = middle - (high - low) / 1024.0;
                let above = middle + (high - low) / 1024.0;
                assert_eq!(Precision::Fp8.round(sign * below), sign * low, "{below}");
                assert_eq!(Precision::Fp8.round(sign * above), sign * high, "{above}");
            }
        }
        // Past the largest finite value: halfway to 2^16 ties to the (infinite) even.
        assert_eq!(Precision::Fp8.round(61439.0), FP8_MAX);
        assert_eq!(Precision::Fp8.round(61440.0), f64::INFINITY);
        assert_eq!(Precision::Fp8.round(-1e300), f64::NEG_INFINITY);
        // Below the smallest subnormal's half: zero, keeping the sign.
        assert_eq!(Precision::Fp8.round(2f64.powi(-17)).to_bits(), 0);
        assert_eq!(
            Precision::Fp8.round(-2f64.powi(-18)).to_bits(),
            (-0.0f64).to_bits()
        );
        assert_eq!(Precision::Fp8.round(1e-320), 0.0);
    }

    #[test]
    fn sixteen_and_sixty_four_bit_unsigned_integers_truncate_and_saturate() {
        assert_eq!(Precision::U16.round(65535.9), 65535.0);
        assert_eq!(Precision::U16.round(65536.0), 65535.0);
        assert_eq!(Precision::U16.round(-3.5), 0.0);
        assert_eq!(Precision::U16.round(f64::NAN), 0.0);
        assert_eq!(Precision::U64.round(1.8e19), 1.8e19);
        assert_eq!(Precision::U64.round(1e20), u64::MAX as f64);
        assert_eq!(Precision::U64.round(-1.0), 0.0);
        assert_eq!(to_uint4x32(65535.0, Precision::U16), [65535, 0, 0, 0]);
        assert_eq!(
            to_uint4x32(2f64.powi(63), Precision::U64),
            [0, 0x8000_0000, 0, 0]
        );
        assert_eq!(to_uint4x32(1.0, Precision::Fp8), [0x3C, 0, 0, 0]);
        assert!(Precision::Fp8.is_up_to_fp16() && Precision::F16.is_up_to_fp16());
        assert!(!Precision::Bf16.is_up_to_fp16() && !Precision::U8.is_up_to_fp16());
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
