//! Sums, means and maxima over chosen axes ([`Axes`]) on both backends: values against a naive
//! reduction of the same cells, shapes, the mean's count (inferred, never given), finite
//! difference checks of the gradients, and errors for axes a tensor does not have.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Axes, Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// What a reduction does with the cells it reduces.
#[derive(Debug, Clone, Copy)]
enum Reduction {
    Sum,
    Mean,
    Max,
}

impl Reduction {
    fn apply(self, x: &Tensor, axes: Axes) -> Tensor {
        match self {
            Reduction::Sum => x.sum_over(axes),
            Reduction::Mean => x.mean_over(axes),
            Reduction::Max => x.max_over(axes),
        }
    }

    fn of(self, cells: &[f64]) -> f64 {
        match self {
            Reduction::Sum => cells.iter().sum(),
            Reduction::Mean => cells.iter().sum::<f64>() / cells.len() as f64,
            Reduction::Max => cells.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// The naive reduction of row-major `values` of `dims` over the axes `reduced` marks: the kept
/// axes in their order.
fn naive(dims: &[usize], values: &[f64], reduced: &[bool], reduction: Reduction) -> Vec<f64> {
    let kept: Vec<usize> = (0..dims.len()).filter(|&a| !reduced[a]).collect();
    let kept_cells: usize = kept.iter().map(|&a| dims[a]).product();
    let mut groups = vec![Vec::new(); kept_cells];
    for (offset, &value) in values.iter().enumerate() {
        // The cell's coordinates, last axis fastest.
        let mut rest = offset;
        let mut coordinates = vec![0; dims.len()];
        for axis in (0..dims.len()).rev() {
            coordinates[axis] = rest % dims[axis];
            rest /= dims[axis];
        }
        let group = kept
            .iter()
            .fold(0, |group, &a| group * dims[a] + coordinates[a]);
        groups[group].push(value);
    }
    groups.iter().map(|cells| reduction.of(cells)).collect()
}

/// 24 distinct values of both signs, not in order (so that maxima move around).
fn values() -> Vec<f64> {
    (0..24).map(|i| f64::from((i * 7) % 24) - 11.5).collect()
}

/// `x` is `2|2->3,2`: dims in memory order [2 (batch), 3, 2 (output), 2 (input)].
const SHAPE: &str = "2|2->3,2";
const DIMS: [usize; 4] = [2, 3, 2, 2];

/// Each choice of axes, the memory-order axes it reduces, and the result's shape.
fn cases() -> Vec<(&'static str, Axes, [bool; 4], &'static str)> {
    vec![
        (
            "batch",
            Axes::batch(),
            [true, false, false, false],
            "|2->3,2",
        ),
        (
            "output",
            Axes::output(),
            [false, true, true, false],
            "2|2->",
        ),
        (
            "input",
            Axes::input(),
            [false, false, false, true],
            "2|->3,2",
        ),
        (
            "output 0",
            Axes::output_axis(0),
            [false, true, false, false],
            "2|2->2",
        ),
        (
            "output -1",
            Axes::output_axis(-1),
            [false, false, true, false],
            "2|2->3",
        ),
        (
            "output 1 kept",
            Axes::output_axis(1).keep_dims(),
            [false, false, true, false],
            "2|2->3,1",
        ),
        (
            "batch and output -2",
            Axes::batch().and(Axes::output_axis(-2)),
            [true, true, false, false],
            "|2->2",
        ),
        (
            "input 0 and batch -1",
            Axes::input_axis(0).and(Axes::batch_axis(-1)),
            [true, false, false, true],
            "|->3,2",
        ),
        ("all", Axes::all(), [true, true, true, true], "|->"),
        (
            "spec",
            Axes::spec("b|i->o,p => b|->p"),
            [false, true, false, true],
            "2|->2",
        ),
    ]
}

#[test]
fn reductions_match_a_naive_reduction() {
    for backend in backends() {
        let backend_name = backend.name();
        let graph = Graph::new();
        let x = graph.data("x").shape(SHAPE).values(values()).build();
        let mut results = Vec::new();
        for (name, axes, reduced, shape) in cases() {
            for reduction in [Reduction::Sum, Reduction::Mean, Reduction::Max] {
                let t = reduction.apply(&x, axes.clone());
                results.push((name, reduced, shape, reduction, t));
            }
        }
        let mut ctx = Context::with_backend(&graph, backend);
        let outputs: Vec<&Tensor> = results.iter().map(|r| &r.4).collect();
        let forward = ctx.forward(&outputs).unwrap();
        ctx.run(&forward).unwrap();
        for (name, reduced, shape, reduction, t) in &results {
            let what = format!("{reduction:?} over {name} on {backend_name}");
            assert_eq!(t.shape(), *shape, "{what}");
            let expected = naive(&DIMS, &values(), reduced, *reduction);
            let got = ctx.values(t).unwrap();
            assert_eq!(got.len(), expected.len(), "{what}");
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).abs() < 1e-5, "{what}: {got:?} vs {expected:?}");
            }
        }
    }
}

#[test]
fn the_mean_of_eight_cells_divides_by_eight() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("2|->4")
            .values((1..=8).map(f64::from).collect())
            .build();
        let everything = x.mean_over(Axes::all());
        let per_example = x.mean_over(Axes::output());
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&everything, &per_example]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&everything).unwrap(), vec![4.5]);
        assert_eq!(ctx.values(&per_example).unwrap(), vec![2.5, 6.5]);
    }
}

#[test]
fn kept_axes_broadcast_back_against_the_tensor() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph.data("x").shape(SHAPE).values(values()).build();
        let centered = &x - &x.mean_over(Axes::output_axis(-1).keep_dims());
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&centered]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(centered.shape(), "2|2->3,2");
        // Along the last output axis (stride 2 in memory: the input axis is inside it), each
        // pair of cells minus their mean.
        let x = values();
        let mut expected = x.clone();
        for base in (0..24).filter(|i| i % 4 < 2) {
            let mean = (x[base] + x[base + 2]) / 2.0;
            expected[base] = x[base] - mean;
            expected[base + 2] = x[base + 2] - mean;
        }
        let got = ctx.values(&centered).unwrap();
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() < 1e-5, "{got:?} vs {expected:?}");
        }
    }
}

#[test]
fn a_mean_over_every_axis_is_a_loss_with_gradient_one_over_the_count() {
    for backend in backends() {
        let graph = Graph::new();
        let p = graph.param("p").shape("2|3->4").values(values()).build();
        let loss = p.mean_over(Axes::all());
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx.backprop(&loss).unwrap();
        ctx.run(&step).unwrap();
        let mean = values().iter().sum::<f64>() / 24.0;
        assert!((ctx.values(&loss).unwrap()[0] - mean).abs() < 1e-5);
        for g in ctx.grad(&p).unwrap() {
            assert!((g - 1.0 / 24.0).abs() < 1e-7, "{g}");
        }
    }
}

#[test]
fn means_keep_the_precision_of_the_tensor() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("3")
        .precision(rcannl_ir::Precision::F64)
        .values(vec![1.0, 2.0, 4.0])
        .build();
    let mean = x.mean_over(Axes::all());
    assert_eq!(mean.precision(), rcannl_ir::Precision::F64);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&mean]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&mean).unwrap(), vec![7.0 / 3.0]);
}

/// Checks `build`'s gradients with respect to one parameter of `shape`, on both backends.
fn check(name: &str, shape: &str, build: impl Fn(&Tensor) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs {
            shapes: &[shape],
            positive: false,
        };
        // Weighted, so that every cell of the result has its own gradient.
        let weighted = |graph: &Graph, p: &[Tensor]| {
            let r = build(&p[0]);
            let w = graph.range_of_shape("w").build();
            graph.same_shape(&w, &r);
            r.pmul(&(&w + 1.0))
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, weighted) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

#[test]
fn gradients_of_reductions() {
    for (name, axes, _, _) in cases() {
        check(&format!("sum over {name}"), SHAPE, |x| {
            x.sum_over(axes.clone())
        });
        check(&format!("mean over {name}"), SHAPE, |x| {
            x.mean_over(axes.clone())
        });
        // The test values are distinct, so that every maximum has one arg max.
        check(&format!("max over {name}"), SHAPE, |x| {
            x.max_over(axes.clone())
        });
    }
}

#[test]
fn axes_a_tensor_lacks_are_errors() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2|->3").build();
    let too_far = x.sum_over(Axes::output_axis(1));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let e = ctx.forward(&[&too_far]).unwrap_err();
    assert!(e.message.contains("sum_over"), "{e}");
    assert!(e.message.contains("'x': 2|->3"), "{e}");

    let graph = Graph::new();
    let x = graph.data("x").shape("2|->3").build();
    let binary = x.mean_over(Axes::spec("i;j=>ij"));
    let e = binary.error().expect("a spec of two operands is refused");
    assert!(e.message.contains("mean_over of 'x'"), "{e}");
    assert!(e.message.contains("one operand"), "{e}");
    let mixed = x.max_over(Axes::spec("i=>").and(Axes::batch()));
    let e = mixed
        .error()
        .expect("a spec combined with more axes is refused");
    assert!(e.message.contains("max_over of 'x'"), "{e}");
}
