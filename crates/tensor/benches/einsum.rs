//! N-ary einsum benchmark: a suite of expressions in numpy's notation (matrix chains of uneven
//! sizes, labels summed within one operand, batched products, traces, diagonals, outer products,
//! tensor factorizations, tensor-network rings and ladders, and shapes of opt_einsum's own test
//! suite), each with a size per label. For every expression, in one run:
//!
//! - path cost: our path (`Tensor::einsum_path`) with our own FLOP count (a multiply per point of
//!   each step's product space, an add per point when it sums, an add per point of a
//!   single-operand sum), and, in opt_einsum's cost model
//!   (`opt_cost`), the cost of our path given to `opt_einsum.contract_path` explicitly next to
//!   that of its `optimal` path (`dp` beyond 8 operands) and its `greedy` path;
//! - wall time: our compiled forward routine (`Tensor::einsum_np`, default backend, compilation
//!   excluded, median of repeated runs) against `numpy.einsum(spec, *operands, optimize=True)` on
//!   float32 operands, with the ratio;
//! - a check of our result against numpy's in float64.
//!
//! The reference runs as a subprocess (`einsum_reference.py`); numpy and opt_einsum are installed
//! with `python3 -m pip install --quiet` when missing (one try each). Without python3 or numpy our
//! figures are printed alone; without opt_einsum the cost columns stay empty. Run with
//! `cargo bench -p rcannl-tensor --bench einsum` (`-- NAME...` for some expressions only).

#[path = "support/python.rs"]
mod python;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcannl_ir::Precision;
use rcannl_tensor::nary::numpy_to_ours;
use rcannl_tensor::{Context, Graph, Routine, Tensor, TensorError};

/// An expression of the suite: its name, numpy notation, and `label=size` pairs.
struct Expression {
    name: &'static str,
    spec: &'static str,
    sizes: &'static str,
}

const fn e(name: &'static str, spec: &'static str, sizes: &'static str) -> Expression {
    Expression { name, spec, sizes }
}

#[rustfmt::skip]
const SUITE: &[Expression] = &[
    // Matrix products and chains of uneven sizes.
    e("matmul", "ij,jk->ik", "i=512,j=512,k=512"),
    e("matmul_tn", "ji,jk->ik", "i=512,j=512,k=512"),
    e("chain3", "ij,jk,kl->il", "i=64,j=1024,k=16,l=512"),
    e("mat_mat_vec", "ij,jk,k->i", "i=1024,j=1024,k=1024"),
    e("chain4", "ab,bc,cd,de->ae", "a=400,b=20,c=600,d=10,e=400"),
    e("chain5", "ab,bc,cd,de,ef->af", "a=128,b=512,c=32,d=384,e=16,f=256"),
    e("chain6", "ab,bc,cd,de,ef,fg->ag", "a=300,b=40,c=250,d=60,e=200,f=20,g=300"),
    e("chain8", "ab,bc,cd,de,ef,fg,gh,hi->ai",
      "a=200,b=16,c=300,d=24,e=256,f=12,g=320,h=32,i=200"),
    e("chain10", "ab,bc,cd,de,ef,fg,gh,hi,ij,jk->ak",
      "a=256,b=32,c=192,d=8,e=320,f=48,g=160,h=16,i=288,j=24,k=256"),
    e("vec_mat_vec", "i,ij,j->", "i=2048,j=2048"),
    e("vec_chain", "i,ij,jk,k->", "i=1024,j=16,k=1024"),
    // Labels one operand alone has.
    e("sum_then_mm", "ijk,kl->il", "i=128,j=64,k=128,l=128"),
    e("sum_in_chain", "abc,cd,de->ae", "a=128,b=64,c=128,d=128,e=128"),
    e("sum_both", "ijk,klm->im", "i=64,j=32,k=64,l=32,m=64"),
    e("sum_outer", "ij,k->ik", "i=512,j=512,k=512"),
    // Batched products.
    e("bmm", "bij,bjk->bik", "b=32,i=128,j=128,k=128"),
    e("bmm_chain", "bij,bjk,bkl->bil", "b=16,i=128,j=16,k=128,l=128"),
    e("bmm_broadcast", "bij,jk->bik", "b=64,i=128,j=128,k=128"),
    e("attn_scores", "bhqd,bhkd->bhqk", "b=4,h=8,q=128,k=128,d=64"),
    e("attn_linear", "bhqd,bhkd,bhke->bhqe", "b=2,h=4,q=256,k=256,d=16,e=16"),
    e("bilinear", "bi,oij,bj->bo", "b=64,i=64,j=64,o=64"),
    // Traces and diagonals.
    e("trace", "ii->", "i=2048"),
    e("trace_mm", "ij,ji->", "i=1024,j=1024"),
    e("trace_chain3", "ij,jk,ki->", "i=256,j=512,k=128"),
    e("trace_ring6", "ab,bc,cd,de,ef,fa->", "a=128,b=128,c=128,d=128,e=128,f=128"),
    e("batched_trace", "bii->b", "b=256,i=128"),
    e("diagonal", "ii->i", "i=2048"),
    e("batched_diag", "bii->bi", "b=64,i=256"),
    e("diag_of_mm", "ij,ji->i", "i=1024,j=1024"),
    e("diag_into_mm", "iij,jk->ik", "i=128,j=128,k=128"),
    // Outer products, elementwise products, reductions.
    e("outer2", "i,j->ij", "i=2048,j=2048"),
    e("outer3", "i,j,k->ijk", "i=128,j=128,k=128"),
    e("outer_mat", "ij,kl->ijkl", "i=32,j=32,k=32,l=32"),
    e("outer_then_mv", "i,j,jk->ik", "i=1024,j=1024,k=1024"),
    e("hadamard", "ij,ij->ij", "i=1024,j=1024"),
    e("dot", "i,i->", "i=1048576"),
    e("triple_sum", "ij,ij,ij->", "i=1024,j=1024"),
    e("sum_all", "ijk->", "i=128,j=128,k=128"),
    e("transpose", "ijk->kji", "i=128,j=128,k=128"),
    // Tensor factorizations.
    e("mttkrp", "ijk,jr,kr->ir", "i=128,j=128,k=128,r=16"),
    e("tucker_project", "ijk,ia,jb,kc->abc", "i=96,j=96,k=96,a=16,b=16,c=16"),
    e("tucker_rebuild", "abc,ia,jb,kc->ijk", "a=16,b=16,c=16,i=96,j=96,k=96"),
    e("cp_rebuild", "ir,jr,kr->ijk", "i=96,j=96,k=96,r=16"),
    e("tucker4", "abcd,ai,bj,ck,dl->ijkl", "a=8,b=8,c=8,d=8,i=24,j=24,k=24,l=24"),
    e("oe_readme", "ea,fb,abcd,gc,hd->efgh", "a=24,b=24,c=24,d=24,e=24,f=24,g=24,h=24"),
    // Tensor networks: rings, ladders, a grid.
    e("mps_ring4", "aib,bjc,ckd,dla->ijkl", "a=16,b=16,c=16,d=16,i=8,j=8,k=8,l=8"),
    e("mps_norm3", "ia,ajb,bk,ic,cjd,dk->", "a=128,b=128,c=128,d=128,i=4,j=4,k=4"),
    e("mps_norm4", "ia,ajb,bkc,cl,id,dje,ekf,fl->",
      "a=96,b=96,c=96,d=96,e=96,f=96,i=4,j=4,k=4,l=4"),
    e("mpo_expect", "ia,ajb,bk,imc,cjnd,dko,me,enf,fo->",
      "a=48,b=48,e=48,f=48,c=8,d=8,i=4,j=4,k=4,m=4,n=4,o=4"),
    e("peps_2x3", "ad,abe,bf,gd,ghe,hf->", "a=32,b=32,d=32,e=32,f=32,g=32,h=32"),
    // opt_einsum's test suite shapes, sizes scaled up.
    e("oe_dd_fb", "dd,fb,be,cdb->cef", "b=24,c=20,d=28,e=16,f=18"),
    e("oe_bca", "bca,cdb,dbf,afc->", "a=24,b=20,c=16,d=28,f=18"),
    e("oe_dcc", "dcc,fce,ea,dbf->ab", "a=24,b=20,c=16,d=28,e=12,f=18"),
    e("oe_fdf", "fdf,cdd,ccd,afe->ae", "a=24,c=16,d=28,e=12,f=18"),
    e("oe_ed", "ed,fcd,ff,bcf->be", "b=20,c=16,d=28,e=12,f=18"),
    e("oe_baa", "baa,dcf,af,cde->be", "a=24,b=20,c=16,d=28,e=12,f=18"),
    e("oe_fff", "fff,fae,bef,def->abd", "a=24,b=20,d=28,e=12,f=18"),
    e("oe_efc", "efc,dbc,acf,fd->abe", "a=24,b=20,c=16,d=28,e=12,f=18"),
    e("oe_abhe", "abhe,hidj,jgba,hiab,gab", "a=8,b=10,d=12,e=9,g=7,h=11,i=6,j=13"),
    e("oe_eb_cb", "eb,cb,fb->cef", "b=64,c=64,e=64,f=64"),
    e("oe_ab_bcd", "ab,bcd,cd->abd", "a=64,b=64,c=64,d=64"),
];

/// How long one side's timing of one expression runs, about.
const BUDGET: f64 = 0.25;
/// Rounds of every expression, ours and numpy's taking turns; each side's best median counts.
const ROUNDS: usize = 5;
/// The time target: our median time at most this fraction of numpy's.
const TIME_TARGET: f64 = 0.8;
/// Agreement with numpy's float64 result (our operands are float32).
const TOLERANCE: f64 = 1e-3;

/// An expression ready to run: its path, compiled routine and check figures.
struct Prepared {
    operands: usize,
    steps: Vec<(usize, usize)>,
    flops: f64,
    ctx: Context,
    forward: Routine,
    /// Our result's 2-norm and weighted sum (see the script).
    check: (f64, f64),
    /// The result's cell count.
    cells: usize,
}

fn sizes_of(expression: &Expression) -> HashMap<char, usize> {
    expression
        .sizes
        .split(',')
        .map(|pair| {
            let (label, size) = pair.split_once('=').expect("label=size");
            (
                label.chars().next().expect("a label"),
                size.parse().expect("a size"),
            )
        })
        .collect()
}

/// The operands' label strings.
fn operand_labels(spec: &str) -> Vec<String> {
    let inputs = spec.split_once("->").map_or(spec, |(inputs, _)| inputs);
    inputs.split(',').map(str::to_owned).collect()
}

fn prepare(expression: &Expression) -> Result<Prepared, TensorError> {
    let sizes = sizes_of(expression);
    let inputs = operand_labels(expression.spec);
    let graph = Graph::new();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .enumerate()
        .map(|(o, labels)| {
            let dims: Vec<usize> = labels.chars().map(|c| sizes[&c]).collect();
            let n: usize = dims.iter().product();
            let values = (0..n)
                .map(|k| ((k * 7 + o * 3) % 13) as f64 / 13.0 - 0.5)
                .collect();
            let shape: Vec<String> = dims.iter().map(usize::to_string).collect();
            graph
                .data(&format!("x{o}"))
                .shape(&shape.join(","))
                .precision(Precision::F32)
                .values(values)
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let path = Tensor::einsum_path(&numpy_to_ours(expression.spec)?, &refs)?;
    let out = Tensor::einsum_np(expression.spec, &refs);
    let mut ctx = Context::new(&graph);
    let forward = ctx.forward(&[&out])?;
    forward.finish_compiling()?;
    ctx.run(&forward)?;
    let values = ctx.values(&out)?;
    let l2 = values.iter().map(|v| v * v).sum::<f64>().sqrt();
    let weighted = values
        .iter()
        .enumerate()
        .map(|(k, v)| v * (((k * 5) % 11) as f64 / 11.0 - 0.5))
        .sum();
    Ok(Prepared {
        operands: inputs.len(),
        steps: path.steps,
        flops: path.flops,
        ctx,
        forward,
        check: (l2, weighted),
        cells: values.len(),
    })
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

/// The median time of one run of the forward routine.
fn time_ours(prepared: &mut Prepared) -> Result<f64, TensorError> {
    let start = Instant::now();
    prepared.ctx.run(&prepared.forward)?;
    let once = start.elapsed().as_secs_f64();
    let repeats = (BUDGET / once.max(1e-6)).clamp(3.0, 200.0) as usize;
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        prepared.ctx.run(&prepared.forward)?;
        times.push(start.elapsed());
    }
    Ok(median(times))
}

/// The threads our backend splits work across (rayon's count: `RAYON_NUM_THREADS`, else the
/// hardware threads); numpy's BLAS gets as many.
fn threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The script's output lines, split into fields, for `lines` (one expression each) and `flags`.
fn reference(lines: &str, flags: &[&str]) -> Vec<Vec<String>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/einsum_reference.py");
    let threads = threads().to_string();
    let child = Command::new("python3")
        .arg(script)
        .args(flags)
        .env("OPENBLAS_NUM_THREADS", &threads)
        .env("OMP_NUM_THREADS", &threads)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            eprintln!("cannot run the reference script: {e}");
            return Vec::new();
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(lines.as_bytes());
    }
    let Ok(output) = child.wait_with_output() else {
        eprintln!("the reference script did not finish");
        return Vec::new();
    };
    python::report_failure(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout.lines().filter(|l| l.starts_with("error ")) {
        eprintln!("reference: {line}");
    }
    stdout
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// opt_einsum's costs of one expression: our path's, `optimal`'s (or `dp`'s), `greedy`'s, and
/// `optimal`'s after our single-operand sums (plus theirs).
struct Costs {
    ours: f64,
    optimal: f64,
    method: String,
    greedy: f64,
    presummed: f64,
}

fn sci(x: f64) -> String {
    format!("{x:.3e}")
}

fn main() {
    let chosen: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let suite: Vec<&Expression> = SUITE
        .iter()
        .filter(|e| chosen.is_empty() || chosen.iter().any(|c| c == e.name))
        .collect();

    let numpy = python::importable("numpy", "numpy");
    let opt_einsum = numpy && python::importable("opt_einsum", "opt_einsum");
    if !numpy {
        eprintln!("no numpy reference: printing our figures alone");
    } else if !opt_einsum {
        eprintln!("opt_einsum cannot be imported or installed: no path costs to compare with");
    }

    let mut prepared: Vec<Prepared> = Vec::new();
    let mut backend = "";
    let mut target = None;
    for expression in &suite {
        let p = prepare(expression)
            .unwrap_or_else(|err| panic!("{} ({}): {err}", expression.name, expression.spec));
        backend = p.ctx.backend_name();
        target = p.ctx.backend_target();
        prepared.push(p);
    }
    let lines: String = suite
        .iter()
        .zip(&prepared)
        .map(|(e, p)| {
            let steps: Vec<String> = p.steps.iter().map(|(i, j)| format!("{i}-{j}")).collect();
            format!("{}|{}|{}|{}\n", e.name, e.spec, e.sizes, steps.join(","))
        })
        .collect();

    let mut costs: HashMap<String, Costs> = HashMap::new();
    let mut checks: HashMap<String, (f64, f64)> = HashMap::new();
    if numpy {
        let flags: &[&str] = if opt_einsum {
            &["--costs", "--check"]
        } else {
            &["--check"]
        };
        for fields in reference(&lines, flags) {
            let number = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
            match fields.first().map(String::as_str) {
                Some("cost") => {
                    if let (Some(ours), Some(optimal), Some(method), Some(greedy), Some(pre)) =
                        (number(2), number(3), fields.get(4), number(5), number(6))
                    {
                        costs.insert(
                            fields[1].clone(),
                            Costs {
                                ours,
                                optimal,
                                method: method.clone(),
                                greedy,
                                presummed: pre,
                            },
                        );
                    }
                }
                Some("check") => {
                    if let (Some(l2), Some(weighted)) = (number(2), number(3)) {
                        checks.insert(fields[1].clone(), (l2, weighted));
                    }
                }
                _ => {}
            }
        }
    }

    let mut ours = vec![f64::INFINITY; suite.len()];
    let mut theirs: HashMap<String, f64> = HashMap::new();
    let mut views: Vec<String> = Vec::new();
    for _ in 0..ROUNDS {
        if numpy {
            for fields in reference(&lines, &["--time"]) {
                if let (Some("view"), Some(name)) =
                    (fields.first().map(String::as_str), fields.get(1))
                    && !views.contains(name)
                {
                    views.push(name.clone());
                }
                if let (Some("time"), Some(name), Some(Ok(seconds))) = (
                    fields.first().map(String::as_str),
                    fields.get(1),
                    fields.get(2).map(|s| s.parse::<f64>()),
                ) {
                    let best = theirs.entry(name.clone()).or_insert(f64::INFINITY);
                    *best = best.min(seconds);
                }
            }
        }
        for (p, best) in prepared.iter_mut().zip(&mut ours) {
            let seconds = time_ours(p).unwrap_or_else(|err| panic!("timing: {err}"));
            *best = best.min(seconds);
        }
    }

    if let Some(target) = &target {
        println!("target: {target}");
    }
    println!(
        "n-ary einsum: {} expressions; ours on the {backend} backend, numpy {}; {} threads each; \
         times: best of {ROUNDS} rounds, each a median",
        suite.len(),
        if numpy {
            "einsum(optimize=True) on float32"
        } else {
            "not available"
        },
        threads()
    );
    println!(
        "columns: n operands; our flops: our own count (a multiply per point of each step's \
         product space, an add per point when it sums, an add per point of a single-operand sum; \
         0 for one operand);"
    );
    println!(
        "  oe(ours), oe optimal, oe greedy: opt_einsum's cost model (opt_cost: points of each \
         step's product space x (terms - 1, +1 when a label is summed)) of our path given \
         explicitly,"
    );
    println!(
        "  of its `optimal` path (`dp`, marked *, beyond 8 operands) and of its `greedy` path; \
         our single-operand sums enter the explicit path as steps (i,);"
    );
    println!(
        "  oe presum: our single-operand sums, then opt_einsum's optimal over the expression they \
         leave (its cost model); path/best: oe(ours) / min(oe optimal, oe greedy), target <= 1;"
    );
    println!(
        "  ours/numpy: time ratio, target median <= {TIME_TARGET}; check: relative error against \
         numpy's float64 result (2-norm and a weighted sum), tolerance {TOLERANCE:.0e};"
    );
    println!(
        "  v after ours/np: numpy's result is a view of its operand (a permutation or a diagonal, \
         nothing copied)"
    );
    println!(
        "{:<15} {:<36} {:>3} {:>10} {:>10} {:>11} {:>10} {:>10} {:>9} {:>10} {:>10} {:>8} {:>8}",
        "name",
        "spec",
        "n",
        "our flops",
        "oe(ours)",
        "oe optimal",
        "oe greedy",
        "oe presum",
        "path/best",
        "ours ms",
        "numpy ms",
        "ours/np",
        "check"
    );
    let mut path_met = 0;
    let mut path_compared = 0;
    let mut path_worse: Vec<String> = Vec::new();
    let mut presum_met = 0;
    let mut ratios: Vec<f64> = Vec::new();
    let mut time_met = 0;
    let mut checked = 0;
    let mut agreed = 0;
    let mut disagreed: Vec<String> = Vec::new();
    for ((expression, p), &mine) in suite.iter().zip(&prepared).zip(&ours) {
        let name = expression.name;
        let c = costs.get(name);
        let (oe_ours, oe_optimal, oe_greedy, oe_presum, versus) = match c {
            Some(c) => {
                let best = c.optimal.min(c.greedy);
                let ratio = c.ours / best;
                path_compared += 1;
                if c.ours <= best {
                    path_met += 1;
                } else {
                    path_worse.push(format!("{name} (+{:.1}%)", (ratio - 1.0) * 100.0));
                }
                if c.ours <= c.presummed {
                    presum_met += 1;
                }
                let star = if c.method == "optimal" { "" } else { "*" };
                (
                    sci(c.ours),
                    format!("{}{star}", sci(c.optimal)),
                    sci(c.greedy),
                    sci(c.presummed),
                    format!("{ratio:.3}"),
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        let numpy_time = theirs.get(name).copied();
        let ratio = numpy_time.map(|t| mine / t);
        if let Some(r) = ratio {
            ratios.push(r);
            if r <= TIME_TARGET {
                time_met += 1;
            }
        }
        let check = checks.get(name).map(|&(l2, weighted)| {
            let weights: f64 = (0..p.cells)
                .map(|k| (((k * 5) % 11) as f64 / 11.0 - 0.5).powi(2))
                .sum::<f64>()
                .sqrt();
            let scale = l2.max(f64::MIN_POSITIVE);
            ((p.check.0 - l2).abs() / scale).max((p.check.1 - weighted).abs() / (scale * weights))
        });
        if let Some(err) = check {
            checked += 1;
            if err <= TOLERANCE {
                agreed += 1;
            } else {
                disagreed.push(format!("{name} ({err:.1e})"));
            }
        }
        println!(
            "{:<15} {:<36} {:>3} {:>10} {:>10} {:>11} {:>10} {:>10} {:>9} {:>10.3} {:>10} {:>8} {:>8}",
            name,
            expression.spec,
            p.operands,
            sci(p.flops),
            oe_ours,
            oe_optimal,
            oe_greedy,
            oe_presum,
            versus,
            mine * 1e3,
            numpy_time.map_or("-".to_owned(), |t| format!("{:.3}", t * 1e3)),
            ratio.map_or("-".to_owned(), |r| {
                let view = if views.iter().any(|v| v == name) {
                    "v"
                } else {
                    ""
                };
                format!("{r:.2}{view}")
            }),
            check.map_or("-".to_owned(), |e| format!("{e:.0e}")),
        );
    }
    println!("sizes:");
    for expression in &suite {
        println!("  {:<15} {}", expression.name, expression.sizes);
    }
    if path_compared > 0 {
        println!(
            "path FLOPs (opt_einsum's model): ours <= min(optimal, greedy) on {path_met}/{path_compared} \
             expressions{}; ours <= our sums + optimal after them on {presum_met}/{path_compared}",
            if path_worse.is_empty() {
                String::new()
            } else {
                format!("; worse on {}", path_worse.join(", "))
            }
        );
    } else {
        println!("path FLOPs: no opt_einsum reference");
    }
    if ratios.is_empty() {
        println!("time: no numpy reference");
    } else {
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        println!(
            "time: ours <= {TIME_TARGET} x numpy on {time_met}/{} expressions; median ours/numpy \
             {median:.2} (target <= {TIME_TARGET}: {})",
            ratios.len(),
            if median <= TIME_TARGET {
                "met"
            } else {
                "not met"
            }
        );
    }
    if checked > 0 {
        println!(
            "results agree with numpy's within {TOLERANCE:.0e} on {agreed}/{checked}{}",
            if disagreed.is_empty() {
                String::new()
            } else {
                format!("; not on {}", disagreed.join(", "))
            }
        );
    }
}
