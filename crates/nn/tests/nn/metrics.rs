//! The mean squared error, argmax and the accuracies on both CPU backends, against hand
//! computation; the error's gradient by finite differences.

use rcannl_backends::Backend;
use rcannl_nn::loss::mse;
use rcannl_nn::metrics::{accuracy, argmax, binary_accuracy};
use rcannl_tensor::{Context, Graph, Tensor};

use crate::support::{backends, check, data};

/// The cells of `build`'s result on `backend`.
fn values(backend: Box<dyn Backend>, build: impl Fn(&Graph) -> Tensor) -> Vec<f64> {
    let graph = Graph::new();
    let y = build(&graph);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.run(&forward).unwrap();
    ctx.values(&y).unwrap()
}

#[test]
fn mse_is_the_mean_of_squared_differences_over_every_cell() {
    for backend in backends() {
        let name = backend.name();
        let got = values(backend, |g| {
            let p = data(
                g,
                "p",
                "2|3->2",
                vec![1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.],
            );
            let t = data(
                g,
                "t",
                "2|3->2",
                vec![0., 2., 5., 4., 5., 3., 7., 9., 9., 10., 11., 8.],
            );
            mse(&p, &t)
        });
        // Squared differences 1, 0, 4, 0, 0, 9, 0, 1, 0, 0, 0, 16: 31 over 12 cells.
        assert_eq!(got.len(), 1, "{name}");
        assert!((got[0] - 31.0 / 12.0).abs() < 1e-12, "{name}: {got:?}");
    }
}

#[test]
fn mse_counts_the_cells_of_the_broadcast_difference() {
    for backend in backends() {
        let name = backend.name();
        // A target broadcast over the batch: the count is the difference's cells (6).
        let got = values(backend, |g| {
            let p = data(g, "p", "2|->3", vec![1., 2., 3., 4., 5., 6.]);
            let t = data(g, "t", "3", vec![1., 1., 1.]);
            mse(&p, &t)
        });
        // 0 + 1 + 4 + 9 + 16 + 25 = 55 over 6.
        assert!((got[0] - 55.0 / 6.0).abs() < 1e-12, "{name}: {got:?}");
    }
}

#[test]
fn mse_gradient_matches_finite_differences() {
    check("mse", &["3|->2", "3|->2"], |_, p| mse(&p[0], &p[1]));
    check("mse against a broadcast target", &["3|->2", "2"], |_, p| {
        mse(&p[0], &p[1])
    });
}

#[test]
fn argmax_is_the_first_largest_position_of_the_last_axis() {
    for backend in backends() {
        let name = backend.name();
        let got = values(backend, |g| {
            let scores = data(
                g,
                "scores",
                "4|->3",
                vec![
                    0.1, 0.7, 0.2, // 1
                    5.0, -1.0, 5.0, // a tie: the first, 0
                    -3.0, -2.0, -1.0, // 2
                    2.0, 2.0, 2.0, // all equal: 0
                ],
            );
            argmax(&scores)
        });
        assert_eq!(got, vec![1., 0., 2., 0.], "{name}");
    }
}

#[test]
fn argmax_over_more_output_axes_is_per_position_of_the_others() {
    for backend in backends() {
        let name = backend.name();
        let got = values(backend, |g| {
            let scores = data(g, "scores", "2,2", vec![1., 3., 4., 2.]);
            argmax(&scores)
        });
        assert_eq!(got, vec![1., 0.], "{name}");
    }
}

#[test]
fn argmax_removes_the_axis_and_takes_no_gradient() {
    let graph = Graph::new();
    let scores = graph.param("scores").shape("5|->3").build();
    let indices = argmax(&scores);
    assert!(!indices.is_differentiable());
    let mut ctx = Context::with_backend(&graph, backends().remove(0));
    assert_eq!(ctx.rows(&indices).unwrap(), [vec![5], vec![], vec![]]);
}

#[test]
fn accuracy_of_one_hot_labels() {
    for backend in backends() {
        let name = backend.name();
        let got = values(backend, |g| {
            let scores = data(
                g,
                "scores",
                "4|->3",
                vec![
                    0.1, 0.7, 0.2, 5.0, -1.0, 5.0, -3.0, -2.0, -1.0, 0.0, 1.0, 0.5,
                ],
            );
            let labels = data(
                g,
                "labels",
                "4|->3",
                vec![0., 1., 0., 0., 0., 1., 0., 0., 1., 1., 0., 0.],
            );
            accuracy(&scores, &labels)
        });
        // Right, wrong (the tie goes to class 0), right, wrong: 2 of 4.
        assert_eq!(got, vec![0.5], "{name}");
    }
}

#[test]
fn accuracy_of_plus_minus_one_labels() {
    for backend in backends() {
        let name = backend.name();
        let got = values(backend, |g| {
            let scores = data(g, "scores", "5|->1", vec![0.3, -2.0, 1.5, 0.0, -0.1]);
            let labels = data(g, "labels", "5|->1", vec![1., -1., -1., 1., -1.]);
            binary_accuracy(&scores, &labels)
        });
        // Right, right, wrong, wrong (a zero score), right: 3 of 5.
        assert!((got[0] - 0.6).abs() < 1e-12, "{name}: {got:?}");
    }
}
