//! What `einsum` and `explain` share: the arguments naming an operation and its inputs, and the
//! graph and context built from them.
//!
//! The operation computes in one dtype: `--dtype`'s, else numpy's result type of the inputs
//! ([`Dtype::result_type`]; for `where`, of the two it chooses between, as `np.where` does).
//! Every input is cast to it (numpy's `astype`; `where`'s condition first to bool, so that it
//! keeps which cells are nonzero) and becomes a parameter of the dtype's precision holding those
//! cells (so that gradients flow into it), labelled `x1`, `x2`, … in messages; the result has that
//! precision too. `--set LABEL=SIZE` fixes the size of a label of the spec that one input alone
//! does not determine, such as the window `k` of a max-pool `"2*o<+k=>o"`.

use std::collections::HashSet;

use rcannl_backends::Backend;
use rcannl_shape::spec::{AxisSpec, DimLiteral, EinsumSpec, RowSpec, ShapeLiteral, SlotSpec};
use rcannl_tensor::nary::{PathOptions, Search};
use rcannl_tensor::{Context, Graph, Tensor, TensorError, chosen_backend};

use crate::bound;
use crate::captures::{Captured, Finder};
use crate::cells::Cells;
use crate::dtype::Dtype;
use crate::input;
use crate::op::{Op, Special};
use crate::report::{CliError, ErrorKind};
use crate::result_size;

/// The operation and its inputs, as both commands take them.
#[derive(Debug, clap::Args)]
pub struct OpArgs {
    /// The einsum spec ("ij;jk=>ik", "b|i->o => o|b->i"; see `rcannl parse`), or - for the
    /// pointwise form of an operation (relu, sub, where, …) or one that takes no spec.
    #[arg(value_name = "SPEC", allow_hyphen_values = true)]
    pub spec: String,

    /// The operands: range:SHAPE (each cell its flat offset), fill:V:SHAPE, values:v1,v2,…:SHAPE
    /// (these three float64), or a .npy file (bool, int8-int64, uint8-uint64, float16-float64,
    /// either byte order; its dims become output axes). SHAPE is B|I->O with comma-separated
    /// sizes, each optionally size@basis, or 1* (a unit that broadcasts to any size, where a
    /// plain 1 does not); kinds not written are empty ("2|3->4", "3,4", "|5->", "1*,3").
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,

    /// The operation.
    #[arg(long, value_enum, default_value_t = Op::Special(Special::Einsum))]
    pub op: Op,

    /// How an einsum of labels and row variables finds its contraction path: auto (optimal up
    /// to 10 operands; beyond, the cheapest of two greedy searches, dynamic programming over
    /// connected operands and local improvement), optimal (up to 16 operands), or greedy.
    #[arg(long = "path", value_enum, default_value_t = PathChoice::Auto)]
    pub path: PathChoice,

    /// The most cells an intermediate result of the contraction path may have: a number from 0
    /// to 67108864, the most cells any tensor of the command may have (also the default).
    #[arg(long, value_name = "CELLS", value_parser = cell_limit)]
    pub memory_limit: Option<f64>,

    /// Fixes the size of a label of the spec (repeatable): --set k=2 gives a max-pool
    /// "2*o<+k=>o" its window, which no input determines.
    #[arg(long = "set", value_name = "LABEL=SIZE")]
    pub sets: Vec<String>,

    /// Where the routine runs: cc (generated C; the default when a C compiler runs), interp
    /// (the reference interpreter) or gpu (WGSL compute shaders on Vulkan, Metal or DX12; it
    /// computes in float32, float16 where the device offers it, int32 and uint32: pass --dtype
    /// float32 for float64 inputs; an error in a build without the `gpu` feature). Without the
    /// flag, RCANNL_BACKEND chooses, as for every context.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,

    /// The spec is in numpy's notation ("ij,jk->ik", "...ij,...jk->...ik" broadcasting as numpy
    /// does, "ii->i", an implicit result "ij,jk"), translated to ours.
    #[arg(long)]
    pub numpy: bool,

    /// The dtype to compute in and give the result in; every input is cast to it first, as
    /// numpy's astype casts (floats into integers truncate, and saturate where numpy leaves it
    /// undefined). Default: numpy's np.result_type of the inputs (of the last two for --op
    /// where); range:, fill: and values: inputs are float64, a .npy file's cells keep its dtype.
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub dtype: Option<Dtype>,
}

impl OpArgs {
    /// The spec in our notation, for inputs of these shapes (numpy's `...` broadcasts over them).
    pub fn spec_for(&self, shapes: &[&ShapeLiteral]) -> Result<String, CliError> {
        if self.numpy {
            let axes: Vec<Option<Vec<usize>>> = shapes
                .iter()
                .map(|s| {
                    (s.batch.is_empty() && s.input.is_empty())
                        .then(|| s.output.iter().map(|d| d.size).collect())
                })
                .collect();
            // A spec that translates at all is parsed; what fails beyond is the inputs' axes.
            rcannl_tensor::nary::numpy_to_ours(&self.spec)
                .map_err(|e| CliError::new(ErrorKind::Parse, e.message))?;
            rcannl_tensor::nary::numpy_to_ours_for(&self.spec, &axes)
                .map_err(|e| CliError::new(ErrorKind::Shape, e.message))
        } else {
            Ok(self.spec.clone())
        }
    }
}

impl OpArgs {
    /// `error`, with a hint to pass `--numpy` where it is our parser's refusal of a spec, given
    /// without the flag, that reads in numpy's notation ("ij,jk->ik").
    fn with_numpy_hint(&self, mut error: CliError) -> CliError {
        if self.numpy || error.kind != ErrorKind::Parse || !self.op.takes_spec() {
            return error;
        }
        if let Ok(ours) = rcannl_tensor::nary::numpy_to_ours(&self.spec) {
            error.message += &format!(
                "\nhint: {:?} reads in numpy's notation: pass --numpy (in ours it is {ours:?})",
                self.spec
            );
        }
        error
    }
}

/// A path search (see [`rcannl_tensor::nary::Search`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PathChoice {
    Auto,
    Optimal,
    Greedy,
}

impl OpArgs {
    /// The path search the arguments ask for.
    pub fn path_options(&self) -> PathOptions {
        PathOptions {
            search: match self.path {
                PathChoice::Auto => Search::Auto,
                PathChoice::Optimal => Search::Optimal,
                PathChoice::Greedy => Search::Greedy,
            },
            memory_limit: Some(self.memory_limit.unwrap_or(bound::MAX_CELLS as f64)),
        }
    }
}

/// A `--memory-limit`: a number of cells from 0 to [`bound::MAX_CELLS`]. NaN, which compares
/// false with every size, would be no limit at all, so it is refused with the rest.
fn cell_limit(text: &str) -> Result<f64, String> {
    let expected = || format!("expected a number of cells from 0 to {}", bound::MAX_CELLS);
    let limit: f64 = text.trim().parse().map_err(|_| expected())?;
    if (0.0..=bound::MAX_CELLS as f64).contains(&limit) {
        Ok(limit)
    } else {
        Err(expected())
    }
}

/// A backend to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    Interp,
    Cc,
    Gpu,
}

impl BackendChoice {
    /// The tensor library's name for the same choice.
    fn library_choice(self) -> rcannl_tensor::BackendChoice {
        match self {
            BackendChoice::Interp => rcannl_tensor::BackendChoice::Interp,
            BackendChoice::Cc => rcannl_tensor::BackendChoice::Cc,
            BackendChoice::Gpu => rcannl_tensor::BackendChoice::Gpu,
        }
    }
}

/// The graph of one operation over its inputs, and a context with the inputs' values in it.
#[derive(Debug)]
pub struct Setup {
    /// The parsed spec, for operations that take one.
    pub spec: Option<EinsumSpec>,
    /// The spec's text in our notation (translated from numpy's with `--numpy`).
    pub text: String,
    /// The dtype the operation computes in, and its result's.
    pub dtype: Dtype,
    pub graph: Graph,
    pub inputs: Vec<Tensor>,
    pub result: Tensor,
    /// The captured labels asked for, by name.
    pub captures: Vec<(String, Captured)>,
    pub ctx: Context,
}

impl Setup {
    /// Builds the operation, applies `--set`, captures `captures`, finishes shape inference and
    /// loads the inputs.
    pub fn new(args: &OpArgs, captures: &[String]) -> Result<Setup, CliError> {
        check_distinct(captures)?;
        let inputs = args
            .inputs
            .iter()
            .enumerate()
            .map(|(i, text)| input::read(text, i + 1))
            .collect::<Result<Vec<_>, _>>()?;
        let text = args.spec_for(&inputs.iter().map(|i| &i.shape).collect::<Vec<_>>())?;
        let spec = args
            .op
            .check(&text, args.inputs.len())
            .map_err(|e| args.with_numpy_hint(e))?;
        let sets = args
            .sets
            .iter()
            .map(|text| parse_set(text))
            .collect::<Result<Vec<_>, _>>()?;
        let dtype = args.dtype.unwrap_or_else(|| result_dtype(args.op, &inputs));
        if let Some(why) = dtype.refused_by(args.op) {
            return Err(CliError::new(ErrorKind::Dtype, why));
        }
        if dtype == Dtype::Bool {
            check_bool_counts(&inputs)?;
        }
        let precision = dtype.precision();
        let graph = Graph::new();
        let (inputs, cells): (Vec<Tensor>, Vec<Cells>) = inputs
            .into_iter()
            .enumerate()
            .map(|(i, input)| {
                let tensor = graph
                    .param(&format!("x{}", i + 1))
                    .shape(&input.shape.to_string())
                    .precision(precision)
                    .build();
                let cells = if args.op == Op::Special(Special::Where) && i == 0 {
                    input.cells.cast(Dtype::Bool).cast(dtype)
                } else {
                    input.cells.cast(dtype)
                };
                (tensor, cells)
            })
            .unzip();
        let result = args.op.apply(&text, &inputs, &args.path_options())?;
        graph.check().map_err(shape_error)?;
        let finder = Finder { result: &result };
        for (name, size) in sets {
            finder.set(&graph, &name, size)?;
        }
        if let Some(spec) = &spec {
            check_windows(spec, &graph, &finder)?;
        }
        let captures = captures
            .iter()
            .map(|name| Ok((name.clone(), finder.find(name)?)))
            .collect::<Result<Vec<_>, CliError>>()?;
        result_size::check(&result, spec.as_ref())?;
        let mut ctx = Context::with_backend(&graph, backend(args.backend)?);
        for (input, cells) in inputs.iter().zip(cells) {
            ctx.set_cells(input, &cells.to_values())
                .map_err(shape_error)?;
        }
        Ok(Setup {
            spec,
            text,
            dtype,
            graph,
            inputs,
            result,
            captures,
            ctx,
        })
    }
}

/// The dtype of an operation over `inputs` when `--dtype` does not give one: numpy's result
/// type of the inputs, but of the values `where` chooses between, whose condition is only
/// nonzero or not. Float64 for no inputs.
fn result_dtype(op: Op, inputs: &[input::Input]) -> Dtype {
    let skipped = usize::from(op == Op::Special(Special::Where));
    let dtypes = inputs.iter().skip(skipped).map(|input| input.cells.dtype());
    Dtype::result_type(dtypes).unwrap_or(Dtype::Float64)
}

/// Bools are computed as counts in f64 (see [`crate::dtype`]), which must stay finite: an
/// infinite count times a false 0 is NaN, neither true nor false. No result cell counts more
/// terms than the product of the inputs' cell counts, so that product must be finite.
fn check_bool_counts(inputs: &[input::Input]) -> Result<(), CliError> {
    let terms: f64 = inputs
        .iter()
        .map(|input| input.cells.len() as f64)
        .product();
    if terms.is_finite() {
        Ok(())
    } else {
        Err(CliError::new(
            ErrorKind::Dtype,
            format!(
                "bool inputs are counted in float64, and {} inputs of these sizes could count \
                 beyond its range: compute in another dtype (--dtype)",
                inputs.len()
            ),
        ))
    }
}

/// Refuses a name `--capture` gives twice: the JSON output is an object keyed by name.
fn check_distinct(captures: &[String]) -> Result<(), CliError> {
    let mut seen = HashSet::new();
    match captures.iter().find(|name| !seen.insert(name.as_str())) {
        Some(name) => Err(CliError::new(
            ErrorKind::Capture,
            format!("--capture names {name} twice"),
        )),
        None => Ok(()),
    }
}

/// Refuses a convolution or pooling axis (`2*o<+k`) of which neither the window `k` nor the
/// output `o` is known once the inputs and `--set` are in: any window that fits the input would
/// do, and the command does not pick one.
fn check_windows(spec: &EinsumSpec, graph: &Graph, finder: &Finder<'_>) -> Result<(), CliError> {
    let axes = spec.slots().flat_map(|(_, slot)| {
        slot.rows()
            .flat_map(|(_, row)| row.axes().cloned().collect::<Vec<_>>())
            .collect::<Vec<_>>()
    });
    for axis in axes {
        let AxisSpec::Affine(affine) = &axis else {
            continue;
        };
        let Some(conv) = &affine.conv else {
            continue;
        };
        let known = |name: &str| {
            finder
                .find(name)
                .is_ok_and(|captured| captured.size(graph).is_some())
        };
        if !known(&conv.kernel) && !known(&affine.over) {
            return Err(CliError::new(
                ErrorKind::Shape,
                format!(
                    "nothing determines the window `{kernel}` of `{axis}`: the input fits many \
                     windows, and none is guessed; give its size with --set {kernel}=SIZE",
                    kernel = conv.kernel,
                    axis = axis_text(&axis),
                ),
            ));
        }
    }
    Ok(())
}

/// One axis as the spec writes it.
fn axis_text(axis: &AxisSpec) -> String {
    let slot = SlotSpec {
        output: RowSpec::closed(vec![axis.clone()]),
        ..SlotSpec::default()
    };
    slot.to_string().trim_end_matches(',').to_owned()
}

/// `LABEL=SIZE`.
///
/// A size beyond [`bound::MAX_CELLS`] is refused: an axis that long (or a window, whose span
/// or padding is as long) would make a tensor larger than any the command makes, and sizes near
/// `usize::MAX` would overflow the arithmetic of buffers and margins.
fn parse_set(text: &str) -> Result<(String, usize), CliError> {
    let error =
        |message: String| CliError::new(ErrorKind::Capture, format!("--set {text:?}: {message}"));
    let bad = || error("expected LABEL=SIZE, as in k=2".to_owned());
    let (name, size) = text.split_once('=').ok_or_else(bad)?;
    let size: usize = size.trim().parse().map_err(|_| bad())?;
    if size > bound::MAX_CELLS {
        return Err(error(format!(
            "a size beyond {}, the most cells a tensor may have",
            bound::MAX_CELLS
        )));
    }
    Ok((name.trim().to_owned(), size))
}

/// The shape of these dims (batch, input, output), as a shape literal writes it.
pub fn literal([batch, input, output]: &[Vec<usize>; 3]) -> ShapeLiteral {
    let dims = |row: &Vec<usize>| row.iter().copied().map(DimLiteral::new).collect();
    ShapeLiteral {
        batch: dims(batch),
        input: dims(input),
        output: dims(output),
    }
}

pub fn shape_error(err: TensorError) -> CliError {
    CliError::new(ErrorKind::Shape, err.message)
}

pub fn run_error(err: TensorError) -> CliError {
    CliError::new(ErrorKind::Run, err.message)
}

/// The backend `--backend` names, else the one `RCANNL_BACKEND` names (a value naming none is
/// a usage error listing the accepted ones), else the default. A backend that cannot be used
/// here is an error saying what was looked for, never replaced by another.
fn backend(choice: Option<BackendChoice>) -> Result<Box<dyn Backend>, CliError> {
    match choice {
        Some(choice) => {
            let choice = choice.library_choice();
            choice.backend().map_err(|e| {
                CliError::new(
                    ErrorKind::Run,
                    format!("--backend {}: {}", choice.name(), e.message),
                )
            })
        }
        None => {
            rcannl_tensor::BackendChoice::from_environment()
                .map_err(|e| CliError::new(ErrorKind::Usage, e.message))?;
            chosen_backend().map_err(|e| CliError::new(ErrorKind::Run, e.message))
        }
    }
}
