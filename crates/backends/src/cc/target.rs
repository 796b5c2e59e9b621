//! What code a compiler and its flags produce: the compiler's version, the instruction-set
//! extensions its flags enable (read from the macros it predefines), the x86-64 level they
//! amount to, and whether this CPU has them all, so that code for a machine this one is not is
//! refused with an error instead of stopping on an illegal instruction.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::flags::{code_flags, fingerprint};
use super::process::CommandLine;

/// Instruction-set extensions, with the macro a compiler predefines when its flags enable each.
const EXTENSIONS: [(&str, &str); 14] = [
    ("sse3", "__SSE3__"),
    ("ssse3", "__SSSE3__"),
    ("sse4.1", "__SSE4_1__"),
    ("sse4.2", "__SSE4_2__"),
    ("popcnt", "__POPCNT__"),
    ("avx", "__AVX__"),
    ("avx2", "__AVX2__"),
    ("fma", "__FMA__"),
    ("bmi2", "__BMI2__"),
    ("f16c", "__F16C__"),
    ("avx512f", "__AVX512F__"),
    ("avx512bw", "__AVX512BW__"),
    ("avx512dq", "__AVX512DQ__"),
    ("avx512vl", "__AVX512VL__"),
];

/// The extensions each x86-64 microarchitecture level adds to the one below (the psABI's
/// levels, as far as [`EXTENSIONS`] tells them apart).
const LEVELS: [(&str, &[&str]); 3] = [
    (
        "x86-64-v2",
        &["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"],
    ),
    ("x86-64-v3", &["avx", "avx2", "fma", "bmi2", "f16c"]),
    (
        "x86-64-v4",
        &["avx512f", "avx512bw", "avx512dq", "avx512vl"],
    ),
];

/// The code a compiler produces with some flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The first line of `--version`.
    pub compiler: String,
    /// The flags that choose optimization and target, as given.
    pub flags: Vec<String>,
    /// The instruction-set extensions the flags enable (`sse3` … `avx512vl`), lowest first.
    pub extensions: Vec<&'static str>,
    /// Whether the compiler generates x86-64 code.
    pub x86_64: bool,
    /// The compiler's fingerprint under these flags (its version, the flags, the macros they
    /// predefine): equal for compilers and flags that make the same code.
    pub fingerprint: String,
}

impl Target {
    /// The highest x86-64 level whose extensions (and those of every level below) are all
    /// enabled: `x86-64` for the baseline; `None` for another architecture.
    pub fn level(&self) -> Option<&'static str> {
        if !self.x86_64 {
            return None;
        }
        let mut level = "x86-64";
        for (name, needs) in LEVELS {
            if !needs.iter().all(|e| self.extensions.contains(e)) {
                break;
            }
            level = name;
        }
        Some(level)
    }

    /// The enabled extensions this CPU lacks (none off x86-64, where nothing is checked).
    pub fn missing_on_this_cpu(&self) -> Vec<&'static str> {
        if !cfg!(target_arch = "x86_64") {
            return Vec::new();
        }
        self.missing_from(&cpu_extensions())
    }

    /// The enabled extensions a CPU with `extensions` lacks.
    fn missing_from(&self, extensions: &[&str]) -> Vec<&'static str> {
        self.extensions
            .iter()
            .copied()
            .filter(|e| !extensions.contains(e))
            .collect()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", self.compiler, self.flags.join(" "))?;
        if let Some(level) = self.level() {
            write!(f, ": {level}")?;
            if !self.extensions.is_empty() {
                write!(f, " ({})", self.extensions.join(" "))?;
            }
        }
        Ok(())
    }
}

/// Whether this CPU has the extension: `None` where that is not known (another architecture, a
/// name outside the list).
fn cpu_has(extension: &str) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(match extension {
            "sse3" => std::arch::is_x86_feature_detected!("sse3"),
            "ssse3" => std::arch::is_x86_feature_detected!("ssse3"),
            "sse4.1" => std::arch::is_x86_feature_detected!("sse4.1"),
            "sse4.2" => std::arch::is_x86_feature_detected!("sse4.2"),
            "popcnt" => std::arch::is_x86_feature_detected!("popcnt"),
            "avx" => std::arch::is_x86_feature_detected!("avx"),
            "avx2" => std::arch::is_x86_feature_detected!("avx2"),
            "fma" => std::arch::is_x86_feature_detected!("fma"),
            "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
            "f16c" => std::arch::is_x86_feature_detected!("f16c"),
            "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
            "avx512dq" => std::arch::is_x86_feature_detected!("avx512dq"),
            "avx512vl" => std::arch::is_x86_feature_detected!("avx512vl"),
            _ => return None,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = extension;
        None
    }
}

/// The instruction-set extensions a [`Target`] can name that this CPU has, lowest first (empty
/// off x86-64).
pub fn cpu_extensions() -> Vec<&'static str> {
    EXTENSIONS
        .iter()
        .map(|(name, _)| *name)
        .filter(|e| cpu_has(e) == Some(true))
        .collect()
}

/// The x86-64 levels this CPU runs, lowest first (`x86-64`, `x86-64-v2`, …; empty off x86-64).
pub fn cpu_levels() -> Vec<&'static str> {
    let cpu = Target {
        compiler: String::new(),
        flags: Vec::new(),
        extensions: cpu_extensions(),
        x86_64: cfg!(target_arch = "x86_64"),
        fingerprint: String::new(),
    };
    let Some(top) = cpu.level() else {
        return Vec::new();
    };
    let all = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"];
    let count = all.iter().position(|l| *l == top).expect("a level") + 1;
    all[..count].to_vec()
}

/// The target of `command` with `flags` (and the flags every build adds), asked of the compiler
/// once per process for each command and flags, each question answered within `timeout`.
pub(crate) fn query(
    command: &CommandLine,
    flags: &[String],
    timeout: Duration,
) -> Result<Target, String> {
    type Key = (CommandLine, Vec<String>);
    static KNOWN: OnceLock<Mutex<HashMap<Key, Result<Target, String>>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let key = (command.clone(), flags.to_vec());
    if let Some(target) = known.lock().expect("no panics while held").get(&key) {
        return target.clone();
    }
    let target = ask(command, flags, timeout);
    known
        .lock()
        .expect("no panics while held")
        .insert(key, target.clone());
    target
}

fn ask(command: &CommandLine, flags: &[String], timeout: Duration) -> Result<Target, String> {
    let version = run(command, &["--version"], timeout)?;
    let version = version.lines().next().unwrap_or("").trim();
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend_from_slice(&code_flags());
    args.extend(["-dM", "-E", "-x", "c", "-"]);
    let macros = run(command, &args, timeout)?;
    let defined = |name: &str| {
        macros
            .lines()
            .any(|line| line.split_whitespace().nth(1) == Some(name))
    };
    Ok(Target {
        compiler: version.to_owned(),
        flags: flags.to_vec(),
        extensions: EXTENSIONS
            .iter()
            .filter(|(_, symbol)| defined(symbol))
            .map(|(name, _)| *name)
            .collect(),
        x86_64: defined("__x86_64__"),
        // The words `$CC` puts after the program are flags too.
        fingerprint: fingerprint(
            version,
            &command
                .words()
                .skip(1)
                .chain(args.iter().copied())
                .collect::<Vec<_>>(),
            &macros,
        ),
    })
}

/// Runs the compiler with `args` on an empty standard input, for at most `timeout`: its
/// standard output, or an error with its standard error.
fn run(command: &CommandLine, args: &[&str], timeout: Duration) -> Result<String, String> {
    let output = command.run(args, timeout)?;
    if !output.status.success() {
        return Err(output.failure(&format!("`{command} {}`", args.join(" "))));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(extensions: &[&'static str]) -> Target {
        Target {
            compiler: "cc 1.0".to_owned(),
            flags: vec!["-O3".to_owned()],
            extensions: extensions.to_vec(),
            x86_64: true,
            fingerprint: String::new(),
        }
    }

    #[test]
    fn levels_need_every_extension_of_the_levels_below() {
        let v2 = ["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"];
        let v3 = ["avx", "avx2", "fma", "bmi2", "f16c"];
        let v4 = ["avx512f", "avx512bw", "avx512dq", "avx512vl"];
        assert_eq!(target(&[]).level(), Some("x86-64"));
        assert_eq!(target(&v2).level(), Some("x86-64-v2"));
        assert_eq!(
            target(&[&v2[..], &v3[..]].concat()).level(),
            Some("x86-64-v3")
        );
        assert_eq!(
            target(&[&v2[..], &v3[..], &v4[..]].concat()).level(),
            Some("x86-64-v4")
        );
        // AVX-512 without AVX2 is no level above the baseline's next.
        assert_eq!(
            target(&[&v2[..], &v4[..]].concat()).level(),
            Some("x86-64-v2")
        );
        let other = Target {
            x86_64: false,
            ..target(&[])
        };
        assert_eq!(other.level(), None);
    }

    #[test]
    fn the_description_names_the_compiler_flags_and_level() {
        let shown = target(&["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"]).to_string();
        assert_eq!(
            shown,
            "cc 1.0, -O3: x86-64-v2 (sse3 ssse3 sse4.1 sse4.2 popcnt)"
        );
    }

    #[test]
    fn extensions_a_cpu_lacks_are_named() {
        let v3 = [
            "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma",
        ];
        let v4 = target(&[&v3[..], &["bmi2", "f16c", "avx512f", "avx512vl"][..]].concat());
        assert_eq!(
            v4.missing_from(&v3),
            ["bmi2", "f16c", "avx512f", "avx512vl"]
        );
        assert!(target(&v3).missing_from(&v3).is_empty());
    }

    #[test]
    fn the_cpu_has_what_it_reports() {
        let target = target(&cpu_extensions());
        assert!(target.missing_on_this_cpu().is_empty());
    }
}
