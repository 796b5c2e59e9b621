//! Convolutions through the tensor API whose kernel and input carry different named bases: the
//! shape error names the operation, both tensors and both bases, before anything compiles; a
//! kernel in the input's basis convolves, on both backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn a_kernel_in_another_basis_is_a_shape_error() {
    for spec in ["o<+k; k => o", "o=+k; k => o"] {
        let graph = Graph::new();
        let signal = graph
            .data("signal")
            .shape("6@time")
            .values((0..6).map(f64::from).collect())
            .build();
        let kernel = graph.param("kernel").shape("3@space").build();
        let convolved = signal.einsum(spec, &kernel);
        let message = graph.check().unwrap_err().message;
        assert!(
            message
                .starts_with("convolution: conflicting dimension bases between stride and kernel"),
            "{spec}: {message}"
        );
        assert!(
            message.contains("3@space") && message.contains("6@time"),
            "{spec}: {message}"
        );
        assert!(
            message.contains(&format!("einsum \"{spec}\""))
                && message.contains("'signal'")
                && message.contains("'kernel'"),
            "{spec}: {message}"
        );
        let mut ctx = Context::new(&graph);
        assert_eq!(ctx.forward(&[&convolved]).unwrap_err().message, message);
    }
}

#[test]
fn a_kernel_in_the_inputs_basis_convolves() {
    // Σ_t x[o+t]·k[t] with x = 0..6, k = [1, 10, 100]: [210, 321, 432, 543].
    let x: Vec<f64> = (0..6).map(f64::from).collect();
    let k = [1.0, 10.0, 100.0];
    let expected: Vec<f64> = (0..4)
        .map(|o| (0..3).map(|t| x[o + t] * k[t]).sum())
        .collect();
    for backend in backends() {
        let graph = Graph::new();
        let signal = graph
            .data("signal")
            .shape("6@time")
            .values(x.clone())
            .build();
        let kernel = graph
            .param("kernel")
            .shape("3@time")
            .values(k.to_vec())
            .build();
        let convolved = signal.einsum("o<+k; k => o", &kernel);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let forward = ctx.forward(&[&convolved]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&convolved).unwrap(), expected);
        assert_eq!(convolved.shape(), "|->4@time");
    }
}
