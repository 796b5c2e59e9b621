//! Values of one dtype, held exactly: how inputs are cast to the dtype an operation computes in
//! (numpy's `astype`), loaded into buffers of its precision and read back, and how they print
//! (JSON, text).

use half::f16;
use rcannl_ir::Value;
use serde::{Serialize, Serializer};

use crate::dtype::Dtype;

/// Cells of one dtype. Floats are held as `f64` (every float16 and float32 value is one);
/// integers and bools as `i64`: a bool as 0 or 1, a uint64 as its 64 bits.
#[derive(Debug, Clone, PartialEq)]
pub struct Cells {
    dtype: Dtype,
    data: Data,
}

/// The values: floats for a float dtype, integers otherwise.
#[derive(Debug, Clone, PartialEq)]
enum Data {
    Floats(Vec<f64>),
    Ints(Vec<i64>),
}

/// One cell, as [`Cells`] holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    Float(f64),
    Int(i64),
}

impl Cells {
    /// Cells of `dtype` from values as [`Cells`] holds them (floats for a float dtype, integers
    /// otherwise); a value that is not one of the dtype's is cast to it.
    pub fn new(dtype: Dtype, cells: impl IntoIterator<Item = Cell>) -> Cells {
        let data = if dtype.is_float() {
            Data::Floats(
                cells
                    .into_iter()
                    .map(|cell| match cast(cell, dtype, dtype) {
                        Cell::Float(x) => x,
                        Cell::Int(_) => unreachable!("a float dtype casts to floats"),
                    })
                    .collect(),
            )
        } else {
            Data::Ints(
                cells
                    .into_iter()
                    .map(|cell| match cast(cell, dtype, dtype) {
                        Cell::Int(i) => i,
                        Cell::Float(_) => unreachable!("an integer dtype casts to integers"),
                    })
                    .collect(),
            )
        };
        Cells { dtype, data }
    }

    /// float64 cells holding `values`.
    pub fn float64(values: Vec<f64>) -> Cells {
        Cells {
            dtype: Dtype::Float64,
            data: Data::Floats(values),
        }
    }

    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    pub fn len(&self) -> usize {
        match &self.data {
            Data::Floats(values) => values.len(),
            Data::Ints(values) => values.len(),
        }
    }

    /// The cells in order.
    pub fn iter(&self) -> impl Iterator<Item = Cell> + '_ {
        let (floats, ints) = match &self.data {
            Data::Floats(values) => (&values[..], &[][..]),
            Data::Ints(values) => (&[][..], &values[..]),
        };
        (floats.iter().map(|&x| Cell::Float(x))).chain(ints.iter().map(|&i| Cell::Int(i)))
    }

    /// The cells as numpy's `astype(to)` gives them (see [`cast`]).
    pub fn cast(self, to: Dtype) -> Cells {
        if to == self.dtype {
            return self;
        }
        let from = self.dtype;
        Cells::new(to, self.iter().map(|cell| cast(cell, from, to)))
    }

    /// The cells as a buffer of the dtype's precision ([`Dtype::precision`]) holds them.
    pub fn to_values(&self) -> Vec<Value> {
        let bools = self.dtype == Dtype::Bool;
        self.iter()
            .map(|cell| match cell {
                Cell::Float(x) => Value::Float(x),
                // Bools are counted in f64.
                Cell::Int(i) if bools => Value::Float(i as f64),
                Cell::Int(i) => Value::Int(i),
            })
            .collect()
    }

    /// Cells of `dtype` read back from a buffer of its precision: floats computed wider are
    /// rounded to the dtype, integers computed wider are wrapped to the dtype (a uint64 takes the bits of its i64), a bool is true where the count
    /// is above 0.
    pub fn from_values(dtype: Dtype, values: &[Value]) -> Cells {
        let data = match dtype {
            _ if dtype.is_float() => Data::Floats(
                values
                    .iter()
                    .map(|v| round_float(v.as_f64(), dtype))
                    .collect(),
            ),
            Dtype::Bool => Data::Ints(values.iter().map(|v| i64::from(v.as_f64() > 0.0)).collect()),
            _ => Data::Ints(values.iter().map(|v| wrap(v.as_i64(), dtype)).collect()),
        };
        Cells { dtype, data }
    }

    /// The cells as text: `[1.5, -2, …]`, integers without a fraction, bools `true`/`false`.
    pub fn text(&self) -> String {
        let shown: Vec<String> = match &self.data {
            Data::Floats(values) => values.iter().map(f64::to_string).collect(),
            Data::Ints(values) => values.iter().map(|&i| self.int_text(i)).collect(),
        };
        format!("[{}]", shown.join(", "))
    }

    fn int_text(&self, i: i64) -> String {
        match self.dtype {
            Dtype::Bool => (i != 0).to_string(),
            Dtype::Uint64 => (i as u64).to_string(),
            _ => i.to_string(),
        }
    }
}

/// A JSON array: floats as numbers (`3.0`; NaN and infinities, which JSON lacks, as `null`),
/// integers as integers (a uint64 unsigned), bools as `true`/`false`.
impl Serialize for Cells {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (&self.data, self.dtype) {
            (Data::Floats(values), _) => serializer.collect_seq(values),
            (Data::Ints(values), Dtype::Bool) => {
                serializer.collect_seq(values.iter().map(|&i| i != 0))
            }
            (Data::Ints(values), Dtype::Uint64) => {
                serializer.collect_seq(values.iter().map(|&i| i as u64))
            }
            (Data::Ints(values), _) => serializer.collect_seq(values),
        }
    }
}

/// A cell of `from` as numpy's `astype(to)` gives it: to bool, true where not 0 (NaN is true);
/// from bool, 0 or 1; between integers, wrapped to the target's width; integers to floats and
/// floats to narrower floats, rounded to nearest even; floats to integers, truncated toward 0 —
/// and, where numpy leaves the result undefined, saturated at the target's bounds, NaN 0.
pub fn cast(cell: Cell, from: Dtype, to: Dtype) -> Cell {
    match (cell, to) {
        (Cell::Float(x), Dtype::Bool) => Cell::Int(i64::from(x != 0.0)),
        (Cell::Int(i), Dtype::Bool) => Cell::Int(i64::from(i != 0)),
        (Cell::Float(x), _) if to.is_float() => Cell::Float(round_float(x, to)),
        (Cell::Int(i), _) if to.is_float() => Cell::Float(int_to_float(i, from, to)),
        (Cell::Float(x), _) => Cell::Int(float_to_int(x, to)),
        (Cell::Int(i), _) => Cell::Int(wrap(i, to)),
    }
}

/// `x` rounded to the float dtype `to`.
fn round_float(x: f64, to: Dtype) -> f64 {
    match to {
        Dtype::Float16 => f16::from_f64(x).to_f64(),
        Dtype::Float32 => f64::from(x as f32),
        _ => x,
    }
}

/// The integer `i` of dtype `from` (a uint64's bits) rounded once to the float dtype `to`: an
/// int64 rounded to f64 and then to f32 could round twice, the second time from a tie.
fn int_to_float(i: i64, from: Dtype, to: Dtype) -> f64 {
    let unsigned = from == Dtype::Uint64;
    match to {
        Dtype::Float32 if unsigned => f64::from((i as u64) as f32),
        Dtype::Float32 => f64::from(i as f32),
        // Integers beyond 2^53, where f64 rounds, are beyond float16's range either way.
        Dtype::Float16 if unsigned => f16::from_f64((i as u64) as f64).to_f64(),
        Dtype::Float16 => f16::from_f64(i as f64).to_f64(),
        _ if unsigned => (i as u64) as f64,
        _ => i as f64,
    }
}

/// `x` truncated toward 0 into the integer dtype `to`, saturated, NaN 0 (Rust's `as`).
fn float_to_int(x: f64, to: Dtype) -> i64 {
    match to {
        Dtype::Int8 => i64::from(x as i8),
        Dtype::Int16 => i64::from(x as i16),
        Dtype::Int32 => i64::from(x as i32),
        Dtype::Uint8 => i64::from(x as u8),
        Dtype::Uint16 => i64::from(x as u16),
        Dtype::Uint32 => i64::from(x as u32),
        Dtype::Uint64 => (x as u64) as i64,
        _ => x as i64,
    }
}

/// The integer `i` wrapped to the integer dtype `to`'s width (a uint64 keeps all 64 bits).
fn wrap(i: i64, to: Dtype) -> i64 {
    match to {
        Dtype::Int8 => i64::from(i as i8),
        Dtype::Int16 => i64::from(i as i16),
        Dtype::Int32 => i64::from(i as i32),
        Dtype::Uint8 => i64::from(i as u8),
        Dtype::Uint16 => i64::from(i as u16),
        Dtype::Uint32 => i64::from(i as u32),
        Dtype::Bool => i64::from(i != 0),
        _ => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(dtype: Dtype, values: &[i64]) -> Cells {
        Cells::new(dtype, values.iter().map(|&i| Cell::Int(i)))
    }

    #[test]
    fn casts_follow_astype() {
        let floats = Cells::float64(vec![1.7, -1.7, 300.0, f64::NAN, 0.1]);
        assert_eq!(
            floats.clone().cast(Dtype::Int32),
            ints(Dtype::Int32, &[1, -1, 300, 0, 0])
        );
        assert_eq!(
            floats.clone().cast(Dtype::Uint8),
            ints(Dtype::Uint8, &[1, 0, 255, 0, 0])
        );
        assert_eq!(
            floats.clone().cast(Dtype::Bool),
            ints(Dtype::Bool, &[1, 1, 1, 1, 1])
        );
        let rounded: Vec<Cell> = floats.clone().cast(Dtype::Float32).iter().collect();
        assert_eq!(rounded[4], Cell::Float(f64::from(0.1f32)));
        assert_eq!(
            ints(Dtype::Int32, &[300, -1]).cast(Dtype::Uint8),
            ints(Dtype::Uint8, &[44, 255])
        );
        assert_eq!(
            ints(Dtype::Int8, &[-1]).cast(Dtype::Uint64).text(),
            "[18446744073709551615]"
        );
        // 2^60 + 2^36 + 1 is nearer 2^60 + 2^37 than 2^60 in f32; through f64 it would tie.
        let big = (1i64 << 60) + (1 << 36) + 1;
        assert_eq!(
            ints(Dtype::Int64, &[big])
                .cast(Dtype::Float32)
                .iter()
                .next(),
            Some(Cell::Float(((1u64 << 60) + (1 << 37)) as f64))
        );
        assert_eq!(
            ints(Dtype::Bool, &[1, 0]).cast(Dtype::Float16).text(),
            "[1, 0]"
        );
    }

    #[test]
    fn buffers_read_back_as_the_dtype() {
        let read = |dtype, values: &[Value]| Cells::from_values(dtype, values).text();
        assert_eq!(read(Dtype::Int16, &[Value::Int(70_000)]), "[4464]");
        assert_eq!(read(Dtype::Uint16, &[Value::Int(65_537)]), "[1]");
        assert_eq!(
            read(Dtype::Uint64, &[Value::Int(-1)]),
            "[18446744073709551615]"
        );
        let counts = [
            Value::Float(3.0),
            Value::Float(0.0),
            Value::Float(f64::NEG_INFINITY),
        ];
        assert_eq!(read(Dtype::Bool, &counts), "[true, false, false]");
        assert_eq!(
            ints(Dtype::Bool, &[1, 0]).to_values(),
            [Value::Float(1.0), Value::Float(0.0)]
        );
    }

    #[test]
    fn json_per_dtype() {
        let json = |cells: &Cells| serde_json::to_string(cells).unwrap();
        assert_eq!(json(&ints(Dtype::Bool, &[1, 0])), "[true,false]");
        assert_eq!(json(&ints(Dtype::Uint64, &[-1])), "[18446744073709551615]");
        assert_eq!(json(&ints(Dtype::Int8, &[-3])), "[-3]");
        assert_eq!(json(&Cells::float64(vec![3.0, f64::NAN])), "[3.0,null]");
    }
}
