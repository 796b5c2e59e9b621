use rcannl_tensor::{Graph, cd};

fn main() {
    let graph = Graph::new();
    let p = graph.param("p").build();
    let _ = cd! { p =: v1 * 2.0 };
}
