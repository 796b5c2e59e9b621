//! Primitive operations on scalars and the accumulators of assignments, with the meaning every
//! backend must reproduce (the interpreter computes exactly these), and the counter-based random
//! bit generator, Threefry-4×32 with 20 rounds. [`Unop`] and [`Binop`] are declared from the
//! tables of [`crate::op_table`], which list each one with its names and its meaning in a line.
//!
//! NaN propagates through every operation as in numpy: `relu(NaN)` is NaN, `max` and `min` are
//! numpy's `maximum` and `minimum` (a NaN on either side is the result; ties keep the first
//! argument), and a gradient gate at NaN passes the NaN on rather than a 0. Threefry is checked
//! against the known-answer vectors published with its reference implementation.

use std::fmt;

use crate::fmath;
use crate::precision::Precision;

/// Declares [`Unop`] from [`unop_table`](crate::unop_table): its variants, `ALL`, `name` and
/// `meaning`.
macro_rules! declare_unop {
    ($($group:ident: {
        $(#[doc = $meaning:literal] $(#[doc = $more:literal])* $op:ident $name:literal,)*
    })*) => {
        /// One-argument operations.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Unop {
            $($(#[doc = $meaning] $(#[doc = $more])* $op,)*)*
        }

        impl Unop {
            /// Every one-argument operation, in declaration order.
            pub const ALL: [Unop; [$($(Unop::$op,)*)*].len()] = [$($(Unop::$op,)*)*];

            /// The operation's name in printed IR and error messages (`exp`, `recip_sqrt`, …).
            pub fn name(self) -> &'static str {
                match self {
                    $($(Unop::$op => $name,)*)*
                }
            }

            /// The operation's meaning in one line, in Markdown, the argument named `x`
            /// (`` `max(0, x)`. ``).
            pub fn meaning(self) -> &'static str {
                match self {
                    $($(Unop::$op => $meaning.trim_ascii_start(),)*)*
                }
            }
        }
    };
}

crate::unop_table!(declare_unop);

/// Declares [`Binop`] from [`binop_table`](crate::binop_table): its variants, `ALL`, `name`,
/// `word` and `meaning`.
macro_rules! declare_binop {
    ($($group:ident: {
        $(
            #[doc = $meaning:literal] $(#[doc = $more:literal])*
            $op:ident $symbol:literal $word:literal,
        )*
    })*) => {
        /// Two-argument operations.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Binop {
            $($(#[doc = $meaning] $(#[doc = $more])* $op,)*)*
        }

        impl Binop {
            /// Every two-argument operation, in declaration order.
            pub const ALL: [Binop; [$($(Binop::$op,)*)*].len()] = [$($(Binop::$op,)*)*];

            /// The operator's symbol (`+`, `*`, `max`, …): an accumulator prints as `=` followed
            /// by it.
            pub fn name(self) -> &'static str {
                match self {
                    $($(Binop::$op => $symbol,)*)*
                }
            }

            /// The operation's name as a word (`add`, `mul`, `max`, `relu_gate`, …).
            pub fn word(self) -> &'static str {
                match self {
                    $($(Binop::$op => $word,)*)*
                }
            }

            /// The operation's meaning in one line, in Markdown, the arguments named `a` and `b`
            /// (`` `a + b`. ``).
            pub fn meaning(self) -> &'static str {
                match self {
                    $($(Binop::$op => $meaning.trim_ascii_start(),)*)*
                }
            }
        }
    };
}

crate::binop_table!(declare_binop);

/// Three-argument operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ternop {
    /// `b` where `a` is not 0, else `c`.
    Where,
    /// `a·b + c`, rounded once.
    Fma,
    /// `a·b·c`.
    Mul3,
}

impl Unop {
    /// The value on floats. [`Unop::Uint4x32ToPrecUniform1`] reads a word, not a float: here it
    /// gives NaN; evaluators handle it through [`crate::value::uniform1`].
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Unop::Uint4x32ToPrecUniform1 => f64::NAN,
            Unop::Identity => x,
            Unop::Neg => -x,
            // NaN is not `<= 0`: it passes through, as in numpy and PyTorch.
            Unop::Relu => {
                if x <= 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Unop::Sat01 => x.clamp(0.0, 1.0),
            Unop::Exp => x.exp(),
            Unop::Log => x.ln(),
            Unop::Exp2 => x.exp2(),
            Unop::Log2 => x.log2(),
            Unop::Sin => x.sin(),
            Unop::Cos => x.cos(),
            Unop::Sqrt => x.sqrt(),
            Unop::Recip => 1.0 / x,
            Unop::RecipSqrt => 1.0 / x.sqrt(),
            Unop::Tanh => x.tanh(),
            Unop::Not => f64::from(u8::from(x == 0.0)),
            Unop::Trunc => x.trunc(),
        }
    }

    /// The value of a float computed in `precision`'s compute precision (see
    /// [`Precision::compute`]): [`Unop::apply_f32`] for f16, bf16 and f32, [`Unop::apply`] for
    /// f64.
    pub fn apply_in(self, precision: Precision, x: f64) -> f64 {
        match precision.compute() {
            Precision::F32 => f64::from(self.apply_f32(x as f32)),
            _ => self.apply(x),
        }
    }

    /// The value computed in f32: the transcendental functions are [`crate::fmath`]'s, which
    /// compiled code reproduces bit for bit; every other operation is [`Unop::apply`]'s result
    /// rounded to f32, as compiled code computes it.
    pub fn apply_f32(self, x: f32) -> f32 {
        match self {
            Unop::Exp => fmath::exp(x),
            Unop::Log => fmath::log(x),
            Unop::Exp2 => fmath::exp2(x),
            Unop::Log2 => fmath::log2(x),
            Unop::Sin => fmath::sin(x),
            Unop::Cos => fmath::cos(x),
            Unop::Tanh => fmath::tanh(x),
            other => other.apply(f64::from(x)) as f32,
        }
    }
}

impl Binop {
    /// The value on floats (in f64, the compute precision of f64).
    pub fn apply(self, a: f64, b: f64) -> f64 {
        let truth = |t: bool| f64::from(u8::from(t));
        match self {
            Binop::Arg1 => a,
            Binop::Arg2 => b,
            Binop::Add => a + b,
            Binop::Sub => a - b,
            Binop::Mul => a * b,
            Binop::Div => a / b,
            // The square is the correctly rounded product, which libraries' pow need not return.
            Binop::Pow if b == 2.0 => a * a,
            Binop::Pow => a.powf(b),
            // numpy's maximum and minimum: a NaN on either side is the result; ties keep `a`.
            Binop::Max => {
                if a >= b || a.is_nan() {
                    a
                } else {
                    b
                }
            }
            Binop::Min => {
                if a <= b || a.is_nan() {
                    a
                } else {
                    b
                }
            }
            // The derivative at NaN is NaN: the gate passes the NaN on rather than a 0.
            Binop::ReluGate => {
                if a > 0.0 {
                    b
                } else if a <= 0.0 {
                    0.0
                } else {
                    a
                }
            }
            Binop::Sat01Gate => {
                if a > 0.0 && a < 1.0 {
                    b
                } else if a.is_nan() {
                    a
                } else {
                    0.0
                }
            }
            Binop::Or => truth(a != 0.0 || b != 0.0),
            Binop::And => truth(a != 0.0 && b != 0.0),
            Binop::Lt => truth(a < b),
            Binop::Eq => truth(a == b),
            Binop::Ne => truth(a != b),
            Binop::Mod => {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) {
                    r + b
                } else {
                    r
                }
            }
            Binop::Threefry4x32 | Binop::Threefry4x32Light => f64::NAN,
        }
    }

    /// The value of floats computed in `precision`'s compute precision (see
    /// [`Precision::compute`]): [`Binop::apply_f32`] for f16, bf16 and f32, [`Binop::apply`] for
    /// f64.
    pub fn apply_in(self, precision: Precision, a: f64, b: f64) -> f64 {
        match precision.compute() {
            Precision::F32 => f64::from(self.apply_f32(a as f32, b as f32)),
            _ => self.apply(a, b),
        }
    }

    /// The value computed in f32: `pow` is [`crate::fmath::pow`], which compiled code
    /// reproduces bit for bit; every other operation is [`Binop::apply`]'s result rounded to f32.
    pub fn apply_f32(self, a: f32, b: f32) -> f32 {
        match self {
            Binop::Pow => fmath::pow(a, b),
            other => other.apply(f64::from(a), f64::from(b)) as f32,
        }
    }

    /// The value on integers, wrapping on overflow; `None` for operations on words. A division
    /// or remainder by zero gives 0, as compiled code computes it on every backend (which cannot
    /// trap). Operations without an integer meaning (`**` with a negative exponent) compute on
    /// floats and truncate.
    pub fn apply_int(self, a: i64, b: i64) -> Option<i64> {
        let truth = |t: bool| i64::from(t);
        Some(match self {
            Binop::Arg1 => a,
            Binop::Arg2 => b,
            Binop::Add => a.wrapping_add(b),
            Binop::Sub => a.wrapping_sub(b),
            Binop::Mul => a.wrapping_mul(b),
            Binop::Div if b == 0 => 0,
            Binop::Div => a.checked_div(b).unwrap_or_else(|| a.wrapping_neg()),
            // Any exponent that is no fraction, as C's loop over its bits.
            Binop::Pow if b >= 0 => wrapping_pow(a as u64, b as u64) as i64,
            Binop::Pow => (a as f64).powf(b as f64) as i64,
            Binop::Max => a.max(b),
            Binop::Min => a.min(b),
            Binop::ReluGate => {
                if a > 0 {
                    b
                } else {
                    0
                }
            }
            // No integer lies strictly between 0 and 1.
            Binop::Sat01Gate => 0,
            Binop::Or => truth(a != 0 || b != 0),
            Binop::And => truth(a != 0 && b != 0),
            Binop::Lt => truth(a < b),
            Binop::Eq => truth(a == b),
            Binop::Ne => truth(a != b),
            Binop::Mod if b == 0 => 0,
            Binop::Mod => {
                let r = a.wrapping_rem(b);
                if r != 0 && (r < 0) != (b < 0) {
                    r + b
                } else {
                    r
                }
            }
            Binop::Threefry4x32 | Binop::Threefry4x32Light => return None,
        })
    }

    /// [`Binop::apply_int`] in a computation of `precision`: for u64, whose cells hold their
    /// bits in the `i64`, the operations that read a sign read them as unsigned (quotients,
    /// remainders, powers, extrema, comparisons, the relu gate).
    pub fn apply_int_in(self, precision: Precision, a: i64, b: i64) -> Option<i64> {
        if precision != Precision::U64 {
            return self.apply_int(a, b);
        }
        let (x, y) = (a as u64, b as u64);
        Some(match self {
            Binop::Div => x.checked_div(y).unwrap_or(0) as i64,
            Binop::Mod => x.checked_rem(y).unwrap_or(0) as i64,
            Binop::Pow => wrapping_pow(x, y) as i64,
            Binop::Max => x.max(y) as i64,
            Binop::Min => x.min(y) as i64,
            Binop::Lt => i64::from(x < y),
            Binop::ReluGate => {
                if x > 0 {
                    b
                } else {
                    0
                }
            }
            _ => return self.apply_int(a, b),
        })
    }

    /// As an accumulator, the value a cell starts from so that accumulating `x` into it gives
    /// `x`: 0 for sums, 1 for products, −∞ for maxima, +∞ for minima. `None` for operations that
    /// are no accumulators of that kind (an `Arg2` assignment overwrites: any start works).
    pub fn neutral(self) -> Option<f64> {
        match self {
            Binop::Add | Binop::Sub => Some(0.0),
            Binop::Mul | Binop::Div => Some(1.0),
            Binop::Max => Some(f64::NEG_INFINITY),
            Binop::Min => Some(f64::INFINITY),
            Binop::Arg2 | Binop::Or => Some(0.0),
            Binop::And => Some(1.0),
            _ => None,
        }
    }
}

impl Ternop {
    /// The value on floats (in f64, the compute precision of f64): `Fma` rounds once.
    pub fn apply(self, a: f64, b: f64, c: f64) -> f64 {
        match self {
            Ternop::Where => {
                if a != 0.0 {
                    b
                } else {
                    c
                }
            }
            Ternop::Fma => a.mul_add(b, c),
            Ternop::Mul3 => a * b * c,
        }
    }

    /// The value on integers, wrapping on overflow.
    pub fn apply_int(self, a: i64, b: i64, c: i64) -> i64 {
        match self {
            Ternop::Where => {
                if a != 0 {
                    b
                } else {
                    c
                }
            }
            Ternop::Fma => a.wrapping_mul(b).wrapping_add(c),
            Ternop::Mul3 => a.wrapping_mul(b).wrapping_mul(c),
        }
    }

    /// The operation's name in printed IR (`where`, `fma`, `mul3`).
    pub fn name(self) -> &'static str {
        match self {
            Ternop::Where => "where",
            Ternop::Fma => "fma",
            Ternop::Mul3 => "mul3",
        }
    }
}

impl Unop {
    /// The value on integers: exact where the operation has an integer meaning (see
    /// [`Unop::has_integer_meaning`]), else computed on floats and truncated toward zero
    /// (saturating), as a C store into an integer would.
    pub fn apply_int(self, x: i64) -> i64 {
        self.apply_exact_int(x)
            .unwrap_or_else(|| self.apply(x as f64) as i64)
    }

    /// [`Unop::apply_int`] in a computation of `precision`: for u64, whose cells hold their
    /// bits in the `i64`, the bits read as unsigned (every value is its own relu), and a value
    /// computed on floats converted back saturating into u64's range.
    pub fn apply_int_in(self, precision: Precision, x: i64) -> i64 {
        if precision != Precision::U64 {
            return self.apply_int(x);
        }
        match self {
            Unop::Relu => x,
            Unop::Sat01 => i64::from(x != 0),
            _ => self
                .apply_exact_int(x)
                .unwrap_or_else(|| self.apply(x as u64 as f64) as u64 as i64),
        }
    }

    /// Whether the operation has a meaning on integers, computed exactly (`neg`, `relu`, `not`,
    /// …); the others (`exp`, `sqrt`, `recip`, …) are functions of reals, which integers only
    /// approximate.
    pub fn has_integer_meaning(self) -> bool {
        self.apply_exact_int(0).is_some()
    }

    /// The value on integers of an operation that has an integer meaning.
    fn apply_exact_int(self, x: i64) -> Option<i64> {
        Some(match self {
            Unop::Identity | Unop::Trunc => x,
            Unop::Neg => x.wrapping_neg(),
            Unop::Relu => x.max(0),
            Unop::Sat01 => x.clamp(0, 1),
            Unop::Not => i64::from(x == 0),
            _ => return None,
        })
    }
}

impl fmt::Display for Ternop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Unop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Binop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Threefry-4×32 with 20 rounds: 128 random bits from a key and a counter, the same on every
/// backend (a block cipher of the counter, so that cell `i` of a tensor gets its bits from
/// counter `i` without any shared state).
pub fn threefry4x32(key: [u32; 4], counter: [u32; 4]) -> [u32; 4] {
    threefry4x32_rounds(key, counter, 20)
}

/// Threefry-4×32 with 2 rounds and one key injection after them (the light variant): the bits
/// still depend on every bit of the key and counter, but mix far less.
pub fn threefry4x32_light(key: [u32; 4], counter: [u32; 4]) -> [u32; 4] {
    threefry4x32_rounds(key, counter, 2)
}

/// `rounds` rounds of Threefry-4×32, with a key injection after every fourth round and after the
/// last.
fn threefry4x32_rounds(key: [u32; 4], counter: [u32; 4], rounds: usize) -> [u32; 4] {
    const ROTATIONS: [[u32; 2]; 8] = [
        [10, 26],
        [11, 21],
        [13, 27],
        [23, 5],
        [6, 20],
        [17, 11],
        [25, 10],
        [18, 20],
    ];
    let ks = [
        key[0],
        key[1],
        key[2],
        key[3],
        0x1BD1_1BDA ^ key[0] ^ key[1] ^ key[2] ^ key[3],
    ];
    let mut x = [
        counter[0].wrapping_add(ks[0]),
        counter[1].wrapping_add(ks[1]),
        counter[2].wrapping_add(ks[2]),
        counter[3].wrapping_add(ks[3]),
    ];
    for round in 0..rounds {
        let [r0, r1] = ROTATIONS[round % 8];
        if round % 2 == 0 {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r0) ^ x[0];
            x[2] = x[2].wrapping_add(x[3]);
            x[3] = x[3].rotate_left(r1) ^ x[2];
        } else {
            x[0] = x[0].wrapping_add(x[3]);
            x[3] = x[3].rotate_left(r0) ^ x[0];
            x[2] = x[2].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r1) ^ x[2];
        }
        if round % 4 == 3 || round + 1 == rounds {
            let s = round / 4 + 1;
            for (i, word) in x.iter_mut().enumerate() {
                *word = word.wrapping_add(ks[(s + i) % 5]);
            }
            x[3] = x[3].wrapping_add(s as u32);
        }
    }
    x
}

/// `base` to the power `exponent`, wrapping at 2⁶⁴, by squaring (any exponent, as C's loop).
fn wrapping_pow(mut base: u64, mut exponent: u64) -> u64 {
    let mut result: u64 = 1;
    while exponent > 0 {
        if exponent & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exponent >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_values() {
        let cases = [
            (Unop::Relu, -2.0, 0.0),
            (Unop::Relu, 3.0, 3.0),
            (Unop::Sat01, 1.5, 1.0),
            (Unop::Sat01, -0.5, 0.0),
            (Unop::Exp2, 3.0, 8.0),
            (Unop::Log2, 8.0, 3.0),
            (Unop::Recip, 4.0, 0.25),
            (Unop::RecipSqrt, 4.0, 0.5),
            (Unop::Not, 0.0, 1.0),
            (Unop::Not, -3.0, 0.0),
            (Unop::Trunc, -2.7, -2.0),
            (Unop::Neg, 2.0, -2.0),
        ];
        for (op, x, expected) in cases {
            assert_eq!(op.apply(x), expected, "{op}({x})");
        }
        assert!((Unop::Tanh.apply(0.5) - 0.5f64.tanh()).abs() < 1e-15);
    }

    #[test]
    fn every_meaning_is_one_line() {
        // The tables' first doc line is the meaning: a sentence wrapped onto a second line
        // would leave it cut short.
        let meanings = Unop::ALL.map(Unop::meaning).into_iter();
        for meaning in meanings.chain(Binop::ALL.map(Binop::meaning)) {
            assert!(meaning.ends_with('.'), "{meaning:?}");
            assert!(
                !meaning.starts_with(' ') && !meaning.contains('\n'),
                "{meaning:?}"
            );
        }
        assert_eq!(Unop::Relu.meaning(), "`max(0, x)`.");
        assert_eq!(Binop::Add.meaning(), "`a + b`.");
    }

    #[test]
    fn names_tell_operations_apart() {
        let distinct = |names: Vec<&str>| {
            let set: std::collections::HashSet<_> = names.iter().collect();
            set.len() == names.len()
        };
        assert!(distinct(Unop::ALL.map(Unop::name).to_vec()));
        assert!(distinct(Binop::ALL.map(Binop::name).to_vec()));
        assert!(distinct(Binop::ALL.map(Binop::word).to_vec()));
        assert_eq!((Binop::Pow.name(), Binop::Pow.word()), ("**", "pow"));
    }

    #[test]
    fn integer_meanings_are_exact_and_the_others_truncate() {
        assert!(Unop::Relu.has_integer_meaning() && Unop::Not.has_integer_meaning());
        assert!(!Unop::Exp.has_integer_meaning() && !Unop::Recip.has_integer_meaning());
        assert_eq!(Unop::Neg.apply_int(i64::MIN), i64::MIN);
        assert_eq!(Unop::Sqrt.apply_int(10), 3);
        assert_eq!(Unop::Recip.apply_int(2), 0);
    }

    #[test]
    fn binary_values() {
        assert_eq!(Binop::Mod.apply(-7.0, 3.0), 2.0);
        assert_eq!(Binop::Mod.apply(7.0, -3.0), -2.0);
        assert_eq!(Binop::Mod.apply(6.0, 3.0), 0.0);
        assert_eq!(Binop::ReluGate.apply(0.5, 7.0), 7.0);
        assert_eq!(Binop::ReluGate.apply(0.0, 7.0), 0.0);
        assert_eq!(Binop::Lt.apply(1.0, 2.0), 1.0);
        assert_eq!(Binop::Ne.apply(1.0, 1.0), 0.0);
        assert_eq!(Binop::Pow.apply(2.0, 10.0), 1024.0);
        assert_eq!(Binop::Arg2.apply(1.0, 2.0), 2.0);
        assert_eq!(Ternop::Where.apply(0.0, 1.0, 2.0), 2.0);
        assert_eq!(Ternop::Fma.apply(2.0, 3.0, 4.0), 10.0);
        assert_eq!(Ternop::Mul3.apply(2.0, 3.0, 4.0), 24.0);
        assert_eq!(Binop::Sat01Gate.apply(0.5, 7.0), 7.0);
        assert_eq!(Binop::Sat01Gate.apply(1.0, 7.0), 0.0);
        assert_eq!(Binop::Or.apply(0.0, -2.0), 1.0);
        assert_eq!(Binop::And.apply(0.0, -2.0), 0.0);
    }

    #[test]
    fn f32_computations_use_fmath_and_f64_ones_the_library() {
        let x = 0.7f32;
        for precision in [Precision::F32, Precision::F16, Precision::Bf16] {
            assert_eq!(
                Unop::Tanh.apply_in(precision, f64::from(x)),
                f64::from(fmath::tanh(x))
            );
            assert_eq!(
                Binop::Pow.apply_in(precision, f64::from(x), 1.5),
                f64::from(fmath::pow(x, 1.5))
            );
        }
        assert_eq!(Unop::Tanh.apply_in(Precision::F64, 0.7), 0.7f64.tanh());
        assert_eq!(Unop::Relu.apply_f32(-1.5), 0.0);
        assert_eq!(Binop::Add.apply_f32(1.0, f32::EPSILON / 2.0), 1.0);
        // The square is the product, in both precisions.
        let y = 1.000_000_1f64;
        assert_eq!(Binop::Pow.apply(y, 2.0).to_bits(), (y * y).to_bits());
        assert_eq!(
            Binop::Pow.apply_f32(3.1, 2.0).to_bits(),
            (3.1f32 * 3.1).to_bits()
        );
    }

    #[test]
    fn nan_propagates_through_every_choice() {
        let nan = f64::NAN;
        assert!(Unop::Relu.apply(nan).is_nan());
        assert!(Unop::Sat01.apply(nan).is_nan());
        assert_eq!(Unop::Relu.apply(-0.0).to_bits(), 0.0f64.to_bits());
        for op in [Binop::Max, Binop::Min] {
            assert!(op.apply(nan, 1.0).is_nan(), "{op}(NaN, 1)");
            assert!(op.apply(1.0, nan).is_nan(), "{op}(1, NaN)");
            assert!(op.apply(f64::NEG_INFINITY, nan).is_nan(), "{op}(-inf, NaN)");
        }
        assert_eq!(Binop::Max.apply(1.0, 3.0), 3.0);
        assert_eq!(Binop::Min.apply(1.0, 3.0), 1.0);
        // Ties keep the first operand, as numpy's maximum does.
        assert!(Binop::Max.apply(-0.0, 0.0).is_sign_negative());
        assert!(Binop::Min.apply(0.0, -0.0).is_sign_positive());
        assert!(Binop::ReluGate.apply(nan, 7.0).is_nan());
        assert!(Binop::Sat01Gate.apply(nan, 7.0).is_nan());
        assert_eq!(Binop::ReluGate.apply(-1.0, nan).to_bits(), 0.0f64.to_bits());
        // A maximum over values holding a NaN is NaN, wherever the NaN is.
        for values in [[1.0, nan, 3.0], [nan, 1.0, 3.0], [1.0, 3.0, nan]] {
            let neutral = Binop::Max.neutral().unwrap();
            let max = values
                .iter()
                .fold(neutral, |acc, &v| Binop::Max.apply(acc, v));
            assert!(max.is_nan(), "{values:?}");
        }
    }

    #[test]
    fn neutral_elements_leave_what_they_accumulate() {
        for op in Binop::ALL {
            let Some(neutral) = op.neutral() else {
                continue;
            };
            for x in [-2.5, 0.0, 3.0] {
                let first = op.apply(neutral, x);
                match op {
                    // Sub and Div accumulate the negation and the reciprocal.
                    Binop::Sub => assert_eq!(first, -x),
                    Binop::Div if x != 0.0 => assert_eq!(first, 1.0 / x),
                    Binop::Div => {}
                    // Logical accumulators keep the truth of what they accumulate.
                    Binop::Or | Binop::And => assert_eq!(first, f64::from(u8::from(x != 0.0))),
                    _ => assert_eq!(first, x, "{op}"),
                }
            }
        }
        assert_eq!(Binop::Max.neutral(), Some(f64::NEG_INFINITY));
        assert_eq!(Binop::Min.neutral(), Some(f64::INFINITY));
        assert_eq!(Binop::Lt.neutral(), None);
    }

    #[test]
    fn the_light_variant_mixes_two_rounds() {
        let (key, counter) = ([1, 2, 3, 4], [5, 6, 7, 8]);
        // By hand: inject, two rounds (rotations 10/26 then 11/21), inject with s = 1.
        let ks = [1, 2, 3, 4, 0x1BD1_1BDA ^ 1 ^ 2 ^ 3 ^ 4];
        let mut x = [6u32, 8, 10, 12];
        x[0] = x[0].wrapping_add(x[1]);
        x[1] = x[1].rotate_left(10) ^ x[0];
        x[2] = x[2].wrapping_add(x[3]);
        x[3] = x[3].rotate_left(26) ^ x[2];
        x[0] = x[0].wrapping_add(x[3]);
        x[3] = x[3].rotate_left(11) ^ x[0];
        x[2] = x[2].wrapping_add(x[1]);
        x[1] = x[1].rotate_left(21) ^ x[2];
        for (i, word) in x.iter_mut().enumerate() {
            *word = word.wrapping_add(ks[(1 + i) % 5]);
        }
        x[3] = x[3].wrapping_add(1);
        assert_eq!(threefry4x32_light(key, counter), x);
        assert_ne!(threefry4x32_light(key, counter), threefry4x32(key, counter));
    }

    #[test]
    fn threefry_known_answers() {
        // The known-answer vectors published with the Threefry-4×32-20 reference.
        assert_eq!(
            threefry4x32([0; 4], [0; 4]),
            [0x9c6c_a96a, 0xe17e_ae66, 0xfc10_ecd4, 0x5256_a7d8]
        );
        assert_eq!(
            threefry4x32([u32::MAX; 4], [u32::MAX; 4]),
            [0x2a88_1696, 0x5701_2287, 0xf6c7_446e, 0xa16a_6732]
        );
        assert_eq!(
            threefry4x32(
                [0xa409_3822, 0x299f_31d0, 0x082e_fa98, 0xec4e_6c89],
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            ),
            [0x59cd_1dbb, 0xb887_9579, 0x86b5_d00c, 0xac8b_6d84]
        );
    }
}
