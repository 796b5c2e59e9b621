//! Fetches (constants, offsets, identities, dims, slices at a static index), the vectorized
//! fan-out of random bits, margins reset to the consumer's neutral element, and computation in
//! every precision, lowered and run by the interpreter against values computed here.

use std::collections::HashMap;

use crate::common::*;
use rcannl_backends::interpreter::{Buffers, run, run_routine};
use rcannl_ir::routine::UNRANGED_STATIC;
use rcannl_ir::value::uniform;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, FetchOp, Index, LoopVar, NodeId, Precision, Rhs, Routine, Scalar,
    Stmt, Symbol, TensorNode, Unop, Value, Var, VecUnop, threefry4x32,
};

fn typed(id: u32, precision: Precision, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, &format!("t{id}"), precision, dims)
}

fn fetch(node: u32, op: FetchOp) -> Assignment {
    Assignment::Fetch {
        node: NodeId(node),
        op,
    }
}

/// Lowers `assignment` into a routine over `nodes` and runs it with `statics` on the
/// interpreter; the C backend, run on the same routine, must leave the same cells everywhere.
fn run_all(
    assignment: &Assignment,
    nodes: Vec<TensorNode>,
    statics: &[(u32, i64)],
) -> (Routine, Buffers) {
    let routine = Routine::lower("test", assignment, nodes).unwrap();
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    let statics: HashMap<Symbol, i64> = statics.iter().map(|&(s, v)| (Symbol(s), v)).collect();
    run_routine(&routine, &mut buffers, &statics).unwrap();
    let compiled = cached_compiler().compile(&routine).unwrap();
    let mut native = Buffers::for_routine(&routine).unwrap();
    compiled.run(&mut native, &statics).unwrap();
    for id in routine.nodes.keys() {
        assert_eq!(
            buffers.cells(*id),
            native.cells(*id),
            "{id}\n{}",
            compiled.source
        );
    }
    (routine, buffers)
}

#[test]
fn range_over_offsets_numbers_every_cell() {
    // Margins do not count: the interior cells hold 0..12, row-major.
    let mut target = typed(0, Precision::F32, &[3, 4]);
    target.padding = vec![(1, 0), (0, 2)];
    let (routine, buffers) = run_all(&fetch(0, FetchOp::RangeOverOffsets), vec![target], &[]);
    assert_eq!(buffers.values(NodeId(0)), range(12));
    assert_eq!(
        routine.to_string(),
        "routine test():\n  n0 't0': f32 [3, 4] margins [1+0, 0+2]\n\
         for l0 in 0..3 {\n  for l1 in 0..4 {\n    n0[l0+1, l1] := #(4*l0+l1)\n  }\n}\n"
    );
    // A size-one axis gets no loop.
    let (_, buffers) = run_all(
        &fetch(0, FetchOp::RangeOverOffsets),
        vec![typed(0, Precision::I32, &[1, 3])],
        &[],
    );
    assert_eq!(buffers.values(NodeId(0)), vec![0.0, 1.0, 2.0]);
}

#[test]
fn constant_fetches() {
    let nodes = vec![
        typed(0, Precision::F64, &[2, 2]),
        typed(1, Precision::F64, &[2, 2]),
        typed(2, Precision::I32, &[3]),
        typed(5, Precision::Uint4x32, &[2]),
        typed(6, Precision::F32, &[2]),
    ];
    let program = Assignment::Seq(vec![
        fetch(0, FetchOp::Constant(2.5)),
        fetch(1, FetchOp::ConstantFill(vec![1.0, 2.0, 3.0, 4.0])),
        fetch(2, FetchOp::EmbedDim(7)),
        fetch(5, FetchOp::EmbedSelfId),
        fetch(6, FetchOp::FromHost),
    ]);
    let routine = Routine::lower("consts", &program, nodes).unwrap();
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    buffers.set_values(NodeId(6), &[-1.0, 8.0]).unwrap();
    run_routine(&routine, &mut buffers, &HashMap::new()).unwrap();
    assert_eq!(buffers.values(NodeId(0)), vec![2.5; 4]);
    assert_eq!(buffers.values(NodeId(1)), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(buffers.values(NodeId(2)), vec![7.0; 3]);
    assert_eq!(buffers.cells(NodeId(5)), vec![Value::Word([5, 0, 0, 0]); 2]);
    // Host data is the host's: no code touches it.
    assert_eq!(buffers.values(NodeId(6)), vec![-1.0, 8.0]);
    assert_eq!(
        program.to_string(),
        "n0 =: 2.5\nn1 =: [1, 2, 3, 4]\nn2 =: dim 7\nn5 =: self_id\nn6 =: host data"
    );
    // The constant fill is unrolled, one store per cell.
    assert!(routine.to_string().contains("n1[1, 0] := 3\n"));

    let error = Routine::lower(
        "wrong",
        &fetch(0, FetchOp::ConstantFill(vec![1.0; 3])),
        vec![typed(0, Precision::F64, &[2, 2])],
    )
    .unwrap_err();
    assert!(
        error.message.contains("has 4 cells, 3 values given"),
        "{error}"
    );
}

/// The random-bits pipeline: key = the key node's id, counters = offsets, bits =
/// threefry(key, counter) per cell, then each word fanned out into values of `precision`.
fn random_values(precision: Precision, cells: usize) -> (Vec<Value>, Vec<Value>) {
    let length = 16 / precision.size_in_bytes();
    let words = cells.div_ceil(length);
    let nodes = vec![
        typed(0, Precision::Uint4x32, &[1]),
        typed(1, Precision::U32, &[words]),
        typed(2, Precision::Uint4x32, &[words]),
        typed(3, precision, &[cells]),
    ];
    let bits = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Arg2,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Threefry4x32, NodeId(0), NodeId(1)),
        projections: projections(
            &[words],
            (&[words], vec![it(0)]),
            vec![(&[1], vec![AxisIndex::Fixed(0)]), (&[words], vec![it(0)])],
        ),
    };
    let program = Assignment::Seq(vec![
        fetch(0, FetchOp::EmbedSelfId),
        fetch(1, FetchOp::RangeOverOffsets),
        bits,
        Assignment::SetVecUnop {
            op: VecUnop::Uint4x32ToPrecUniform,
            lhs: NodeId(3),
            rhs: NodeId(2),
            projections: fan_out(words, cells, length as i64),
        },
    ]);
    let (_, buffers) = run_all(&program, nodes, &[]);
    let expected: Vec<Value> = (0..words as u32)
        .flat_map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            uniform(threefry4x32([0, 0, 0, 0], counter), precision)
        })
        .take(cells)
        .collect();
    (buffers.cells(NodeId(3)), expected)
}

#[test]
fn vectorized_fan_out_of_random_bits() {
    for (precision, cells) in [
        (Precision::F32, 12),
        (Precision::F64, 6),
        (Precision::F16, 5),
        (Precision::Bf16, 16),
        (Precision::U8, 40),
        (Precision::I64, 3),
        (Precision::Uint4x32, 2),
    ] {
        let (got, expected) = random_values(precision, cells);
        assert_eq!(got, expected, "{precision}");
    }
    let (floats, _) = random_values(Precision::F32, 400);
    let xs: Vec<f64> = floats.iter().map(|v| v.as_f64()).collect();
    assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");

    // The written node must take exactly the cells the words make.
    let error = Routine::lower(
        "short",
        &Assignment::SetVecUnop {
            op: VecUnop::Uint4x32ToPrecUniform,
            lhs: NodeId(1),
            rhs: NodeId(0),
            projections: fan_out(3, 8, 4),
        },
        vec![
            typed(0, Precision::Uint4x32, &[3]),
            typed(1, Precision::F32, &[8]),
        ],
    )
    .unwrap_err();
    assert!(error.message.contains("has 8 cells"), "{error}");
}

#[test]
fn one_uniform_value_from_the_first_word() {
    let nodes = vec![
        typed(0, Precision::Uint4x32, &[2]),
        typed(1, Precision::F32, &[2]),
    ];
    let to_float = unary(
        true,
        Binop::Arg2,
        1,
        Unop::Uint4x32ToPrecUniform1,
        0,
        projections(&[2], (&[2], vec![it(0)]), vec![(&[2], vec![it(0)])]),
    );
    let routine = Routine::lower("uniform1", &to_float, nodes).unwrap();
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    let words = [[0x8000_0000, 1, 2, 3], [0xFFFF_FFFF, 0, 0, 0]];
    buffers
        .set_cells(NodeId(0), &words.map(Value::Word))
        .unwrap();
    run_routine(&routine, &mut buffers, &HashMap::new()).unwrap();
    assert_eq!(
        buffers.values(NodeId(1)),
        vec![0.5, f64::from(0xFF_FFFFu32) / f64::from(1u32 << 24)]
    );
}

#[test]
fn a_batch_slice_reads_at_the_static_index() {
    let source: Vec<f64> = (0..12).map(|i| f64::from(i) * 1.5).collect();
    let nodes = vec![
        typed(0, Precision::F64, &[4, 3]),
        typed(1, Precision::F64, &[3]),
        typed(2, Precision::F64, &[3]),
        typed(3, Precision::I32, &[1]),
    ];
    // n1 = n0 @| s9 (a fetch); n2 =: 2 * n0[s9, i] (the static symbol in an accumulation's
    // read map); n3 holds s9 itself.
    let program = Assignment::Seq(vec![
        fetch(
            1,
            FetchOp::Slice {
                source: NodeId(0),
                batch: Symbol(9),
            },
        ),
        Assignment::Accum {
            initialize_neutral: true,
            accum: Binop::Arg2,
            lhs: NodeId(2),
            rhs: Rhs::Binop(Binop::Add, NodeId(0), NodeId(0)),
            projections: projections(
                &[3],
                (&[3], vec![it(0)]),
                vec![(&[4, 3], vec![it(9), it(0)]), (&[4, 3], vec![it(9), it(0)])],
            ),
        },
        fetch(3, FetchOp::EmbedStatic(Symbol(9))),
    ]);
    let routine = Routine::lower("slice", &program, nodes).unwrap();
    assert_eq!(routine.statics, [(Symbol(9), 4)].into());
    assert!(routine.to_string().starts_with("routine slice(s9 < 4):\n"));
    for batch in [1i64, 3] {
        let mut buffers = Buffers::for_routine(&routine).unwrap();
        buffers.set_values(NodeId(0), &source).unwrap();
        run_routine(&routine, &mut buffers, &[(Symbol(9), batch)].into()).unwrap();
        let row = &source[batch as usize * 3..batch as usize * 3 + 3];
        assert_eq!(buffers.values(NodeId(1)), row);
        let doubled: Vec<f64> = row.iter().map(|x| 2.0 * x).collect();
        assert_eq!(buffers.values(NodeId(2)), doubled);
        assert_eq!(buffers.values(NodeId(3)), vec![batch as f64]);
    }
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    let missing = run_routine(&routine, &mut buffers, &HashMap::new()).unwrap_err();
    // Named by the node it slices, not by its symbol.
    assert!(
        missing
            .message
            .contains("no value given for the static index slicing 't0'"),
        "{missing}"
    );
    let outside = run_routine(&routine, &mut buffers, &[(Symbol(9), 4)].into()).unwrap_err();
    assert!(outside.message.contains("outside 0..4"), "{outside}");
    // A slice must drop exactly the leading axis.
    let error = Routine::lower(
        "bad",
        &fetch(
            1,
            FetchOp::Slice {
                source: NodeId(0),
                batch: Symbol(9),
            },
        ),
        vec![
            typed(0, Precision::F64, &[4, 3]),
            typed(1, Precision::F64, &[4]),
        ],
    )
    .unwrap_err();
    assert!(error.message.contains("cannot be a slice"), "{error}");
}

#[test]
fn an_embedded_static_index_no_slice_selects_with_takes_any_position() {
    let embed = fetch(0, FetchOp::EmbedStatic(Symbol(9)));
    let slice = fetch(
        2,
        FetchOp::Slice {
            source: NodeId(1),
            batch: Symbol(9),
        },
    );
    let nodes = || {
        vec![
            typed(0, Precision::I64, &[1]),
            typed(1, Precision::F64, &[3, 2]),
            typed(2, Precision::F64, &[2]),
        ]
    };
    let alone = Routine::lower("embed", &embed, nodes()).unwrap();
    assert_eq!(alone.statics, [(Symbol(9), UNRANGED_STATIC)].into());
    for value in [0i64, 5, (1 << 31) - 1] {
        let mut buffers = Buffers::for_routine(&alone).unwrap();
        run_routine(&alone, &mut buffers, &[(Symbol(9), value)].into()).unwrap();
        assert_eq!(buffers.values(NodeId(0)), [value as f64]);
    }
    let mut buffers = Buffers::for_routine(&alone).unwrap();
    let negative = run_routine(&alone, &mut buffers, &[(Symbol(9), -1)].into()).unwrap_err();
    // Named by the tensor holding its value.
    assert!(
        negative
            .message
            .contains("the static index embedded in 't0' is -1, outside 0..2147483648"),
        "{negative}"
    );
    // A slice selecting with it gives it its range, before or after the embedding.
    for program in [
        Assignment::Seq(vec![embed.clone(), slice.clone()]),
        Assignment::Seq(vec![slice.clone(), embed.clone()]),
    ] {
        let both = Routine::lower("both", &program, nodes()).unwrap();
        assert_eq!(both.statics, [(Symbol(9), 3)].into());
    }
}

#[test]
fn margins_hold_each_consumers_neutral_element() {
    // x (4 cells, one margin cell each side) is max-pooled, then summed over windows: the pool
    // must see −∞ in the margins, the sum 0.
    let x = vec![-3.0, -1.0, -4.0, -2.0];
    let mut padded = typed(0, Precision::F32, &[4]);
    padded.padding = vec![(1, 1)];
    let window = |lhs: u32, accum: Binop| {
        unary(
            true,
            accum,
            lhs,
            Unop::Identity,
            0,
            projections(
                &[4, 3],
                (&[4], vec![it(0)]),
                vec![(&[4], vec![affine(&[(1, 0), (1, 1)], -1)])],
            ),
        )
    };
    let program = Assignment::Seq(vec![window(1, Binop::Max), window(2, Binop::Add)]);
    let nodes = vec![
        padded,
        typed(1, Precision::F32, &[4]),
        typed(2, Precision::F32, &[4]),
    ];
    let routine = Routine::lower("pools", &program, nodes).unwrap();
    let shown = routine.to_string();
    assert!(shown.contains("fill margins of n0 with -inf\n"), "{shown}");
    assert!(shown.contains("fill margins of n0 with 0\n"), "{shown}");
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    buffers.set_values(NodeId(0), &x).unwrap();
    run_routine(&routine, &mut buffers, &HashMap::new()).unwrap();
    let at = |i: i64, outside: f64| {
        if (0..4).contains(&i) {
            x[i as usize]
        } else {
            outside
        }
    };
    let pooled: Vec<f64> = (0..4)
        .map(|o| {
            (-1..2)
                .map(|k| at(o + k, f64::NEG_INFINITY))
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    let summed: Vec<f64> = (0..4)
        .map(|o| (-1..2).map(|k| at(o + k, 0.0)).sum())
        .collect();
    assert_eq!(buffers.values(NodeId(1)), pooled);
    assert_eq!(pooled, vec![-1.0, -1.0, -1.0, -2.0]);
    assert_eq!(buffers.values(NodeId(2)), summed);
}

/// Runs `n2[] := value` with n0 and n1 (scalars of `precision`) holding `a` and `b`.
fn compute(precision: Precision, a: Value, b: Value, value: Scalar) -> Result<Value, String> {
    let mut buffers = Buffers::new((0..3).map(|i| typed(i, precision, &[1]))).unwrap();
    buffers.set_cells(NodeId(0), &[a]).unwrap();
    buffers.set_cells(NodeId(1), &[b]).unwrap();
    let store = Stmt::Set {
        node: NodeId(2),
        index: vec![Index::constant(0)],
        value,
    };
    run(&[store], &mut buffers).map_err(|e| e.message)?;
    Ok(buffers.cells(NodeId(2))[0])
}

fn get(node: u32) -> Box<Scalar> {
    Box::new(Scalar::Get(NodeId(node), vec![Index::constant(0)]))
}

#[test]
fn integers_compute_as_integers() {
    let (a, b) = (get(0), get(1));
    // (7 / 2) * 2 is 6 in integers (7 in floats).
    let halved_back = Scalar::Binop(
        Binop::Mul,
        Box::new(Scalar::Binop(Binop::Div, a.clone(), b.clone())),
        b.clone(),
    );
    for precision in [
        Precision::I8,
        Precision::I32,
        Precision::U32,
        Precision::I64,
    ] {
        let got = compute(precision, Value::Int(7), Value::Int(2), halved_back.clone());
        assert_eq!(got, Ok(Value::Int(6)), "{precision}");
    }
    assert_eq!(
        compute(
            Precision::F32,
            Value::Float(7.0),
            Value::Float(2.0),
            halved_back
        ),
        Ok(Value::Float(7.0))
    );
    // i64 beyond 2⁵³ stays exact.
    let big = (1i64 << 60) + 1;
    let sum = Scalar::Binop(Binop::Add, a.clone(), b.clone());
    assert_eq!(
        compute(Precision::I64, Value::Int(big), Value::Int(2), sum.clone()),
        Ok(Value::Int(big + 2))
    );
    // Narrow integers wrap on store; float inputs saturate on the way in.
    assert_eq!(
        compute(Precision::U8, Value::Int(200), Value::Int(100), sum.clone()),
        Ok(Value::Int(44))
    );
    assert_eq!(
        compute(
            Precision::U8,
            Value::Float(300.7),
            Value::Int(0),
            sum.clone()
        ),
        Ok(Value::Int(255))
    );
    assert_eq!(
        compute(Precision::I8, Value::Int(-100), Value::Int(-100), sum),
        Ok(Value::Int(56))
    );
    // Remainders take the divisor's sign; a quotient or remainder by zero is 0, as compiled code
    // computes it on every backend.
    let rem = Scalar::Binop(Binop::Mod, a.clone(), b.clone());
    assert_eq!(
        compute(Precision::I32, Value::Int(-7), Value::Int(3), rem.clone()),
        Ok(Value::Int(2))
    );
    let quotient = Scalar::Binop(Binop::Div, a.clone(), b.clone());
    for precision in [Precision::I32, Precision::U64] {
        for op in [&rem, &quotient] {
            assert_eq!(
                compute(precision, Value::Int(7), Value::Int(0), op.clone()),
                Ok(Value::Int(0))
            );
        }
    }
    // Operations without an integer meaning compute on floats and truncate.
    let root = Scalar::Unop(Unop::Sqrt, a);
    assert_eq!(
        compute(Precision::I32, Value::Int(17), Value::Int(0), root),
        Ok(Value::Int(4))
    );
}

#[test]
fn floats_round_once_on_the_store() {
    let (a, b) = (get(0), get(1));
    let fma_like = Scalar::Binop(
        Binop::Add,
        Box::new(Scalar::Binop(Binop::Mul, a.clone(), b.clone())),
        Box::new(Scalar::Const(1.0)),
    );
    // In f16, 1 + 2⁻¹¹ rounds to 1 only at the store.
    let tiny = 2f64.powi(-6);
    for (precision, expected) in [
        (Precision::F16, 1.0),
        (Precision::Bf16, 1.0),
        (Precision::F32, 1.0 + 2f64.powi(-12)),
        (Precision::F64, 1.0 + 2f64.powi(-12)),
    ] {
        let got = compute(
            precision,
            Value::Float(tiny),
            Value::Float(tiny),
            fma_like.clone(),
        );
        assert_eq!(got, Ok(Value::Float(expected)), "{precision}");
    }
    let where_ = Scalar::Ternop(
        rcannl_ir::Ternop::Where,
        Box::new(Scalar::Binop(Binop::Lt, a.clone(), b.clone())),
        a,
        b,
    );
    assert_eq!(
        compute(
            Precision::Bf16,
            Value::Float(-2.0),
            Value::Float(3.0),
            where_
        ),
        Ok(Value::Float(-2.0))
    );
}

#[test]
fn words_take_only_word_operations() {
    let word = Value::Word([1, 2, 3, 4]);
    let copy = Scalar::Binop(Binop::Arg2, get(0), get(1));
    assert_eq!(compute(Precision::Uint4x32, word, word, copy), Ok(word));
    let bits = Scalar::Binop(Binop::Threefry4x32, get(0), get(1));
    assert_eq!(
        compute(
            Precision::Uint4x32,
            Value::Word([0; 4]),
            Value::Word([0; 4]),
            bits.clone()
        ),
        Ok(Value::Word(threefry4x32([0; 4], [0; 4])))
    );
    let error = compute(Precision::F32, Value::Float(0.0), Value::Float(0.0), bits).unwrap_err();
    assert!(
        error.contains("threefry4x32 yields 128-bit words"),
        "{error}"
    );
    let sum = Scalar::Binop(Binop::Add, get(0), get(1));
    let error = compute(Precision::Uint4x32, word, word, sum).unwrap_err();
    assert!(error.contains("not defined on 128-bit words"), "{error}");
}

#[test]
fn locals_keep_their_precision() {
    // local v0: f16 := n0 + n1 (rounded to f16); n2 := v0 * 1.
    let mut buffers = Buffers::new((0..3).map(|i| typed(i, Precision::F64, &[1]))).unwrap();
    buffers.set_values(NodeId(0), &[1.0]).unwrap();
    buffers.set_values(NodeId(1), &[2f64.powi(-11)]).unwrap();
    let program = [
        Stmt::Local {
            id: rcannl_ir::LocalId(0),
            precision: Precision::F16,
            value: Scalar::Binop(Binop::Add, get(0), get(1)),
        },
        Stmt::Set {
            node: NodeId(2),
            index: vec![Index::constant(0)],
            value: Scalar::Local(rcannl_ir::LocalId(0)),
        },
    ];
    run(&program, &mut buffers).unwrap();
    assert_eq!(buffers.values(NodeId(2)), vec![1.0]);
    let undeclared = [Stmt::SetLocal {
        id: rcannl_ir::LocalId(3),
        value: Scalar::Const(0.0),
    }];
    let error = run(&undeclared, &mut buffers).unwrap_err();
    assert!(error.message.contains("v3 is read before it is declared"));
    // An index variable with no loop around it is an error.
    let loose = [Stmt::Set {
        node: NodeId(2),
        index: vec![Index {
            terms: vec![(1, Var::Loop(LoopVar(4)))].into(),
            offset: 0,
        }],
        value: Scalar::Const(0.0),
    }];
    let error = run(&loose, &mut buffers).unwrap_err();
    assert!(error.message.contains("l4 has no value here"), "{error}");
}

#[test]
fn the_light_generator_on_both_backends() {
    let bits = Scalar::Binop(Binop::Threefry4x32Light, get(0), get(1));
    let (key, counter) = ([1, 2, 3, 4], [5, 6, 7, 8]);
    assert_eq!(
        compute(
            Precision::Uint4x32,
            Value::Word(key),
            Value::Word(counter),
            bits
        ),
        Ok(Value::Word(rcannl_ir::threefry4x32_light(key, counter)))
    );
    // The same through a routine, interpreted and compiled (run_all compares the two).
    let nodes = vec![
        typed(0, Precision::Uint4x32, &[1]),
        typed(1, Precision::U32, &[6]),
        typed(2, Precision::Uint4x32, &[6]),
    ];
    let light = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Arg2,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Threefry4x32Light, NodeId(0), NodeId(1)),
        projections: projections(
            &[6],
            (&[6], vec![it(0)]),
            vec![(&[1], vec![AxisIndex::Fixed(0)]), (&[6], vec![it(0)])],
        ),
    };
    let program = Assignment::Seq(vec![
        fetch(0, FetchOp::EmbedSelfId),
        fetch(1, FetchOp::RangeOverOffsets),
        light,
    ]);
    let (_, buffers) = run_all(&program, nodes, &[]);
    let expected: Vec<Value> = (0..6u32)
        .map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            Value::Word(rcannl_ir::threefry4x32_light([0, 0, 0, 0], counter))
        })
        .collect();
    assert_eq!(buffers.cells(NodeId(2)), expected);
}
