//! Operations `cd!` defines with intermediates (`{ e } =: …`, `{ mask_rhs1 } =: …`): values
//! against the library's own operations and hand computations, gradients against finite
//! differences, on both backends; and what the API refuses.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Binop, Slot, Unop};
use rcannl_tensor::define::Intermediate;
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Context, Definition, Formula, Graph, OpLogic, Tensor, cd};

use crate::macros::close;
use crate::op_shorthands::param;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// 2×2 windows, 2 apart, of every channel of an image `batch | -> h, w, c`.
const POOL: &str = "...|2*oh<+wh, 2*ow<+ww, ..c.. => ...|oh, ow, ..c..";
/// [`POOL`]'s windows, each position plus its tap of a window tensor.
const THROUGH_WINDOW: &str = "...|2*oh<+wh, 2*ow<+ww, ..c..; wh, ww => ...|oh, ow, ..c..";

cd! {
    /// `log(1 + eˣ)` with `eˣ` computed once, in the forward pass: the result and the gradient
    /// both read it.
    fn softplus(x) {
        { e } =: exp(v1);
        v =: log(1 + e);
        g1 =+ g * e / (1 + e);
    }

    /// The largest cell of each window of `POOL`. The backward pass stores each window's maximum
    /// at the window's positions (input-shaped, OCANNL's `_rhs1`), marks the positions equal to
    /// it, and routes the gradient there.
    fn max_pool(x) {
        v =:max v1 ~logic: POOL;
        { top_rhs1 } =: v;
        { mask_rhs1 } =: v1 == top_rhs1;
        g1 =+ where_(mask_rhs1, g, 0);
    }

    /// The largest `x + w` of each window of `THROUGH_WINDOW` (max pooling through a window
    /// `w`), with the gradient of OCANNL's `tropical`: each input position's largest sum over the
    /// window taps reaching it, the mask of those equal to the result, and the gradient through
    /// the mask to both.
    fn tropical_pool(x, w) {
        v =:max v1 + v2 ~logic: THROUGH_WINDOW;
        { sum_rhs1 } =:max v1 + v2;
        { cond_rhs1 } =: v == sum_rhs1;
        g1 =+ where_(cond_rhs1, g, 0);
        g2 =+ where_(cond_rhs1, g, 0);
    }
}

/// [`max_pool`] of `x` with its windows 2×2: a spec's window labels take their size from their
/// operands, and a window label of one operand from nothing, so it is set.
fn pooled(graph: &Graph, x: &Tensor) -> Tensor {
    let y = max_pool(x);
    for label in ["wh", "ww"] {
        graph.set_dim(&y.capture(label).unwrap(), 2).unwrap();
    }
    y
}

/// The library's max pooling of `x` (an `einmax1` over the same windows, as
/// `nn::conv::max_pool2d` builds it).
fn library_pooled(graph: &Graph, x: &Tensor) -> Tensor {
    let y = x.einmax1(POOL);
    for label in ["wh", "ww"] {
        graph.set_dim(&y.capture(label).unwrap(), 2).unwrap();
    }
    y
}

/// `out`'s values and the gradient of `x` (every cell of `out` seeded with 1) on `backend`.
fn backprop(backend: Box<dyn Backend>, graph: &Graph, out: &Tensor, x: &Tensor) -> [Vec<f64>; 2] {
    let mut ctx = Context::with_backend(graph, backend);
    ctx.init_params().unwrap();
    let routine = ctx.backprop(out).unwrap();
    ctx.run(&routine).unwrap();
    [ctx.values(out).unwrap(), ctx.grad(x).unwrap()]
}

#[test]
fn an_intermediate_read_by_the_result_and_the_gradient_is_computed_once_before_both() {
    let xs = [-1.5, -0.2, 0.3, 2.0];
    for backend in backends() {
        let on = backend.name();
        let graph = Graph::new();
        let x = param(&graph, "x", "4", &xs);
        let y = softplus(&x);
        let [values, grad] = backprop(backend, &graph, &y, &x);
        let want: Vec<f64> = xs.iter().map(|x: &f64| x.exp().ln_1p()).collect();
        close(&values, &want, &format!("{on}: softplus"));
        let logistic: Vec<f64> = xs.iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect();
        close(&grad, &logistic, &format!("{on}: its gradient"));
    }
    for backend in backends() {
        let on = backend.name();
        let inputs = Inputs {
            shapes: &["2,3"],
            positive: false,
        };
        check_gradients(backend, &inputs, 1e-5, |_, p| softplus(&p[0]))
            .unwrap_or_else(|e| panic!("softplus on {on}: {e}"));
    }
}

#[test]
fn max_pooling_through_a_mask_intermediate_is_the_librarys_and_passes_the_check() {
    // One image of 4×6 pixels and 2 channels, its values distinct in every window.
    let pixels: Vec<f64> = (0..48).map(|v| f64::from((v * 7) % 17) - 8.0).collect();
    for backend in backends() {
        let on = backend.name();
        let graph = Graph::new();
        let x = param(&graph, "x", "1|->4,6,2", &pixels);
        let [values, grad] = backprop(backend, &graph, &pooled(&graph, &x), &x);
        let graph = Graph::new();
        let x = param(&graph, "x", "1|->4,6,2", &pixels);
        let [want, want_grad] = backprop(
            Box::new(Interpreter),
            &graph,
            &library_pooled(&graph, &x),
            &x,
        );
        close(&values, &want, &format!("{on}: the maxima"));
        close(&grad, &want_grad, &format!("{on}: the gradient"));
        let by_hand: Vec<f64> = (0..2)
            .flat_map(|oh| (0..3).flat_map(move |ow| (0..2).map(move |c| (oh, ow, c))))
            .map(|(oh, ow, c)| {
                [(0, 0), (0, 1), (1, 0), (1, 1)]
                    .iter()
                    .map(|(dh, dw)| pixels[((2 * oh + dh) * 6 + 2 * ow + dw) * 2 + c])
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect();
        close(&values, &by_hand, &format!("{on}: the maxima by hand"));
        // Each window's gradient goes to its maximum's one position.
        assert_eq!(grad.iter().sum::<f64>(), 12.0, "{on}: {grad:?}");
        assert!(grad.iter().all(|&g| g == 0.0 || g == 1.0), "{on}: {grad:?}");
    }
    for backend in backends() {
        let on = backend.name();
        let inputs = Inputs {
            shapes: &["1|->4,4,2"],
            positive: false,
        };
        check_gradients(backend, &inputs, 1e-5, |graph, p| pooled(graph, &p[0]))
            .unwrap_or_else(|e| panic!("max_pool on {on}: {e}"));
    }
}

#[test]
fn ocannls_tropical_gradient_through_rhs1_intermediates_is_the_librarys() {
    let pixels: Vec<f64> = (0..16).map(|v| f64::from((v * 7) % 11) - 5.0).collect();
    let window = [0.25, -0.5, 0.0, 0.75];
    for backend in backends() {
        let on = backend.name();
        let run = |backend: Box<dyn Backend>, library: bool| {
            let graph = Graph::new();
            let x = param(&graph, "x", "1|->4,4,1", &pixels);
            let w = param(&graph, "w", "2,2", &window);
            let y = match library {
                true => x.tropical(THROUGH_WINDOW, &w),
                false => tropical_pool(&x, &w),
            };
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let routine = ctx.backprop(&y).unwrap();
            ctx.run(&routine).unwrap();
            [ctx.values(&y), ctx.grad(&x), ctx.grad(&w)].map(Result::unwrap)
        };
        let [values, x_grad, w_grad] = run(backend, false);
        let [want, want_x, want_w] = run(Box::new(Interpreter), true);
        close(&values, &want, &format!("{on}: the maxima"));
        close(&x_grad, &want_x, &format!("{on}: the gradient of x"));
        close(
            &w_grad,
            &want_w,
            &format!("{on}: the gradient of the window"),
        );
    }
    for backend in backends() {
        let on = backend.name();
        let inputs = Inputs {
            shapes: &["1|->4,4,3", "2,2"],
            positive: false,
        };
        check_gradients(backend, &inputs, 1e-5, |_, p| tropical_pool(&p[0], &p[1]))
            .unwrap_or_else(|e| panic!("tropical_pool on {on}: {e}"));
    }
}

#[test]
fn formulas_reading_intermediates_they_cannot_are_errors() {
    let define = |forward: Formula, intermediates: Vec<Intermediate>| {
        let graph = Graph::new();
        let x = graph.param("x").shape("3").build();
        let definition = Definition {
            logic: OpLogic::Pointwise,
            accum: Binop::Arg2,
            forward,
            gradients: vec![(0, Formula::result_grad())],
        };
        let y = graph.define_with("bad", &[&x], definition, intermediates);
        y.error().map(|e| e.message).unwrap_or_default()
    };
    let exp = |backward: bool, slot: Slot| Intermediate {
        name: "e".to_owned(),
        slot,
        accum: Binop::Arg2,
        formula: Formula::input(0).apply(Unop::Exp),
        backward,
    };
    let reads_backward = define(Formula::intermediate(0), vec![exp(true, Slot::Lhs)]);
    assert!(
        reads_backward.contains("forward formula can only read"),
        "{reads_backward}"
    );
    let reads_later = {
        let mut first = exp(false, Slot::Lhs);
        first.formula = Formula::intermediate(1);
        define(Formula::input(0), vec![first, exp(false, Slot::Lhs)])
    };
    assert!(
        reads_later.contains("intermediate 'e' can only read"),
        "{reads_later}"
    );
    let beyond = define(Formula::input(0), vec![exp(false, Slot::Rhs(1))]);
    assert!(beyond.contains("slot of operand 1, of 1"), "{beyond}");
    assert_eq!(
        define(Formula::intermediate(0), vec![exp(false, Slot::Rhs(0))]),
        ""
    );
}
