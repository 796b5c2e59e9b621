//! Accuracy against the correctly rounded result — the library's `f64` function of the same
//! argument, rounded to `f32` — over the whole `f32` range: every 997th bit pattern (each exponent
//! of both signs about 16 800 times, subnormals included), every pattern near the thresholds where
//! results overflow, underflow or saturate, and the special values.

use super::*;

/// Bit patterns apart, with −0 and +0 the same and NaN only near NaN.
fn ulps(got: f32, want: f32) -> u64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let ordered = |x: f32| {
        let bits = x.to_bits();
        if bits >> 31 == 1 {
            -i64::from(bits & 0x7FFF_FFFF)
        } else {
            i64::from(bits)
        }
    };
    ordered(got).abs_diff(ordered(want))
}

/// Asserts that `f` is within 2 ulp of `reference` over `inputs` and, where the reference is a
/// zero or an infinity, of the same sign.
fn check(
    name: &str,
    inputs: impl Iterator<Item = f32>,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f64) -> f64,
) {
    check_within(2, name, inputs, f, reference);
}

/// [`check`] with a bound of `most` ulp.
fn check_within(
    most: u64,
    name: &str,
    inputs: impl Iterator<Item = f32>,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f64) -> f64,
) {
    for x in inputs {
        let (got, want) = (f(x), reference(f64::from(x)) as f32);
        let error = ulps(got, want);
        assert!(
            error <= most,
            "{name}({x:e} = {:#010x}) = {got:e}, want {want:e}: {error} ulp",
            x.to_bits()
        );
        if want == 0.0 || want.is_infinite() {
            assert_eq!(
                got.is_sign_negative(),
                want.is_sign_negative(),
                "{name}({x:e}): {got:e}, want {want:e}"
            );
        }
    }
}

/// Every 997th bit pattern of all 2^32.
fn strided() -> impl Iterator<Item = f32> {
    (0..=u32::MAX / 997).map(|i| f32::from_bits(i * 997))
}

/// The 2^12 patterns on either side of each of `centers`, both signs.
fn around(centers: &[f32]) -> impl Iterator<Item = f32> + '_ {
    centers.iter().flat_map(|c| {
        let bits = c.abs().to_bits();
        (bits.saturating_sub(4096)..=bits.saturating_add(4096).min(0x7F80_0000))
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
    })
}

const SPECIALS: [f32; 12] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    1e-45,
    -1e-45,
    1.0,
    -1.0,
];

fn everywhere(centers: &[f32]) -> impl Iterator<Item = f32> + '_ {
    strided().chain(around(centers)).chain(SPECIALS)
}

#[test]
fn exp_is_within_one_ulp_everywhere() {
    // Overflow, the smallest normal result, the smallest subnormal one, 0.
    let edges = [88.722_84, -87.336_55, -103.972_08, 0.0, 1.0];
    check_within(1, "exp", everywhere(&edges), exp, f64::exp);
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(89.0), f32::INFINITY);
    assert_eq!(exp(-104.0).to_bits(), 0);
    assert!(exp(f32::NAN).is_nan());
}

/// 2^k, normal or subnormal, from its bits.
fn two_to(k: i32) -> f32 {
    if k >= -126 {
        f32::from_bits(((k + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (k + 149))
    }
}

#[test]
fn exp2_is_within_two_ulp_everywhere_and_exact_at_integers() {
    let edges = [128.0, -126.0, -149.0, -150.0, 0.0];
    check("exp2", everywhere(&edges), exp2, f64::exp2);
    for k in -149..128 {
        assert_eq!(exp2(k as f32), two_to(k), "2^{k}");
    }
    assert_eq!(exp2(128.0), f32::INFINITY);
    assert_eq!(exp2(-151.0).to_bits(), 0);
}

#[test]
fn log_is_within_one_ulp_everywhere_with_ieee_special_values() {
    let edges = [1.0, f32::MIN_POSITIVE, 1e-45, f32::MAX, 2.0, 0.5];
    check_within(1, "log", everywhere(&edges), log, f64::ln);
    // Every float of [1/4, 4), where the reduction's three exponents meet.
    let near_one = (0x3E80_0000..0x4080_0000).map(f32::from_bits);
    check_within(1, "log", near_one, log, f64::ln);
    assert_eq!(log(1.0).to_bits(), 0);
    assert_eq!(log(0.0), f32::NEG_INFINITY);
    assert_eq!(log(-0.0), f32::NEG_INFINITY);
    assert!(log(-1.0).is_nan() && log(-1e-45).is_nan() && log(f32::NEG_INFINITY).is_nan());
    assert_eq!(log(f32::INFINITY), f32::INFINITY);
}

#[test]
fn log2_is_within_two_ulp_everywhere_and_exact_at_powers_of_two() {
    let edges = [1.0, f32::MIN_POSITIVE, 1e-45, f32::MAX, 2.0, 0.5];
    check("log2", everywhere(&edges), log2, f64::log2);
    for k in -149..128 {
        assert_eq!(log2(two_to(k)), k as f32, "log2(2^{k})");
    }
    assert_eq!(log2(0.0), f32::NEG_INFINITY);
    assert!(log2(-2.0).is_nan());
}

#[test]
fn tanh_is_within_two_ulp_everywhere() {
    // Where tanh rounds to 1, where the reduction's quotient first leaves 0, tiny arguments.
    let edges = [9.010_913, 0.173_286_8, 0.346_573_6, 1e-20, 0.0];
    check("tanh", everywhere(&edges), tanh, f64::tanh);
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(tanh(f32::INFINITY), 1.0);
    assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    assert_eq!(tanh(1e-40), 1e-40);
}

/// Arguments where x mod π/2 is smallest relative to x, whose reduction needs the most bits:
/// 16367173·2^72 is the worst case for single precision (Muller, *Elementary Functions*), and
/// the floats nearest small multiples of π/2.
fn hard_reductions() -> Vec<f32> {
    let mut centers = vec![16_367_173.0 * 2f32.powi(72), f32::MAX, 1e30, 1e10, 8.0e6];
    centers.extend((1..64).map(|k| k as f32 * std::f32::consts::FRAC_PI_2));
    centers
}

#[test]
fn sin_is_within_two_ulp_everywhere_huge_arguments_included() {
    check("sin", everywhere(&hard_reductions()), sin, f64::sin);
    assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
    assert!(sin(f32::INFINITY).is_nan() && sin(f32::NEG_INFINITY).is_nan());
    assert_eq!(sin(1e-40), 1e-40);
}

#[test]
fn cos_is_within_two_ulp_everywhere_huge_arguments_included() {
    check("cos", everywhere(&hard_reductions()), cos, f64::cos);
    assert_eq!(cos(0.0), 1.0);
    assert_eq!(cos(-0.0), 1.0);
    assert!(cos(f32::INFINITY).is_nan() && cos(f32::NAN).is_nan());
}

/// Exponents: small integers (the directly computed ones among them), halves, thirds, huge and
/// tiny ones, odd integers beyond 2^23 and even ones beyond 2^24, and the special values.
fn exponents() -> Vec<f32> {
    let mut ys: Vec<f32> = (-12..=12).map(|k| k as f32).collect();
    ys.extend((-12..=12).map(|k| k as f32 + 0.5));
    ys.extend([
        1.0 / 3.0,
        -1.0 / 3.0,
        0.1,
        -2.7,
        1e-10,
        -1e-10,
        1e-40,
        37.5,
        -150.25,
        1e10,
        -1e10,
        16_777_215.0,
        16_777_217.0,
        -16_777_215.0,
        8_388_609.0,
        2f32.powi(31),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -0.0,
    ]);
    ys
}

#[test]
fn pow_is_within_two_ulp_on_a_grid_of_bases_and_exponents() {
    let ys = exponents();
    // Bases: every 99991st pattern (both signs, every exponent), values near 1 (where y·log2 x
    // is small and exponents large matter), and the special values.
    let mut xs: Vec<f32> = (0..=u32::MAX / 99_991)
        .map(|i| f32::from_bits(i * 99_991))
        .collect();
    xs.extend(around(&[1.0]).step_by(64));
    xs.extend([0.5, 2.0, 3.0, 10.0, -2.0, -3.0, -0.5, 1e-30, 1e30]);
    xs.extend(SPECIALS);
    for &y in &ys {
        check(
            &format!("pow(·, {y:e})"),
            xs.iter().copied(),
            |x| pow(x, y),
            |x| x.powf(f64::from(y)),
        );
    }
    // Every base for the exponents computed directly and a general one.
    for y in [2.0, 3.0, -1.0, 0.5] {
        check(
            &format!("pow(·, {y})"),
            strided(),
            |x| pow(x, y),
            |x| x.powf(f64::from(y)),
        );
    }
}

#[test]
fn pow_has_the_c99_special_cases() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    let bits = |x: f32| x.to_bits();
    assert_eq!(pow(nan, 0.0), 1.0);
    assert_eq!(pow(nan, -0.0), 1.0);
    assert_eq!(pow(1.0, nan), 1.0);
    assert_eq!(pow(-1.0, inf), 1.0);
    assert_eq!(pow(-1.0, -inf), 1.0);
    assert!(pow(-1.0, nan).is_nan() && pow(nan, 1.5).is_nan() && pow(2.0, nan).is_nan());
    assert!(pow(-8.0, 1.0 / 3.0).is_nan());
    assert_eq!(pow(-2.0, 3.0), -8.0);
    assert_eq!(pow(-2.0, 5.0), -32.0);
    assert_eq!(pow(-2.0, -3.0), -0.125);
    assert_eq!(pow(-2.0, 4.0), 16.0);
    assert_eq!(bits(pow(-0.0, 3.0)), bits(-0.0));
    assert_eq!(bits(pow(-0.0, 5.0)), bits(-0.0));
    assert_eq!(bits(pow(-0.0, 4.0)), bits(0.0));
    assert_eq!(bits(pow(-0.0, 0.5)), bits(0.0));
    assert_eq!(pow(-0.0, -3.0), -inf);
    assert_eq!(pow(-0.0, -5.0), -inf);
    assert_eq!(pow(-0.0, -4.0), inf);
    assert_eq!(pow(0.0, -0.5), inf);
    assert_eq!(pow(0.5, inf), 0.0);
    assert_eq!(pow(0.5, -inf), inf);
    assert_eq!(pow(-2.0, inf), inf);
    assert_eq!(pow(-2.0, -inf), 0.0);
    assert_eq!(pow(-inf, 3.0), -inf);
    assert_eq!(pow(-inf, 4.0), inf);
    assert_eq!(pow(-inf, 0.5), inf);
    assert_eq!(bits(pow(-inf, -3.0)), bits(-0.0));
    assert_eq!(bits(pow(-inf, -2.5)), bits(0.0));
    assert_eq!(pow(inf, -1.0), 0.0);
    assert_eq!(pow(inf, 0.5), inf);
    assert_eq!(pow(2.0, 128.0), inf);
    assert_eq!(pow(2.0, -150.0), 0.0);
    assert_eq!(pow(2.0, -149.0), 1e-45);
    assert_eq!(pow(10.0, 2.0), 100.0);
    // The directly computed exponents give what the multiplications give.
    for x in [1.1f32, -3.7, 1e20, 1e-20, 3e-38] {
        assert_eq!(bits(pow(x, 2.0)), bits(x * x));
        assert_eq!(bits(pow(x, 3.0)), bits(x * x * x));
        assert_eq!(bits(pow(x, -1.0)), bits(1.0 / x));
        assert_eq!(bits(pow(x, 1.0)), bits(x));
    }
}
