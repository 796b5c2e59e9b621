//! Counter-based randomness on the host: parameters are initialized once, random words fan
//! out into four floats each (into any axes, through projection inference), and uniform draws take the precision their users compute in. That
//! every backend draws the same bits is the conformance suite's (`rcannl-fuzz`'s
//! `tests/conformance/random.rs`).

use rcannl_backends::cc::Compiler;
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init};

use crate::cpu::backends;

/// `x + u` for `x` of zeros in `precision` and `u` uniform draws of its shape, on every CPU
/// backend: the draws as computed, and the sum's precision.
fn uniform_beside(precision: Precision) -> Vec<(Vec<f64>, Precision)> {
    backends()
        .into_iter()
        .map(|backend| {
            let graph = Graph::new();
            let x = graph
                .data("x")
                .shape("64")
                .precision(precision)
                .values(vec![0.0; 64])
                .build();
            let y = &x + &x.uniform_like();
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.forward(&[&y]).unwrap();
            ctx.run(&routine).unwrap();
            (ctx.values(&y).unwrap(), y.precision())
        })
        .collect()
}

#[test]
fn uniform_draws_take_the_precision_their_users_compute_in() {
    // f64: 53 random bits, most draws beyond f32's 24.
    let f64_draws = uniform_beside(Precision::F64);
    for (values, precision) in &f64_draws {
        assert_eq!(*precision, Precision::F64);
        assert!(values.iter().all(|u| (0.0..1.0).contains(u)), "{values:?}");
        let beyond_f32 = values
            .iter()
            .filter(|u| f64::from(**u as f32) != **u)
            .count();
        assert!(
            beyond_f32 > 32,
            "{beyond_f32} of 64 draws need more than f32: {values:?}"
        );
    }
    // bf16: the draws do not promote the sum to f32; each is a multiple of 2⁻⁸.
    for (values, precision) in uniform_beside(Precision::Bf16) {
        assert_eq!(precision, Precision::Bf16);
        assert!(
            values
                .iter()
                .all(|u| (u * 256.0).fract() == 0.0 && *u < 1.0),
            "{values:?}"
        );
    }
    // f32, the default: 24 bits, as before.
    for (values, precision) in uniform_beside(Precision::F32) {
        assert_eq!(precision, Precision::F32);
        assert!(values.iter().all(|u| (u * 2f64.powi(24)).fract() == 0.0));
    }
    // The interpreter and the C backend draw the same bits.
    assert_eq!(f64_draws[0].0, f64_draws[1].0);
}

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

/// A fan-out goes through projection inference: its loop runs over the words and each writes
/// its values from a multiple of its position, into whatever axes its use gives the result
/// (here batch 2, output 4 and input 3: the innermost axis is shorter than one word's values),
/// alike on every CPU backend; its printed code names its logic.
#[test]
fn random_words_fan_out_into_the_axes_their_use_gives() {
    let per_word = 8; // f16
    let words = 3;
    let expected: Vec<f64> = (0..words as u32)
        .flat_map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            rcannl_ir::value::uniform(
                rcannl_ir::threefry4x32([7, 0, 0, 0], counter),
                Precision::F16,
            )
        })
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(expected.len(), per_word * words);
    for backend in backends() {
        let graph = Graph::new();
        let counters = graph
            .data("counters")
            .shape(&words.to_string())
            .precision(Precision::U32)
            .values((0..words).map(|i| i as f64).collect())
            .build();
        let halves = graph.seed().threefry(&counters).to_uniform(Precision::F16);
        let zeros = graph
            .data("zeros")
            .shape("2|3->4")
            .precision(Precision::F16)
            .values(vec![0.0; 24])
            .build();
        graph.same_shape(&halves, &zeros);
        let sum = &halves + &zeros;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_seed(7);
        // The draws are kept too, for their print.
        let forward = ctx.forward(&[&sum, &halves]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&sum).unwrap(), expected);
        let printed = ctx
            .print(
                &halves,
                &rcannl_tensor::print::PrintOptions {
                    code: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(
            printed.contains(&format!("{} =: uint4x32_to_prec_uniform(", halves.label()))
                && printed.contains("~logic:\"U4x32\""),
            "{printed}"
        );
    }
}

/// A parameter's draws are the values of an ordinary tensor expression, which a routine computes
/// alike on every CPU backend: the key is Threefry of the seed and the parameter's id (a 64-bit
/// integer), word `w` is Threefry of the key and `w` (a 32-bit one), each word fans out into two
/// f64 uniforms of which cell `i` takes the `i`-th, and a uniform init scales them, the result
/// rounded once into the parameter's precision.
#[test]
fn a_parameters_draws_are_the_values_of_a_tensor_expression() {
    for backend in backends() {
        let graph = Graph::new();
        // 5 cells: 3 words, the last one's second value unused.
        let w = graph
            .param("w")
            .shape("5")
            .init(Init::Uniform(2.0, 3.0))
            .build();
        let id = graph.number_in(w.id() as f64, Precision::I64);
        let counters = graph
            .data("counters")
            .shape("3")
            .precision(Precision::U32)
            .values(vec![0.0, 1.0, 2.0])
            .build();
        let key = graph.seed().threefry(&id);
        let uniforms = key.threefry(&counters).to_uniform(Precision::F64);
        let drawn = &uniforms * 1.0 + 2.0;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_seed(11);
        ctx.init_params().unwrap();
        let routine = ctx.forward(&[&drawn]).unwrap();
        ctx.run(&routine).unwrap();
        let expected: Vec<f64> = ctx.values(&drawn).unwrap()[..5]
            .iter()
            .map(|v| f64::from(*v as f32))
            .collect();
        assert_eq!(ctx.values(&w).unwrap(), expected);
    }
}

/// The stream is pinned: a seed gives the same parameters from one version to the next (these
/// values were drawn by a hand-built initialization routine, then by host code, before the
/// draws became one tensor expression), so a model written with a seed trains from the same
/// start.
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

/// Thousands of one-cell parameters (a model's scalar gains, say) are drawn at once, by one
/// routine for all of them.
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
