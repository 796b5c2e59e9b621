//! The operations of the loop IR, each written once in terms of a few forms every dialect spells
//! its own way: infix arithmetic, the prelude's helpers (`rc_max`, `rc_imod`, …), the language's
//! own functions (`sqrt`, `trunc`, `fma`), transcendental functions, truth values, and integer
//! arithmetic that wraps.

use rcannl_ir::{Binop, Kind, Precision, Ternop, Unop};

use super::Dialect;

/// The infix symbol of a float arithmetic operation or comparison.
fn symbol(op: Binop) -> &'static str {
    match op {
        Binop::Add => "+",
        Binop::Sub => "-",
        Binop::Mul => "*",
        Binop::Div => "/",
        Binop::Lt => "<",
        Binop::Eq => "==",
        Binop::Ne => "!=",
        _ => unreachable!("{op} is not written infix"),
    }
}

/// The name of the prelude's helper computing `op` (prefixed and suffixed per kind and
/// precision by the dialect).
fn helper_name(op: Binop, kind: Kind) -> &'static str {
    match (op, kind) {
        (Binop::Add, _) => "add",
        (Binop::Sub, _) => "sub",
        (Binop::Mul, _) => "mul",
        (Binop::Div, _) => "div",
        (Binop::Pow, _) => "pow",
        (Binop::Max, _) => "max",
        (Binop::Min, _) => "min",
        (Binop::ReluGate, _) => "relu_gate",
        (Binop::Sat01Gate, _) => "sat01_gate",
        (Binop::Mod, Kind::Float) => "fmod",
        (Binop::Mod, _) => "mod",
        _ => unreachable!("{op} has no helper"),
    }
}

/// The name of the prelude's helper computing `op` on u64 bits read as unsigned, for the
/// operations that read a sign.
fn unsigned_helper_name(op: Binop) -> Option<&'static str> {
    Some(match op {
        Binop::Div => "udiv",
        Binop::Mod => "umod",
        Binop::Pow => "upow",
        Binop::Max => "umax",
        Binop::Min => "umin",
        Binop::Lt => "ult",
        Binop::ReluGate => "urelu_gate",
        _ => return None,
    })
}

/// `op` of `a` and `b`, values of the float `precision`.
pub(super) fn float_binop(d: &impl Dialect, op: Binop, a: &str, b: &str, p: Precision) -> String {
    match op {
        Binop::Add | Binop::Sub | Binop::Mul | Binop::Div => {
            format!("({a} {} {b})", symbol(op))
        }
        Binop::Lt | Binop::Eq | Binop::Ne => d.truth_value(p, &format!("{a} {} {b}", symbol(op))),
        Binop::Or | Binop::And => logical(d, op, a, b, p),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
        _ => d.helper(Kind::Float, helper_name(op, Kind::Float), p, &[a, b]),
    }
}

/// `op` of `a` and `b`, integers of a computation of `precision` (wrapping, as the
/// interpreter's `i64` arithmetic). A u64's bits, held in the compute type, are read as unsigned
/// where a sign matters (`Binop::apply_int_in`).
pub(super) fn int_binop(
    d: &impl Dialect,
    op: Binop,
    a: &str,
    b: &str,
    precision: Precision,
) -> String {
    let p = Precision::I64;
    if let (Precision::U64, Some(name)) = (precision, unsigned_helper_name(op)) {
        return d.helper(Kind::Int, name, p, &[a, b]);
    }
    match op {
        Binop::Add | Binop::Sub | Binop::Mul => {
            d.wrapping(helper_name(op, Kind::Int), symbol(op), a, b)
        }
        // No integer lies strictly between 0 and 1.
        Binop::Sat01Gate => d.int_zero().to_owned(),
        Binop::Lt | Binop::Eq | Binop::Ne => d.truth_value(p, &format!("{a} {} {b}", symbol(op))),
        Binop::Or | Binop::And => logical(d, op, a, b, p),
        Binop::Arg1 | Binop::Arg2 | Binop::Threefry4x32 | Binop::Threefry4x32Light => {
            unreachable!("handled before the kind's operations")
        }
        _ => d.helper(Kind::Int, helper_name(op, Kind::Int), p, &[a, b]),
    }
}

/// 1 where `a` or (`And`) and `b` are not zero, else 0.
fn logical(d: &impl Dialect, op: Binop, a: &str, b: &str, p: Precision) -> String {
    let zero = d.zero(p.kind());
    let join = d.logical(op == Binop::And);
    d.truth_value(p, &format!("({a} != {zero}) {join} ({b} != {zero})"))
}

/// `op` of `x`, a value of the float `precision`.
pub(super) fn float_unop(d: &impl Dialect, op: Unop, x: &str, p: Precision) -> String {
    let math = |name: &str| {
        if d.prelude_math(name, p) {
            d.helper(Kind::Float, name, p, &[x])
        } else {
            d.library(name, p, &[x])
        }
    };
    match op {
        Unop::Identity => x.to_owned(),
        Unop::Neg => format!("(-{x})"),
        Unop::Relu => d.helper(Kind::Float, "relu", p, &[x]),
        Unop::Sat01 => d.helper(Kind::Float, "sat01", p, &[x]),
        Unop::Exp => math("exp"),
        Unop::Log => math("log"),
        Unop::Exp2 => math("exp2"),
        Unop::Log2 => math("log2"),
        Unop::Sin => math("sin"),
        Unop::Cos => math("cos"),
        Unop::Tanh => math("tanh"),
        Unop::Sqrt => d.library("sqrt", p, &[x]),
        Unop::Trunc => d.library("trunc", p, &[x]),
        Unop::Recip => format!("({} / {x})", d.one(p)),
        Unop::RecipSqrt => d.recip_sqrt(x, p),
        Unop::Not => d.truth_value(p, &format!("{x} == {}", d.zero(Kind::Float))),
        Unop::Uint4x32ToPrecUniform1 => unreachable!("handled with its word argument"),
    }
}

/// `op` of `x`, an integer of `precision` (a u64's bits read as unsigned:
/// `Unop::apply_int_in`).
pub(super) fn int_unop(d: &impl Dialect, op: Unop, x: &str, p: Precision) -> String {
    let unsigned = p == Precision::U64;
    match op {
        Unop::Identity | Unop::Trunc => x.to_owned(),
        Unop::Neg => d.wrapping("sub", "-", d.zero(Kind::Int), x),
        Unop::Relu if unsigned => x.to_owned(),
        Unop::Relu => d.helper(Kind::Int, "relu", p, &[x]),
        Unop::Sat01 if unsigned => d.truth_value(p, &format!("{x} != {}", d.zero(Kind::Int))),
        Unop::Sat01 => d.helper(Kind::Int, "sat01", p, &[x]),
        Unop::Not => d.truth_value(p, &format!("{x} == {}", d.zero(Kind::Int))),
        // No integer meaning: computed in the dialect's widest float and truncated, saturating.
        other => {
            let float = d.condition_precision();
            let value = float_unop(d, other, &d.convert(x, p, float), float);
            d.convert(&value, float, p)
        }
    }
}

/// `Fma` or `Mul3` of three values of `precision`.
pub(super) fn ternop(
    d: &impl Dialect,
    op: Ternop,
    a: &str,
    b: &str,
    c: &str,
    p: Precision,
) -> String {
    match (p.kind(), op) {
        (Kind::Float, Ternop::Fma) => d.library("fma", p, &[a, b, c]),
        (Kind::Float, _) => format!("({a} * {b} * {c})"),
        _ => d.int_ternop(op, a, b, c),
    }
}
