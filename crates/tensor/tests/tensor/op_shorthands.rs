//! The shorthands of `op!` (the einsums `+*`, `++`, `+++`, `@^+`, `@^^`, `++^`, the slice `@|`,
//! the embedded static index `!@`) and their capture lists: each checked against the same
//! computation through the tensor API (values and gradients) and against a hand computation, and
//! their precedence against explicit parentheses. A static index embedded through the API is
//! checked on both backends, and its misuse.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{
    Context, Formula, Graph, Init, StaticIndex, Tensor, TensorError, TensorErrorKind, Update, op,
};

use crate::macros::close;

/// An f64 parameter of `shape` holding `values` (a parameter, so that it has a gradient).
pub(crate) fn param(graph: &Graph, label: &str, shape: &str, values: &[f64]) -> Tensor {
    graph
        .param(label)
        .shape(shape)
        .precision(Precision::F64)
        .init(Init::Values(values.to_vec()))
        .build()
}

/// `out`'s values, and the gradients of `params` from back-propagating `out` (every cell
/// seeded with 1), on the interpreter, with `statics` chosen.
fn run(
    graph: &Graph,
    out: &Tensor,
    params: &[&Tensor],
    statics: &[(StaticIndex, i64)],
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(out).unwrap();
    ctx.run_with(&backprop, statics).unwrap();
    let grads = params.iter().map(|p| ctx.grad(p).unwrap()).collect();
    (ctx.values(out).unwrap(), grads)
}

/// Builds the same computation twice, with `op!` and with the tensor API, each on a fresh
/// graph from the parameters `make` declares, and checks that their values and gradients
/// agree; returns the values.
fn agree(
    what: &str,
    make: impl Fn(&Graph) -> Vec<Tensor>,
    with_op: impl Fn(&[Tensor]) -> Tensor,
    with_api: impl Fn(&[Tensor]) -> Tensor,
) -> Vec<f64> {
    let sides = [&with_op as &dyn Fn(&[Tensor]) -> Tensor, &with_api].map(|build| {
        let graph = Graph::new();
        let params = make(&graph);
        let out = build(&params);
        run(&graph, &out, &params.iter().collect::<Vec<_>>(), &[])
    });
    let [(op_values, op_grads), (api_values, api_grads)] = sides;
    close(&op_values, &api_values, &format!("{what}: values"));
    assert_eq!(op_grads.len(), api_grads.len());
    for (i, (o, a)) in op_grads.iter().zip(&api_grads).enumerate() {
        close(o, a, &format!("{what}: gradient of operand {i}"));
    }
    op_values
}

const A: [f64; 6] = [1.0, -2.0, 0.5, 3.0, 0.0, -1.0];
const B: [f64; 12] = [
    0.5, 1.0, -1.5, 2.0, -0.25, 0.0, 1.25, -2.0, 3.0, 0.75, -0.5, 1.5,
];

/// `a` of output axes 2×3 and `b` of 3×4.
fn a_and_b(graph: &Graph) -> Vec<Tensor> {
    vec![param(graph, "a", "2,3", &A), param(graph, "b", "3,4", &B)]
}

#[test]
fn binary_einsum_infix_mixfix_and_a_spec_variable_match_einsum() {
    // a[i, j]·b[j, k] summed over j, by hand.
    let product: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (0..3).map(|j| A[i * 3 + j] * B[j * 4 + k]).sum()))
        .collect();
    let api = |t: &[Tensor]| t[0].einsum("ij;jk=>ik", &t[1]);
    let infix = agree(
        "infix",
        a_and_b,
        |t| {
            let [a, b] = [&t[0], &t[1]];
            op! { a +* "ij;jk=>ik" b }
        },
        api,
    );
    close(&infix, &product, "a +* spec b");
    let mixfix = |t: &[Tensor]| {
        let [a, b] = [&t[0], &t[1]];
        op! { a +* b "ij;jk=>ik" }
    };
    agree("mixfix", a_and_b, mixfix, api);
    let variable = |t: &[Tensor]| {
        let ([a, b], spec) = ([&t[0], &t[1]], "ij;jk=>ik");
        op! { a +* spec b }
    };
    agree("a spec variable", a_and_b, variable, api);
}

#[test]
fn binary_shorthands_bind_as_plus_does() {
    let graph = Graph::new();
    let [a, b]: [Tensor; 2] = a_and_b(&graph).try_into().unwrap();
    let c = param(&graph, "c", "2,4", &[1.0; 8]);
    let d = param(&graph, "d", "2,3", &[0.5; 6]);
    let product = a.einsum("ij;jk=>ik", &b);
    // Left to right among `+ -`, below `*`: `2·a +* b + c` is `((2·a) +* b) + c`.
    let cases = [
        (op! { a +* "ij;jk=>ik" b + c }, &product + &c),
        (
            op! { d - a +* "ij;jk=>ik" b },
            (&d - &a).einsum("ij;jk=>ik", &b),
        ),
        (
            op! { 2.0 * a +* "ij;jk=>ik" b },
            (2.0 * &a).einsum("ij;jk=>ik", &b),
        ),
        (
            op! { a +* "ij;jk=>ik" b * 3.0 },
            a.einsum("ij;jk=>ik", &(&b * 3.0)),
        ),
    ];
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let all: Vec<&Tensor> = cases.iter().flat_map(|(x, y)| [x, y]).collect();
    let forward = ctx.forward(&all).unwrap();
    ctx.run(&forward).unwrap();
    for (i, (with_op, with_api)) in cases.iter().enumerate() {
        close(
            &ctx.values(with_op).unwrap(),
            &ctx.values(with_api).unwrap(),
            &format!("case {i}"),
        );
    }
}

#[test]
fn unary_einsum_sums_as_einsum1() {
    let make = |graph: &Graph| vec![param(graph, "a", "2,3", &A)];
    let all = agree(
        "sum of everything",
        make,
        |t| {
            let a = &t[0];
            op! { a ++ "...|... => 0" }
        },
        |t| t[0].einsum1("...|... => 0"),
    );
    close(&all, &[A.iter().sum()], "a ++ \"...|... => 0\"");
    let columns = agree(
        "column sums",
        make,
        |t| {
            let a = &t[0];
            op! { (a ++ "ij=>j") * 2.0 }
        },
        |t| &t[0].einsum1("ij=>j") * 2.0,
    );
    let by_hand: Vec<f64> = (0..3).map(|j| 2.0 * (A[j] + A[3 + j])).collect();
    close(&columns, &by_hand, "(a ++ \"ij=>j\") * 2");
}

#[test]
fn outer_sum_adds_then_sums_as_outer_sum() {
    let sums = agree(
        "outer sum",
        a_and_b,
        |t| {
            let [a, b] = [&t[0], &t[1]];
            op! { a +++ "ij;jk=>ik" b }
        },
        |t| t[0].outer_sum("ij;jk=>ik", &t[1]),
    );
    let by_hand: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (0..3).map(|j| A[i * 3 + j] + B[j * 4 + k]).sum()))
        .collect();
    close(&sums, &by_hand, "a +++ spec b");
}

#[test]
fn tropical_max_pools_as_tropical() {
    // One image of 4×4 pixels and one channel, pooled 2×2 with stride 2 through a zero window.
    let pixels: Vec<f64> = (0..16).map(|v| f64::from((v * 7) % 11) - 5.0).collect();
    let make = |graph: &Graph| {
        vec![
            param(graph, "x", "1|->4,4,1", &pixels),
            param(graph, "window", "2,2", &[0.0; 4]),
        ]
    };
    let spec = "...|2*oh<+wh, 2*ow<+ww, ..c..; wh, ww => ...|oh, ow, ..c..";
    let pooled = agree(
        "max pooling",
        make,
        |t| {
            let [input, window] = [&t[0], &t[1]];
            op! { input @^+ "...|2*oh<+wh, 2*ow<+ww, ..c..; wh, ww => ...|oh, ow, ..c.." window }
        },
        |t| t[0].tropical(spec, &t[1]),
    );
    let by_hand: Vec<f64> = (0..2)
        .flat_map(|oh| (0..2).map(move |ow| (oh, ow)))
        .map(|(oh, ow)| {
            [(0, 0), (0, 1), (1, 0), (1, 1)]
                .iter()
                .map(|(dh, dw)| pixels[(2 * oh + dh) * 4 + 2 * ow + dw])
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    close(&pooled, &by_hand, "x @^+ spec window");
}

#[test]
fn unary_max_reduces_as_einmax1() {
    let make = |graph: &Graph| vec![param(graph, "a", "2,3", &A)];
    let maxima = agree(
        "row maxima",
        make,
        |t| {
            let a = &t[0];
            op! { a @^^ "ij=>i" }
        },
        |t| t[0].einmax1("ij=>i"),
    );
    close(&maxima, &[1.0, 3.0], "a @^^ \"ij=>i\"");
    // Below `+ -`: `a + a @^^ spec` is the maxima of `a + a`.
    let doubled = agree(
        "below plus",
        make,
        |t| {
            let a = &t[0];
            op! { a + a @^^ "ij=>i" }
        },
        |t| (&t[0] + &t[0]).einmax1("ij=>i"),
    );
    close(&doubled, &[2.0, 6.0], "a + a @^^ \"ij=>i\"");
}

#[test]
fn concatenation_assembles_as_concat() {
    let make = |graph: &Graph| {
        vec![
            param(graph, "a", "2", &[1.0, 2.0]),
            param(graph, "b", "3", &[3.0, 4.0, 5.0]),
        ]
    };
    let joined = agree(
        "two operands",
        make,
        |t| {
            let [a, b] = [&t[0], &t[1]];
            op! { (a, b) ++^ "i; j => i^j" }
        },
        |t| Tensor::concat("i; j => i^j", &[&t[0], &t[1]]),
    );
    close(&joined, &[1.0, 2.0, 3.0, 4.0, 5.0], "(a, b) ++^ spec");
    let tail = agree(
        "one operand",
        |graph| make(graph).split_off(1),
        |t| {
            let b = &t[0];
            op! { b ++^ "1^j => j" }
        },
        |t| Tensor::concat("1^j => j", &[&t[0]]),
    );
    close(&tail, &[4.0, 5.0], "b ++^ \"1^j => j\"");
    // Three operands along their first axis, the rest alike (einops' `concatenate`).
    let rows = |graph: &Graph| {
        vec![
            param(graph, "a", "2,2", &[1.0, 2.0, 3.0, 4.0]),
            param(graph, "b", "1,2", &[5.0, 6.0]),
            param(graph, "c", "1,2", &[7.0, 8.0]),
        ]
    };
    let spec = "x, ...; y, ...; z, ... => x^y^z, ...";
    let stacked = agree(
        "three operands",
        rows,
        |t| {
            let [a, b, c] = [&t[0], &t[1], &t[2]];
            op! { (a, b, c) ++^ "x, ...; y, ...; z, ... => x^y^z, ..." }
        },
        |t| Tensor::concat(spec, &[&t[0], &t[1], &t[2]]),
    );
    close(
        &stacked,
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        "(a, b, c) ++^ spec",
    );
}

#[test]
fn slicing_at_a_static_index_matches_slice() {
    let rows: Vec<f64> = (0..12).map(f64::from).collect();
    for with_op in [true, false] {
        let graph = Graph::new();
        let w = param(&graph, "w", "4|->3", &rows);
        let at = graph.static_index();
        // Below `*`: `2·w @| at` slices `2·w`.
        let row = if with_op {
            op! { 2.0 * w @| at }
        } else {
            (2.0 * &w).slice(&at)
        };
        let (values, grads) = run(&graph, &row, &[&w], &[(at, 2)]);
        close(
            &values,
            &[12.0, 14.0, 16.0],
            &format!("row 2 (op!: {with_op})"),
        );
        let mut expected = vec![0.0; 12];
        expected[6..9].fill(2.0);
        close(&grads[0], &expected, &format!("gradient (op!: {with_op})"));
    }
}

#[test]
fn an_embedded_static_index_holds_its_value_on_both_backends() -> Result<(), TensorError> {
    let xs = [1.0, -2.0, 0.5];
    let backends: [Box<dyn Backend>; 2] = [
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ];
    for backend in backends {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("3")
            .precision(Precision::F64)
            .values(xs.to_vec())
            .build();
        let step = graph.static_index_with_range(5);
        let embedded = graph.embed_static("step", &step);
        let shifted = &x + &embedded;
        // A rate falling linearly with the step, as OCANNL's schedules are written.
        let rate = (10.0 - &embedded) / 4.0;
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&shifted, &rate])?;
        // One routine, run at several values of the index.
        for value in [0, 3, 4] {
            ctx.run_with(&forward, &[(step, value)])?;
            let v = value as f64;
            let want: Vec<f64> = xs.iter().map(|x| x + v).collect();
            close(
                &ctx.values(&shifted)?,
                &want,
                &format!("x + step at {value}"),
            );
            close(&ctx.values(&rate)?, &[(10.0 - v) / 4.0], "(10 - step) / 4");
        }
    }
    Ok(())
}

#[test]
fn embedding_a_static_index_matches_embed_static() {
    let xs = [1.0, -2.0, 0.5];
    for value in [1, 4] {
        let v = value as f64;
        let sides = [true, false].map(|with_op| {
            let graph = Graph::new();
            let x = param(&graph, "x", "3", &xs);
            let step = graph.static_index_with_range(5);
            // `!@` takes the whole Rust value after it: `!@held.0` is the index `held.0`.
            let held = (step,);
            let out = if with_op {
                op! { pmul(x, 10.0 - !@step) + !@held.0 }
            } else {
                let embedded = graph.embed_static("step", &step);
                &x.pmul(&(10.0 - &embedded)) + &embedded
            };
            run(&graph, &out, &[&x], &[(step, value)])
        });
        let [(op_values, op_grads), (api_values, api_grads)] = sides;
        let want: Vec<f64> = xs.iter().map(|x| x * (10.0 - v) + v).collect();
        close(
            &op_values,
            &want,
            &format!("x·(10 - !@step) + !@step at {value}"),
        );
        close(&api_values, &want, &format!("embed_static at {value}"));
        close(&op_grads[0], &[10.0 - v; 3], "gradient through op!");
        close(&api_grads[0], &[10.0 - v; 3], "gradient through the API");
    }
}

#[test]
fn a_rate_falling_with_an_unranged_step_trains_on_both_backends() -> Result<(), TensorError> {
    let (start, target) = ([2.0, -1.0], [0.5, 0.25]);
    for backend in crate::cpu::backends() {
        let name = backend.name();
        let graph = Graph::new();
        // The numbers of the rate in f64, as the host's expected values.
        graph.set_default_precision(Precision::F64);
        let w = param(&graph, "w", "2", &start);
        let goal = crate::cpu::data(&graph, "goal", "2", &target);
        // An index without a range, embedded directly: the step counts up without a bound.
        let step = graph.static_index();
        let embedded = graph.embed_static("step", &step);
        let rate = 0.5 / &(1.0 + &embedded);
        let error = &w - &goal;
        let loss = error.pmul(&error);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        let train = ctx.train_step(
            &loss,
            &[Update::subtract(
                &w,
                Formula::value(&rate) * Formula::grad(&w),
            )],
        )?;
        let forward = ctx.forward(&[&rate])?;
        let mut want = start;
        for k in 0..6i64 {
            ctx.run_with(&train, &[(step, k)])?;
            ctx.run_with(&forward, &[(step, k)])?;
            let rate_k = 0.5 / (1.0 + k as f64);
            close(
                &ctx.values(&rate)?,
                &[rate_k],
                &format!("{name}: rate at step {k}"),
            );
            for (w, t) in want.iter_mut().zip(target) {
                *w -= rate_k * 2.0 * (*w - t);
            }
            close(
                &ctx.values(&w)?,
                &want,
                &format!("{name}: w after step {k}"),
            );
        }
        // Far past any slice's range: the index has none.
        ctx.run_with(&forward, &[(step, 1_000_000)])?;
        close(
            &ctx.values(&rate)?,
            &[0.5 / 1_000_001.0],
            &format!("{name}: a far step"),
        );
    }
    Ok(())
}

#[test]
fn bang_at_embeds_an_index_without_a_range() -> Result<(), TensorError> {
    let xs = [1.0, -2.0, 0.5];
    for backend in crate::cpu::backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = param(&graph, "x", "3", &xs);
        let i = graph.static_index();
        let out = op! { pmul(x, !@i) + 2.0 * !@i };
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        let backprop = ctx.backprop(&out)?;
        for value in [0i64, 7, 40] {
            ctx.run_with(&backprop, &[(i, value)])?;
            let v = value as f64;
            let want: Vec<f64> = xs.iter().map(|x| x * v + 2.0 * v).collect();
            close(
                &ctx.values(&out)?,
                &want,
                &format!("{name}: x·i + 2i at {value}"),
            );
            close(
                &ctx.grad(&x)?,
                &[v; 3],
                &format!("{name}: gradient at {value}"),
            );
        }
    }
    Ok(())
}

#[test]
fn an_unranged_index_also_slicing_takes_the_slices_range() -> Result<(), TensorError> {
    let graph = Graph::new();
    let rows = crate::cpu::data(
        &graph,
        "rows",
        "4|->2",
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    );
    let i = graph.static_index();
    let out = op! { (rows @| i) + !@i };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&out])?;
    ctx.run_with(&forward, &[(i, 3)])?;
    close(&ctx.values(&out)?, &[9.0, 10.0], "row 3 plus 3");
    let outside = ctx.run_with(&forward, &[(i, 4)]).unwrap_err();
    assert!(
        outside.message.contains("'rows'") && outside.message.contains("outside 0..4"),
        "{}",
        outside.message
    );
    Ok(())
}

#[test]
fn embedding_an_unranged_index_checks_its_value_and_its_graph() {
    let graph = Graph::new();
    let x = param(&graph, "x", "3", &[0.0; 3]);
    let step = graph.static_index();
    let embedded = graph.embed_static("lr_step", &step);
    let out = &x + &embedded;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let forward = ctx.forward(&[&out]).unwrap();
    for bad in [-1, 1 << 31] {
        let error = ctx.run_with(&forward, &[(step, bad)]).unwrap_err();
        assert!(
            error.message.contains("embedded in")
                && error.message.contains("outside 0..2147483648"),
            "{}",
            error.message
        );
    }
    let unset = ctx.run(&forward).unwrap_err();
    assert!(unset.message.contains("no value"), "{}", unset.message);
    let graph = Graph::new();
    graph.embed_static("step", &Graph::new().static_index_with_range(3));
    let message = graph.check().unwrap_err().message;
    assert!(
        message.contains("'step'") && message.contains("another graph"),
        "{message}"
    );
    let graph = Graph::new();
    graph.embed_static("batch", &Graph::new().static_index());
    let message = graph.check().unwrap_err().message;
    assert!(
        message.contains("'batch'") && message.contains("another graph"),
        "{message}"
    );
}

#[test]
fn running_an_embedded_static_index_outside_its_range_is_an_error_naming_it() {
    let graph = Graph::new();
    let x = param(&graph, "x", "3", &[0.0; 3]);
    let step = graph.static_index_with_range(5);
    let out = op! { x + !@step };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let forward = ctx.forward(&[&out]).unwrap();
    let outside = ctx.run_with(&forward, &[(step, 5)]).unwrap_err();
    assert_eq!(outside.kind, TensorErrorKind::Run);
    assert!(
        outside.message.contains("'step'") && outside.message.contains("outside 0..5"),
        "{}",
        outside.message
    );
    let unset = ctx.run(&forward).unwrap_err();
    assert!(
        unset.message.contains("'step'") && unset.message.contains("no value"),
        "{}",
        unset.message
    );
}

#[test]
fn capture_lists_bind_the_sizes_for_the_code_after() -> Result<(), TensorError> {
    let graph = Graph::new();
    let [a, b]: [Tensor; 2] = a_and_b(&graph).try_into().unwrap();
    let cells: Vec<f64> = (0..24).map(f64::from).collect();
    let x = param(&graph, "x", "2|->3,4", &cells);
    op! {
        let product = a +* "ij;jk=>ik" ["i", "j"] b;
        let totals = x ++ "...|..d.. => ...|0" ["d"];
        let joined = (a, b) ++^ "p, ..r..; q, ..s.. => p^q" ["p", "q"];
    }
    // An unknown hidden size, fixed through its capture rather than a declaration.
    op! { let hidden = x +* "...|..d..; ..d.., h => ...|h" ["h"] { w }; }
    let [i, j, d, p, q, h] = [i, j, d, p, q, h].map(|c| c.expect("the spec names it"));
    graph.set_dim(&h, 5)?;
    let means = op! { totals / graph.dim(&d) };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params()?;
    let forward = ctx.forward(&[&product, &joined, &hidden, &means])?;
    ctx.run(&forward)?;
    let sizes = [&i, &j, &d, &p, &q, &h].map(|c| graph.capture_value(c));
    assert_eq!(sizes, [2, 3, 12, 2, 3, 5].map(Some));
    assert_eq!(hidden.shape(), "2|->5");
    let w = graph
        .params()
        .into_iter()
        .find(|p| p.label() == "w")
        .unwrap();
    assert_eq!(w.shape(), "|->3,4,5");
    // Each batch row's cells summed, divided by their count (12).
    let by_hand = [0, 1].map(|r| cells[r * 12..(r + 1) * 12].iter().sum::<f64>() / 12.0);
    close(&ctx.values(&means)?, &by_hand, "totals / d");
    // The rows of `a` summed, then those of `b`.
    let rows = |m: &[f64], n: usize| -> Vec<f64> { m.chunks(n).map(|r| r.iter().sum()).collect() };
    let want: Vec<f64> = rows(&A, 3).into_iter().chain(rows(&B, 4)).collect();
    close(&ctx.values(&joined)?, &want, "(a, b) ++^ spec");
    Ok(())
}

#[test]
fn a_capture_the_spec_lacks_is_an_error_naming_it() {
    let graph = Graph::new();
    let [a, b]: [Tensor; 2] = a_and_b(&graph).try_into().unwrap();
    op! { let product = a +* "ij;jk=>ik" ["z"] b; }
    let message = z.unwrap_err().message;
    assert!(message.contains("'z'"), "{message}");
    assert!(product.capture("j").is_ok());
}

op! {
    /// The mean of every cell, its count captured from the spec.
    fn mean(x) {
        let total = x ++ "...|..n.. => 0" ["n"];
        total / Tensor::graph(x).dim(&n.expect("the spec names `n`"))
    }
}

#[test]
fn a_function_body_captures_for_its_later_lines() {
    let graph = Graph::new();
    let x = param(&graph, "x", "2,3", &A);
    let m = mean(&x);
    let (values, grads) = run(&graph, &m, &[&x], &[]);
    close(&values, &[A.iter().sum::<f64>() / 6.0], "mean");
    close(&grads[0], &[1.0 / 6.0; 6], "gradient of the mean");
}
