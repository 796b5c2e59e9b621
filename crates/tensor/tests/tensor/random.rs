//! Counter-based randomness on the host: parameters are initialized once, and random words fan
//! out into four floats each. That every backend draws the same bits is the conformance suite's
//! (`rcannl-fuzz`'s `tests/conformance/random.rs`).

use rcannl_backends::cc::Compiler;
use rcannl_tensor::{Context, Graph, Init};

#[test]
fn parameters_are_initialized_once() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("8")
        .init(Init::Uniform(-1.0, 1.0))
        .build();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let first = ctx.values(&w).unwrap();
    ctx.set_values(&w, &[1.0; 8]).unwrap();
    ctx.init_params().unwrap();
    assert_eq!(ctx.values(&w).unwrap(), vec![1.0; 8]);
    assert_ne!(first, vec![1.0; 8]);
}

#[test]
fn random_words_fan_out_into_four_floats_each() {
    let graph = Graph::new();
    let counters = graph
        .data("counters")
        .shape("8")
        .precision(rcannl_ir::Precision::U32)
        .values((0..8).map(f64::from).collect())
        .build();
    let words = graph.seed().threefry(&counters);
    let floats = words.to_uniform(rcannl_ir::Precision::F32);
    let target = graph
        .data("target")
        .shape("32")
        .values(vec![0.0; 32])
        .build();
    let sum = &floats + &target;
    let mut ctx = Context::with_backend(&graph, Box::new(Compiler::find().expect("a C compiler")));
    ctx.set_seed(5);
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.run(&forward).unwrap();
    let expected: Vec<f64> = (0..8u32)
        .flat_map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            rcannl_ir::value::uniform(
                rcannl_ir::threefry4x32([5, 0, 0, 0], counter),
                rcannl_ir::Precision::F32,
            )
        })
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(ctx.values(&sum).unwrap(), expected);
}

/// The stream is pinned: a seed gives the same parameters from one version to the next (these
/// values were drawn by the compiled initialization routine that preceded the host's draws), so
/// a model written with a seed trains from the same start.
#[test]
fn a_seed_draws_the_same_parameters_across_versions() {
    let graph = Graph::new();
    let _w = graph.param("w").shape("64->32").build();
    let u = graph
        .param("u")
        .shape("1000")
        .init(Init::Uniform(2.0, 3.0))
        .build();
    let n = graph
        .param("n")
        .shape("4001")
        .init(Init::Normal(1.0, 0.5))
        .build();
    let mut ctx = Context::new(&graph);
    ctx.set_seed(3);
    ctx.init_params().unwrap();
    let first = |t| ctx.values(t).unwrap()[..3].to_vec();
    let [u, n] = [first(&u), first(&n)];
    assert_eq!(
        u,
        [2.8531808853149414, 2.0043580532073975, 2.4511635303497314]
    );
    assert_eq!(
        n,
        [1.1043490171432495, -0.448515385389328, 0.2050144225358963]
    );
}

/// Thousands of one-cell parameters (a model's scalar gains, say) are drawn at once, without a
/// routine to compile for them.
#[test]
fn thousands_of_scalar_parameters_initialize_at_once() {
    let graph = Graph::new();
    let scalars: Vec<_> = (0..3000)
        .map(|i| {
            let init = if i % 2 == 0 {
                Init::Normal(0.0, 1.0)
            } else {
                Init::Constant(0.25)
            };
            graph.param(&format!("g{i}")).shape("1").init(init).build()
        })
        .collect();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let values: Vec<f64> = scalars.iter().map(|s| ctx.values(s).unwrap()[0]).collect();
    assert!(values.iter().skip(1).step_by(2).all(|v| *v == 0.25));
    let normal: Vec<f64> = values.iter().step_by(2).copied().collect();
    let mean = normal.iter().sum::<f64>() / normal.len() as f64;
    assert!(mean.abs() < 0.1, "{mean}");
    // Each tensor its own stream: no two scalars alike.
    let mut sorted = normal.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(sorted.windows(2).all(|w| w[0] != w[1]));
}
