//! What the CPU block tests share: both CPU backends, a finite-difference check of a block on
//! each, and fixed f64 weights for its outputs; and the check of data-parallel training across
//! devices against one device, which the conformance suite runs on the GPU too.

#![allow(dead_code)] // each test file uses its own subset

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::devices::{Replica, Shuffle, fit_on_devices, shards, share_params};
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::Sgd;
use rcannl_nn::train::{Plan, epoch_order};
use rcannl_tensor::gradcheck::{Inputs, check_gradients, test_values};
use rcannl_tensor::{Context, Graph, Routine, StaticIndex, Tensor};

/// The interpreter and the C backend.
pub fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// Checks the gradients of `build` over f64 inputs of `shapes` by finite differences on both
/// CPU backends; panics naming the block and the backend.
pub fn check(name: &str, shapes: &[&str], build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs {
            shapes,
            positive: false,
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, &build) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

/// An f64 data tensor of the given shape and values.
pub fn data(graph: &Graph, label: &str, shape: &str, values: Vec<f64>) -> Tensor {
    graph
        .data(label)
        .shape(shape)
        .precision(Precision::F64)
        .values(values)
        .build()
}

/// Fixed f64 weights of the given shape (`n` cells), to weight outputs: the plain sum of a
/// softmax or a normalized tensor does not depend on its input, so its gradients would be 0.
pub fn weights(graph: &Graph, shape: &str, n: usize) -> Tensor {
    data(graph, "weights", shape, test_values(n, 99))
}

/// The moons training set (noise 0.1, seed 1) as `batches` batches of `batch` points: the data
/// tensors `xs` (`batches,batch|->2`) and `ys` (`batches,batch|->1`, labels ±1).
pub fn moons_batches(graph: &Graph, batches: usize, batch: usize) -> (Tensor, Tensor) {
    let (x, y) = rcannl_nn::data::moons(batches * batch, 0.1, 1);
    let xs = graph
        .data("xs")
        .shape(&format!("{batches},{batch}|->2"))
        .values(x)
        .build();
    let ys = graph
        .data("ys")
        .shape(&format!("{batches},{batch}|->1"))
        .values(y)
        .build();
    (xs, ys)
}

/// The batches of a data-parallel check, of [`DATA_PARALLEL_BATCH`] rows each.
const DATA_PARALLEL_BATCHES: usize = 4;
/// Rows per batch: divides evenly among 2 and 3 devices.
const DATA_PARALLEL_BATCH: usize = 12;
const DATA_PARALLEL_EPOCHS: usize = 3;
const DATA_PARALLEL_SEED: u64 = 5;

/// A moons MLP (2 → 8 → 1, hinge loss) in some precision on some rows of every batch: its graph,
/// its data tensors `xs` and `ys` (given no values), batch index, parameters and loss.
struct MlpGraph {
    graph: Graph,
    data: [Tensor; 2],
    batch: StaticIndex,
    params: Vec<Tensor>,
    loss: Tensor,
}

impl MlpGraph {
    fn new(rows: usize, precision: Precision) -> MlpGraph {
        let graph = Graph::new();
        let data = |label: &str, width: usize| {
            graph
                .data(label)
                .shape(&format!("{DATA_PARALLEL_BATCHES},{rows}|->{width}"))
                .precision(precision)
                .build()
        };
        let (x, y) = (data("xs", 2), data("ys", 1));
        let batch = graph.static_index();
        let param = |label: &str, width: Option<usize>| {
            let leaf = graph.param(label).precision(precision);
            match width {
                Some(width) => leaf.output([width]).build(),
                None => leaf.build(),
            }
        };
        let (w1, b1, w2, b2) = (
            param("w1", Some(8)),
            param("b1", None),
            param("w2", Some(1)),
            param("b2", None),
        );
        let hidden = (&(&w1 * &x.slice(&batch)) + &b1).relu();
        let scores = &(&w2 * &hidden) + &b2;
        let loss = hinge(&scores, &y.slice(&batch));
        MlpGraph {
            graph,
            data: [x, y],
            batch,
            params: vec![w1, b1, w2, b2],
            loss,
        }
    }

    /// A context on `backend`, its parameters drawn from `seed`, its data set to `xs` and `ys`,
    /// with its backprop and its update (SGD with momentum).
    fn on(
        &self,
        backend: Box<dyn Backend>,
        seed: u64,
        [xs, ys]: [&[f64]; 2],
    ) -> (Context, Routine, Routine) {
        let name = backend.name();
        let mut ctx = Context::with_backend(&self.graph, backend);
        ctx.set_seed(seed);
        ctx.init_params().unwrap();
        ctx.set_values(&self.data[0], xs).unwrap();
        ctx.set_values(&self.data[1], ys).unwrap();
        let backprop = ctx
            .backprop(&self.loss)
            .unwrap_or_else(|e| panic!("backprop on {name}: {e}"));
        let update = Sgd::new(&self.graph, &self.params, 0.1, 0.9)
            .compile(&mut ctx)
            .unwrap_or_else(|e| panic!("update on {name}: {e}"));
        (ctx, backprop, update)
    }

    /// The values of the parameters in `ctx`.
    fn values(&self, ctx: &Context) -> Vec<Vec<f64>> {
        self.params.iter().map(|p| ctx.values(p).unwrap()).collect()
    }
}

/// The largest difference between two lists of arrays, relative to the larger of 1 and the
/// value expected.
fn worst(got: &[Vec<f64>], want: &[Vec<f64>]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .flatten()
        .zip(want.iter().flatten())
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Data-parallel training on `devices` (a context each, of one graph, each on its shard of every
/// batch, in a shuffled order) ends with parameters equal within `tolerance` on every device,
/// and equal within `tolerance` to those of the same training on `reference` alone, on whole
/// batches, in a loop of its own; the losses of each epoch agree too.
pub fn check_data_parallel(
    devices: Vec<Box<dyn Backend>>,
    reference: Box<dyn Backend>,
    precision: Precision,
    tolerance: f64,
) {
    let names: Vec<&str> = devices.iter().map(|d| d.name()).collect();
    let what = format!("{} against {}", names.join(" + "), reference.name());
    let rows = DATA_PARALLEL_BATCHES * DATA_PARALLEL_BATCH;
    let (xs, ys) = rcannl_nn::data::moons(rows, 0.1, 3);
    let n = devices.len();
    let x_shards = shards(&xs, DATA_PARALLEL_BATCHES, DATA_PARALLEL_BATCH, 2, n).unwrap();
    let y_shards = shards(&ys, DATA_PARALLEL_BATCHES, DATA_PARALLEL_BATCH, 1, n).unwrap();

    let model = MlpGraph::new(DATA_PARALLEL_BATCH / n, precision);
    let mut contexts = Vec::new();
    let mut routines = Vec::new();
    for (device, (x, y)) in devices.into_iter().zip(x_shards.iter().zip(&y_shards)) {
        // Each device draws parameters of its own: sharing the first's must make them alike.
        let seed = contexts.len() as u64 + 1;
        let (ctx, backprop, update) = model.on(device, seed, [x, y]);
        contexts.push(ctx);
        routines.push((backprop, update));
    }
    let initial = model.values(&contexts[0]);
    let mut replicas: Vec<Replica> = contexts
        .iter_mut()
        .zip(&routines)
        .map(|(ctx, (backprop, update))| Replica {
            ctx,
            backprop,
            update,
        })
        .collect();
    share_params(&mut replicas).unwrap();
    let plan = Plan {
        epochs: DATA_PARALLEL_EPOCHS,
        batches: DATA_PARALLEL_BATCHES,
        batch_size: DATA_PARALLEL_BATCH,
        progress: false,
    };
    let shuffle = Shuffle {
        seed: Some(DATA_PARALLEL_SEED),
    };
    let history = fit_on_devices(
        &mut replicas,
        &model.loss,
        &model.params,
        model.batch,
        plan,
        shuffle,
        |_, _| Ok(()),
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));

    let whole = MlpGraph::new(DATA_PARALLEL_BATCH, precision);
    let (mut alone, backprop, update) = whole.on(reference, 1, [&xs, &ys]);
    for (param, values) in whole.params.iter().zip(&initial) {
        alone.set_values(param, values).unwrap();
    }
    let mut alone_losses = Vec::new();
    for epoch in 0..DATA_PARALLEL_EPOCHS {
        let mut total = 0.0;
        for b in epoch_order(DATA_PARALLEL_SEED, epoch, DATA_PARALLEL_BATCHES) {
            alone
                .run_with(&backprop, &[(whole.batch, b as i64)])
                .unwrap();
            total += alone.values(&whole.loss).unwrap()[0];
            alone.run(&update).unwrap();
        }
        alone_losses.push(total / DATA_PARALLEL_BATCHES as f64);
    }

    let want = whole.values(&alone);
    assert_ne!(want, initial, "{what}: training changed nothing");
    for (ctx, name) in contexts.iter().zip(&names) {
        let off = worst(&model.values(ctx), &want);
        assert!(
            off <= tolerance,
            "{what}: {name}'s parameters off by {off:e}"
        );
    }
    let off = worst(
        std::slice::from_ref(&history.losses),
        std::slice::from_ref(&alone_losses),
    );
    assert!(
        off <= tolerance,
        "{what}: losses {:?}, alone {alone_losses:?}",
        history.losses
    );
}
