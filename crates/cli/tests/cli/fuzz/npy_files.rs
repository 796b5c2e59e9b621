//! `.npy` files for the fuzzer, written here independently of the command's writer: valid ones in
//! every dtype, byte order and axis order the command reads (with the values they hold), and
//! hostile ones (truncated, extended, bit-flipped, with huge or overflowing dims, odd dtypes,
//! lying lengths and garbage headers).

use super::rng::Rng;

/// A dtype the command reads: its type string's kind and size.
#[derive(Debug, Clone, Copy)]
struct Dtype {
    kind: char,
    size: usize,
}

const DTYPES: &[Dtype] = &[
    Dtype { kind: 'f', size: 8 },
    Dtype { kind: 'f', size: 4 },
    Dtype { kind: 'f', size: 2 },
    Dtype { kind: 'i', size: 1 },
    Dtype { kind: 'i', size: 2 },
    Dtype { kind: 'i', size: 4 },
    Dtype { kind: 'i', size: 8 },
    Dtype { kind: 'u', size: 1 },
    Dtype { kind: 'u', size: 2 },
    Dtype { kind: 'u', size: 4 },
    Dtype { kind: 'u', size: 8 },
    Dtype { kind: 'b', size: 1 },
];

/// A valid file: its bytes, its dims and its values in C order. Where its data starts, and how to
/// read a cell back, for the mutations that keep the file readable.
pub struct NpyFile {
    pub bytes: Vec<u8>,
    pub dims: Vec<usize>,
    pub values: Vec<f64>,
    /// numpy's name for the dtype: what the command computes a copy of the file in.
    pub dtype_name: &'static str,
    data_start: usize,
    dtype: Dtype,
    big_endian: bool,
    fortran: bool,
}

/// The header text's dict.
fn dict(descr: &str, fortran: bool, dims: &str) -> String {
    let order = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': ({dims}), }}")
}

/// `4, 3` or `5,` or nothing, as a tuple's inside.
fn tuple_inside(dims: &[String]) -> String {
    match dims {
        [single] => format!("{single},"),
        _ => dims.join(", "),
    }
}

/// The magic string, version 1.0 and `dict` padded to a multiple of 64 bytes.
fn preamble(dict: &str) -> Vec<u8> {
    let mut text = dict.as_bytes().to_vec();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((text.len() as u16).to_le_bytes());
    bytes.extend(text);
    bytes
}

impl Dtype {
    /// numpy's name for the dtype.
    fn name(self) -> &'static str {
        match (self.kind, self.size) {
            ('f', 8) => "float64",
            ('f', 4) => "float32",
            ('f', _) => "float16",
            ('i', 1) => "int8",
            ('i', 2) => "int16",
            ('i', 4) => "int32",
            ('i', _) => "int64",
            ('u', 1) => "uint8",
            ('u', 2) => "uint16",
            ('u', 4) => "uint32",
            ('u', _) => "uint64",
            _ => "bool",
        }
    }

    /// A value this dtype holds exactly.
    fn value(self, rng: &mut Rng) -> f64 {
        match (self.kind, self.size) {
            ('b', _) => rng.below(2) as f64,
            ('u', _) => rng.below(200) as f64,
            ('i', _) => rng.int(-100, 100) as f64,
            _ => rng.int(-40, 40) as f64 / 4.0,
        }
    }

    fn encode(self, value: f64, big_endian: bool) -> Vec<u8> {
        let mut bytes = match (self.kind, self.size) {
            ('f', 8) => value.to_le_bytes().to_vec(),
            ('f', 4) => (value as f32).to_le_bytes().to_vec(),
            ('f', _) => half::f16::from_f64(value).to_le_bytes().to_vec(),
            ('u', size) => (value as u64).to_le_bytes()[..size].to_vec(),
            (_, size) => (value as i64).to_le_bytes()[..size].to_vec(),
        };
        if big_endian {
            bytes.reverse();
        }
        bytes
    }

    /// The value of one cell's bytes, as the command must read it.
    fn decode(self, bytes: &[u8], big_endian: bool) -> f64 {
        let mut little = bytes.to_vec();
        if big_endian {
            little.reverse();
        }
        let mut word = [0u8; 8];
        word[..self.size].copy_from_slice(&little);
        let bits = u64::from_le_bytes(word);
        let negative = little[self.size - 1] & 0x80 != 0;
        match (self.kind, self.size) {
            ('f', 8) => f64::from_bits(bits),
            ('f', 4) => f64::from(f32::from_bits(bits as u32)),
            ('f', _) => half::f16::from_bits(bits as u16).to_f64(),
            ('u', _) => bits as f64,
            ('b', _) => f64::from(u8::from(bits != 0)),
            (_, 8) => bits as i64 as f64,
            (_, size) if negative => (bits as i64 - (1i64 << (8 * size))) as f64,
            _ => bits as f64,
        }
    }
}

/// A valid file of up to four axes of sizes 1 to 4, in a random dtype, byte order and axis order.
pub fn valid(rng: &mut Rng) -> NpyFile {
    let dims: Vec<usize> = (0..rng.below(5)).map(|_| rng.range(1, 4)).collect();
    with_dims(rng, dims)
}

/// A valid file of these dims holding random values, in a random dtype, byte order and axis
/// order.
pub fn with_dims(rng: &mut Rng, dims: Vec<usize>) -> NpyFile {
    let dtype = *rng.pick(DTYPES);
    let big_endian = dtype.size > 1 && rng.one_in(3);
    let fortran = rng.one_in(3);
    let cells: usize = dims.iter().product();
    let values: Vec<f64> = (0..cells).map(|_| dtype.value(rng)).collect();
    let order = match (dtype.size, big_endian) {
        (1, _) => '|',
        (_, true) => '>',
        (_, false) => '<',
    };
    let descr = format!("{order}{}{}", dtype.kind, dtype.size);
    let shown: Vec<String> = dims.iter().map(usize::to_string).collect();
    let mut bytes = preamble(&dict(&descr, fortran, &tuple_inside(&shown)));
    let data_start = bytes.len();
    for cell in file_order(&dims, fortran) {
        bytes.extend(dtype.encode(values[cell], big_endian));
    }
    NpyFile {
        bytes,
        dims,
        values,
        dtype_name: dtype.name(),
        data_start,
        dtype,
        big_endian,
        fortran,
    }
}

/// The C-order cells in the order the file stores them.
fn file_order(dims: &[usize], fortran: bool) -> Vec<usize> {
    let cells: usize = dims.iter().product();
    if !fortran {
        return (0..cells).collect();
    }
    // Column-major: the first axis moves fastest; each cell's C-order position from its
    // coordinates.
    (0..cells)
        .map(|file_position| {
            let mut rest = file_position;
            let mut coordinates = vec![0; dims.len()];
            for (coordinate, dim) in coordinates.iter_mut().zip(dims) {
                *coordinate = rest % dim;
                rest /= dim;
            }
            coordinates
                .iter()
                .zip(dims)
                .fold(0, |flat, (coordinate, dim)| flat * dim + coordinate)
        })
        .collect()
}

/// What a hostile file must do.
pub enum Hostility {
    /// Be refused.
    Refused,
    /// Be read as these values (C order), of the file's dims.
    Reads(Vec<f64>),
    /// Anything but a crash.
    Unknown,
}

/// A file made hostile in one of several ways, with what the command must make of it, and the
/// name of the dtype it is read in when it is read.
pub fn hostile(rng: &mut Rng) -> (Vec<u8>, Vec<usize>, Hostility, &'static str) {
    let file = valid(rng);
    let mut bytes = file.bytes.clone();
    let dims = file.dims.clone();
    let hostility = match rng.below(10) {
        0 => {
            let cut = rng.below(bytes.len());
            bytes.truncate(cut);
            Hostility::Refused
        }
        1 => {
            bytes.extend((0..rng.range(1, 9)).map(|_| rng.next() as u8));
            Hostility::Refused
        }
        2 if bytes.len() > file.data_start => {
            // A bit of the data: still a file of numbers, whose flipped cell reads as flipped.
            let at = rng.range(file.data_start, bytes.len() - 1);
            bytes[at] ^= 1 << rng.below(8);
            let size = file.dtype.size;
            let cells = file_order(&dims, file.fortran);
            let mut values = file.values.clone();
            for (slot, &cell) in cells.iter().enumerate() {
                let start = file.data_start + slot * size;
                values[cell] = file
                    .dtype
                    .decode(&bytes[start..start + size], file.big_endian);
            }
            Hostility::Reads(values)
        }
        3 => {
            let at = rng.below(file.data_start);
            bytes[at] ^= 1 << rng.below(8);
            Hostility::Unknown
        }
        4 => {
            // Dims whose nonzero product is beyond every limit, possibly overflowing 64 bits.
            let huge: &[&str] = &[
                "4294967296, 4294967296",
                "18446744073709551615,",
                "67108865,",
                "0, 4294967296, 4294967296",
                "8192, 8193",
                "3037000500, 3037000500, 2",
            ];
            let text = dict("<f8", rng.one_in(2), rng.pick::<&str>(huge));
            bytes = preamble(&text);
            bytes.extend((0..rng.below(64)).map(|_| rng.next() as u8));
            Hostility::Refused
        }
        5 => {
            let odd: &[&str] = &[
                "<f1", "<c16", "|O", "<U3", "<f16", "|V8", "<M8[s]", "i", "<f", "", "<b2", "<i3",
                "f8<", "<F8",
            ];
            let shown: Vec<String> = dims.iter().map(usize::to_string).collect();
            bytes = preamble(&dict(rng.pick::<&str>(odd), false, &tuple_inside(&shown)));
            bytes.extend(&file.bytes[file.data_start..]);
            Hostility::Refused
        }
        6 => {
            // A lying header length: short files claiming long headers, and the reverse.
            let claim = match rng.below(3) {
                0 => u32::MAX,
                1 => rng.next() as u32,
                _ => rng.below(200) as u32,
            };
            bytes[6] = rng.range(1, 3) as u8;
            bytes.truncate(8);
            if bytes[6] == 1 {
                bytes.extend((claim as u16).to_le_bytes());
            } else {
                bytes.extend(claim.to_le_bytes());
            }
            bytes.extend(&file.bytes[10..]);
            Hostility::Unknown
        }
        7 => {
            let garbage = [
                "(".repeat(rng.range(1, 20_000)),
                format!(
                    "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}",
                    "[".repeat(5000)
                ),
                "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }".to_owned(),
                "{'descr': '<f8', 'fortran_order': 1, 'shape': (1,), }".to_owned(),
                "{'descr': '<f8', 'shape': (1,), }".to_owned(),
                "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'extra': 0}".to_owned(),
                "{'descr': '<f8', 'fortran_order': False, 'shape': 1}".to_owned(),
                "{'descr': '<f8', 'fortran_order': False, 'shape': (1.5,)}".to_owned(),
                "{'descr': \"<f8\\\"\", 'fortran_order': False, 'shape': (1,)}".to_owned(),
                String::from_utf8_lossy(
                    &(0..rng.below(300))
                        .map(|_| rng.next() as u8)
                        .collect::<Vec<_>>(),
                )
                .into_owned(),
            ];
            bytes = preamble(rng.pick(&garbage).as_str());
            bytes.extend([0; 8]);
            Hostility::Unknown
        }
        8 => {
            bytes[6] = rng.next() as u8;
            bytes[7] = rng.next() as u8;
            Hostility::Unknown
        }
        _ => Hostility::Reads(file.values.clone()),
    };
    (bytes, dims, hostility, file.dtype_name)
}
