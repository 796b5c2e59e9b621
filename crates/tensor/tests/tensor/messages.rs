//! Shape errors as a user reads them, pinned whole: a clash names the spec's label, the slots and
//! axes it sits on and the tensors' labels; no solver notation (variables, `⊑`, constraint names)
//! reaches the text; a pooling window nothing determines is an error, not a guess.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Tensor, TensorError};

fn leaf(graph: &Graph, label: &str, shape: &str) -> Tensor {
    graph.data(label).shape(shape).build()
}

/// The error the graph recorded while building.
fn build_error(graph: &Graph) -> String {
    let error: TensorError = graph.check().expect_err("the graph has an error");
    error.message
}

/// The error shape inference reports when it closes the shapes for `t`.
fn closing_error(graph: &Graph, t: &Tensor) -> String {
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    match ctx.forward(&[t]) {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.message,
    }
}

#[test]
fn an_einsum_clash_names_the_label_the_slots_and_the_operands() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "3,4");
    let b = leaf(&graph, "b", "5,6");
    let _ = a.einsum("ij;jk=>ik", &b);
    assert_eq!(
        build_error(&graph),
        "einsum \"i, j; j, k => i, k\": label `j` is 4 in the first operand 'a' (output axis 1) \
         but 5 in the second operand 'b' (output axis 0)
  in operation: einsum#2 = einsum \"i, j; j, k => i, k\" (a, b)
  result 'einsum#2': ...|...->...
  operand 1 'a': |->3,4
  operand 2 'b': |->5,6"
    );
}

#[test]
fn an_einsum_clash_names_input_and_batch_axes_by_their_kind() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "2|3->4");
    let b = leaf(&graph, "b", "7|4->5");
    let _ = a.einsum("b|i->j;b|j->k=>b|i->k", &b);
    assert_eq!(
        build_error(&graph),
        "einsum \"b | i -> j; b | j -> k => b | i -> k\": label `b` is 2 in the first operand 'a' \
         (batch axis 0) but 7 in the second operand 'b' (batch axis 0)
  in operation: einsum#2 = einsum \"b | i -> j; b | j -> k => b | i -> k\" (a, b)
  result 'einsum#2': ...|...->...
  operand 1 'a': 2|3->4
  operand 2 'b': 7|4->5"
    );
}

#[test]
fn an_operand_with_other_axes_than_its_slot_is_named() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "3,4,5");
    let b = leaf(&graph, "b", "4,6");
    let _ = a.einsum("ij;jk=>ik", &b);
    assert_eq!(
        build_error(&graph),
        "einsum \"i, j; j, k => i, k\": the first operand 'a' has 3 output axes but its slot in \
         the spec names 2 (`i, j`)
  in operation: einsum#2 = einsum \"i, j; j, k => i, k\" (a, b)
  result 'einsum#2': ...|...->...
  operand 1 'a': |->3,4,5
  operand 2 'b': |->4,6"
    );
}

#[test]
fn a_pointwise_clash_says_what_does_not_broadcast() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "3,4");
    let b = leaf(&graph, "b", "5");
    let _ = a.pmul(&b);
    assert_eq!(
        build_error(&graph),
        "pointwise binary: output axis 1 of the first operand 'a' has size 4 and output axis 0 \
         of the second operand 'b' has size 5: they do not broadcast to one size (only equal \
         sizes, or the unit 1* beside any size, do)
  in operation: pmul#2 = pointwise binary (a, b)
  result 'pmul#2': ...|...->...
  operand 1 'a': |->3,4
  operand 2 'b': |->5"
    );
}

#[test]
fn a_composition_that_needed_a_pointwise_product_suggests_pmul() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "3,4");
    let b = leaf(&graph, "b", "3,4");
    let _ = &a * &b;
    let message = build_error(&graph);
    assert_eq!(
        message,
        "an operand has more axes than the result it broadcasts to: the result's (no axes) has 0 \
         axes, the operand's 3,4 needs 2
  in operation: *#2 = compose (a, b)
  result '*#2': ...|...->...
  operand 1 'a': |->3,4
  operand 2 'b': |->3,4
  for a pointwise product use `pmul` (`*` on tensors is composition, the matrix product)"
    );
    assert!(!message.contains("*."), "{message}");
}

#[test]
fn an_element_count_that_does_not_fit_says_so_in_words() {
    // The values constrain the rows whichever the builder was given first.
    for values_first in [false, true] {
        let graph = Graph::new();
        let _ = match values_first {
            false => graph.data("d").shape("2,3").values(vec![0.0; 5]).build(),
            true => graph.data("d").values(vec![0.0; 5]).shape("2,3").build(),
        };
        let message = build_error(&graph);
        assert!(
            message.starts_with(
                "wrong number of elements: the axes |->2,3 have 6 elements but 5 are needed"
            ),
            "{message}"
        );
        assert!(message.contains("'d'"), "{message}");
        for symbol in ["⊑", "ρ", "$", "Total_elems", "failing constraint"] {
            assert!(!message.contains(symbol), "{symbol} in {message}");
        }
    }
}

#[test]
fn a_pooling_window_nothing_determines_is_an_error_not_a_guess() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("6")
        .values(vec![1.0, 5.0, 2.0, 4.0, 3.0, 0.0])
        .build();
    let pooled = x.einmax1("2*o<+k=>o");
    assert_eq!(
        closing_error(&graph, &pooled),
        "Not enough shape information: nothing determines the window `k` (nor the output `o`) \
         of \"2*o<+k => o\": any window that fits would do, and none is guessed; give the \
         window its size (capture `k` and set_dim it)
  in operation: einsum#1 = permute \"2*o<+k => o\" (x)
  result 'einsum#1': |->?
  operand 1 'x': |->6"
    );

    // With the window given, the same pooling runs: windows [1,5], [2,4], [3,0].
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("6")
            .values(vec![1.0, 5.0, 2.0, 4.0, 3.0, 0.0])
            .build();
        let pooled = x.einmax1("2*o<+k=>o");
        let k = pooled.capture("k").unwrap();
        graph.set_dim(&k, 2).unwrap();
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&pooled]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&pooled).unwrap(), vec![5.0, 4.0, 3.0]);
    }
}

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn a_row_variable_clash_names_the_row_variable_and_the_operands() {
    let graph = Graph::new();
    let a = leaf(&graph, "a", "2,3");
    let b = leaf(&graph, "b", "4,3");
    let _ = a.einsum("...,i;...,i=>...,i", &b);
    assert_eq!(
        build_error(&graph),
        "einsum \"..., i; ..., i => ..., i\": `...` has an axis of size 2 in the first operand \
         'a' (output axis 0) but 4 in the second operand 'b' (output axis 0)
  in operation: einsum#2 = einsum \"..., i; ..., i => ..., i\" (a, b)
  result 'einsum#2': ...|...->...
  operand 1 'a': |->2,3
  operand 2 'b': |->4,3"
    );

    let graph = Graph::new();
    let a = leaf(&graph, "a", "2,3");
    let b = leaf(&graph, "b", "4,2,3");
    let _ = a.einsum("...,i;...,i=>...,i", &b);
    let message = build_error(&graph);
    assert!(
        message.starts_with(
            "einsum \"..., i; ..., i => ..., i\": `...` stands for 1 axis in the first operand 'a' \
             (output row) but 2 axes in the second operand 'b' (output row)\n"
        ),
        "{message}"
    );
}
