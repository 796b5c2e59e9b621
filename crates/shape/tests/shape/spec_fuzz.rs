//! Deterministic fuzzing of `parse_einsum`, `parse_shape_spec` and `parse_shape_literal`: random
//! strings over the notation's alphabet and mutations of valid specs must never panic, must report
//! errors at a column inside the text, and every successful parse must print to a canonical text
//! that parses back to the same tree.

use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe};

use rcannl_shape::spec::{
    CaptureKind, EinsumSpec, SpecError, parse_einsum, parse_shape_literal, parse_shape_spec,
};

/// Strings per test (each test feeds every string to all three parsers); `SPEC_FUZZ_CASES` in the
/// environment overrides it for a longer run.
fn cases() -> usize {
    std::env::var("SPEC_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// SplitMix64: tiny, fast, and good enough to spread inputs around.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const PUNCTUATION: &[char] = &[
    '_', ',', ';', '|', '-', '>', '=', '<', '+', '*', '^', '&', '.', ' ',
];
const FEW_LETTERS: &[char] = &['i', 'j', 'k', 'a', 'b', 'o', 'v', 's'];
const ODD: &[char] = &[
    'é', '∘', '→', '\0', '\t', '\n', '𝔸', 'ß', '@', '?', '(', '\u{301}',
];

/// A character biased towards the notation: punctuation and a few letters dominate.
fn notation_char(rng: &mut Rng) -> char {
    match rng.below(100) {
        0..40 => *rng.pick(PUNCTUATION),
        40..60 => *rng.pick(FEW_LETTERS),
        60..72 => (b'a' + rng.below(26) as u8) as char,
        72..77 => (b'A' + rng.below(26) as u8) as char,
        77..96 => (b'0' + rng.below(10) as u8) as char,
        _ => *rng.pick(ODD),
    }
}

/// Up to 24 pieces, each a biased character or (one time in eight) a whole token of the notation,
/// so that random text forms a valid spec now and then.
fn random_string(rng: &mut Rng) -> String {
    let mut text = String::new();
    for _ in 0..rng.range(0, 24) {
        if rng.below(8) == 0 {
            let snippet: &&str = rng.pick(SNIPPETS);
            text.push_str(snippet);
        } else {
            text.push(notation_char(rng));
        }
    }
    text
}

/// Valid texts for at least one of the parsers; mutations of them reach deep into the grammar.
const CORPUS: &[&str] = &[
    "ijk",
    "b|i->o",
    "a, b, c",
    "a, b,",
    "batch|input->output,",
    "batch | input -> output",
    "...|...->...",
    "...b|...i->...o",
    "ij...->0",
    "a..v..b",
    "i, ..v.., j",
    "..v,..",
    "a_b",
    "hw => hw_",
    "i0j",
    "...|1->...",
    "2..v..|...",
    "i12j",
    "b00c",
    "input -> 2*output",
    "regular, 3*strided",
    "... | ... -> ..., 2*i + 1",
    "2*oh<+wh, 2*ow<+ww",
    "2*o=+3*k",
    "oh=+wh, ow=+ww",
    "a+bc",
    "3*output+1*kernel,",
    "2*i<+1+3*k",
    "i=+1+k",
    "s*i<+d*k",
    "a^b^c, d",
    "a, b ^ c",
    "ij=>ji",
    "ij;jk=>ik",
    "ij;jk;km=>im",
    "p;a;b=>out",
    "x, ...; y, ...; z, ... => x^y^z, ...",
    "3^a => a",
    "a => a^3",
    "3^a^5 => a",
    "..v..|...ijk => ..v..kji",
    "a;=>b",
    "|->",
    "2|3->4",
    "2,3|->4@rgb",
    " 7 @ default , 1 |",
    "1*,3|1*->2,1*",
];

const SNIPPETS: &[&str] = &[
    "...",
    "..",
    "..v..",
    "..ab..",
    "->",
    "=>",
    "=+",
    "<+",
    "+1+",
    "2*",
    "s*",
    "^",
    "^3",
    ",",
    ";",
    "|",
    "_",
    "@rgb",
    "1*",
    "0",
    "99999999999999999999999",
];

/// One to three edits of a corpus entry.
fn mutated(rng: &mut Rng) -> String {
    let mut chars: Vec<char> = rng.pick(CORPUS).chars().collect();
    for _ in 0..rng.range(1, 3) {
        let len = chars.len();
        let at = rng.range(0, len);
        match rng.below(8) {
            // insert a character
            0 => chars.insert(at, notation_char(rng)),
            // delete a character
            1 if len > 0 => {
                chars.remove(rng.below(len));
            }
            // replace a character
            2 if len > 0 => chars[rng.below(len)] = notation_char(rng),
            // duplicate a substring somewhere
            3 if len > 0 => {
                let start = rng.below(len);
                let end = rng.range(start + 1, len.min(start + 6));
                let piece: Vec<char> = chars[start..end].to_vec();
                chars.splice(at..at, piece);
            }
            // swap two characters
            4 if len > 1 => {
                let (a, b) = (rng.below(len), rng.below(len));
                chars.swap(a, b);
            }
            // delete a substring
            5 if len > 0 => {
                let start = rng.below(len);
                let end = rng.range(start + 1, len.min(start + 5));
                chars.drain(start..end);
            }
            // splice in a piece of another corpus entry
            6 => {
                let other: Vec<char> = rng.pick(CORPUS).chars().collect();
                let start = rng.below(other.len());
                let end = rng.range(start + 1, other.len().min(start + 8));
                chars.splice(at..at, other[start..end].iter().copied());
            }
            // insert a token of the notation
            _ => {
                chars.splice(at..at, rng.pick(SNIPPETS).chars());
            }
        }
    }
    chars.into_iter().collect()
}

/// Runs `f`, turning a panic into a failure that names the input.
fn no_panic<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("<non-string panic>");
            panic!("{what} panicked on input {input:?}: {message}");
        }
    }
}

/// The error is about `input` and its caret stays within the text (or just past its end).
fn check_error(what: &str, input: &str, err: &SpecError) {
    assert_eq!(err.text, input, "{what}: error quotes another text");
    let len = input.chars().count();
    if let Some(column) = err.column {
        assert!(
            (1..=len + 1).contains(&column),
            "{what} {input:?}: column {column} outside 1..={}: {err:?}",
            len + 1
        );
        assert!(
            err.width >= 1 && column + err.width - 1 <= len + 1,
            "{what} {input:?}: caret of width {} at column {column} runs past the text: {err:?}",
            err.width
        );
    }
    let rendered = no_panic(&format!("rendering the {what} error"), input, || {
        err.to_string()
    });
    assert!(
        rendered.contains(&err.message),
        "{what} {input:?}: {rendered}"
    );
}

/// `parse(print(x)) == x` and printing is idempotent.
fn check_round_trip<T: PartialEq + Debug + ToString>(
    what: &str,
    input: &str,
    parsed: &T,
    parse: impl Fn(&str) -> Result<T, SpecError>,
) {
    let printed = no_panic(&format!("printing a {what}"), input, || parsed.to_string());
    let reparsed = no_panic(what, &printed, || parse(&printed));
    match reparsed {
        Ok(again) => {
            assert_eq!(
                &again, parsed,
                "{what}: {input:?} prints as {printed:?}, which parses to another tree"
            );
            assert_eq!(
                again.to_string(),
                printed,
                "{what}: printing is not idempotent for {input:?}"
            );
        }
        Err(err) => {
            panic!("{what}: {input:?} prints as {printed:?}, which does not parse:\n{err}")
        }
    }
}

/// Every name of a parsed spec is a label or a row variable, never both, and captures agree.
fn check_names(input: &str, spec: &EinsumSpec) {
    let labels = spec.dim_labels();
    let row_vars = spec.row_vars();
    for label in &labels {
        assert!(
            !row_vars.contains(label),
            "{input:?}: '{label}' is both a label and a row variable"
        );
        assert_eq!(spec.capture(label), Ok(CaptureKind::Dim), "{input:?}");
    }
    for var in &row_vars {
        assert_eq!(spec.capture(var), Ok(CaptureKind::Row), "{input:?}");
    }
}

#[derive(Debug, Default)]
struct Tally {
    einsum_ok: usize,
    shape_ok: usize,
    literal_ok: usize,
}

fn fuzz_one(input: &str, tally: &mut Tally) {
    match no_panic("parse_einsum", input, || parse_einsum(input)) {
        Ok(spec) => {
            tally.einsum_ok += 1;
            check_round_trip("einsum spec", input, &spec, parse_einsum);
            check_names(input, &spec);
        }
        Err(err) => check_error("parse_einsum", input, &err),
    }
    match no_panic("parse_shape_spec", input, || parse_shape_spec(input)) {
        Ok(slot) => {
            tally.shape_ok += 1;
            check_round_trip("shape spec", input, &slot, parse_shape_spec);
        }
        Err(err) => check_error("parse_shape_spec", input, &err),
    }
    match no_panic("parse_shape_literal", input, || parse_shape_literal(input)) {
        Ok(literal) => {
            tally.literal_ok += 1;
            check_round_trip("shape literal", input, &literal, parse_shape_literal);
        }
        Err(err) => check_error("parse_shape_literal", input, &err),
    }
}

#[test]
fn corpus_is_valid() {
    // The corpus is the seed of the mutations: every entry parses with at least one parser.
    for text in CORPUS {
        let ok = parse_einsum(text).is_ok()
            || parse_shape_spec(text).is_ok()
            || parse_shape_literal(text).is_ok();
        assert!(ok, "corpus entry {text:?} parses with no parser");
        fuzz_one(text, &mut Tally::default());
    }
}

#[test]
fn random_strings() {
    let mut rng = Rng(0x5EED_0001);
    let mut tally = Tally::default();
    let cases = cases();
    for _ in 0..cases {
        let input = random_string(&mut rng);
        fuzz_one(&input, &mut tally);
    }
    eprintln!("random: {tally:?}");
    // Random text rarely forms a valid spec, but the short ones do: make sure both outcomes are
    // exercised.
    assert!(tally.shape_ok > cases / 100, "{tally:?}");
    assert!(tally.einsum_ok > 0, "{tally:?}");
    assert!(tally.literal_ok > 0, "{tally:?}");
}

#[test]
fn mutated_specs() {
    let mut rng = Rng(0x5EED_0002);
    let mut tally = Tally::default();
    let cases = cases();
    for _ in 0..cases {
        let input = mutated(&mut rng);
        fuzz_one(&input, &mut tally);
    }
    eprintln!("mutated: {tally:?}");
    // Many single edits keep a spec valid; if none did, the round-trip checks above were idle.
    assert!(tally.einsum_ok > cases / 20, "{tally:?}");
    assert!(tally.shape_ok > cases / 10, "{tally:?}");
    assert!(tally.literal_ok > cases / 200, "{tally:?}");
}
