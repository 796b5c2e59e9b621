//! The transcendental functions of f32 compute precision (f16 and bf16 compute in f32): `exp`,
//! `exp2`, `log`, `log2`, `tanh`, `sin`, `cos` and `pow`, as the interpreter computes them and as
//! the C backend's prelude (`rc_expf` and kin in `crates/backends/src/cc/prelude.c`) computes them,
//! operation for operation, so that both give the same bits on every CPU and compiler. (The GPU
//! backend keeps WGSL's built-in functions, whose results its tests compare within tolerances.)
//!
//! Each function but `exp` and `log` widens its argument to `f64`, computes there with plain IEEE
//! additions, multiplications, divisions and integer operations on the bits (no fused
//! multiply-add, no library call, no table), and rounds the result to `f32` once. The double
//! computation is accurate to far better than an `f32` ulp (a relative error below 2^-35), so the
//! rounded result is within 1 ulp of the correctly rounded one (checked to ≤ 2 ulp over the whole
//! `f32` range by this module's tests). `exp` and `log`, the most called, compute in `f32` with the
//! same kinds of operations, within 1 ulp. Every choice is a choice between computed values, which the C mirror
//! makes as a blend of bits, so that a loop calling these functions vectorizes.
//!
//! Rounding to an integer uses the 1.5·2^52 trick (adding and subtracting it rounds to nearest
//! under the default rounding mode), and a power of two is built from its exponent bits: both
//! vectorize where a conversion between `f64` and a 64-bit integer does not.
//!
//! Special values follow C99: NaN propagates, infinities and zeros give their limits, results
//! too large overflow to infinity and too small ones underflow to subnormals or zero (the one
//! rounding to `f32` does both), `log` of a negative number is NaN and `log(±0)` is −∞, and `pow`
//! has C99's cases (`pow(x, ±0) = 1`, `pow(1, y) = 1`, `pow(−1, ±∞) = 1`, a negative base with an
//! integer exponent, zeros and infinities by the exponent's sign and parity). Small integer
//! exponents are computed directly: `pow(x, 2) = x·x` (exactly the correctly rounded square),
//! `pow(x, 1) = x`, `pow(x, −1) = 1/x` and `pow(x, 3) = (x·x)·x`.

/// 1.5·2^52: adding it to a double of magnitude below 2^51 and subtracting it again rounds that
/// double to the nearest integer, which the low bits of the sum hold in two's complement.
const ROUNDER: f64 = 6_755_399_441_055_744.0;
/// 2^54: adding it to a nonnegative double below 2^54 and subtracting it again rounds that double
/// to a multiple of 4.
const ROUNDER4: f64 = 18_014_398_509_481_984.0;
/// 1/ln 2, rounded.
const INV_LN2: f64 = std::f64::consts::LOG2_E;
/// ln 2 in two parts: the first has 32 significant bits, so that its product with an integer
/// below 2^21 is exact.
const LN2_HI: f64 = 0.693_147_180_369_123_8;
/// The rest of ln 2.
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// ln 2, rounded.
const LN2: f64 = std::f64::consts::LN_2;
/// π/2, rounded.
const HALF_PI: f64 = std::f64::consts::FRAC_PI_2;
/// √½'s bits: a double's significand is brought into [√½, √2) around it.
const SQRT_HALF_BITS: u64 = 0x3FE6_A09E_667F_3BCD;
/// The bits of 1.0.
const ONE_BITS: u64 = 0x3FF0_0000_0000_0000;
/// 1.5·2^23: adding it to a float of magnitude below 2^22 and subtracting it again rounds that
/// float to the nearest integer, which the low bits of the sum hold.
const ROUNDER_F32: f32 = 12_582_912.0;
/// ln 2 to 15 significant bits, so that its product with an integer below 2^8 is exact.
const LN2_HI_F32: f32 = 0.693_145_75;
/// The rest of ln 2, rounded to `f32`.
const LN2_LO_F32: f32 = 1.428_606_8e-6;
/// `u(r) ≈ (e^r − 1 − r)/r²` on |r| ≤ ln2/2, highest power first: a weighted minimax fit of the
/// error in `e^r = 1 + r + r²·u(r)`, its coefficients rounded to `f32`.
const EXP_FIT_F32: [f32; 5] = [
    1.381_457_1e-3,
    8.368_731e-3,
    4.166_839e-2,
    1.666_652_1e-1,
    4.999_999_4e-1,
];
/// 2/π in 28-bit pieces, the i-th a 28-bit integer times 2^(−28(i+1)): the product of one with an
/// `f32` (24 significant bits) is exact in a double. Seven pieces reach 2^-196, enough for the
/// largest `f32` (below 2^128) with 64 bits to spare after the binary point.
const TWO_OVER_PI: [f64; 7] = [
    0.636_619_769_036_769_9,
    3.330_811_473_856_165_6e-9,
    2.276_010_047_810_136e-18,
    2.526_826_018_900_282_2e-26,
    1.668_286_765_701_952_5e-34,
    1.158_871_328_288_855e-43,
    7.053_959_174_404_295e-52,
];

/// `c ? a : b`; the C mirror blends the bits of both.
fn select(c: bool, a: f64, b: f64) -> f64 {
    if c { a } else { b }
}

/// `x` rounded to the nearest integer (|x| < 2^51), and that integer's low bits.
fn round_to_integer(x: f64) -> (f64, u64) {
    let shifted = x + ROUNDER;
    (shifted - ROUNDER, shifted.to_bits())
}

/// `e^r − 1` for |r| ≤ ln2/2 + a little, to a relative error below 2^-35: its Taylor series to
/// the ninth power, in Horner's form with every coefficient a rounded `1/n!`.
fn expm1_poly(r: f64) -> f64 {
    let p = 1.0 / 362_880.0;
    let p = 1.0 / 40_320.0 + r * p;
    let p = 1.0 / 5_040.0 + r * p;
    let p = 1.0 / 720.0 + r * p;
    let p = 1.0 / 120.0 + r * p;
    let p = 1.0 / 24.0 + r * p;
    let p = 1.0 / 6.0 + r * p;
    let p = 0.5 + r * p;
    let p = 1.0 + r * p;
    r * p
}

/// `y` split as `k·ln2 + r`, |r| ≤ ln2/2: returns 2^k (|k| ≤ 1022) and `e^r − 1`.
fn exp_parts(y: f64) -> (f64, f64) {
    let (k, k_bits) = round_to_integer(y * INV_LN2);
    let r = (y - k * LN2_HI) - k * LN2_LO;
    (power_of_two(k_bits), expm1_poly(r))
}

/// 2^k from the low bits of `k + 1.5·2^52` (|k| ≤ 1022): the exponent field is `k + 1023`.
fn power_of_two(k_bits: u64) -> f64 {
    f64::from_bits(k_bits.wrapping_add(1023) << 52)
}

/// `2^y` for a double in [-230, 190].
fn exp2_f64(y: f64) -> f64 {
    let (k, k_bits) = round_to_integer(y);
    let r = (y - k) * LN2;
    power_of_two(k_bits) * (1.0 + expm1_poly(r))
}

/// `x` clamped into [`low`, `high`], NaN kept.
fn clamp(x: f64, low: f64, high: f64) -> f64 {
    let x = select(x < low, low, x);
    select(x > high, high, x)
}

/// `x` clamped into [`low`, `high`], NaN kept. (The C mirror clamps floats where it can: gcc
/// vectorizes their blends on every x86-64 level, a double's only from SSE4.1 on.)
fn clamp_f32(x: f32, low: f32, high: f32) -> f32 {
    let x = select_f32(x < low, low, x);
    select_f32(x > high, high, x)
}

/// `e^x`, in `f32` throughout (the one function here that does not widen: softmax, GELU and the
/// logistic function call it once or twice a cell, and an `f32` loop has twice the lanes of a
/// double's). `x = k·ln2 + r` with |r| ≤ ln2/2 (Cody–Waite: `k` times ln2's leading bits is
/// exact), `e^r` as `1 + (r + r²·u(r))` with `u` a degree-4 fit of `(e^r − 1 − r)/r²` (relative
/// error 2^-28 in `e^r`), scaled by 2^k in two exact halves so that the one rounding of a
/// subnormal or infinite result is the last multiplication's. Within 1 ulp of the correctly
/// rounded result. Arguments beyond [-104, 89] give what those bounds give: 0 and ∞.
pub fn exp(x: f32) -> f32 {
    let x = clamp_f32(x, -104.0, 89.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUNDER_F32;
    let k = shifted - ROUNDER_F32;
    let r = (x - k * LN2_HI_F32) - k * LN2_LO_F32;
    let u = EXP_FIT_F32[1..]
        .iter()
        .fold(EXP_FIT_F32[0], |u, &c| c + r * u);
    let e_r = 1.0 + (r * r * u + r);
    // |k| ≤ 150: each half of 2^k is a normal float.
    let k = shifted.to_bits().wrapping_sub(ROUNDER_F32.to_bits()) as i32;
    let half = k >> 1;
    (e_r * power_of_two_f32(half)) * power_of_two_f32(k - half)
}

/// 2^k as an `f32`, for |k| ≤ 127.
fn power_of_two_f32(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `2^x`, exact at integers. Arguments beyond [-160, 140] give what those bounds give.
pub fn exp2(x: f32) -> f32 {
    exp2_f64(f64::from(clamp_f32(x, -160.0, 140.0))) as f32
}

/// The hyperbolic tangent: `(e^2|x| − 1) / (e^2|x| + 1)` with `e^2|x| − 1` computed without
/// cancellation, the sign of `x` put back (so `tanh(−0) = −0`). Beyond |x| = 20 the result
/// rounds to ±1.
pub fn tanh(x: f32) -> f32 {
    let a = f64::from(select_f32(x.abs() > 20.0, 20.0, x.abs()));
    let (scale, p) = exp_parts(a + a);
    // 2^k·(1 + p) − 1: for k = 0 (small |x|) exactly p, so tiny arguments keep their precision.
    let em1 = scale * p + (scale - 1.0);
    let t = em1 / (em1 + 2.0);
    let sign = f64::from(x).to_bits() & (1 << 63);
    f64::from_bits(t.to_bits() | sign) as f32
}

/// `ln m` and the exponent `e` of a positive normal double `d = m·2^e`, m ∈ [√½, √2): `ln m` to a
/// relative error below 2^-50, by the series of `2·atanh(s)`, `s = (m−1)/(m+1)` (|s| < 0.172).
fn log_parts(d: f64) -> (f64, f64) {
    let u = d.to_bits().wrapping_add(ONE_BITS - SQRT_HALF_BITS);
    // The biased exponent, placed in the significand of 2^52 to become a double exactly.
    let e = f64::from_bits((u >> 52) | 0x4330_0000_0000_0000) - 4_503_599_627_371_519.0;
    let m = f64::from_bits((u & 0x000F_FFFF_FFFF_FFFF).wrapping_add(SQRT_HALF_BITS));
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = 2.0 / 15.0;
    let r = 2.0 / 13.0 + z * r;
    let r = 2.0 / 11.0 + z * r;
    let r = 2.0 / 9.0 + z * r;
    let r = 2.0 / 7.0 + z * r;
    let r = 2.0 / 5.0 + z * r;
    let r = 2.0 / 3.0 + z * r;
    ((s + s) + s * (z * r), e)
}

/// The value of `log` or `log2` at the arguments the series does not take: −∞ at ±0, NaN below
/// 0, and `x` itself at +∞ and NaN; `core` elsewhere.
fn log_special(x: f64, core: f64) -> f64 {
    let special = select(x == 0.0, f64::NEG_INFINITY, select(x < 0.0, f64::NAN, x));
    select((x > 0.0) & (x < f64::INFINITY), core, special)
}

/// ln 2's leading 17 bits, so that its product with an exponent (|k| ≤ 152) is exact.
const LN2_HI_LOG_F32: f32 = f32::from_bits(0x3F31_7180);
/// The rest of ln 2, rounded to `f32`.
const LN2_LO_LOG_F32: f32 = f32::from_bits(0x3717_F7D1);
/// `R(s) ≈ (ln((1+s)/(1−s)) − 2s)/s` on |s| ≤ 0.1716 as `c1·s² + c2·s⁴ + c3·s⁶ + c4·s⁸`, with
/// an error below 2^-34: the minimax coefficients of FreeBSD's `logf`.
const LOG_FIT_F32: [f32; 4] = [
    f32::from_bits(0x3F2A_AAAA),
    f32::from_bits(0x3ECC_CE13),
    f32::from_bits(0x3E91_E9EE),
    f32::from_bits(0x3E78_9E26),
];
/// 2^25, which brings a subnormal `f32` into the normal range.
const SUBNORMAL_SCALE_F32: f32 = 33_554_432.0;

/// The natural logarithm, in `f32` throughout, within 1 ulp: `x = 2^k·m` with m ∈ [√½, √2)
/// (a subnormal `x` scaled by 2^25 first), `f = m − 1`, `s = f/(2 + f)`, and `ln m = f − f²/2 +
/// s·(f²/2 + R(s²))`, summed smallest first with `k·ln2` in two parts.
pub fn log(x: f32) -> f32 {
    let subnormal = x < f32::MIN_POSITIVE;
    let scaled = select_f32(subnormal, x * SUBNORMAL_SCALE_F32, x);
    let u = scaled.to_bits().wrapping_add(0x3F80_0000 - 0x3F35_04F3);
    let k = ((u >> 23) as i32 - 127) as f32 - select_f32(subnormal, 25.0, 0.0);
    let f = f32::from_bits((u & 0x007F_FFFF) + 0x3F35_04F3) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let [c1, c2, c3, c4] = LOG_FIT_F32;
    let r = z * (c1 + w * c3) + w * (c2 + w * c4);
    let half_square = 0.5 * f * f;
    let core = s * (half_square + r) + k * LN2_LO_LOG_F32 - half_square + f + k * LN2_HI_LOG_F32;
    let special = select_f32(
        x == 0.0,
        f32::NEG_INFINITY,
        select_f32(x < 0.0, f32::NAN, x),
    );
    select_f32((x > 0.0) & (x < f32::INFINITY), core, special)
}

/// The base-2 logarithm, exact at powers of two.
pub fn log2(x: f32) -> f32 {
    let d = f64::from(x);
    let (ln_m, e) = log_parts(d);
    log_special(d, e + ln_m * INV_LN2) as f32
}

/// `x·(2/π)` reduced: the quadrant (its low two bits count quarter turns) and the remainder in
/// radians, in [−π/4, π/4] (to a relative error below 2^-40), of a nonnegative finite `a`.
///
/// Each piece of 2/π times `a` is exact; each product is reduced by a multiple of 4 (exactly: a
/// product of 2^54 or more is one already), and the reduced products, each in [−2, 2], are summed
/// with their rounding errors kept, so that what is left after the whole quarter turns keeps its
/// precision however large `a` is.
fn reduce(a: f64) -> (u64, f64) {
    let mut sum = 0.0;
    let mut error = 0.0;
    for piece in TWO_OVER_PI {
        let p = a * piece;
        let reduced = select(p < ROUNDER4, p - ((p + ROUNDER4) - ROUNDER4), 0.0);
        // Knuth's two-sum: `sum + reduced` exactly as `next + its rounding error`.
        let next = sum + reduced;
        let back = next - sum;
        error += (sum - (next - back)) + (reduced - back);
        sum = next;
    }
    let (quadrant, quadrant_bits) = round_to_integer(sum);
    let turns = (sum - quadrant) + error;
    (quadrant_bits, turns * HALF_PI)
}

/// `sin r` for |r| ≤ π/4 + a little, to a relative error below 2^-36 (Taylor to r^11).
fn sin_poly(r: f64) -> f64 {
    let z = r * r;
    let p = -1.0 / 39_916_800.0;
    let p = 1.0 / 362_880.0 + z * p;
    let p = -1.0 / 5_040.0 + z * p;
    let p = 1.0 / 120.0 + z * p;
    let p = -1.0 / 6.0 + z * p;
    r + r * (z * p)
}

/// `cos r` for |r| ≤ π/4 + a little, to a relative error below 2^-40 (Taylor to r^12).
fn cos_poly(r: f64) -> f64 {
    let z = r * r;
    let p = 1.0 / 479_001_600.0;
    let p = -1.0 / 3_628_800.0 + z * p;
    let p = 1.0 / 40_320.0 + z * p;
    let p = -1.0 / 720.0 + z * p;
    let p = 1.0 / 24.0 + z * p;
    let p = -0.5 + z * p;
    1.0 + z * p
}

/// `sin(a + quarter·π/2)` from `a`'s reduction, `quarter` 0 for sin and 1 for cos.
fn sin_quadrant(a: f64, quarter: u64) -> f64 {
    let (quadrant, r) = reduce(a);
    let quadrant = quadrant.wrapping_add(quarter);
    let value = select(quadrant & 1 == 1, cos_poly(r), sin_poly(r));
    f64::from_bits(value.to_bits() ^ ((quadrant & 2) << 62))
}

/// The sine, with the argument reduced exactly for every `f32`. NaN and ±∞ give NaN.
pub fn sin(x: f32) -> f32 {
    let d = f64::from(x);
    let a = d.abs();
    let value = sin_quadrant(a, 0);
    let signed = f64::from_bits(value.to_bits() ^ (d.to_bits() & (1 << 63))) as f32;
    select_f32(x.abs() < f32::INFINITY, signed, x * 0.0)
}

/// The cosine, with the argument reduced exactly for every `f32`. NaN and ±∞ give NaN.
pub fn cos(x: f32) -> f32 {
    let d = f64::from(x);
    let a = d.abs();
    select_f32(x.abs() < f32::INFINITY, sin_quadrant(a, 1) as f32, x * 0.0)
}

/// `x^y` with C99's special cases.
///
/// In general `2^(y·log2|x|)`, with `log2|x|` to a relative error below 2^-50 so that the product
/// (at most a few hundred before the result overflows or underflows) errs by less than 2^-40;
/// the sign is negative for a negative `x` (−0 and −∞ included) and an odd integer `y`. Small
/// integer exponents (1, 2, 3, −1) are computed by multiplication and division.
pub fn pow(x: f32, y: f32) -> f32 {
    let a = f64::from(x).abs();
    let (ln_m, e) = log_parts(a);
    let log2_a = e + ln_m * INV_LN2;
    // log2 of 0 is −∞, of ∞ is ∞ and of NaN is NaN, so that exp2 makes 0, ∞ or NaN of them.
    let log2_a = select(a == 0.0, f64::NEG_INFINITY, log2_a);
    let log2_a = select(a.is_nan() || a > f64::MAX, a, log2_a);
    let t = clamp(f64::from(y) * log2_a, -230.0, 190.0);
    let magnitude = exp2_f64(t) as f32;
    // Whether y is an integer and whether an odd one, in floats: from 2^23 on every float is an
    // integer, odd if its last bit is set, and from 2^24 on an even one; below, adding and
    // subtracting 2^23 rounds to an integer, whose parity is the sum's last bit.
    let y_abs = y.abs();
    let big = y_abs >= 8_388_608.0;
    let y_shifted = select_f32(big, 0.0, y_abs) + 8_388_608.0;
    let whole = y_shifted - 8_388_608.0 == y_abs;
    let odd = (whole && y_shifted.to_bits() & 1 == 1)
        || (big && y_abs < 16_777_216.0 && y.to_bits() & 1 == 1);
    let sign = x.to_bits() & 0x8000_0000 & if odd { u32::MAX } else { 0 };
    let result = f32::from_bits(magnitude.to_bits() | sign);
    let negative_base = x < 0.0 && x > f32::NEG_INFINITY;
    let result = select_f32(negative_base && !(big || whole), f32::NAN, result);
    let one = x == 1.0 || y == 0.0 || (x == -1.0 && y_abs == f32::INFINITY);
    let result = select_f32(one, 1.0, result);
    let result = select_f32(y == 3.0, (x * x) * x, result);
    let result = select_f32(y == -1.0, 1.0 / x, result);
    let result = select_f32(y == 1.0, x, result);
    select_f32(y == 2.0, x * x, result)
}

/// `c ? a : b` on `f32`; the C mirror blends the bits of both.
fn select_f32(c: bool, a: f32, b: f32) -> f32 {
    if c { a } else { b }
}

#[cfg(test)]
mod tests;
