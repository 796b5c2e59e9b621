//! Generated programs kept on disk: a routine's kernels (WGSL source and how to dispatch each)
//! are kept in the private cache folder the C backend uses (see `rcannl_backends::cache`:
//! checked against a SHA-256 record before use) as `gpu_<key>.wgsl`, `<key>` the SHA-256 of the
//! generator's own source, the device's features and the routine. A routine seen before is not
//! generated again, and its shaders can be read there.

use std::fmt::Write;
use std::path::Path;

use rcannl_backends::cache;
use rcannl_backends::emit::kind_name;
use rcannl_ir::{Kind, NodeId, Routine, Symbol};

use crate::wgsl::{Arena, Class, DeviceFeatures, Kernel, Program};

/// The first line of a kept program.
const MAGIC: &str = "// rcannl gpu program 3";

/// Everything that decides what the generator makes of a routine: its own source, so that a
/// changed generator never reads what an older one kept.
const GENERATOR: [&str; 10] = [
    include_str!("wgsl.rs"),
    include_str!("kernel.rs"),
    include_str!("product.rs"),
    include_str!("schedule.rs"),
    include_str!("prelude.wgsl"),
    include_str!("prelude_i32.wgsl"),
    include_str!("prelude_i64.wgsl"),
    include_str!("prelude_f32.wgsl"),
    include_str!("prelude_f64.wgsl"),
    include_str!("cache.rs"),
];

/// The name a routine's program is kept under on a device with `features`.
pub(crate) fn name(routine: &Routine, features: DeviceFeatures) -> String {
    let text = routine.to_string();
    let mut parts: Vec<&[u8]> = GENERATOR.iter().map(|s| s.as_bytes()).collect();
    let features = [features.f16, features.int64, features.f64].map(u8::from);
    parts.push(&features);
    parts.push(text.as_bytes());
    format!("gpu_{}.wgsl", cache::key(&parts))
}

/// `items` written with `write`, joined by commas; `-` for none.
fn list<T>(items: &[T], write: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.iter().map(write).collect::<Vec<_>>().join(",")
    }
}

/// The items [`list`] wrote, each read by `read`.
fn unlist<T>(text: &str, read: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    if text == "-" {
        Some(Vec::new())
    } else {
        text.split(',').map(read).collect()
    }
}

fn kind_of(name: &str) -> Option<Kind> {
    [Kind::Float, Kind::Int, Kind::Word]
        .into_iter()
        .find(|k| kind_name(*k) == name)
}

/// The program as kept: its static indices and placed tensors, then a header line per kernel
/// (invocations, workgroup size, whether it reads the parameters, its source's length in bytes,
/// dispatches, cells of partial sums, tensors, arenas, spilled locals), each followed by its
/// source.
pub(crate) fn to_text(program: &Program) -> String {
    let mut text = format!(
        "{MAGIC}\n// statics {}\n// placed {}\n",
        list(&program.statics, |s| s.0.to_string()),
        list(&program.placed, |n| n.0.to_string())
    );
    for kernel in &program.kernels {
        writeln!(
            text,
            "// kernel {} {} {} {} {} {} {} {} {}",
            kernel.invocations,
            kernel.workgroup,
            u8::from(kernel.parameters),
            kernel.source.len(),
            kernel.dispatches,
            kernel.partials,
            list(&kernel.nodes, |n| n.0.to_string()),
            list(&kernel.arenas, |a| format!(
                "{}.{}",
                a.class.name(),
                a.index
            )),
            list(&kernel.spills, |(k, slots)| format!(
                "{}.{slots}",
                kind_name(*k)
            ))
        )
        .expect("writing to a string");
        text.push_str(&kernel.source);
    }
    text
}

/// The program [`to_text`] wrote, or `None` for anything else.
pub(crate) fn from_text(text: &str) -> Option<Program> {
    let rest = text.strip_prefix(MAGIC)?.strip_prefix('\n')?;
    let (line, rest) = rest.split_once('\n')?;
    let statics = unlist(line.strip_prefix("// statics ")?, |s| {
        s.parse().ok().map(Symbol)
    })?;
    let (line, mut rest) = rest.split_once('\n')?;
    let placed = unlist(line.strip_prefix("// placed ")?, |s| {
        s.parse().ok().map(NodeId)
    })?;
    let mut kernels = Vec::new();
    while !rest.is_empty() {
        let (line, after) = rest.split_once('\n')?;
        let mut words = line.strip_prefix("// kernel ")?.split_whitespace();
        let invocations = words.next()?.parse().ok()?;
        let workgroup = words.next()?.parse().ok()?;
        let parameters = match words.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let length: usize = words.next()?.parse().ok()?;
        let dispatches = words.next()?.parse().ok()?;
        let partials = words.next()?.parse().ok()?;
        let nodes = unlist(words.next()?, |s| s.parse().ok().map(NodeId))?;
        let arenas = unlist(words.next()?, |s| {
            let (class, index) = s.split_once('.')?;
            Some(Arena {
                class: Class::named(class)?,
                index: index.parse().ok()?,
            })
        })?;
        let spills = unlist(words.next()?, |s| {
            let (kind, slots) = s.split_once('.')?;
            Some((kind_of(kind)?, slots.parse().ok()?))
        })?;
        if words.next().is_some() {
            return None;
        }
        let source = after.get(..length)?.to_owned();
        rest = &after[length..];
        kernels.push(Kernel {
            source,
            nodes,
            arenas,
            parameters,
            invocations,
            workgroup,
            spills,
            partials,
            dispatches,
        });
    }
    Some(Program {
        kernels,
        statics,
        placed,
    })
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
                    nodes: vec![NodeId(3), NodeId(7)],
                    arenas: vec![
                        Arena {
                            class: Class::F32,
                            index: 0,
                        },
                        Arena {
                            class: Class::Word,
                            index: 2,
                        },
                    ],
                    parameters: true,
                    invocations: 1 << 33,
                    workgroup: 64,
                    spills: vec![(Kind::Float, 2), (Kind::Word, 1)],
                    partials: 3 << 20,
                    dispatches: 12,
                },
                Kernel {
                    source: String::new(),
                    nodes: Vec::new(),
                    arenas: Vec::new(),
                    parameters: false,
                    invocations: 1,
                    workgroup: 1,
                    spills: Vec::new(),
                    partials: 0,
                    dispatches: 1,
                },
            ],
            statics: vec![Symbol(4), Symbol(9)],
            placed: vec![NodeId(3), NodeId(7)],
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
