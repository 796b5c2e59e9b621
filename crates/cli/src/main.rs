//! The `rcannl` command-line tool: argument parsing and dispatch to one module per subcommand.
//!
//! Each subcommand lives in its own module with an `Args` struct (its clap arguments) and a `run`
//! function that does the work and returns the process exit code: `parse`, `einsum` (run an
//! operation on concrete inputs) and `explain` (how it compiles). Those two share `setup` (their
//! common arguments and the graph they build), `captures` (the labels `--capture` and `--set`
//! name), `op` (the operations), `input` (the INPUT forms), `dtype` and `cells` (numpy's dtypes
//! and values of one), `npy` (`.npy` files), `labels` (naming iterators after the spec's labels),
//! `result_size` (refusing a result too large to make) and `report` (output and errors). `cache`
//! shows and empties the folder compiled kernels are kept in. `settings` takes `--setting
//! KEY=VALUE`, which every subcommand accepts, and lists the keys (`rcannl settings`).
//!
//! Features (both default): `gpu` gives `--backend gpu` (without it, choosing the GPU is an
//! error saying so), `plot` builds rcannl-nn's plots; `--no-default-features` builds the tool
//! without wgpu and plotters.

mod bound;
mod cache;
mod captures;
mod cells;
mod dtype;
mod einsum;
mod explain;
mod input;
mod labels;
mod npy;
mod op;
mod parse;
mod report;
mod result_size;
mod settings;
mod setup;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect rcannl einsum and shape specs, the notation rcannl uses to infer shapes, loops and
/// padding; run them on concrete inputs and see how they compile.
#[derive(Debug, Parser)]
#[command(name = "rcannl", version)]
struct Cli {
    /// A setting for this run (repeatable), over its environment variable (RCANNL_KEY) and the
    /// config file (rcannl.toml): --setting backend=interp. `rcannl settings` lists the keys.
    #[arg(long = "setting", value_name = "KEY=VALUE", global = true)]
    settings: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse an einsum spec ("ij;jk=>ik") or a shape spec ("b | i -> o") and show its structure.
    Parse(parse::Args),
    /// Run one operation on concrete inputs: its result, gradients, captured sizes and timing.
    Einsum(einsum::Args),
    /// Show how one operation on concrete inputs compiles: shapes, projections, padding, the loop
    /// nest and the generated C or WGSL.
    Explain(explain::Args),
    /// Show or empty the folder compiled kernels are kept in ($RCANNL_CACHE_DIR, …), kept under
    /// $RCANNL_CACHE_MAX_BYTES (512 MiB unless set).
    Cache(cache::Args),
    /// List every setting with its value and where it came from (the command line, the
    /// environment, the config file or the default).
    Settings(settings::Args),
}

fn main() -> ExitCode {
    // Read as they are: `std::env::args` would panic on an argument that is not UTF-8.
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => return usage_error(err, &args),
    };
    if let Err(err) = settings::install(&cli.settings) {
        return err.report(wants_json(&args));
    }
    match cli.command {
        Command::Parse(args) => parse::run(&args),
        Command::Einsum(args) => einsum::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Cache(args) => cache::run(&args),
        Command::Settings(args) => settings::run(&args),
    }
}

/// A command line that does not parse. Help and version requests print as usual; a usage error
/// is an error of kind `usage` like any other (status 1, JSON with `--json`).
fn usage_error(err: clap::Error, args: &[OsString]) -> ExitCode {
    use clap::error::ErrorKind as Clap;
    if matches!(err.kind(), Clap::DisplayHelp | Clap::DisplayVersion)
        || matches!(err.kind(), Clap::DisplayHelpOnMissingArgumentOrSubcommand)
    {
        err.exit();
    }
    let json = wants_json(args);
    let rendered = err.render().to_string();
    let message = match (err.kind(), not_utf8(args)) {
        (Clap::InvalidUtf8, Some(message)) => message,
        _ => rendered.trim_end().trim_start_matches("error: ").to_owned(),
    };
    report::CliError::new(report::ErrorKind::Usage, message).report(json)
}

/// Whether the command line asks for errors as JSON, read before (or without) parsing it.
fn wants_json(args: &[OsString]) -> bool {
    args.iter().skip(1).any(|arg| arg == "--json")
}

/// Names the first argument that had to be text but is not UTF-8 (counting from 1 after the
/// program's name), its bytes escaped. The `-o` path alone may be any bytes, as file names are.
fn not_utf8(args: &[OsString]) -> Option<String> {
    let is_output_path = |position: usize| {
        let bytes = args[position].as_encoded_bytes();
        let flag = args[position - 1].as_encoded_bytes();
        flag == b"-o"
            || flag == b"--output"
            || bytes.starts_with(b"--output=")
            || (bytes.starts_with(b"-o") && !bytes.starts_with(b"--"))
    };
    let position = (1..args.len())
        .find(|&position| args[position].to_str().is_none() && !is_output_path(position))?;
    Some(format!(
        "argument {position} {:?} is not valid UTF-8: specs, inputs and flag values must be text",
        args[position]
    ))
}
