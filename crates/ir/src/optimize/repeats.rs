//! Repeated work transformed once. A deep model's step repeats each layer's nests once per layer
//! (its forward, its gradients, the optimizer's updates of its parameters): the same nests over
//! other nodes. Once the whole routine's memory modes are decided, a routine of at least
//! [`CHUNKED_FROM`] top-level statements is cut into chunks for the passes that follow (fusion,
//! local accumulators, loop order, merging, simplification, hoisting, shared subexpressions),
//! and chunks that are the same but for their names (nodes, loop variables, locals) are
//! transformed once: the first one's result, renamed, stands for the others. Those passes then
//! take time with the distinct chunks rather than with the layers.
//!
//! - Where to cut is read from the statements themselves, so that every copy of a repeated run
//!   of statements is cut alike wherever it lies (as content-defined chunking cuts files): a
//!   boundary goes where the fewest nodes of short life cross it, ties to the least hash of the
//!   last few statements' forms (all of them but their names), the least around it.
//! - Every node keeps the mode the whole routine decided. A chunk reading a virtual node that an
//!   earlier chunk writes starts with copies of the statements writing it (and of those writing
//!   the virtual nodes they read): inlining them into the chunk's readers computes what
//!   inlining the originals would, as nothing between writes what they read (the memory modes
//!   checked that over the whole routine). So the chunks together compute what the whole
//!   routine does, with the same nodes in memory; what is given up is merging loops across a
//!   boundary.
//! - Two chunks are the same when their statements, their names numbered in the order the
//!   statements first use them, and their nodes (precision, dims, margins, mode; labels aside)
//!   are equal.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{Fresh, for_each_name, stmt_accesses};
use crate::canonical::{Alike, OwnKey, OwnNames, form, in_routine};
use crate::in_parallel;
use crate::loops::{LocalId, Stmt};
use crate::node::{MemoryMode, NodeId};
use crate::routine::Routine;

/// Routines of fewer top-level statements are transformed whole.
pub const CHUNKED_FROM: usize = 512;
/// How far either side a boundary's hash is the least: about one boundary in this many
/// statements.
const SPAN: usize = 32;
/// How far apart (in top-level statements) a node's first and last mention may lie for a
/// boundary between them to count against it.
const SHORT_LIFE: usize = 64;
/// How many statements' forms make the hash a boundary is chosen by.
const WINDOW: usize = 3;
/// The fewest statements of a chunk (but the last): fewer boundaries, less given up at them.
const SHORTEST_CHUNK: usize = 8;
/// The most statements of a chunk, so that a routine without repeats is still cut.
const LONGEST_CHUNK: usize = 1024;

/// `routine`, its memory modes decided, transformed chunk by chunk by `transform` (passes after
/// the memory modes), each distinct chunk once; a boundary falls between two top-level
/// statements only where `may_cut` allows it. The chunks' keys, the distinct chunks'
/// transforms and the renaming of their results are spread over the cores
/// ([`in_parallel`]): what comes out, and the first error, are those of one chunk after the
/// other.
pub(super) fn transform_in_chunks<E: Send>(
    mut routine: Cow<'_, Routine>,
    may_cut: impl Fn(&Stmt, &Stmt) -> bool,
    transform: impl Fn(Routine) -> Result<Routine, E> + Sync,
) -> Result<Routine, E> {
    let accesses: Vec<Accesses> = routine.body.iter().map(Accesses::of).collect();
    let ranges = chunks(&routine.body, &accesses, &may_cut);
    let is_virtual = |node: NodeId| {
        routine.nodes.get(&node).and_then(|n| n.memory_mode) == Some(MemoryMode::Virtual)
    };
    // The top-level statements writing each virtual node: a chunk reading one that an earlier
    // chunk writes starts with copies of them.
    let mut producers: FxHashMap<NodeId, Vec<usize>> = FxHashMap::default();
    for (at, access) in accesses.iter().enumerate() {
        for &node in &access.writes {
            if is_virtual(node) {
                producers.entry(node).or_default().push(at);
            }
        }
    }
    let mut copies = Vec::with_capacity(ranges.len());
    for range in &ranges {
        let Some(copied) = producers_to_copy(&accesses, range, &producers, &is_virtual) else {
            return transform(routine.into_owned());
        };
        copies.push(copied);
    }
    let body = &routine.body;
    let stmts_of = |chunk: usize| {
        (copies[chunk].iter().map(|&at| &body[at])).chain(&body[ranges[chunk].clone()])
    };
    let threads = in_parallel::threads();
    let numbers: Vec<usize> = (0..ranges.len()).collect();
    // Each chunk's first alike chunk: the one transformed for it.
    let Alike {
        nodes,
        first: standing_for,
    } = Alike::of(&numbers, &routine.nodes, threads, |&chunk| {
        Some(OwnKey::of(stmts_of(chunk)))
    });
    // The routine's node behind each of a chunk's own numbers.
    let own_nodes: Vec<Vec<NodeId>> = nodes
        .into_iter()
        .map(|nodes| nodes.expect("every chunk has its own names"))
        .collect();
    let distinct: Vec<usize> = (0..numbers.len())
        .filter(|&at| standing_for[at] == at)
        .collect();
    let transformed = in_parallel::map_in_order(&distinct, threads, |&at| {
        let own = OwnNames::of(stmts_of(at).cloned().collect());
        debug_assert_eq!(own.nodes, own_nodes[at], "one numbering of the nodes");
        // The chunk as a routine of its own, over its nodes in its own numbers.
        let chunk = Routine {
            name: routine.name.clone(),
            nodes: (own.nodes.iter().enumerate())
                .map(|(number, node)| {
                    let mut node = routine.nodes[node].clone();
                    node.id = NodeId(number as u32);
                    (node.id, node)
                })
                .collect(),
            statics: routine.statics.clone(),
            body: own.stmts,
        };
        transform(chunk).map(|result| {
            let fresh = Fresh::new(&result.body);
            Optimized {
                fresh: (fresh.next_var, fresh.next_local),
                result,
            }
        })
    });
    // A routine of its own is done with: its statements are freed before the renamed ones are
    // made.
    if let Cow::Owned(owned) = &mut routine {
        owned.body = Vec::new();
    }
    let mut optimized: HashMap<usize, Optimized> = HashMap::with_capacity(distinct.len());
    for (at, done) in distinct.into_iter().zip(transformed) {
        optimized.insert(at, done?);
    }
    // Each chunk's loop variables and locals numbered on from those of the chunks before.
    let mut bases = Vec::with_capacity(own_nodes.len());
    let (mut next_var, mut next_local) = (0u32, 0u32);
    for &first in &standing_for {
        bases.push((next_var, next_local));
        let (vars, locals) = optimized[&first].fresh;
        next_var = next_var.saturating_add(vars);
        next_local = next_local.saturating_add(locals);
    }
    let renamed = in_parallel::map_in_order(&numbers, threads, |&at| {
        let (var_base, local_base) = bases[at];
        let done = &optimized[&standing_for[at]];
        in_routine(&done.result.body, &own_nodes[at], var_base, local_base)
    });
    let body = renamed.into_iter().flatten().collect();
    Ok(match routine {
        Cow::Owned(owned) => Routine { body, ..owned },
        Cow::Borrowed(routine) => Routine {
            name: routine.name.clone(),
            nodes: routine.nodes.clone(),
            statics: routine.statics.clone(),
            body,
        },
    })
}

/// The statements (by position, in order) that a chunk over `range` starts with: those writing
/// the virtual nodes it reads that earlier chunks write, and theirs in turn. `None` where that
/// cannot be done alike for every chunk: a node both written before the chunk and in it, or a
/// statement to copy that writes a node kept in memory.
fn producers_to_copy(
    accesses: &[Accesses],
    range: &Range<usize>,
    producers: &FxHashMap<NodeId, Vec<usize>>,
    is_virtual: &impl Fn(NodeId) -> bool,
) -> Option<Vec<usize>> {
    let mut wanted: Vec<NodeId> = accesses[range.clone()]
        .iter()
        .flat_map(|access| &access.reads)
        .copied()
        .filter(|&node| {
            is_virtual(node) && producers.get(&node).is_some_and(|p| p[0] < range.start)
        })
        .collect();
    let mut copied: Vec<usize> = Vec::new();
    let mut seen: FxHashSet<NodeId> = FxHashSet::default();
    while let Some(node) = wanted.pop() {
        if !seen.insert(node) {
            continue;
        }
        for &at in &producers[&node] {
            if at >= range.start {
                return None;
            }
            if copied.contains(&at) {
                continue;
            }
            if accesses[at]
                .writes
                .iter()
                .any(|&written| !is_virtual(written))
            {
                return None;
            }
            copied.push(at);
            wanted.extend(
                accesses[at]
                    .reads
                    .iter()
                    .copied()
                    .filter(|&read| is_virtual(read)),
            );
        }
    }
    copied.sort_unstable();
    Some(copied)
}

/// The nodes a top-level statement (with everything nested in it) writes and reads, and the
/// locals it declares or uses: what cutting and copying ask of every statement, found once.
struct Accesses {
    /// Each list in increasing order, without repeats.
    writes: Vec<NodeId>,
    reads: Vec<NodeId>,
    locals: Vec<LocalId>,
}

impl Accesses {
    fn of(stmt: &Stmt) -> Accesses {
        let (writes, reads) = stmt_accesses(stmt);
        let mut locals = Vec::new();
        for_each_name(stmt, &mut |_| {}, &mut |id| locals.push(id));
        locals.sort_unstable();
        locals.dedup();
        Accesses {
            writes,
            reads,
            locals,
        }
    }
}

/// A distinct chunk: the first of its kind in its own names (the routine's nodes keep their
/// modes while the chunks are transformed), and its transformation.
struct Optimized {
    /// The loop variables and locals the transformed statements number, from 0.
    fresh: (u32, u32),
    result: Routine,
}

/// The chunks `body` is cut into, in order, covering it. A boundary follows a statement where
/// the fewest nodes of short life cross (written or read before it and again after it, within
/// [`SHORT_LIFE`] statements: what the whole routine could keep out of memory), ties going to
/// the least window hash, the least within [`SPAN`] statements either side (ties again
/// included, so that a run repeating with a short period offers a boundary in each period);
/// once the chunk has [`SHORTEST_CHUNK`] statements. Never between a local's declaration and
/// its uses (each chunk names its own locals), nor where `may_cut` refuses.
fn chunks(
    body: &[Stmt],
    accesses: &[Accesses],
    may_cut: &impl Fn(&Stmt, &Stmt) -> bool,
) -> Vec<Range<usize>> {
    let forms: Vec<u64> = body.iter().map(form).collect();
    let mut span_of: FxHashMap<NodeId, (usize, usize)> = FxHashMap::default();
    let mut local_span: FxHashMap<LocalId, (usize, usize)> = FxHashMap::default();
    for (at, access) in accesses.iter().enumerate() {
        for &node in access.writes.iter().chain(&access.reads) {
            span_of.entry(node).or_insert((at, at)).1 = at;
        }
        for &id in &access.locals {
            local_span.entry(id).or_insert((at, at)).1 = at;
        }
    }
    // Whether a boundary may follow each statement: +1 where a local's span starts, -1 where it
    // ends, and the caller's say.
    let mut local_change = vec![0i64; body.len() + 1];
    for &(first, last) in local_span.values() {
        local_change[first] += 1;
        local_change[last] -= 1;
    }
    let mut locals_open = 0i64;
    let cuttable: Vec<bool> = (0..body.len())
        .map(|at| {
            locals_open += local_change[at];
            locals_open == 0 && body.get(at + 1).is_none_or(|next| may_cut(&body[at], next))
        })
        .collect();
    // Crossing after each statement: +1 where a short life starts, -1 where it ends.
    let mut change = vec![0i64; body.len() + 1];
    for &(first, last) in span_of.values() {
        if last > first && last - first <= SHORT_LIFE {
            change[first] += 1;
            change[last] -= 1;
        }
    }
    let mut crossing = 0i64;
    let keys: Vec<(i64, u64)> = (0..body.len())
        .map(|at| {
            crossing += change[at];
            let mut window = DefaultHasher::new();
            forms[(at + 1).saturating_sub(WINDOW)..=at].hash(&mut window);
            (crossing, window.finish())
        })
        .collect();
    let least = |at: usize| {
        let around = at.saturating_sub(SPAN)..(at + SPAN + 1).min(keys.len());
        keys[around].iter().all(|key| *key >= keys[at])
    };
    let mut chunks = Vec::new();
    let mut start = 0;
    for (at, &may) in cuttable.iter().enumerate() {
        let len = at + 1 - start;
        if may && ((len >= SHORTEST_CHUNK && least(at)) || len >= LONGEST_CHUNK) {
            chunks.push(start..at + 1);
            start = at + 1;
        }
    }
    if start < body.len() {
        chunks.push(start..body.len());
    }
    chunks
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{OptimizeError, decided};
    use super::*;
    use crate::loops::{Index, LoopVar, Scalar};
    use crate::node::TensorNode;
    use crate::ops::{Binop, Unop};
    use crate::precision::Precision;

    /// The chunks `body` is cut into.
    fn cut(body: &[Stmt]) -> Vec<Range<usize>> {
        let accesses: Vec<Accesses> = body.iter().map(Accesses::of).collect();
        chunks(body, &accesses, &|_: &Stmt, _: &Stmt| true)
    }

    /// How many routines `counted` has transformed.
    static OPTIMIZED: AtomicUsize = AtomicUsize::new(0);

    fn counted(routine: Routine) -> Result<Routine, OptimizeError> {
        OPTIMIZED.fetch_add(1, Ordering::Relaxed);
        super::super::transformed(routine)
    }

    /// `layers` residual layers `y := tanh(x * w) + x` over 4×4 cells, each layer's input the
    /// previous one's output: two top-level nests a layer, the same but for their names.
    fn layers(layers: u32) -> Routine {
        let mut nodes = BTreeMap::new();
        let mut node = |id: u32| {
            nodes.insert(
                NodeId(id),
                TensorNode::new(id, &format!("n{id}"), Precision::F32, &[4, 4]),
            );
            NodeId(id)
        };
        let mut next_var = 0;
        let mut nest = |value: &dyn Fn(Vec<Index>) -> Scalar, target: NodeId| {
            let (a, b) = (LoopVar(next_var), LoopVar(next_var + 1));
            next_var += 2;
            let index = vec![Index::var(a, 0), Index::var(b, 0)];
            Stmt::For {
                var: a,
                range: 4,
                body: vec![Stmt::For {
                    var: b,
                    range: 4,
                    body: vec![Stmt::Set {
                        node: target,
                        index: index.clone(),
                        value: value(index),
                    }],
                }],
            }
        };
        let mut body = Vec::new();
        let mut x = node(0);
        for layer in 0..layers {
            let (w, h, y) = (
                node(3 * layer + 1),
                node(3 * layer + 2),
                node(3 * layer + 3),
            );
            body.push(nest(
                &|i| {
                    Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Get(x, i.clone())),
                        Box::new(Scalar::Get(w, i)),
                    )
                },
                h,
            ));
            body.push(nest(
                &|i| {
                    Scalar::Binop(
                        Binop::Add,
                        Box::new(Scalar::Unop(
                            Unop::Tanh,
                            Box::new(Scalar::Get(h, i.clone())),
                        )),
                        Box::new(Scalar::Get(x, i)),
                    )
                },
                y,
            ));
            x = y;
        }
        Routine {
            name: "layers".to_owned(),
            nodes,
            statics: BTreeMap::new(),
            body,
        }
    }

    #[test]
    fn repeated_layers_are_transformed_once_each_kind_of_chunk() {
        let routine = layers(400);
        let chunk_count = cut(&routine.body).len();
        assert!(chunk_count >= 20, "{chunk_count} chunks");
        let decided = decided(routine).unwrap();
        // A routine lent is transformed as one given.
        let lent = transform_in_chunks(Cow::Borrowed(&decided), |_, _| true, counted).unwrap();
        OPTIMIZED.store(0, Ordering::Relaxed);
        let optimized = transform_in_chunks(Cow::Owned(decided), |_, _| true, counted).unwrap();
        assert_eq!(lent, optimized);
        let distinct = OPTIMIZED.load(Ordering::Relaxed);
        assert!(
            distinct * 4 <= chunk_count,
            "{distinct} of {chunk_count} chunks transformed"
        );
        // Each layer's intermediate lives on in its chunk's nest (virtual), and its output,
        // which the next layer reads, keeps a buffer.
        assert_eq!(
            optimized.nodes[&NodeId(2)].memory_mode,
            Some(MemoryMode::Virtual)
        );
        assert_eq!(
            optimized.nodes[&NodeId(3 * 400)].memory_mode,
            Some(MemoryMode::Materialized)
        );
        // Every loop variable and local is bound once in the routine, as one chunk after
        // another renamed them.
        let mut vars = HashSet::new();
        let mut locals = HashSet::new();
        for stmt in &optimized.body {
            stmt.walk(&mut |s| match s {
                Stmt::For { var, .. } => assert!(vars.insert(*var), "{var} bound twice"),
                Stmt::Local { id, .. } => assert!(locals.insert(*id), "{id} declared twice"),
                _ => {}
            });
        }
        assert!(!vars.is_empty());
    }

    #[test]
    fn copies_of_a_run_of_statements_are_cut_alike() {
        let routine = layers(400);
        let (body, mut seen) = (&routine.body, HashSet::new());
        let mut kinds = 0;
        for range in cut(body) {
            let own = OwnNames::of(body[range].to_vec());
            if seen.insert(format!("{:?}", own.stmts)) {
                kinds += 1;
            }
        }
        // A few kinds at the start, before the boundaries fall into step, then one or two.
        assert!(kinds <= 6, "{kinds} kinds of chunk");
    }
}
