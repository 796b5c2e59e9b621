//! Gradients set by the host (as a data-parallel run merges them) are what an update routine
//! reads, on both backends; a tensor without a kept gradient, or values of the wrong count, are
//! refused.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Formula, Graph, Update};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn an_update_reads_the_gradient_the_host_set() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .output([3])
            .values(vec![1.0, 2.0, 3.0])
            .build();
        let x = graph
            .data("x")
            .output([3])
            .values(vec![4.0, 5.0, 6.0])
            .build();
        let loss = w.pmul(&x).einsum1("...|...->... => 0");
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        let update = ctx
            .update(&[Update::subtract(&w, 0.5 * Formula::grad(&w))])
            .unwrap();
        ctx.run(&backprop).unwrap();
        assert_eq!(ctx.grad(&w).unwrap(), vec![4.0, 5.0, 6.0], "{name}");
        ctx.set_grad(&w, &[2.0, -4.0, 6.0]).unwrap();
        assert_eq!(ctx.grad(&w).unwrap(), vec![2.0, -4.0, 6.0], "{name}");
        ctx.run(&update).unwrap();
        assert_eq!(ctx.values(&w).unwrap(), vec![0.0, 4.0, 0.0], "{name}");

        let wrong_count = ctx.set_grad(&w, &[1.0]).unwrap_err().message;
        assert!(
            wrong_count.contains("gradient of 'w'"),
            "{name}: {wrong_count}"
        );
        let not_kept = ctx.set_grad(&loss, &[1.0]).unwrap_err().message;
        assert!(not_kept.contains("no gradient of"), "{name}: {not_kept}");
    }
}
