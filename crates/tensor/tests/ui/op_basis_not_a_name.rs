use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let x = graph.data("x").shape("3@rgb").build();
    let _ = op!(([1.0, 2.0, 3.0] : "rgb") + x);
}
