use rcannl::nn::loss::sum;
use rcannl::prelude::*;
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (batch, size, ch, out) = (args[0], args[1], args[2], args[3]);
    let spec = std::env::var("SPEC")
        .unwrap_or("...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d".into());
    let graph = Graph::new();
    let n = batch * size * size * ch;
    let x = graph
        .param("x")
        .shape(&format!("{batch}|->{size},{size},{ch}"))
        .init(rcannl::tensor::Init::Values(
            (0..n).map(|i| (i % 7) as f64 * 0.1).collect(),
        ))
        .build();
    let kernel = graph
        .param("kernel")
        .shape(&format!("3,3,{ch}->{out}"))
        .build();
    let y = x.einsum(&spec, &kernel);
    let loss = sum(&y.pmul(&y));
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let r = ctx.backprop(&loss).unwrap();
    println!("{}", r.describe());
    if std::env::var("SRC").is_ok() {
        println!("{}", r.source().unwrap());
    }
    let t = std::time::Instant::now();
    let iters = 30;
    for _ in 0..iters {
        ctx.run(&r).unwrap();
    }
    eprintln!("step {:?}", t.elapsed() / iters);
}
