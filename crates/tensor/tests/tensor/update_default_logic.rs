//! `cd!` assignments written without `~logic` are pointwise (the design's default, OCANNL's
//! `"."`): a target declared with no shape takes the broadcast shape of what it reads, operands
//! of fewer axes broadcast to the target, any number of operands, and a one-cell target still
//! reduces; a target its operands cannot broadcast to is an error naming it and the assignment's
//! line. Each against hand computation on both CPU backends.

use crate::cpu::{assert_close, backends, data, unshaped};
use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, cd};

const G: [f64; 6] = [1.0, -2.0, 3.5, 0.5, -1.5, 2.0];
const BIAS: [f64; 3] = [10.0, -20.0, 0.25];

#[test]
fn state_declared_without_a_shape_takes_the_shape_of_what_it_reads() {
    let first: Vec<f64> = (0..6).map(|i| G[i] + BIAS[i % 3]).collect();
    let second: Vec<f64> = (0..6).map(|i| 0.5 * first[i] + G[i]).collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let grad = data(&graph, "grad", "2, 3", &G);
        let bias = data(&graph, "bias", "3", &BIAS);
        let m = unshaped(&graph, "m");
        let set = cd! { m =: grad + bias };
        let decay = cd! { m =: 0.5 * m + grad };
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&set).unwrap();
        assert_eq!(ctx.dims(&m).unwrap(), vec![2, 3], "{name}");
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&m).unwrap(), &first, name);
        let routine = ctx.update(&decay).unwrap();
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&m).unwrap(), &second, name);
    }
}

#[test]
fn operands_of_fewer_axes_broadcast_to_the_target() {
    // A row of 3 broadcasts over the 2 rows of `w`, a scalar over every cell.
    let want: Vec<f64> = (0..6).map(|i| G[i] - 0.1 * BIAS[i % 3]).collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = data(&graph, "w", "2, 3", &G);
        let bias = data(&graph, "bias", "3", &BIAS);
        let lr = data(&graph, "lr", "1", &[0.1]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&cd! { w =- lr * bias }).unwrap();
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&w).unwrap(), &want, name);
    }
}

#[test]
fn any_number_of_operands_broadcast_together() {
    let a = [1.0, -2.0, 3.5, 0.5, -1.5, 2.0];
    let b = [0.5, 4.0, -1.0, 2.0, 3.0, -0.25];
    let c = [2.0, 1.0, 0.5, -3.0, 0.75, 1.5];
    let want: Vec<f64> = (0..6)
        .map(|i| a[i] * b[i] - c[i] / BIAS[i % 3] + 0.5 * a[i])
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let [ta, tb, tc] = [("a", a), ("b", b), ("c", c)]
            .map(|(label, values)| data(&graph, label, "2, 3", &values));
        let bias = data(&graph, "bias", "3", &BIAS);
        let half = data(&graph, "half", "1", &[0.5]);
        let e = unshaped(&graph, "e");
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&cd! { e =: ta * tb - tc / bias + half * ta })
            .unwrap();
        assert_eq!(ctx.dims(&e).unwrap(), vec![2, 3], "{name}");
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&e).unwrap(), &want, name);
    }
}

#[test]
fn a_one_cell_target_reduces_everything_it_reads() {
    let squares: f64 = G.iter().map(|g| g * g).sum();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let grad = data(&graph, "grad", "2, 3", &G);
        let norm = data(&graph, "norm", "1", &[0.0]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&cd! { norm =:+ grad * grad; norm =: sqrt(norm) })
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&norm).unwrap(), &[squares.sqrt()], name);
    }
}

#[test]
fn a_target_its_operands_cannot_broadcast_to_is_an_error_naming_it() {
    let graph = Graph::new();
    let w = data(&graph, "w", "2, 3", &G);
    let x = data(&graph, "x", "4", &[1.0, 2.0, 3.0, 4.0]);
    let line = line!() + 1;
    let update = cd! { w =+ x };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let message = ctx.update(&update).unwrap_err().message;
    assert!(message.contains("update of 'w'"), "{message}");
    assert!(message.contains("'x'"), "{message}");
    assert!(
        message.contains(&format!("update_default_logic.rs:{line}")),
        "{message}"
    );
}

#[test]
fn state_declared_without_a_shape_starts_from_its_constant() {
    let first: Vec<f64> = G.to_vec();
    let second: Vec<f64> = G.iter().map(|g| 0.5 * g + g).collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let grad = data(&graph, "grad", "2, 3", &G);
        let m = graph
            .data("m")
            .precision(Precision::F64)
            .init(Init::Constant(0.0))
            .build();
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&cd! { m =: 0.5 * m + grad }).unwrap();
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&m).unwrap(), &first, name);
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&m).unwrap(), &second, name);
    }
}

#[test]
fn a_data_tensor_refuses_a_random_init_naming_it() {
    let graph = Graph::new();
    let m = graph.data("m").init(Init::Uniform(0.0, 1.0)).build();
    let message = graph.check().unwrap_err().message;
    assert!(message.contains("data tensor 'm'"), "{message}");
    assert!(
        message.contains("random draws are for parameters"),
        "{message}"
    );
    // Nothing stands in for the values it was not given.
    let ctx = Context::with_backend(&graph, Box::new(Interpreter));
    assert!(ctx.values(&m).is_err());
}

#[test]
fn an_intermediate_computes_in_the_precision_of_what_it_reads() {
    // A third in f32 is 0.3333333432674408: an intermediate held in f32 would carry that.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let one = data(&graph, "one", "2", &[1.0, 2.0]);
        let out = unshaped(&graph, "out");
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&cd! { { third } =: one / 3; out =: third })
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&out).unwrap(), [1.0 / 3.0, 2.0 / 3.0], "{name}");
    }
}

#[test]
fn state_given_no_precision_takes_that_of_what_it_is_written_from() {
    // A third in f32 is 0.3333333432674408: state held in f32 would carry that.
    let thirds = [1.0 / 3.0, 2.0 / 3.0];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let grad = data(&graph, "grad", "2", &thirds);
        let m = graph.data("m").init(Init::Constant(0.0)).build();
        let norm = graph.data("norm").shape("1").values(vec![0.0]).build();
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&cd! { m =: 0.5 * m + grad; norm =:+ grad })
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&m).unwrap(), thirds, "{name}");
        assert_eq!(ctx.values(&norm).unwrap(), [1.0], "{name}");
        assert_eq!(m.precision(), Precision::F64, "{name}");
    }
}
