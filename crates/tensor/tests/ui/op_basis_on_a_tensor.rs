use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let x = graph.data("x").shape("3").build();
    let _ = op!((x : rgb) + 1.0);
}
