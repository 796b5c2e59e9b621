//! What `einsum` and `explain` share: the arguments naming an operation and its inputs, and the
//! graph and context built from them.
//!
//! Every input is a parameter of precision f64 holding the given values (so that gradients flow
//! into it and values print exactly), labelled `x1`, `x2`, … in messages. The operation's result
//! is f64 too. `--set LABEL=SIZE` fixes the size of a label of the spec that one input alone does
//! not determine, such as the window `k` of a max-pool `"2*o<+k=>o"`.

use std::collections::HashSet;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter, default_backend};
use rcannl_ir::Precision;
use rcannl_shape::spec::{DimLiteral, EinsumSpec, ShapeLiteral};
use rcannl_tensor::nary::{PathOptions, Search};
use rcannl_tensor::{Context, Graph, Init, Tensor, TensorError};

use crate::captures::{Captured, Finder};
use crate::input;
use crate::op::Op;
use crate::report::{CliError, ErrorKind};
use crate::result_size;

/// The operation and its inputs, as both commands take them.
#[derive(Debug, clap::Args)]
pub struct OpArgs {
    /// The einsum spec ("ij;jk=>ik", "b|i->o => o|b->i"; see `rcannl parse`), or - for an
    /// operation without one.
    #[arg(value_name = "SPEC", allow_hyphen_values = true)]
    pub spec: String,

    /// The operands: range:SHAPE (each cell its flat offset), fill:V:SHAPE, values:v1,v2,…:SHAPE,
    /// or a .npy file (its dims become output axes). SHAPE is B|I->O with comma-separated sizes,
    /// each optionally size@basis, or 1* (a unit that broadcasts to any size, where a plain 1
    /// does not); kinds not written are empty ("2|3->4", "3,4", "|5->", "1*,3").
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,

    /// The operation.
    #[arg(long, value_enum, default_value_t = Op::Einsum)]
    pub op: Op,

    /// How an einsum of labels and row variables finds its contraction path: auto (optimal up
    /// to 10 operands, greedy beyond), optimal, or greedy.
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

    /// Where the routine runs: cc (generated C; the default when a C compiler runs) or interp
    /// (the reference interpreter).
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,

    /// The spec is in numpy's notation ("ij,jk->ik", "...ij,...jk->...ik" broadcasting as numpy
    /// does, "ii->i", an implicit result "ij,jk"), translated to ours.
    #[arg(long)]
    pub numpy: bool,
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
            memory_limit: Some(self.memory_limit.unwrap_or(input::MAX_CELLS as f64)),
        }
    }
}

/// A `--memory-limit`: a number of cells from 0 to [`input::MAX_CELLS`]. NaN, which compares
/// false with every size, would be no limit at all, so it is refused with the rest.
fn cell_limit(text: &str) -> Result<f64, String> {
    let expected = || format!("expected a number of cells from 0 to {}", input::MAX_CELLS);
    let limit: f64 = text.trim().parse().map_err(|_| expected())?;
    if (0.0..=input::MAX_CELLS as f64).contains(&limit) {
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
}

/// The graph of one operation over its inputs, and a context with the inputs' values in it.
#[derive(Debug)]
pub struct Setup {
    /// The parsed spec, for operations that take one.
    pub spec: Option<EinsumSpec>,
    /// The spec's text in our notation (translated from numpy's with `--numpy`).
    pub text: String,
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
        let spec = args.op.check(&text, args.inputs.len())?;
        let sets = args
            .sets
            .iter()
            .map(|text| parse_set(text))
            .collect::<Result<Vec<_>, _>>()?;
        let shapes: Vec<ShapeLiteral> = inputs.iter().map(|input| input.shape.clone()).collect();
        let graph = Graph::new();
        let inputs: Vec<Tensor> = inputs
            .into_iter()
            .enumerate()
            .map(|(i, input)| {
                graph
                    .param(&format!("x{}", i + 1))
                    .shape(&input.shape.to_string())
                    .precision(Precision::F64)
                    .init(Init::Values(input.values))
                    .build()
            })
            .collect();
        let result = args.op.apply(&text, &inputs, &args.path_options())?;
        graph.check().map_err(shape_error)?;
        let along_path = args.op == Op::Einsum && Op::along_path(&text, &inputs);
        let finder = Finder {
            result: &result,
            along_path: spec
                .as_ref()
                .filter(|_| along_path)
                .map(|s| (s, &shapes[..])),
        };
        for (name, size) in sets {
            finder.set(&graph, &name, size)?;
        }
        let captures = captures
            .iter()
            .map(|name| Ok((name.clone(), finder.find(name)?)))
            .collect::<Result<Vec<_>, CliError>>()?;
        result_size::check(&result, spec.as_ref())?;
        let mut ctx = Context::with_backend(&graph, backend(args.backend)?);
        ctx.init_params().map_err(shape_error)?;
        Ok(Setup {
            spec,
            text,
            graph,
            inputs,
            result,
            captures,
            ctx,
        })
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

/// `LABEL=SIZE`.
///
/// A size beyond [`input::MAX_CELLS`] is refused: an axis that long (or a window, whose span
/// or padding is as long) would make a tensor larger than any the command makes, and sizes near
/// `usize::MAX` would overflow the arithmetic of buffers and margins.
fn parse_set(text: &str) -> Result<(String, usize), CliError> {
    let error =
        |message: String| CliError::new(ErrorKind::Capture, format!("--set {text:?}: {message}"));
    let bad = || error("expected LABEL=SIZE, as in k=2".to_owned());
    let (name, size) = text.split_once('=').ok_or_else(bad)?;
    let size: usize = size.trim().parse().map_err(|_| bad())?;
    if size > input::MAX_CELLS {
        return Err(error(format!(
            "a size beyond {}, the most cells a tensor may have",
            input::MAX_CELLS
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

fn backend(choice: Option<BackendChoice>) -> Result<Box<dyn Backend>, CliError> {
    Ok(match choice {
        None => default_backend(),
        Some(BackendChoice::Interp) => Box::new(Interpreter),
        Some(BackendChoice::Cc) => Box::new(
            Compiler::from_environment()
                .map_err(|e| CliError::new(ErrorKind::Run, format!("--backend cc: {e}")))?,
        ),
    })
}
