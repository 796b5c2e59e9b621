//! Cells held in a wider type on the device than on the host (see [`Class::widens`]): bf16 and
//! fp8 in `f32` cells, u8, i8 and u16 in `i32` cells. The host's buffers keep each precision's
//! own bytes; a copy to the device widens every cell, exactly, and a copy back narrows it. Kernels
//! round or wrap what they store in such a cell to its precision, so narrowing loses nothing.

use half::bf16;
use rcannl_ir::{Precision, fp8_bits, fp8_value};

use crate::kernel::Class;

/// The device's bytes for `host`, cells of `precision` in their host layout (native byte
/// order), widened to the class the device holds them in; `None` where the class is the
/// precision's own.
pub(crate) fn widen(precision: Precision, host: &[u8]) -> Option<Vec<u8>> {
    if !Class::widens(precision) {
        return None;
    }
    let size = precision.size_in_bytes();
    let mut device = Vec::with_capacity(host.len() / size * 4);
    for cell in host.chunks_exact(size) {
        let word = match precision {
            Precision::Bf16 => u32::from(u16::from_ne_bytes([cell[0], cell[1]])) << 16,
            Precision::Fp8 => (fp8_value(cell[0]) as f32).to_bits(),
            Precision::U8 => u32::from(cell[0]),
            Precision::I8 => i32::from(cell[0] as i8) as u32,
            Precision::U16 => u32::from(u16::from_ne_bytes([cell[0], cell[1]])),
            _ => unreachable!("{precision} is held in its own type"),
        };
        device.extend_from_slice(&word.to_ne_bytes());
    }
    Some(device)
}

/// The device's bytes for `host` bytes of cells of `precision`, where it holds them widened;
/// `None` where the class is the precision's own.
pub(crate) fn widened_bytes(precision: Precision, host: usize) -> Option<usize> {
    Class::widens(precision)
        .then(|| host / precision.size_in_bytes() * Class::of(precision).cell_bytes() as usize)
}

/// Narrows `device`, cells of `precision` as the device holds them, into `host`, their host
/// layout.
pub(crate) fn narrow(precision: Precision, device: &[u8], host: &mut [u8]) {
    let size = precision.size_in_bytes();
    for (word, cell) in device.chunks_exact(4).zip(host.chunks_exact_mut(size)) {
        let word = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
        match precision {
            // Exact: a stored cell was rounded to the precision already.
            Precision::Bf16 => {
                cell.copy_from_slice(&bf16::from_f32(f32::from_bits(word)).to_bits().to_ne_bytes())
            }
            Precision::Fp8 => cell[0] = fp8_bits(f64::from(f32::from_bits(word))),
            Precision::U8 | Precision::I8 => cell[0] = word as u8,
            Precision::U16 => cell.copy_from_slice(&(word as u16).to_ne_bytes()),
            _ => unreachable!("{precision} is held in its own type"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of every widened precision comes back as it went.
    #[test]
    fn every_cell_narrows_back_to_its_own_bytes() {
        for precision in [
            Precision::Bf16,
            Precision::Fp8,
            Precision::U8,
            Precision::I8,
            Precision::U16,
        ] {
            let host: Vec<u8> = match precision.size_in_bytes() {
                1 => (0..=u8::MAX).collect(),
                _ => (0..=u16::MAX).flat_map(u16::to_ne_bytes).collect(),
            };
            let device = widen(precision, &host).expect("widened");
            assert_eq!(Some(device.len()), widened_bytes(precision, host.len()));
            let mut back = vec![0; host.len()];
            narrow(precision, &device, &mut back);
            // NaNs narrow to a NaN, not always to the same bits.
            let nan = |bytes: &[u8]| match precision {
                Precision::Bf16 => {
                    bf16::from_bits(u16::from_ne_bytes([bytes[0], bytes[1]])).is_nan()
                }
                Precision::Fp8 => fp8_value(bytes[0]).is_nan(),
                _ => false,
            };
            let size = precision.size_in_bytes();
            for (a, b) in host.chunks_exact(size).zip(back.chunks_exact(size)) {
                assert!(
                    a == b || (nan(a) && nan(b)),
                    "{precision}: {a:?} came back {b:?}"
                );
            }
        }
    }

    #[test]
    fn signed_bytes_widen_to_their_value_and_others_stay_their_own() {
        let device = widen(Precision::I8, &[0xC8]).expect("widened");
        assert_eq!(i32::from_ne_bytes(device.try_into().unwrap()), -56);
        let device = widen(Precision::Fp8, &[0x3D]).expect("widened");
        assert_eq!(f32::from_ne_bytes(device.try_into().unwrap()), 1.25);
        assert_eq!(widen(Precision::F32, &[0; 4]), None);
        assert_eq!(widened_bytes(Precision::F32, 4), None);
        assert_eq!(widen(Precision::F16, &[0; 2]), None);
    }
}
