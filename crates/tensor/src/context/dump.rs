//! The debug output folder: where the `debug_dir` setting names one, every routine a context
//! compiles is written there, in a folder of its own numbered in the order of compilation
//! (`0001-forward`, `0002-backprop`, …), so that what the compiler did can be read afterwards:
//!
//! - `assignments.cd`: the assignments, in `cd!` notation ([`Routine::code`](super::Routine::code));
//! - `lowered.loops`: the loops they lowered to, before optimization;
//! - `optimized.loops`: the loops that were compiled ([`Routine::describe`](super::Routine::describe));
//! - `generated.c` or `generated.wgsl`: the code the backend generated, for a backend that
//!   generates code ([`Routine::source`](super::Routine::source));
//! - `trace.log`, where the `trace_stores` setting is on: a line per store of every run of the
//!   routine, appended as it runs (see `rcannl_backends::trace`).
//!
//! The folder is created where missing and never emptied: a later run's routines replace the
//! folders of the same numbers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcannl_backends::settings;
use rcannl_ir::Routine as IrRoutine;

use crate::graph::{TensorError, TensorErrorKind, error_of};

use super::print::Code;

/// What one compilation made, to be written.
pub(super) struct Compiled<'a> {
    /// The assignments, printed in `cd!` notation when written.
    pub code: &'a Code,
    /// The routine as lowered, printed ([`lowered_if_asked`]).
    pub lowered: Option<String>,
    /// The routine as optimized, which the backend compiled.
    pub optimized: &'a IrRoutine,
    /// The code the backend generated, if it generates any.
    pub source: Option<&'a str>,
    /// The backend's name, which says the language of `source`.
    pub backend: &'a str,
}

/// `lowered` printed, where the `debug_dir` setting asks for routines to be written: taken
/// before optimizing, which consumes the lowered routine.
pub(super) fn lowered_if_asked(lowered: &IrRoutine) -> Option<String> {
    settings::get_or_warn(&settings::DEBUG_DIR).map(|_| lowered.to_string())
}

/// Writes `compiled` into the folder the `debug_dir` setting names, if it names one (see the
/// module's documentation), and returns the routine's folder there; the error names the file
/// that could not be written.
pub(super) fn write_if_asked(compiled: &Compiled<'_>) -> Result<Option<PathBuf>, TensorError> {
    let Some(setting) = settings::get_or_warn(&settings::DEBUG_DIR) else {
        return Ok(None);
    };
    let folder = routine_folder(Path::new(&setting.value), &compiled.optimized.name);
    let files = [
        ("assignments.cd", compiled.code.text().to_owned()),
        (
            "lowered.loops",
            compiled.lowered.clone().unwrap_or_default(),
        ),
        ("optimized.loops", compiled.optimized.to_string()),
    ];
    let generated = compiled
        .source
        .map(|source| (generated_name(compiled.backend), source.to_owned()));
    let unwritable = |path: &Path, e: std::io::Error| {
        error_of(
            TensorErrorKind::Io,
            format!(
                "routine {}: writing {} ({}): {e}",
                compiled.optimized.name,
                path.display(),
                setting.named()
            ),
        )
    };
    std::fs::create_dir_all(&folder).map_err(|e| unwritable(&folder, e))?;
    for (name, text) in files.into_iter().chain(generated) {
        let path = folder.join(name);
        std::fs::write(&path, text).map_err(|e| unwritable(&path, e))?;
    }
    log::info!(
        "routine {}: written to {}",
        compiled.optimized.name,
        folder.display()
    );
    Ok(Some(folder))
}

/// The folder of the next routine named `name` in `debug_dir`: its number in the process's order
/// of compilation, then its name with anything but letters, digits, `-` and `_` replaced by `_`.
fn routine_folder(debug_dir: &Path, name: &str) -> PathBuf {
    static COMPILED: AtomicUsize = AtomicUsize::new(0);
    let number = COMPILED.fetch_add(1, Ordering::Relaxed) + 1;
    let name: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    debug_dir.join(format!("{number:04}-{name}"))
}

/// The file the code a backend named `backend` generated is written to.
fn generated_name(backend: &str) -> &'static str {
    match backend {
        "cc" => "generated.c",
        "gpu" => "generated.wgsl",
        _ => "generated.txt",
    }
}
