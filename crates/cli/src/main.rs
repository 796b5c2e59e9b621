//! The `rcannl` command-line tool: argument parsing and dispatch to one module per subcommand.
//!
//! Each subcommand lives in its own module with an `Args` struct (its clap arguments) and a `run`
//! function that does the work and returns the process exit code.

mod parse;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect rcannl einsum and shape specs: the notation rcannl uses to infer shapes, loops and padding.
#[derive(Debug, Parser)]
#[command(name = "rcannl", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse an einsum spec ("ij;jk=>ik") or a shape spec ("b | i -> o") and show its structure.
    Parse(parse::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Parse(args) => parse::run(&args),
    }
}
