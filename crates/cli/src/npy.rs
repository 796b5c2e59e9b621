//! `.npy` files: reading an array of numbers (f32, f64, signed or unsigned integers, bool) as
//! f64 values in C order with its dims, and writing f64 values as an n-d array.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use npyz::{DType, NpyFile, Order, TypeChar, WriterBuilder};

use crate::input::MAX_CELLS;
use crate::report::{CliError, ErrorKind};

/// The dims and the values (row-major, whatever the file's order) of the array in `path`.
pub fn read(path: &Path) -> Result<(Vec<usize>, Vec<f64>), CliError> {
    let error =
        |message: String| CliError::new(ErrorKind::Io, format!("{}: {message}", path.display()));
    let io_error = |err: io::Error| error(err.to_string());
    let file = File::open(path).map_err(io_error)?;
    let npy = NpyFile::new(BufReader::new(file)).map_err(io_error)?;
    let dims: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| error("dims too large".to_owned()))?;
    if npy.len() > MAX_CELLS as u64 {
        return Err(error(format!("more than {MAX_CELLS} cells")));
    }
    let order = npy.order();
    let values = values(npy).map_err(|err| match err {
        Some(err) => io_error(err),
        None => error("unsupported dtype (expected floats, integers or bools)".to_owned()),
    })?;
    let values = match order {
        Order::C => values,
        Order::Fortran => fortran_to_c(&dims, &values),
    };
    Ok((dims, values))
}

/// The values in file order, as f64; `Err(None)` for a dtype that is not a number.
fn values<R: Read>(npy: NpyFile<R>) -> Result<Vec<f64>, Option<io::Error>> {
    fn all<T: npyz::Deserialize, R: Read>(
        npy: NpyFile<R>,
        convert: fn(T) -> f64,
    ) -> Result<Vec<f64>, Option<io::Error>> {
        let values: Vec<T> = npy.into_vec()?;
        Ok(values.into_iter().map(convert).collect())
    }
    let DType::Plain(type_str) = npy.dtype() else {
        return Err(None);
    };
    match (type_str.type_char(), type_str.size_field()) {
        (TypeChar::Float, 8) => all(npy, |x: f64| x),
        (TypeChar::Float, 4) => all::<f32, _>(npy, f64::from),
        (TypeChar::Int, 1) => all::<i8, _>(npy, f64::from),
        (TypeChar::Int, 2) => all::<i16, _>(npy, f64::from),
        (TypeChar::Int, 4) => all::<i32, _>(npy, f64::from),
        // 64-bit integers beyond 2^53 round.
        (TypeChar::Int, 8) => all(npy, |x: i64| x as f64),
        (TypeChar::Uint, 1) => all::<u8, _>(npy, f64::from),
        (TypeChar::Uint, 2) => all::<u16, _>(npy, f64::from),
        (TypeChar::Uint, 4) => all::<u32, _>(npy, f64::from),
        (TypeChar::Uint, 8) => all(npy, |x: u64| x as f64),
        (TypeChar::Bool, 1) => all(npy, |x: bool| f64::from(u8::from(x))),
        _ => Err(None),
    }
}

/// Column-major values reordered row-major.
fn fortran_to_c(dims: &[usize], values: &[f64]) -> Vec<f64> {
    (0..values.len())
        .map(|cell| {
            // The C-order cell's coordinates, and its offset in Fortran order.
            let (mut rest, mut offset, mut stride) = (cell, 0, 1);
            let mut coordinates: Vec<usize> = dims
                .iter()
                .rev()
                .map(|&dim| {
                    let coordinate = rest % dim;
                    rest /= dim;
                    coordinate
                })
                .collect();
            coordinates.reverse();
            for (coordinate, dim) in coordinates.iter().zip(dims) {
                offset += coordinate * stride;
                stride *= dim;
            }
            values[offset]
        })
        .collect()
}

/// Writes `values` (row-major) as an f64 array of `dims`.
pub fn write(path: &Path, dims: &[usize], values: &[f64]) -> Result<(), CliError> {
    let io_error =
        |err: io::Error| CliError::new(ErrorKind::Io, format!("{}: {err}", path.display()));
    let file = File::create(path).map_err(io_error)?;
    let shape: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    let mut sink = BufWriter::new(file);
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(&mut sink)
        .begin_nd()
        .map_err(io_error)?;
    writer.extend(values.iter().copied()).map_err(io_error)?;
    writer.finish().map_err(io_error)?;
    sink.flush().map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_order_is_reordered() {
        // [[0, 1, 2], [3, 4, 5]] stored column by column.
        let column_major = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        assert_eq!(
            fortran_to_c(&[2, 3], &column_major),
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
    }

    #[test]
    fn round_trip_and_other_dtypes() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("rcannl-npy-unit-{}.npy", std::process::id()));
        write(&path, &[2, 1, 2], &[1.5, -2.0, 3.0, 4.0]).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            (vec![2, 1, 2], vec![1.5, -2.0, 3.0, 4.0])
        );

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
        assert_eq!(read(&path).unwrap(), (vec![3], vec![1.0, -2.0, 3.0]));

        std::fs::write(&path, "not an array").unwrap();
        assert_eq!(read(&path).unwrap_err().kind, ErrorKind::Io);
        std::fs::remove_file(&path).unwrap();
    }
}
