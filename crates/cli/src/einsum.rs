//! `rcannl einsum SPEC INPUT... [--op OP] [--grads] [--capture a,b] [--set k=2] [--backend B]
//! [--time N] [--json] [-o out.npy]`: run one operation on concrete inputs.
//!
//! With `--json` the output is one line:
//!
//! ```text
//! {"shape":{"batch":[..],"input":[..],"output":[..]},"dtype":"float32","values":[..],
//!  "grads":[[..],..],"captures":{"k":2},"median_ms":0.01}
//! ```
//!
//! `dtype` is the dtype the operation computed in, numpy's name for it (see [`crate::setup`]).
//! `values` are the result's cells in memory order (batch, then output, then input axes;
//! row-major). `grads` (with `--grads`; not for bools) holds, per input, the gradient of the sum
//! of all the result's cells with respect to that input (cast to the dtype), in the same order and
//! dtype. `captures` (with `--capture`) gives the size of each named label, in the order asked
//! (`null` if inference left it unknown); `median_ms` (with `--time N`, N at most 1000000) is the
//! median wall time of N runs of the compiled routine, compilation excluded (the readable output
//! gives it after the shape, leaving the values and gradients out). Keys not asked for
//! are left out; with `-o FILE` the result is written to FILE as a `.npy` array of the dtype (all
//! axes, in memory order; the file is replaced whole or not at all, see
//! [`rcannl_nn::files::replace_file`]) and `values` is left out.
//!
//! Floats are JSON numbers as serde writes f64 (a float32 or float16 value exactly): integral
//! values with a fractional part (`3.0`, never `3`), the shortest text that reads back exactly
//! otherwise; NaN and infinities, which JSON lacks, as `null`. Integers are JSON integers, bools
//! `true` and `false`. Errors are described in [`crate::report`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde::{Serialize, Serializer};

use crate::cells::Cells;
use crate::dtype::Dtype;
use crate::npy;
use crate::report::{self, CliError, ErrorKind};
use crate::setup::{OpArgs, Setup, literal, run_error};

/// Arguments of `rcannl einsum`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub op: OpArgs,

    /// Also compute the gradient of the sum of the result's cells with respect to each input
    /// (in the dtype computed in; bools have none).
    #[arg(long)]
    pub grads: bool,

    /// Report the sizes of these labels of the spec (comma-separated).
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    pub capture: Vec<String>,

    /// Run the compiled routine N times (1 to 1000000) and report the median time (compilation
    /// excluded) after the result's shape, without its values and gradients (--json and -o still
    /// give them).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_RUNS))]
    pub time: Option<u32>,

    /// Print one line of JSON on stdout (errors too, as {"error": {...}}).
    #[arg(long)]
    pub json: bool,

    /// Write the result to this .npy file (in its dtype, every axis in memory order) instead of
    /// printing its values. The file is replaced whole or not at all (written beside it, then
    /// renamed over it); a symbolic link is followed to the regular file it names, and a
    /// destination that is not a regular file (a device, a FIFO, a folder) is refused.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The most runs `--time` takes: their times are kept to find the median.
const MAX_RUNS: i64 = 1_000_000;

/// Runs the command: exit status 0 on success, 1 on any error.
pub fn run(args: &Args) -> ExitCode {
    match execute(args) {
        Ok(output) if args.json => report::print_json(&output),
        Ok(output) => report::write_out(std::io::stdout(), &render_text(&output)),
        Err(err) => err.report(args.json),
    }
}

/// What the command prints. Field order is the JSON key order.
#[derive(Debug, Serialize)]
struct Output {
    shape: Rows,
    dtype: Dtype,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<Cells>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grads: Option<Vec<Cells>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    captures: Option<Captures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    median_ms: Option<f64>,
    /// The file the result went to (not part of the JSON).
    #[serde(skip)]
    written: Option<PathBuf>,
    /// The number of timed runs (not part of the JSON).
    #[serde(skip)]
    runs: u32,
}

/// A shape's dims by kind.
#[derive(Debug, Serialize)]
struct Rows {
    batch: Vec<usize>,
    input: Vec<usize>,
    output: Vec<usize>,
}

/// Captured sizes in the order asked, as a JSON object.
#[derive(Debug)]
struct Captures(Vec<(String, Option<usize>)>);

impl Serialize for Captures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, size)| (name, size)))
    }
}

fn execute(args: &Args) -> Result<Output, CliError> {
    let Setup {
        graph,
        inputs,
        result,
        captures,
        mut ctx,
        dtype,
        ..
    } = Setup::new(&args.op, &args.capture)?;
    if args.grads && dtype == Dtype::Bool {
        return Err(CliError::new(
            ErrorKind::Dtype,
            "--grads: bools have no gradients (pass --dtype float64 to count with them)",
        ));
    }
    let routine = if args.grads {
        ctx.backprop(&result)
    } else {
        ctx.forward(&[&result])
    }
    .map_err(run_error)?;
    let runs = args.time.unwrap_or(1);
    let mut times = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let start = Instant::now();
        ctx.run(&routine).map_err(run_error)?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let [batch, input, output] = ctx.rows(&result).map_err(run_error)?;
    let values = Cells::from_values(dtype, &ctx.cells(&result).map_err(run_error)?);
    let grads = if args.grads {
        let grads = inputs.iter().map(|x| {
            let cells = ctx.grad_cells(x)?;
            Ok(Cells::from_values(dtype, &cells))
        });
        Some(grads.collect::<Result<_, _>>().map_err(run_error)?)
    } else {
        None
    };
    let written = match &args.output {
        Some(path) => {
            npy::write(path, &ctx.dims(&result).map_err(run_error)?, &values)?;
            Some(path.clone())
        }
        None => None,
    };
    Ok(Output {
        shape: Rows {
            batch,
            input,
            output,
        },
        dtype,
        values: written.is_none().then_some(values),
        grads,
        captures: (!captures.is_empty()).then(|| {
            Captures(
                captures
                    .iter()
                    .map(|(name, captured)| (name.clone(), captured.size(&graph)))
                    .collect(),
            )
        }),
        median_ms: args.time.map(|_| median(&mut times)),
        written,
        runs,
    })
}

/// The median of `times` (the mean of the middle two for an even count).
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let middle = times.len() / 2;
    if times.len() % 2 == 1 {
        times[middle]
    } else {
        (times[middle - 1] + times[middle]) / 2.0
    }
}

/// The readable form:
///
/// ```text
/// shape:     2|4->3  (batch [2], input [4], output [3])
/// dtype:     float64
/// values:    [0, 4, 8, 12, …]
/// grad x1:   [1, 1, …]
/// capture k: 2
/// ```
///
/// Timed (`--time`), the values and gradients give way to the median, which a result of many
/// cells would push out of sight:
///
/// ```text
/// shape:     2|4->3  (batch [2], input [4], output [3])
/// dtype:     float64
/// median:    0.004 ms over 10 runs
/// ```
fn render_text(output: &Output) -> String {
    let Rows {
        batch,
        input,
        output: out,
    } = &output.shape;
    let literal = literal(&[batch.clone(), input.clone(), out.clone()]);
    let mut lines = vec![(
        "shape".to_owned(),
        format!("{literal}  (batch {batch:?}, input {input:?}, output {out:?})"),
    )];
    lines.push(("dtype".to_owned(), output.dtype.to_string()));
    let timed = output.median_ms.is_some();
    if let Some(values) = output.values.as_ref().filter(|_| !timed) {
        lines.push(("values".to_owned(), values.text()));
    }
    if let Some(path) = &output.written {
        lines.push(("written".to_owned(), path.display().to_string()));
    }
    if !timed {
        for (i, grad) in output.grads.iter().flatten().enumerate() {
            lines.push((format!("grad x{}", i + 1), grad.text()));
        }
    }
    if let Some(Captures(captures)) = &output.captures {
        for (name, size) in captures {
            let size = size.map_or("unknown".to_owned(), |size| size.to_string());
            lines.push((format!("capture {name}"), size));
        }
    }
    if let Some(median) = output.median_ms {
        lines.push((
            "median".to_owned(),
            format!("{median:.4} ms over {} runs", output.runs),
        ));
    }
    report::aligned(&lines)
}
