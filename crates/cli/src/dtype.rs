//! numpy's dtypes as the command reads, computes and writes them: their names, their promotion
//! (numpy's `np.result_type`), and the precision each is computed in.
//!
//! Every dtype is computed in a precision of the IR (`rcannl_ir::Precision`), exactly where one
//! matches it. The others are computed so that an einsum gives numpy's values all the same:
//!
//! - `int16` in 32 bits (i32), wrapped to 16 bits when read back: sums and products wrap alike
//!   in any width of at least 16 bits;
//! - `uint16` and `uint64` have their own precisions (u16, u64); u64 computes in wrapping 64-bit
//!   arithmetic, whose sums and products are exact modulo 2^64 and whose comparisons and maxima
//!   are unsigned;
//! - `float16` in f32, rounded to float16 when read back: a sum of float16 products is then
//!   computed as numpy's einsum computes a sum into one cell and as its matrix products do (in
//!   float32, rounded once), on every backend and at every size; rounding every partial sum to
//!   float16 would stop a sum of 4096 ones at 2048;
//! - `bool` as counts in f64 (a product is 1 where every factor is true, a sum counts the true
//!   terms), read back as true where the count is above 0: numpy's einsum of bools is the `or` of
//!   `and`s, which counting gives without wrapping.

use rcannl_ir::Precision;
use rcannl_tensor::{BinaryOp, UnaryOp};

use crate::op::Op;

/// A dtype of numpy's that the command reads, computes and writes (`--dtype` takes its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Dtype {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Float16,
    Float32,
    Float64,
}

/// What kind of numbers a dtype holds, as numpy's promotion tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Bool,
    Signed,
    Unsigned,
    Float,
}

impl Dtype {
    /// Every dtype, in numpy's order of kinds: bool, signed, unsigned, floats.
    #[cfg(test)]
    pub const ALL: [Dtype; 12] = [
        Dtype::Bool,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Uint8,
        Dtype::Uint16,
        Dtype::Uint32,
        Dtype::Uint64,
        Dtype::Float16,
        Dtype::Float32,
        Dtype::Float64,
    ];

    /// numpy's name: `float32`, `uint8`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "bool",
            Dtype::Int8 => "int8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Uint8 => "uint8",
            Dtype::Uint16 => "uint16",
            Dtype::Uint32 => "uint32",
            Dtype::Uint64 => "uint64",
            Dtype::Float16 => "float16",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
        }
    }

    /// The `.npy` dtype of the same numbers (its type string for little-endian data: `<f4`,
    /// `|u1`, `|b1`).
    pub fn npy(self) -> rcannl_tensor::npy::Dtype {
        use rcannl_tensor::npy::NumberKind;
        let kind = match self.family() {
            Family::Bool => NumberKind::Bool,
            Family::Signed => NumberKind::Int,
            Family::Unsigned => NumberKind::Uint,
            Family::Float => NumberKind::Float,
        };
        rcannl_tensor::npy::Dtype::new(kind, self.size()).expect("every dtype is a .npy dtype")
    }

    /// The dtype of a `.npy` dtype (every one the library reads is one of the command's).
    pub fn from_npy(dtype: rcannl_tensor::npy::Dtype) -> Dtype {
        Dtype::from_kind_and_size(dtype.kind.code(), dtype.size)
            .expect("the .npy reader reads only the dtypes the command has")
    }

    /// The dtype of a `.npy` type string's kind (`f`, `i`, `u`, `b`) and size in bytes.
    fn from_kind_and_size(kind: char, size: usize) -> Option<Dtype> {
        Some(match (kind, size) {
            ('b', 1) => Dtype::Bool,
            ('i', 1) => Dtype::Int8,
            ('i', 2) => Dtype::Int16,
            ('i', 4) => Dtype::Int32,
            ('i', 8) => Dtype::Int64,
            ('u', 1) => Dtype::Uint8,
            ('u', 2) => Dtype::Uint16,
            ('u', 4) => Dtype::Uint32,
            ('u', 8) => Dtype::Uint64,
            ('f', 2) => Dtype::Float16,
            ('f', 4) => Dtype::Float32,
            ('f', 8) => Dtype::Float64,
            _ => return None,
        })
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            Dtype::Bool | Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Int16 | Dtype::Uint16 | Dtype::Float16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float32 => 4,
            Dtype::Int64 | Dtype::Uint64 | Dtype::Float64 => 8,
        }
    }

    fn family(self) -> Family {
        match self {
            Dtype::Bool => Family::Bool,
            Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64 => Family::Signed,
            Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64 => Family::Unsigned,
            Dtype::Float16 | Dtype::Float32 | Dtype::Float64 => Family::Float,
        }
    }

    /// Whether values are floating-point numbers.
    pub fn is_float(self) -> bool {
        self.family() == Family::Float
    }

    /// The dtype values of all of `dtypes` compute in: numpy's `np.result_type(*dtypes)`, which
    /// does not depend on their order (and is not always what promoting them pair by pair
    /// gives: int8, uint8 and float16 make float16). Bools give way to anything. Floats hold
    /// the integers: the widest float present, or wider where an integer needs it (float16 holds
    /// the 8-bit integers, float32 the 16-bit ones, float64 the rest). Integers alone meet in the
    /// widest signed one when it is wider than every unsigned one, else in the narrowest signed
    /// one twice as wide as the widest unsigned one (float64 beyond int64). `None` for no dtypes.
    pub fn result_type(dtypes: impl IntoIterator<Item = Dtype>) -> Option<Dtype> {
        let widest = |family: Family, dtypes: &[Dtype]| {
            dtypes
                .iter()
                .copied()
                .filter(|d| d.family() == family)
                .max_by_key(|d| d.size())
        };
        let dtypes: Vec<Dtype> = dtypes.into_iter().collect();
        let (signed, unsigned) = (
            widest(Family::Signed, &dtypes),
            widest(Family::Unsigned, &dtypes),
        );
        if let Some(float) = widest(Family::Float, &dtypes) {
            let needed = [signed, unsigned]
                .into_iter()
                .flatten()
                .map(|i| i.float_holding());
            return needed.chain([float]).max_by_key(|d| d.size());
        }
        match (signed, unsigned) {
            (Some(signed), Some(unsigned)) if signed.size() > unsigned.size() => Some(signed),
            (Some(_), Some(unsigned)) => Some(match unsigned.size() {
                1 => Dtype::Int16,
                2 => Dtype::Int32,
                4 => Dtype::Int64,
                _ => Dtype::Float64,
            }),
            (Some(integer), None) | (None, Some(integer)) => Some(integer),
            (None, None) => dtypes.first().map(|_| Dtype::Bool),
        }
    }

    /// The narrowest float holding every value of this integer dtype as numpy sees it.
    fn float_holding(self) -> Dtype {
        match self.size() {
            1 => Dtype::Float16,
            2 => Dtype::Float32,
            _ => Dtype::Float64,
        }
    }

    /// The precision the dtype is computed in (see the module doc).
    pub fn precision(self) -> Precision {
        match self {
            Dtype::Int8 => Precision::I8,
            Dtype::Int16 | Dtype::Int32 => Precision::I32,
            Dtype::Int64 => Precision::I64,
            Dtype::Uint64 => Precision::U64,
            Dtype::Uint8 => Precision::U8,
            Dtype::Uint16 => Precision::U16,
            Dtype::Uint32 => Precision::U32,
            Dtype::Float16 | Dtype::Float32 => Precision::F32,
            Dtype::Bool | Dtype::Float64 => Precision::F64,
        }
    }

    /// Why `op` cannot compute in this dtype, if it cannot. Bools are counts (see the module
    /// doc), which only sums, products, maxima and selections keep meaning as logic; integers
    /// have no exponentials, logarithms, roots, true division or fractional powers (numpy
    /// computes those in floats).
    pub fn refused_by(self, op: Op) -> Option<String> {
        let logical = matches!(
            op,
            Op::Special(_)
                | Op::Unary(UnaryOp::StopGradient)
                | Op::Binary(BinaryOp::Mul | BinaryOp::Add | BinaryOp::Max | BinaryOp::Min)
        );
        let float_only = match op {
            Op::Special(_) => false,
            Op::Unary(op) => !op.unop().has_integer_meaning(),
            // numpy's true division, and powers that may be fractional.
            Op::Binary(op) => matches!(op, BinaryOp::Div | BinaryOp::Pow),
        };
        let why = if self == Dtype::Bool && !logical {
            "bools are computed as counts, which it would not keep true or false"
        } else if !self.is_float() && float_only {
            "it computes in floats"
        } else {
            return None;
        };
        Some(format!(
            "--op {} cannot compute in {}: {why} (pass --dtype float64)",
            op.name(),
            self.name(),
        ))
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Dtype {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn names_descrs_and_flag_values_agree() {
        for dtype in Dtype::ALL {
            let flag = dtype
                .to_possible_value()
                .expect("every dtype is a --dtype value");
            assert_eq!(flag.get_name(), dtype.name());
            assert_eq!(Dtype::from_npy(dtype.npy()), dtype);
        }
        assert_eq!(Dtype::Float32.npy().descr(), "<f4");
        assert_eq!(Dtype::Bool.npy().descr(), "|b1");
        assert_eq!(Dtype::from_kind_and_size('f', 1), None);
    }

    #[test]
    fn result_types_ignore_order_and_bools() {
        let of = |dtypes: &[Dtype]| Dtype::result_type(dtypes.iter().copied());
        assert_eq!(of(&[]), None);
        for a in Dtype::ALL {
            assert_eq!(of(&[a]), Some(a));
            assert_eq!(of(&[a, Dtype::Bool]), Some(a));
            for b in Dtype::ALL {
                assert_eq!(of(&[a, b]), of(&[b, a]), "{a} {b}");
            }
        }
        // numpy: np.result_type(np.int8, np.uint8, np.float16) is float16, although int8 and
        // uint8 alone make int16, which with float16 makes float32.
        let (int8, uint8, float16) = (Dtype::Int8, Dtype::Uint8, Dtype::Float16);
        assert_eq!(of(&[int8, uint8, float16]), Some(float16));
        assert_eq!(
            of(&[of(&[int8, uint8]).unwrap(), float16]),
            Some(Dtype::Float32)
        );
    }
}
