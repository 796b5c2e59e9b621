use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let x = graph.data("x").shape("|->2").build();
    let _ = op! { { w; q = [3] } * x };
}
