//! The API programs' misuses of state, tried after a program has run: reads of tensors no
//! routine computed, data never given values, updates reading computed tensors, gradients no
//! backprop keeps or parameters never initialized, batch normalization applied in train mode
//! outside the loss, and gathers (in range or not). Each must give the right values or an
//! error, never `Ok` with a stand-in.

use rcannl_ir::Precision;
use rcannl_nn::norm::{BatchNorm, Mode};
use rcannl_nn::optim::Sgd;
use rcannl_tensor::{Context, Formula, Graph, Init, Tensor, Update};

use crate::close;
use crate::rng::{Draw, Rng};

/// A tensor of the program with the values a direct evaluation gives it.
pub(crate) struct Known<'a> {
    pub tensor: &'a Tensor,
    pub values: &'a [f64],
}

/// Whether `got` are `expected`, NaN for NaN.
fn agree(got: &[f64], expected: &[f64]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(&g, &e)| g.to_bits() == e.to_bits() || close(g, e, 1e-12))
}

/// An f64 data tensor of one output axis.
fn data(graph: &Graph, label: &str, values: Option<Vec<f64>>, n: usize) -> Tensor {
    let builder = graph
        .data(label)
        .shape(&n.to_string())
        .precision(Precision::F64);
    match values {
        Some(values) => builder.values(values).build(),
        None => builder.build(),
    }
}

/// Reading `hidden` (computed, but by no routine that ran) must be refused.
pub(crate) fn uncomputed_read(ctx: &Context, hidden: &[Tensor]) -> Result<(), String> {
    for t in hidden {
        if let Ok(values) = ctx.values(t) {
            return Err(format!(
                "'{}', which no routine computed, read as {values:?}",
                t.label()
            ));
        }
    }
    Ok(())
}

/// Misuses of state around `known` (tensors of `graph`, which `ctx` has run): each must be
/// refused or give a direct evaluation's values. `Err` says which was accepted or wrong.
pub(crate) fn misuses(
    rng: &mut Rng,
    graph: &Graph,
    ctx: &mut Context,
    known: &Known<'_>,
) -> Result<(), String> {
    let n = known.values.len();
    match rng.below(5) {
        0 => {
            // An update reading a computed tensor computes it first.
            let target = data(graph, "fuzz target", Some(vec![0.0; n]), n);
            let negated = known.tensor.neg();
            let update = Update::set(&target, Formula::value(&negated) * 2.0);
            let routine = ctx
                .update(&[update])
                .map_err(|e| format!("an update reading a computed tensor: {e}"))?;
            ctx.run(&routine)
                .map_err(|e| format!("an update reading a computed tensor ran: {e}"))?;
            let got = ctx.values(&target).map_err(|e| e.message)?;
            let expected: Vec<f64> = known.values.iter().map(|v| -v * 2.0).collect();
            if !agree(&got, &expected) {
                return Err(format!(
                    "an update reading -x·2 set {got:?}, a direct evaluation gives {expected:?}"
                ));
            }
        }
        1 => {
            // Data never given values: every routine reading it refuses to run until it is set.
            let unset = data(graph, "unset", None, n);
            let sum = &unset + known.tensor;
            let forward = ctx.forward(&[&sum]).map_err(|e| e.message)?;
            if ctx.run(&forward).is_ok() {
                return Err("a routine reading data never given values ran".into());
            }
            if ctx.values(&unset).is_ok() {
                return Err("data never given values was read".into());
            }
            let values: Vec<f64> = (0..n).map(|i| i as f64 - 1.5).collect();
            ctx.set_values(&unset, &values).map_err(|e| e.message)?;
            ctx.run(&forward)
                .map_err(|e| format!("once set, the routine failed: {e}"))?;
            let got = ctx.values(&sum).map_err(|e| e.message)?;
            let expected: Vec<f64> = values
                .iter()
                .zip(known.values)
                .map(|(a, b)| a + b)
                .collect();
            if !agree(&got, &expected) {
                return Err(format!(
                    "unset + x once set: {got:?}, expected {expected:?}"
                ));
            }
        }
        2 => {
            // An update reading the gradient of a computed tensor no backprop keeps, and one
            // reading a parameter added after init_params.
            let target = data(graph, "fuzz target", Some(vec![0.0; n]), n);
            let computed = known.tensor.neg();
            if ctx
                .update(&[Update::set(&target, Formula::grad(&computed))])
                .is_ok()
            {
                return Err("an update reading a gradient no backprop keeps compiled".into());
            }
            let late = graph
                .param("late")
                .shape(&n.to_string())
                .precision(Precision::F64)
                .init(Init::Constant(0.5))
                .build();
            let update = ctx
                .update(&[Update::set(&target, Formula::value(&late))])
                .map_err(|e| e.message)?;
            if ctx.run(&update).is_ok() {
                return Err("an update reading a parameter never initialized ran".into());
            }
            ctx.init_params().map_err(|e| e.message)?;
            ctx.run(&update).map_err(|e| e.message)?;
            if ctx.values(&target).map_err(|e| e.message)? != vec![0.5; n] {
                return Err("the update of an initialized parameter's value".into());
            }
        }
        3 => return train_mode_twice(rng, n),
        _ => return gather(rng),
    }
    Ok(())
}

/// Batch normalization applied in train mode to the loss's batch and to another (a diagnostic
/// pass): the running statistics follow the loss's batch alone.
fn train_mode_twice(rng: &mut Rng, n: usize) -> Result<(), String> {
    let rows = n.max(2);
    let graph = Graph::new();
    let draw = |rng: &mut Rng| (rng.below(2001) as f64 - 1000.0) / 100.0;
    let batch: Vec<f64> = (0..rows).map(|_| draw(rng)).collect();
    let other: Vec<f64> = (0..3).map(|_| draw(rng)).collect();
    let x = graph
        .data("x")
        .shape(&format!("{rows}|->1"))
        .precision(Precision::F64)
        .values(batch.clone())
        .build();
    let probe = graph
        .data("probe")
        .shape("3|->1")
        .precision(Precision::F64)
        .values(other)
        .build();
    let norm = BatchNorm::with_precision(&graph, "bn", 1, Precision::F64);
    let out = norm.apply(&x, Mode::Train);
    let diagnostic = norm.apply(&probe, Mode::Train);
    let loss = rcannl_nn::loss::sum(&out.pmul(&out));
    let mut ctx = Context::with_backend(&graph, Box::new(rcannl_backends::Interpreter));
    ctx.init_params().map_err(|e| e.message)?;
    let step = Sgd::new(&graph, &norm.params(), 0.01, 0.0)
        .compile_step(&mut ctx, &loss)
        .map_err(|e| e.message)?;
    let look = ctx.forward(&[&diagnostic]).map_err(|e| e.message)?;
    let steps = rng.between(1, 3);
    for _ in 0..steps {
        ctx.run(&step).map_err(|e| e.message)?;
        ctx.run(&look).map_err(|e| e.message)?;
    }
    let count = rows as f64;
    let mean = batch.iter().sum::<f64>() / count;
    let variance = batch.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1.0);
    let (mut running_mean, mut running_var) = (0.0, 1.0);
    for _ in 0..steps {
        running_mean = 0.9 * running_mean + 0.1 * mean;
        running_var = 0.9 * running_var + 0.1 * variance;
    }
    let got_mean = ctx.values(&norm.running_mean).map_err(|e| e.message)?;
    let got_var = ctx.values(&norm.running_var).map_err(|e| e.message)?;
    if !close(got_mean[0], running_mean, 1e-9) || !close(got_var[0], running_var, 1e-9) {
        return Err(format!(
            "batch norm over {batch:?} then a train-mode pass outside the loss, {steps} steps: \
             running statistics ({}, {}), the loss's batch gives ({running_mean}, \
             {running_var})",
            got_mean[0], got_var[0]
        ));
    }
    Ok(())
}

/// A table's rows gathered at ids (some outside the table or not whole numbers, which select
/// no row: the one-hot product's zero), checked against the one-hot product by hand.
fn gather(rng: &mut Rng) -> Result<(), String> {
    let (vocabulary, width, count) = (rng.between(1, 6), rng.between(1, 4), rng.between(1, 6));
    let graph = Graph::new();
    let table_values: Vec<f64> = (0..vocabulary * width)
        .map(|_| rng.below(199) as f64 - 99.0)
        .collect();
    let ids: Vec<f64> = (0..count)
        .map(|_| match rng.below(8) {
            0 => vocabulary as f64,
            1 => -1.0,
            2 => 0.5,
            _ => rng.below(vocabulary) as f64,
        })
        .collect();
    // `|vocabulary -> width`: stored [width, vocabulary].
    let table = graph
        .data("table")
        .shape(&format!("|{vocabulary}->{width}"))
        .precision(Precision::F64)
        .values(table_values.clone())
        .build();
    let id_tensor = graph
        .data("ids")
        .shape(&format!("{count}|->"))
        .precision(Precision::F64)
        .values(ids.clone())
        .build();
    let rows = &table * &Tensor::one_hot(&id_tensor, vocabulary);
    let mut ctx = Context::with_backend(&graph, Box::new(rcannl_backends::Interpreter));
    let forward = ctx.forward(&[&rows]).map_err(|e| e.message)?;
    ctx.run(&forward).map_err(|e| e.message)?;
    let got = ctx.values(&rows).map_err(|e| e.message)?;
    let expected: Vec<f64> = ids
        .iter()
        .flat_map(|&id| {
            let table_values = &table_values;
            (0..width).map(move |j| {
                let whole = id >= 0.0 && id.fract() == 0.0 && (id as usize) < vocabulary;
                if whole {
                    table_values[j * vocabulary + id as usize]
                } else {
                    0.0
                }
            })
        })
        .collect();
    if !agree(&got, &expected) {
        return Err(format!(
            "a gather of ids {ids:?} from a {vocabulary}×{width} table: {got:?}, the one-hot \
             product gives {expected:?}"
        ));
    }
    Ok(())
}
