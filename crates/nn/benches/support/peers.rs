//! The benchmarks' references: which of numpy, PyTorch and JAX python3 imports here, and the
//! figures a reference script (`suite_reference.py`, `practitioners_reference.py`) prints, run on
//! as many threads as ours.

use std::collections::HashMap;
use std::process::{Command, Output, Stdio};

use crate::python;

/// What a script printed for each library: its numbers (seconds, or losses).
pub type Figures = HashMap<String, Vec<f64>>;

/// The libraries a reference script can run here, the script and the threads it runs on.
#[derive(Debug)]
pub struct Peers {
    script: &'static str,
    threads: usize,
    numpy: bool,
    torch: bool,
    jax: bool,
}

impl Peers {
    /// Looks for python3, numpy, torch and jax to run `script` (a path) with, saying in one line
    /// what is missing.
    pub fn find(script: &'static str, threads: usize) -> Peers {
        let mut peers = Peers {
            script,
            threads,
            numpy: false,
            torch: false,
            jax: false,
        };
        let python = Command::new("python3")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !python {
            eprintln!("python3 does not run here: printing our figures alone");
            return peers;
        }
        // Every library is imported by a script that needs numpy.
        peers.numpy = python::imports("numpy");
        peers.torch = peers.numpy && python::imports("torch");
        peers.jax = peers.numpy && python::imports("jax");
        let missing: Vec<&str> = [
            ("numpy", peers.numpy),
            ("torch", peers.torch),
            ("jax", peers.jax),
        ]
        .into_iter()
        .filter(|(_, found)| !found)
        .map(|(name, _)| name)
        .collect();
        if !missing.is_empty() {
            eprintln!(
                "python3 cannot import {}: those columns stay empty (python3 -m pip install numpy \
                 torch jax, or put a Python that has them first on the PATH)",
                missing.join(", ")
            );
        }
        peers
    }

    /// Whether numpy imports (its column is the matrix product's alone).
    pub fn numpy(&self) -> bool {
        self.numpy
    }

    /// The deep-learning libraries found: PyTorch eager and compiled, JAX.
    pub fn libraries(&self) -> Vec<&'static str> {
        let mut libraries = Vec::new();
        if self.torch {
            libraries.extend(["torch", "torch.compile"]);
        }
        if self.jax {
            libraries.push("jax");
        }
        libraries
    }

    /// The figures the script prints run with `args` after `--threads` and `--libraries`
    /// `libraries`, or none (said) when it cannot start.
    pub fn run(&self, libraries: &[&str], args: &[&str]) -> Figures {
        if libraries.is_empty() {
            return Figures::new();
        }
        let threads = self.threads.to_string();
        let output = Command::new("python3")
            .arg(self.script)
            .args(["--threads", &threads])
            .args(["--libraries", &libraries.join(",")])
            .args(args)
            .env("JAX_PLATFORMS", "cpu")
            .env(
                "XLA_FLAGS",
                format!(
                    "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"
                ),
            )
            .env("OMP_NUM_THREADS", &threads)
            .env("OPENBLAS_NUM_THREADS", &threads)
            .env("MKL_NUM_THREADS", &threads)
            .stdin(Stdio::null())
            .output();
        match output {
            Ok(output) => figures(output),
            Err(e) => {
                eprintln!("cannot run the reference script: {e}");
                Figures::new()
            }
        }
    }

    /// The best of `rounds` medians of `repeats` steps of workload `case`, in seconds, for each
    /// of `libraries` that ran it.
    pub fn time(&self, libraries: &[&str], case: &str, repeats: usize, rounds: usize) -> Figures {
        let (repeats, rounds) = (repeats.to_string(), rounds.to_string());
        self.run(libraries, &["--rounds", &rounds, "time", case, &repeats])
    }
}

/// The figures the script printed (`LIBRARY NUMBER…` lines); its other lines, such as a library
/// that failed, are passed on, as is the last line of a failure's stderr.
fn figures(output: Output) -> Figures {
    python::report_failure(&output);
    let mut figures = Figures::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let mut words = line.split_whitespace();
        let library = words.next().unwrap_or_default();
        let numbers: Option<Vec<f64>> = words.map(|w| w.parse().ok()).collect();
        match numbers {
            Some(numbers) if !numbers.is_empty() => {
                figures.insert(library.to_owned(), numbers);
            }
            _ => eprintln!("{line}"),
        }
    }
    figures
}
