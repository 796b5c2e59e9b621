//! Session tests: whole graphs declared, applied and finished; captures and their error cases;
//! errors that name the operation, the tensors and their shapes; failed calls that leave the
//! session as it was.

use super::*;
use crate::spec::parse_einsum;

fn spec(text: &str) -> Logic {
    Logic::Spec(parse_einsum(text).unwrap())
}

fn named(size: usize, basis: &str) -> Dim {
    Dim::Atom {
        size,
        basis: Basis::Named(basis.into()),
    }
}

fn shape_of(inf: &Inference, t: TensorId) -> String {
    inf.closed_shape(t).unwrap().to_string()
}

#[test]
fn an_mlp_gets_its_parameter_shapes_from_use() {
    let mut inf = Inference::new();
    let x = inf
        .leaf("x", LeafDecl::data().batch([8]).input([0; 0]).output([2]))
        .unwrap();
    let w1 = inf.leaf("w1", LeafDecl::param().output([16])).unwrap();
    let b1 = inf.leaf("b1", LeafDecl::param()).unwrap();
    let (wx, _) = inf.apply("w1x", Logic::Compose, &[w1, x]).unwrap();
    let (pre, _) = inf.apply("pre", Logic::PointwiseBinary, &[wx, b1]).unwrap();
    let (h, _) = inf.apply("h", Logic::PointwiseUnary, &[pre]).unwrap();
    let w2 = inf.leaf("w2", LeafDecl::param().output([1])).unwrap();
    let (y, _) = inf.apply("y", Logic::Compose, &[w2, h]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, w1), "|2->16");
    assert_eq!(shape_of(&inf, b1), "|->16");
    assert_eq!(shape_of(&inf, h), "8|->16");
    assert_eq!(shape_of(&inf, w2), "|16->1");
    assert_eq!(shape_of(&inf, y), "8|->1");
}

#[test]
fn a_parameter_nothing_determines_is_a_forgotten_hidden_dimension() {
    // The hidden layer's width is never given.
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([2])).unwrap();
    let w = inf.leaf("w", LeafDecl::param()).unwrap();
    inf.apply("h", Logic::Compose, &[w, x]).unwrap();
    let error = inf.finish().unwrap_err();
    assert!(
        error
            .message
            .starts_with("You forgot to specify the hidden dimension(s)"),
        "{error}"
    );
    assert!(error.to_string().contains("parameter 'w'"), "{error}");

    // A lone parameter is no exception.
    let mut inf = Inference::new();
    inf.leaf("w_o", LeafDecl::param()).unwrap();
    let error = inf.finish().unwrap_err();
    assert!(error.message.contains("hidden dimension"), "{error}");
}

#[test]
fn einsum_errors_name_the_operation_the_tensors_and_their_shapes() {
    let mut inf = Inference::new();
    let a = inf.leaf("a", LeafDecl::data().output([3, 4])).unwrap();
    let b = inf
        .leaf(
            "b",
            LeafDecl::data().output([Dim::size(5), named(6, "rgb")]),
        )
        .unwrap();
    let error = inf.apply("c", spec("i,j;j,k=>i,k"), &[a, b]).unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with("solved dimensions for axis: mismatch"),
        "{text}"
    );
    assert_eq!(
        error.operation.as_deref(),
        Some("c = einsum \"i, j; j, k => i, k\" (a, b)")
    );
    let labels: Vec<(&str, &str)> = error
        .tensors
        .iter()
        .map(|t| (t.role.as_str(), t.label.as_str()))
        .collect();
    assert_eq!(
        labels,
        [("result", "c"), ("operand 1", "a"), ("operand 2", "b")]
    );
    assert!(
        text.contains("operand 2 'b': ..$"),
        "open rows show their variable: {text}"
    );
    assert!(text.contains("->5,6@rgb"), "shapes show bases: {text}");
    assert!(text.contains("failing constraint:"), "{text}");
}

#[test]
fn a_failed_operation_leaves_the_session_as_it_was() {
    let mut inf = Inference::new();
    let a = inf.leaf("a", LeafDecl::data().output([3])).unwrap();
    let b = inf.leaf("b", LeafDecl::data().output([4])).unwrap();
    let p = inf.leaf("p", LeafDecl::param()).unwrap();
    // `p` would be pinned to 3 by the first half of this operation before its second half fails.
    let error = inf.apply("bad", spec("i;i;i=>i"), &[p, a, b]).unwrap_err();
    assert!(error.message.contains("mismatch"), "{error}");
    assert_eq!(inf.tensors().count(), 3, "the failed result is not kept");
    assert_eq!(inf.ops().count(), 0);
    // Still open: the next operation decides it.
    assert!(inf.shape(p).output.var.is_some());
    let (c, _) = inf.apply("c", Logic::PointwiseBinary, &[p, b]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, p), "|->4");
    assert_eq!(shape_of(&inf, c), "|->4");
}

#[test]
fn finishing_twice_closes_what_came_after_the_first() {
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([2, 3])).unwrap();
    let (t, _) = inf.apply("t", Logic::Transpose, &[x]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, t), "|2,3->");
    let (s, _) = inf.apply("s", spec("|i,j-> => |->j,i"), &[t]).unwrap();
    assert!(
        inf.closed_shape(s).is_ok(),
        "solved online from closed operands"
    );
    let w = inf.leaf("w", LeafDecl::param().output([5])).unwrap();
    let (y, _) = inf.apply("y", Logic::Compose, &[w, s]).unwrap();
    let error = inf.closed_shape(w).unwrap_err();
    assert!(
        error
            .message
            .starts_with("Not enough shape information: tensor 'w'"),
        "{error}"
    );
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, w), "|3,2->5");
    assert_eq!(shape_of(&inf, y), "|->5");
}
