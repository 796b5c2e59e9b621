//! A model applied at whatever shape its input comes in: the first time a shape comes, the
//! model is applied to a new data tensor of that shape in the same graph (so it shares the
//! graph's parameters), shapes are inferred and a forward routine is compiled; later inputs of
//! that shape reuse them. It is how JAX traces a function again for each new shape: a model
//! trained on batches of 32 samples one sequence at a time, or evaluates a validation set whole,
//! without a second copy of it written by hand.

use std::collections::HashMap;

use rcannl_ir::Precision;

use crate::array::Array;
use crate::context::{Context, Routine};
use crate::graph::{Graph, TensorError};
use crate::tensor::Tensor;

/// The dims of an input, by kind: batch, output, input.
type Dims = [Vec<usize>; 3];

/// The model at one input shape: its input, its output and the routine computing it.
#[derive(Debug)]
struct Applied {
    input: Tensor,
    output: Tensor,
    routine: Routine,
}

/// `model` applied at any input shape, compiled once per shape (see the module's docs).
///
/// ```
/// use rcannl_tensor::{Array, Context, Graph, Traced};
///
/// let graph = Graph::new();
/// let w = graph.param("w").shape("|2->3").build();
/// let mut predict = Traced::new(&graph, "features", |x: &rcannl_tensor::Tensor| (&w * x).relu());
/// let mut ctx = Context::new(&graph);
/// ctx.init_params()?;
/// let one = predict.apply(&mut ctx, &Array::new(vec![1], vec![2], vec![], vec![1.0, 2.0])?)?;
/// let four = predict.apply(&mut ctx, &Array::new(vec![4], vec![2], vec![], vec![0.5; 8])?)?;
/// assert_eq!((one.shape(), four.shape()), (&[1, 3][..], &[4, 3][..]));
/// assert_eq!(predict.shapes(), 2);
/// # Ok::<(), rcannl_tensor::TensorError>(())
/// ```
#[derive(Debug)]
pub struct Traced<F> {
    graph: Graph,
    label: String,
    precision: Precision,
    model: F,
    applied: HashMap<Dims, Applied>,
}

impl<F: Fn(&Tensor) -> Tensor> Traced<F> {
    /// `model`, to be applied to data tensors labelled `label` (with their shape) in `graph`,
    /// of f32 values.
    pub fn new(graph: &Graph, label: &str, model: F) -> Traced<F> {
        Traced {
            graph: graph.clone(),
            label: label.to_owned(),
            precision: Precision::F32,
            model,
            applied: HashMap::new(),
        }
    }

    /// With inputs held in `precision`.
    pub fn precision(self, precision: Precision) -> Traced<F> {
        Traced { precision, ..self }
    }

    /// The model's output for `input`, computed in `ctx` (a context of the graph, whose
    /// parameters it reads as they are now). The first input of each shape extends the graph
    /// and compiles a routine; a shape the model refuses is an error of the graph, as any
    /// operation whose shapes do not agree.
    pub fn apply(&mut self, ctx: &mut Context, input: &Array) -> Result<Array, TensorError> {
        let dims = [
            input.batch_dims().to_vec(),
            input.output_dims().to_vec(),
            input.input_dims().to_vec(),
        ];
        if !self.applied.contains_key(&dims) {
            let applied = self.trace(ctx, &dims)?;
            self.applied.insert(dims.clone(), applied);
        }
        let applied = &self.applied[&dims];
        ctx.set_values(&applied.input, input.values())?;
        ctx.run(&applied.routine)?;
        ctx.array(&applied.output)
    }

    /// The number of input shapes compiled so far.
    pub fn shapes(&self) -> usize {
        self.applied.len()
    }

    fn trace(&self, ctx: &mut Context, dims: &Dims) -> Result<Applied, TensorError> {
        let joined = |dims: &[usize]| {
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let shape = format!(
            "{}|{}->{}",
            joined(&dims[0]),
            joined(&dims[2]),
            joined(&dims[1])
        );
        let input = self
            .graph
            .data(&format!("{} {shape}", self.label))
            .shape(&shape)
            .precision(self.precision)
            .build();
        let output = (self.model)(&input);
        let routine = ctx.forward(&[&output])?;
        Ok(Applied {
            input,
            output,
            routine,
        })
    }
}
