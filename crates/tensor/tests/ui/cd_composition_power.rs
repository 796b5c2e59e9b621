use rcannl_tensor::{Graph, cd};

fn main() {
    let graph = Graph::new();
    let (a, b, c) = (graph.param("a").build(), graph.param("b").build(), graph.param("c").build());
    let _ = cd! { c =:+ a ** b ~logic: "@" };
}
