use rcannl_tensor::cd;

cd! {
    fn row_max(x) {
        v =:max v1 ~logic: "ij=>i";
        mask =: v1 == v;
        g1 =+ where_(mask, g, 0);
    }
}

fn main() {}
