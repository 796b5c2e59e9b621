use rcannl_tensor::cd;

cd! {
    fn ratio(a, b) {
        v =:+ v1 / v2 ~logic: "@";
        g1 =+ g / v2;
    }
}

fn main() {}
