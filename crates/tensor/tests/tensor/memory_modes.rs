//! Memory modes chosen by the user (`Tensor::set_memory_mode`): a materialized intermediate is
//! read back after the routine computing it, a virtual one is recomputed where it is read and
//! gives the same values, and a choice that cannot be honoured is an error naming the tensor. On
//! both CPU backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{MemoryMode, Precision};
use rcannl_tensor::{Axes, Context, Graph, Tensor};

use crate::macros::close;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

const XS: [f64; 6] = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5];

/// `h = exp(x) + 1` over `x` of `2|->3`, then `y`, the sums of `h`'s rows times `x`.
fn model(graph: &Graph) -> (Tensor, Tensor, Tensor) {
    let x = graph
        .data("x")
        .shape("2|->3")
        .precision(Precision::F64)
        .values(XS.to_vec())
        .build();
    let h = &x.exp() + 1.0;
    let y = h.sum_over(Axes::output()).pmul(&x);
    (x, h, y)
}

/// `h` and `y` as `model` computes them.
fn expected() -> (Vec<f64>, Vec<f64>) {
    let h: Vec<f64> = XS.iter().map(|x| x.exp() + 1.0).collect();
    let sums = [h[..3].iter().sum::<f64>(), h[3..].iter().sum::<f64>()];
    let y = XS
        .iter()
        .enumerate()
        .map(|(i, x)| sums[i / 3] * x)
        .collect();
    (h, y)
}

#[test]
fn a_materialized_intermediate_is_read_after_the_routine_computing_it() {
    let (h_want, y_want) = expected();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let (_, h, y) = model(&graph);
        h.set_memory_mode(MemoryMode::Materialized);
        assert_eq!(h.memory_mode(), Some(MemoryMode::Materialized));
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&y]).unwrap();
        ctx.run(&forward).unwrap();
        close(&ctx.values(&y).unwrap(), &y_want, name);
        close(&ctx.values(&h).unwrap(), &h_want, name);
    }
    // Without the choice, the intermediate is not handed back.
    let graph = Graph::new();
    let (_, h, y) = model(&graph);
    assert_eq!(h.memory_mode(), None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.run(&forward).unwrap();
    let e = ctx.values(&h).unwrap_err().message;
    assert!(e.contains(&format!("'{}'", h.label())), "{e}");
}

#[test]
fn a_virtual_intermediate_gives_the_same_values() {
    let (_, y_want) = expected();
    for mode in [MemoryMode::Virtual, MemoryMode::Local] {
        for backend in backends() {
            let name = backend.name();
            let graph = Graph::new();
            let (_, h, y) = model(&graph);
            h.set_memory_mode(mode);
            let mut ctx = Context::with_backend(&graph, backend);
            let forward = ctx.forward(&[&y]).unwrap();
            ctx.run(&forward).unwrap();
            close(&ctx.values(&y).unwrap(), &y_want, &format!("{name} {mode}"));
        }
    }
}

/// The error of compiling a forward of `outputs` on the interpreter.
fn forward_error(graph: &Graph, outputs: &[&Tensor]) -> String {
    Context::with_backend(graph, Box::new(Interpreter))
        .forward(outputs)
        .unwrap_err()
        .message
}

#[test]
fn a_virtual_tensor_that_cannot_be_recomputed_where_read_is_an_error_naming_it() {
    // A concatenation is written part by part, by one statement each: no one expression
    // computes a cell of it where it is read.
    let graph = Graph::new();
    let (x, h, _) = model(&graph);
    let both = Tensor::concat("r|a; r|b => r|a^b", &[&x, &h]);
    let y = &both * 2.0;
    both.set_memory_mode(MemoryMode::Virtual);
    let e = forward_error(&graph, &[&y]);
    assert!(
        e.contains(&format!("'{}'", both.label())) && e.contains("cannot be inlined"),
        "{e}"
    );
    // As scratch storage for the run, it computes.
    both.set_memory_mode(MemoryMode::Local);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&y).unwrap().len(), 12);
}

#[test]
fn a_tensor_a_routine_keeps_stays_materialized() {
    let graph = Graph::new();
    let (_, h, y) = model(&graph);
    y.set_memory_mode(MemoryMode::Virtual);
    let e = forward_error(&graph, &[&y]);
    assert!(
        e.contains(&format!("tensor '{}' was made virtual", y.label())),
        "{e}"
    );
    let w = graph.param("w").values(vec![1.0, 2.0, 3.0]).build();
    let z = h.pmul(&w);
    w.set_memory_mode(MemoryMode::Local);
    let e = forward_error(&graph, &[&z]);
    assert!(e.contains("tensor 'w' was made local"), "{e}");
}
