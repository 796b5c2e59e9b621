//! The random n-ary einsum tests on the GPU in f32, against the interpreter in f32: the same
//! expressions, drawn by the same generators from the same seeds, as `rcannl-tensor`'s
//! `einsum_n.rs` (random expressions of 2 to 6 operands with diagonals, labels summed within
//! one operand and labels only the result keeps; numpy's `...` broadcasting) and
//! `einsum_np_properties.rs` (numpy-notation einsums of one to four operands, axes of 1 facing
//! longer ones, zero-size axes, implicit results). Those compare with naive evaluators in f64;
//! here the GPU must give the interpreter's results exactly: operands are small multiples of
//! ½, so that every product and every partial sum these sizes make is exact in f32, whatever the
//! order of the contraction path's steps.
//!
//! `einsum_path.rs`'s property tests search paths without running them: they have nothing to
//! run on a device.

mod common;

use std::collections::HashMap;

use common::OnDevice;
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestRunner};
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

/// The einsum `equation` (numpy's notation) of f32 data tensors of these output axes and values,
/// run on `backend`: the result's values, or the error building or running it gave.
fn run(
    backend: Box<dyn Backend>,
    equation: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<Vec<f64>, String> {
    let graph = Graph::new();
    let operands: Vec<Tensor> = axes
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (axes, values))| {
            graph
                .data(&format!("x{i}"))
                .batch([])
                .input([])
                .output(axes.iter().copied())
                .precision(Precision::F32)
                .values(values.clone())
                .build()
        })
        .collect();
    let out = Tensor::einsum_np(equation, &operands.iter().collect::<Vec<_>>());
    let message = |e: rcannl_tensor::TensorError| e.to_string();
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&out]).map_err(message)?;
    ctx.run(&forward).map_err(message)?;
    ctx.values(&out).map_err(message)
}

/// Runs `equation` on the interpreter and on the GPU; `Err` says how they differ.
fn compare(
    gpu: &OnDevice,
    equation: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<(), String> {
    let want = run(Box::new(Interpreter), equation, axes, values)
        .map_err(|e| format!("{equation} over {axes:?} on the interpreter: {e}"))?;
    let got = run(Box::new(gpu.clone()), equation, axes, values)
        .map_err(|e| format!("{equation} over {axes:?} on the GPU: {e}"))?;
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{equation} over {axes:?}: the GPU gives {got:?}, the interpreter {want:?}"
        ))
    }
}

/// `einsum_n.rs`'s generator: a linear congruential sequence.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random expression, as `einsum_n.rs` draws it: operand label strings and the result's, with
/// a size per label.
fn expression(rng: &mut Lcg) -> (Vec<String>, String, HashMap<char, usize>) {
    let pool: Vec<char> = "abcdefg".chars().collect();
    let n = 2 + rng.below(5);
    let mut operands = Vec::new();
    for _ in 0..n {
        let rank = 1 + rng.below(3);
        let labels: String = (0..rank).map(|_| pool[rng.below(pool.len())]).collect();
        operands.push(labels);
    }
    let used: Vec<char> = {
        let mut all: Vec<char> = operands.iter().flat_map(|o| o.chars()).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let result: String = used.iter().filter(|_| rng.below(3) == 0).collect();
    let sizes = used.iter().map(|&c| (c, 2 + rng.below(2))).collect();
    (operands, result, sizes)
}

#[test]
fn random_expressions_agree_with_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let mut rng = Lcg(2024);
    for case in 0..200 {
        let (operands, result, sizes) = expression(&mut rng);
        let spec = format!("{}->{result}", operands.join(","));
        let values: Vec<Vec<f64>> = operands
            .iter()
            .map(|slot| {
                let n: usize = slot.chars().map(|c| sizes[&c]).product();
                (0..n).map(|_| (rng.below(9) as f64 - 4.0) / 2.0).collect()
            })
            .collect();
        let axes: Vec<Vec<usize>> = operands
            .iter()
            .map(|slot| slot.chars().map(|c| sizes[&c]).collect())
            .collect();
        if let Err(e) = compare(&gpu, &spec, &axes, &values) {
            panic!("case {case}: {e}");
        }
    }
}

/// An operand (or result) of a random broadcasting expression, as `einsum_n.rs` draws it: its
/// labels, where `...` stands among them (if anywhere), and the axes `...` stands for.
struct Broadcasting {
    labels: Vec<char>,
    ellipsis: Option<usize>,
    dots: Vec<usize>,
}

impl Broadcasting {
    fn numpy(&self) -> String {
        let mut text: String = self.labels.iter().collect();
        if let Some(at) = self.ellipsis {
            text.insert_str(at, "...");
        }
        text
    }

    /// The operand's axes: its labels' sizes with the axes of `...` where it stands.
    fn axes(&self, sizes: &HashMap<char, usize>) -> Vec<usize> {
        let mut axes: Vec<usize> = self.labels.iter().map(|c| sizes[c]).collect();
        if let Some(at) = self.ellipsis {
            axes.splice(at..at, self.dots.iter().copied());
        }
        axes
    }
}

#[test]
fn numpy_ellipses_broadcast_as_on_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let mut rng = Lcg(7);
    for case in 0..60 {
        let pool: Vec<char> = "abcde".chars().collect();
        let rank = rng.below(3);
        let batch: Vec<usize> = (0..rank).map(|_| 2 + rng.below(2)).collect();
        let n = 2 + rng.below(3);
        let mut operands: Vec<Broadcasting> = (0..n)
            .map(|_| {
                let labels: Vec<char> = (0..rng.below(3)).map(|_| pool[rng.below(5)]).collect();
                let ellipsis = (rng.below(3) > 0).then(|| rng.below(labels.len() + 1));
                let count = if ellipsis.is_some() {
                    rng.below(rank + 1)
                } else {
                    0
                };
                let dots = batch[rank - count..]
                    .iter()
                    .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                    .collect();
                Broadcasting {
                    labels,
                    ellipsis,
                    dots,
                }
            })
            .collect();
        if operands
            .iter()
            .all(|o| o.labels.is_empty() && o.ellipsis.is_none())
        {
            operands[0].labels.push('a');
        }
        let longest = operands.iter().map(|o| o.dots.len()).max().unwrap_or(0);
        let mut used: Vec<char> = operands.iter().flat_map(|o| o.labels.clone()).collect();
        used.sort_unstable();
        used.dedup();
        let kept: Vec<char> = used.iter().copied().filter(|_| rng.below(2) == 0).collect();
        let result = Broadcasting {
            ellipsis: (rng.below(4) > 0).then(|| rng.below(kept.len() + 1)),
            labels: kept,
            dots: Vec::new(),
        };
        let sizes: HashMap<char, usize> = used.iter().map(|&c| (c, 2 + rng.below(2))).collect();
        let spec = format!(
            "{}->{}",
            operands
                .iter()
                .map(Broadcasting::numpy)
                .collect::<Vec<_>>()
                .join(","),
            result.numpy()
        );
        let values: Vec<Vec<f64>> = operands
            .iter()
            .map(|o| {
                let cells: usize = o.axes(&sizes).iter().product();
                (0..cells)
                    .map(|_| (rng.below(9) as f64 - 4.0) / 2.0)
                    .collect()
            })
            .collect();
        if result.ellipsis.is_none() && longest > 0 {
            // numpy refuses it (`einsum_n.rs` checks the error): nothing runs.
            continue;
        }
        let axes: Vec<Vec<usize>> = operands.iter().map(|o| o.axes(&sizes)).collect();
        if let Err(e) = compare(&gpu, &spec, &axes, &values) {
            panic!("case {case}: {e}");
        }
    }
}

/// The labels `einsum_np_properties.rs` draws from.
const LABELS: [char; 6] = ['a', 'b', 'c', 'd', 'A', 'B'];

/// One operand as drawn (see `einsum_np_properties.rs`): labels with, per label, whether this
/// operand has size 1 there; where `...` goes, how many broadcast axes it stands for, and which
/// of those are 1 here.
#[derive(Debug, Clone)]
struct OperandDraw {
    labels: Vec<(usize, bool)>,
    ellipsis: Option<(usize, usize, [bool; 2])>,
}

/// A whole expression as drawn.
#[derive(Debug, Clone)]
struct Draw {
    sizes: Vec<usize>,
    broadcast: Vec<usize>,
    operands: Vec<OperandDraw>,
    result: Option<(Vec<usize>, usize)>,
    spaced: bool,
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 2..=3usize, 3 => Just(1), 1 => Just(0)]
}

fn operand() -> impl Strategy<Value = OperandDraw> {
    (
        proptest::collection::vec((0..LABELS.len(), proptest::bool::weighted(0.25)), 0..=3),
        proptest::option::weighted(
            0.5,
            (
                0..=3usize,
                0..=2usize,
                proptest::array::uniform2(proptest::bool::weighted(0.25)),
            ),
        ),
    )
        .prop_map(|(labels, ellipsis)| OperandDraw { labels, ellipsis })
}

fn draw() -> impl Strategy<Value = Draw> {
    (
        proptest::collection::vec(size(), LABELS.len()),
        proptest::collection::vec(2..=3usize, 0..=2),
        proptest::collection::vec(operand(), 1..=4),
        proptest::option::of((
            proptest::collection::vec(0..LABELS.len(), 0..=4),
            0..=4usize,
        )),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(sizes, broadcast, operands, result, spaced)| Draw {
            sizes,
            broadcast,
            operands,
            result,
            spaced,
        })
}

impl Draw {
    /// The equation and operand shapes the draw stands for (every one valid for numpy).
    fn expression(&self) -> (String, Vec<Vec<usize>>) {
        let rank = self.broadcast.len();
        let mut terms = Vec::new();
        let mut shapes = Vec::new();
        for operand in &self.operands {
            let mut term: Vec<String> = Vec::new();
            let mut shape = Vec::new();
            for (j, &(label, one)) in operand.labels.iter().enumerate() {
                let first = operand.labels[..j].iter().find(|(l, _)| *l == label);
                let one = first.map_or(one, |&(_, one)| one);
                term.push(LABELS[label].to_string());
                shape.push(if one { 1 } else { self.sizes[label] });
            }
            if let Some((at, covered, ones)) = operand.ellipsis {
                let at = at.min(term.len());
                let covered = covered.min(rank);
                let dims = self.broadcast[rank - covered..]
                    .iter()
                    .zip(ones)
                    .map(|(&size, one)| if one { 1 } else { size });
                term.insert(at, "...".to_owned());
                shape.splice(at..at, dims);
            }
            terms.push(term.concat());
            shapes.push(shape);
        }
        let separator = if self.spaced { ", " } else { "," };
        let mut equation = terms.join(separator);
        if let Some((labels, at)) = &self.result {
            let mut result: Vec<String> = Vec::new();
            for &label in labels {
                let name = LABELS[label].to_string();
                let held = self
                    .operands
                    .iter()
                    .any(|o| o.labels.iter().any(|(l, _)| *l == label));
                if held && !result.contains(&name) {
                    result.push(name);
                }
            }
            if self.operands.iter().any(|o| o.ellipsis.is_some()) || *at == 0 {
                result.insert((*at).min(result.len()), "...".to_owned());
            }
            equation.push_str(if self.spaced { " -> " } else { "->" });
            equation.push_str(&result.concat());
        }
        (equation, shapes)
    }
}

/// Operand values as `einsum_np_properties.rs` makes them: small integers and halves.
fn operand_values(shapes: &[Vec<usize>]) -> Vec<Vec<f64>> {
    shapes
        .iter()
        .enumerate()
        .map(|(k, shape)| {
            let cells: usize = shape.iter().product();
            (0..cells)
                .map(|i| ((i * 7 + k * 5 + 3) % 11) as f64 / 2.0 - 2.5)
                .collect()
        })
        .collect()
}

#[test]
fn numpy_einsums_agree_with_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    // `einsum_np_properties.rs`'s configuration, so that the same seed draws the same cases.
    let config = ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(2718),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::default()
    };
    let outcome = TestRunner::new(config).run(&draw(), |draw| {
        let (equation, shapes) = draw.expression();
        let values = operand_values(&shapes);
        let compared = compare(&gpu, &equation, &shapes, &values);
        prop_assert!(compared.is_ok(), "{}", compared.unwrap_err());
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
