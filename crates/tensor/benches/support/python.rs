//! What the benchmarks comparing with a Python reference share: finding (or installing) the
//! reference's modules, and reporting a reference script that failed.

use std::process::{Command, Output, Stdio};

/// Whether python3 imports `module` (JAX kept on the CPU, as the references run it).
pub fn imports(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .env("JAX_PLATFORMS", "cpu")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether python3 imports `module`, after one try at installing `package` when it does not.
pub fn importable(module: &str, package: &str) -> bool {
    if imports(module) {
        return true;
    }
    eprintln!("{module} not found; installing it with python3 -m pip install --quiet {package}");
    let _ = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", package])
        .status();
    imports(module)
}

/// Reports a reference script that exited with a failure, with the last line it wrote to
/// stderr; what it printed before stopping still counts.
pub fn report_failure(output: &Output) {
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!(
            "the reference script failed ({}): {}",
            output.status,
            stderr.lines().last().unwrap_or("no message")
        );
    }
}
