//! Tracing stores through a context: a forward and backward pass traced on the interpreter and
//! in C writes the same lines, naming the tensors by their labels (gradients as `grad` and the
//! label) with the values the context reads back; untraced, the C holds no trace call.

use rcannl_backends::cc::Compiler;
use rcannl_backends::trace::{Sink, Tracing, general};
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Init, TensorError, op};

/// The lines of one backprop of `loss = (relu(w * x + b) - y)²` summed (f32), traced on
/// `backend` into `log`; the labels of `h` and the loss (the graph's: `op!` gives them none);
/// and the values of `h`, the loss and w's gradient.
fn traced_step(backend: Box<dyn Backend>, log: &std::path::Path) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("2|->3")
        .values(vec![0.5, -1.0, 2.0, 0.1, 0.3, -0.7])
        .build();
    let y = graph
        .data("y")
        .shape("2|->2")
        .values(vec![1.0, 0.0, -0.5, 0.25])
        .build();
    let w = graph
        .param("w")
        .shape("3->2")
        .init(Init::Values(vec![0.2, -0.4, 1.0 / 3.0, 0.7, 0.05, -0.3]))
        .build();
    let b = graph
        .param("b")
        .shape("2")
        .init(Init::Values(vec![0.1, -0.2]))
        .build();
    let h = op! { relu(w * x + b) };
    let loss = op! { (h - y) * (h - y) ++ "...|... => 0" };
    let traced = Tracing::new(backend, Sink::File(log.to_owned()));
    let mut ctx = Context::with_backend(&graph, Box::new(traced));
    ctx.init_params()?;
    let step = ctx.backprop(&loss)?;
    // Parameters were set before: only the step's own lines are read.
    let _ = std::fs::remove_file(log);
    ctx.run(&step)?;
    let lines = std::fs::read_to_string(log).unwrap_or_default();
    // The step keeps neither `h` nor the loss: a forward computes them again.
    let forward = ctx.forward(&[&h, &loss])?;
    ctx.run(&forward)?;
    Ok(Step {
        lines,
        labels: [h.label(), loss.label()],
        values: [ctx.values(&h)?, ctx.values(&loss)?, ctx.grad(&w)?],
    })
}

/// What [`traced_step`] returns.
struct Step {
    lines: String,
    labels: [String; 2],
    values: [Vec<f64>; 3],
}

/// The value the last line storing `label` at `position` gives.
fn last<'a>(lines: &'a str, label: &str, position: &str) -> &'a str {
    let at = format!("backprop '{label}'[{position}] = ");
    lines
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(at.as_str()))
        .unwrap_or_else(|| panic!("no store into '{label}'[{position}]:\n{lines}"))
}

#[test]
fn a_backprop_traced_on_the_interpreter_and_in_c_writes_the_same_lines() -> Result<(), TensorError>
{
    let folder = std::env::temp_dir().join(format!("rcannl-trace-step-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let interpreted = traced_step(Box::new(Interpreter), &folder.join("interpreter.log"))?;
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    let compiled = traced_step(Box::new(compiler), &folder.join("cc.log"))?;
    std::fs::remove_dir_all(&folder).unwrap();
    assert_eq!(interpreted.values, compiled.values);
    let (lines, c_lines) = (&interpreted.lines, &compiled.lines);
    assert!(!lines.is_empty());
    for (i, (line, c_line)) in lines.lines().zip(c_lines.lines()).enumerate() {
        assert_eq!(line, c_line, "line {i}");
    }
    assert_eq!(lines.lines().count(), c_lines.lines().count());
    // The tensors' labels, and the values the context reads back.
    let [h_label, loss_label] = &interpreted.labels;
    let [h, loss, grad_w] = &interpreted.values;
    for (cell, value) in h.iter().enumerate() {
        let position = format!("{}, {}", cell / 2, cell % 2);
        assert_eq!(last(lines, h_label, &position), general(*value, 9));
    }
    assert_eq!(last(lines, loss_label, "0"), general(loss[0], 9));
    for (cell, value) in grad_w.iter().enumerate() {
        let position = format!("{}, {}", cell / 3, cell % 3);
        assert_eq!(last(lines, "grad w", &position), general(*value, 9));
    }
    assert!(lines.contains("backprop 'grad b'[1] = "), "{lines}");
    Ok(())
}

#[test]
fn untraced_c_has_no_trace_calls() -> Result<(), TensorError> {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("3")
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let y = op! { relu(x) * 2.0 };
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    let mut ctx = Context::with_backend(&graph, Box::new(compiler.clone()));
    let plain = ctx.forward(&[&y])?.source().expect("C source");
    let traced = Tracing::new(Box::new(compiler), Sink::StandardError);
    let mut ctx = Context::with_backend(&graph, Box::new(traced));
    let source = ctx.forward(&[&y])?.source().expect("C source");
    assert!(!plain.contains("rc_trace"), "{plain}");
    assert!(source.contains("rc_trace_float("), "{source}");
    Ok(())
}
