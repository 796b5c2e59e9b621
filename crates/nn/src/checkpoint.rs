//! Checkpoints: tensors' values saved to and loaded from a safetensors file by label. This module
//! owns the file format, the checks a load makes before it changes anything, and the atomic
//! write.
//!
//! Each tensor is stored under its label, in its precision's dtype (`u8`, `i8`, `i32`, `u32`,
//! `i64`, `f16`, `bf16`, `f32`, `f64` as `U8`, `I8`, `I32`, `U32`, `I64`, `F16`, `BF16`, `F32`,
//! `F64`; a 128-bit word as four `U32`, along one more axis of 4), with its dims in memory order
//! (batch, output, input). The file's metadata holds, for each tensor, `rows:<label>`: its
//! `batch|input->output` sizes (`2,3|4->5`), and `checksum:<label>`: `fnv1a64:` and the FNV-1a
//! hash of its bytes in hex.
//!
//! A load checks every tensor it is given (present, same dtype, same dims, same rows, bytes
//! matching their checksum) before it sets any value, so a failed load leaves the context as it
//! was. A safetensors file written elsewhere, without these metadata entries, is checked on dtype
//! and dims alone.
//!
//! Cells pass through the context exactly as stored ([`Context::cells`]), so every precision
//! round-trips bit for bit.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use half::{bf16, f16};
use rcannl_ir::{Precision, Value};
use rcannl_tensor::{Context, Graph, Tensor, TensorError};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

/// Appends a cell's little-endian bytes.
type Encode = fn(Value, &mut Vec<u8>);

/// A cell from its little-endian bytes.
type Decode = fn(&[u8]) -> Value;

/// How one precision's cells are stored.
struct Format {
    dtype: Dtype,
    /// The axes each cell takes in the file after the tensor's own: none, or 4 for a word.
    cell_axes: &'static [usize],
    encode: Encode,
    decode: Decode,
}

/// The first `N` bytes of a cell (its length is the precision's size, by construction).
fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut array = [0; N];
    array.copy_from_slice(&bytes[..N]);
    array
}

/// The storage of `precision`.
fn format(precision: Precision) -> Format {
    let (dtype, encode, decode): (Dtype, Encode, Decode) = match precision {
        Precision::U8 => (
            Dtype::U8,
            |v, out| out.push(v.as_i64() as u8),
            |b| Value::Int(i64::from(b[0])),
        ),
        Precision::I8 => (
            Dtype::I8,
            |v, out| out.extend((v.as_i64() as i8).to_le_bytes()),
            |b| Value::Int(i64::from(b[0] as i8)),
        ),
        Precision::I32 => (
            Dtype::I32,
            |v, out| out.extend((v.as_i64() as i32).to_le_bytes()),
            |b| Value::Int(i64::from(i32::from_le_bytes(le(b)))),
        ),
        Precision::U32 => (
            Dtype::U32,
            |v, out| out.extend((v.as_i64() as u32).to_le_bytes()),
            |b| Value::Int(i64::from(u32::from_le_bytes(le(b)))),
        ),
        Precision::I64 => (
            Dtype::I64,
            |v, out| out.extend(v.as_i64().to_le_bytes()),
            |b| Value::Int(i64::from_le_bytes(le(b))),
        ),
        Precision::F16 => (
            Dtype::F16,
            |v, out| out.extend(f16::from_f64(v.as_f64()).to_le_bytes()),
            |b| Value::Float(f16::from_le_bytes(le(b)).to_f64()),
        ),
        Precision::Bf16 => (
            Dtype::BF16,
            |v, out| out.extend(bf16::from_f64(v.as_f64()).to_le_bytes()),
            |b| Value::Float(bf16::from_le_bytes(le(b)).to_f64()),
        ),
        Precision::F32 => (
            Dtype::F32,
            |v, out| out.extend((v.as_f64() as f32).to_le_bytes()),
            |b| Value::Float(f64::from(f32::from_le_bytes(le(b)))),
        ),
        Precision::F64 => (
            Dtype::F64,
            |v, out| out.extend(v.as_f64().to_le_bytes()),
            |b| Value::Float(f64::from_le_bytes(le(b))),
        ),
        Precision::Uint4x32 => {
            return Format {
                dtype: Dtype::U32,
                cell_axes: &[4],
                encode: |v, out| {
                    for word in v.as_word(Precision::Uint4x32) {
                        out.extend(word.to_le_bytes());
                    }
                },
                decode: |b| {
                    Value::Word(std::array::from_fn(|k| u32::from_le_bytes(le(&b[4 * k..]))))
                },
            };
        }
    };
    Format {
        dtype,
        cell_axes: &[],
        encode,
        decode,
    }
}

fn error(message: String) -> TensorError {
    TensorError { message }
}

/// The tensors' labels, which must be distinct (and not the name safetensors reserves for its
/// metadata).
fn labels(tensors: &[&Tensor]) -> Result<Vec<String>, String> {
    let labels: Vec<String> = tensors.iter().map(|t| t.label()).collect();
    for (i, label) in labels.iter().enumerate() {
        if label == "__metadata__" {
            return Err("a tensor is labelled '__metadata__', a name safetensors reserves".into());
        }
        if labels[..i].contains(label) {
            return Err(format!(
                "two tensors are labelled '{label}': checkpoints name tensors by label"
            ));
        }
    }
    Ok(labels)
}

/// Rows as `batch|input->output`, the sizes of a row separated by commas.
fn rows_literal(rows: &[Vec<usize>; 3]) -> String {
    let row = |dims: &[usize]| {
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("{}|{}->{}", row(&rows[0]), row(&rows[1]), row(&rows[2]))
}

fn rows_key(label: &str) -> String {
    format!("rows:{label}")
}

fn checksum_key(label: &str) -> String {
    format!("checksum:{label}")
}

/// The FNV-1a hash (64 bits) of `bytes`, as `fnv1a64:` and 16 hex digits.
fn checksum(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("fnv1a64:{hash:016x}")
}

/// Writes `tensors` to `path` by label (labels must be distinct), each in its precision's dtype
/// with its dims in memory order, its rows and a checksum in the metadata (see the module doc).
/// The file is written under a temporary name in the same folder and renamed into place, so a
/// failed save leaves whatever was at `path` before.
pub fn save(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    let fail = |what: String| error(format!("save checkpoint {}: {what}", path.display()));
    let labels = labels(tensors).map_err(fail)?;
    let mut entries = Vec::with_capacity(tensors.len());
    let mut metadata = HashMap::new();
    for (t, label) in tensors.iter().zip(&labels) {
        let format = format(t.precision());
        let in_tensor = |e: TensorError| fail(format!("tensor '{label}': {e}"));
        let dims = [ctx.dims(t).map_err(in_tensor)?, format.cell_axes.to_vec()].concat();
        let rows = ctx.rows(t).map_err(in_tensor)?;
        let cells = ctx.cells(t).map_err(in_tensor)?;
        let mut bytes = Vec::with_capacity(cells.len() * t.precision().size_in_bytes());
        for cell in cells {
            (format.encode)(cell, &mut bytes);
        }
        metadata.insert(rows_key(label), rows_literal(&rows));
        metadata.insert(checksum_key(label), checksum(&bytes));
        entries.push((label.as_str(), format.dtype, dims, bytes));
    }
    let views = entries
        .iter()
        .map(|(label, dtype, dims, bytes)| {
            TensorView::new(*dtype, dims.clone(), bytes).map(|view| (*label, view))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(e.to_string()))?;
    let file = safetensors::serialize(views, Some(metadata)).map_err(|e| fail(e.to_string()))?;
    write_atomically(path, &file).map_err(|e| fail(e.to_string()))
}

/// Writes `bytes` to a new file beside `path`, flushes it to disk and renames it to `path`; on
/// failure the temporary file is removed.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut temporary = OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = path.with_file_name(temporary);
    let written = (|| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        // The temporary file may not exist (its creation failed): nothing to report then.
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// Reads the checkpoint at `path` and sets each tensor's values from the entry of its label,
/// after checking every tensor: the entry exists, and has the tensor's dtype, dims, rows (when
/// recorded) and checksum (when recorded). Any failure (an unreadable, truncated or corrupted
/// file, a missing label, a mismatch) is an error naming the file and the tensor, and changes
/// nothing in `ctx`. Entries of the file that no tensor asks for are ignored.
///
/// Load after [`Context::init_params`]: initialization sets parameters that were not
/// initialized yet, over whatever was loaded into them.
pub fn load(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    let fail = |what: String| error(format!("load checkpoint {}: {what}", path.display()));
    let labels = labels(tensors).map_err(fail)?;
    let file = fs::read(path).map_err(|e| fail(e.to_string()))?;
    let (header, contents) = SafeTensors::read_metadata(&file).map_err(|e| {
        fail(format!(
            "not a readable safetensors file ({e}): truncated or corrupted?"
        ))
    })?;
    // After the 8-byte header length and the header: the tensors' bytes (the lengths are checked
    // by `read_metadata`).
    let data = file.get(8 + header..).unwrap_or_default();
    let notes = contents.metadata().clone().unwrap_or_default();
    let mut loaded = Vec::with_capacity(tensors.len());
    for (t, label) in tensors.iter().zip(&labels) {
        let format = format(t.precision());
        let Some(info) = contents.info(label) else {
            let mut names = contents.offset_keys();
            names.sort();
            return Err(fail(format!(
                "no tensor '{label}' in the file (it holds {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names
                        .iter()
                        .map(|n| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        };
        let in_tensor = |e: TensorError| fail(format!("tensor '{label}': {e}"));
        let dims = [ctx.dims(t).map_err(in_tensor)?, format.cell_axes.to_vec()].concat();
        let rows = rows_literal(&ctx.rows(t).map_err(in_tensor)?);
        let saved_rows = notes.get(&rows_key(label));
        let shape = |dims: &[usize], rows: Option<&String>| match rows {
            Some(rows) => format!("dims {dims:?} (rows {rows})"),
            None => format!("dims {dims:?}"),
        };
        if info.dtype != format.dtype {
            return Err(fail(format!(
                "tensor '{label}' is {} of {} in the file, {} of {} in memory (precision {})",
                info.dtype,
                shape(&info.shape, saved_rows),
                format.dtype,
                shape(&dims, Some(&rows)),
                t.precision()
            )));
        }
        if info.shape != dims || saved_rows.is_some_and(|saved| *saved != rows) {
            return Err(fail(format!(
                "tensor '{label}' has {} in the file, {} in memory",
                shape(&info.shape, saved_rows),
                shape(&dims, Some(&rows))
            )));
        }
        let (start, end) = info.data_offsets;
        let bytes = data.get(start..end).unwrap_or_default();
        if let Some(saved) = notes
            .get(&checksum_key(label))
            .filter(|saved| **saved != checksum(bytes))
        {
            return Err(fail(format!(
                "tensor '{label}' has bytes whose checksum {} does not match the recorded \
                 {saved}: the file is corrupted",
                checksum(bytes)
            )));
        }
        let size = t.precision().size_in_bytes();
        let cells: Vec<Value> = bytes.chunks_exact(size).map(format.decode).collect();
        loaded.push((*t, cells));
    }
    for (t, cells) in loaded {
        ctx.set_cells(t, &cells)
            .map_err(|e| fail(format!("tensor '{}': {e}", t.label())))?;
    }
    Ok(())
}

/// [`save`] of every parameter of `graph`.
pub fn save_params(path: &Path, ctx: &mut Context, graph: &Graph) -> Result<(), TensorError> {
    let params = graph.params();
    save(path, ctx, &params.iter().collect::<Vec<_>>())
}

/// [`load`] of every parameter of `graph`.
pub fn load_params(path: &Path, ctx: &mut Context, graph: &Graph) -> Result<(), TensorError> {
    let params = graph.params();
    load(path, ctx, &params.iter().collect::<Vec<_>>())
}
