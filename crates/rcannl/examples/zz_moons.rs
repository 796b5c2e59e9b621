use rcannl::nn::blocks::Mlp;
use rcannl::nn::data::moons;
use rcannl::nn::loss::hinge;
use rcannl::nn::optim::Sgd;
use rcannl::prelude::*;
fn main() {
    let batch: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let iters: u32 = std::env::args()
        .nth(2)
        .unwrap_or("2000".into())
        .parse()
        .unwrap();
    let graph = Graph::new();
    let (xs, ys) = moons(batch, 0.1, 1);
    let x = graph
        .data("x")
        .shape(&format!("{batch}|->2"))
        .values(xs)
        .build();
    let y = graph
        .data("y")
        .shape(&format!("{batch}|->1"))
        .values(ys)
        .build();
    let model = Mlp::new(&graph, "mlp", &[16, 16, 1]);
    let loss = hinge(&model.apply(&x), &y, batch);
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let step = Sgd::new(&graph, &model.params(), 0.1, 0.9)
        .compile_step(&mut ctx, &loss)
        .unwrap();
    if std::env::var("SHOW").is_ok() {
        println!("{}", step.describe());
    }
    for _ in 0..100 {
        ctx.run(&step).unwrap();
    }
    let t = std::time::Instant::now();
    for _ in 0..iters {
        ctx.run(&step).unwrap();
        let _ = ctx.values(&loss).unwrap()[0];
    }
    eprintln!("step {:?}", t.elapsed() / iters);
}
