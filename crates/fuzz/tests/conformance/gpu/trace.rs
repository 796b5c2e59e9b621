//! Tracing stores on the GPU: WGSL cannot print, so a traced routine is refused with an error
//! naming the `trace_stores` setting, never run untraced or moved to the host.

use rcannl_backends::trace::{Sink, Tracing};
use rcannl_tensor::{BinaryOp, Context, Graph, TensorErrorKind};

use super::device;

use crate::target::Target;

fn a_traced_routine_is_refused_naming_the_setting(target: &Target) {
    let graph = Graph::new();
    let x = graph.data("x").shape("4").build();
    let y = x.binary(BinaryOp::Mul, &x);
    let traced = Tracing::new(Box::new(device(target)), Sink::StandardError);
    let mut ctx = Context::with_backend(&graph, Box::new(traced));
    let error = ctx.forward(&[&y]).unwrap_err();
    assert_eq!(error.kind, TensorErrorKind::Compile);
    assert!(
        error
            .message
            .contains("the gpu backend cannot trace stores")
            && error.message.contains("trace_stores"),
        "{}",
        error.message
    );
}

conformance!(a_traced_routine_is_refused_naming_the_setting: gpu);
