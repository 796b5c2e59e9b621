use rcannl_tensor::cd;

cd! {
    fn double(x) {
        v =: 2.0 * v1;
        g1 =: 2.0 * g;
    }
}

fn main() {}
