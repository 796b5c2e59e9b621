//! Sizes of 0 are sizes like any other in inference: they unify, broadcast from the claim-free
//! unit, and satisfy element counts of 0 whatever the other axes are; and projection inference
//! gives an empty axis a loop that runs no times.

use rcannl_ir::AxisIndex;
use rcannl_shape::logic::{Logic, TerminalInit};
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::term::Dim;
use rcannl_shape::{Inference, LeafDecl};

fn spec(text: &str) -> Logic {
    Logic::Spec(parse_einsum(text).unwrap())
}

fn shape_of(inf: &Inference, tensor: rcannl_shape::TensorId) -> String {
    inf.closed_shape(tensor).unwrap().to_string()
}

#[test]
fn an_element_count_of_zero_leaves_the_other_axes_to_other_constraints() {
    // x holds no values; its first axis meets w's empty axis and its second v's 4. The count
    // (0 elements) holds whatever the second axis is, so it must not decide it, nor fail.
    let mut inf = Inference::new();
    let x = inf
        .leaf("x", LeafDecl::data().init(TerminalInit::NElements(0)))
        .unwrap();
    let w = inf.leaf("w", LeafDecl::data().output([0])).unwrap();
    let v = inf.leaf("v", LeafDecl::data().output([4])).unwrap();
    let (y, _) = inf.apply("y", spec("i,j;i=>j"), &[x, w]).unwrap();
    inf.apply("z", Logic::Pointwise(2), &[y, v]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, x), "|->0,4");
    assert_eq!(shape_of(&inf, y), "|->4");
}

#[test]
fn a_count_an_empty_axis_cannot_reach_is_an_error() {
    let mut inf = Inference::new();
    let error = inf
        .leaf(
            "x",
            LeafDecl::data()
                .output([Dim::size(0)])
                .init(TerminalInit::NElements(3)),
        )
        .unwrap_err();
    assert!(
        error.message
            == "wrong number of elements: the axes ...|...->0 have 0 elements but 3 are needed",
        "{}",
        error.message
    );
}

#[test]
fn an_empty_axis_is_iterated_in_projections() {
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([0, 3])).unwrap();
    let (y, op) = inf.apply("y", spec("i,j=>j"), &[x]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, y), "|->3");
    let record = inf.projections(op, 0, None).unwrap();
    let AxisIndex::Iterator(i) = record.rhs_index[0][0] else {
        panic!("the empty axis is read at {}", record.rhs_index[0][0]);
    };
    let ranges = record.ranges();
    assert_eq!(ranges[&i], 0);
    assert_eq!(record.reduction_symbols(), vec![i]);
    assert!(!record.is_surjective());
}
