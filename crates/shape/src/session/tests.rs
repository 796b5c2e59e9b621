//! Session tests: whole graphs declared, applied and finished; captures and their error cases;
//! errors that name the operation, the tensors and their shapes; failed calls that leave the
//! session as it was.

use super::*;
use crate::spec::{CaptureKind, parse_einsum};

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
    let (pre, _) = inf.apply("pre", Logic::Pointwise(2), &[wx, b1]).unwrap();
    let (h, _) = inf.apply("h", Logic::Pointwise(1), &[pre]).unwrap();
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
    // Operand shapes are shown as they were before the operation, which is left undone.
    assert_eq!(
        error.to_string(),
        "einsum \"i, j; j, k => i, k\": label `j` is 4 in the first operand 'a' (output axis 1) \
         but 5 in the second operand 'b' (output axis 0)
  in operation: c = einsum \"i, j; j, k => i, k\" (a, b)
  result 'c': ...|...->...
  operand 1 'a': ...|...->3,4
  operand 2 'b': ...|...->5,6@rgb"
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
}

#[test]
fn a_failed_operation_leaves_the_session_as_it_was() {
    let mut inf = Inference::new();
    let a = inf.leaf("a", LeafDecl::data().output([3])).unwrap();
    let b = inf.leaf("b", LeafDecl::data().output([4])).unwrap();
    let p = inf.leaf("p", LeafDecl::param()).unwrap();
    // `p` would be pinned to 3 by the first half of this operation before its second half fails.
    let error = inf.apply("bad", spec("i;i;i=>i"), &[p, a, b]).unwrap_err();
    assert_eq!(
        error.message,
        "einsum3 \"i; i; i => i\": label `i` is 3 in the second operand 'a' (output axis 0) but \
         4 in the third operand 'b' (output axis 0)"
    );
    assert_eq!(inf.tensors().count(), 3, "the failed result is not kept");
    assert_eq!(inf.ops().count(), 0);
    // Still open: the next operation decides it.
    assert!(inf.shape(p).output.var.is_some());
    let (c, _) = inf.apply("c", Logic::Pointwise(2), &[p, b]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, p), "|->4");
    assert_eq!(shape_of(&inf, c), "|->4");
}

#[test]
fn a_label_concatenated_with_itself_takes_half_its_operand() {
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([6])).unwrap();
    let (y, _) = inf.apply("y", spec("a^a => a"), &[x]).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, y), "|->3");

    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([7])).unwrap();
    let error = inf.apply("y", spec("a^a => a"), &[x]).unwrap_err();
    assert!(
        error.message.contains("the size 7 does not split evenly"),
        "{error}"
    );
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

/// `x` (output 3) contracted with a parameter `w` by `"i; i,h => h"`: `h` is the hidden width.
fn hidden_layer(inf: &mut Inference, name: &str) -> (TensorId, Capture) {
    let x = inf.leaf("x", LeafDecl::data().output([3])).unwrap();
    let w = inf.leaf(format!("w_{name}"), LeafDecl::param()).unwrap();
    let logic = spec(&format!("i; i,{name} => {name}"));
    let (_, op) = inf.apply(format!("y_{name}"), logic, &[x, w]).unwrap();
    (w, inf.capture(op, name).unwrap())
}

fn message(result: Result<(), ShapeError>) -> String {
    result.expect_err("expected a shape error").message
}

#[test]
fn captures_read_solved_sizes_and_set_dim_fixes_hidden_ones() {
    let mut inf = Inference::new();
    let (w, h) = hidden_layer(&mut inf, "h");
    assert_eq!(h.kind(), CaptureKind::Dim);
    assert_eq!(inf.capture_value(&h), None);
    inf.set_dim(&h, 7).unwrap();
    assert_eq!(inf.capture_value(&h), Some(7));
    inf.set_dim(&h, 7).unwrap();
    assert!(
        message(inf.set_dim(&h, 8))
            .starts_with("set_dim: the dimension 'h' is already solved to 7"),
    );
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, w), "|->3,7");

    // Without set_dim, the parameter's width is a forgotten hidden dimension; the failed finish
    // commits nothing, so a set_dim afterwards still helps.
    let mut inf = Inference::new();
    let (w, h) = hidden_layer(&mut inf, "h");
    assert!(message(inf.finish()).contains("hidden dimension"));
    inf.set_dim(&h, 4).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, w), "|->3,4");
}

#[test]
fn a_failed_finish_replays_the_closings_before_it() {
    // The second closing visits only the leaves after the first; its failure rebuilds the
    // solver from the log, the first closing included.
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([2])).unwrap();
    let w = inf.leaf("w", LeafDecl::param().output([3])).unwrap();
    let (y, _) = inf.apply("y", Logic::Compose, &[w, x]).unwrap();
    inf.finish().unwrap();
    let (v, h) = hidden_layer(&mut inf, "h");
    assert!(message(inf.finish()).contains("hidden dimension"));
    assert_eq!(shape_of(&inf, w), "|2->3");
    inf.set_dim(&h, 4).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, v), "|->3,4");
    assert_eq!(shape_of(&inf, y), "|->3");
}

#[test]
fn row_captures_hold_element_counts() {
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([2, 3])).unwrap();
    let (_, op) = inf.apply("y", spec("..r.. => ..r.."), &[x]).unwrap();
    let r = inf.capture(op, "r").unwrap();
    assert_eq!(r.kind(), CaptureKind::Row);
    assert_eq!(inf.capture_value(&r), Some(6));
    inf.set_dim(&r, 6).unwrap();
    assert!(
        message(inf.set_dim(&r, 5))
            .contains("number of elements of the row 'r' is already solved to 6")
    );

    // An unknown row given an element count closes to one axis of that size.
    let p = inf.leaf("p", LeafDecl::param()).unwrap();
    let (_, op) = inf.apply("q", spec("..s.. => ..s.."), &[p]).unwrap();
    let s = inf.capture(op, "s").unwrap();
    inf.set_dim(&s, 12).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, p), "|->12");
    assert_eq!(inf.capture_value(&s), Some(12));

    // `...` is captured under its kind's name.
    let (_, op) = inf.apply("z", spec("...|... => ...|..."), &[x]).unwrap();
    assert_eq!(inf.capture(op, "output").unwrap().kind(), CaptureKind::Row);
}

#[test]
fn capture_errors() {
    let mut inf = Inference::new();
    let x = inf.leaf("x", LeafDecl::data().output([3])).unwrap();
    let (_, op) = inf.apply("y", spec("i => i"), &[x]).unwrap();
    let error = inf.capture(op, "z").unwrap_err();
    assert_eq!(
        error.message,
        "Variable 'z' not found in environments for spec: i => i"
    );
    assert!(
        error.to_string().contains("dimension labels (i)"),
        "{error}"
    );
    let (_, relu) = inf.apply("r", Logic::Pointwise(1), &[x]).unwrap();
    let error = inf.capture(relu, "i").unwrap_err();
    assert!(error.message.contains("has no spec"), "{error}");
}

#[test]
fn set_equal_on_dimensions_rows_and_both() {
    // Dimension with dimension: the second layer gets the first one's width.
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let (w_g, g) = hidden_layer(&mut inf, "g");
    inf.set_equal(&h, &g).unwrap();
    inf.set_dim(&h, 5).unwrap();
    assert_eq!(inf.capture_value(&g), Some(5));
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, w_g), "|->3,5");

    // Known and different.
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let (_, g) = hidden_layer(&mut inf, "g");
    inf.set_dim(&h, 5).unwrap();
    inf.set_dim(&g, 6).unwrap();
    assert!(message(inf.set_equal(&h, &g)).starts_with(
        "Cannot set equal dimensions for variable references with different values: 'h' is 5, \
         'g' is 6"
    ));

    // A row's element count equal to a dimension: the row closes to one axis of that size.
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let p = inf.leaf("p", LeafDecl::param()).unwrap();
    let (_, op) = inf.apply("q", spec("..s.. => ..s.."), &[p]).unwrap();
    let s = inf.capture(op, "s").unwrap();
    inf.set_equal(&s, &h).unwrap();
    inf.set_dim(&h, 6).unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, p), "|->6");

    // ... and with neither side known, closing cannot decide it: that is the error reported,
    // rather than the forgotten hidden dimension it causes.
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let p = inf.leaf("p", LeafDecl::param()).unwrap();
    let (_, op) = inf.apply("q", spec("..s.. => ..s.."), &[p]).unwrap();
    let s = inf.capture(op, "s").unwrap();
    inf.set_equal(&h, &s).unwrap();
    assert_eq!(
        message(inf.finish()),
        "set_equal: insufficient information between labels h and s: neither the dimension nor \
         the row's axes are determined"
    );
}

#[test]
fn set_scale_and_its_errors() {
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let (w_g, g) = hidden_layer(&mut inf, "g");
    inf.set_scale(4, &g, &h).unwrap();
    inf.set_dim(&h, 3).unwrap();
    inf.finish().unwrap();
    assert_eq!(inf.capture_value(&g), Some(12));
    assert_eq!(shape_of(&inf, w_g), "|->3,12");

    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let (_, g) = hidden_layer(&mut inf, "g");
    assert_eq!(
        message(inf.set_scale(0, &g, &h)),
        "Shape.set_scale: factor must be >= 1, got 0"
    );
    inf.set_dim(&g, 17).unwrap();
    assert_eq!(
        message(inf.set_scale(2, &g, &h)),
        "Shape.set_scale: solved dimension 17 for g is not divisible by factor 2"
    );
    inf.set_dim(&h, 5).unwrap();
    assert!(
        message(inf.set_scale(3, &g, &h))
            .starts_with("Shape.set_scale: dimensions do not satisfy d_large = factor * d_small")
    );
    let x = inf.leaf("x2", LeafDecl::data().output([2, 2])).unwrap();
    let (_, op) = inf.apply("y", spec("..s.. => ..s.."), &[x]).unwrap();
    let s = inf.capture(op, "s").unwrap();
    assert_eq!(
        message(inf.set_scale(2, &s, &h)),
        "Shape.set_scale: requires two dimension variables; got at least one row variable \
         (labels s, h)"
    );

    // A scale decided later, when the large side becomes known, is checked then.
    let mut inf = Inference::new();
    let (_, h) = hidden_layer(&mut inf, "h");
    let (_, g) = hidden_layer(&mut inf, "g");
    inf.set_scale(2, &g, &h).unwrap();
    let error = inf.set_dim(&g, 9).unwrap_err();
    assert!(error.message.contains("incompatible stride"), "{error}");
    assert_eq!(error.operation.as_deref(), Some("set_dim(g, 9)"));
    inf.set_dim(&g, 10).unwrap();
    assert_eq!(inf.capture_value(&h), Some(5));
}

#[test]
fn a_leaf_whose_initializer_contradicts_its_rows_is_an_error() {
    let mut inf = Inference::new();
    let error = inf
        .leaf(
            "d",
            LeafDecl::data()
                .batch([0; 0])
                .input([0; 0])
                .output([2, 3])
                .init(TerminalInit::NElements(5)),
        )
        .unwrap_err();
    assert_eq!(
        error.message,
        "wrong number of elements: the axes |->2,3 have 6 elements but 5 are needed"
    );
    assert!(error.to_string().contains("leaf 'd': |->2,3"), "{error}");
    assert_eq!(inf.tensors().count(), 0);

    // An element count with open rows: the lone open row takes the missing axis.
    let d = inf
        .leaf(
            "d",
            LeafDecl::data()
                .batch([2])
                .input([0; 0])
                .init(TerminalInit::NElements(10)),
        )
        .unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, d), "2|->5");
}

#[test]
fn an_element_count_its_given_axes_already_make_adds_no_axis() {
    // A vector of three values given its one output axis: the open batch and input rows have
    // no axes, not an input axis of size 1.
    let mut inf = Inference::new();
    let v = inf
        .leaf(
            "v",
            LeafDecl::data()
                .output([3])
                .init(TerminalInit::NElements(3)),
        )
        .unwrap();
    inf.finish().unwrap();
    assert_eq!(shape_of(&inf, v), "|->3");
}
