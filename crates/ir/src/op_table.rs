//! The primitive operations of one and two arguments, each listed once: its variant, its names
//! and its meaning in a line. [`Unop`](crate::Unop) and [`Binop`](crate::Binop) are declared
//! from these tables, and so are the tensor library's pointwise operations (`UnaryOp`,
//! `BinaryOp`) and, through those, the command line's `--op` values and their help.
//!
//! Each table is a macro that hands its entries to a macro of the caller's, `$callback!`, in two
//! groups: `offered`, the operations users compute with (the tensor library offers each, in this
//! order), and `internal`, those only gradients, assignments and random numbers use. An entry is
//! its doc comment, then its variant and its names. The doc comment's first line is the meaning
//! in one line, in Markdown, naming the argument `x` (or the arguments `a` and `b`): it is what
//! [`Unop::meaning`](crate::Unop::meaning) returns and what the command line's help shows; the
//! lines after it say more. Declaration order is the tables' order, `offered` first.
//!
//! Adding a primitive takes an entry here, its value in [`crate::ops`] (and in [`crate::fmath`]
//! for a transcendental function of f32), its spelling in each code generator and, for an offered
//! one, its gradient in the tensor library.

/// Calls `$callback!` with the one-argument primitives, grouped as the module says
/// (`offered: { … } internal: { … }`), each entry `#[doc = $meaning] $(#[doc = $more])* $variant
/// $name,`, where `$name` is the name printed IR, error messages and the tensor library use (`relu`,
/// `recip_sqrt`).
#[macro_export]
macro_rules! unop_table {
    ($callback:ident) => {
        $callback! {
        offered: {
            /// `-x`.
            Neg "neg",
            /// `max(0, x)`.
            Relu "relu",
            /// `x` clamped to `[0, 1]`.
            Sat01 "sat01",
            /// `e^x`.
            Exp "exp",
            /// The natural logarithm, `ln x`.
            Log "log",
            /// `2^x`.
            Exp2 "exp2",
            /// `log₂ x`.
            Log2 "log2",
            /// `sin x`, `x` in radians.
            Sin "sin",
            /// `cos x`, `x` in radians.
            Cos "cos",
            /// `√x`.
            Sqrt "sqrt",
            /// `1/x`.
            Recip "recip",
            /// `1/√x`.
            RecipSqrt "recip_sqrt",
            /// `tanh x`.
            Tanh "tanh",
            /// 1 where `x` is 0, else 0.
            Not "not",
            /// `x` rounded toward zero.
            Trunc "trunc",
        }
        internal: {
            /// `x`.
            Identity "id",
            /// One value of the computed precision from random bits.
            /// It comes from the first word(s) of a 128-bit word of random bits (see
            /// [`crate::value`]).
            Uint4x32ToPrecUniform1 "uint4x32_to_prec_uniform1",
        }
        }
    };
}

/// Calls `$callback!` with the two-argument primitives, grouped as the module says, each entry
/// `#[doc = $meaning] $(#[doc = $more])* $variant $symbol $word,`, where `$symbol` is the operator's symbol in printed IR (`+`, `**`, `max`; an accumulator
/// prints as `=` followed by it) and `$word` its name as a word (`add`, `pow`, `max`).
#[macro_export]
macro_rules! binop_table {
    ($callback:ident) => {
        $callback! {
        offered: {
            /// `a + b`.
            /// As an accumulator, a sum.
            Add "+" "add",
            /// `a - b`.
            /// As an accumulator, each value is subtracted from the cell.
            Sub "-" "sub",
            /// `a · b`.
            /// As an accumulator, a product.
            Mul "*" "mul",
            /// `a / b`.
            /// As an accumulator, the cell is divided by each value.
            Div "/" "div",
            /// `a` to the power `b`.
            Pow "**" "pow",
            /// The larger of `a` and `b`, NaN winning.
            /// A NaN on either side is the result and a tie keeps `a`, as in numpy's `maximum`;
            /// as an accumulator, a maximum.
            Max "max" "max",
            /// The smaller of `a` and `b`, NaN winning.
            /// A NaN on either side is the result and a tie keeps `a`, as in numpy's `minimum`;
            /// as an accumulator, a minimum.
            Min "min" "min",
            /// 1 where `a < b`, else 0.
            Lt "<" "lt",
            /// 1 where `a == b`, else 0.
            Eq "==" "eq",
            /// 1 where `a != b`, else 0.
            Ne "!=" "ne",
        }
        internal: {
            /// The first argument, `a`: an assignment that ignores what was there.
            Arg1 "arg1" "arg1",
            /// The second argument, `b`: plain `=:` assignment is accumulation with `Arg2`.
            Arg2 "arg2" "arg2",
            /// `b` where `a > 0`, else 0: relu's gradient gate.
            ReluGate "relu_gate" "relu_gate",
            /// `b` where `0 < a < 1`, else 0: sat01's gradient gate.
            Sat01Gate "sat01_gate" "sat01_gate",
            /// 1 where `a` or `b` is nonzero, else 0.
            Or "||" "or",
            /// 1 where both `a` and `b` are nonzero, else 0.
            And "&&" "and",
            /// The remainder of `a / b` with the sign of the divisor.
            /// So `x mod n` lies in `[0, n)` for n > 0.
            Mod "%" "mod",
            /// 128 random bits from a key (`a`) and a counter (`b`), both 128-bit words.
            /// See [`threefry4x32`](crate::threefry4x32). Defined on words only.
            Threefry4x32 "^^^^" "threefry4x32",
            /// The same with 2 rounds instead of 20: cheaper, weaker bits.
            /// See [`threefry4x32_light`](crate::threefry4x32_light).
            Threefry4x32Light "^^" "threefry4x32_light",
        }
        }
    };
}
