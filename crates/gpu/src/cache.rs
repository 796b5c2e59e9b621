//! Generated programs kept on disk: a routine's kernels (WGSL source and how to dispatch each)
//! are kept in the private cache folder the C backend uses (see `rcannl_backends::cache`:
//! checked against a SHA-256 record before use) as `gpu_<key>.wgsl`, `<key>` the SHA-256 of the
//! generator's own source, the device's features and the routine. A routine seen before is not
//! generated again, and its shaders can be read there.

use std::fmt::Write;
use std::path::Path;

use rcannl_backends::cache;
use rcannl_ir::{LocalId, NodeId, Routine, Symbol};

use crate::wgsl::{DeviceFeatures, Kernel, Program};

/// The first line of a kept program.
const MAGIC: &str = "// rcannl gpu program 2";

/// Everything that decides what the generator makes of a routine: its own source, so that a
/// changed generator never reads what an older one kept.
const GENERATOR: [&str; 5] = [
    include_str!("wgsl.rs"),
    include_str!("product.rs"),
    include_str!("schedule.rs"),
    include_str!("prelude.wgsl"),
    include_str!("cache.rs"),
];

/// The name a routine's program is kept under on a device with `features`.
pub(crate) fn name(routine: &Routine, features: DeviceFeatures) -> String {
    let text = routine.to_string();
    let mut parts: Vec<&[u8]> = GENERATOR.iter().map(|s| s.as_bytes()).collect();
    let features = [u8::from(features.f16)];
    parts.push(&features);
    parts.push(text.as_bytes());
    format!("gpu_{}.wgsl", cache::key(&parts))
}

/// The program as kept: a header line per kernel (invocations, workgroup size, whether it reads
/// the static indices, its source's length in bytes, its bindings), each followed by its source.
pub(crate) fn to_text(program: &Program) -> String {
    let mut text = format!("{MAGIC}\n// statics");
    for symbol in &program.statics {
        write!(text, " {}", symbol.0).expect("writing to a string");
    }
    text.push('\n');
    for kernel in &program.kernels {
        write!(
            text,
            "// kernel {} {} {} {} {} {}",
            kernel.invocations,
            kernel.workgroup,
            u8::from(kernel.reads_statics),
            kernel.source.len(),
            kernel.dispatches,
            kernel.spills.len()
        )
        .expect("writing to a string");
        for id in &kernel.spills {
            write!(text, " {}", id.0).expect("writing to a string");
        }
        for node in &kernel.bindings {
            write!(text, " {}", node.0).expect("writing to a string");
        }
        text.push('\n');
        text.push_str(&kernel.source);
    }
    text
}

/// The program [`to_text`] wrote, or `None` for anything else.
pub(crate) fn from_text(text: &str) -> Option<Program> {
    let rest = text.strip_prefix(MAGIC)?.strip_prefix('\n')?;
    let (line, mut rest) = rest.split_once('\n')?;
    let statics = line
        .strip_prefix("// statics")?
        .split_whitespace()
        .map(|s| s.parse().ok().map(Symbol))
        .collect::<Option<Vec<_>>>()?;
    let mut kernels = Vec::new();
    while !rest.is_empty() {
        let (line, after) = rest.split_once('\n')?;
        let mut words = line.strip_prefix("// kernel ")?.split_whitespace();
        let invocations = words.next()?.parse().ok()?;
        let workgroup = words.next()?.parse().ok()?;
        let reads_statics = match words.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let length: usize = words.next()?.parse().ok()?;
        let dispatches = words.next()?.parse().ok()?;
        let n_spills: usize = words.next()?.parse().ok()?;
        let spills = (0..n_spills)
            .map(|_| words.next()?.parse().ok().map(LocalId))
            .collect::<Option<Vec<_>>>()?;
        let bindings = words
            .map(|w| w.parse().ok().map(NodeId))
            .collect::<Option<Vec<_>>>()?;
        let source = after.get(..length)?.to_owned();
        rest = &after[length..];
        kernels.push(Kernel {
            source,
            bindings,
            reads_statics,
            invocations,
            workgroup,
            spills,
            dispatches,
        });
    }
    Some(Program { kernels, statics })
}

/// The program kept as `name` in `folder`, if there is one that passes its check.
pub(crate) fn read(folder: &Path, name: &str) -> Option<Program> {
    let bytes = cache::read_kept(folder, name)?;
    from_text(std::str::from_utf8(&bytes).ok()?)
}

/// Keeps `program` as `name` in `folder`; a folder that cannot keep it only costs a later
/// generation, so the reason is dropped.
pub(crate) fn write(folder: &Path, name: &str, program: &Program) {
    let _ = cache::keep(folder, name, to_text(program).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_come_back_as_they_were_kept() {
        let program = Program {
            kernels: vec![
                Kernel {
                    source: "fn main() {}\n// a line\n".to_owned(),
                    bindings: vec![NodeId(3), NodeId(7)],
                    reads_statics: true,
                    invocations: 1 << 33,
                    workgroup: 64,
                    spills: vec![LocalId(2), LocalId(5)],
                    dispatches: 12,
                },
                Kernel {
                    source: String::new(),
                    bindings: Vec::new(),
                    reads_statics: false,
                    invocations: 1,
                    workgroup: 1,
                    spills: Vec::new(),
                    dispatches: 1,
                },
            ],
            statics: vec![Symbol(4), Symbol(9)],
        };
        let text = to_text(&program);
        assert_eq!(from_text(&text), Some(program));
        assert_eq!(from_text(&text[..text.len() - 3]), None);
        assert_eq!(
            from_text(&text.replacen("// kernel 8", "// kernel x", 1)),
            None
        );
        assert_eq!(from_text("something else"), None);
    }
}
