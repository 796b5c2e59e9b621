//! `Tensor::einsum_np` against numpy's einsum, on both backends: a label whose axis is 1 in one
//! operand broadcasts against the others', scalar results have no axes, any letter is a label,
//! and every equation numpy refuses is refused with a message naming the label and operand.
//! Expected values were computed by numpy (the command is given where they are) or by a naive
//! evaluator here.

use std::collections::HashMap;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_shape::spec::{AxisSpec, Kind, parse_einsum};
use rcannl_tensor::nary::{numpy_to_ours, numpy_to_ours_for};
use rcannl_tensor::{Context, Graph, Tensor, TensorError};

/// The backends every einsum here runs on.
fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// A shape literal of output axes (`""` for none).
fn literal(axes: &[usize]) -> String {
    axes.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `einsum_np(spec)` over f64 data tensors of these axes and values, run on `backend`: the
/// result's dims (memory order) and values.
fn run_np(
    backend: Box<dyn Backend>,
    spec: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<(Vec<usize>, Vec<f64>), TensorError> {
    let graph = Graph::new();
    let tensors: Vec<Tensor> = axes
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (axes, values))| {
            graph
                .data(&format!("x{}", i + 1))
                .shape(&literal(axes))
                .precision(Precision::F64)
                .values(values.clone())
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let out = Tensor::einsum_np(spec, &refs);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&out])?;
    ctx.run(&forward)?;
    Ok((ctx.dims(&out)?, ctx.values(&out)?))
}

/// Each cell its flat offset plus one.
fn counting(axes: &[usize]) -> Vec<f64> {
    (1..=axes.iter().product::<usize>())
        .map(|v| v as f64)
        .collect()
}

/// An equation, its operands' axes, and the result numpy gives: its axes and values.
type NumpyCase = (
    &'static str,
    &'static [&'static [usize]],
    &'static [usize],
    &'static [f64],
);

/// Computed by numpy over operands whose cells are their flat offset plus one:
/// `python3 -c "import numpy as np; r = lambda s: np.arange(1.0, 1 + np.prod(s, dtype=int))
/// .reshape(s); x = np.einsum(SPEC, *[r(s) for s in SHAPES]); print(x.shape, x.ravel().tolist())"`
/// (with the Greek and Cyrillic labels written as Latin ones, which numpy requires).
const NUMPY_CASES: &[NumpyCase] = &[
    // A label whose axis is 1 in one operand broadcasts against the others'.
    ("ab,ab->b", &[&[4, 3], &[1, 3]], &[3], &[22.0, 52.0, 90.0]),
    (
        "cij,cjk->cik",
        &[&[2, 3, 2], &[2, 1, 2]],
        &[2, 3, 2],
        &[
            3.0, 6.0, 7.0, 14.0, 11.0, 22.0, 45.0, 60.0, 57.0, 76.0, 69.0, 92.0,
        ],
    ),
    ("ab,ab->ab", &[&[1, 3], &[1, 3]], &[1, 3], &[1.0, 4.0, 9.0]),
    (
        "ab,ab->ab",
        &[&[4, 3], &[4, 1]],
        &[4, 3],
        &[
            1.0, 2.0, 3.0, 8.0, 10.0, 12.0, 21.0, 24.0, 27.0, 40.0, 44.0, 48.0,
        ],
    ),
    (
        "ia,ja->ij",
        &[&[4, 3], &[1, 1]],
        &[4, 1],
        &[6.0, 15.0, 24.0, 33.0],
    ),
    ("a,b->a", &[&[1], &[5]], &[1], &[15.0]),
    (
        "aab,ab->b",
        &[&[1, 1, 3], &[4, 3]],
        &[3],
        &[22.0, 52.0, 90.0],
    ),
    (
        "ij,jk,kl->il",
        &[&[2, 1], &[3, 4], &[1, 2]],
        &[2, 2],
        &[78.0, 156.0, 156.0, 312.0],
    ),
    (
        "ab,cd,ad->bc",
        &[&[1, 3], &[2, 1], &[4, 1]],
        &[3, 2],
        &[10.0, 20.0, 20.0, 40.0, 30.0, 60.0],
    ),
    (
        "...a,ab->...b",
        &[&[2, 1, 3], &[1, 4]],
        &[2, 1, 4],
        &[6.0, 12.0, 18.0, 24.0, 15.0, 30.0, 45.0, 60.0],
    ),
    ("a,a,a->a", &[&[1], &[3], &[1]], &[3], &[1.0, 2.0, 3.0]),
    ("ab,ba", &[&[2, 1], &[3, 2]], &[], &[33.0]),
    // Scalar results have no axes.
    ("i->", &[&[3]], &[], &[6.0]),
    ("", &[&[]], &[], &[1.0]),
    ("ij,ij->", &[&[2, 3], &[2, 3]], &[], &[91.0]),
    ("i,i", &[&[3], &[3]], &[], &[14.0]),
    (",->", &[&[], &[]], &[], &[1.0]),
    ("ii", &[&[2, 2]], &[], &[5.0]),
    // `...` in the result when no operand has it stands for no axes, and a result may leave
    // out a `...` that stands for none.
    ("i->...", &[&[3]], &[], &[6.0]),
    ("a...->a", &[&[2]], &[2], &[1.0, 2.0]),
    ("...ab,b->a", &[&[2, 3], &[3]], &[2], &[14.0, 32.0]),
    // Any letter is a label.
    (
        "αβ,βγ",
        &[&[2, 3], &[3, 2]],
        &[2, 2],
        &[22.0, 28.0, 49.0, 64.0],
    ),
    (
        "Ωi,iж->жΩ",
        &[&[2, 3], &[3, 2]],
        &[2, 2],
        &[22.0, 49.0, 28.0, 64.0],
    ),
];

#[test]
fn results_are_numpys_on_both_backends() {
    for &(spec, axes, dims, expected) in NUMPY_CASES {
        let axes: Vec<Vec<usize>> = axes.iter().map(|a| a.to_vec()).collect();
        let values: Vec<Vec<f64>> = axes.iter().map(|a| counting(a)).collect();
        for backend in backends() {
            let name = backend.name();
            let (got_dims, got) = run_np(backend, spec, &axes, &values)
                .unwrap_or_else(|e| panic!("{spec} over {axes:?} on {name}: {e}"));
            assert_eq!(got_dims, dims, "{spec} over {axes:?} on {name}");
            assert_eq!(got, expected, "{spec} over {axes:?} on {name}");
        }
    }
}

#[test]
fn a_scalar_result_translates_to_a_slot_without_axes() {
    for (spec, ours) in [
        ("i->", "i =>"),
        ("", "=>"),
        ("ij,ij->", "i, j; i, j =>"),
        ("i,i", "i; i =>"),
        (",->", "; =>"),
        ("i->...", "i =>"),
    ] {
        assert_eq!(numpy_to_ours(spec).unwrap(), ours, "{spec}");
    }
    assert_eq!(
        numpy_to_ours_for("...i,...i", &[Some(vec![3]), Some(vec![3])]).unwrap(),
        "i; i =>"
    );
}

#[test]
fn letters_of_any_script_are_labels_and_survive_printing() {
    let ours = numpy_to_ours("αβ,βγ").unwrap();
    assert_eq!(ours, "α, β; β, γ => α, γ");
    let parsed = parse_einsum(&ours).unwrap();
    assert_eq!(parsed.to_string(), ours);
    let labels: Vec<String> = parsed
        .slots()
        .flat_map(|(_, slot)| slot.row(Kind::Output).axes().cloned().collect::<Vec<_>>())
        .map(|axis| match axis {
            AxisSpec::Label { name } => name,
            other => panic!("not a label: {other}"),
        })
        .collect();
    assert_eq!(labels, ["α", "β", "β", "γ", "α", "γ"]);
    // One label per slot: the printed spec stays readable label by label.
    assert_eq!(numpy_to_ours("ж->ж").unwrap(), "ж => ж");
    assert_eq!(
        parse_einsum("ж => ж").unwrap().to_string(),
        "ж => ж",
        "a one-letter label in any script is one axis"
    );
    // More than 52 operands: labels beyond the Latin letters.
    let labels: Vec<char> = ('a'..='z')
        .chain('A'..='Z')
        .chain('α'..='ω')
        .filter(|c| c.is_alphabetic())
        .collect();
    assert!(labels.len() > 60);
    let chain: Vec<String> = labels
        .windows(2)
        .map(|pair| pair.iter().collect())
        .collect();
    let spec = format!(
        "{}->{}{}",
        chain.join(","),
        labels[0],
        labels[labels.len() - 1]
    );
    let graph = Graph::new();
    let tensors: Vec<Tensor> = (0..chain.len())
        .map(|i| {
            graph
                .data(&format!("m{i}"))
                .shape("2,2")
                .precision(Precision::F64)
                .values(vec![1.0, 1.0, 0.0, 1.0])
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let out = Tensor::einsum_np(&spec, &refs);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&out]).unwrap();
    ctx.run(&forward).unwrap();
    // The n-th power of [[1, 1], [0, 1]] is [[1, n], [0, 1]].
    let n = chain.len() as f64;
    assert_eq!(ctx.values(&out).unwrap(), [1.0, n, 0.0, 1.0]);
}

/// An equation, its operands' axes, and what the message refusing it must name.
type RefusedCase = (
    &'static str,
    &'static [&'static [usize]],
    &'static [&'static str],
);

/// Equations numpy refuses (`np.einsum` raises ValueError for each; the cases of numpy's own
/// `test_einsum_errors` among them), with what the message must name.
const REFUSED: &[RefusedCase] = &[
    // An output label no operand has.
    ("i->ij", &[&[2]], &["result", "'j'", "no operand"]),
    ("a->i", &[&[2]], &["result", "'i'", "no operand"]),
    // A label twice in the result.
    ("ij->jij", &[&[2, 3]], &["result", "'j'", "twice"]),
    ("a->aa", &[&[2]], &["result", "'a'", "twice"]),
    // More labels than axes.
    ("i", &[&[]], &["operand 1", "1 label", "0 axes"]),
    ("ij", &[&[2]], &["operand 1", "2 labels", "1 axis"]),
    ("...i", &[&[]], &["operand 1", "1 label", "0 axes"]),
    ("i...j", &[&[2]], &["operand 1", "2 labels", "1 axis"]),
    ("i...", &[&[]], &["operand 1", "1 label", "0 axes"]),
    ("ij...", &[&[2]], &["operand 1", "2 labels", "1 axis"]),
    (
        "ij,jk->ik",
        &[&[2, 3], &[3, 4, 5]],
        &["operand 2", "2 labels", "3 axes"],
    ),
    // Fewer labels than axes and no `...`.
    (
        "i",
        &[&[2, 3]],
        &["operand 1", "2 axes", "1 label", "`...`"],
    ),
    ("->", &[&[2]], &["operand 1", "1 axis", "0 labels", "`...`"]),
    // `->` twice.
    ("i->i->i", &[&[2]], &["`->`", "once"]),
    ("i->->i", &[&[2]], &["`->`", "once"]),
    // `.` outside `...`, `...` twice.
    ("i..", &[&[2, 2]], &["operand 1", "`.`", "`...`"]),
    (".i...", &[&[2, 2]], &["operand 1", "`.`", "`...`"]),
    ("j->..j", &[&[2]], &["result", "`.`", "`...`"]),
    ("j->.j...", &[&[2]], &["result", "`.`", "`...`"]),
    ("...a...", &[&[4, 3]], &["operand 1", "`...`", "twice"]),
    ("a->...a...", &[&[4]], &["result", "`...`", "twice"]),
    // Characters that are not letters.
    ("i%...", &[&[2, 2]], &["operand 1", "'%'", "not a label"]),
    ("...j$", &[&[2, 2]], &["operand 1", "'$'", "not a label"]),
    ("i->&", &[&[2]], &["result", "'&'", "not a label"]),
    ("i-i", &[&[2]], &["operand 1", "'-'", "not a label"]),
    ("i>i", &[&[2]], &["operand 1", "'>'", "not a label"]),
    (
        "i1,jk",
        &[&[2], &[2, 2]],
        &["operand 1", "'1'", "not a label"],
    ),
    ("i->i,i", &[&[2]], &["result", "','", "not a label"]),
    // A number of operands other than the equation's.
    ("i,j", &[&[2]], &["2 operands", "1 given"]),
    ("i", &[&[2], &[3]], &["1 operand", "2 given"]),
    ("", &[], &["1 operand", "0 given"]),
    (",", &[&[]], &["2 operands", "1 given"]),
    // A repeated label over axes of different sizes.
    ("ii", &[&[2, 3]], &["operand 1", "'i'", "2", "3"]),
    ("ii->i", &[&[2, 3]], &["operand 1", "'i'", "2", "3"]),
    (
        "aabcb,abc",
        &[&[3, 3, 4, 5, 6], &[3, 4, 5]],
        &["operand 1", "'b'", "4", "6"],
    ),
    (
        "aab,ab->b",
        &[&[1, 2, 3], &[2, 3]],
        &["operand 1", "'a'", "1", "2"],
    ),
    // A label of sizes that do not broadcast (neither is 1).
    (
        "ij,jk->ik",
        &[&[2, 3], &[4, 4]],
        &["'j'", "operand 1", "operand 2", "3", "4"],
    ),
    (
        "ab,ab->b",
        &[&[4, 3], &[2, 3]],
        &["'a'", "operand 1", "operand 2"],
    ),
    ("a,a->a", &[&[4], &[3]], &["'a'", "operand 1", "operand 2"]),
    (
        "...i,...i",
        &[&[4, 2, 2], &[3, 2]],
        &["operand 2", "`...`", "broadcast"],
    ),
    // A result without `...` where the operands' `...` stand for axes, even of 1.
    (
        "a...->a",
        &[&[2, 3]],
        &["operand 1", "`...`", "[3]", "result"],
    ),
    (
        "a,...->a",
        &[&[2], &[1]],
        &["operand 2", "`...`", "[1]", "result"],
    ),
    ("...->", &[&[2]], &["operand 1", "`...`", "result"]),
];

#[test]
fn equations_numpy_refuses_are_refused_naming_the_label_and_operand() {
    for &(spec, axes, needles) in REFUSED {
        let graph = Graph::new();
        let tensors: Vec<Tensor> = axes
            .iter()
            .enumerate()
            .map(|(i, axes)| {
                graph
                    .data(&format!("x{}", i + 1))
                    .shape(&literal(axes))
                    .build()
            })
            .collect();
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let out = Tensor::einsum_np(spec, &refs);
        let message = out
            .error()
            .unwrap_or_else(|| panic!("{spec} over {axes:?} was accepted"))
            .message;
        assert!(
            message.starts_with(&format!("numpy einsum {spec:?}")),
            "{spec}: {message}"
        );
        for needle in needles {
            assert!(
                message.contains(needle),
                "{spec} over {axes:?}: {message:?} lacks {needle:?}"
            );
        }
    }
}

#[test]
fn equations_refused_whatever_the_operands_are_refused_by_the_translation() {
    for spec in [
        "i->ij", "a->i", "ij->jij", "a->aa", "i->i->i", "i..", ".i...", "j->..j", "...a...",
        "i%...", "i->&", "i-i", "i>i", "i->i,i",
    ] {
        assert!(numpy_to_ours(spec).is_err(), "{spec}");
        assert!(
            numpy_to_ours_for(spec, &[Some(vec![2, 2])]).is_err(),
            "{spec}"
        );
    }
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// The einsum of `operands` (label strings with, per operand, each label's size: 1 where it
/// broadcasts) into `result`, by summing over every assignment of the labels at their full sizes
/// (an operand's axis of 1 read at 0).
fn naive_broadcast(
    operands: &[(String, HashMap<char, usize>)],
    result: &str,
    values: &[Vec<f64>],
) -> Vec<f64> {
    let mut full: HashMap<char, usize> = HashMap::new();
    for (_, sizes) in operands {
        for (&c, &n) in sizes {
            let entry = full.entry(c).or_insert(1);
            *entry = (*entry).max(n);
        }
    }
    let mut labels: Vec<char> = full.keys().copied().collect();
    labels.sort_unstable();
    let cells: usize = result.chars().map(|c| full[&c]).product();
    let mut out = vec![0.0; cells];
    let total: usize = labels.iter().map(|c| full[c]).product();
    for mut index in 0..total {
        let mut at = HashMap::new();
        for c in labels.iter().rev() {
            at.insert(*c, index % full[c]);
            index /= full[c];
        }
        let product: f64 = operands
            .iter()
            .zip(values)
            .map(|((slot, sizes), v)| {
                let offset = slot.chars().fold(0, |acc, c| {
                    acc * sizes[&c] + if sizes[&c] == 1 { 0 } else { at[&c] }
                });
                v[offset]
            })
            .product();
        let offset = result.chars().fold(0, |acc, c| acc * full[&c] + at[&c]);
        out[offset] += product;
    }
    out
}

#[test]
fn random_broadcasting_expressions_match_a_naive_evaluator_on_both_backends() {
    let mut rng = Rng(7);
    let pool: Vec<char> = "abcdef".chars().collect();
    for case in 0..120 {
        let n = 2 + rng.below(3);
        let mut full: HashMap<char, usize> = HashMap::new();
        let mut operands = Vec::new();
        for _ in 0..n {
            let rank = 1 + rng.below(3);
            let slot: String = (0..rank).map(|_| pool[rng.below(pool.len())]).collect();
            let mut sizes = HashMap::new();
            for c in slot.chars() {
                let size = *full.entry(c).or_insert_with(|| 2 + rng.below(2));
                // One operand in three sees a label at 1 (every axis of a repeated label alike).
                let own = if rng.below(3) == 0 { 1 } else { size };
                sizes.entry(c).or_insert(own);
            }
            operands.push((slot, sizes));
        }
        let mut used: Vec<char> = full.keys().copied().collect();
        used.sort_unstable();
        let result: String = used.iter().filter(|_| rng.below(3) == 0).collect();
        let spec = format!(
            "{}->{result}",
            operands
                .iter()
                .map(|(slot, _)| slot.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        let axes: Vec<Vec<usize>> = operands
            .iter()
            .map(|(slot, sizes)| slot.chars().map(|c| sizes[&c]).collect())
            .collect();
        let values: Vec<Vec<f64>> = axes
            .iter()
            .map(|axes| {
                (0..axes.iter().product::<usize>())
                    .map(|_| (rng.below(9) as f64 - 4.0) / 2.0)
                    .collect()
            })
            .collect();
        let expected = naive_broadcast(&operands, &result, &values);
        let dims: Vec<usize> = result
            .chars()
            .map(|c| {
                operands
                    .iter()
                    .filter_map(|(_, sizes)| sizes.get(&c).copied())
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        for backend in backends() {
            let name = backend.name();
            let (got_dims, got) = run_np(backend, &spec, &axes, &values)
                .unwrap_or_else(|e| panic!("case {case}: {spec} over {axes:?} on {name}: {e}"));
            assert_eq!(
                got_dims, dims,
                "case {case}: {spec} over {axes:?} on {name}"
            );
            assert_eq!(got, expected, "case {case}: {spec} over {axes:?} on {name}");
        }
    }
}
