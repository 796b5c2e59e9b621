//! Sasha Rush's Tensor Puzzles (<https://github.com/srush/Tensor-Puzzles>), as OCANNL's
//! `test/einsum/tensor_puzzles.ml` ports them, written with rcannl's einsum specs, `op!` and the
//! op library: twenty-one NumPy/PyTorch functions rebuilt from ranges, broadcasting, comparisons,
//! `where` and contractions.
//!
//! Each puzzle runs on the interpreter and the C backend (and the GPU, where there is one) and
//! its result is checked, shape and cells, against the puzzle's specification written here as
//! plain loops over the same inputs (the `*_spec` functions, after the puzzles' own). The
//! eighteen puzzles OCANNL solves use OCANNL's inputs, and their specifications must also give
//! the values OCANNL's solutions print (its `tensor_puzzles.expected`, quoted in each test).
//! The three OCANNL cannot express — compress, bincount and scatter_add, which index by values
//! held in a tensor — are one-hot rows ([`Tensor::one_hot`]) contracted with the values here.
//!
//! The inputs are small integers and halves, so every result is exact in f32 and is compared
//! exactly.

use rcannl::prelude::*;

use crate::support::backends;

/// What a puzzle's result must be: its shape as the notation writes it, and its cells in memory
/// order (batch, output, input).
struct Expected<'a> {
    shape: &'a str,
    cells: Vec<f64>,
    /// The cells OCANNL's solution prints, for the puzzles it solves.
    ocannl: Option<&'a [f64]>,
}

/// Builds the puzzle's result with `solve` in a fresh graph on every backend, runs its forward
/// routine, and checks the result against `expected`.
fn check(puzzle: &str, expected: Expected<'_>, solve: impl Fn(&Graph) -> Tensor) {
    if let Some(printed) = expected.ocannl {
        assert_eq!(
            expected.cells, printed,
            "{puzzle}: the specification against OCANNL's printout"
        );
    }
    for backend in backends(Precision::F32) {
        let on = backend.name();
        let graph = Graph::new();
        let result = solve(&graph);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx
            .forward(&[&result])
            .unwrap_or_else(|e| panic!("{puzzle} on {on}: {e}"));
        ctx.run(&forward)
            .unwrap_or_else(|e| panic!("{puzzle} on {on}: {e}"));
        let rows = ctx
            .rows(&result)
            .unwrap_or_else(|e| panic!("{puzzle} on {on}: {e}"));
        assert_eq!(shape_text(&rows), expected.shape, "{puzzle} on {on}: shape");
        let cells = ctx
            .values(&result)
            .unwrap_or_else(|e| panic!("{puzzle} on {on}: {e}"));
        assert_eq!(cells, expected.cells, "{puzzle} on {on}: cells");
    }
}

/// Rows of sizes (batch, input, output) as the notation writes a shape: `batch|input->output`.
fn shape_text(rows: &[Vec<usize>; 3]) -> String {
    let [batch, input, output] = rows.each_ref().map(|row| {
        row.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    });
    format!("{batch}|{input}->{output}")
}

/// A data tensor of one output axis holding `values`.
fn vector(graph: &Graph, label: &str, values: &[f64]) -> Tensor {
    graph
        .data(label)
        .output([values.len()])
        .values(values.to_vec())
        .build()
}

/// `0, 1, …, n − 1` as numbers, the puzzles' `arange`.
fn arange(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// The running sums of `a` (one output axis): `a` contracted with the selector `i <= o`, the
/// lower-triangular matrix of ones. Puzzle 7, which puzzle 12 reuses.
fn cumsum(a: &Tensor, n: usize) -> Tensor {
    let r = a.graph().range(n);
    // `not(o < i)` is `i <= o`.
    let upto = r.lt_spec("o; i => i o", &r).not();
    a.einsum("i; i o => o", &upto)
}

fn ones_spec(n: usize) -> Vec<f64> {
    vec![1.0; n]
}

/// Puzzle 1, `ones`: a vector of `n` ones. A range gives the length.
#[test]
fn puzzle_01_ones() {
    let expected = Expected {
        shape: "|->4",
        cells: ones_spec(4),
        ocannl: Some(&[1.0, 1.0, 1.0, 1.0]),
    };
    check("1 ones", expected, |graph| graph.range(4).full_like(1.0));
}

fn sum_spec(a: &[f64]) -> Vec<f64> {
    let mut out = [0.0];
    for x in a {
        out[0] += x;
    }
    out.to_vec()
}

/// Puzzle 2, `sum`: the vector summed into one cell. The label the result leaves out is summed
/// over; the fixed index `0` gives the result its one position.
#[test]
fn puzzle_02_sum() {
    let expected = Expected {
        shape: "|->1",
        cells: sum_spec(&arange(4)),
        ocannl: Some(&[6.0]),
    };
    check("2 sum", expected, |graph| graph.range(4).einsum1("i => 0"));
}

/// `a[i]·b[j]` laid out as a map from `i` to `j`: output `j` first in memory.
fn outer_spec(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    for y in b {
        for x in a {
            out.push(x * y);
        }
    }
    out
}

/// Puzzle 3, `outer`: no label is shared, so nothing is summed. As OCANNL's port writes it, `i`
/// becomes an input axis and `j` an output one: the rank-one matrix mapping 3-vectors to
/// 4-vectors.
#[test]
fn puzzle_03_outer() {
    let expected = Expected {
        shape: "|3->4",
        cells: outer_spec(&arange(3), &arange(4)),
        ocannl: Some(&[0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 2.0, 4.0, 0.0, 3.0, 6.0]),
    };
    check("3 outer", expected, |graph| {
        graph.range(3).einsum("i; j => i->j", &graph.range(4))
    });
}

fn diag_spec(a: &[f64], n: usize) -> Vec<f64> {
    (0..n).map(|i| a[i * n + i]).collect()
}

/// Puzzle 4, `diag`: a label repeated in one operand walks the diagonal. The matrix holds its
/// own offsets, 0 to 8.
#[test]
fn puzzle_04_diag() {
    let expected = Expected {
        shape: "|->3",
        cells: diag_spec(&arange(9), 3),
        ocannl: Some(&[0.0, 4.0, 8.0]),
    };
    check("4 diag", expected, |graph| {
        let m = graph.range_of_shape("m").output([3, 3]).build();
        m.einsum1("ii => i")
    });
}

fn eye_spec(n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        out[i * n + i] = 1.0;
    }
    out
}

/// Puzzle 5, `eye`: the range compared with itself at every pair of positions.
#[test]
fn puzzle_05_eye() {
    let expected = Expected {
        shape: "|->3,3",
        cells: eye_spec(3),
        ocannl: Some(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
    };
    check("5 eye", expected, |graph| {
        let r = graph.range(3);
        r.eq_spec("i; j => i j", &r)
    });
}

fn triu_spec(n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            if i <= j {
                out[i * n + j] = 1.0;
            }
        }
    }
    out
}

/// Puzzle 6, `triu`: ones where `i <= j`, that is where `j < i` does not hold.
#[test]
fn puzzle_06_triu() {
    let expected = Expected {
        shape: "|->3,3",
        cells: triu_spec(3),
        ocannl: Some(&[1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]),
    };
    check("6 triu", expected, |graph| {
        let r = graph.range(3);
        r.lt_spec("j; i => i j", &r).not()
    });
}

fn cumsum_spec(a: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; a.len()];
    let mut total = 0.0;
    for (i, x) in a.iter().enumerate() {
        total += x;
        out[i] = total;
    }
    out
}

const CUMSUM_INPUT: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

/// Puzzle 7, `cumsum`: the running sums, a contraction with the lower-triangular ones.
#[test]
fn puzzle_07_cumsum() {
    let expected = Expected {
        shape: "|->4",
        cells: cumsum_spec(&CUMSUM_INPUT),
        ocannl: Some(&[1.0, 3.0, 6.0, 10.0]),
    };
    check("7 cumsum", expected, |graph| {
        cumsum(&vector(graph, "a", &CUMSUM_INPUT), CUMSUM_INPUT.len())
    });
}

/// The differences of neighbours, one fewer than `a` has (PyTorch's `diff`, as OCANNL's port
/// chooses it).
fn diff_spec(a: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; a.len() - 1];
    for i in 0..out.len() {
        out[i] = a[i + 1] - a[i];
    }
    out
}

const DIFF_INPUT: [f64; 5] = [0.0, 1.0, 3.0, 6.0, 10.0];

/// Puzzle 8, `diff`: a valid convolution with the kernel `[-1, 1]`, whose output is as long as
/// the positions the kernel fits at. (OCANNL's shape inference does not finish on this spec, so
/// its port contracts with a difference matrix instead.)
#[test]
fn puzzle_08_diff() {
    let expected = Expected {
        shape: "|->4",
        cells: diff_spec(&DIFF_INPUT),
        ocannl: Some(&[1.0, 2.0, 3.0, 4.0]),
    };
    check("8 diff", expected, |graph| {
        let a = vector(graph, "a", &DIFF_INPUT);
        let kernel = op! { in graph; [-1.0, 1.0] };
        a.einsum("o<+k; k => o", &kernel)
    });
}

fn vstack_spec(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    out
}

const VSTACK_SECOND: [f64; 3] = [10.0, 20.0, 30.0];

/// Puzzle 9, `vstack`: brackets of tensors stack them along a new leading output axis.
#[test]
fn puzzle_09_vstack() {
    let expected = Expected {
        shape: "|->2,3",
        cells: vstack_spec(&arange(3), &VSTACK_SECOND),
        ocannl: Some(&[0.0, 1.0, 2.0, 10.0, 20.0, 30.0]),
    };
    check("9 vstack", expected, |graph| {
        let a = graph.range(3);
        let b = vector(graph, "b", &VSTACK_SECOND);
        op! { [a, b] }
    });
}

fn roll_spec(a: &[f64]) -> Vec<f64> {
    let n = a.len();
    (0..n).map(|i| a[(i + 1) % n]).collect()
}

const ROLL_INPUT: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

/// Puzzle 10, `roll`: every position one step to the left, the first wrapping round to the
/// end. One concatenation: the input without its first position (`1^x`), then the input
/// without its last three (`y^3`).
#[test]
fn puzzle_10_roll() {
    let expected = Expected {
        shape: "|->4",
        cells: roll_spec(&ROLL_INPUT),
        ocannl: Some(&[2.0, 3.0, 4.0, 1.0]),
    };
    check("10 roll", expected, |graph| {
        let a = vector(graph, "a", &ROLL_INPUT);
        Tensor::concat("1^x; y^3 => x^y", &[&a, &a])
    });
}

fn flip_spec(a: &[f64]) -> Vec<f64> {
    let n = a.len();
    (0..n).map(|i| a[n - 1 - i]).collect()
}

const FLIP_INPUT: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

/// Puzzle 11, `flip`: a contraction with the anti-diagonal selector `i + o = n − 1`.
#[test]
fn puzzle_11_flip() {
    let expected = Expected {
        shape: "|->4",
        cells: flip_spec(&FLIP_INPUT),
        ocannl: Some(&[4.0, 3.0, 2.0, 1.0]),
    };
    check("11 flip", expected, |graph| {
        let n = FLIP_INPUT.len();
        let a = vector(graph, "a", &FLIP_INPUT);
        let r = graph.range(n);
        let last = (n - 1) as f64;
        op! {
            let anti_diagonal = add("i; o => i o", r, r) == last;
        }
        a.einsum("i; i o => o", &anti_diagonal)
    });
}

/// The values `keep` marks, moved to the front of `size` positions (zeros after them).
fn compress_spec(keep: &[f64], values: &[f64], size: usize) -> Vec<f64> {
    let mut out = vec![0.0; size];
    let mut j = 0;
    for (k, v) in keep.iter().zip(values) {
        if *k != 0.0 {
            out[j] = *v;
            j += 1;
        }
    }
    out
}

const COMPRESS_KEEP: [f64; 6] = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0];
const COMPRESS_VALUES: [f64; 6] = [5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
const COMPRESS_SIZE: usize = 5;

/// Puzzle 12, `compress`: a kept value goes to the position its running count of kept values
/// gives, less one; the values that are not kept to none (−1, which a one-hot row has no 1
/// for). The values contracted with those one-hot rows.
#[test]
fn puzzle_12_compress() {
    let expected = Expected {
        shape: "|->5",
        cells: compress_spec(&COMPRESS_KEEP, &COMPRESS_VALUES, COMPRESS_SIZE),
        ocannl: None,
    };
    check("12 compress", expected, |graph| {
        let keep = vector(graph, "keep", &COMPRESS_KEEP);
        let values = vector(graph, "values", &COMPRESS_VALUES);
        let count = cumsum(&keep, COMPRESS_KEEP.len());
        op! {
            let positions = where_(keep, count - 1.0, -1.0);
        }
        values.einsum("k; k j => j", &Tensor::one_hot(&positions, COMPRESS_SIZE))
    });
}

/// `a`'s first `size` cells, then zeros up to `size`.
fn pad_to_spec(a: &[f64], size: usize) -> Vec<f64> {
    (0..size)
        .map(|k| a.get(k).copied().unwrap_or(0.0))
        .collect()
}

const PAD_INPUT: [f64; 3] = [1.0, 2.0, 3.0];
const TRUNCATE_INPUT: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];

/// Puzzle 13, `pad_to`, lengthening: a concatenation whose second component is a number of
/// positions, which hold zeros.
#[test]
fn puzzle_13_pad_to_pads() {
    let expected = Expected {
        shape: "|->5",
        cells: pad_to_spec(&PAD_INPUT, 5),
        ocannl: Some(&[1.0, 2.0, 3.0, 0.0, 0.0]),
    };
    check("13 pad_to/pad", expected, |graph| {
        let a = vector(graph, "a", &PAD_INPUT);
        Tensor::concat("i => i^2", &[&a])
    });
}

/// Puzzle 13, `pad_to`, shortening: the operand's axis is the result's followed by two
/// positions that are left out.
#[test]
fn puzzle_13_pad_to_truncates() {
    let expected = Expected {
        shape: "|->3",
        cells: pad_to_spec(&TRUNCATE_INPUT, 3),
        ocannl: Some(&[1.0, 2.0, 3.0]),
    };
    check("13 pad_to/trunc", expected, |graph| {
        let a = vector(graph, "a", &TRUNCATE_INPUT);
        Tensor::concat("i^2 => i", &[&a])
    });
}

/// `values[i][j]` where `j < length[i]`, else 0.
fn sequence_mask_spec(values: &[f64], lengths: &[f64], columns: usize) -> Vec<f64> {
    let mut out = vec![0.0; values.len()];
    for (i, length) in lengths.iter().enumerate() {
        for j in 0..columns {
            if (j as f64) < *length {
                out[i * columns + j] = values[i * columns + j];
            }
        }
    }
    out
}

const SEQUENCE_LENGTHS: [f64; 2] = [2.0, 1.0];

/// Puzzle 14, `sequence_mask`: the column index compared with each row's length chooses between
/// the values and zero. The values hold their own offsets, 0 to 5.
#[test]
fn puzzle_14_sequence_mask() {
    let expected = Expected {
        shape: "|->2,3",
        cells: sequence_mask_spec(&arange(6), &SEQUENCE_LENGTHS, 3),
        ocannl: Some(&[0.0, 1.0, 0.0, 3.0, 0.0, 0.0]),
    };
    check("14 seq_mask", expected, |graph| {
        let values = graph.range_of_shape("values").output([2, 3]).build();
        let lengths = vector(graph, "lengths", &SEQUENCE_LENGTHS);
        let columns = graph.range(3);
        op! { where_(lt("j; i => i j", columns, lengths), values, 0.0) }
    });
}

/// How many times each of `0..size` occurs in `a`.
fn bincount_spec(a: &[f64], size: usize) -> Vec<f64> {
    let mut out = vec![0.0; size];
    for x in a {
        out[*x as usize] += 1.0;
    }
    out
}

const BINCOUNT_INPUT: [f64; 7] = [2.0, 0.0, 3.0, 3.0, 1.0, 3.0, 0.0];

/// Puzzle 15, `bincount`: the one-hot rows of the values, summed over the values.
#[test]
fn puzzle_15_bincount() {
    let expected = Expected {
        shape: "|->5",
        cells: bincount_spec(&BINCOUNT_INPUT, 5),
        ocannl: None,
    };
    check("15 bincount", expected, |graph| {
        let a = vector(graph, "a", &BINCOUNT_INPUT);
        Tensor::one_hot(&a, 5).einsum1("k j => j")
    });
}

/// `values[k]` added into position `link[k]` of `size`.
fn scatter_add_spec(values: &[f64], link: &[f64], size: usize) -> Vec<f64> {
    let mut out = vec![0.0; size];
    for (v, l) in values.iter().zip(link) {
        out[*l as usize] += v;
    }
    out
}

const SCATTER_VALUES: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];
const SCATTER_LINK: [f64; 5] = [0.0, 2.0, 0.0, 3.0, 2.0];

/// Puzzle 16, `scatter_add`: the values contracted with the one-hot rows of their links.
#[test]
fn puzzle_16_scatter_add() {
    let expected = Expected {
        shape: "|->4",
        cells: scatter_add_spec(&SCATTER_VALUES, &SCATTER_LINK, 4),
        ocannl: None,
    };
    check("16 scatter_add", expected, |graph| {
        let values = vector(graph, "values", &SCATTER_VALUES);
        let link = vector(graph, "link", &SCATTER_LINK);
        values.einsum("k; k j => j", &Tensor::one_hot(&link, 4))
    });
}

/// `a` (`rows × columns`, row-major) read as one vector.
fn flatten_spec(a: &[f64], rows: usize, columns: usize) -> Vec<f64> {
    (0..rows * columns)
        .map(|k| a[(k / columns) * columns + k % columns])
        .collect()
}

const FLATTEN_INPUT: [f64; 6] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];

/// Puzzle 17, `flatten`: the output axes merged into one, row-major.
#[test]
fn puzzle_17_flatten() {
    let expected = Expected {
        shape: "|->6",
        cells: flatten_spec(&FLATTEN_INPUT, 2, 3),
        ocannl: Some(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
    };
    check("17 flatten", expected, |graph| {
        let a = op! { in graph; [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]] };
        a.flatten(AxisKind::Output)
    });
}

fn linspace_spec(low: f64, high: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|k| low + (high - low) * k as f64 / (n.max(2) - 1) as f64)
        .collect()
}

/// Puzzle 18, `linspace`: the range scaled by the step and shifted by the start.
#[test]
fn puzzle_18_linspace() {
    let (low, high, n) = (2.0, 10.0, 5);
    let expected = Expected {
        shape: "|->5",
        cells: linspace_spec(low, high, n),
        ocannl: Some(&[2.0, 4.0, 6.0, 8.0, 10.0]),
    };
    check("18 linspace", expected, |graph| {
        let r = graph.range(n);
        let step = (high - low) / (n.max(2) - 1) as f64;
        op! { r * step + low }
    });
}

fn heaviside_spec(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if *x == 0.0 {
                *y
            } else if *x > 0.0 {
                1.0
            } else {
                0.0
            }
        })
        .collect()
}

const HEAVISIDE_A: [f64; 3] = [-1.0, 0.0, 2.0];
const HEAVISIDE_B: [f64; 3] = [5.0, 5.0, 5.0];

/// Puzzle 19, `heaviside`: `b` where `a` is 0, else whether `a` is positive (1 or 0).
#[test]
fn puzzle_19_heaviside() {
    let expected = Expected {
        shape: "|->3",
        cells: heaviside_spec(&HEAVISIDE_A, &HEAVISIDE_B),
        ocannl: Some(&[0.0, 5.0, 1.0]),
    };
    check("19 heaviside", expected, |graph| {
        let a = vector(graph, "a", &HEAVISIDE_A);
        let b = vector(graph, "b", &HEAVISIDE_B);
        op! { where_(a == 0.0, b, 0.0 < a) }
    });
}

fn repeat_spec(a: &[f64], d: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..d {
        out.extend_from_slice(a);
    }
    out
}

/// Puzzle 20, `repeat`: `d` copies stacked along a new leading output axis.
#[test]
fn puzzle_20_repeat() {
    let d = 3;
    let expected = Expected {
        shape: "|->3,3",
        cells: repeat_spec(&arange(3), d),
        ocannl: Some(&[0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0, 2.0]),
    };
    check("20 repeat", expected, |graph| {
        let a = graph.range(3);
        Tensor::stack(&vec![&a; d])
    });
}

/// For each value, how many of the (sorted) boundaries are at or below it.
fn bucketize_spec(values: &[f64], boundaries: &[f64]) -> Vec<f64> {
    values
        .iter()
        .map(|v| {
            let mut bucket = 0;
            while bucket < boundaries.len() && boundaries[bucket] <= *v {
                bucket += 1;
            }
            bucket as f64
        })
        .collect()
}

const BUCKETIZE_VALUES: [f64; 3] = [0.5, 2.5, 5.0];
const BUCKETIZE_BOUNDARIES: [f64; 3] = [1.0, 3.0, 5.0];

/// Puzzle 21, `bucketize`: every value compared with every boundary, `not(v < b)` counted
/// over the boundaries (`not` following a spec sums over the label its result leaves out).
#[test]
fn puzzle_21_bucketize() {
    let expected = Expected {
        shape: "|->3",
        cells: bucketize_spec(&BUCKETIZE_VALUES, &BUCKETIZE_BOUNDARIES),
        ocannl: Some(&[0.0, 1.0, 3.0]),
    };
    check("21 bucketize", expected, |graph| {
        let values = vector(graph, "values", &BUCKETIZE_VALUES);
        let boundaries = vector(graph, "boundaries", &BUCKETIZE_BOUNDARIES);
        values
            .lt_spec("i; j => i j", &boundaries)
            .not_spec("i j => i")
    });
}
