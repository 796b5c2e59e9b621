//! `rcannl explain SPEC INPUT... [--op OP] [--set k=2] [--backend B]`: how one operation on
//! concrete inputs compiles.
//!
//! Prints, in order: the parsed spec and what the operation computes; the backend, its target and
//! which of its builds runs (the C backend's tiers); the inferred shapes of the
//! inputs and the result; the projections (the product space with each iterator's size, each
//! tensor's index map, the iterators reduced over, and whether the result is pre-filled and
//! why); the padding margins of each tensor; the optimized loop nest; and the generated code: C
//! on the C backend (without the prelude of helpers every routine starts with), WGSL kernels on
//! the GPU. Iterators are named
//! after the spec's labels where the spec names them ([`crate::labels`]). Errors are reported as
//! by `einsum` (see [`crate::report`]).

use std::process::ExitCode;

use rcannl_backends::cc::codegen::PRELUDE;
use rcannl_ir::Projections;
use rcannl_shape::spec::{EinsumSpec, Kind, SlotSpec, parse_einsum};
use rcannl_tensor::{Context, Tensor};

use crate::labels::{Names, Placed};
use crate::op::{Op, Special};
use crate::report::{self, CliError};
use crate::setup::{OpArgs, Setup, literal, run_error};

/// Arguments of `rcannl explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub op: OpArgs,
}

/// Runs the command: exit status 0 on success, 1 on any error.
pub fn run(args: &Args) -> ExitCode {
    match explain(&args.op) {
        Ok(text) => report::write_out(std::io::stdout(), &text),
        Err(err) => err.report(false),
    }
}

/// One tensor of the operation: its name, its slot's text in the spec, and its shape.
struct Row {
    name: String,
    slot: Option<String>,
    rows: [Vec<usize>; 3],
}

fn explain(args: &OpArgs) -> Result<String, CliError> {
    let Setup {
        spec,
        text,
        inputs,
        result,
        mut ctx,
        ..
    } = Setup::new(args, &[])?;
    let routine = ctx.forward(&[&result]).map_err(run_error)?;
    let records = ctx.projections(&result).map_err(run_error)?;
    let mut tensors: Vec<(String, &Tensor)> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| (format!("x{}", i + 1), x))
        .collect();
    tensors.push(("result".to_owned(), &result));
    let slot_texts: Vec<Option<String>> = match &spec {
        Some(spec) => spec
            .slots()
            .map(|(_, slot)| Some(slot.to_string()))
            .collect(),
        None => vec![None; tensors.len()],
    };
    let rows = tensors
        .iter()
        .zip(slot_texts)
        .map(|((name, t), slot)| {
            Ok(Row {
                name: name.clone(),
                slot,
                rows: ctx.rows(t).map_err(run_error)?,
            })
        })
        .collect::<Result<Vec<_>, CliError>>()?;

    let mut out = String::new();
    out += &format!("spec:      {}\n", args.spec);
    if args.numpy {
        out += &format!("ours:      {text}\n");
    }
    if let Some(spec) = &spec {
        out += &format!("canonical: {spec}\n");
    }
    out += &format!(
        "operation: {}: at each point, {}\n",
        args.op.name(),
        args.op.computes(inputs.len())
    );
    out += &format!("backend:   {}\n", ctx.backend_name());
    if let Some(target) = ctx.backend_target() {
        out += &format!("target:    {target}\n");
    }
    if let Some(tier) = routine.tier() {
        out += &format!("build:     {tier}\n");
    }
    if args.op == Op::Special(Special::Einsum) && Op::along_path(&text, &inputs) {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let path =
            Tensor::einsum_path_with(&text, &refs, &args.path_options()).map_err(run_error)?;
        let steps: Vec<String> = path
            .steps
            .iter()
            .map(|(i, j)| format!("({i}, {j})"))
            .collect();
        out += &format!(
            "path:      {} ({} FLOPs; positions in the list of pending operands, each \
             result appended at its end; the projections below are the last step's)\n",
            steps.join(" "),
            path.flops
        );
    }

    out += &shapes(&rows);
    for record in &records {
        out += &format!(
            "\n== projections ({}; dims and index maps in memory order) ==\n",
            record.label
        );
        out += &projections(record, &names(spec.as_ref(), record, &rows), args.op);
        out += "\n== padding ==\n";
        out += &padding(record);
    }

    out += "\n== loop nest (optimized; a pre-fill may become a local accumulator) ==\n";
    out += &routine.describe();
    out += &generated_code(&ctx, routine.source());
    Ok(out)
}

/// Each tensor's shape, as a literal and by kind, and its slot of the spec.
fn shapes(rows: &[Row]) -> String {
    let mut out = "\n== shapes ==\n".to_owned();
    let width = rows.iter().map(|row| row.name.len()).max().unwrap_or(0);
    for row in rows {
        let [batch, input, output] = &row.rows;
        let slot = row
            .slot
            .as_ref()
            .map_or(String::new(), |slot| format!("  spec: {slot}"));
        out += &format!(
            "{:<width$}  {}  (batch {batch:?}, input {input:?}, output {output:?}){slot}\n",
            row.name,
            literal(&row.rows)
        );
    }
    out
}

/// The record's symbols named after the labels of the spec the record is of (`rows`: the
/// inputs, then the result).
///
/// A step of a contraction path has a spec of its own, over other tensors than the command's
/// (the user's labels, fewer of them): its slots are placed over its own index maps, with rows
/// as long as the step's spec writes them. The command's spec placed over a step's tensors would
/// give its labels to other axes.
fn names(spec: Option<&EinsumSpec>, record: &Projections, rows: &[Row]) -> Names {
    let (Some(spec), Some((result, inputs))) = (spec, rows.split_last()) else {
        return Names::default();
    };
    let own = record_spec(record);
    if let Some(own) = own.as_ref().filter(|own| *own != spec) {
        let lengths = |slot: &SlotSpec| {
            let length = |kind| {
                let row = slot.row(kind);
                row.row_var.is_none().then(|| row.axes().count())
            };
            Some([
                length(Kind::Batch)?,
                length(Kind::Input)?,
                length(Kind::Output)?,
            ])
        };
        let slots = std::iter::once((&own.lhs, &record.lhs_index))
            .chain(own.rhs.iter().zip(&record.rhs_index));
        let placed: Vec<Placed<'_>> = slots
            .filter_map(|(slot, index)| Some((slot, index.as_slice(), lengths(slot)?)))
            .collect();
        return Names::from_slots(&placed);
    }
    let lengths = |row: &Row| row.rows.clone().map(|dims| dims.len());
    let mut placed: Vec<Placed<'_>> = vec![(&spec.lhs, &record.lhs_index, lengths(result))];
    for ((slot, index), row) in spec.rhs.iter().zip(&record.rhs_index).zip(inputs) {
        placed.push((slot, index, lengths(row)));
    }
    Names::from_slots(&placed)
}

/// The spec a record is of, read from its label (`einsum "a, c; c, k => a, k"`).
fn record_spec(record: &Projections) -> Option<EinsumSpec> {
    let start = record.label.find('"')?;
    let end = record.label.rfind('"')?;
    let text = record.label.get(start + 1..end)?;
    parse_einsum(text).ok()
}

/// The tensor an index map of the record belongs to: `result`, or input `i + 1`.
fn tensor_name(rhs: Option<usize>) -> String {
    rhs.map_or("result".to_owned(), |i| format!("x{}", i + 1))
}

/// The product space, the index maps, the reductions and the pre-fill.
fn projections(record: &Projections, names: &Names, op: Op) -> String {
    let factors: Vec<String> = record
        .product_space
        .iter()
        .map(|factor| {
            let parts: Vec<String> = factor
                .components
                .iter()
                .map(|(symbol, range)| format!("{}<{range}>", names.symbol(*symbol)))
                .collect();
            match parts.as_slice() {
                [single] => single.clone(),
                _ => format!("({})", parts.join(" | ")),
            }
        })
        .collect();
    let mut lines = vec![("product space".to_owned(), factors.join(" × "))];
    let map = |dims: &[usize], index: &[rcannl_ir::AxisIndex]| {
        let shown: Vec<String> = index.iter().map(|i| names.index(i)).collect();
        format!("{dims:?} at [{}]", shown.join(", "))
    };
    lines.push((tensor_name(None), map(&record.lhs_dims, &record.lhs_index)));
    for (i, (dims, index)) in record.rhs_dims.iter().zip(&record.rhs_index).enumerate() {
        lines.push((tensor_name(Some(i)), map(dims, index)));
    }
    let reduced: Vec<String> = record
        .reduction_symbols()
        .into_iter()
        .map(|s| names.symbol(s))
        .collect();
    let reductions = if reduced.is_empty() {
        "none".to_owned()
    } else {
        reduced.join(", ")
    };
    lines.push(("reductions".to_owned(), reductions.clone()));
    lines.push(("pre-filled".to_owned(), prefill(record, op, &reductions)));
    report::aligned(&lines)
}

/// Whether the result is filled with the accumulation's neutral element before the loops, and
/// why: it is unless every cell is written (surjective) exactly once (injective).
fn prefill(record: &Projections, op: Op, reductions: &str) -> String {
    let surjective = record.is_surjective();
    let injective = record.is_injective();
    let covered = if surjective {
        "surjective (every cell is written)"
    } else {
        "not surjective (some cells are never written)"
    };
    let once = match (injective, reductions) {
        (true, _) => "injective (no cell is written twice)".to_owned(),
        (false, "none") => "not injective (some cells are written more than once)".to_owned(),
        (false, reduced) => {
            format!("not injective (cells are written more than once: it reduces over {reduced})")
        }
    };
    if surjective && injective {
        return format!("no: the result map is {covered} and {once}, so each cell is stored once");
    }
    let accumulate = op.accumulate();
    let neutral = accumulate
        .neutral()
        .map_or("?".to_owned(), |v| v.to_string());
    let why = match accumulate {
        rcannl_ir::Binop::Arg2 => "cells nothing writes".to_owned(),
        other => format!("the neutral element of {}", other.name()),
    };
    format!("yes, with {neutral} ({why}): the result map is {covered} and {once}")
}

/// Each tensor's margins: the positions beyond its edges the loops address (a padded
/// convolution reads its input there).
fn padding(record: &Projections) -> String {
    let tensors = std::iter::once((None, &record.lhs_padding)).chain(
        record
            .rhs_padding
            .iter()
            .enumerate()
            .map(|(i, p)| (Some(i), p)),
    );
    let mut out = String::new();
    for (tensor, margins) in tensors {
        for (axis, (before, after)) in margins.iter().enumerate() {
            if (*before, *after) != (0, 0) {
                out += &format!(
                    "{} axis {axis}: {before} before, {after} after\n",
                    tensor_name(tensor)
                );
            }
        }
    }
    if out.is_empty() {
        out += "none\n";
    }
    out
}

/// The generated code: C without the prelude of helpers every routine starts with, or the GPU's
/// WGSL kernels (as the backend prints them: each under a line naming it, without the helpers
/// every kernel starts with).
fn generated_code(ctx: &Context, source: Option<String>) -> String {
    let language = if ctx.backend_name() == "gpu" {
        "WGSL"
    } else {
        "C"
    };
    let header = format!("\n== generated {language} ({}) ==\n", ctx.backend_name());
    match source {
        Some(source) => {
            let body = source.strip_prefix(PRELUDE).unwrap_or(&source);
            let skipped = if body.len() < source.len() {
                format!(
                    "/* The prelude of helpers every routine starts with ({} lines) is left out. */\n",
                    PRELUDE.lines().count()
                )
            } else {
                String::new()
            };
            format!("{header}{skipped}{}", body.trim_start())
        }
        None => format!(
            "{header}none: the interpreter runs the loop nest as it is (use --backend cc or gpu)\n"
        ),
    }
}
