//! numpy's result type (`np.result_type`) of an einsum's operands, among our precisions: the
//! precision [`Tensor::einsum_np`](crate::tensor::Tensor::einsum_np) computes in, where our own
//! promotion (`Precision::promote`, the widest by rank) would differ from numpy's.
//!
//! Floats hold the integers: the widest float present (float16 with bfloat16 makes float32, as
//! neither holds the other), widened to float16 for 8-bit integers and to float64 for wider ones.
//! Integers alone take the widest of their kind; signed and unsigned meet in a signed type wider
//! than the unsigned one: int16 for 8-bit unsigned, which we have not and compute in 32 bits
//! (values differ from numpy's only where its int16 would wrap), int64 for 32-bit unsigned.

use rcannl_ir::Precision;

/// numpy's result type of operands of `precisions`, or the position of an operand numpy has no
/// type for (a 128-bit word).
pub(crate) fn numpy_result_type(precisions: &[Precision]) -> Result<Option<Precision>, usize> {
    if let Some(k) = precisions.iter().position(|&p| p == Precision::Uint4x32) {
        return Err(k);
    }
    let has = |p: Precision| precisions.contains(&p);
    let widest_of = |kinds: &[Precision]| kinds.iter().rev().copied().find(|&p| has(p));
    let float = if has(Precision::F64) {
        Some(Precision::F64)
    } else if has(Precision::F32) || (has(Precision::F16) && has(Precision::Bf16)) {
        Some(Precision::F32)
    } else {
        widest_of(&[Precision::F16, Precision::Bf16])
    };
    let signed = widest_of(&[Precision::I8, Precision::I32, Precision::I64]);
    let unsigned = widest_of(&[Precision::U8, Precision::U32]);
    if let Some(float) = float {
        let wide_integer = [Precision::I32, Precision::I64, Precision::U32]
            .into_iter()
            .any(has);
        return Ok(Some(if wide_integer { Precision::F64 } else { float }));
    }
    Ok(match (signed, unsigned) {
        (Some(s), Some(u)) if s.size_in_bytes() > u.size_in_bytes() => Some(s),
        (Some(_), Some(Precision::U8)) => Some(Precision::I32),
        (Some(_), Some(_)) => Some(Precision::I64),
        (Some(integer), None) | (None, Some(integer)) => Some(integer),
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Precision::*;

    #[test]
    fn numpy_promotes_as_numpy_does() {
        // python3 -c "import numpy as np; print(np.result_type(np.int32, np.float32))" and the
        // like: float64, float16, float32, int16 (computed in i32), int64, int32, float32.
        let of = |ps: &[Precision]| numpy_result_type(ps).unwrap();
        assert_eq!(of(&[I32, F32]), Some(F64));
        assert_eq!(of(&[U8, F16]), Some(F16));
        assert_eq!(of(&[I8, F32]), Some(F32));
        assert_eq!(of(&[I8, U8]), Some(I32));
        assert_eq!(of(&[I32, U32]), Some(I64));
        assert_eq!(of(&[U8, I32]), Some(I32));
        assert_eq!(of(&[F16, Bf16]), Some(F32));
        assert_eq!(of(&[I64, F16]), Some(F64));
        assert_eq!(of(&[F32, F32]), Some(F32));
        assert_eq!(of(&[]), None);
        assert_eq!(numpy_result_type(&[F32, Uint4x32]), Err(1));
    }
}
