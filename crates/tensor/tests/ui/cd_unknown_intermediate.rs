use rcannl_tensor::cd;

cd! {
    fn row_max(x) {
        v =:max v1 ~logic: "ij=>i";
        { cond_rhs1 } =: v1 == v;
        g1 =+ where_(mask_rhs1, g, 0);
    }
}

fn main() {}
