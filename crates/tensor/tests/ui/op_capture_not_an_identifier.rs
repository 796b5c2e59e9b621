use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2,3").build();
    op! { let total = x ++ "...|..n.. => 0" ["..n.."]; }
}
