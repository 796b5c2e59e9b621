//! Data-parallel training over MPI (the `mpi` feature): every process (rank) builds the same
//! graph and runs it on its shard of every batch; after each backprop the gradients of all
//! parameters, with the batch's loss, are summed across ranks in one all-reduce over a flat
//! buffer and averaged, so that every rank's update sees the gradient of the whole batch and
//! the parameters stay equal on every rank. Rank 0 starts everyone from its parameters, draws
//! the progress bar and writes files; a failure on one rank alone stops every rank.
//!
//! Started as `mpirun -np 2 program`; run without `mpirun`, a program is one rank of one.

use std::cell::Cell;
use std::marker::PhantomData;
use std::path::Path;
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Routine, StaticIndex, Tensor, TensorError};

use crate::checkpoint;
pub use crate::train::Shuffle;
use crate::train::{Gradients, History, Peers, Plan, Worker, run, shard};

fn error(message: String) -> TensorError {
    TensorError::new(message)
}

/// The processes of a data-parallel run, and this one's place among them.
///
/// Neither `Send` nor `Sync`, unlike graphs and contexts: MPI starts in funneled mode, where only
/// the thread that started it may call it, so the ranks stay on that thread. A context trained
/// with them may still be built elsewhere and moved there.
pub struct Ranks {
    // Dropped last: finalizes MPI.
    _universe: Universe,
    world: SimpleCommunicator,
    /// Time spent merging gradients in [`fit_data_parallel`] (the all-reduce, with the copies
    /// in and out of its buffer and the wait for the slowest rank).
    merging: Cell<Duration>,
    /// Keeps the ranks on the thread that started MPI, whatever the MPI library's handles are.
    _funneled: PhantomData<*const ()>,
}

impl std::fmt::Debug for Ranks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Ranks {{ rank: {}, size: {} }}",
            self.rank(),
            self.size()
        )
    }
}

impl Ranks {
    /// Starts MPI and joins every process `mpirun` started. An error where MPI was started
    /// already (it starts once per process).
    pub fn init() -> Result<Ranks, TensorError> {
        // Only the thread that starts MPI calls it; the backends' own threads never do.
        let (universe, _) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| error("MPI was started already in this process".to_owned()))?;
        let world = universe.world();
        Ok(Ranks {
            _universe: universe,
            world,
            merging: Cell::new(Duration::ZERO),
            _funneled: PhantomData,
        })
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// How many processes take part.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// The time [`fit_data_parallel`] has spent merging gradients so far, on this rank: its
    /// share of the training time is what scaling out costs.
    pub fn merging_time(&self) -> Duration {
        self.merging.get()
    }

    /// Whether this is rank 0, which prints, draws and writes files.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Prints the error as this rank's and stops every rank: where one rank fails alone, the
    /// others would wait for it in their next all-reduce forever.
    pub fn abort(&self, error: &TensorError) -> ! {
        eprintln!(
            "rank {} of {}: {}; stopping every rank",
            self.rank(),
            self.size(),
            error.message
        );
        self.world.abort(1)
    }

    /// This rank's shard of a data set of `batches` batches of `batch_size` rows, each row
    /// `row_len` values, row-major: the same slice of every batch (rows `rank·s .. (rank+1)·s`
    /// with `s = batch_size / size`), laid out as `batches` batches of `s` rows. An error when
    /// the batches do not divide evenly among the ranks (the averaged gradient would then
    /// weigh some rows more) or `rows` is not that many values.
    pub fn shard(
        &self,
        rows: &[f64],
        batches: usize,
        batch_size: usize,
        row_len: usize,
    ) -> Result<Vec<f64>, TensorError> {
        shard(
            rows,
            [batches, batch_size, row_len],
            (self.rank(), self.size()),
            "ranks",
        )
    }

    /// Sets the tensors on every rank to rank 0's values (parameters at the start, so that all
    /// ranks begin alike), in one broadcast.
    pub fn broadcast(&self, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
        let mut flat = Vec::new();
        let mut lens = Vec::with_capacity(tensors.len());
        for t in tensors {
            let values = ctx.values(t)?;
            lens.push(values.len());
            flat.extend(values);
        }
        self.broadcast_values(&mut flat);
        let mut at = 0;
        for (t, len) in tensors.iter().zip(lens) {
            ctx.set_values(t, &flat[at..at + len])?;
            at += len;
        }
        Ok(())
    }

    /// Rank 0's values, in place on every rank.
    pub fn broadcast_values(&self, values: &mut [f64]) {
        self.world.process_at_rank(0).broadcast_into(values);
    }

    /// The sum over ranks of each value, in place.
    pub fn sum(&self, values: &mut [f64]) {
        let local = values.to_vec();
        self.world
            .all_reduce_into(&local[..], values, SystemOperation::sum());
    }

    /// The mean over ranks of a figure (a loss, an accuracy over equal shards).
    pub fn mean(&self, value: f64) -> f64 {
        let mut values = [value];
        self.sum(&mut values);
        values[0] / self.size() as f64
    }

    /// Saves the tensors from rank 0 only (every rank holds the same parameters), all ranks
    /// waiting until the file is written; see [`checkpoint::save`].
    pub fn save(
        &self,
        path: &Path,
        ctx: &mut Context,
        tensors: &[&Tensor],
    ) -> Result<(), TensorError> {
        self.on_root("save", || checkpoint::save(path, ctx, tensors))
    }

    /// Loads the tensors on rank 0 and sends them to every rank, so that a run saved with any
    /// number of ranks resumes on any other, with the file only where rank 0 runs; see
    /// [`checkpoint::load`].
    pub fn load(
        &self,
        path: &Path,
        ctx: &mut Context,
        tensors: &[&Tensor],
    ) -> Result<(), TensorError> {
        self.on_root("load", || checkpoint::load(path, ctx, tensors))?;
        self.broadcast(ctx, tensors)
    }

    /// Takes `step` on rank 0 only, and makes its result every rank's: its error, where it
    /// failed, is returned on every rank.
    fn on_root(
        &self,
        what: &str,
        step: impl FnOnce() -> Result<(), TensorError>,
    ) -> Result<(), TensorError> {
        let result = if self.is_root() { step() } else { Ok(()) };
        let mut failed = [i32::from(result.is_err())];
        self.world
            .process_at_rank(0)
            .broadcast_into(&mut failed[..]);
        match result {
            Err(e) => Err(e),
            Ok(()) if failed[0] != 0 => Err(error(format!("{what}: failed on rank 0"))),
            Ok(()) => Ok(()),
        }
    }
}

/// [`crate::train::fit`] on every rank at once: `backprop` on this rank's shard of each batch
/// (the loss a mean over the shard), the gradients of `params` and the loss averaged across
/// ranks in one all-reduce, then `update`; `plan.batch_size` is the whole batch's (for
/// throughput), and only rank 0 draws the progress bar. Every rank returns the same history,
/// or the same error where the run as a whole fails (a loss that is not a number); a failure
/// on one rank alone ([`Ranks::abort`]) stops every rank. The parameters should start equal on
/// every rank ([`Ranks::broadcast`]).
#[allow(clippy::too_many_arguments)]
pub fn fit_data_parallel(
    ranks: &Ranks,
    ctx: &mut Context,
    backprop: &Routine,
    update: &Routine,
    loss: &Tensor,
    params: &[Tensor],
    batch: StaticIndex,
    plan: Plan,
    shuffle: Shuffle,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    let mut peers = Merging {
        ranks,
        params,
        shuffle,
        narrow: params.iter().all(|p| {
            matches!(
                p.precision(),
                Precision::F32 | Precision::F16 | Precision::Bf16
            )
        }),
        gradients: Gradients::default(),
        merged: Vec::new(),
        local_f32: Vec::new(),
        merged_f32: Vec::new(),
    };
    let mut workers = [Worker {
        ctx,
        first: backprop,
        then: Some(update),
    }];
    run(&mut workers, loss, batch, plan, before_step, &mut peers)
}

/// The ranks of a data-parallel run, with the buffers of their all-reduce.
struct Merging<'a> {
    ranks: &'a Ranks,
    params: &'a [Tensor],
    shuffle: Shuffle,
    /// Whether every gradient is exact in f32: then the all-reduce moves f32, half the bytes.
    narrow: bool,
    /// This process's gradients, then everyone's, with the loss last.
    gradients: Gradients,
    merged: Vec<f64>,
    local_f32: Vec<f32>,
    merged_f32: Vec<f32>,
}

impl Peers for Merging<'_> {
    fn merge(&mut self, workers: &mut [Worker<'_>], losses: &[f64]) -> Result<f64, TensorError> {
        let loss: f64 = losses.iter().sum();
        let parts = self.ranks.size() * workers.len();
        if parts == 1 {
            // Alone, the gradients are the whole batch's already.
            return Ok(loss);
        }
        let started = Instant::now();
        self.gradients
            .sum(workers, self.params)
            .map_err(|e| self.alone_failed(e))?;
        let sums = &mut self.gradients.flat;
        sums.push(loss);
        if self.narrow {
            self.local_f32.clear();
            self.local_f32.extend(sums.iter().map(|&g| g as f32));
            self.merged_f32.resize(sums.len(), 0.0);
            self.ranks.world.all_reduce_into(
                &self.local_f32[..],
                &mut self.merged_f32[..],
                SystemOperation::sum(),
            );
            for (sum, merged) in sums.iter_mut().zip(&self.merged_f32) {
                *sum = f64::from(*merged);
            }
        } else {
            self.merged.resize(sums.len(), 0.0);
            self.ranks.world.all_reduce_into(
                &sums[..],
                &mut self.merged[..],
                SystemOperation::sum(),
            );
            sums.copy_from_slice(&self.merged);
        }
        let total = sums.pop().unwrap_or(loss);
        self.gradients
            .set_mean(workers, self.params, parts)
            .map_err(|e| self.alone_failed(e))?;
        let merging = &self.ranks.merging;
        merging.set(merging.get() + started.elapsed());
        Ok(total / parts as f64)
    }

    fn order(&self, epoch: usize, batches: usize) -> Vec<usize> {
        self.shuffle.order(epoch, batches)
    }

    fn shows_progress(&self) -> bool {
        self.ranks.is_root()
    }

    fn alone_failed(&self, error: TensorError) -> TensorError {
        if self.ranks.size() == 1 {
            return error;
        }
        self.ranks.abort(&error)
    }
}
