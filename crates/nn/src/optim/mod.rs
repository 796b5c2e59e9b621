//! Optimizers as update routines: each step is a routine of updates over parameters, their
//! gradients and the optimizer's state tensors: pointwise, and reductions into one cell where a
//! step needs a norm (clipping by the global gradient norm, LAMB's trust ratios). The learning
//! rate is a tensor, so a schedule changes it between steps without recompiling.
//!
//! Settings are checked where they take effect: an optimizer's when its step is compiled (the
//! learning rate as the context holds it then), a schedule's when it sets the learning rate. A
//! value that is not a finite number, or out of its range, is an error naming the optimizer or
//! schedule, the setting and the value.
//!
//! Precisions follow the parameters: each parameter's state (velocity, moments, squared norms)
//! is held in f64 for an f64 parameter and in f32 otherwise; what an optimizer shares among its
//! parameters (the learning rate, the step count, the global gradient norm, Adam's and LAMB's
//! bias corrections) in f64 when any parameter is f64, and in f32 otherwise (which every
//! backend holds, the GPU's included). The bias corrections are computed from the step count
//! without cancellation, to within a few units of their precision's last place.
//!
//! # As in PyTorch
//!
//! [`Sgd`] is `torch.optim.SGD` (momentum, dampening, Nesterov momentum, weight decay added to
//! the gradient); [`Adam`] is `AdamW` with [`Adam::weight_decay`], `Adam(weight_decay=…)` with
//! [`Adam::coupled_weight_decay`], and either with `amsgrad=True` with [`Adam::amsgrad`]. Each
//! optimizer takes its parameters whole (`new`) or in [`Group`]s (`with_groups`), PyTorch's
//! parameter groups: a group gives its own weight decay and a learning rate as a scale of the
//! optimizer's (so that a [`Schedule`] moves every group's rate alike); what it does not give is
//! the optimizer's. [`split_decay`] splits a model's parameters as PyTorch users do by hand
//! (`p.ndim >= 2`), so that weight decay leaves biases and normalization gains alone; a split
//! by any other rule is Rust's `Iterator::partition` over the parameters
//! (`|p| p.label().ends_with(".bias")`).
//!
//! ```
//! use rcannl_nn::blocks::Mlp;
//! use rcannl_nn::norm::LayerNorm;
//! use rcannl_nn::optim::{Adam, Group, split_decay};
//! use rcannl_tensor::{Context, Graph};
//!
//! # fn main() -> Result<(), rcannl_tensor::TensorError> {
//! let graph = Graph::new();
//! let (mlp, norm) = (Mlp::new(&graph, "mlp", &[8, 1]), LayerNorm::new(&graph, "norm"));
//! let x = graph.data("x").shape("4|->3").values(vec![0.5; 12]).build();
//! let loss = rcannl_nn::loss::mean(&mlp.apply(&norm.apply(&x)));
//! let mut ctx = Context::new(&graph);
//! ctx.init_params()?;
//! // AdamW that decays the weights only: PyTorch's `AdamW([{'params': decay},
//! // {'params': no_decay, 'weight_decay': 0.0}], lr=1e-3, weight_decay=0.1)`.
//! let (decay, no_decay) = split_decay(&mut ctx, &graph.params())?;
//! let groups = [Group::new(&decay), Group::new(&no_decay).weight_decay(0.0)];
//! let mut adamw = Adam::with_groups(&graph, &groups, 1e-3).weight_decay(0.1);
//! let step = adamw.compile_step(&mut ctx, &loss)?;
//! ctx.run(&step)?;
//! assert_eq!(decay.len(), 2); // the dense weights; the biases, gain and norm bias are not
//! # Ok(())
//! # }
//! ```

/// What every optimizer has: clipping by the global gradient norm, and the routines it compiles
/// from the updates its `prepare` gives (its settings checked, its state made): the step alone,
/// or the whole training step.
macro_rules! step_routines {
    ($name:ident) => {
        /// With every gradient scaled so that their global norm is at most `max_norm` (above 0).
        pub fn clip_grad_norm(mut self, max_norm: f64) -> $name {
            self.clip = Some(Clip::new(self.lr.graph(), max_norm, &params_of(&self.groups)));
            self
        }

        /// The global gradient norm of the last step, before clipping (one cell), when clipping.
        pub fn grad_norm(&self) -> Option<&Tensor> {
            self.clip.as_ref().map(|clip| &clip.norm)
        }

        #[doc = concat!(
            "The step as a routine of `ctx` (the state tensors are made here, once the ",
            "parameters' shapes are known). An error, before anything is made, when a setting is ",
            "not a finite number or out of its range (see [`", stringify!($name), "`]'s fields): ",
            "the learning rate is checked as `ctx` holds it."
        )]
        pub fn compile(&mut self, ctx: &mut Context) -> Result<Routine, TensorError> {
            let updates = self.prepare(ctx)?;
            ctx.update(&updates)
        }

        #[doc = concat!(
            "The whole training step of `loss` as one routine of `ctx`: backprop, then this ",
            "optimizer's update ([`Context::train_step`]); the settings are checked as by [`",
            stringify!($name), "::compile`]."
        )]
        pub fn compile_step(
            &mut self,
            ctx: &mut Context,
            loss: &Tensor,
        ) -> Result<Routine, TensorError> {
            self.compile_step_with(ctx, loss, &[])
        }

        #[doc = concat!(
            "[`", stringify!($name), "::compile_step`] with `extra` updates run after the ",
            "optimizer's in the same routine: the running statistics of batch normalization, ",
            "say, which read values the forward pass computes."
        )]
        pub fn compile_step_with(
            &mut self,
            ctx: &mut Context,
            loss: &Tensor,
            extra: &[Update],
        ) -> Result<Routine, TensorError> {
            let mut updates = self.prepare(ctx)?;
            updates.extend_from_slice(extra);
            ctx.train_step(loss, &updates)
        }
    };
}

mod adam;
mod clip;
mod group;
mod lamb;
mod moments;
mod schedule;
mod settings;
mod sgd;
mod state;

pub use adam::Adam;
pub use group::{Group, split_decay};
pub use lamb::Lamb;
pub use schedule::Schedule;
pub use sgd::Sgd;
