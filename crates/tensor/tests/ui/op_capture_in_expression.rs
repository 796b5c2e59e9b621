use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let a = graph.data("a").shape("2,3").build();
    let b = graph.data("b").shape("3,4").build();
    let _ = op! { a +* "ij;jk=>ik" ["j"] b };
}
