//! The one list of settings: every key rcannl reads, with the kind of value it takes, its
//! default and what it does. Config files and `--setting` flags are checked against it, and the
//! README's table of settings and `rcannl settings` are made from it.

use std::fmt::Write as _;

use super::logging;

/// What values a key takes: the check a value must pass where it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of these names, exactly.
    Choice(&'static [&'static str]),
    /// A whole number from 0 up.
    Count,
    /// A size: a number of bytes, or of KiB, MiB or GiB with a suffix (`512K`, `200M`, `2G`).
    Size,
    /// A number of seconds above 0, fractions allowed.
    Seconds,
    /// `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Flag,
    /// A number above 0 (fractions and exponents allowed), or `none` for no limit.
    Limit,
    /// A path to a file or folder.
    Path,
    /// Any text.
    Text,
    /// Words separated by whitespace.
    Words,
    /// Levels of logging: a level for every module, `module=level` pairs for some, comma-separated.
    LogLevels,
}

impl Kind {
    /// Whether `value` is one of this kind's; the error says what is wrong with it.
    pub fn check(self, value: &str) -> Result<(), String> {
        match self {
            Kind::Choice(names) if names.contains(&value) => Ok(()),
            Kind::Choice(names) => Err(format!("not one of {}", names.join(", "))),
            Kind::Count => value
                .trim()
                .parse::<u64>()
                .map(drop)
                .map_err(|_| "not a whole number from 0 up".to_owned()),
            Kind::Size => crate::cache::parse_size(value).map(drop),
            Kind::Seconds => parse_seconds(value).map(drop),
            Kind::Flag => parse_flag(value).map(drop),
            Kind::Limit => parse_limit(value).map(drop),
            Kind::Path | Kind::Text | Kind::Words => Ok(()),
            Kind::LogLevels => logging::Filter::parse(value).map(drop),
        }
    }

    /// The values it takes, in a few words of Markdown.
    pub fn describe(self) -> String {
        match self {
            Kind::Choice(names) => {
                let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                match quoted.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => quoted.concat(),
                }
            }
            Kind::Count => "a whole number".to_owned(),
            Kind::Size => "a size (`512K`, `200M`, `2G`)".to_owned(),
            Kind::Seconds => "seconds".to_owned(),
            Kind::Flag => "`true` or `false`".to_owned(),
            Kind::Limit => "a number above 0, or `none`".to_owned(),
            Kind::Path => "a path".to_owned(),
            Kind::Text => "text".to_owned(),
            Kind::Words => "words".to_owned(),
            Kind::LogLevels => "levels (`info`, `warn,rcannl_tensor=debug`)".to_owned(),
        }
    }
}

/// A number of seconds above 0, such as `60` or `2.5`; an error says what is wrong with it.
pub fn parse_seconds(value: &str) -> Result<std::time::Duration, String> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|seconds| *seconds > 0.0)
        .and_then(|seconds| std::time::Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| "not a number of seconds above 0".to_owned())
}

/// A yes or no: `true`, `1`, `yes`, `on` or `false`, `0`, `no`, `off`, in any case.
pub fn parse_flag(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("not true or false".to_owned()),
    }
}

/// A number above 0 such as `16384` or `1.5e4`, or `none` (any case) for no limit; an error
/// says what is wrong with it.
pub fn parse_limit(value: &str) -> Result<Option<f64>, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    value
        .parse::<f64>()
        .ok()
        .filter(|limit| *limit > 0.0 && limit.is_finite())
        .map(Some)
        .ok_or_else(|| "not a number above 0, nor `none`".to_owned())
}

/// The float precisions, as precisions print: what the precision settings take.
pub const FLOAT_PRECISIONS: &[&str] = &["fp8", "f16", "bf16", "f32", "f64"];

/// What a key means when nothing sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value, which its readers fall back to.
    Value(&'static str),
    /// No value; the words say what happens then.
    Unset(&'static str),
}

/// One setting: its name (in config files and `--setting`), the values it takes, its default
/// and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The name, in lower case with underscores: `cache_dir`.
    pub name: &'static str,
    /// The values it takes.
    pub kind: Kind,
    /// What it means when nothing sets it.
    pub default: DefaultValue,
    /// What it does, a line of Markdown each.
    pub doc: &'static [&'static str],
}

impl Key {
    /// The environment variable that sets it: `RCANNL_` and its name in upper case.
    pub fn variable(&self) -> String {
        format!("RCANNL_{}", self.name.to_ascii_uppercase())
    }

    /// What it does, in one paragraph.
    pub fn description(&self) -> String {
        let lines: Vec<&str> = self.doc.iter().map(|line| line.trim()).collect();
        lines.join(" ")
    }

    /// Whether a config file may set it: every key but [`CONFIG`], which names the file.
    pub fn allowed_in_file(&self) -> bool {
        self.name != CONFIG.name
    }
}

/// Declares every key once, as a constant documented by its description, and [`KEYS`], the list
/// of them in order.
macro_rules! keys {
    ($($(#[doc = $doc:literal])+ $constant:ident = $name:literal, $kind:expr, $default:expr;)+) => {
        $(
            $(#[doc = $doc])+
            pub const $constant: Key = Key {
                name: $name,
                kind: $kind,
                default: $default,
                doc: &[$($doc),+],
            };
        )+

        /// Every key, in the order the README and `rcannl settings` list them.
        pub const KEYS: &[&Key] = &[$(&$constant),+];
    };
}

keys! {
    /// A config file to read settings from, in place of `rcannl.toml` in the working folder (a
    /// file named so must exist). Set on the command line or in the environment only.
    CONFIG = "config", Kind::Path, DefaultValue::Unset("`rcannl.toml` in the working folder, if there is one");

    /// How much to log, to standard error: a level (`off`, `error`, `warn`, `info`, `debug`,
    /// `trace`) for every module, then `module=level` pairs for the modules named and those
    /// inside them (`warn,rcannl_tensor=debug`). A program that installs its own `log` logger
    /// first keeps it.
    LOG_LEVEL = "log_level", Kind::LogLevels, DefaultValue::Value("warn");

    /// A folder every compiled routine is written into, one folder each (`0001-forward`): its
    /// assignments in `cd!` notation, its loops as lowered and as optimized, and the code the
    /// backend generated (`generated.c`, `generated.wgsl`).
    DEBUG_DIR = "debug_dir", Kind::Path, DefaultValue::Unset("nothing is written");

    /// Builds every routine run on the interpreter or the C backend so that it logs each store
    /// into a tensor's buffer as it runs: the routine, the tensor's label, the cell's position
    /// and the value stored, a line each (OCANNL's `debug_log_from_routines`). The lines go to
    /// `trace.log` in the routine's folder of `debug_dir` where that is set, else to standard
    /// error. Traced routines run on one thread, in the routine's order; the GPU cannot print,
    /// and compiling there is an error naming this setting.
    TRACE_STORES = "trace_stores", Kind::Flag, DefaultValue::Value("false");

    /// The backend of every `Context::new` and of `rcannl einsum`/`explain` without `--backend`.
    /// A backend that cannot be had here (no GPU adapter, no C compiler) is an error at the first
    /// routine, not a fallback; any other value is an error listing these three.
    BACKEND = "backend", Kind::Choice(&["gpu", "cc", "interp"]),
        DefaultValue::Unset("`cc` when a C compiler runs, else `interp` (one warning)");

    /// The precision of tensors that neither a choice nor their neighbours give one (parameters
    /// nothing of a chosen precision uses, numbers) in every graph made from then on, as
    /// `Graph::set_default_precision`, which overrides it. Any other value is an error when the
    /// graph is next checked or compiled.
    DEFAULT_PRECISION = "default_precision", Kind::Choice(FLOAT_PRECISIONS),
        DefaultValue::Value("f32");

    /// The precision of gradients whose own is not chosen, in every graph made from then on, as
    /// `Graph::set_default_grad_precision`, which overrides it. Any other value is an error when
    /// the graph is next checked or compiled.
    DEFAULT_GRAD_PRECISION = "default_grad_precision", Kind::Choice(FLOAT_PRECISIONS),
        DefaultValue::Unset("a gradient is held in its tensor's precision");

    /// A constant of magnitude this or more, in what an fp8 or f16 tensor computes (after the
    /// optimizer folds constants), is an error naming the tensor when its routine is compiled,
    /// rather than a value that overflows to infinity there: give that tensor a wider precision.
    /// bf16 has f32's range and is not checked; `none` checks nothing. OCANNL's setting of the
    /// same name, with its default (2^14).
    CHECK_HALF_PREC_CONSTANTS_CUTOFF = "check_half_prec_constants_cutoff", Kind::Limit,
        DefaultValue::Value("16384");

    /// Optimization and target flags of the C compiler, split at whitespace (the compiler itself
    /// is `$CC`, else `cc`).
    CFLAGS = "cflags", Kind::Words, DefaultValue::Value("-O3 -march=native");

    /// Whether the C backend compiles in tiers: a routine the cache does not hold first runs
    /// code built at `-Og`, which takes a fraction of the time to build, while the optimized
    /// build, started once the routine has run as long as the quick build took, finishes on a
    /// thread of its own and then takes over. Both compute the same bits. `false`: every
    /// routine is built optimized before it first runs.
    TIERED = "tiered", Kind::Flag, DefaultValue::Value("true");

    /// Seconds one run of the C compiler may take. Past it the compiler and everything it started
    /// are killed and the compilation fails with an error naming the command. A value that is no
    /// number above 0 is ignored after a warning.
    CC_TIMEOUT = "cc_timeout", Kind::Seconds, DefaultValue::Value("300");

    /// The folder compiled routines (and the GPU's generated programs) are cached in. Empty
    /// values, and a relative `XDG_CACHE_HOME` or `HOME`, count as unset. The folder is created
    /// with mode 0700 and used only while it is private; otherwise, when it cannot be written, or
    /// when it is on a `noexec` mount, routines are compiled in a fresh private folder in the
    /// temporary folder and not kept (one warning); where that is on a `noexec` mount too, the
    /// default backend is the interpreter.
    CACHE_DIR = "cache_dir", Kind::Path,
        DefaultValue::Unset("`$XDG_CACHE_HOME/rcannl`, else `$HOME/.cache/rcannl`, else `rcannl-<uid>` in the temporary folder");

    /// The cache folder's size cap: after each new entry, the least recently used entries beyond
    /// it are removed. A value that is not a size is ignored after one warning. `rcannl cache
    /// info` shows the folder and the cap, `rcannl cache clean` empties it.
    CACHE_MAX_BYTES = "cache_max_bytes", Kind::Size, DefaultValue::Value("512M");

    /// The GPU backend uses the best adapter whose name contains this text, ignoring case; none
    /// matching is an error listing the adapters found. A device opened on a chosen adapter
    /// (`Device::open`) does not read it.
    GPU_ADAPTER = "gpu_adapter", Kind::Text, DefaultValue::Unset("the best adapter");

    /// Caps the bytes of one GPU arena below the adapter's limit, spreading a model's tensors
    /// over more arenas (CI runs a model so).
    GPU_ARENA_BYTES = "gpu_arena_bytes", Kind::Count, DefaultValue::Unset("the adapter's limit");

    /// A folder the GPU backend writes every routine's WGSL kernels into as it compiles them
    /// (`<routine>-gpu_<key>.wgsl`).
    WGSL_DIR = "wgsl_dir", Kind::Path, DefaultValue::Unset("nothing is written");

    /// Every training loop (`fit`, `fit_step`, the data-parallel one) stops after its first N
    /// steps: to try a training program on another backend, or to compare its first steps on
    /// two (`.ci/examples`). Not a number: an error naming the setting.
    MAX_STEPS = "max_steps", Kind::Count, DefaultValue::Unset("every step");

    /// A file every training loop appends each step's loss to, one per line.
    LOSS_LOG = "loss_log", Kind::Path, DefaultValue::Unset("no log");

    /// A GPU test that finds no adapter fails instead of printing that the GPU suite did not run.
    REQUIRE_GPU = "require_gpu", Kind::Flag, DefaultValue::Value("false");

    /// The MPI suite fails when there is no `mpirun` instead of printing that it did not run.
    REQUIRE_MPI = "require_mpi", Kind::Flag, DefaultValue::Value("false");
}

/// The key named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().copied().find(|key| key.name == name)
}

/// The keys' names, comma-separated, for messages.
pub fn names() -> String {
    let names: Vec<&str> = KEYS.iter().map(|key| key.name).collect();
    names.join(", ")
}

/// The table of every key in Markdown, as the README shows it: key, environment variable,
/// values, default and what it does.
pub fn markdown_table() -> String {
    let mut table = String::from(
        "| Key | Variable | Values | Default | Effect |\n| --- | --- | --- | --- | --- |\n",
    );
    for key in KEYS {
        let default = match key.default {
            DefaultValue::Value(value) => format!("`{value}`"),
            DefaultValue::Unset(words) => words.to_owned(),
        };
        // Infallible: writing to a String.
        let _ = writeln!(
            table,
            "| `{}` | `{}` | {} | {default} | {} |",
            key.name,
            key.variable(),
            key.kind.describe(),
            key.description().replace('|', "\\|"),
        );
    }
    table
}
