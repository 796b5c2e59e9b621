//! The flags routines are compiled with, and the fingerprint of the code a compiler makes with
//! them. Shared with the build script, which builds `products.c` ahead of time with the default
//! compiler and flags and labels the library with this fingerprint.

use sha2::{Digest, Sha256};

/// The optimization and target flags routines are compiled with unless `$RCANNL_CFLAGS` or
/// `Compiler::with_flags` says otherwise: optimized for this machine.
pub const DEFAULT_FLAGS: [&str; 2] = ["-O3", "-march=native"];

/// The flags every routine is compiled with, whatever the target: math functions that need not
/// set `errno` (so that they vectorize), no contraction of a product and a sum into one fused
/// multiply-add (which some targets have and others lack, and which compilers apply by
/// different rules: it would make results depend on both), `#pragma omp simd` obeyed (sums the
/// generated code marks as free to reorder; no OpenMP runtime), position-independent for loading.
pub const REQUIRED_FLAGS: [&str; 5] = [
    "-fno-math-errno",
    "-ffp-contract=off",
    "-fopenmp-simd",
    "-shared",
    "-fPIC",
];

/// The required flags that can change the code (`-shared` and `-fPIC` are for linking).
pub fn code_flags() -> Vec<&'static str> {
    REQUIRED_FLAGS
        .into_iter()
        .filter(|f| !matches!(*f, "-shared" | "-fPIC"))
        .collect()
}

/// The SHA-256 (in hex) of a compiler's version line, the words it was asked for its predefined
/// macros with (`$CC`'s own, the flags, `-dM -E …`) and those macros (in any order): two
/// compilers with the same fingerprint build a source into code for the same instruction sets
/// at the same optimization level.
pub fn fingerprint<S: AsRef<str>>(version: &str, flags: &[S], macros: &str) -> String {
    let mut lines: Vec<&str> = macros.lines().map(str::trim).collect();
    lines.sort_unstable();
    let mut hasher = Sha256::new();
    hasher.update(version.trim().as_bytes());
    for flag in flags {
        hasher.update(b"\0");
        hasher.update(flag.as_ref().as_bytes());
    }
    hasher.update(b"\0\0");
    for line in lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_the_version_the_flags_and_the_macros_in_any_order() {
        let macros = "#define __x86_64__ 1\n#define __AVX2__ 1\n";
        let base = fingerprint("cc 12", &["-O3"], macros);
        assert_eq!(
            base,
            fingerprint(
                "cc 12",
                &["-O3"],
                "#define __AVX2__ 1\n#define __x86_64__ 1\n"
            )
        );
        assert_ne!(base, fingerprint("cc 13", &["-O3"], macros));
        assert_ne!(base, fingerprint("cc 12", &["-O2"], macros));
        assert_ne!(base, fingerprint("cc 12", &["-O3", "-g"], macros));
        assert_ne!(
            base,
            fingerprint("cc 12", &["-O3"], "#define __x86_64__ 1\n")
        );
        // Flags are told apart from each other, not only from the version.
        assert_ne!(
            fingerprint("cc", &["-O3", "x"], macros),
            fingerprint("cc", &["-O3x"], macros)
        );
    }
}
