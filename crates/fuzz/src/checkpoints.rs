//! Corrupted checkpoints, each loaded into a fresh context: every truncation and every one-bit
//! flip of a small valid checkpoint, and random corruptions made from a seed (two to eight
//! flipped bits, one to eight bytes set at random, a range spliced in from the file itself or
//! from a second checkpoint of the same tensors). A load must either refuse the file, leaving the
//! context as it was, or load exactly the saved cells (bit for bit); it must never panic (a
//! panic is caught and counted).
//!
//! The header checksum refuses nearly every corruption at once, so that the checks behind it
//! (the JSON, offsets, tensors' checksums, dtypes, dims and rows) are fuzzed too, every one-bit
//! flip of the header is also loaded with the header checksum recomputed, and so is half of the
//! random corruptions: a file as a careless writer would make it.

use std::fmt;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use rcannl_backends::Interpreter;
use rcannl_ir::{Precision, Value};
use rcannl_nn::checkpoint::{load, save_allowing_non_finite};
use rcannl_tensor::{Context, Graph, Tensor, TensorError};

use crate::rng::{Draw, Rng};

/// What loading one corrupted file gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `Ok`, with exactly the saved cells.
    LoadedEqual,
    /// An error, with the context as it was.
    Refused,
    /// `Ok` with cells other than the saved ones.
    LoadedWrong,
    /// An error after the context was changed.
    ChangedOnError,
    /// A panic, with its message.
    Panicked(String),
}

/// How many loads gave each outcome, with the first few cases that failed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Loads that gave exactly the saved cells.
    pub loaded_equal: u64,
    /// Loads that refused the file and left the context as it was.
    pub refused: u64,
    /// Loads that gave other cells.
    pub loaded_wrong: u64,
    /// Loads that failed after changing the context.
    pub changed_on_error: u64,
    /// Loads that panicked.
    pub panics: u64,
    /// The first failing cases: what was done to the file, and what the load gave.
    pub failures: Vec<String>,
}

/// How many failing cases a tally describes.
const DESCRIBED: usize = 10;

impl Tally {
    /// Counts the outcome of the case `case` describes.
    pub fn count(&mut self, case: &str, outcome: Outcome) {
        match &outcome {
            Outcome::LoadedEqual => self.loaded_equal += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::LoadedWrong => self.loaded_wrong += 1,
            Outcome::ChangedOnError => self.changed_on_error += 1,
            Outcome::Panicked(_) => self.panics += 1,
        }
        if !matches!(outcome, Outcome::LoadedEqual | Outcome::Refused)
            && self.failures.len() < DESCRIBED
        {
            self.failures.push(format!("{case}: {outcome:?}"));
        }
    }

    /// Every load counted.
    pub fn cases(&self) -> u64 {
        self.loaded_equal + self.refused + self.failed()
    }

    /// The loads that neither refused the file cleanly nor loaded it exactly.
    pub fn failed(&self) -> u64 {
        self.loaded_wrong + self.changed_on_error + self.panics
    }

    /// Adds `other`'s counts (and failures, up to the limit) to these.
    pub fn add(&mut self, other: Tally) {
        self.loaded_equal += other.loaded_equal;
        self.refused += other.refused;
        self.loaded_wrong += other.loaded_wrong;
        self.changed_on_error += other.changed_on_error;
        self.panics += other.panics;
        let room = DESCRIBED.saturating_sub(self.failures.len());
        self.failures.extend(other.failures.into_iter().take(room));
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} loads: {} loaded equal, {} refused, {} panics, {} loaded wrong values, {} \
             changed the context and failed",
            self.cases(),
            self.loaded_equal,
            self.refused,
            self.panics,
            self.loaded_wrong,
            self.changed_on_error
        )
    }
}

/// How a checkpoint's header starts, up to the header checksum's 16 hex digits (see
/// `rcannl_nn::checkpoint`).
const HEADER_START: &[u8] = br#"{"__metadata__":{"header checksum":"fnv1a64:"#;

/// The bytes of a checkpoint holding the header checksum's digits.
const HEADER_DIGITS: std::ops::Range<usize> = 8 + HEADER_START.len()..8 + HEADER_START.len() + 16;

/// The header's length `bytes` records, when the header lies within them and has room for the
/// header checksum.
fn header_length(bytes: &[u8]) -> Option<usize> {
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    (n > HEADER_DIGITS.end && n <= bytes.len() - 8).then_some(n)
}

/// Records in `bytes` the header checksum of their header, as the checkpoint format defines it
/// (FNV-1a of the first `8 + n` bytes without the digits that record it), when the header
/// starts as a checkpoint's does; else leaves them.
fn reseal(bytes: &mut [u8]) {
    let Some(n) = header_length(bytes) else {
        return;
    };
    if !bytes[8..].starts_with(HEADER_START) {
        return;
    }
    let hash = bytes[..HEADER_DIGITS.start]
        .iter()
        .chain(&bytes[HEADER_DIGITS.end..8 + n])
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    bytes[HEADER_DIGITS].copy_from_slice(format!("{hash:016x}").as_bytes());
}

/// The bits of a cell, whatever its kind (so that NaN equals itself and -0 differs from 0).
fn bits(cell: &Value) -> (u8, u128) {
    match *cell {
        Value::Float(x) => (0, u128::from(x.to_bits())),
        Value::Int(i) => (1, u128::from(i as u64)),
        Value::Word(w) => (2, w.iter().fold(0, |acc, &x| acc << 32 | u128::from(x))),
    }
}

/// The cells of `tensors` in `ctx`, as bits.
fn cells(ctx: &Context, tensors: &[Tensor]) -> Result<Vec<Vec<(u8, u128)>>, TensorError> {
    tensors
        .iter()
        .map(|t| Ok(ctx.cells(t)?.iter().map(bits).collect()))
        .collect()
}

/// One tensor of the small checkpoint: label, shape, precision and values.
type Spec = (&'static str, &'static str, Precision, &'static [f64]);

/// The small checkpoint's tensors: every precision a checkpoint stores, values that are awkward
/// for each (a negative zero, a subnormal, an infinity, the extremes of the integers).
const SPECS: &[Spec] = &[
    (
        "w",
        "3->2",
        Precision::F32,
        &[1.5, -0.0, 1e-40, f64::INFINITY, -2.25, 3.0e38],
    ),
    ("b", "2", Precision::F16, &[0.333, -65504.0]),
    ("m", "2", Precision::Bf16, &[-1.0e30, 7.5]),
    (
        "d",
        "2|->1",
        Precision::F64,
        &[std::f64::consts::PI, -1e-310],
    ),
    ("c", "3", Precision::U8, &[0.0, 255.0, 128.0]),
    ("s", "2", Precision::I8, &[-128.0, 127.0]),
    ("i", "2", Precision::I32, &[-2147483648.0, 65537.0]),
    ("u", "2", Precision::U32, &[4294967295.0, 3.0]),
];

/// A small valid checkpoint and what a load of it must give, with a place to write corrupted
/// copies of it.
#[derive(Debug)]
pub struct Subject {
    graph: Graph,
    tensors: Vec<Tensor>,
    /// The saved cells.
    saved: Vec<Vec<(u8, u128)>>,
    /// The cells of a fresh context, which a refused load leaves.
    blank: Vec<Vec<(u8, u128)>>,
    /// The checkpoint's bytes.
    bytes: Vec<u8>,
    /// A checkpoint of the same tensors with other values: a source of splices.
    other: Vec<u8>,
    /// Where each corrupted copy is written to be loaded.
    path: PathBuf,
}

/// A context of `graph` on the interpreter (loading compiles nothing), every tensor holding
/// zeros, which a refused load must leave.
fn fresh(graph: &Graph, tensors: &[Tensor]) -> Result<Context, TensorError> {
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    for t in tensors {
        let cells: usize = ctx.dims(t)?.iter().product();
        ctx.set_values(t, &vec![0.0; cells])?;
    }
    Ok(ctx)
}

impl Subject {
    /// The checkpoint of a tensor of every precision a checkpoint stores, with awkward values,
    /// saved in `dir` (which must exist), with a second one of other values.
    pub fn new(dir: &Path) -> Result<Subject, TensorError> {
        let graph = Graph::new();
        let mut tensors: Vec<Tensor> = SPECS
            .iter()
            .map(|(label, shape, precision, _)| {
                graph.data(label).shape(shape).precision(*precision).build()
            })
            .collect();
        let wide = graph.data("n").shape("2").precision(Precision::I64).build();
        let word = graph
            .data("counter")
            .shape("1")
            .precision(Precision::Uint4x32)
            .build();
        tensors.extend([wide.clone(), word.clone()]);
        let mut ctx = fresh(&graph, &tensors)?;
        let blank = cells(&ctx, &tensors)?;
        let write = |ctx: &mut Context, scale: f64| -> Result<(), TensorError> {
            for ((_, _, _, values), t) in SPECS.iter().zip(&tensors) {
                let values: Vec<f64> = values.iter().map(|v| v * scale).collect();
                ctx.set_values(t, &values)?;
            }
            ctx.set_cells(
                &wide,
                &[Value::Int(i64::MIN + 3), Value::Int((1 << 53) + 1)],
            )?;
            ctx.set_cells(
                &word,
                &[Value::Word([0xdead_beef, 1, u32::MAX, scale as u32])],
            )
        };
        let all: Vec<&Tensor> = tensors.iter().collect();
        write(&mut ctx, 1.0)?;
        let path = dir.join("subject.safetensors");
        save_allowing_non_finite(&path, &mut ctx, &all)?;
        let saved = cells(&ctx, &tensors)?;
        let io = |e: std::io::Error| TensorError::new(format!("{}: {e}", path.display()));
        let bytes = fs::read(&path).map_err(io)?;
        write(&mut ctx, -0.5)?;
        save_allowing_non_finite(&path, &mut ctx, &all)?;
        let other = fs::read(&path).map_err(io)?;
        Ok(Subject {
            graph,
            tensors,
            saved,
            blank,
            bytes,
            other,
            path: dir.join("corrupted.safetensors"),
        })
    }

    /// The valid checkpoint's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Writes `corrupted` and loads it into a fresh context (an error only when that cannot be
    /// done: the file cannot be written, or a context made).
    pub fn load(&self, corrupted: &[u8]) -> Result<Outcome, TensorError> {
        fs::write(&self.path, corrupted)
            .map_err(|e| TensorError::new(format!("{}: {e}", self.path.display())))?;
        let mut ctx = fresh(&self.graph, &self.tensors)?;
        let tensors: Vec<&Tensor> = self.tensors.iter().collect();
        let loaded = catch_unwind(AssertUnwindSafe(|| load(&self.path, &mut ctx, &tensors)));
        let after = cells(&ctx, &self.tensors)?;
        Ok(match loaded {
            Err(panic) => Outcome::Panicked(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default(),
            ),
            Ok(Ok(())) if after == self.saved => Outcome::LoadedEqual,
            Ok(Ok(())) => Outcome::LoadedWrong,
            Ok(Err(_)) if after == self.blank => Outcome::Refused,
            Ok(Err(_)) => Outcome::ChangedOnError,
        })
    }

    /// Loads every truncation of the checkpoint (empty included).
    pub fn truncations(&self) -> Result<Tally, TensorError> {
        let mut tally = Tally::default();
        for length in 0..self.bytes.len() {
            let outcome = self.load(&self.bytes[..length])?;
            tally.count(&format!("truncated to {length} bytes"), outcome);
        }
        Ok(tally)
    }

    /// Loads the checkpoint with each of its bits flipped, one at a time.
    pub fn one_bit_flips(&self) -> Result<Tally, TensorError> {
        let mut tally = Tally::default();
        let mut copy = self.bytes.clone();
        for byte in 0..copy.len() {
            for bit in 0..8 {
                copy[byte] ^= 1 << bit;
                let outcome = self.load(&copy)?;
                copy[byte] ^= 1 << bit;
                tally.count(&format!("bit {bit} of byte {byte} flipped"), outcome);
            }
        }
        Ok(tally)
    }

    /// Loads the checkpoint with each bit of its header flipped, one at a time, and the header
    /// checksum recomputed (the digits recording it excepted).
    pub fn resealed_header_flips(&self) -> Result<Tally, TensorError> {
        let mut tally = Tally::default();
        let n = header_length(&self.bytes).unwrap_or_default();
        for byte in (8..8 + n).filter(|b| !HEADER_DIGITS.contains(b)) {
            for bit in 0..8 {
                let mut copy = self.bytes.clone();
                copy[byte] ^= 1 << bit;
                reseal(&mut copy);
                let outcome = self.load(&copy)?;
                let case = format!("bit {bit} of byte {byte} flipped, header checksum recomputed");
                tally.count(&case, outcome);
            }
        }
        Ok(tally)
    }

    /// The corruption made from `seed`: the corrupted bytes and what was done.
    pub fn corruption(&self, seed: u64) -> (Vec<u8>, String) {
        let mut rng = Rng::new(seed);
        let (mut bytes, mut case) = self.damage(seed, &mut rng);
        if rng.one_in(2) {
            reseal(&mut bytes);
            case += ", header checksum recomputed";
        }
        (bytes, case)
    }

    /// The damage `rng` draws: the damaged bytes and what was done.
    fn damage(&self, seed: u64, rng: &mut Rng) -> (Vec<u8>, String) {
        let mut bytes = self.bytes.clone();
        let len = bytes.len();
        match rng.below(3) {
            0 => {
                let flips: Vec<(usize, usize)> = (0..rng.between(2, 8))
                    .map(|_| (rng.below(len), rng.below(8)))
                    .collect();
                for &(byte, bit) in &flips {
                    bytes[byte] ^= 1 << bit;
                }
                (
                    bytes,
                    format!("seed {seed}: bits (byte, bit) {flips:?} flipped"),
                )
            }
            1 => {
                let sets: Vec<(usize, u8)> = (0..rng.between(1, 8))
                    .map(|_| (rng.below(len), rng.below(256) as u8))
                    .collect();
                for &(at, value) in &sets {
                    bytes[at] = value;
                }
                (
                    bytes,
                    format!("seed {seed}: bytes (at, value) {sets:?} set"),
                )
            }
            _ => {
                let (source, name) = if rng.one_in(2) {
                    (&self.bytes, "itself")
                } else {
                    (&self.other, "the other checkpoint")
                };
                let from = rng.below(source.len());
                let taken = rng.between(0, 64).min(source.len() - from);
                let at = rng.below(len);
                let replaced = rng.between(0, 64).min(len - at);
                bytes.splice(
                    at..at + replaced,
                    source[from..from + taken].iter().copied(),
                );
                (
                    bytes,
                    format!(
                        "seed {seed}: bytes {at}..{} replaced by bytes {from}..{} of {name}",
                        at + replaced,
                        from + taken
                    ),
                )
            }
        }
    }

    /// Loads the corruptions made from `seeds`.
    pub fn random(&self, seeds: std::ops::Range<u64>) -> Result<Tally, TensorError> {
        let mut tally = Tally::default();
        for seed in seeds {
            let (bytes, case) = self.corruption(seed);
            let outcome = self.load(&bytes)?;
            tally.count(&case, outcome);
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_valid_checkpoint_loads_equal_and_corruptions_differ_from_it() {
        let dir = std::env::temp_dir().join(format!("rcannl-fuzz-subject-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("a folder");
        let subject = Subject::new(&dir).expect("the subject");
        assert_eq!(
            subject.load(subject.bytes()).expect("a load"),
            Outcome::LoadedEqual
        );
        assert_ne!(subject.saved, subject.blank);
        // Every kind of corruption is made, and makes the same bytes from the same seed.
        let cases: Vec<String> = (0..60).map(|seed| subject.corruption(seed).1).collect();
        for kind in ["flipped", "set", "replaced"] {
            assert!(cases.iter().any(|c| c.contains(kind)), "{kind}");
        }
        assert!(cases.iter().any(|c| c.contains("recomputed")));
        assert_eq!(subject.corruption(7), subject.corruption(7));
        // Resealing a valid checkpoint changes nothing: the fuzzer computes the header checksum
        // as checkpoints do.
        let mut resealed = subject.bytes().to_vec();
        reseal(&mut resealed);
        assert_eq!(resealed, subject.bytes());
        fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_tally_counts_outcomes_and_describes_failures() {
        let mut tally = Tally::default();
        tally.count("a", Outcome::LoadedEqual);
        tally.count("b", Outcome::Refused);
        tally.count("c", Outcome::Panicked("boom".into()));
        tally.count("d", Outcome::LoadedWrong);
        assert_eq!((tally.cases(), tally.failed()), (4, 2));
        assert_eq!(tally.failures, ["c: Panicked(\"boom\")", "d: LoadedWrong"]);
        assert_eq!(
            tally.to_string(),
            "4 loads: 1 loaded equal, 1 refused, 1 panics, 1 loaded wrong values, 0 changed \
             the context and failed"
        );
    }
}
