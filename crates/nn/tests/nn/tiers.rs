//! The C backend's tiers in a training loop: a step that starts on the quick build and takes the
//! optimized one mid-training computes, bit for bit, what a step built optimized from the start
//! computes, and says which build runs.

use rcannl_backends::cc::Compiler;
use rcannl_nn::blocks::Mlp;
use rcannl_nn::loss::{hinge, mean};
use rcannl_nn::optim::Adam;
use rcannl_tensor::{Context, Graph};

/// Steps of the moons MLP (2 → 64 → 64 → 1, mean hinge loss, Adam) on `compiler`, caching in a
/// fresh folder; the optimized build is waited for before step `swap_at`. Each step's loss, and
/// which build ran it.
fn train(compiler: Compiler, swap_at: usize) -> (Vec<f32>, Vec<String>) {
    let cache =
        std::env::temp_dir().join(format!("rcannl-tiers-{}-{}", std::process::id(), swap_at));
    let _ = std::fs::remove_dir_all(&cache);
    let graph = Graph::new();
    let (x, y) = rcannl_nn::data::moons(64, 0.1, 1);
    let x = graph.data("x").shape("64|->2").values(x).build();
    let y = graph.data("y").shape("64|->1").values(y).build();
    let mlp = Mlp::new(&graph, "mlp", &[64, 64, 1]);
    let loss = mean(&hinge(&mlp.apply(&x), &y));
    let mut adam = Adam::new(&graph, &mlp.params(), 0.01);
    let backend = compiler.with_cache_dir(&cache);
    let mut ctx = Context::with_backend(&graph, Box::new(backend));
    ctx.init_params().unwrap();
    let step = adam.compile_step(&mut ctx, &loss).unwrap();
    let (mut losses, mut tiers) = (Vec::new(), Vec::new());
    for i in 0..8 {
        if i == swap_at {
            step.finish_compiling().unwrap();
        }
        ctx.run(&step).unwrap();
        losses.push(ctx.values(&loss).unwrap()[0] as f32);
        tiers.push(step.tier().unwrap());
    }
    drop(ctx);
    let _ = std::fs::remove_dir_all(&cache);
    (losses, tiers)
}

#[test]
fn a_step_that_swaps_to_its_optimized_build_stays_on_the_same_course() {
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    if compiler.quick_tier().is_none() {
        println!("the C flags do not optimize: there is no quick tier");
        return;
    }
    let (optimized, straight) = train(compiler.clone().with_tiers(false), usize::MAX);
    assert!(
        straight.iter().all(|tier| tier == "optimized"),
        "{straight:?}"
    );
    let (tiered, tiers) = train(compiler.with_tiers(true), 3);
    assert!(tiers[0].starts_with("quick"), "{tiers:?}");
    assert!(
        tiers[3..].iter().all(|tier| tier.starts_with("optimized")),
        "{tiers:?}"
    );
    let bits = |losses: &[f32]| losses.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&optimized), bits(&tiered), "{optimized:?} {tiered:?}");
    // The run trained: the losses fell.
    assert!(optimized[7] < optimized[0], "{optimized:?}");
}
