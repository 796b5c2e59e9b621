use rcannl_tensor::{Graph, op};

fn main() {
    let graph = Graph::new();
    let _ = op! { in graph; [[1.0, 2.0], [3.0]] };
}
