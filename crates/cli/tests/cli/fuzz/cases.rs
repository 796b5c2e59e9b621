//! The fuzzer's cases: command lines for `parse`, `einsum` and `explain`, the files they read,
//! and what a run must do.
//!
//! Valid einsum problems are generated with their answers ([`super::naive`]): labels of random
//! sizes placed in random rows of one to four operands, written in single- or multi-character
//! mode or numpy's notation, under every operation whose answer is plain, with inputs in every
//! form (`range:`, `fill:`, `values:`, `.npy` files of every dtype and order), and random flags.
//! The rest are mutations of those (edited specs, odd or huge input forms, bad flags, hostile
//! files, bytes that are not UTF-8) and random specs, which must only fail cleanly.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::naive::{Problem, Rows, Semantics};
use super::npy_files::{self, Hostility};
use super::rng::Rng;

/// One run: its arguments, the files it reads, and what it must do.
pub struct Case {
    pub args: Vec<OsString>,
    pub files: Vec<(PathBuf, Vec<u8>)>,
    pub expect: Expect,
}

/// What a run must do besides ending by itself with status 0 or 1, without a panic.
pub enum Expect {
    /// Nothing more.
    Anything,
    /// Fail (status 1), because of what the text says.
    Failure(&'static str),
    /// Print this answer as JSON when it succeeds (`einsum --json`).
    Answer(Box<Answer>),
    /// Print the human form of an answer when it succeeds (`einsum` without `--json`).
    HumanAnswer,
    /// Print a canonical form that parses to itself (`parse --json`).
    Canonical,
    /// Print every section of an explanation (`explain`).
    Explanation,
}

/// The JSON a successful `einsum --json` prints.
pub struct Answer {
    /// `[batch, input, output]`.
    pub shape: [Vec<usize>; 3],
    /// numpy's name for the dtype computed in.
    pub dtype: &'static str,
    pub values: Vec<f64>,
    pub grads: Option<Vec<Vec<f64>>>,
    /// The labels asked for, as the spec spells them, and their sizes.
    pub captures: Option<Vec<(String, usize)>>,
    pub timed: bool,
    /// Where `-o` put the values (the dims of the file: all axes in memory order).
    pub written: Option<(PathBuf, Vec<usize>)>,
    /// Whether the run is expected to succeed at all (a valid problem on a working backend).
    pub must_succeed: bool,
}

/// The operations whose answers [`Problem`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Einsum,
    Tropical,
    Einmax,
    OuterSum,
    PointwiseAdd,
    PointwiseMul,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Einsum => "einsum",
            Op::Tropical => "tropical",
            Op::Einmax => "einmax",
            Op::OuterSum => "outer-sum",
            Op::PointwiseAdd => "pointwise-add",
            Op::PointwiseMul => "pointwise-mul",
        }
    }

    fn semantics(self) -> Semantics {
        match self {
            Op::Einsum | Op::PointwiseMul => Semantics::SumOfProducts,
            Op::Tropical | Op::Einmax => Semantics::MaxOfSums,
            Op::OuterSum | Op::PointwiseAdd => Semantics::Sums,
        }
    }

    /// Whether the result sums over assignments that the command may group differently (a
    /// contraction path, sums of one operand's labels first): then only finite values give one
    /// answer, since `0 · ∞` and `∞ − ∞` make NaN in one grouping and not another.
    fn may_regroup(self, operands: usize) -> bool {
        self == Op::Einsum && operands > 1
    }
}

/// A generated problem and how its spec and inputs are written.
struct Valid {
    problem: Problem,
    op: Op,
    spec: String,
    numpy: bool,
    inputs: Vec<OsString>,
    files: Vec<(PathBuf, Vec<u8>)>,
    /// Whether every input is a `.npy` file: then the inputs' dtypes decide the one computed in,
    /// else the float64 of the literal forms dominates.
    only_files: bool,
}

/// Numbers a `values:` input may hold beyond integers, as written and as read.
/// Finite ones are integers, so that sums and products are exact in any order (a subnormal
/// would be absorbed into a partial sum that later cancels, or not, depending on the order).
const ODD_FINITE: &[&str] = &["-0", "+3", " 4 ", "-0.0", "2e0", "0.000", "1e1"];
const ODD_NONFINITE: &[&str] = &[
    "nan",
    "NaN",
    "inf",
    "-inf",
    "infinity",
    "-Infinity",
    "1e999",
];

/// Texts that are not numbers, or not numbers the command should read.
const NOT_NUMBERS: &[&str] = &[
    "", "0x10", "1_0", "1.5.2", "٣", "-", "e5", "1e", "--1", "1,5", "nan(1)", "0b1", "1f",
];

/// Sizes in shape texts of odd and huge inputs.
const ODD_SIZES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "8192",
    "8193",
    "100000",
    "67108864",
    "67108865",
    "4294967296",
    "4611686018427387904",
    "18446744073709551615",
    "99999999999999999999",
    "-1",
    "",
    "1@rgb",
    "2@",
    "@x",
];

/// The characters of the spec language and a few that are not.
const SPEC_CHARS: &[char] = &[
    'i', 'j', 'k', 'a', 'b', 'o', 'x', '|', ';', '-', '>', '=', '.', ',', '*', '+', '^', '&', '<',
    '_', '0', '1', '2', '9', ' ', '(', ')', '?', 'é', '\t',
];

/// Builds one case of the family `rng` draws, reading and writing files under `dir`.
pub fn generate(rng: &mut Rng, dir: &Path) -> Case {
    match rng.weighted(&[30, 6, 20, 5, 5, 6, 8, 14, 6]) {
        0 => valid_einsum(rng, dir, false),
        1 => valid_einsum(rng, dir, true),
        2 => mutated(rng, dir, "einsum"),
        3 => valid_explain(rng, dir),
        4 => mutated(rng, dir, "explain"),
        5 => npy_case(rng, dir, false),
        6 => npy_case(rng, dir, true),
        7 => parse_case(rng),
        _ => not_utf8(rng, dir),
    }
}

/// A random problem with its answer, written out.
fn valid(rng: &mut Rng, dir: &Path, odd_values: bool) -> Valid {
    let op = *rng.pick(&[
        Op::Einsum,
        Op::Einsum,
        Op::Einsum,
        Op::Einsum,
        Op::Einsum,
        Op::Tropical,
        Op::Einmax,
        Op::OuterSum,
        Op::PointwiseAdd,
        Op::PointwiseMul,
    ]);
    let count = match op {
        Op::Einsum => *rng.pick(&[1, 1, 2, 2, 2, 3, 3, 4]),
        Op::Einmax => 1,
        _ => 2,
    };
    let multi_char = rng.one_in(4);
    let alphabet: &[char] = &['i', 'j', 'k', 'l', 'm', 'a', 'b', 'c'];
    let labels: Vec<char> = (0..rng.range(1, 5))
        .map(|i| alphabet[(i + rng.below(2)) % alphabet.len()])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let sizes: BTreeMap<char, usize> = labels.iter().map(|&l| (l, rng.range(1, 4))).collect();
    let kinds = rng.one_in(3);
    let mut slots: Vec<Rows> = Vec::new();
    if matches!(op, Op::PointwiseAdd | Op::PointwiseMul) {
        let shared = place(rng, &labels, kinds);
        slots = vec![shared.clone(), shared];
    } else {
        for _ in 0..count {
            let mut chosen: Vec<char> = labels
                .iter()
                .copied()
                .filter(|_| rng.below(3) > 0)
                .collect();
            if rng.one_in(10) && !chosen.is_empty() {
                // A diagonal: one label twice.
                let twice = *rng.pick(&chosen);
                chosen.push(twice);
            }
            slots.push(place(rng, &chosen, kinds));
        }
    }
    let used: std::collections::BTreeSet<char> = slots
        .iter()
        .flat_map(|rows| rows.in_memory_order())
        .collect();
    let sizes: BTreeMap<char, usize> = sizes
        .into_iter()
        .filter(|(l, _)| used.contains(l))
        .collect();
    let result = match op {
        Op::PointwiseAdd | Op::PointwiseMul => slots[0].clone(),
        _ => {
            let mut kept: Vec<char> = used.iter().copied().filter(|_| rng.one_in(2)).collect();
            if op == Op::Einsum && rng.one_in(12) && !kept.is_empty() {
                // A diagonal write: cells off the diagonal stay 0.
                let twice = *rng.pick(&kept);
                kept.push(twice);
            }
            place(rng, &kept, kinds)
        }
    };
    let problem_operands: Vec<(Rows, Vec<f64>)> = slots
        .iter()
        .map(|rows| {
            let cells: usize = rows.in_memory_order().iter().map(|l| sizes[l]).product();
            (rows.clone(), vec![0.0; cells])
        })
        .collect();
    let mut problem = Problem {
        operands: problem_operands,
        result,
        sizes,
        semantics: op.semantics(),
    };
    // Numpy's notation has no kinds and writes each result label once.
    let numpy = !kinds
        && !multi_char
        && op == Op::Einsum
        && rng.one_in(4)
        && !has_repeat(&problem.result.in_memory_order());
    let nonfinite_ok = !op.may_regroup(count);
    let mut inputs = Vec::new();
    let mut files = Vec::new();
    for (position, (rows, values)) in problem.operands.iter_mut().enumerate() {
        let dims = rows.dims(&problem.sizes);
        let literal = shape_literal(&dims);
        let only_output = dims[0].is_empty() && dims[1].is_empty();
        let form = if odd_values {
            2
        } else {
            rng.weighted(&[4, 2, 3, if only_output { 2 } else { 0 }])
        };
        let text = match form {
            0 => {
                for (cell, value) in values.iter_mut().enumerate() {
                    *value = cell as f64;
                }
                format!("range:{literal}")
            }
            1 => {
                let fill = rng.int(-3, 3);
                values.iter_mut().for_each(|value| *value = fill as f64);
                format!("fill:{fill}:{literal}")
            }
            2 => {
                let mut written = Vec::new();
                for value in values.iter_mut() {
                    let text = if odd_values && rng.one_in(3) {
                        if nonfinite_ok && rng.one_in(2) {
                            rng.pick(ODD_NONFINITE).to_string()
                        } else {
                            rng.pick(ODD_FINITE).to_string()
                        }
                    } else {
                        rng.int(-5, 5).to_string()
                    };
                    *value = text.trim().parse().expect("a number Rust reads");
                    written.push(text);
                }
                format!("values:{}:{literal}", written.join(","))
            }
            _ => {
                let file = npy_files::with_dims(rng, dims[2].clone());
                values.copy_from_slice(&file.values);
                let path = dir.join(format!("x{}.npy", position + 1));
                files.push((path.clone(), file.bytes));
                path.to_str().expect("a UTF-8 test folder").to_owned()
            }
        };
        inputs.push(OsString::from(text));
    }
    let spec = if matches!(op, Op::PointwiseAdd | Op::PointwiseMul) {
        "-".to_owned()
    } else if numpy {
        numpy_spec(&slots, &problem.result)
    } else {
        spec_text(&slots, &problem.result, multi_char, rng)
    };
    Valid {
        problem,
        op,
        spec,
        numpy,
        only_files: files.len() == inputs.len(),
        inputs,
        files,
    }
}

/// `labels` in a random order, each in a random row (all output ones without `kinds`).
fn place(rng: &mut Rng, labels: &[char], kinds: bool) -> Rows {
    let mut rows = Rows::default();
    for label in shuffled(rng, labels) {
        let row = if kinds { rng.below(3) } else { 2 };
        match row {
            0 => rows.batch.push(label),
            1 => rows.input.push(label),
            _ => rows.output.push(label),
        }
    }
    rows
}

fn has_repeat(labels: &[char]) -> bool {
    let set: std::collections::BTreeSet<&char> = labels.iter().collect();
    set.len() != labels.len()
}

fn shuffled(rng: &mut Rng, items: &[char]) -> Vec<char> {
    let mut items = items.to_vec();
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i + 1));
    }
    items
}

/// `B|I->O` with comma-separated sizes; only the output when the other kinds are empty.
fn shape_literal([batch, input, output]: &[Vec<usize>; 3]) -> String {
    let join = |row: &[usize]| {
        row.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    if batch.is_empty() && input.is_empty() {
        join(output)
    } else {
        format!("{}|{}->{}", join(batch), join(input), join(output))
    }
}

/// Our notation: single-character rows (`b|i->o`) or multi-character ones (`b | i -> o`, with
/// labels spelled out long, commas between).
fn spec_text(slots: &[Rows], result: &Rows, multi_char: bool, rng: &mut Rng) -> String {
    let name = |label: char| {
        if multi_char {
            format!("{label}{label}x")
        } else {
            label.to_string()
        }
    };
    let row = |labels: &[char]| {
        let names: Vec<String> = labels.iter().map(|&l| name(l)).collect();
        names.join(if multi_char { ", " } else { "" })
    };
    let slot = |rows: &Rows| {
        if rows.batch.is_empty() && rows.input.is_empty() {
            row(&rows.output)
        } else if rows.batch.is_empty() {
            format!("{}->{}", row(&rows.input), row(&rows.output))
        } else {
            format!(
                "{}|{}->{}",
                row(&rows.batch),
                row(&rows.input),
                row(&rows.output)
            )
        }
    };
    let spaced = multi_char || rng.one_in(3);
    let (semi, arrow) = if spaced { ("; ", " => ") } else { (";", "=>") };
    let operands: Vec<String> = slots.iter().map(slot).collect();
    // A trailing comma keeps the text in multi-character mode when no row has two labels.
    let tail = if multi_char { "," } else { "" };
    format!("{}{arrow}{}{tail}", operands.join(semi), slot(result))
}

/// numpy's notation (`ij,jk->ik`); a scalar result (no axes) is written `->`.
fn numpy_spec(slots: &[Rows], result: &Rows) -> String {
    let operands: Vec<String> = slots
        .iter()
        .map(|rows| rows.output.iter().collect())
        .collect();
    let result: String = result.output.iter().collect();
    format!("{}->{result}", operands.join(","))
}

/// `einsum` on a valid problem with random flags, checked against the answer.
fn valid_einsum(rng: &mut Rng, dir: &Path, odd_values: bool) -> Case {
    let Valid {
        problem,
        op,
        spec,
        numpy,
        inputs,
        files,
        only_files,
    } = valid(rng, dir, odd_values);
    let mut args: Vec<OsString> = vec!["einsum".into(), spec.clone().into()];
    args.extend(inputs);
    let flag = |args: &mut Vec<OsString>, items: &[&str]| {
        args.extend(items.iter().map(OsString::from));
    };
    if op != Op::Einsum || rng.one_in(5) {
        flag(&mut args, &["--op", op.name()]);
    }
    if numpy {
        flag(&mut args, &["--numpy"]);
    }
    // The answer is computed in f64: files of other dtypes are computed in float64 too.
    if only_files || rng.one_in(8) {
        flag(&mut args, &["--dtype", "float64"]);
    }
    let backend = if rng.one_in(25) { "cc" } else { "interp" };
    flag(&mut args, &["--backend", backend]);
    if rng.one_in(5) {
        flag(
            &mut args,
            &["--path", *rng.pick(&["auto", "optimal", "greedy"])],
        );
    }
    if rng.one_in(6) {
        // No intermediate exceeds the product of all the sizes.
        flag(
            &mut args,
            &["--memory-limit", *rng.pick(&["1024", "67108864", "5000.5"])],
        );
    }
    let grads =
        matches!(op.semantics(), Semantics::SumOfProducts | Semantics::Sums) && rng.one_in(3);
    if grads {
        flag(&mut args, &["--grads"]);
    }
    // Labels can be named only through a spec (not `-`), and numpy's are translated.
    let labels: Vec<char> = if numpy || spec == "-" {
        Vec::new()
    } else {
        problem.sizes.keys().copied().collect()
    };
    let captures = (!labels.is_empty() && rng.one_in(4)).then(|| {
        let chosen: Vec<char> = shuffled(rng, &labels)
            .into_iter()
            .take(rng.range(1, labels.len()))
            .collect();
        chosen
    });
    let duplicate = captures.is_some() && rng.one_in(8);
    if let Some(chosen) = &captures {
        let mut names: Vec<String> = chosen.iter().map(|&l| label_name(&spec, l)).collect();
        if duplicate {
            names.push(names[0].clone());
        }
        flag(&mut args, &["--capture", &names.join(",")]);
    }
    if !labels.is_empty() && rng.one_in(8) {
        let label = *rng.pick(&labels);
        let set = format!("{}={}", label_name(&spec, label), problem.sizes[&label]);
        flag(&mut args, &["--set", &set]);
    }
    let timed = rng.one_in(10);
    if timed {
        flag(&mut args, &["--time", &rng.range(1, 3).to_string()]);
    }
    let result_dims: Vec<usize> = problem
        .result
        .in_memory_order()
        .iter()
        .map(|l| problem.sizes[l])
        .collect();
    let written = rng.one_in(8).then(|| (dir.join("out.npy"), result_dims));
    if let Some((path, _)) = &written {
        args.push("-o".into());
        args.push(path.into());
    }
    if duplicate {
        flag(&mut args, &["--json"]);
        return Case {
            args,
            files,
            expect: Expect::Failure("a label captured twice"),
        };
    }
    if rng.one_in(10) {
        return Case {
            args,
            files,
            expect: Expect::HumanAnswer,
        };
    }
    flag(&mut args, &["--json"]);
    let answer = Answer {
        shape: problem.result.dims(&problem.sizes),
        dtype: "float64",
        values: problem.values(),
        grads: grads.then(|| problem.grads()),
        captures: captures.map(|chosen| {
            (chosen.iter())
                .map(|l| (label_name(&spec, *l), problem.sizes[l]))
                .collect()
        }),
        timed,
        written,
        must_succeed: backend == "interp",
    };
    Case {
        args,
        files,
        expect: Expect::Answer(Box::new(answer)),
    }
}

/// How `label` is spelled in `spec` (long in multi-character specs).
fn label_name(spec: &str, label: char) -> String {
    let long = format!("{label}{label}x");
    if spec.contains(&long) {
        long
    } else {
        label.to_string()
    }
}

/// `explain` on a valid problem: every section is printed.
fn valid_explain(rng: &mut Rng, dir: &Path) -> Case {
    let Valid {
        op,
        spec,
        numpy,
        inputs,
        files,
        only_files,
        ..
    } = valid(rng, dir, false);
    let mut args: Vec<OsString> = vec!["explain".into(), spec.into()];
    args.extend(inputs);
    args.extend(["--op".into(), op.name().into()]);
    if numpy {
        args.push("--numpy".into());
    }
    // Maxima refuse uint64, which files may hold.
    if only_files {
        args.extend(["--dtype".into(), "float64".into()]);
    }
    let backend = if rng.one_in(10) { "cc" } else { "interp" };
    args.extend(["--backend".into(), backend.into()]);
    Case {
        args,
        files,
        expect: Expect::Explanation,
    }
}

/// A valid command (`einsum` or `explain`) mutated one to three times: it must only fail
/// cleanly, or succeed.
fn mutated(rng: &mut Rng, dir: &Path, command: &str) -> Case {
    let Valid {
        op,
        spec,
        numpy,
        inputs,
        mut files,
        ..
    } = valid(rng, dir, false);
    let mut args: Vec<OsString> = vec![command.into(), spec.into()];
    args.extend(inputs);
    args.extend(["--op".into(), op.name().into()]);
    if numpy {
        args.push("--numpy".into());
    }
    args.extend(["--backend".into(), "interp".into()]);
    for _ in 0..rng.range(1, 3) {
        match rng.below(7) {
            0 | 1 => {
                let spec = args[1].to_string_lossy().into_owned();
                args[1] = edit_text(rng, &spec);
            }
            2 => {
                let position = rng.range(2, args.len() - 1);
                args[position] = odd_input(rng, dir, &mut files);
            }
            3 => {
                let at = rng.range(2, args.len());
                args.insert(at, odd_input(rng, dir, &mut files));
            }
            4 if args.len() > 2 => {
                args.remove(rng.range(2, args.len() - 1));
            }
            _ => args.extend(odd_flag(rng, dir)),
        }
    }
    Case {
        args,
        files,
        expect: Expect::Anything,
    }
}

/// `text` with one character inserted, deleted or replaced (sometimes by a byte that is not
/// UTF-8), or a number in it made huge.
fn edit_text(rng: &mut Rng, text: &str) -> OsString {
    let mut chars: Vec<char> = text.chars().collect();
    let at = rng.below(chars.len() + 1);
    match rng.below(5) {
        0 => chars.insert(at, *rng.pick(SPEC_CHARS)),
        1 if at < chars.len() => {
            chars.remove(at);
        }
        2 if at < chars.len() => chars[at] = *rng.pick(SPEC_CHARS),
        3 => {
            let number = rng.pick(ODD_SIZES);
            let edited: String = chars[..at].iter().collect::<String>()
                + number
                + &chars[at..].iter().collect::<String>();
            return edited.into();
        }
        _ => {
            #[cfg(unix)]
            {
                use std::os::unix::ffi::OsStringExt;
                let mut bytes = text.as_bytes().to_vec();
                let at = rng.below(bytes.len() + 1);
                bytes.insert(at, 0x80 | rng.next() as u8);
                return OsString::from_vec(bytes);
            }
        }
    }
    chars.into_iter().collect::<String>().into()
}

/// An input argument of an odd form: huge or malformed shapes, texts that are not numbers,
/// hostile files, paths to nothing or to a folder.
fn odd_input(rng: &mut Rng, dir: &Path, files: &mut Vec<(PathBuf, Vec<u8>)>) -> OsString {
    let shape = |rng: &mut Rng| {
        let parts: Vec<&str> = (0..rng.range(0, 4)).map(|_| *rng.pick(ODD_SIZES)).collect();
        let separator = *rng.pick(&[",", ",", "|", "->", ", "]);
        parts.join(separator)
    };
    let number = |rng: &mut Rng| {
        if rng.one_in(2) {
            rng.pick(NOT_NUMBERS).to_string()
        } else {
            rng.pick(ODD_NONFINITE).to_string()
        }
    };
    match rng.below(8) {
        0 => format!("range:{}", shape(rng)).into(),
        1 => format!("fill:{}:{}", number(rng), shape(rng)).into(),
        2 => {
            let values: Vec<String> = (0..rng.below(6)).map(|_| number(rng)).collect();
            format!("values:{}:{}", values.join(","), shape(rng)).into()
        }
        3 => {
            let (bytes, ..) = npy_files::hostile(rng);
            let path = dir.join(format!("odd{}.npy", files.len()));
            files.push((path.clone(), bytes));
            path.into()
        }
        4 => dir.join("no-such-file.npy").into(),
        5 => dir.into(),
        6 => rng
            .pick(&["", "range", "fill:", "values:", ":", "range:2:3", "fill::"])
            .into(),
        _ => edit_text(rng, "range:2,3"),
    }
}

/// A flag with an odd value, or an odd flag.
fn odd_flag(rng: &mut Rng, dir: &Path) -> Vec<OsString> {
    let pairs: &[(&str, &[&str])] = &[
        (
            "--time",
            &["0", "1", "2", "-1", "4294967295", "1000001", "nan", "x", ""],
        ),
        (
            "--memory-limit",
            &[
                "nan", "NaN", "inf", "-inf", "-1", "0", "1", "1e300", "67108865", "x", "", " 5",
            ],
        ),
        (
            "--set",
            &[
                "k=2",
                "i=0",
                "i=-1",
                "i=99999999999999999999",
                "=",
                "i",
                "i=nan",
                "é=1",
            ],
        ),
        ("--capture", &["i", "i,i", "", ",", "zz", "i,j,k", "é"]),
        (
            "--op",
            &["einsum", "concat", "where", "compose", "nope", ""],
        ),
        ("--path", &["auto", "optimal", "greedy", "best"]),
        ("--backend", &["interp", "gpu", ""]),
        (
            "--dtype",
            &[
                "float32", "int8", "uint64", "bool", "float16", "f32", "int128", "",
            ],
        ),
    ];
    let (flag, values) = rng.pick(pairs);
    match rng.below(12) {
        0 => vec!["--numpy".into()],
        1 => vec!["--grads".into()],
        2 => vec!["-o".into(), dir.join("out.npy").into()],
        3 => vec!["-o".into(), dir.into()],
        4 => vec!["--json".into()],
        5 => vec![format!("--{}", rng.pick(&["frob", "", "-", "time="])).into()],
        _ => vec![(*flag).into(), (*rng.pick(values)).into()],
    }
}

/// A `.npy` file read by `einsum "...=>..." FILE`: valid (checked against its values) or
/// hostile (refused when it must be, read exactly when only its data changed).
fn npy_case(rng: &mut Rng, dir: &Path, hostile: bool) -> Case {
    let path = dir.join("input.npy");
    let (bytes, dims, hostility, dtype) = if hostile {
        npy_files::hostile(rng)
    } else {
        let file = npy_files::valid(rng);
        (
            file.bytes,
            file.dims,
            Hostility::Reads(file.values),
            file.dtype_name,
        )
    };
    let backend = if rng.one_in(20) { "cc" } else { "interp" };
    let args: Vec<OsString> = vec![
        "einsum".into(),
        "...=>...".into(),
        path.clone().into(),
        "--backend".into(),
        backend.into(),
        "--json".into(),
    ];
    let expect = match hostility {
        Hostility::Refused => Expect::Failure("a hostile .npy file"),
        Hostility::Unknown => Expect::Anything,
        Hostility::Reads(values) => Expect::Answer(Box::new(Answer {
            shape: [Vec::new(), Vec::new(), dims],
            dtype,
            values,
            grads: None,
            captures: None,
            timed: false,
            written: None,
            must_succeed: backend == "interp",
        })),
    };
    Case {
        args,
        files: vec![(path, bytes)],
        expect,
    }
}

/// `parse` on random token soup, edited specs of every construct, or long numbers.
fn parse_case(rng: &mut Rng) -> Case {
    const CONSTRUCTS: &[&str] = &[
        "ij;jk=>ik",
        "b|i->o => o|b->i",
        "2*o<+3*k, c",
        "x, ...; y, ... => x^y, ...",
        "..v.., i => i, ..v..",
        "s*o=+d*k; k => o",
        "a^3^b, 0, _ => a",
        "i, 7; j => i, j",
        "1*o+2, c => o",
    ];
    let text: OsString = match rng.below(3) {
        0 => {
            let length = rng.below(24);
            (0..length)
                .map(|_| *rng.pick(SPEC_CHARS))
                .collect::<String>()
                .into()
        }
        1 => {
            let mut text = OsString::from(*rng.pick(CONSTRUCTS));
            for _ in 0..rng.range(1, 3) {
                text = edit_text(rng, &text.to_string_lossy());
            }
            text
        }
        _ => {
            let digits: String = (0..rng.range(15, 25))
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect();
            format!("i, {digits} => i").into()
        }
    };
    let json = rng.below(4) > 0;
    let mut args: Vec<OsString> = vec!["parse".into(), text.clone()];
    if json {
        args.push("--json".into());
    }
    let expect = if text.to_str().is_none() {
        Expect::Failure("an argument that is not UTF-8")
    } else if json {
        Expect::Canonical
    } else {
        Expect::Anything
    };
    Case {
        args,
        files: Vec::new(),
        expect,
    }
}

/// Any command with random bytes, some not UTF-8, in one argument's place.
fn not_utf8(rng: &mut Rng, dir: &Path) -> Case {
    let mut case = match rng.below(3) {
        0 => parse_case(rng),
        1 => valid_einsum(rng, dir, false),
        _ => valid_explain(rng, dir),
    };
    // Any byte but NUL, which no argument can hold; not a leading `-`, which could make a
    // request for help (`-h…`) of it.
    let mut bytes: Vec<u8> = (0..rng.range(1, 8))
        .map(|_| (rng.next() as u8).max(1))
        .collect();
    if bytes[0] == b'-' {
        bytes[0] = b'+';
    }
    #[cfg(unix)]
    let text = {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(bytes)
    };
    #[cfg(not(unix))]
    let text = OsString::from(String::from_utf8_lossy(&bytes).into_owned());
    let position = rng.range(1, case.args.len() - 1);
    let after_output = case.args[position - 1] == "-o";
    case.args[position] = text.clone();
    case.expect = if text.to_str().is_none() && !after_output {
        Expect::Failure("an argument that is not UTF-8")
    } else {
        Expect::Anything
    };
    case
}
