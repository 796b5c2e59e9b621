use rcannl_tensor::{Tensor, op};

fn scaled(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {
    let graph = rcannl_tensor::Graph::new();
    let x = graph.data("x").shape("|->2").build();
    let _ = op! { { w } * scaled(&x) };
}
