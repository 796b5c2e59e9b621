//! Lowering gathers and their gradients: the one-hot product's projections without the loop
//! over the vocabulary, the scatter's loops over the written cells outermost, the errors of
//! records without one vocabulary axis, and memory modes (a looked-up node is never virtual).

use rcannl_ir::optimize::memory::decide_memory_modes;
use rcannl_ir::{
    Assignment, AxisIndex, Factor, Index, Lookup, LoopVar, LowerErrorKind, MemoryMode, NodeId,
    OptimizeErrorKind, Precision, Projections, Routine, Scalar, Stmt, Symbol, TensorNode,
};

const P: Symbol = Symbol(0);
const W: Symbol = Symbol(1);
const V: Symbol = Symbol(2);

fn it(symbol: Symbol) -> AxisIndex {
    AxisIndex::Iterator(symbol)
}

/// `out[p, w] = Σ_v table[w, v]·[ids[p] = v]` over p = 5, w = 3, v = 4: read maps table, ids.
fn one_hot_product() -> Projections {
    Projections {
        product_space: vec![
            Factor::single(P, 5),
            Factor::single(W, 3),
            Factor::single(V, 4),
        ],
        lhs_dims: vec![5, 3],
        rhs_dims: vec![vec![3, 4], vec![5]],
        lhs_index: vec![it(P), it(W)],
        rhs_index: vec![vec![it(W), it(V)], vec![it(P)]],
        lhs_padding: vec![(0, 0); 2],
        rhs_padding: vec![vec![(0, 0); 2], vec![(0, 0)]],
        label: "gather".to_owned(),
    }
}

fn nodes() -> Vec<TensorNode> {
    vec![
        TensorNode::new(0, "table", Precision::F32, &[3, 4]),
        TensorNode::new(1, "ids", Precision::F32, &[5]),
        TensorNode::new(2, "out", Precision::F32, &[5, 3]),
        TensorNode::new(3, "grad table", Precision::F32, &[3, 4]),
        TensorNode::new(4, "grad out", Precision::F32, &[5, 3]),
    ]
}

fn gather(projections: Projections) -> Assignment {
    Assignment::Gather {
        initialize_neutral: true,
        lhs: NodeId(2),
        table: NodeId(0),
        ids: NodeId(1),
        projections,
    }
}

/// Every loop's range, outermost first along the first statement's chain of loops.
fn loop_ranges(stmt: &Stmt) -> Vec<usize> {
    let mut ranges = Vec::new();
    let mut at = stmt;
    while let Stmt::For { range, body, .. } = at {
        ranges.push(*range);
        at = &body[0];
    }
    ranges
}

#[test]
fn a_gather_reads_the_table_at_the_id_without_a_loop_over_the_vocabulary() {
    let routine = Routine::lower("forward", &gather(one_hot_product()), nodes()).unwrap();
    // Every cell written once: a plain store, no fill.
    let [nest] = &routine.body[..] else {
        panic!("one nest:\n{routine}");
    };
    assert_eq!(loop_ranges(nest), vec![5, 3]);
    let expected = Stmt::For {
        var: LoopVar(0),
        range: 5,
        body: vec![Stmt::For {
            var: LoopVar(1),
            range: 3,
            body: vec![Stmt::Set {
                node: NodeId(2),
                index: vec![Index::var(LoopVar(0), 0), Index::var(LoopVar(1), 0)],
                value: Scalar::Lookup(Box::new(Lookup {
                    node: NodeId(0),
                    index: vec![Index::var(LoopVar(1), 0), Index::constant(0)],
                    axis: 1,
                    size: 4,
                    id: Scalar::Get(NodeId(1), vec![Index::var(LoopVar(0), 0)]),
                })),
            }],
        }],
    };
    assert_eq!(*nest, expected, "{routine}");
}

#[test]
fn a_scatter_runs_the_written_cells_outermost_and_the_positions_inside() {
    let scatter = Assignment::ScatterAdd {
        target: NodeId(3),
        source: NodeId(4),
        ids: NodeId(1),
        projections: one_hot_product(),
    };
    let routine = Routine::lower("backprop", &scatter, nodes()).unwrap();
    let [nest] = &routine.body[..] else {
        panic!("one nest:\n{routine}");
    };
    assert_eq!(loop_ranges(nest), vec![3, 5], "{routine}");
    let mut scatters = Vec::new();
    nest.walk(&mut |s| {
        if let Stmt::ScatterAdd { target, value } = s {
            scatters.push((target.clone(), value.clone()));
        }
    });
    let [(target, value)] = &scatters[..] else {
        panic!("one scatter:\n{routine}");
    };
    assert_eq!((target.node, target.axis, target.size), (NodeId(3), 1, 4));
    // The outer loop (the width) indexes the written cell; the inner one (the positions) the id.
    assert_eq!(
        target.index,
        vec![Index::var(LoopVar(0), 0), Index::constant(0)]
    );
    assert_eq!(
        target.id,
        Scalar::Get(NodeId(1), vec![Index::var(LoopVar(1), 0)])
    );
    assert_eq!(
        *value,
        Scalar::Get(
            NodeId(4),
            vec![Index::var(LoopVar(1), 0), Index::var(LoopVar(0), 0)]
        )
    );
}

#[test]
fn a_record_without_exactly_one_vocabulary_axis_is_refused() {
    // The table's second axis is read by the ids too: nothing left for the ids to select.
    let mut no_vocabulary = one_hot_product();
    no_vocabulary.product_space.pop();
    no_vocabulary.rhs_index[0][1] = it(P);
    no_vocabulary.rhs_dims[0] = vec![3, 5];
    let nodes_without = nodes().into_iter().map(|mut n| {
        if n.id == NodeId(0) {
            n.dims = vec![3, 5];
        }
        n
    });
    let error = Routine::lower("forward", &gather(no_vocabulary), nodes_without).unwrap_err();
    assert_eq!(error.kind, LowerErrorKind::Inconsistent);
    assert!(
        error.message.contains("gather (gather)") && error.message.contains("0 axes"),
        "{}",
        error.message
    );
}

#[test]
fn a_looked_up_node_is_never_virtual() {
    // table := 2 (a cheap producer, virtual were it read at an index), then the gather.
    let fill = Stmt::For {
        var: LoopVar(10),
        range: 3,
        body: vec![Stmt::For {
            var: LoopVar(11),
            range: 4,
            body: vec![Stmt::Set {
                node: NodeId(0),
                index: vec![Index::var(LoopVar(10), 0), Index::var(LoopVar(11), 0)],
                value: Scalar::Const(2.0),
            }],
        }],
    };
    let mut routine = Routine::lower("forward", &gather(one_hot_product()), nodes()).unwrap();
    routine.body.insert(0, fill);
    let decided = decide_memory_modes(&routine).unwrap();
    assert_ne!(
        decided.nodes[&NodeId(0)].memory_mode,
        Some(MemoryMode::Virtual)
    );
    // Forced virtual, it is an error naming the node and why.
    routine.nodes.get_mut(&NodeId(0)).unwrap().memory_mode = Some(MemoryMode::Virtual);
    let error = decide_memory_modes(&routine).unwrap_err();
    assert_eq!(error.kind, OptimizeErrorKind::NotInlinable);
    assert!(
        error.message.contains("'table'") && error.message.contains("positions held in data"),
        "{}",
        error.message
    );
}
