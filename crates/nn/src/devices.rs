//! Data-parallel training across the devices of one process: a context per device (the C
//! backend, the interpreter, a GPU opened on a chosen adapter, …), each of the same graph and
//! holding its own copy of the parameters, runs its shard of every batch; after each backprop
//! the gradients of all parameters are summed on the host and averaged, so that every device's
//! update sees the gradient of the whole batch and the parameters stay equal on every device
//! (up to the rounding each backend does in its update). The devices run at once, a thread
//! each. This is the design of `distributed` (data parallelism over MPI, the `mpi` feature)
//! within one process, with no MPI: the same training loop, shards and shuffled order.
//!
//! The loss must be a mean over the shard (as [`crate::loss`]'s are): with equal shards, the
//! mean of the shards' losses and gradients is the whole batch's. Sharding the data
//! ([`shards`]), so that each device's batches are its slice of every batch, keeps the shards
//! equal.
//!
//! ```
//! use rcannl_backends::Interpreter;
//! use rcannl_nn::devices::{Replica, Shuffle, fit_on_devices, share_params, shards};
//! use rcannl_nn::optim::Sgd;
//! use rcannl_nn::train::Plan;
//! use rcannl_tensor::{Context, Graph, TensorError};
//!
//! // Two batches of four rows `x → 2x + 1`, split between two devices: two rows each.
//! let xs: Vec<f64> = (0..8).map(f64::from).collect();
//! let ys: Vec<f64> = xs.iter().map(|x| 2.0 * x + 1.0).collect();
//! let graph = Graph::new();
//! let x = graph.data("x").shape("2,2|->1").build();
//! let y = graph.data("y").shape("2,2|->1").build();
//! let batch = graph.static_index();
//! let w = graph.param("w").shape("1->1").values(vec![0.5]).build();
//! let b = graph.param("b").shape("1").values(vec![0.0]).build();
//! let residual = &(&(&w * &x.slice(&batch)) + &b) - &y.slice(&batch);
//! let loss = rcannl_nn::loss::mean(&residual.pmul(&residual));
//! let params = [w.clone(), b.clone()];
//!
//! let (x_shards, y_shards) = (shards(&xs, 2, 4, 1, 2)?, shards(&ys, 2, 4, 1, 2)?);
//! let mut contexts = Vec::new();
//! let mut routines = Vec::new();
//! for (x_shard, y_shard) in x_shards.iter().zip(&y_shards) {
//!     // Any backend: the C backend, a GPU opened on a chosen adapter, …
//!     let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
//!     ctx.init_params()?;
//!     ctx.set_values(&x, x_shard)?;
//!     ctx.set_values(&y, y_shard)?;
//!     let backprop = ctx.backprop(&loss)?;
//!     let update = Sgd::new(&graph, &params, 0.01, 0.0).compile(&mut ctx)?;
//!     routines.push((backprop, update));
//!     contexts.push(ctx);
//! }
//! let mut replicas: Vec<Replica> = contexts
//!     .iter_mut()
//!     .zip(&routines)
//!     .map(|(ctx, (backprop, update))| Replica { ctx, backprop, update })
//!     .collect();
//! share_params(&mut replicas)?;
//! let plan = Plan { epochs: 3, batches: 2, batch_size: 4, progress: false };
//! let history = fit_on_devices(
//!     &mut replicas, &loss, &params, batch, plan, Shuffle::default(), |_, _| Ok(()),
//! )?;
//! assert!(history.losses[2] < history.losses[0]);
//! assert_eq!(contexts[0].values(&w)?, contexts[1].values(&w)?);
//! # Ok::<(), TensorError>(())
//! ```

use rcannl_tensor::{Context, Routine, StaticIndex, Tensor, TensorError};

pub use crate::train::Shuffle;
use crate::train::{Gradients, History, Peers, Plan, Worker, run, shard};

/// One device's part in a data-parallel run: a context of the graph all replicas share (on the
/// device's backend), holding the device's shard of every batch, and the routines compiled
/// there.
#[derive(Debug)]
pub struct Replica<'a> {
    /// The device's context.
    pub ctx: &'a mut Context,
    /// The backprop of the loss, compiled in `ctx`.
    pub backprop: &'a Routine,
    /// The optimizer's update of the parameters, compiled in `ctx`.
    pub update: &'a Routine,
}

/// Every device's shard of a data set of `batches` batches of `batch_size` rows, each row
/// `row_len` values, row-major: device `d` gets the same slice of every batch (rows `d·s ..
/// (d+1)·s` with `s = batch_size / devices`), laid out as `batches` batches of `s` rows. An
/// error when the batches do not divide evenly among the devices (the averaged gradient would
/// then weigh some rows more) or `rows` is not that many values.
pub fn shards(
    rows: &[f64],
    batches: usize,
    batch_size: usize,
    row_len: usize,
    devices: usize,
) -> Result<Vec<Vec<f64>>, TensorError> {
    // No device at all is the error of a shard among none.
    (0..devices.max(1))
        .map(|device| {
            shard(
                rows,
                [batches, batch_size, row_len],
                (device, devices),
                "devices",
            )
        })
        .collect()
}

/// Sets every replica's parameters to the first one's
/// ([`Context::copy_params_from`]), so that all devices start alike.
pub fn share_params(replicas: &mut [Replica<'_>]) -> Result<(), TensorError> {
    if let Some((first, others)) = replicas.split_first_mut() {
        for other in others {
            other.ctx.copy_params_from(first.ctx)?;
        }
    }
    Ok(())
}

/// [`crate::train::fit`] on every device at once: each replica's `backprop` on its shard of
/// each batch (the loss a mean over the shard), the gradients of `params` and the loss averaged
/// over the devices on the host, set on every device, then each replica's `update`.
/// `plan.batch_size` is the whole batch's (for throughput); `before_step` runs on every
/// replica's context before each step (a learning-rate schedule, say). The parameters should
/// start equal on every device ([`share_params`]). An error where there is no replica, or where
/// any device fails.
#[allow(clippy::too_many_arguments)]
pub fn fit_on_devices(
    replicas: &mut [Replica<'_>],
    loss: &Tensor,
    params: &[Tensor],
    batch: StaticIndex,
    plan: Plan,
    shuffle: Shuffle,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    if replicas.is_empty() {
        return Err(TensorError::new(
            "fit_on_devices: no replica to train: give each device's context and routines"
                .to_owned(),
        ));
    }
    let mut workers: Vec<Worker<'_>> = replicas
        .iter_mut()
        .map(|replica| Worker {
            ctx: &mut *replica.ctx,
            first: replica.backprop,
            then: Some(replica.update),
        })
        .collect();
    let mut peers = Averaging {
        params,
        shuffle,
        gradients: Gradients::default(),
    };
    run(&mut workers, loss, batch, plan, before_step, &mut peers)
}

/// The devices of an in-process run, merging on the host.
struct Averaging<'a> {
    params: &'a [Tensor],
    shuffle: Shuffle,
    gradients: Gradients,
}

impl Peers for Averaging<'_> {
    fn merge(&mut self, workers: &mut [Worker<'_>], losses: &[f64]) -> Result<f64, TensorError> {
        let loss: f64 = losses.iter().sum();
        let parts = workers.len();
        if parts == 1 {
            // Alone, the gradients are the whole batch's already.
            return Ok(loss);
        }
        self.gradients.sum(workers, self.params)?;
        self.gradients.set_mean(workers, self.params, parts)?;
        Ok(loss / parts as f64)
    }

    fn order(&self, epoch: usize, batches: usize) -> Vec<usize> {
        self.shuffle.order(epoch, batches)
    }

    fn shows_progress(&self) -> bool {
        true
    }

    fn alone_failed(&self, error: TensorError) -> TensorError {
        // In one process, every device's failure is the run's: no one waits for it.
        error
    }
}
