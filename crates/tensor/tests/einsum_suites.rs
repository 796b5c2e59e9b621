//! The einsum cases of numpy's, opt_einsum's, PyTorch's and JAX's test suites (equations, operand
//! shapes, and whether each must be refused), kept as data in `data/einsum_suites/` (see the
//! README there), run through `Tensor::einsum_np` on the interpreter and on the C backend.
//!
//! A valid case runs over random operands and must give the shape and values of a naive
//! evaluation of numpy's semantics (`support/naive_einsum.rs`), within rounding relative to the
//! magnitude of the terms summed; an invalid case must be refused with a message that names the
//! operation and the operand or spec at fault. Every case runs in isolation (a panic is a failure
//! of that case), and each suite prints its counts, its failures by category and every failing
//! case before asserting that all of them pass.

#[path = "support/einsum_np_check.rs"]
mod einsum_np_check;
#[path = "support/naive_einsum.rs"]
mod naive_einsum;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Once;

use einsum_np_check::{Mismatch, compare, run_einsum};
use naive_einsum::Plan;
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;

/// One case of a suite: a line of its data file.
#[derive(Debug, Clone)]
struct Case {
    line: usize,
    equation: String,
    shapes: Vec<Vec<usize>>,
    valid: bool,
}

impl Case {
    /// The case as its data line shows it, for reports.
    fn describe(&self) -> String {
        let shapes: Vec<String> = self.shapes.iter().map(|s| format!("{s:?}")).collect();
        format!(
            "line {}: {:?} over [{}]",
            self.line,
            self.equation,
            shapes.join(", ")
        )
    }
}

/// Reads `data/einsum_suites/<suite>.tsv`: `equation<TAB>shapes<TAB>valid|invalid<TAB>dtypes`,
/// shapes separated by `;`, dimensions by `,`, a 0-d operand written `()`; `#` starts a comment
/// line.
fn load(suite: &str) -> Vec<Case> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "data",
        "einsum_suites",
        &format!("{suite}.tsv"),
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 4, "{}:{}: four fields", path.display(), i + 1);
        let shapes = match fields[1] {
            "" => Vec::new(),
            text => text
                .split(';')
                .map(|shape| match shape {
                    "()" => Vec::new(),
                    dims => dims
                        .split(',')
                        .map(|d| d.parse().expect("a dimension"))
                        .collect(),
                })
                .collect(),
        };
        let valid = match fields[2] {
            "valid" => true,
            "invalid" => false,
            other => panic!("{}:{}: verdict {other:?}", path.display(), i + 1),
        };
        cases.push(Case {
            line: i + 1,
            equation: fields[0].to_owned(),
            shapes,
            valid,
        });
    }
    cases
}

/// What went wrong with one case on one backend.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Failure {
    /// A valid case refused.
    Refused,
    /// A valid case with a result of the wrong shape.
    WrongShape,
    /// A valid case with wrong values.
    WrongValues,
    /// An invalid case accepted.
    Accepted,
    /// An invalid case refused with a message that does not say which operation and which
    /// operand or spec.
    UnclearMessage,
    /// A panic instead of a result or an error.
    Panicked,
    /// The naive evaluator refuses a case the data calls valid (a fault of the test itself).
    ReferenceRefused,
}

impl Failure {
    fn name(&self) -> &'static str {
        match self {
            Failure::Refused => "valid case refused",
            Failure::WrongShape => "wrong result shape",
            Failure::WrongValues => "wrong values",
            Failure::Accepted => "invalid case accepted",
            Failure::UnclearMessage => "refused without naming the operation and operand",
            Failure::Panicked => "panic",
            Failure::ReferenceRefused => "reference evaluator refuses a valid case",
        }
    }
}

/// What a valid case exercises that the simplest einsum does not, most specific first: the
/// category its failures are counted under.
fn feature(case: &Case, plan: &Plan) -> &'static str {
    let stretches = plan
        .operand_shapes
        .iter()
        .zip(&plan.operand_axes)
        .any(|(shape, axes)| {
            shape
                .iter()
                .zip(axes)
                .any(|(&dim, &axis)| dim == 1 && plan.axes[axis].size != 1)
        });
    if !case.equation.is_ascii() {
        "unicode labels"
    } else if case.shapes.iter().flatten().any(|&d| d == 0) {
        "zero-size axes"
    } else if stretches {
        "size-1 broadcasting"
    } else if case.shapes.iter().any(Vec::is_empty) || plan.shape.is_empty() {
        "0-d operand or result"
    } else if case.equation.contains("...") {
        "ellipsis"
    } else {
        "plain"
    }
}

thread_local! {
    /// Whether a panic on this thread is expected and caught (so the hook keeps quiet).
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into `Err` with its message; the default hook stays in place for
/// panics outside such calls (the final assertions among them).
fn catching<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                default(info);
            }
        }));
    });
    CATCHING.with(|c| c.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(false));
    result.map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned())
    })
}

/// A small deterministic generator, seeded per case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in [-1, 1) on a grid of 2^-20, so that products are exact and only sums round.
    fn value(&mut self) -> f64 {
        ((self.next() >> 43) as f64 - (1u64 << 20) as f64) / (1u64 << 20) as f64
    }
}

/// Values for operands of `shapes`, from a seed fixed by the suite and the case's line.
fn operand_values(suite: &str, case: &Case) -> Vec<Vec<f64>> {
    let seed = suite.bytes().fold(case.line as u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    let mut rng = Rng(seed);
    case.shapes
        .iter()
        .map(|shape| (0..shape.iter().product()).map(|_| rng.value()).collect())
        .collect()
}

/// Whether a refusal's message names the operation and the operand or spec at fault.
fn names_the_fault(message: &str, equation: &str) -> bool {
    message.contains("einsum") && (message.contains("operand") || message.contains(equation))
}

/// What a case is checked against: its operands' values and, for a valid case, the naive
/// evaluation (computed once for every backend).
struct Expectation {
    values: Vec<Vec<f64>>,
    reference: Result<(Plan, naive_einsum::Evaluation), String>,
}

impl Expectation {
    fn of(suite: &str, case: &Case) -> Expectation {
        let values = operand_values(suite, case);
        let reference = match case.valid {
            true => Plan::new(&case.equation, &case.shapes).map(|plan| {
                let evaluation = plan.evaluate(&values);
                (plan, evaluation)
            }),
            false => Err("an invalid case has no result".to_owned()),
        };
        Expectation { values, reference }
    }
}

/// Checks one case on one backend; `Ok` when it passes, else the failure and what was seen.
fn check_case(
    case: &Case,
    expectation: &Expectation,
    backend: Box<dyn Backend>,
) -> Result<(), (Failure, String)> {
    let run = || {
        run_einsum(
            backend,
            Precision::F64,
            &case.equation,
            &case.shapes,
            &expectation.values,
        )
    };
    if !case.valid {
        return match catching(run) {
            Err(panic) => Err((Failure::Panicked, panic)),
            Ok(Ok((rows, _))) => Err((Failure::Accepted, format!("result rows {rows:?}"))),
            Ok(Err(message)) if names_the_fault(&message, &case.equation) => Ok(()),
            Ok(Err(message)) => Err((Failure::UnclearMessage, message)),
        };
    }
    let (plan, expected) = match &expectation.reference {
        Ok(reference) => reference,
        Err(why) => return Err((Failure::ReferenceRefused, why.clone())),
    };
    let got = match catching(run) {
        Err(panic) => return Err((Failure::Panicked, panic)),
        Ok(Err(message)) => return Err((Failure::Refused, message)),
        Ok(Ok(result)) => result,
    };
    compare(plan, expected, &got).map_err(|mismatch| match mismatch {
        Mismatch::Shape(seen) => (Failure::WrongShape, seen),
        Mismatch::Values(seen) => (Failure::WrongValues, seen),
    })
}

/// Runs every case of `suite` on the interpreter and on the C backend; prints the counts, the
/// failures by category and every failing case, and asserts that all passed.
fn run_suite(suite: &str) {
    let cases = load(suite);
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    let backends = ["interpreter", "cc"];
    // Per backend: valid cases run, equal, invalid cases run, refused.
    let mut tallies = [[0usize; 4]; 2];
    let mut failures: Vec<String> = Vec::new();
    let mut by_category: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for case in &cases {
        let expectation = Expectation::of(suite, case);
        for (name, tally) in backends.iter().zip(&mut tallies) {
            let backend: Box<dyn Backend> = match *name {
                "interpreter" => Box::new(Interpreter),
                _ => Box::new(compiler.clone()),
            };
            let column = if case.valid { 0 } else { 2 };
            tally[column] += 1;
            match check_case(case, &expectation, backend) {
                Ok(()) => tally[column + 1] += 1,
                Err((failure, detail)) => {
                    let category = match &expectation.reference {
                        Ok((plan, _)) => feature(case, plan),
                        Err(_) if case.valid => "?",
                        Err(_) => "invalid",
                    };
                    *by_category
                        .entry((name, failure.name(), category))
                        .or_default() += 1;
                    failures.push(format!(
                        "  [{name}] {} ({category}): {}: {detail}",
                        failure.name(),
                        case.describe()
                    ));
                }
            }
        }
    }
    let mut report = String::new();
    for (name, [valid, equal, invalid, refused]) in backends.iter().zip(tallies) {
        let _ = writeln!(
            report,
            "{suite} on {name}: {equal}/{valid} valid cases equal numpy's, \
             {refused}/{invalid} invalid cases refused"
        );
    }
    if !by_category.is_empty() {
        let _ = writeln!(report, "{suite}: failures by category");
        for ((backend, failure, category), n) in &by_category {
            let _ = writeln!(report, "  [{backend}] {failure} ({category}): {n}");
        }
        let _ = writeln!(report, "{suite}: failing cases");
        for line in &failures {
            let _ = writeln!(report, "{line}");
        }
    }
    println!("{report}");
    assert!(
        failures.is_empty(),
        "{suite}: {} failures (listed in the output above)",
        failures.len()
    );
}

#[test]
fn numpy_suite() {
    run_suite("numpy");
}

#[test]
fn opt_einsum_suite() {
    run_suite("opt_einsum");
}

#[test]
fn pytorch_suite() {
    run_suite("pytorch");
}

#[test]
fn jax_suite() {
    run_suite("jax");
}

#[test]
fn the_reference_evaluator_agrees_with_every_verdict() {
    let mut disagreements = Vec::new();
    for suite in ["numpy", "opt_einsum", "pytorch", "jax"] {
        for case in load(suite) {
            let plan = Plan::new(&case.equation, &case.shapes);
            if plan.is_ok() != case.valid {
                disagreements.push(format!("{suite} {}: {plan:?}", case.describe()));
            }
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

/// The naive evaluation of `equation` over operands of these shapes and row-major values.
fn naive(equation: &str, operands: &[(&[usize], &[f64])]) -> (Vec<usize>, Vec<f64>) {
    let shapes: Vec<Vec<usize>> = operands.iter().map(|(s, _)| s.to_vec()).collect();
    let values: Vec<Vec<f64>> = operands.iter().map(|(_, v)| v.to_vec()).collect();
    let plan = Plan::new(equation, &shapes).unwrap();
    (plan.shape.clone(), plan.evaluate(&values).values)
}

#[test]
fn the_reference_evaluator_computes_einsums_worked_by_hand() {
    let m = [1.0, 2.0, 3.0, 4.0];
    let n = [5.0, 6.0, 7.0, 8.0];
    let two_by_three = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    // [[1, 2], [3, 4]] · [[5, 6], [7, 8]]
    assert_eq!(
        naive("ij,jk->ik", &[(&[2, 2], &m), (&[2, 2], &n)]),
        (vec![2, 2], vec![19.0, 22.0, 43.0, 50.0])
    );
    // Trace and diagonal.
    assert_eq!(naive("ii", &[(&[2, 2], &m)]), (vec![], vec![5.0]));
    assert_eq!(naive("ii->i", &[(&[2, 2], &m)]), (vec![2], vec![1.0, 4.0]));
    // An implicit result in alphabetical order transposes; capitals sort first, then Greek.
    let transposed = (vec![3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(naive("ba", &[(&[2, 3], &two_by_three)]), transposed);
    assert_eq!(naive("bA", &[(&[2, 3], &two_by_three)]), transposed);
    assert_eq!(naive("βα", &[(&[2, 3], &two_by_three)]), transposed);
    // A size of 1 stretches under a shared label: 1·10 + 2·10 + 3·10.
    assert_eq!(
        naive("i,i", &[(&[3], &[1.0, 2.0, 3.0]), (&[1], &[10.0])]),
        (vec![], vec![60.0])
    );
    // `...` aligned at the right: (2, 1) against (3,) broadcasts to (2, 3).
    assert_eq!(
        naive(
            "...i,...i->...",
            &[(&[2, 1, 1], &[1.0, 2.0]), (&[3, 1], &[1.0, 10.0, 100.0])]
        ),
        (vec![2, 3], vec![1.0, 10.0, 100.0, 2.0, 20.0, 200.0])
    );
    // A 0-d operand scales; zero-size axes give empty results or zero sums.
    assert_eq!(
        naive(",i->i", &[(&[], &[3.0]), (&[2], &[1.0, 2.0])]),
        (vec![2], vec![3.0, 6.0])
    );
    assert_eq!(naive("ij->i", &[(&[2, 0], &[])]), (vec![2], vec![0.0, 0.0]));
    assert_eq!(naive("i", &[(&[0], &[])]), (vec![0], vec![]));
    // numpy's refusals.
    for (equation, shapes) in [
        ("i->ij", vec![vec![2]]),
        ("...->", vec![vec![1]]),
        ("ii", vec![vec![1, 3]]),
        ("i,i", vec![vec![2], vec![3]]),
        ("i.", vec![vec![2]]),
        ("i1", vec![vec![2, 2]]),
    ] {
        assert!(Plan::new(equation, &shapes).is_err(), "{equation}");
    }
}
