//! The suite's references: which of numpy, PyTorch and JAX python3 imports here, and their
//! figures from `suite_reference.py`, run on as many threads as ours.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::python;

/// The reference columns, in the table's order (the script's names for them).
pub const LIBRARIES: &[&str] = &["torch", "torch.compile", "jax", "numpy"];

/// Seconds by library.
pub type Figures = HashMap<String, f64>;

/// The libraries the reference script can time here, and the threads it runs on.
#[derive(Debug)]
pub struct Peers {
    threads: usize,
    numpy: bool,
    torch: bool,
    jax: bool,
}

impl Peers {
    /// Looks for python3, numpy, torch and jax, saying in one line what is missing.
    pub fn find(threads: usize) -> Peers {
        let python = Command::new("python3")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !python {
            eprintln!("python3 does not run here: printing our figures alone");
            return Peers {
                threads,
                numpy: false,
                torch: false,
                jax: false,
            };
        }
        // Every library is imported by a script that needs numpy.
        let numpy = python::imports("numpy");
        let peers = Peers {
            threads,
            numpy,
            torch: numpy && python::imports("torch"),
            jax: numpy && python::imports("jax"),
        };
        let missing: Vec<&str> = [("numpy", numpy), ("torch", peers.torch), ("jax", peers.jax)]
            .into_iter()
            .filter(|(_, found)| !found)
            .map(|(name, _)| name)
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "python3 cannot import {}: those columns stay empty (python3 -m pip install numpy \
                 torch jax)",
                missing.join(", ")
            );
        }
        peers
    }

    /// The libraries to time a workload in.
    fn libraries(&self) -> Vec<&'static str> {
        let mut libraries = Vec::new();
        if self.torch {
            libraries.extend(["torch", "torch.compile"]);
        }
        if self.jax {
            libraries.push("jax");
        }
        libraries
    }

    /// The script run with `args` on our threads, or `None` (said) when it cannot start.
    fn script(&self, args: &[&str]) -> Option<Output> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/suite_reference.py");
        let threads = self.threads.to_string();
        let output = Command::new("python3")
            .arg(script)
            .args(["--threads", &threads])
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
            Ok(output) => Some(output),
            Err(e) => {
                eprintln!("cannot run the reference script: {e}");
                None
            }
        }
    }

    /// The reference figures of workload `case` (`repeats` timed steps a round): the best median
    /// of each library that ran it.
    pub fn time(&self, case: &str, repeats: usize) -> Figures {
        let mut libraries = self.libraries();
        if case == "matmul" && self.numpy {
            libraries.push("numpy");
        }
        if libraries.is_empty() {
            return Figures::new();
        }
        let (joined, repeats, rounds) = (
            libraries.join(","),
            repeats.to_string(),
            crate::ROUNDS.to_string(),
        );
        let args = [
            "--libraries",
            &joined,
            "--rounds",
            &rounds,
            "time",
            case,
            &repeats,
        ];
        self.script(&args).map(figures).unwrap_or_default()
    }

    /// The references' times to the transformer's first step, each in a fresh process with its
    /// compilation cache in a folder of `scratch`: cold on the first call, which fills it, warm
    /// after.
    pub fn first_step(&self, scratch: &Path) -> Figures {
        let mut all = Figures::new();
        for library in self.libraries() {
            let cache = scratch.join(library);
            let cache = cache.to_string_lossy();
            let args = ["--libraries", library, "first", &cache];
            if let Some(output) = self.script(&args) {
                all.extend(figures(output));
            }
        }
        all
    }
}

/// The figures the script printed (`LIBRARY SECONDS` lines); its other lines, such as a library
/// that failed, are passed on, as is the last line of a failure's stderr.
fn figures(output: Output) -> Figures {
    python::report_failure(&output);
    let mut figures = Figures::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let seconds = line
            .split_once(' ')
            .and_then(|(library, value)| Some((library, value.trim().parse::<f64>().ok()?)));
        match seconds {
            Some((library, seconds)) => {
                figures.insert(library.to_owned(), seconds);
            }
            None => eprintln!("{line}"),
        }
    }
    figures
}
