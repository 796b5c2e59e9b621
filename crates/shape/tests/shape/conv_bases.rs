//! Convolutions whose kernel axis and input axis carry different named bases are shape errors
//! (OCANNL: "convolution: conflicting dimension bases between stride and kernel"), whichever
//! part inference learns first; bases that agree, or a default one beside a named one (as in a
//! concatenation), are not.

use rcannl_shape::logic::Logic;
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::term::{Basis, Dim};
use rcannl_shape::{Inference, LeafDecl, ShapeError, TensorId};

fn named(size: usize, basis: &str) -> Dim {
    Dim::Atom {
        size,
        basis: Basis::Named(basis.into()),
    }
}

fn spec(text: &str) -> Logic {
    Logic::Spec(parse_einsum(text).unwrap())
}

/// `input` convolved with `kernel` by `spec`, the kernel declared first or last; the result's
/// shape, or the error.
fn convolve(text: &str, input: Dim, kernel: Dim, kernel_first: bool) -> Result<String, ShapeError> {
    let mut inf = Inference::new();
    let declare = |inf: &mut Inference, label: &str, dim: Dim| -> TensorId {
        inf.leaf(
            label,
            LeafDecl::data().batch([0; 0]).input([0; 0]).output([dim]),
        )
        .unwrap()
    };
    let (x, k) = if kernel_first {
        let k = declare(&mut inf, "k", kernel);
        (declare(&mut inf, "x", input), k)
    } else {
        let x = declare(&mut inf, "x", input);
        (x, declare(&mut inf, "k", kernel))
    };
    let (y, _) = inf.apply("y", spec(text), &[x, k])?;
    inf.finish()?;
    Ok(inf.closed_shape(y)?.to_string())
}

#[test]
fn a_kernel_in_another_basis_than_its_input_is_an_error() {
    for text in [
        "o<+k; k => o",
        "o=+k; k => o",
        "2*o<+k; k => o",
        "o<+2*k; k => o",
    ] {
        for kernel_first in [false, true] {
            let error = convolve(text, named(8, "x"), named(3, "y"), kernel_first).unwrap_err();
            let shown = error.to_string();
            assert!(
                error.message.starts_with(
                    "convolution: conflicting dimension bases between stride and kernel"
                ),
                "{text}: {shown}"
            );
            // Both bases and the operation with its tensors.
            assert!(
                error.message.contains("3@y") && error.message.contains("8@x"),
                "{text}: {shown}"
            );
            assert!(shown.contains(&format!("einsum \"{text}\"")), "{shown}");
            assert!(shown.contains("'x'") && shown.contains("'k'"), "{shown}");
        }
    }
}

#[test]
fn bases_that_agree_or_are_default_convolve() {
    for (input, kernel, result) in [
        (named(6, "x"), named(3, "x"), "|->4@x"),
        (named(6, "x"), Dim::size(3), "|->4@x"),
        // The output positions are in the input's unit, whatever the kernel's.
        (Dim::size(6), named(3, "y"), "|->4"),
        (Dim::size(6), Dim::size(3), "|->4"),
    ] {
        for kernel_first in [false, true] {
            assert_eq!(
                convolve("o<+k; k => o", input.clone(), kernel.clone(), kernel_first).unwrap(),
                result
            );
        }
    }
}
