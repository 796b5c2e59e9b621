//! The C backend's side of tracing stores ([`crate::trace`]): the helpers a traced routine's
//! source defines after the prelude, the call logging one store, and the library's entry points
//! that send a run's lines to its sink.
//!
//! A traced library keeps where its lines go in a variable of its own, which
//! `rc_trace_begin` sets before a run and `rc_trace_end` closes after it. A traced source is
//! one translation unit (the helpers stand between the prelude and the kernels, where the source
//! is never cut into parts), and its runs are one at a time in the process ([`RUNS`]): runs of
//! one routine in two contexts share its library, and with it that variable.

use std::ffi::{CString, c_char};
use std::sync::Mutex;

use rcannl_ir::{Kind, TensorNode};

use crate::error::{CompileError, CompileErrorKind, RunError};
use crate::trace::{Sink, digits, unwritable};

/// The definitions a traced routine's source has after the prelude: the sink of its lines, the
/// entry points setting it, and the helpers writing one line per kind of value, as
/// `crate::trace::line` writes it.
pub const HELPERS: &str = r#"
/* Tracing stores (the trace_stores setting): a line per store into a buffer. */
#include <stdio.h>
static FILE *rc_trace_out;
static const char *rc_trace_routine = "";
int rc_trace_begin(const char *path, const char *routine) {
  rc_trace_routine = routine;
  rc_trace_out = path ? fopen(path, "a") : stderr;
  return rc_trace_out != NULL;
}
int rc_trace_end(void) {
  int failed = 0;
  if (rc_trace_out && rc_trace_out != stderr) failed = fclose(rc_trace_out) != 0;
  else if (rc_trace_out) failed = fflush(rc_trace_out) != 0;
  rc_trace_out = NULL;
  return !failed;
}
/* The routine, the label and the cell's position along each axis, from its flat offset in a
   buffer of `dims` whose margins before each axis are `before`. */
static void rc_trace_cell(const char *label, int64_t offset, int axes, const int64_t *dims,
                          const int64_t *before) {
  int64_t position[64];
  for (int a = axes - 1; a >= 0; --a) {
    position[a] = offset % dims[a] - before[a];
    offset /= dims[a];
  }
  fprintf(rc_trace_out, "%s '%s'[", rc_trace_routine, label);
  for (int a = 0; a < axes; ++a) fprintf(rc_trace_out, a ? ", %lld" : "%lld", (long long)position[a]);
  fputs("] = ", rc_trace_out);
}
static void rc_trace_float(const char *label, int64_t offset, int axes, const int64_t *dims,
                           const int64_t *before, double value, int digits) {
  if (!rc_trace_out) return;
  rc_trace_cell(label, offset, axes, dims, before);
  if (isnan(value)) fputs("nan\n", rc_trace_out);
  else if (isinf(value)) fputs(value < 0 ? "-inf\n" : "inf\n", rc_trace_out);
  else fprintf(rc_trace_out, "%.*g\n", digits, value);
}
static void rc_trace_int(const char *label, int64_t offset, int axes, const int64_t *dims,
                         const int64_t *before, long long value) {
  if (!rc_trace_out) return;
  rc_trace_cell(label, offset, axes, dims, before);
  fprintf(rc_trace_out, "%lld\n", value);
}
static void rc_trace_word(const char *label, int64_t offset, int axes, const int64_t *dims,
                          const int64_t *before, rc_word value) {
  if (!rc_trace_out) return;
  rc_trace_cell(label, offset, axes, dims, before);
  fprintf(rc_trace_out, "[0x%08x, 0x%08x, 0x%08x, 0x%08x]\n", value.w[0], value.w[1], value.w[2],
          value.w[3]);
}
"#;

/// The call logging a store into the cell at flat `offset` of `info`'s buffer, which now holds
/// `value` (in the compute type of its precision).
pub fn store(info: &TensorNode, offset: &str, value: &str) -> String {
    let dims = info.buffer_dims();
    let array = |values: Vec<String>| {
        if values.is_empty() {
            "NULL".to_owned()
        } else {
            format!("(const int64_t[]){{{}}}", values.join(", "))
        }
    };
    let shape = format!(
        "{}, (int64_t)({offset}), {}, {}, {}",
        literal(&info.label),
        dims.len(),
        array(dims.iter().map(ToString::to_string).collect()),
        array(info.padding.iter().map(|(b, _)| b.to_string()).collect()),
    );
    match info.precision.kind() {
        Kind::Float => format!(
            "rc_trace_float({shape}, (double)({value}), {});",
            digits(info.precision)
        ),
        Kind::Int => format!("rc_trace_int({shape}, (long long)({value}));"),
        Kind::Word => format!("rc_trace_word({shape}, {value});"),
    }
}

/// `text` as a C string literal. Bytes outside plain ASCII, quotes, backslashes and question
/// marks (trigraphs) are octal escapes; so is a letter that would start one of the writer's
/// names (`n3`, `l0`, `v2`), which kernel identity renames wherever it finds one
/// (`cc::identity`), so that a label reads as written.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for &byte in text.as_bytes() {
        let c = char::from(byte);
        let starts_name = matches!(c, 'n' | 'l' | 'v') && !out.ends_with(word);
        if !(' '..='~').contains(&c) || matches!(c, '"' | '\\' | '?') || starts_name {
            out.push_str(&format!("\\{byte:03o}"));
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Traced runs, one at a time in the process: a library's sink is one variable.
static RUNS: Mutex<()> = Mutex::new(());

type Begin = unsafe extern "C" fn(*const c_char, *const c_char) -> i32;
type End = unsafe extern "C" fn() -> i32;

/// A traced routine's entry points, and where its lines go.
#[derive(Debug)]
pub struct Traced {
    begin: Begin,
    end: End,
    routine: CString,
    /// Where the lines go.
    pub sink: Sink,
}

impl Traced {
    /// The entry points of the traced `library` of `routine`, its lines going to `sink`.
    pub fn new(
        library: &libloading::Library,
        routine: &str,
        sink: Sink,
    ) -> Result<Traced, CompileError> {
        let missing = |e: libloading::Error| {
            CompileError::new(
                CompileErrorKind::Load,
                format!("a traced library without its entry points: {e}"),
            )
        };
        // SAFETY: `HELPERS` defines both with exactly these signatures.
        let (begin, end) = unsafe {
            (
                *library.get::<Begin>(b"rc_trace_begin").map_err(missing)?,
                *library.get::<End>(b"rc_trace_end").map_err(missing)?,
            )
        };
        let routine = CString::new(routine.replace('\0', " ")).expect("no NUL left");
        Ok(Traced {
            begin,
            end,
            routine,
            sink,
        })
    }

    /// Runs `run` with the library's lines going to the sink; an error where the sink's file
    /// cannot be opened or written.
    pub fn around(&self, run: impl FnOnce()) -> Result<(), RunError> {
        use std::os::unix::ffi::OsStrExt;
        let path = match &self.sink {
            Sink::StandardError => None,
            Sink::File(path) => {
                Some(CString::new(path.as_os_str().as_bytes()).map_err(|e| unwritable(path, &e))?)
            }
        };
        let _one_at_a_time = RUNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let named = |what: &str| match &self.sink {
            Sink::File(path) => unwritable(path, &what),
            Sink::StandardError => unwritable(std::path::Path::new("standard error"), &what),
        };
        // SAFETY: both strings outlive the run, which `rc_trace_end` closes.
        let opened = unsafe {
            (self.begin)(
                path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
                self.routine.as_ptr(),
            )
        };
        if opened == 0 {
            return Err(named("it cannot be opened"));
        }
        run();
        // SAFETY: closes what `rc_trace_begin` opened.
        if unsafe { (self.end)() } == 0 {
            return Err(named("its lines could not all be written"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_c_literals_that_identity_leaves_alone() {
        assert_eq!(literal("w"), "\"w\"");
        assert_eq!(literal("grad w"), "\"grad w\"");
        // `n3` would be taken for a node, `l1` for a loop variable.
        assert_eq!(literal("n3"), "\"\\1563\"");
        assert_eq!(literal("x l1"), "\"x \\1541\"");
        assert_eq!(literal("ln"), "\"\\154n\"");
        assert_eq!(literal("a\"b?"), "\"a\\042b\\077\"");
        assert_eq!(literal("é"), "\"\\303\\251\"");
        let renamed = crate::cc::identity::rename(&format!("n7[0] = 1; {}", literal("n3 v2")));
        assert_eq!(renamed.nodes.len(), 1);
    }
}
