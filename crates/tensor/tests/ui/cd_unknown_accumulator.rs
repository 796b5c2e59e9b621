use rcannl_tensor::{Graph, cd};

fn main() {
    let graph = Graph::new();
    let p = graph.param("p").build();
    let _ = cd! { p =% 2.0 * p.grad };
}
