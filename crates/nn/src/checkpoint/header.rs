//! The checkpoint's bytes: the safetensors header written in a fixed order with its own checksum
//! first, the tensors' bytes after it, and the checksums (FNV-1a, 64 bits) that a load checks.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Range;

use safetensors::Dtype;
use safetensors::tensor::TensorInfo;

/// How every header starts: the header checksum is the first metadata entry, so that its digits
/// lie at a fixed place, which its own input leaves out.
const START: &str = r#"{"__metadata__":{"header checksum":"fnv1a64:"#;

/// The hex digits of a checksum.
const DIGITS: usize = 16;

/// The longest header safetensors reads.
const MAX_HEADER: usize = 100_000_000;

/// The bytes of the file holding the header checksum's digits.
const HEADER_DIGITS: Range<usize> = 8 + START.len()..8 + START.len() + DIGITS;

/// The metadata key of a tensor's rows.
pub(super) fn rows_key(label: &str) -> String {
    format!("rows:{label}")
}

/// The metadata key of a tensor's id in the graph it was saved from.
pub(super) fn id_key(label: &str) -> String {
    format!("id:{label}")
}

/// The metadata key of a tensor's checksum.
pub(super) fn checksum_key(label: &str) -> String {
    format!("checksum:{label}")
}

/// The FNV-1a hash (64 bits) of `bytes`.
fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A tensor's checksum: `fnv1a64:` and, in 16 hex digits, the FNV-1a hash of its bytes followed
/// by its id as recorded (the decimal text of `id:<label>`; nothing for a tensor saved before
/// ids were recorded).
pub(super) fn checksum(bytes: &[u8], id: Option<&str>) -> String {
    let recorded = id.unwrap_or_default().bytes();
    format!(
        "fnv1a64:{:016x}",
        fnv1a64(bytes.iter().copied().chain(recorded))
    )
}

/// The header checksum's hash: of the header's length and the header (the file's first `8 + n`
/// bytes), without the digits that record it.
fn header_hash(file: &[u8], n: usize) -> u64 {
    let covered = &file[..8 + n];
    fnv1a64(
        covered[..HEADER_DIGITS.start]
            .iter()
            .chain(&covered[HEADER_DIGITS.end..])
            .copied(),
    )
}

/// One tensor to write: its label, dtype, dims and bytes.
pub(super) struct Entry<'a> {
    pub(super) label: &'a str,
    pub(super) dtype: Dtype,
    pub(super) dims: Vec<usize>,
    pub(super) bytes: Vec<u8>,
}

/// `text` as a JSON string.
fn json_string(text: &str) -> Result<String, String> {
    serde_json::to_string(text).map_err(|e| e.to_string())
}

/// The whole file of `entries` with `metadata` (see the module doc): the header's length, the
/// header with the header checksum first and the other entries sorted, padded with spaces to a
/// multiple of 8; then the tensors' bytes, the widest elements first (so that each tensor is
/// aligned), by label among equals.
pub(super) fn file(
    metadata: &BTreeMap<String, String>,
    mut entries: Vec<Entry>,
) -> Result<Vec<u8>, String> {
    entries.sort_by_key(|e| (Reverse(e.dtype.bitsize()), e.label));
    let mut header = format!("{START}{}\"", "0".repeat(DIGITS));
    for (key, value) in metadata {
        header += &format!(",{}:{}", json_string(key)?, json_string(value)?);
    }
    header.push('}');
    let mut offset = 0;
    for entry in &entries {
        let info = TensorInfo {
            dtype: entry.dtype,
            shape: entry.dims.clone(),
            data_offsets: (offset, offset + entry.bytes.len()),
        };
        offset += entry.bytes.len();
        let info = serde_json::to_string(&info).map_err(|e| e.to_string())?;
        header += &format!(",{}:{info}", json_string(entry.label)?);
    }
    header.push('}');
    let n = header.len().next_multiple_of(8);
    if n > MAX_HEADER {
        return Err(format!(
            "the header would take {n} bytes, more than the {MAX_HEADER} safetensors reads"
        ));
    }
    let mut file = Vec::with_capacity(8 + n + offset);
    file.extend((n as u64).to_le_bytes());
    file.extend(header.bytes());
    file.resize(8 + n, b' ');
    for entry in &entries {
        file.extend(&entry.bytes);
    }
    let digits = format!("{:016x}", header_hash(&file, n));
    file[HEADER_DIGITS].copy_from_slice(digits.as_bytes());
    Ok(file)
}

/// Checks that the header's length, when `file` has one, leaves the header inside the file
/// (before anything is read by it).
pub(super) fn check_length(file: &[u8]) -> Result<(), String> {
    let Some(length) = file.get(..8) else {
        return Ok(());
    };
    let n = u64::from_le_bytes(length.try_into().unwrap_or_default());
    let size = file.len();
    if n > (size - 8) as u64 {
        return Err(format!(
            "not a readable safetensors file: the header's length ({n} bytes) runs past the \
             end of the file ({size} bytes): truncated or corrupted?"
        ));
    }
    Ok(())
}

/// Checks the header checksum of `file`, whose header (of `n` bytes) safetensors has read.
pub(super) fn check_header(file: &[u8], n: usize) -> Result<(), String> {
    let header = &file[8..8 + n];
    if !header.starts_with(START.as_bytes()) || header.len() <= START.len() + DIGITS {
        return Err(
            "no header checksum (its header does not start with one): the file is corrupted, \
             or it was not written by this version of rcannl (safetensors files of other \
             programs and checkpoints of versions before the header checksum lack it)"
                .into(),
        );
    }
    let recorded = &file[HEADER_DIGITS];
    let well_formed = recorded
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        && file[HEADER_DIGITS.end] == b'"';
    let recorded = String::from_utf8_lossy(recorded);
    if !well_formed {
        return Err(format!(
            "the header checksum 'fnv1a64:{recorded}' is not 16 hex digits: the file is \
             corrupted"
        ));
    }
    let computed = format!("{:016x}", header_hash(file, n));
    if computed != recorded {
        return Err(format!(
            "the header's checksum fnv1a64:{computed} does not match the recorded \
             fnv1a64:{recorded}: the file is corrupted"
        ));
    }
    Ok(())
}
