use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2,3").build();
    let _ = op! { x ++ "ij=>j" * x };
}
