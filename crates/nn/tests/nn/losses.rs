//! Means and the hinge loss count the cells they average from the shapes, on both backends;
//! cross-entropy takes probabilities of the logits' shape or class ids, never one for the other;
//! with PyTorch's options (ignored ids, label smoothing, reductions) it gives PyTorch's values and
//! gradients over sequences, read from the arrays `tests/pytorch/cross_entropy/reference.py`
//! writes.

use std::path::PathBuf;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::loss::{
    IdsOptions, Reduction, cross_entropy, cross_entropy_ids, cross_entropy_ids_with, hinge, mean,
    sequence_cross_entropy,
};
use rcannl_tensor::{Context, Graph, Init, npy};

use crate::support;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn the_mean_of_eight_cells_divides_by_eight() {
    for backend in backends() {
        let graph = Graph::new();
        let d = graph
            .data("d")
            .shape("2|->4")
            .values((1..=8).map(f64::from).collect())
            .build();
        let m = mean(&d);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&m]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&m).unwrap(), vec![4.5]);
    }
}

#[test]
fn the_hinge_loss_averages_over_the_examples() {
    for backend in backends() {
        let graph = Graph::new();
        let scores = graph
            .data("scores")
            .shape("4|->1")
            .values(vec![2.0, 0.5, -1.0, -3.0])
            .build();
        let labels = graph
            .data("labels")
            .shape("4|->1")
            .values(vec![1.0, 1.0, 1.0, -1.0])
            .build();
        let loss = hinge(&scores, &labels);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&loss]).unwrap();
        ctx.run(&forward).unwrap();
        // max(0, 1 − y·f): 0, 0.5, 2, 0.
        assert_eq!(ctx.values(&loss).unwrap(), vec![2.5 / 4.0]);
    }
}

#[test]
fn class_ids_given_as_probabilities_are_an_error_naming_the_loss_to_use() {
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let ids = graph
        .data("ids")
        .shape("2|->4")
        .values(vec![1.0; 8])
        .build();
    let e = cross_entropy(&logits, &ids).error().expect("an error");
    assert!(
        e.message.contains("cross_entropy(logits 'logits'")
            && e.message.contains("use loss::cross_entropy_ids"),
        "{}",
        e.message
    );
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let probabilities = graph
        .data("p")
        .shape("2|->4,4")
        .values(vec![0.25; 32])
        .build();
    let loss = cross_entropy_ids(&logits, &probabilities);
    let e = loss.error().expect("an error");
    assert!(
        e.message.contains("cross_entropy_ids(logits 'logits'")
            && e.message.contains("use loss::cross_entropy "),
        "{}",
        e.message
    );
    // The graph's first error is the same: a context compiling anything reports it.
    let e = Context::new(&graph).forward(&[&loss]).unwrap_err();
    assert!(e.message.contains("cross_entropy_ids("), "{}", e.message);
    // Ids of fewer axes are not broadcast either.
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let ids = graph.data("ids").shape("2|->").values(vec![1.0; 2]).build();
    let e = cross_entropy_ids(&logits, &ids).error().expect("an error");
    assert!(e.message.contains("cross_entropy_ids("), "{}", e.message);
}

#[test]
fn cross_entropy_of_class_ids_is_log_sum_exp_minus_the_picked_logit() {
    let logits_values = rcannl_tensor::gradcheck::test_values(2 * 3 * 4, 7);
    let ids_values = vec![0.0, 3.0, 1.0, 2.0, 2.0, 0.0];
    let expected: Vec<f64> = logits_values
        .chunks(4)
        .zip(&ids_values)
        .map(|(row, id)| {
            let largest = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|x| (x - largest).exp()).sum();
            largest + sum.ln() - row[*id as usize]
        })
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let logits = support::data(&graph, "logits", "2|->3,4", logits_values.clone());
        let ids = graph
            .data("ids")
            .shape("2|->3")
            .values(ids_values.clone())
            .build();
        let loss = cross_entropy_ids(&logits, &ids);
        let equal_logits = graph
            .data("flat")
            .shape("2|->4,4")
            .values(vec![0.5; 32])
            .build();
        let flat_ids = graph
            .data("flat ids")
            .shape("2|->4")
            .values(vec![1.0; 8])
            .build();
        let uniform = mean(&cross_entropy_ids(&equal_logits, &flat_ids));
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&loss, &uniform]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&loss).unwrap(), vec![2, 3], "{name}");
        for (got, want) in ctx.values(&loss).unwrap().iter().zip(&expected) {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{name}: {got} vs {want}"
            );
        }
        let ln4 = ctx.values(&uniform).unwrap()[0];
        assert!((ln4 - 4f64.ln()).abs() < 1e-6, "{name}: {ln4}");
    }
    support::check("cross_entropy_ids", &["2|->3,4"], |graph, inputs| {
        let ids = graph
            .data("ids")
            .shape("2|->3")
            .precision(Precision::F64)
            .values(ids_values.clone())
            .build();
        cross_entropy_ids(&inputs[0], &ids).pmul(&support::weights(graph, "2|->3", 6))
    });
}

/// PyTorch's array `name` for the cross-entropy cases, its cells row-major.
fn pytorch(name: &str) -> Vec<f64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pytorch/cross_entropy")
        .join(format!("{name}.npy"));
    let reader = npy::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (_, cells) = reader
        .read_cells(usize::MAX)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    cells.into_iter().map(|c| c.as_f64()).collect()
}

/// Checks `got` against PyTorch's array `name` within f64's tolerance, relative to the larger of
/// each value and the largest one compared (cells near zero are differences of larger terms).
fn check_against_pytorch(what: &str, got: &[f64], name: &str) {
    let want = pytorch(name);
    assert_eq!(got.len(), want.len(), "{what}: number of cells");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let error = (g - w).abs() / w.abs().max(scale);
        assert!(
            error <= 1e-10,
            "{what}, cell {i}: {g} vs PyTorch's {w} (relative error {error:.2e})"
        );
    }
}

#[test]
fn cross_entropy_of_ids_with_options_matches_pytorch_over_sequences() {
    let both = IdsOptions::new().ignore_index(0).label_smoothing(0.1);
    let cases = [
        ("plain", "ids", IdsOptions::new()),
        ("ignore", "ids", IdsOptions::new().ignore_index(0)),
        ("smooth", "ids", IdsOptions::new().label_smoothing(0.1)),
        ("both", "ids", both),
        ("both_sum", "ids", both.reduction(Reduction::Sum)),
        ("both_none", "ids", both.reduction(Reduction::None)),
        (
            "outside",
            "outside_ids",
            IdsOptions::new().ignore_index(-100).label_smoothing(0.2),
        ),
    ];
    for (case, ids_name, options) in cases {
        for backend in backends() {
            let what = format!("{case} on {}", backend.name());
            let graph = Graph::new();
            let logits = graph
                .param("logits")
                .shape("2|->5,4")
                .precision(Precision::F64)
                .init(Init::Values(pytorch("logits")))
                .build();
            let ids = support::data(&graph, "ids", "2|->5", pytorch(ids_name));
            let loss = cross_entropy_ids_with(&logits, &ids, &options);
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            if options.reduction == Reduction::None {
                let forward = ctx.forward(&[&loss]).unwrap();
                ctx.run(&forward).unwrap();
                assert_eq!(ctx.dims(&loss).unwrap(), vec![2, 5], "{what}");
            } else {
                let backprop = ctx.backprop(&loss).unwrap();
                ctx.run(&backprop).unwrap();
                assert_eq!(ctx.dims(&loss).unwrap(), vec![1], "{what}");
                let grad = ctx.grad(&logits).unwrap();
                let name = format!("{case}.grad");
                check_against_pytorch(&format!("{what}: gradient"), &grad, &name);
            }
            let values = ctx.values(&loss).unwrap();
            check_against_pytorch(&what, &values, &format!("{case}.loss"));
        }
    }
}

#[test]
fn a_padding_mask_and_an_ignored_padding_id_give_pytorchs_loss() {
    let ids_values = pytorch("ids");
    let mask_values: Vec<f64> = ids_values.iter().map(|&id| f64::from(id != 0.0)).collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let logits = support::data(&graph, "logits", "2|->5,4", pytorch("logits"));
        let ids = support::data(&graph, "ids", "2|->5", ids_values.clone());
        let mask = support::data(&graph, "mask", "2|->5", mask_values.clone());
        let masked = sequence_cross_entropy(&logits, &ids, &mask);
        let ignored = cross_entropy_ids_with(&logits, &ids, &IdsOptions::new().ignore_index(0));
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&masked, &ignored]).unwrap();
        ctx.run(&forward).unwrap();
        for (what, loss) in [("masked", &masked), ("ignored", &ignored)] {
            let values = ctx.values(loss).unwrap();
            check_against_pytorch(&format!("{what} on {name}"), &values, "ignore.loss");
        }
    }
}

#[test]
fn an_ignored_position_adds_nothing_whatever_its_logits_hold() {
    let mut logits_values = rcannl_tensor::gradcheck::test_values(3 * 4, 5);
    logits_values[4..8].fill(f64::INFINITY);
    let ids_values = vec![2.0, 7.0, 1.0];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let logits = support::data(&graph, "logits", "3|->4", logits_values.clone());
        let ids = support::data(&graph, "ids", "3|->", ids_values.clone());
        let options = IdsOptions::new().ignore_index(7).label_smoothing(0.3);
        let each = cross_entropy_ids_with(&logits, &ids, &options.reduction(Reduction::None));
        let mean = cross_entropy_ids_with(&logits, &ids, &options);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&each, &mean]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&each).unwrap(), vec![3], "{name}");
        let each = ctx.values(&each).unwrap();
        assert!(each[0].is_finite() && each[0] > 0.0, "{name}: {each:?}");
        assert_eq!(each[1], 0.0, "{name}: {each:?}");
        let want = (each[0] + each[2]) / 2.0;
        let got = ctx.values(&mean).unwrap()[0];
        assert!(
            (got - want).abs() <= 1e-12 * want,
            "{name}: {got} vs {want}"
        );
    }
}

#[test]
fn ignored_ids_and_label_smoothing_pass_the_gradient_check() {
    let ids = vec![0.0, 3.0, 1.0, 2.0, 3.0, 3.0];
    let options = IdsOptions::new().ignore_index(3).label_smoothing(0.25);
    for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
        support::check(
            &format!("cross_entropy_ids_with, {reduction:?}"),
            &["2|->3,4"],
            |graph, inputs| {
                let ids = support::data(graph, "ids", "2|->3", ids.clone());
                let loss = cross_entropy_ids_with(&inputs[0], &ids, &options.reduction(reduction));
                match reduction {
                    Reduction::None => loss.pmul(&support::weights(graph, "2|->3", 6)),
                    _ => loss,
                }
            },
        );
    }
}

#[test]
fn a_label_smoothing_outside_zero_to_one_is_an_error() {
    for epsilon in [-0.1, 1.5, f64::NAN] {
        let graph = Graph::new();
        let logits = support::data(&graph, "logits", "2|->4", vec![0.0; 8]);
        let ids = support::data(&graph, "ids", "2|->", vec![1.0, 2.0]);
        let options = IdsOptions::new().label_smoothing(epsilon);
        let e = cross_entropy_ids_with(&logits, &ids, &options)
            .error()
            .expect("an error");
        assert!(
            e.message.contains("cross_entropy_ids_with(logits 'logits'")
                && e.message.contains("label_smoothing")
                && e.message.contains("between 0 and 1"),
            "{}",
            e.message
        );
    }
}

#[test]
fn a_library_function_misused_names_the_call_and_where_the_user_wrote_it() {
    let graph = Graph::new();
    let x = graph.data("x").shape("4|->3").build();
    let targets = graph.data("targets").shape("4|->5").build();
    let linear = rcannl_nn::blocks::Linear::new(&graph, "linear", 2);
    let (loss, line) = (cross_entropy(&linear.apply(&x), &targets), line!());
    let mut ctx = Context::new(&graph);
    let message = ctx.forward(&[&mean(&loss)]).unwrap_err().to_string();
    let site = format!("nn::loss::cross_entropy, called at {}:{line}:", file!());
    assert!(message.contains(&site), "{message}");
    // Found only when shapes close, the error still points at the call that built the tensor.
    let graph = Graph::new();
    let images = graph.data("images").shape("2|->5,5,3").build();
    let conv = rcannl_nn::conv::Conv2d::new(
        &graph,
        "conv",
        4,
        7,
        rcannl_nn::conv::ConvOptions::default(),
    );
    let (features, line) = (conv.apply(&images), line!());
    let mut ctx = Context::new(&graph);
    let message = ctx.forward(&[&features]).unwrap_err().to_string();
    let site = format!("nn::conv::Conv2d::apply, called at {}:{line}:", file!());
    assert!(message.contains(&site), "{message}");
}
