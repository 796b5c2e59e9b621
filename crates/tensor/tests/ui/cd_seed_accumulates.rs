use rcannl_tensor::{Graph, cd};

fn main() {
    let graph = Graph::new();
    let w = graph.param("w").shape("3").build();
    let loss = w.pmul(&w).einsum1("i=>");
    let _step = cd! { loss.grad =+ 1; loss.backprop };
}
