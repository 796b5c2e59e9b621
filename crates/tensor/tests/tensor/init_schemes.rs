//! Parameter initialization: the fan-based schemes read fan-in and fan-out from inferred shapes,
//! the graph's default applies to parameters without an init of their own, an init may be a
//! tensor expression; and data tensors built with `requires_grad` take gradients. On both CPU
//! backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// A parameter of `outputs` outputs applied to data of `inputs` values: its input size comes
/// from use only.
fn layer(graph: &Graph, init: Init, inputs: usize, outputs: usize) -> (Tensor, Tensor) {
    let w = graph.param("w").output([outputs]).init(init).build();
    let x = graph
        .data("x")
        .output([inputs])
        .values(vec![1.0; inputs])
        .build();
    (w.clone(), &w * &x)
}

fn values(backend: Box<dyn Backend>, graph: &Graph, w: &Tensor, out: &Tensor) -> Vec<f64> {
    let mut ctx = Context::with_backend(graph, backend);
    ctx.forward(&[out]).unwrap();
    ctx.init_params().unwrap();
    ctx.values(w).unwrap()
}

fn mean_and_variance(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, variance)
}

#[test]
fn fan_based_schemes_draw_with_the_variance_their_fans_give() {
    let (inputs, outputs) = (96, 32);
    // (scheme, bound if uniform, variance)
    let cases = [
        (
            Init::KaimingUniform,
            Some((6.0 / inputs as f64).sqrt()),
            2.0 / inputs as f64,
        ),
        (Init::KaimingNormal, None, 2.0 / inputs as f64),
        (
            Init::KaimingUniformFanOut,
            Some((6.0 / outputs as f64).sqrt()),
            2.0 / outputs as f64,
        ),
        (Init::KaimingNormalFanOut, None, 2.0 / outputs as f64),
        (
            Init::XavierUniform,
            Some((6.0 / (inputs + outputs) as f64).sqrt()),
            2.0 / (inputs + outputs) as f64,
        ),
        (Init::XavierNormal, None, 2.0 / (inputs + outputs) as f64),
        (
            Init::LecunUniform,
            Some((3.0 / inputs as f64).sqrt()),
            1.0 / inputs as f64,
        ),
    ];
    for (init, bound, variance) in cases {
        let mut drawn = Vec::new();
        for backend in backends() {
            let name = backend.name();
            let graph = Graph::new();
            let (w, out) = layer(&graph, init.clone(), inputs, outputs);
            let got = values(backend, &graph, &w, &out);
            assert_eq!(got.len(), inputs * outputs);
            if let Some(bound) = bound {
                assert!(
                    got.iter().all(|v| v.abs() < bound),
                    "{init:?} on {name}: a value beyond ±{bound}"
                );
            }
            let (mean, var) = mean_and_variance(&got);
            // 3072 draws: the sample variance is within a few percent of the true one.
            assert!(
                mean.abs() < 0.1 * variance.sqrt(),
                "{init:?} on {name}: mean {mean}"
            );
            assert!(
                (var / variance - 1.0).abs() < 0.1,
                "{init:?} on {name}: variance {var}, expected {variance}"
            );
            drawn.push(got);
        }
        // f32 values from f64 draws rounded once: equal on both backends.
        assert_eq!(drawn[0], drawn[1], "{init:?}");
    }
}

#[test]
fn the_graph_default_applies_to_parameters_without_their_own_init() {
    let graph = Graph::new();
    graph.set_default_init(Init::Constant(0.5));
    let (w, out) = layer(&graph, Init::Default, 4, 2);
    let own = graph
        .param("own")
        .output([2])
        .init(Init::Constant(-1.0))
        .build();
    let out = &out + &own;
    let got = values(Box::new(Interpreter), &graph, &w, &out);
    assert_eq!(got, vec![0.5; 8]);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.forward(&[&out]).unwrap();
    ctx.init_params().unwrap();
    assert_eq!(ctx.values(&own).unwrap(), vec![-1.0; 2]);

    let per_parameter = Graph::new();
    per_parameter.set_default_init(Init::Values(vec![1.0]));
    let message = per_parameter.check().unwrap_err().to_string();
    assert!(
        message.contains("set_default_init") && message.contains("one parameter's init"),
        "{message}"
    );
}

#[test]
fn an_init_expression_reads_other_parameters_and_takes_the_parameter_shape() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let base = graph
            .param("base")
            .input([3])
            .output([2])
            .values(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .build();
        let tied = graph
            .param("tied")
            .init(Init::Expr(&base * 3.0 + 1.0))
            .build();
        let noise = graph.normal("noise");
        let scaled = graph.param("scaled").init(Init::Expr(noise * 0.5)).build();
        let x = graph.data("x").output([3]).values(vec![1.0; 3]).build();
        let out = &(&(&tied * &x) + &(&base * &x)) + &(&scaled * &x);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.forward(&[&out]).unwrap();
        ctx.init_params().unwrap();
        assert_eq!(
            ctx.values(&tied).unwrap(),
            vec![4.0, 7.0, 10.0, 13.0, 16.0, 19.0],
            "{name}"
        );
        assert_eq!(
            ctx.rows(&tied).unwrap(),
            [vec![], vec![3], vec![2]],
            "{name}"
        );
        let drawn = ctx.values(&scaled).unwrap();
        assert_eq!(drawn.len(), 6, "{name}");
        assert!(drawn.iter().all(|v| v.abs() < 4.0), "{name}: {drawn:?}");
    }
}

#[test]
fn data_built_with_requires_grad_takes_its_gradient() {
    // loss = ½·|W x|², so d loss / d x = Wᵀ W x.
    let w_values = [1.0, -2.0, 0.5, 3.0, 0.0, -1.0];
    let x_values = [0.5, -1.5, 2.0];
    let wx: Vec<f64> = (0..2)
        .map(|o| (0..3).map(|i| w_values[o * 3 + i] * x_values[i]).sum())
        .collect();
    let expected: Vec<f64> = (0..3)
        .map(|i| (0..2).map(|o| w_values[o * 3 + i] * wx[o]).sum())
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .input([3])
            .output([2])
            .precision(Precision::F64)
            .values(w_values.to_vec())
            .build();
        let x = graph
            .data("x")
            .output([3])
            .precision(Precision::F64)
            .values(x_values.to_vec())
            .requires_grad()
            .build();
        assert!(x.is_differentiable());
        let y = &w * &x;
        let loss = y.pmul(&y).einsum1("...|...->... => 0") * 0.5;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run(&backprop).unwrap();
        let got = ctx.grad(&x).unwrap();
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() < 1e-12, "{name}: {got:?} vs {expected:?}");
        }
    }
    // Without any parameter, a data tensor with `requires_grad` is what backprop differentiates.
    let graph = Graph::new();
    let x = graph
        .data("x")
        .output([2])
        .values(vec![3.0, -1.0])
        .requires_grad()
        .build();
    let loss = x.pmul(&x).einsum1("...|...->... => 0");
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    assert_eq!(ctx.grad(&x).unwrap(), vec![6.0, -2.0]);
}

/// Two models on one graph over the same data: an encoder `h`, a head `y` on it, and another
/// model `z` beside them.
struct TwoModels {
    graph: Graph,
    x: Tensor,
    params: [Tensor; 4],
    h: Tensor,
    y: Tensor,
    z: Tensor,
}

fn two_models() -> TwoModels {
    let graph = Graph::new();
    let x = graph.data("x").shape("2|->3").values(vec![1.0; 6]).build();
    let w1 = graph.param("w1").output([4]).build();
    let b1 = graph.param("b1").build();
    let other = graph.param("other").output([2]).build();
    let h = (&w1 * &x + &b1).relu();
    let w2 = graph.param("w2").output([2]).build();
    let y = &w2 * &h;
    let z = &other * &x;
    TwoModels {
        graph,
        x,
        params: [w1, b1, other, w2],
        h,
        y,
        z,
    }
}

fn labels(tensors: &[Tensor]) -> Vec<String> {
    tensors.iter().map(Tensor::label).collect()
}

#[test]
fn a_tensors_params_are_those_it_is_computed_from() {
    let m = two_models();
    assert_eq!(labels(&m.h.params()), ["w1", "b1"]);
    assert_eq!(labels(&m.y.params()), ["w1", "b1", "w2"]);
    assert_eq!(labels(&m.z.params()), ["other"]);
    assert_eq!(labels(&m.params[3].params()), ["w2"]);
    assert!(m.x.params().is_empty());
    assert_eq!(labels(&m.graph.params()), ["w1", "b1", "other", "w2"]);
}

/// `init_params_of` draws a model's parameters again as `init_params` first drew them, leaves
/// the other parameters' values alone, draws anew under another seed (as a fresh context with
/// that seed does), and refuses a tensor that is no parameter before drawing anything.
#[test]
fn init_params_of_starts_a_model_over_and_leaves_the_rest() {
    for backend in backends() {
        let name = backend.name();
        let m = two_models();
        let mut ctx = Context::with_backend(&m.graph, backend);
        ctx.forward(&[&m.y, &m.z]).unwrap();
        ctx.init_params().unwrap();
        let first: Vec<Vec<f64>> = m.params.iter().map(|p| ctx.values(p).unwrap()).collect();
        let trained =
            |p: &Tensor| vec![0.5; first[m.params.iter().position(|q| q == p).unwrap()].len()];
        for p in &m.params {
            ctx.set_values(p, &trained(p)).unwrap();
        }
        let model = m.y.params();
        ctx.init_params_of(&model.iter().collect::<Vec<_>>())
            .unwrap();
        let [w1, b1, other, w2] = &m.params;
        for (p, first) in [(w1, &first[0]), (b1, &first[1]), (w2, &first[3])] {
            assert_eq!(&ctx.values(p).unwrap(), first, "{name}: {}", p.label());
        }
        assert_eq!(ctx.values(other).unwrap(), trained(other), "{name}");

        ctx.set_seed(7);
        ctx.init_params_of(&[w1]).unwrap();
        let reseeded = ctx.values(w1).unwrap();
        assert_ne!(reseeded, first[0], "{name}");
        let mut fresh = Context::with_backend(&m.graph, Box::new(Interpreter));
        fresh.set_seed(7);
        fresh.forward(&[&m.y]).unwrap();
        fresh.init_params().unwrap();
        assert_eq!(fresh.values(w1).unwrap(), reseeded, "{name}");

        ctx.set_values(w2, &trained(w2)).unwrap();
        let e = ctx.init_params_of(&[w2, &m.x]).unwrap_err().message;
        assert!(
            e.contains("'x'") && e.contains("not a parameter"),
            "{name}: {e}"
        );
        assert_eq!(ctx.values(w2).unwrap(), trained(w2), "{name}");
    }
}
