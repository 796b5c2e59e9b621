//! `.npy` files: reading an array of numbers (floats f2/f4/f8, signed or unsigned integers of 1
//! to 8 bytes, bools; either byte order; C or Fortran order) as cells of its dtype in C order with
//! its dims, and writing cells as an n-d array of their dtype.
//!
//! The reader trusts nothing the file says. The header is at most [`MAX_HEADER`] bytes and must
//! be the dict numpy writes ([`header`]); the dims' product is computed without overflow and
//! bounded by [`MAX_CELLS`](crate::input::MAX_CELLS) before anything is allocated; and the data must be exactly as long as
//! the header says, read without reserving more than the file holds. Every error names the file.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::cells::{Cell, Cells};
use crate::input::cell_count;
use crate::report::{CliError, ErrorKind};

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header read. numpy writes a few hundred bytes at most (and itself refuses to read
/// more than 10,000 unless told to); a longer claim is refused before anything is read.
pub const MAX_HEADER: usize = 1 << 20;

/// The dims and the cells (row-major, whatever the file's order) of the array in `path`.
pub fn read(path: &Path) -> Result<(Vec<usize>, Cells), CliError> {
    let error =
        |message: String| CliError::new(ErrorKind::Io, format!("{}: {message}", path.display()));
    let file = File::open(path).map_err(|err| error(err.to_string()))?;
    // What the file holds, when it is a regular file: a bound on what is worth reserving.
    let length = file
        .metadata()
        .ok()
        .filter(|meta| meta.is_file())
        .map(|meta| meta.len());
    let mut reader = BufReader::new(file);
    let (header, header_end) = read_header(&mut reader).map_err(error)?;
    let shown = format!("({})", header.dims_text());
    // A dim beyond `usize` is beyond every bound too.
    let dims: Vec<usize> = (header.dims.iter())
        .map(|&dim| usize::try_from(dim).unwrap_or(usize::MAX))
        .collect();
    let cells = cell_count(dims.iter().copied())
        .map_err(|oversize| error(format!("the shape {shown} {oversize}")))?;
    let needed = cells * header.dtype.size;
    let available = length.map(|length| length.saturating_sub(header_end));
    let mut data = Vec::new();
    data.try_reserve_exact(available.map_or(0, |a| (a as usize).min(needed)))
        .map_err(|_| error(format!("no memory for {needed} bytes of data")))?;
    reader
        .take(needed as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|err| error(err.to_string()))?;
    if data.len() != needed {
        let found = if data.len() > needed {
            "more".to_owned()
        } else {
            data.len().to_string()
        };
        return Err(error(format!(
            "the shape {shown} of '{}' needs {needed} bytes of data after the header; the file \
             has {found}",
            header.descr
        )));
    }
    let values: Vec<Cell> = data
        .chunks_exact(header.dtype.size)
        .map(|bytes| header.dtype.decode(bytes))
        .collect();
    let values = if header.fortran_order {
        fortran_to_c(&dims, &values)
    } else {
        values
    };
    Ok((dims, Cells::new(header.dtype.dtype(), values)))
}

/// Reads the magic string, the version, the header's length and the header; returns the header
/// and the offset where the data starts.
fn read_header(reader: &mut impl Read) -> Result<(header::Header, u64), String> {
    let mut preamble = [0; 8];
    read_exactly(reader, &mut preamble, "the magic string and version")?;
    if &preamble[..6] != MAGIC {
        return Err("not a .npy file (it does not start with the magic string \\x93NUMPY)".into());
    }
    let (major, minor) = (preamble[6], preamble[7]);
    let length = match major {
        1 => {
            let mut bytes = [0; 2];
            read_exactly(reader, &mut bytes, "the header's length")?;
            usize::from(u16::from_le_bytes(bytes))
        }
        2 | 3 => {
            let mut bytes = [0; 4];
            read_exactly(reader, &mut bytes, "the header's length")?;
            u32::from_le_bytes(bytes) as usize
        }
        _ => return Err(format!("unsupported .npy version {major}.{minor}")),
    };
    if length > MAX_HEADER {
        return Err(format!(
            "the header claims {length} bytes, more than the {MAX_HEADER} this reader accepts"
        ));
    }
    let mut text = Vec::new();
    reader
        .take(length as u64)
        .read_to_end(&mut text)
        .map_err(|err| err.to_string())?;
    if text.len() < length {
        return Err(format!(
            "the file ends within its header ({} of the {length} bytes it claims)",
            text.len()
        ));
    }
    let size_field = if major == 1 { 2 } else { 4 };
    let header = header::parse(&text)?;
    Ok((header, (8 + size_field + length) as u64))
}

/// Fills `buffer` from `reader`, or says which part of the file is missing.
fn read_exactly(reader: &mut impl Read, buffer: &mut [u8], what: &str) -> Result<(), String> {
    reader.read_exact(buffer).map_err(|err| match err.kind() {
        io::ErrorKind::UnexpectedEof => format!("the file ends before {what}"),
        _ => err.to_string(),
    })
}

/// Column-major values reordered row-major. The dims' product is `values.len()`, at most
/// [`MAX_CELLS`](crate::input::MAX_CELLS), so no stride overflows.
fn fortran_to_c<T: Copy>(dims: &[usize], values: &[T]) -> Vec<T> {
    // Fortran strides: the first axis moves by one cell.
    let strides: Vec<usize> = dims
        .iter()
        .scan(1, |stride, &dim| {
            let this = *stride;
            *stride *= dim;
            Some(this)
        })
        .collect();
    let mut coordinates = vec![0; dims.len()];
    let mut offset = 0;
    let mut reordered = Vec::with_capacity(values.len());
    for _ in 0..values.len() {
        reordered.push(values[offset]);
        // The next cell in C order: the last axis moves fastest.
        for axis in (0..dims.len()).rev() {
            coordinates[axis] += 1;
            offset += strides[axis];
            if coordinates[axis] < dims[axis] {
                break;
            }
            offset -= strides[axis] * dims[axis];
            coordinates[axis] = 0;
        }
    }
    reordered
}

/// Writes `cells` (row-major) as an array of `dims` and of their dtype to `path`, replacing the
/// file whole or not at all ([`rcannl_nn::files::replace_file`]: only a regular file, or a link
/// to one).
pub fn write(path: &Path, dims: &[usize], cells: &Cells) -> Result<(), CliError> {
    rcannl_nn::files::replace_file(path, |sink| {
        sink.write_all(&header::encode(dims, &cells.dtype().descr()))?;
        cells.encode(sink)
    })
    .map_err(|message| CliError::new(ErrorKind::Io, format!("{}: {message}", path.display())))
}

/// The header: the dict numpy writes, read strictly, and written.
mod header {
    use std::fmt::Write;

    use half::f16;

    use super::MAGIC;
    use crate::cells::Cell;

    /// What a header says.
    #[derive(Debug)]
    pub struct Header {
        /// The dtype as written (`'<f8'`), for messages.
        pub descr: String,
        pub dtype: Dtype,
        pub fortran_order: bool,
        /// The dims as written, not yet bounded.
        pub dims: Vec<u64>,
    }

    impl Header {
        /// The dims as a Python tuple's inside writes them: `4, 3` (`5,` for one).
        pub fn dims_text(&self) -> String {
            tuple_inside(self.dims.iter())
        }
    }

    fn tuple_inside<T: ToString>(dims: impl ExactSizeIterator<Item = T>) -> String {
        let single = dims.len() == 1;
        let shown: Vec<String> = dims.map(|dim| dim.to_string()).collect();
        format!("{}{}", shown.join(", "), if single { "," } else { "" })
    }

    /// A dtype this reader reads, and its byte order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Dtype {
        kind: NumberKind,
        /// Bytes per value.
        pub size: usize,
        big_endian: bool,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum NumberKind {
        Float,
        Int,
        Uint,
        Bool,
    }

    impl Dtype {
        /// Reads numpy's type string (`<f8`, `>i2`, `|u1`, `|b1`, …).
        fn parse(descr: &str) -> Option<Dtype> {
            let (big_endian, rest) = match descr.as_bytes().first()? {
                b'<' | b'|' => (false, &descr[1..]),
                b'>' => (true, &descr[1..]),
                b'=' => (cfg!(target_endian = "big"), &descr[1..]),
                _ => (false, descr),
            };
            let (kind, size) = rest.split_at_checked(1)?;
            let kind = match kind {
                "f" => NumberKind::Float,
                "i" => NumberKind::Int,
                "u" => NumberKind::Uint,
                "b" => NumberKind::Bool,
                _ => return None,
            };
            let size: usize = size.parse().ok()?;
            let supported = match kind {
                NumberKind::Float => matches!(size, 2 | 4 | 8),
                NumberKind::Int | NumberKind::Uint => matches!(size, 1 | 2 | 4 | 8),
                NumberKind::Bool => size == 1,
            };
            supported.then_some(Dtype {
                kind,
                size,
                big_endian,
            })
        }

        /// The dtype of the cells.
        pub fn dtype(self) -> crate::dtype::Dtype {
            let kind = match self.kind {
                NumberKind::Float => 'f',
                NumberKind::Int => 'i',
                NumberKind::Uint => 'u',
                NumberKind::Bool => 'b',
            };
            crate::dtype::Dtype::from_kind_and_size(kind, self.size)
                .expect("parse accepts only the sizes of the dtypes read")
        }

        /// The value of one cell's bytes (exactly `size` of them), as [`crate::cells::Cells`]
        /// holds it: a uint64 as its bits, a bool as 1 when its byte is nonzero.
        pub fn decode(self, bytes: &[u8]) -> Cell {
            let mut word = [0u8; 8];
            if self.big_endian {
                word[8 - self.size..].copy_from_slice(bytes);
                word.reverse();
            } else {
                word[..self.size].copy_from_slice(bytes);
            }
            let bits = u64::from_le_bytes(word);
            // Sign-extends the low `size` bytes.
            let signed = || {
                let shift = 64 - 8 * self.size as u32;
                ((bits << shift) as i64) >> shift
            };
            match (self.kind, self.size) {
                (NumberKind::Float, 2) => Cell::Float(f16::from_bits(bits as u16).to_f64()),
                (NumberKind::Float, 4) => Cell::Float(f64::from(f32::from_bits(bits as u32))),
                (NumberKind::Float, _) => Cell::Float(f64::from_bits(bits)),
                (NumberKind::Int, _) => Cell::Int(signed()),
                (NumberKind::Uint, _) => Cell::Int(bits as i64),
                (NumberKind::Bool, _) => Cell::Int(i64::from(bits != 0)),
            }
        }
    }

    /// Parses the header text: `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`
    /// with its keys in any order, then spaces and a newline. Nothing else is accepted (a
    /// structured dtype is not a number), and nothing in it recurses or allocates beyond the
    /// text's length.
    pub fn parse(text: &[u8]) -> Result<Header, String> {
        let text = std::str::from_utf8(text)
            .ok()
            .filter(|text| text.is_ascii())
            .ok_or("the header is not ASCII text")?;
        let mut literal = Literal { text, at: 0 };
        let (mut descr, mut fortran_order, mut dims) = (None, None, None);
        literal.expect('{')?;
        while !literal.eat('}') {
            let key = literal.string()?;
            literal.expect(':')?;
            let duplicate = match key {
                "descr" => descr.replace(literal.string().map_err(|_| {
                    "the header's 'descr' is not a type string (structured dtypes are not \
                     numbers)"
                        .to_owned()
                })?),
                "fortran_order" => fortran_order.replace(literal.boolean()?).map(|_| ""),
                "shape" => dims.replace(literal.dims()?).map(|_| ""),
                other => return Err(format!("the header has an unexpected key '{other}'")),
            }
            .is_some();
            if duplicate {
                return Err(format!("the header gives '{key}' twice"));
            }
            if !literal.eat(',') {
                literal.expect('}')?;
                break;
            }
        }
        literal.skip_spaces();
        if literal.at != text.len() {
            return Err(literal.unexpected("the end of the header"));
        }
        let missing = |key: &str| format!("the header has no '{key}'");
        let descr = descr.ok_or_else(|| missing("descr"))?;
        let dtype = Dtype::parse(descr).ok_or_else(|| {
            // numpy's long double is x87's 80 bits on x86-64 and IEEE's 128 on other machines,
            // under the same name: which one a file holds cannot be told, so none is read.
            let kind = descr.get(1..).unwrap_or("");
            let why = if kind == "f16" || kind == "f12" {
                ": numpy's long double, whose layout depends on the machine that wrote it (save it \
                 as float64)"
            } else {
                ""
            };
            format!(
                "unsupported dtype '{descr}'{why} (expected floats f2/f4/f8, integers \
                 i1-i8/u1-u8 or bools b1)"
            )
        })?;
        Ok(Header {
            descr: descr.to_owned(),
            dtype,
            fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
            dims: dims.ok_or_else(|| missing("shape"))?,
        })
    }

    /// A cursor over the header's text.
    struct Literal<'a> {
        text: &'a str,
        at: usize,
    }

    impl<'a> Literal<'a> {
        fn skip_spaces(&mut self) {
            let rest = &self.text[self.at..];
            self.at += rest.len() - rest.trim_start().len();
        }

        /// Skips spaces and `c`, if `c` comes next.
        fn eat(&mut self, c: char) -> bool {
            self.skip_spaces();
            let found = self.text[self.at..].starts_with(c);
            if found {
                self.at += 1;
            }
            found
        }

        fn expect(&mut self, c: char) -> Result<(), String> {
            if self.eat(c) {
                Ok(())
            } else {
                Err(self.unexpected(&format!("'{c}'")))
            }
        }

        /// An error saying what was expected at the cursor, with a little of what is there.
        fn unexpected(&self, expected: &str) -> String {
            let found: String = self.text[self.at..].chars().take(20).collect();
            format!(
                "the header is not a .npy header dict: expected {expected} at byte {}, found {found:?}",
                self.at
            )
        }

        /// A string in single or double quotes, without escapes.
        fn string(&mut self) -> Result<&'a str, String> {
            self.skip_spaces();
            let rest = &self.text[self.at..];
            let quote = rest
                .chars()
                .next()
                .filter(|c| matches!(c, '\'' | '"'))
                .ok_or_else(|| self.unexpected("a quoted string"))?;
            let end = rest[1..]
                .find(quote)
                .ok_or_else(|| self.unexpected("a closed string"))?;
            let inside = &rest[1..1 + end];
            if inside.contains('\\') {
                return Err(self.unexpected("a string without escapes"));
            }
            self.at += end + 2;
            Ok(inside)
        }

        fn boolean(&mut self) -> Result<bool, String> {
            self.skip_spaces();
            for (word, value) in [("True", true), ("False", false)] {
                if self.text[self.at..].starts_with(word) {
                    self.at += word.len();
                    return Ok(value);
                }
            }
            Err(self.unexpected("True or False"))
        }

        /// A tuple (or list) of nonnegative integers, each at most `u64::MAX`.
        fn dims(&mut self) -> Result<Vec<u64>, String> {
            let close = if self.eat('(') {
                ')'
            } else if self.eat('[') {
                ']'
            } else {
                return Err(self.unexpected("a tuple of dims"));
            };
            let mut dims = Vec::new();
            while !self.eat(close) {
                self.skip_spaces();
                let rest = &self.text[self.at..];
                let digits =
                    rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                if digits == 0 {
                    return Err(self.unexpected("a dim (a nonnegative integer)"));
                }
                let dim = rest[..digits]
                    .parse()
                    .map_err(|_| format!("the dim {} is too large", &rest[..digits]))?;
                dims.push(dim);
                self.at += digits;
                // Python 2 wrote long integers with an `L`.
                self.eat('L');
                if !self.eat(',') {
                    self.expect(close)?;
                    break;
                }
            }
            Ok(dims)
        }
    }

    /// The bytes before the data of an array of `dims` in C order whose type string is
    /// `descr`: the magic string, the version (1.0, or 2.0 when the header is too long for a
    /// 16-bit length) and the header, padded with spaces so that the data starts at a multiple
    /// of 64 bytes.
    pub fn encode(dims: &[usize], descr: &str) -> Vec<u8> {
        let mut text = String::new();
        write!(
            text,
            "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}), }}",
            tuple_inside(dims.iter())
        )
        .expect("writing to a string");
        let long = text.len() + 1 > usize::from(u16::MAX) - 64;
        let preamble = if long { 12 } else { 10 };
        while (preamble + text.len() + 1) % 64 != 0 {
            text.push(' ');
        }
        text.push('\n');
        let mut bytes = MAGIC.to_vec();
        if long {
            bytes.extend([2, 0]);
            bytes.extend((text.len() as u32).to_le_bytes());
        } else {
            bytes.extend([1, 0]);
            bytes.extend((text.len() as u16).to_le_bytes());
        }
        bytes.extend(text.as_bytes());
        bytes
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn headers_numpy_writes_are_read() {
            let header =
                parse(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }        \n")
                    .unwrap();
            assert_eq!(header.dims, [3, 4]);
            assert!(!header.fortran_order);
            assert_eq!(header.dtype.size, 8);
            let header =
                parse(b"{\"shape\": [5L], \"fortran_order\": True, \"descr\": \">i2\"}").unwrap();
            assert_eq!(
                (header.dims.as_slice(), header.fortran_order),
                (&[5][..], true)
            );
            assert_eq!(header.dtype.decode(&[0xff, 0xfe]), Cell::Int(-2));
            let scalar = parse(b"{'descr':'|b1','fortran_order':False,'shape':()}").unwrap();
            assert!(scalar.dims.is_empty());
        }

        #[test]
        fn long_doubles_are_refused_saying_why() {
            for (descr, long_double) in [("<f16", true), (">f12", true), ("<f4x", false)] {
                let text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (3,)}}");
                let message = parse(text.as_bytes()).err().unwrap_or_default();
                assert!(message.contains("unsupported dtype"), "{descr}: {message}");
                assert_eq!(
                    message.contains("long double"),
                    long_double,
                    "{descr}: {message}"
                );
            }
        }

        #[test]
        fn anything_else_is_refused() {
            for text in [
                &b""[..],
                b"{",
                b"{'descr': '<f8', 'fortran_order': False}",
                b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}",
                b"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,)}",
                b"{'descr': '<f8', 'fortran_order': 0, 'shape': (3,)}",
                b"{'descr': '<f8', 'fortran_order': False, 'shape': (-3,)}",
                b"{'descr': '<f8', 'fortran_order': False, 'shape': ((3,),)}",
                b"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,)} x",
                b"{'descr': '<c16', 'fortran_order': False, 'shape': (3,)}",
                b"{'descr': '<f8\xe9', 'fortran_order': False, 'shape': (3,)}",
            ] {
                assert!(parse(text).is_err(), "{}", String::from_utf8_lossy(text));
            }
        }

        #[test]
        fn dtypes_decode_in_either_byte_order() {
            let dtype = |descr: &str| Dtype::parse(descr).unwrap();
            let float = |x: f64| Cell::Float(x);
            assert_eq!(dtype("<f4").decode(&1.5f32.to_le_bytes()), float(1.5));
            assert_eq!(dtype(">f8").decode(&(-0.25f64).to_be_bytes()), float(-0.25));
            assert_eq!(dtype("<f2").decode(&[0x00, 0xbe]), float(-1.5));
            assert_eq!(dtype("<i8").decode(&(-7i64).to_le_bytes()), Cell::Int(-7));
            assert_eq!(
                dtype(">u4").decode(&4_000_000_000u32.to_be_bytes()),
                Cell::Int(4_000_000_000)
            );
            assert_eq!(dtype("<u8").decode(&u64::MAX.to_le_bytes()), Cell::Int(-1));
            assert_eq!(dtype("|i1").decode(&[0x80]), Cell::Int(-128));
            assert_eq!(dtype("|b1").decode(&[2]), Cell::Int(1));
            assert_eq!(dtype(">u2").dtype(), crate::dtype::Dtype::Uint16);
            assert_eq!(Dtype::parse("<f1"), None);
            assert_eq!(Dtype::parse("<"), None);
        }

        #[test]
        fn written_headers_align_the_data() {
            for dims in [&[][..], &[5], &[4, 3, 2]] {
                let bytes = encode(dims, "<f8");
                assert_eq!(bytes.len() % 64, 0);
                let text = &bytes[10..];
                let header = parse(text).unwrap();
                assert_eq!(
                    header.dims,
                    dims.iter().map(|&d| d as u64).collect::<Vec<_>>()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use npyz::WriterBuilder;

    use super::*;

    #[test]
    fn fortran_order_is_reordered() {
        // [[0, 1, 2], [3, 4, 5]] stored column by column.
        let column_major = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        assert_eq!(
            fortran_to_c(&[2, 3], &column_major),
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        // A 2×3×2 array: cell (i, j, k) holds 100i + 10j + k.
        let dims = [2, 3, 2];
        let mut column_major = Vec::new();
        for k in 0..2 {
            for j in 0..3 {
                for i in 0..2 {
                    column_major.push(f64::from(100 * i + 10 * j + k));
                }
            }
        }
        let mut row_major = Vec::new();
        for i in 0..2 {
            for j in 0..3 {
                for k in 0..2 {
                    row_major.push(f64::from(100 * i + 10 * j + k));
                }
            }
        }
        assert_eq!(fortran_to_c(&dims, &column_major), row_major);
        assert_eq!(fortran_to_c::<f64>(&[0, 3], &[]), Vec::<f64>::new());
    }

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
