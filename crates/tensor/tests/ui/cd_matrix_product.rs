use rcannl_tensor::{Graph, cd};

fn main() {
    let graph = Graph::new();
    let a = graph.param("a").build();
    let b = graph.param("b").build();
    let c = graph.param("c").build();
    let _ = cd! { c =:+ a @ b };
}
