//! `.npy` files as the command reads and writes them: the library's reader and writer
//! ([`rcannl_tensor::npy`]) with the command's bound on cells ([`MAX_CELLS`]) and its dtypes and
//! errors (every one of kind `io`, naming the file).

use std::path::Path;

use rcannl_ir::Value;
use rcannl_tensor::npy::{self, NpyError, NpyErrorKind};

use crate::bound::{MAX_CELLS, cell_count};
use crate::cells::{Cell, Cells};
use crate::dtype::Dtype;
use crate::report::{CliError, ErrorKind};

fn io_error(e: NpyError) -> CliError {
    CliError::new(ErrorKind::Io, e.to_string())
}

/// The dims and the cells (row-major, whatever the file's order) of the array in `path`.
pub fn read(path: &Path) -> Result<(Vec<usize>, Cells), CliError> {
    let reader = npy::open(path).map_err(io_error)?;
    let header = reader.header();
    // A dim beyond `usize` is beyond every bound too.
    let dims = (header.dims.iter()).map(|&dim| usize::try_from(dim).unwrap_or(usize::MAX));
    if let Err(oversize) = cell_count(dims) {
        return Err(io_error(NpyError::new(
            path,
            NpyErrorKind::Limit,
            format!("the shape ({}) {oversize}", header.dims_text()),
        )));
    }
    let dtype = Dtype::from_npy(header.dtype);
    // The cells keep the file's dtype: a uint64 is its 64 bits (see `Cells`).
    let (dims, values) = reader.read_cells_as_stored(MAX_CELLS).map_err(io_error)?;
    let cells = values.into_iter().map(|value| match value {
        Value::Float(x) => Cell::Float(x),
        other => Cell::Int(other.as_i64()),
    });
    Ok((dims, Cells::new(dtype, cells)))
}

/// Writes `cells` (row-major) as an array of `dims` and of their dtype to `path`, replacing the
/// file whole or not at all ([`rcannl_tensor::files::replace_file`]: only a regular file, or a
/// link to one).
pub fn write(path: &Path, dims: &[usize], cells: &Cells) -> Result<(), CliError> {
    let values: Vec<Value> = cells
        .iter()
        .map(|cell| match cell {
            Cell::Float(x) => Value::Float(x),
            Cell::Int(i) => Value::Int(i),
        })
        .collect();
    npy::write(path, dims, cells.dtype().npy(), &values).map_err(io_error)
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use npyz::WriterBuilder;

    use super::*;

    #[test]
    fn round_trip_and_other_dtypes() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("rcannl-npy-unit-{}.npy", std::process::id()));
        let floats = Cells::float64(vec![1.5, -2.0, 3.0, 4.0]);
        write(&path, &[2, 1, 2], &floats).unwrap();
        assert_eq!(read(&path).unwrap(), (vec![2, 1, 2], floats.clone()));
        // Each dtype is written with its own type string and read back as itself.
        for dtype in crate::dtype::Dtype::ALL {
            let cells = floats.clone().cast(dtype);
            write(&path, &[4], &cells).unwrap();
            assert_eq!(read(&path).unwrap(), (vec![4], cells), "{dtype}");
        }

        let ints: &[i32] = &[1, -2, 3];
        {
            let mut file = File::create(&path).unwrap();
            let mut writer = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[3])
                .writer(&mut file)
                .begin_nd()
                .unwrap();
            writer.extend(ints.iter().copied()).unwrap();
            writer.finish().unwrap();
        }
        let expected = Cells::float64(vec![1.0, -2.0, 3.0]).cast(crate::dtype::Dtype::Int32);
        assert_eq!(read(&path).unwrap(), (vec![3], expected));

        std::fs::write(&path, "not an array").unwrap();
        assert_eq!(read(&path).unwrap_err().kind, ErrorKind::Io);
        std::fs::remove_file(&path).unwrap();
    }
}
