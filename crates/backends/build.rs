//! Builds `products.c` (our matrix-product and vector kernels: the same source whatever the
//! model) with the default C compiler (`cc`) and flags while the crate is built, so that a
//! program's first routine does not wait for it. The library is labelled with the compiler's
//! fingerprint under those flags; at run time it stands in for a build only where the compiler
//! the program uses has the same fingerprint (the same compiler, flags and machine), and
//! `products.c` is compiled as before everywhere else. `$CC` is not read: the build does not
//! change (nor rerun) with it. Nothing here fails the crate's
//! build: without `cc`, or when cross-compiling, the library is left empty and the fingerprint
//! blank.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "src/cc/flags.rs"]
mod flags;

fn main() {
    println!("cargo:rerun-if-changed=src/cc/products.c");
    println!("cargo:rerun-if-changed=src/cc/flags.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("products.so");
    let fingerprint = prebuild(&library).unwrap_or_else(|why| {
        println!("cargo:warning=products.c is built at run time instead: {why}");
        std::fs::write(&library, []).expect("OUT_DIR is writable");
        String::new()
    });
    std::fs::write(out.join("products.fingerprint"), fingerprint).expect("OUT_DIR is writable");
}

/// Builds `products.c` into `library` with `cc` and the default flags: the fingerprint of that
/// compiler and flags.
fn prebuild(library: &Path) -> Result<String, String> {
    let host = std::env::var("HOST").unwrap_or_default();
    if std::env::var("TARGET").unwrap_or_default() != host {
        return Err("cross-compiling".to_owned());
    }
    let run = |args: &[&str]| -> Result<String, String> {
        let output = Command::new("cc")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run cc: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cc {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let version = run(&["--version"])?;
    let mut query: Vec<&str> = flags::DEFAULT_FLAGS.to_vec();
    query.extend(flags::code_flags());
    query.extend(["-dM", "-E", "-x", "c", "-"]);
    let macros = run(&query)?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cc/products.c");
    let (source, library) = (
        source.to_str().ok_or("a source path that is not UTF-8")?,
        library.to_str().ok_or("an output path that is not UTF-8")?,
    );
    let mut build: Vec<&str> = flags::DEFAULT_FLAGS.to_vec();
    build.extend(flags::REQUIRED_FLAGS);
    build.extend(["-o", library, source, "-lm"]);
    run(&build)?;
    Ok(flags::fingerprint(
        version.lines().next().unwrap_or(""),
        &query,
        &macros,
    ))
}
