use rcannl_tensor::cd;

cd! {
    fn row_max(x) {
        { mask_rhs1 } =: v1 == v;
        v =:max v1 ~logic: "ij=>i";
        g1 =+ where_(mask_rhs1, g, 0);
    }
}

fn main() {}
