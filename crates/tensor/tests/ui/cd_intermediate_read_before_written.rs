use rcannl_tensor::cd;

cd! {
    fn softplus(x) {
        v =: log(1.0 + e);
        { e } =: exp(v1);
        g1 =+ g * e / (1.0 + e);
    }
}

fn main() {}
