//! Gathers (`Tensor::gather`, and a table composed with `Tensor::one_hot` rows) and their
//! scatter-accumulate gradients on both CPU backends, against a naive lookup written here:
//! values, repeated ids, ids that select no row, ids of several shapes, f32 and f64 tables, the
//! routines' loops (no loop over the vocabulary), and finite-difference checks of the table.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Context, Graph, Init, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `rows[p] = table[id_p]` (row-major `width` values per row of the table, given vocabulary
/// first), zeros for an id that is not an integer in `0..vocabulary`.
fn naive_gather(table_rows: &[f64], vocabulary: usize, width: usize, ids: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    for &id in ids {
        let valid = id >= 0.0 && id < vocabulary as f64 && id.fract() == 0.0;
        for w in 0..width {
            out.push(if valid {
                table_rows[id as usize * width + w]
            } else {
                0.0
            });
        }
    }
    out
}

/// `grad[v][w] = Σ_p [id_p = v] · g[p][w]`, laid out as the table is in memory: width-major
/// (output axis first), `grad[w * vocabulary + v]`.
fn naive_scatter(g: &[f64], vocabulary: usize, width: usize, ids: &[f64]) -> Vec<f64> {
    let mut grad = vec![0.0; vocabulary * width];
    for (p, &id) in ids.iter().enumerate() {
        if id >= 0.0 && id < vocabulary as f64 && id.fract() == 0.0 {
            for w in 0..width {
                grad[w * vocabulary + id as usize] += g[p * width + w];
            }
        }
    }
    grad
}

/// The table's rows (vocabulary-major) from its memory order (width-major).
fn rows_of(table_memory: &[f64], vocabulary: usize, width: usize) -> Vec<f64> {
    let mut rows = vec![0.0; vocabulary * width];
    for w in 0..width {
        for v in 0..vocabulary {
            rows[v * width + w] = table_memory[w * vocabulary + v];
        }
    }
    rows
}

/// A table `| vocabulary -> width` holding distinct values (memory order: width-major).
fn table(
    graph: &Graph,
    vocabulary: usize,
    width: usize,
    precision: Precision,
) -> (Tensor, Vec<f64>) {
    let values: Vec<f64> = (0..vocabulary * width)
        .map(|i| 0.5 + i as f64 * 0.25 - (i % 3) as f64)
        .collect();
    let t = graph
        .param("table")
        .input([vocabulary])
        .output([width])
        .precision(precision)
        .init(Init::Values(values.clone()))
        .build();
    (t, values)
}

/// Weights to multiply the gathered rows by, so that each position's gradient row differs.
fn weights(graph: &Graph, literal: &str, n: usize) -> (Tensor, Vec<f64>) {
    let values: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.37) % 1.9).collect();
    let t = graph
        .data("weights")
        .shape(literal)
        .precision(Precision::F64)
        .values(values.clone())
        .build();
    (t, values)
}

struct Case {
    ids_literal: &'static str,
    ids: Vec<f64>,
    vocabulary: usize,
    width: usize,
    precision: Precision,
}

/// Runs `gather(table, ids)` forward and backward (loss `Σ gathered · weights`) on `backend`:
/// the gathered values and the table's gradient.
fn run(case: &Case, backend: Box<dyn Backend>, via_one_hot: bool) -> (Vec<f64>, Vec<f64>, String) {
    let graph = Graph::new();
    let (table, _) = table(&graph, case.vocabulary, case.width, case.precision);
    let ids = graph
        .data("ids")
        .shape(case.ids_literal)
        .values(case.ids.clone())
        .build();
    let gathered = if via_one_hot {
        &table * &Tensor::one_hot(&ids, case.vocabulary)
    } else {
        Tensor::gather(&table, &ids)
    };
    let n = case.ids.len() * case.width;
    // The result's own shape: each gathered cell weighed by its own weight.
    let literal = match case.ids_literal.strip_suffix("->") {
        Some(batch) => format!("{batch}->{}", case.width),
        None => format!("{},{}", case.ids_literal, case.width),
    };
    let (w, _) = weights(&graph, &literal, n);
    let loss = gathered.pmul(&w);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let forward = ctx.forward(&[&gathered]).unwrap();
    ctx.run(&forward).unwrap();
    let values = ctx.values(&gathered).unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    (values, ctx.grad(&table).unwrap(), forward.describe())
}

fn cases() -> Vec<Case> {
    vec![
        // Repeated ids, −1 (padding), one past the vocabulary, a fraction.
        Case {
            ids_literal: "8|->",
            ids: vec![0.0, 3.0, 1.0, 3.0, -1.0, 4.0, 2.5, 3.0],
            vocabulary: 4,
            width: 3,
            precision: Precision::F32,
        },
        // Batch × time ids.
        Case {
            ids_literal: "2|->3",
            ids: vec![0.0, 2.0, -1.0, 1.0, 3.0, 0.0],
            vocabulary: 4,
            width: 2,
            precision: Precision::F64,
        },
        Case {
            ids_literal: "6|->",
            ids: vec![4.0, 1.0, 4.0, 7.0, 0.0, 2.0],
            vocabulary: 5,
            width: 4,
            precision: Precision::F64,
        },
        // A table of one row (whose axis inference fixes at 0), and of one row of one cell.
        Case {
            ids_literal: "4|->",
            ids: vec![0.0, 1.0, 0.0, -1.0],
            vocabulary: 1,
            width: 3,
            precision: Precision::F64,
        },
        Case {
            ids_literal: "3|->",
            ids: vec![0.0, 0.5, 0.0],
            vocabulary: 1,
            width: 1,
            precision: Precision::F32,
        },
    ]
}

fn assert_close(what: &str, got: &[f64], expected: &[f64], tolerance: f64) {
    assert_eq!(got.len(), expected.len(), "{what}: {got:?} vs {expected:?}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= tolerance * e.abs().max(1.0),
            "{what}: cell {i}: {g} vs {e}\n{got:?}\n{expected:?}"
        );
    }
}

#[test]
fn gathers_rows_and_scatters_gradients_on_both_backends() {
    for case in cases() {
        let graph = Graph::new();
        let (_, memory) = table(&graph, case.vocabulary, case.width, case.precision);
        let rows = rows_of(&memory, case.vocabulary, case.width);
        let expected = naive_gather(&rows, case.vocabulary, case.width, &case.ids);
        let n = case.ids.len() * case.width;
        let (_, g) = weights(&graph, "1", n);
        let expected_grad = naive_scatter(&g, case.vocabulary, case.width, &case.ids);
        let tolerance = if case.precision == Precision::F32 {
            1e-6
        } else {
            1e-12
        };
        for via_one_hot in [false, true] {
            for backend in backends() {
                let name = format!(
                    "{} ids {:?} (one-hot: {via_one_hot}) on {}",
                    case.precision,
                    case.ids,
                    backend.name()
                );
                let (values, grad, routine) = run(&case, backend, via_one_hot);
                assert_close(&format!("{name}: values"), &values, &expected, tolerance);
                assert_close(
                    &format!("{name}: gradient"),
                    &grad,
                    &expected_grad,
                    tolerance,
                );
                // A read at the id, no loop over the vocabulary (no other axis has its size).
                assert!(routine.contains("@("), "{name}: no lookup in\n{routine}");
                assert!(
                    !routine.contains(&format!("0..{} ", case.vocabulary)),
                    "{name}: a loop over the vocabulary in\n{routine}"
                );
            }
        }
    }
}

#[test]
fn one_hot_times_table_gives_the_direct_product() {
    // The composition computes Σ_v table[w, v]·[id = v]: the table's column at the id.
    let graph = Graph::new();
    let table = graph
        .data("table")
        .shape("|3->2")
        .values(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .build();
    let ids = graph
        .data("ids")
        .shape("4|->")
        .values(vec![2.0, 0.0, -1.0, 2.0])
        .build();
    let product = &table * &Tensor::one_hot(&ids, 3);
    let direct: Vec<f64> = [2usize, 0, usize::MAX, 2]
        .iter()
        .flat_map(|&id| {
            (0..2).map(move |w| {
                if id == usize::MAX {
                    0.0
                } else {
                    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0][w * 3 + id]
                }
            })
        })
        .collect();
    for backend in backends() {
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&product]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&product).unwrap(), direct);
        assert_eq!(product.shape(), "4|->2");
    }
}

#[test]
fn shape_errors_name_the_gather_and_its_tensors() {
    let graph = Graph::new();
    let table = graph.param("wide_table").input([3, 2]).output([4]).build();
    let ids = graph.data("token_ids").shape("5|->").build();
    let gathered = Tensor::gather(&table, &ids);
    let message = gathered
        .error()
        .expect("two input axes are refused")
        .message;
    for part in ["gather", "wide_table", "token_ids"] {
        assert!(message.contains(part), "{part} missing from: {message}");
    }
}

#[test]
fn finite_differences_of_the_table_through_a_gather() {
    for backend in backends() {
        let name = backend.name();
        let inputs = Inputs {
            shapes: &["4->3"],
            positive: false,
        };
        let build = |g: &Graph, p: &[Tensor]| {
            let ids = g
                .data("ids")
                .shape("6|->")
                .precision(Precision::F64)
                .values(vec![0.0, 3.0, 1.0, 3.0, -1.0, 9.0])
                .build();
            let (w, _) = weights(g, "6|->3", 18);
            Tensor::gather(&p[0], &ids).pmul(&w).sin()
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, build) {
            panic!("gather on {name}: {e}");
        }
    }
}

#[test]
fn many_positions_on_few_rows_accumulate_when_split_across_threads() {
    // 4096 positions into 3 rows, 64 wide: enough work for the C backend to split its loops
    // across threads, which it may do only along the width.
    let (vocabulary, width, positions) = (3, 64, 4096);
    let ids: Vec<f64> = (0..positions).map(|p| ((p * 7) % 4) as f64 - 1.0).collect();
    let graph = Graph::new();
    let (table, _) = table(&graph, vocabulary, width, Precision::F64);
    let ids_tensor = graph
        .data("ids")
        .shape(&format!("{positions}|->"))
        .values(ids.clone())
        .build();
    let (w, g) = weights(&graph, &format!("{positions}|->{width}"), positions * width);
    let loss = Tensor::gather(&table, &ids_tensor).pmul(&w);
    let expected = naive_scatter(&g, vocabulary, width, &ids);
    for backend in backends() {
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run(&backprop).unwrap();
        let grad = ctx.grad(&table).unwrap();
        assert_close(&format!("{name}: gradient"), &grad, &expected, 1e-12);
    }
}

#[test]
fn ids_of_any_numeric_precision_select_the_same_rows() {
    let ids = vec![3.0, -1.0, 0.0, 3.0, 5.0, 1.0];
    let expected = {
        let graph = Graph::new();
        let (_, memory) = table(&graph, 4, 2, Precision::F32);
        naive_gather(&rows_of(&memory, 4, 2), 4, 2, &ids)
    };
    for precision in [
        Precision::I32,
        Precision::I64,
        Precision::F16,
        Precision::F64,
    ] {
        for backend in backends() {
            let name = format!("{precision} ids on {}", backend.name());
            let graph = Graph::new();
            let (table, _) = table(&graph, 4, 2, Precision::F32);
            let ids = graph
                .data("ids")
                .shape("6|->")
                .precision(precision)
                .values(ids.clone())
                .build();
            let gathered = Tensor::gather(&table, &ids);
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let forward = ctx.forward(&[&gathered]).unwrap();
            ctx.run(&forward).unwrap();
            assert_eq!(ctx.values(&gathered).unwrap(), expected, "{name}");
        }
    }
}

#[test]
fn one_hot_rows_compose_as_before_with_a_table_of_other_rows() {
    // Two output axes: not a table a gather reads, so the one-hot product is computed.
    let graph = Graph::new();
    // Each cell holds its own memory position.
    let table = graph
        .data("table")
        .shape("|3->2,2")
        .values((0..12).map(f64::from).collect())
        .build();
    let ids = graph
        .data("ids")
        .shape("2|->")
        .values(vec![1.0, 2.0])
        .build();
    let product = &table * &Tensor::one_hot(&ids, 3);
    // table[a, b, v] at memory position (a·2 + b)·3 + v.
    let direct: Vec<f64> = [1usize, 2]
        .iter()
        .flat_map(|&id| (0..4).map(move |ab| (ab * 3 + id) as f64))
        .collect();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&product]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&product).unwrap(), direct);
    assert!(!forward.describe().contains("@("), "{}", forward.describe());
}

#[test]
fn one_hot_rows_of_ids_with_positions_become_a_gather() {
    let graph = Graph::new();
    let table = graph
        .data("table")
        .shape("|3->2")
        .values(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .build();
    let ids = graph
        .data("ids")
        .shape("2|->2")
        .values(vec![2.0, 0.0, -1.0, 1.0])
        .build();
    let product = &table * &Tensor::one_hot(&ids, 3);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&product]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(product.shape(), "2|->2,2");
    // table[w, v] at w·3 + v.
    assert_eq!(
        ctx.values(&product).unwrap(),
        vec![3.0, 6.0, 1.0, 4.0, 0.0, 0.0, 2.0, 5.0]
    );
}
