//! Parameter initialization: fills and given values stored from the host; counter-based random
//! draws keyed by (seed, tensor id), one tensor expression for all of them ([`super::draws`]);
//! then init expressions, in creation order.

use rcannl_shape::spec::Kind;

use crate::graph::{Draw, Init, LeafKind, TensorData, TensorError, error};
use crate::tensor::Tensor;

use super::draws::{self, Request};
use super::{Context, value_node};

impl Context {
    /// Initializes every parameter not initialized yet in this context (each exactly once; a
    /// parameter whose values were set from the host keeps them). A routine reading a parameter
    /// that holds no values refuses to run.
    pub fn init_params(&mut self) -> Result<(), TensorError> {
        self.concretize()?;
        let params: Vec<(usize, Init)> = {
            let state = self.graph.state.lock();
            state
                .tensors
                .iter()
                .enumerate()
                .filter(|(t, _)| !self.holds.contains(&value_node(*t)))
                .filter_map(|(t, data)| Some((t, init_of(data)?)))
                .collect()
        };
        self.draw_params(params)
    }

    /// Initializes `params` again, whether or not they hold values: each drawn as
    /// [`Context::init_params`] draws it, from this context's seed (the same values unless
    /// [`Context::set_seed`] changed it since), so that a model ([`Tensor::params`]) starts
    /// over while the rest of the graph keeps its values. An optimizer's state for them (moments,
    /// velocities) is left as it is. A tensor that is no parameter of this context's graph is an
    /// error naming it, and then nothing is drawn.
    pub fn init_params_of(&mut self, params: &[&Tensor]) -> Result<(), TensorError> {
        self.concretize()?;
        let mut drawn = Vec::with_capacity(params.len());
        for param in params {
            self.check_tensor(param)?;
            let state = self.graph.state.lock();
            let data = &state.tensors[param.index];
            let init = init_of(data).ok_or_else(|| {
                error(format!(
                    "init_params_of: '{}' is not a parameter",
                    data.label
                ))
            })?;
            drawn.push((param.index, init));
        }
        self.draw_params(drawn)
    }

    /// Draws `params` from their inits into their buffers, init expressions last, in creation
    /// order; each then holds values.
    fn draw_params(&mut self, params: Vec<(usize, Init)>) -> Result<(), TensorError> {
        let default = self.graph.state.lock().default_init.clone();
        let mut expressions = Vec::new();
        let mut requests = Vec::new();
        for (t, init) in &params {
            let cells = self.nodes[&value_node(*t)].len();
            let (fan_in, fan_out) = self.fans_of(*t)?;
            let random = match init.draw(&default, fan_in, fan_out) {
                Draw::Expr(e) => {
                    expressions.push((*t, e));
                    continue;
                }
                Draw::Values(values) => {
                    self.set_param(*t, &values)?;
                    continue;
                }
                Draw::Fill(value) => {
                    self.set_param(*t, &vec![value; cells])?;
                    continue;
                }
                Draw::Random(random) => random,
            };
            requests.push(Request {
                t: *t,
                cells,
                random,
            });
        }
        let drawn = draws::draw(self.seed, &requests).map_err(|e| {
            let message = format!("the parameters' random draws: {}", e.message);
            e.reworded(message)
        })?;
        for (request, values) in requests.iter().zip(drawn) {
            self.set_param(request.t, &values)?;
        }
        self.holds.extend(
            params
                .iter()
                .map(|(t, _)| *t)
                .filter(|t| expressions.iter().all(|(e, _)| e != t))
                .map(value_node),
        );
        // In creation order, so that an expression may read a parameter an earlier one set.
        for (t, e) in expressions {
            let label = self.graph.state.lock().tensors[t].label.clone();
            let failed = |e: TensorError| {
                let message = format!("parameter '{label}': its init expression: {}", e.message);
                e.reworded(message)
            };
            let routine = self.forward(&[&e]).map_err(failed)?;
            self.run(&routine).map_err(failed)?;
            let values = self.values(&e).map_err(failed)?;
            self.buffers
                .set_values(value_node(t), &values)
                .map_err(|e| error(format!("parameter '{label}': {e}")))?;
            self.holds.insert(value_node(t));
        }
        Ok(())
    }

    /// Stores `values` into the buffer of the parameter of tensor index `t`.
    fn set_param(&mut self, t: usize, values: &[f64]) -> Result<(), TensorError> {
        let node = &self.nodes[&value_node(t)];
        self.buffers
            .set_values(node.id, values)
            .map_err(|e| error(format!("parameter '{}': {e}", node.label)))
    }

    /// The fan-in and fan-out of `param` as the fan-based [`Init`]s read them, PyTorch's
    /// `torch.nn.init._calculate_fan_in_and_fan_out`: the fan-in is the number of its input
    /// cells (the product of its input axes), the fan-out the number of its output cells times
    /// the size of its window (the input axes [`LeafBuilder::window_axes`] declares, none
    /// unless declared); either is 0 without axes in its row. An error when `param` declares
    /// more window axes than it has input axes.
    ///
    /// [`LeafBuilder::window_axes`]: crate::LeafBuilder::window_axes
    pub fn fans(&mut self, param: &Tensor) -> Result<(usize, usize), TensorError> {
        self.concretize()?;
        self.check_tensor(param)?;
        self.fans_of(param.index)
    }

    /// The fans of the tensor of index `t` (see [`Context::fans`]).
    fn fans_of(&self, t: usize) -> Result<(usize, usize), TensorError> {
        let state = self.graph.state.lock();
        let shape = state.inference.shape(state.tensors[t].shape);
        let sizes = |kind: Kind| -> Vec<usize> {
            let row = shape.row(kind);
            row.dims().map(|d| d.ground_size().unwrap_or(1)).collect()
        };
        let (input, output) = (sizes(Kind::Input), sizes(Kind::Output));
        let window = state.window_axes.get(&t).copied().unwrap_or(0);
        if window > input.len() {
            return Err(error(format!(
                "parameter '{}': {window} window axes declared, but it has {} input axes",
                state.tensors[t].label,
                input.len()
            )));
        }
        let cells = |dims: &[usize]| match dims {
            [] => 0,
            _ => dims.iter().product(),
        };
        let receptive: usize = input[..window].iter().product();
        Ok((cells(&input), cells(&output) * receptive))
    }

    pub(super) fn scratch(&mut self) -> u32 {
        let id = self.next_scratch;
        self.next_scratch += 1;
        id
    }
}

/// The init of the parameter `data` is, where it is one that did not fail.
fn init_of(data: &TensorData) -> Option<Init> {
    match &data.leaf {
        Some(LeafKind::Param(init)) if data.failed.is_none() => Some(init.clone()),
        _ => None,
    }
}
