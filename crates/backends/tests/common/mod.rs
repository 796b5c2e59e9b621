//! Builders shared by the backend tests: hand-built projections, nodes and assignments, and
//! running them on both backends.

#![allow(dead_code)] // each test file uses its own subset

use std::collections::HashMap;

use rcannl_backends::cc::Compiler;
use rcannl_backends::interpreter::{Buffers, run, run_routine};
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, MemoryMode, NodeId, Precision, Projections, Rhs, Routine,
    Symbol, TensorNode, Unop, lower,
};

/// The C compiler, with the tests' kernel cache.
pub fn cached_compiler() -> Compiler {
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

pub fn it(n: u32) -> AxisIndex {
    AxisIndex::Iterator(Symbol(n))
}

pub fn affine(terms: &[(i64, u32)], offset: i64) -> AxisIndex {
    AxisIndex::affine(terms.iter().map(|&(c, s)| (c, Symbol(s))), offset)
}

/// The projections of a fan-out of `words` words into `cells` cells, `length` values a word: a
/// loop over the words, each writing from cell `length·w` on.
pub fn fan_out(words: usize, cells: usize, length: i64) -> Projections {
    projections(
        &[words],
        (&[cells], vec![affine(&[(length, 0)], 0)]),
        vec![(&[words], vec![it(0)])],
    )
}

pub fn projections(
    product: &[usize],
    lhs: (&[usize], Vec<AxisIndex>),
    rhs: Vec<(&[usize], Vec<AxisIndex>)>,
) -> Projections {
    Projections {
        product_space: product
            .iter()
            .enumerate()
            .map(|(i, &range)| Factor::single(Symbol(i as u32), range))
            .collect(),
        lhs_padding: vec![(0, 0); lhs.0.len()],
        rhs_padding: rhs
            .iter()
            .map(|(dims, _)| vec![(0, 0); dims.len()])
            .collect(),
        lhs_dims: lhs.0.to_vec(),
        lhs_index: lhs.1,
        rhs_dims: rhs.iter().map(|(dims, _)| dims.to_vec()).collect(),
        rhs_index: rhs.into_iter().map(|(_, index)| index).collect(),
        label: "hand-built".to_owned(),
    }
}

/// Lowers `assignment` over `nodes`, fills the inputs, runs it on the interpreter, and returns
/// the LHS values. The same routine, optimized, also runs on the C backend, which must agree
/// (to rounding: a matrix product adds its terms in another order).
pub fn execute(
    assignment: &Assignment,
    nodes: Vec<TensorNode>,
    inputs: &[(u32, Vec<f64>)],
    output: u32,
) -> Vec<f64> {
    let table: HashMap<NodeId, TensorNode> = nodes.iter().map(|n| (n.id, n.clone())).collect();
    let stmts = lower(assignment, &table).unwrap();
    let mut buffers = Buffers::new(nodes.clone()).unwrap();
    for (node, values) in inputs {
        buffers.set_values(NodeId(*node), values).unwrap();
    }
    run(&stmts, &mut buffers).unwrap();
    let expected = buffers.values(NodeId(output));

    let mut routine = Routine::lower("differential", assignment, nodes).unwrap();
    routine.nodes.get_mut(&NodeId(output)).unwrap().memory_mode = Some(MemoryMode::Materialized);
    let optimized = optimize(&routine).unwrap();
    let compiled = cached_compiler().compile(&optimized).unwrap();
    let mut native = Buffers::for_routine(&optimized).unwrap();
    for (node, values) in inputs {
        native.set_values(NodeId(*node), values).unwrap();
    }
    compiled.run(&mut native, &HashMap::new()).unwrap();
    let precision = table[&NodeId(output)].precision;
    let tolerance = match precision {
        Precision::F16 | Precision::Bf16 => 1e-2,
        Precision::F32 => 1e-5,
        _ => 1e-12,
    };
    for (cell, (want, got)) in expected
        .iter()
        .zip(native.values(NodeId(output)))
        .enumerate()
    {
        let agree = want == &got
            || (want.is_nan() && got.is_nan())
            || (want - got).abs() <= tolerance * want.abs().max(1.0);
        assert!(
            agree,
            "cell {cell}: interpreter {want}, C {got}\n{optimized}"
        );
    }
    expected
}

/// `lhs ⟨accum⟩ op(source)` (an `=:` form when `initialize_neutral`).
pub fn unary(
    initialize_neutral: bool,
    accum: Binop,
    lhs: u32,
    op: Unop,
    source: u32,
    projections: Projections,
) -> Assignment {
    Assignment::Accum {
        initialize_neutral,
        accum,
        lhs: NodeId(lhs),
        rhs: Rhs::Unop(op, NodeId(source)),
        projections,
    }
}

pub fn node(id: u32, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, &format!("t{id}"), Precision::F64, dims)
}

pub fn range(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

pub fn cat(symbols: &[u32]) -> AxisIndex {
    AxisIndex::Concat(symbols.iter().map(|&s| Symbol(s)).collect())
}

/// A record over explicit factors (coupled where a factor has several components).
pub fn coupled(
    factors: Vec<Vec<(u32, usize)>>,
    lhs: (&[usize], Vec<AxisIndex>),
    rhs: Vec<(&[usize], Vec<AxisIndex>)>,
) -> Projections {
    let mut p = projections(&[], lhs, rhs);
    p.product_space = factors
        .into_iter()
        .map(|components| Factor::coupled(components.into_iter().map(|(s, r)| (Symbol(s), r))))
        .collect();
    p
}

/// `lhs ⟨accum⟩ a op b` (an `=:` form when `initialize_neutral`).
pub fn binary(
    initialize_neutral: bool,
    accum: Binop,
    lhs: u32,
    op: Binop,
    (a, b): (u32, u32),
    projections: Projections,
) -> Assignment {
    Assignment::Accum {
        initialize_neutral,
        accum,
        lhs: NodeId(lhs),
        rhs: Rhs::Binop(op, NodeId(a), NodeId(b)),
        projections,
    }
}

/// The record of a pointwise operation over `dims`: the result and each of `operands` tensors
/// of the same dims read at the same point.
pub fn pointwise(dims: &[usize], operands: usize) -> Projections {
    let at = || (0..dims.len() as u32).map(it).collect::<Vec<_>>();
    projections(
        dims,
        (dims, at()),
        (0..operands).map(|_| (dims, at())).collect(),
    )
}

/// Runs `routine` (no static indices) over buffers for its nodes with `inputs` set.
pub fn run_routine_on(routine: &Routine, inputs: &[(u32, Vec<f64>)]) -> Buffers {
    let mut buffers = Buffers::for_routine(routine).unwrap();
    for (node, values) in inputs {
        buffers.set_values(NodeId(*node), values).unwrap();
    }
    run_routine(routine, &mut buffers, &HashMap::new()).unwrap();
    buffers
}

/// A fresh folder under the temporary folder, with mode `0700` (private, as a cache folder must
/// be), removed when dropped.
pub struct Folder(std::path::PathBuf);

impl Folder {
    pub fn new(name: &str) -> Folder {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("rcannl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        Folder(path)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
