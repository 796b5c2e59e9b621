//! `.npy` files: reading an array of numbers (floats f2/f4/f8, signed or unsigned integers of 1
//! to 8 bytes, bools; either byte order; C or Fortran order) as cells in C order with its dims
//! and dtype, and writing cells as a C-order array of a dtype, replacing the file whole or not
//! at all ([`crate::files::replace_file`]). [`Context::save_npy`](crate::Context::save_npy) and
//! [`Context::load_npy`](crate::Context::load_npy) go through here.
//!
//! The reader trusts nothing the file says. The header is at most [`MAX_HEADER`] bytes and must
//! be the dict numpy writes ([`Header::parse`]), of at most [`MAX_DIMS`] dims; the dims' product
//! is computed without overflow and bounded by the caller's limit before anything is allocated
//! ([`NpyReader::read_cells`]); and the data must be exactly as long as the header says, read
//! without reserving more than the file holds. Every error names the file ([`NpyError`]).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcannl_ir::{Precision, Value};

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The most dims an array may have: numpy's own limit (`NPY_MAXDIMS`). A header giving more is
/// refused as soon as the 65th is read, so that no caller makes a tensor of thousands of unit
/// axes (whose loop nests no compiler accepts).
pub const MAX_DIMS: usize = 64;

/// The longest header read. numpy writes a few hundred bytes at most (and itself refuses to read
/// more than 10,000 unless told to); a longer claim is refused before anything is read.
pub const MAX_HEADER: usize = 1 << 20;

/// An error reading or writing a `.npy` file: the file and what went wrong, printed
/// `path: message`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct NpyError {
    /// The file.
    pub path: PathBuf,
    /// What kind of problem it is.
    pub kind: NpyErrorKind,
    /// What went wrong.
    pub message: String,
    /// The failure of the file system that caused it, if one did.
    #[source]
    source: Option<Arc<io::Error>>,
}

/// What kind of problem a `.npy` file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NpyErrorKind {
    /// The file could not be opened, read or written.
    Io,
    /// The file is not a `.npy` array as numpy writes one: its magic string, version, header or
    /// data length.
    Format,
    /// The array is larger than allowed (its cells, bytes or dims), or than memory holds.
    Limit,
    /// The array given to write does not match its dims.
    Shape,
}

impl NpyError {
    /// An error of `kind` on the file `path`.
    pub fn new(path: &Path, kind: NpyErrorKind, message: impl Into<String>) -> NpyError {
        NpyError {
            path: path.to_path_buf(),
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// An error of the file system on the file `path`: its text, and the error as the source.
    fn io(path: &Path, error: io::Error) -> NpyError {
        NpyError {
            path: path.to_path_buf(),
            kind: NpyErrorKind::Io,
            message: error.to_string(),
            source: Some(Arc::new(error)),
        }
    }
}

impl PartialEq for NpyError {
    /// The same file, kind and message.
    fn eq(&self, other: &NpyError) -> bool {
        (&self.path, self.kind, &self.message) == (&other.path, other.kind, &other.message)
    }
}

/// What kind of numbers a dtype holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumberKind {
    /// IEEE floats (`f`).
    Float,
    /// Signed integers (`i`).
    Int,
    /// Unsigned integers (`u`).
    Uint,
    /// Bools (`b`), one byte each.
    Bool,
}

impl NumberKind {
    /// The kind's letter in a type string: `f`, `i`, `u` or `b`.
    pub fn code(self) -> char {
        match self {
            NumberKind::Float => 'f',
            NumberKind::Int => 'i',
            NumberKind::Uint => 'u',
            NumberKind::Bool => 'b',
        }
    }
}

/// A dtype of numbers: its kind and its size in bytes (f2/f4/f8, i1-i8, u1-u8, b1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dtype {
    /// What kind of numbers.
    pub kind: NumberKind,
    /// Bytes per value.
    pub size: usize,
}

impl Dtype {
    /// The dtype of `kind` and `size` bytes, if it is one of the supported ones.
    pub fn new(kind: NumberKind, size: usize) -> Option<Dtype> {
        let supported = match kind {
            NumberKind::Float => matches!(size, 2 | 4 | 8),
            NumberKind::Int | NumberKind::Uint => matches!(size, 1 | 2 | 4 | 8),
            NumberKind::Bool => size == 1,
        };
        supported.then_some(Dtype { kind, size })
    }

    /// The dtype that holds every value of `precision` exactly: its own, but bf16 (which numpy
    /// lacks) widens to f4 and fp8 (which it lacks too) to f2; `None` for the 128-bit word, which
    /// is not a number.
    pub fn of_precision(precision: Precision) -> Option<Dtype> {
        let (kind, size) = match precision {
            Precision::U8 => (NumberKind::Uint, 1),
            Precision::I8 => (NumberKind::Int, 1),
            Precision::U16 => (NumberKind::Uint, 2),
            Precision::U64 => (NumberKind::Uint, 8),
            Precision::Fp8 => (NumberKind::Float, 2),
            Precision::I32 => (NumberKind::Int, 4),
            Precision::U32 => (NumberKind::Uint, 4),
            Precision::I64 => (NumberKind::Int, 8),
            Precision::F16 => (NumberKind::Float, 2),
            Precision::Bf16 | Precision::F32 => (NumberKind::Float, 4),
            Precision::F64 => (NumberKind::Float, 8),
            Precision::Uint4x32 => return None,
        };
        Dtype::new(kind, size)
    }

    /// The type string of little-endian data of this dtype: `<f4`, `|u1`, `|b1`.
    pub fn descr(self) -> String {
        let order = if self.size == 1 { '|' } else { '<' };
        format!("{order}{}{}", self.kind.code(), self.size)
    }

    /// Reads numpy's type string (`<f8`, `>i2`, `|u1`, `|b1`, …): the dtype and whether its
    /// data is big-endian.
    fn parse(descr: &str) -> Option<(Dtype, bool)> {
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
        Some((Dtype::new(kind, size.parse().ok()?)?, big_endian))
    }

    /// The value of one cell's bytes (exactly `size` of them) as stored: floats as floats,
    /// integers as integers (a u8 as its 64 bits, so that one from 2^63 on reads negative), a
    /// bool as 1 when its byte is nonzero.
    fn decode(self, bytes: &[u8], big_endian: bool) -> Value {
        let mut word = [0u8; 8];
        if big_endian {
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
            (NumberKind::Float, 2) => Value::Float(f16_value(bits as u16)),
            (NumberKind::Float, 4) => Value::Float(f64::from(f32::from_bits(bits as u32))),
            (NumberKind::Float, _) => Value::Float(f64::from_bits(bits)),
            (NumberKind::Int, _) => Value::Int(signed()),
            (NumberKind::Uint, _) => Value::Int(bits as i64),
            (NumberKind::Bool, _) => Value::Int(i64::from(bits != 0)),
        }
    }

    /// The number a cell holds, from its value as stored ([`Dtype::decode`]): the same, but a
    /// u8 from 2^63 on, which no `i64` holds, is the nearest float (as numpy's
    /// `astype(float64)` gives it) rather than its bits read as negative.
    fn number(self, stored: Value) -> Value {
        match stored {
            Value::Int(bits) if self.kind == NumberKind::Uint && bits < 0 => {
                Value::Float(bits as u64 as f64)
            }
            other => other,
        }
    }

    /// Writes `value` as little-endian data of this dtype: floats rounded to nearest even,
    /// integers wrapped to the width (floats truncated toward 0 first, saturating), bools 1
    /// where the value is not 0.
    fn encode(self, value: Value, sink: &mut dyn Write) -> io::Result<()> {
        match self.kind {
            NumberKind::Float => {
                let x = value.as_f64();
                match self.size {
                    2 => {
                        let rounded = Precision::F16.round(x);
                        let bits = rcannl_ir::precision::to_uint4x32(rounded, Precision::F16)[0];
                        sink.write_all(&(bits as u16).to_le_bytes())
                    }
                    4 => sink.write_all(&(x as f32).to_le_bytes()),
                    _ => sink.write_all(&x.to_le_bytes()),
                }
            }
            NumberKind::Bool => sink.write_all(&[u8::from(value.as_f64() != 0.0)]),
            // The low bytes of a value in the dtype's range are its two's complement.
            NumberKind::Int | NumberKind::Uint => {
                sink.write_all(&value.as_i64().to_le_bytes()[..self.size])
            }
        }
    }
}

/// The value of an IEEE half-precision number's bits, exactly.
fn f16_value(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f64::from(bits & 0x3ff);
    sign * match exponent {
        0 => fraction * 2f64.powi(-24),
        0x1f if fraction == 0.0 => f64::INFINITY,
        0x1f => f64::NAN,
        _ => (1024.0 + fraction) * 2f64.powi(exponent - 25),
    }
}

/// What a header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The dtype as written (`'<f8'`), for messages.
    pub descr: String,
    /// The dtype of the data.
    pub dtype: Dtype,
    /// Whether the data is big-endian.
    pub big_endian: bool,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The dims as written, not yet bounded.
    pub dims: Vec<u64>,
}

impl Header {
    /// The dims as a Python tuple's inside writes them: `4, 3` (`5,` for one).
    pub fn dims_text(&self) -> String {
        tuple_inside(self.dims.iter())
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
        let (dtype, big_endian) = Dtype::parse(descr).ok_or_else(|| {
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
            big_endian,
            fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
            dims: dims.ok_or_else(|| missing("shape"))?,
        })
    }
}

fn tuple_inside<T: ToString>(dims: impl ExactSizeIterator<Item = T>) -> String {
    let single = dims.len() == 1;
    let shown: Vec<String> = dims.map(|dim| dim.to_string()).collect();
    format!("{}{}", shown.join(", "), if single { "," } else { "" })
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

    /// A tuple (or list) of at most [`MAX_DIMS`] nonnegative integers, each at most `u64::MAX`.
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
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return Err(self.unexpected("a dim (a nonnegative integer)"));
            }
            let dim = rest[..digits]
                .parse()
                .map_err(|_| format!("the dim {} is too large", &rest[..digits]))?;
            if dims.len() == MAX_DIMS {
                return Err(format!(
                    "the shape has more than {MAX_DIMS} dims, numpy's limit (and this reader's)"
                ));
            }
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

/// A `.npy` file whose header has been read: its data is read by [`NpyReader::read_cells`],
/// once the caller has seen the header (and refused dims it does not want).
#[derive(Debug)]
pub struct NpyReader {
    path: PathBuf,
    header: Header,
    reader: BufReader<File>,
    /// How many bytes follow the header, when the file is a regular file: a bound on what is
    /// worth reserving.
    available: Option<u64>,
}

/// Opens the `.npy` file at `path` and reads its header.
pub fn open(path: &Path) -> Result<NpyReader, NpyError> {
    let file = File::open(path).map_err(|err| NpyError::io(path, err))?;
    let length = file
        .metadata()
        .ok()
        .filter(|meta| meta.is_file())
        .map(|meta| meta.len());
    let mut reader = BufReader::new(file);
    let (header, header_end) = read_header(&mut reader)
        .map_err(|message| NpyError::new(path, NpyErrorKind::Format, message))?;
    Ok(NpyReader {
        path: path.to_path_buf(),
        header,
        reader,
        available: length.map(|length| length.saturating_sub(header_end)),
    })
}

impl NpyReader {
    /// The file's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An error of an array larger than allowed.
    fn too_large(&self, message: String) -> NpyError {
        NpyError::new(&self.path, NpyErrorKind::Limit, message)
    }

    /// The dims and the cells of the array, in C order whatever the file's order, as numbers:
    /// floats as floats, integers as integers, bools as 0 or 1, and a u8 from 2^63 on (beyond
    /// `i64`) as the nearest float, as numpy's `astype(float64)` gives it. An array of more
    /// than `max_cells` cells is refused before anything is allocated, and so is data that is
    /// not exactly as long as the header says.
    pub fn read_cells(self, max_cells: usize) -> Result<(Vec<usize>, Vec<Value>), NpyError> {
        let dtype = self.header.dtype;
        let (dims, mut values) = self.read_cells_as_stored(max_cells)?;
        for value in &mut values {
            *value = dtype.number(*value);
        }
        Ok((dims, values))
    }

    /// [`NpyReader::read_cells`], but every integer as its 64 bits: a u8 from 2^63 on reads
    /// negative, for a caller that keeps the dtype beside the cells (and so reads every u8
    /// exactly).
    pub fn read_cells_as_stored(
        self,
        max_cells: usize,
    ) -> Result<(Vec<usize>, Vec<Value>), NpyError> {
        let shown = format!("({})", self.header.dims_text());
        let dims: Vec<usize> = (self.header.dims.iter())
            .map(|&dim| usize::try_from(dim).unwrap_or(usize::MAX))
            .collect();
        let cells = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&cells| cells <= max_cells)
            .ok_or_else(|| {
                self.too_large(format!("the shape {shown} has more than {max_cells} cells"))
            })?;
        let dtype = self.header.dtype;
        let needed = cells
            .checked_mul(dtype.size)
            .ok_or_else(|| self.too_large(format!("the shape {shown} is too large")))?;
        let mut data = Vec::new();
        data.try_reserve_exact(self.available.map_or(0, |a| (a as usize).min(needed)))
            .map_err(|_| self.too_large(format!("no memory for {needed} bytes of data")))?;
        let NpyReader {
            path,
            header,
            reader,
            ..
        } = self;
        reader
            .take(needed as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|err| NpyError::io(&path, err))?;
        if data.len() != needed {
            let found = if data.len() > needed {
                "more".to_owned()
            } else {
                data.len().to_string()
            };
            return Err(NpyError::new(
                &path,
                NpyErrorKind::Format,
                format!(
                    "the shape {shown} of '{}' needs {needed} bytes of data after the header; the \
                 file has {found}",
                    header.descr
                ),
            ));
        }
        let values: Vec<Value> = data
            .chunks_exact(dtype.size)
            .map(|bytes| dtype.decode(bytes, header.big_endian))
            .collect();
        let values = if header.fortran_order {
            fortran_to_c(&dims, &values)
        } else {
            values
        };
        Ok((dims, values))
    }
}

/// Reads the magic string, the version, the header's length and the header; returns the header
/// and the offset where the data starts.
fn read_header(reader: &mut impl Read) -> Result<(Header, u64), String> {
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
    let header = Header::parse(&text)?;
    Ok((header, (8 + size_field + length) as u64))
}

/// Fills `buffer` from `reader`, or says which part of the file is missing.
fn read_exactly(reader: &mut impl Read, buffer: &mut [u8], what: &str) -> Result<(), String> {
    reader.read_exact(buffer).map_err(|err| match err.kind() {
        io::ErrorKind::UnexpectedEof => format!("the file ends before {what}"),
        _ => err.to_string(),
    })
}

/// Column-major values reordered row-major. The dims' product is `values.len()`, so no stride
/// overflows.
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

/// The bytes before the data of an array of `dims` in C order of `dtype` (little-endian): the
/// magic string, the version (1.0, or 2.0 when the header is too long for a 16-bit length) and
/// the header, padded with spaces so that the data starts at a multiple of 64 bytes.
pub fn encode_header(dims: &[usize], dtype: Dtype) -> Vec<u8> {
    let mut text = String::new();
    write!(
        text,
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
        dtype.descr(),
        tuple_inside(dims.iter())
    )
    .expect("writing to a string");
    let long = text.len() + 1 > usize::from(u16::MAX) - 64;
    let preamble = if long { 12 } else { 10 };
    while !(preamble + text.len() + 1).is_multiple_of(64) {
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

/// Writes `cells` as little-endian data of `dtype` (see [`write()`] for the conversions).
pub fn encode_cells(sink: &mut dyn Write, dtype: Dtype, cells: &[Value]) -> io::Result<()> {
    cells.iter().try_for_each(|&cell| dtype.encode(cell, sink))
}

/// Writes `cells` (row-major) as a C-order array of `dims` and `dtype` to `path`, replacing the
/// file whole or not at all (only a regular file, or a link to one). Each cell is converted as
/// numpy's `astype` converts it: to floats rounded to nearest even, to integers truncated
/// toward 0 (saturating) and wrapped to the width, to bools true where not 0. An error when the
/// dims do not hold the cells, or are more than [`MAX_DIMS`] (which numpy would not read).
pub fn write(path: &Path, dims: &[usize], dtype: Dtype, cells: &[Value]) -> Result<(), NpyError> {
    let error = |kind: NpyErrorKind, message: String| NpyError::new(path, kind, message);
    if dims.len() > MAX_DIMS {
        return Err(error(
            NpyErrorKind::Limit,
            format!(
                "{} dims are more than the {MAX_DIMS} numpy reads",
                dims.len()
            ),
        ));
    }
    let held = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if held != Some(cells.len()) {
        return Err(error(
            NpyErrorKind::Shape,
            format!(
                "the shape ({}) does not hold {} cells",
                tuple_inside(dims.iter()),
                cells.len()
            ),
        ));
    }
    crate::files::replace_file(path, |sink| {
        sink.write_all(&encode_header(dims, dtype))?;
        encode_cells(sink, dtype, cells)
    })
    .map_err(|message| error(NpyErrorKind::Io, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dtype(descr: &str) -> (Dtype, bool) {
        Dtype::parse(descr).unwrap()
    }

    fn decode(descr: &str, bytes: &[u8]) -> Value {
        let (dtype, big_endian) = dtype(descr);
        dtype.decode(bytes, big_endian)
    }

    #[test]
    fn headers_numpy_writes_are_read() {
        let header =
            Header::parse(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }        \n")
                .unwrap();
        assert_eq!(header.dims, [3, 4]);
        assert!(!header.fortran_order);
        assert_eq!(header.dtype.size, 8);
        let header =
            Header::parse(b"{\"shape\": [5L], \"fortran_order\": True, \"descr\": \">i2\"}")
                .unwrap();
        assert_eq!(
            (header.dims.as_slice(), header.fortran_order),
            (&[5][..], true)
        );
        assert_eq!(header.dtype.decode(&[0xff, 0xfe], true), Value::Int(-2));
        let scalar = Header::parse(b"{'descr':'|b1','fortran_order':False,'shape':()}").unwrap();
        assert!(scalar.dims.is_empty());
    }

    #[test]
    fn long_doubles_are_refused_saying_why() {
        for (descr, long_double) in [("<f16", true), (">f12", true), ("<f4x", false)] {
            let text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (3,)}}");
            let message = Header::parse(text.as_bytes()).err().unwrap_or_default();
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
            assert!(
                Header::parse(text).is_err(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn dtypes_decode_in_either_byte_order() {
        let float = Value::Float;
        assert_eq!(decode("<f4", &1.5f32.to_le_bytes()), float(1.5));
        assert_eq!(decode(">f8", &(-0.25f64).to_be_bytes()), float(-0.25));
        assert_eq!(decode("<f2", &[0x00, 0xbe]), float(-1.5));
        assert_eq!(decode("<i8", &(-7i64).to_le_bytes()), Value::Int(-7));
        assert_eq!(
            decode(">u4", &4_000_000_000u32.to_be_bytes()),
            Value::Int(4_000_000_000)
        );
        assert_eq!(decode("<u8", &u64::MAX.to_le_bytes()), Value::Int(-1));
        let (uint64, _) = dtype("<u8");
        assert_eq!(
            uint64.number(Value::Int(-1)),
            Value::Float(1.8446744073709552e19)
        );
        assert_eq!(uint64.number(Value::Int(i64::MAX)), Value::Int(i64::MAX));
        let (int64, _) = dtype("<i8");
        assert_eq!(int64.number(Value::Int(-1)), Value::Int(-1));
        assert_eq!(decode("|i1", &[0x80]), Value::Int(-128));
        assert_eq!(decode("|b1", &[2]), Value::Int(1));
        assert_eq!(Dtype::parse("<f1"), None);
        assert_eq!(Dtype::parse("<"), None);
    }

    #[test]
    fn half_precision_bits_decode_exactly() {
        // The smallest subnormal, the largest subnormal, 1, the largest finite, infinity.
        for (bits, value) in [
            (0x0001, 2f64.powi(-24)),
            (0x03ff, 1023.0 * 2f64.powi(-24)),
            (0x3c00, 1.0),
            (0x7bff, 65504.0),
            (0xfc00, f64::NEG_INFINITY),
        ] {
            assert_eq!(f16_value(bits), value, "{bits:#x}");
        }
        assert!(f16_value(0x7e00).is_nan());
    }

    #[test]
    fn cells_encode_as_their_dtype() {
        let mut bytes = Vec::new();
        let int16 = Dtype::new(NumberKind::Int, 2).unwrap();
        let float16 = Dtype::new(NumberKind::Float, 2).unwrap();
        encode_cells(&mut bytes, int16, &[Value::Int(-2)]).unwrap();
        encode_cells(&mut bytes, float16, &[Value::Float(1.5)]).unwrap();
        assert_eq!(bytes, [0xfe, 0xff, 0x00, 0x3e]);
        // Every dtype reads back what it wrote.
        for (kind, sizes) in [
            (NumberKind::Float, &[2, 4, 8][..]),
            (NumberKind::Int, &[1, 2, 4, 8]),
            (NumberKind::Uint, &[1, 2, 4, 8]),
            (NumberKind::Bool, &[1]),
        ] {
            for &size in sizes {
                let dtype = Dtype::new(kind, size).unwrap();
                let value = match kind {
                    NumberKind::Float => Value::Float(-2.5),
                    NumberKind::Int => Value::Int(-3),
                    NumberKind::Uint | NumberKind::Bool => Value::Int(1),
                };
                let mut bytes = Vec::new();
                dtype.encode(value, &mut bytes).unwrap();
                assert_eq!(bytes.len(), size);
                assert_eq!(dtype.decode(&bytes, false), value, "{}", dtype.descr());
            }
        }
    }

    #[test]
    fn written_headers_align_the_data() {
        let float64 = Dtype::new(NumberKind::Float, 8).unwrap();
        for dims in [&[][..], &[5], &[4, 3, 2]] {
            let bytes = encode_header(dims, float64);
            assert_eq!(bytes.len() % 64, 0);
            let header = Header::parse(&bytes[10..]).unwrap();
            assert_eq!(
                header.dims,
                dims.iter().map(|&d| d as u64).collect::<Vec<_>>()
            );
        }
    }

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
    fn errors_say_what_kind_of_problem_the_file_has() {
        use std::error::Error as _;
        let folder = std::env::temp_dir().join(format!("rcannl-npy-kinds-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let missing = open(&folder.join("missing.npy")).err().unwrap();
        assert_eq!(missing.kind, NpyErrorKind::Io);
        assert!(
            missing.source().is_some(),
            "the file system's error is kept"
        );
        let text = folder.join("text.npy");
        std::fs::write(&text, "not an array").unwrap();
        assert_eq!(open(&text).err().unwrap().kind, NpyErrorKind::Format);
        let cells = [Value::Float(1.0)];
        let written = write(
            &text,
            &[2],
            Dtype::of_precision(Precision::F32).unwrap(),
            &cells,
        );
        assert_eq!(written.unwrap_err().kind, NpyErrorKind::Shape);
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
