//! Random loop programs, run compiled and interpreted.
//!
//! A program holds tensors of one precision, drawn among every float and integer precision but
//! u32 (fp8, f16, bf16, f32, f64; u8, i8, u16, i32, i64, u64), and is one to five assignments
//! over random product spaces: each reads one to three
//! tensors through iterators, strided windows (`2·s + t`) or fixed positions, computes one
//! operation, and accumulates into a tensor that keeps some of the product's symbols (the others
//! are reduced) with one of the accumulators, with or without a neutral pre-fill. Later
//! assignments may read earlier results. Half the programs are optimized first, as the tensor
//! layer optimizes its routines (fusion, local sums, loop order, matrix products), and their
//! stored results compared; the others are compiled as lowered. [`check`] compiles a batch of
//! programs into one C library; [`check_on`] compiles each on any backend; [`check_tiers`]
//! compares the C backend's optimized and quick builds bit for bit.

use std::collections::HashMap;

use rcannl_backends::cc::{CompiledRoutine, Compiler};
use rcannl_backends::interpreter::{RunError, run_routine};
use rcannl_backends::{Backend, Buffers};
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, Kind, MemoryMode, NodeId, Precision, Projections, Rhs,
    Routine, Symbol, TensorNode, Ternop, Unop, Value,
};

use crate::rng::{Draw, Rng};
use crate::{Comparison, Mismatch, Precisions, Tolerance, close};

const UNOPS: [Unop; 13] = [
    Unop::Identity,
    Unop::Neg,
    Unop::Relu,
    Unop::Exp,
    Unop::Tanh,
    Unop::Sat01,
    Unop::Not,
    Unop::Trunc,
    Unop::Sin,
    Unop::Cos,
    Unop::Sqrt,
    Unop::Recip,
    Unop::Log,
];
/// Operations drawn for every kind of value.
const BINOPS: [Binop; 14] = [
    Binop::Add,
    Binop::Sub,
    Binop::Mul,
    Binop::Max,
    Binop::Min,
    Binop::ReluGate,
    Binop::Sat01Gate,
    Binop::Lt,
    Binop::Eq,
    Binop::Ne,
    Binop::Or,
    Binop::And,
    Binop::Arg1,
    Binop::Arg2,
];
/// Drawn for floats only; integer quotients and remainders, by zero included, have cases of their
/// own on every backend (the conformance suite).
const FLOAT_BINOPS: [Binop; 3] = [Binop::Div, Binop::Mod, Binop::Pow];
const ACCUMULATORS: [Binop; 5] = [Binop::Add, Binop::Max, Binop::Min, Binop::Arg2, Binop::Mul];
const PRECISIONS: [Precision; 11] = [
    Precision::F32,
    Precision::F64,
    Precision::I32,
    Precision::F16,
    Precision::I64,
    Precision::U16,
    Precision::U64,
    Precision::Fp8,
    Precision::Bf16,
    Precision::U8,
    Precision::I8,
];

/// A random program: the routine, its input nodes and the values to fill them with.
#[derive(Debug, Clone)]
pub struct Program {
    pub routine: Routine,
    pub inputs: Vec<(NodeId, Vec<f64>)>,
    /// Whether the compiled routine is the optimized one.
    pub optimized: bool,
}

/// The program made from `seed`.
pub fn program(seed: u64) -> Program {
    program_in(seed, Precisions::All)
}

/// The program made from `seed`, in one of `precisions`.
pub fn program_in(seed: u64, precisions: Precisions) -> Program {
    let mut rng = Rng::new(seed);
    let precision = precisions.fit(*rng.pick(&PRECISIONS));
    let mut nodes: Vec<TensorNode> = Vec::new();
    let mut inputs: Vec<NodeId> = Vec::new();
    let mut results: Vec<(NodeId, Vec<usize>)> = Vec::new();
    let mut assignments = Vec::new();
    let new_node = |dims: &[usize], nodes: &mut Vec<TensorNode>| {
        let id = nodes.len() as u32;
        nodes.push(TensorNode::new(id, &format!("t{id}"), precision, dims));
        NodeId(id)
    };
    for _ in 0..rng.between(1, 5) {
        let ranges: Vec<usize> = (0..rng.between(1, 4)).map(|_| rng.between(1, 9)).collect();
        let symbols = ranges.len();
        let product_space: Vec<Factor> = ranges
            .iter()
            .enumerate()
            .map(|(s, &r)| Factor::single(Symbol(s as u32), r))
            .collect();
        let float = precision.kind() == Kind::Float;
        let rhs_kind = rng.below(10);
        let arity = match rhs_kind {
            0..=3 => 1,
            4..=8 => 2,
            _ => 3,
        };
        let mut rhs_dims = Vec::new();
        let mut rhs_index = Vec::new();
        let mut operands = Vec::new();
        for _ in 0..arity {
            let mut dims = Vec::new();
            let mut index = Vec::new();
            for _ in 0..rng.below(4) {
                match rng.below(6) {
                    0..=3 => {
                        let s = rng.below(symbols);
                        dims.push(ranges[s]);
                        index.push(AxisIndex::Iterator(Symbol(s as u32)));
                    }
                    4 => {
                        let (s, t) = (rng.below(symbols), rng.below(symbols));
                        let top = if s == t {
                            3 * (ranges[s] - 1)
                        } else {
                            2 * (ranges[s] - 1) + ranges[t] - 1
                        };
                        dims.push(top + 1);
                        index.push(AxisIndex::affine(
                            [(2, Symbol(s as u32)), (1, Symbol(t as u32))],
                            0,
                        ));
                    }
                    _ => {
                        let size = rng.between(1, 3);
                        dims.push(size);
                        index.push(AxisIndex::Fixed(rng.below(size) as i64));
                    }
                }
            }
            let earlier = results
                .iter()
                .rev()
                .find(|(_, d)| *d == dims)
                .map(|(id, _)| *id);
            let id = match earlier {
                Some(id) if !rng.one_in(3) => id,
                _ => {
                    let id = new_node(&dims, &mut nodes);
                    inputs.push(id);
                    id
                }
            };
            operands.push(id);
            rhs_dims.push(dims);
            rhs_index.push(index);
        }
        let mut lhs_dims = Vec::new();
        let mut lhs_index = Vec::new();
        if rng.one_in(6) {
            lhs_dims.push(2);
            lhs_index.push(AxisIndex::Fixed(1));
        }
        for (s, &range) in ranges.iter().enumerate() {
            if !rng.one_in(3) {
                lhs_dims.push(range);
                lhs_index.push(AxisIndex::Iterator(Symbol(s as u32)));
            }
        }
        let lhs = new_node(&lhs_dims, &mut nodes);
        let rhs = match arity {
            1 => Rhs::Unop(
                precisions.fit_unop(*rng.pick(&UNOPS), precision.kind()),
                operands[0],
            ),
            2 => {
                let op = if float && rng.one_in(4) {
                    *rng.pick(&FLOAT_BINOPS)
                } else {
                    *rng.pick(&BINOPS)
                };
                Rhs::Binop(op, operands[0], operands[1])
            }
            _ => {
                let op = if rng.one_in(2) {
                    Ternop::Where
                } else {
                    Ternop::Fma
                };
                Rhs::Ternop(op, operands[0], operands[1], operands[2])
            }
        };
        assignments.push(Assignment::Accum {
            initialize_neutral: !rng.one_in(4),
            accum: *rng.pick(&ACCUMULATORS),
            lhs,
            rhs,
            projections: Projections {
                product_space,
                lhs_padding: vec![(0, 0); lhs_dims.len()],
                rhs_padding: rhs_dims.iter().map(|d| vec![(0, 0); d.len()]).collect(),
                lhs_dims: lhs_dims.clone(),
                lhs_index,
                rhs_dims,
                rhs_index,
                label: "fuzz".to_owned(),
            },
        });
        results.push((lhs, lhs_dims));
    }
    let mut routine = Routine::lower("fuzz", &Assignment::Seq(assignments), nodes)
        .expect("the generator makes well-formed assignments");
    let optimized = rng.one_in(2);
    if optimized {
        // Inputs and the last result are kept; the optimizer decides about the others.
        let last = results.last().expect("at least one assignment").0;
        for (id, node) in &mut routine.nodes {
            if inputs.contains(id) || *id == last {
                node.memory_mode = Some(MemoryMode::Materialized);
            }
        }
    }
    let inputs = inputs
        .into_iter()
        .map(|id| {
            // Multiples of 1/4 in [-2, 2]: sums and products of a few are exact.
            let values = (0..routine.nodes[&id].len())
                .map(|_| rng.below(17) as f64 / 4.0 - 2.0)
                .collect();
            (id, values)
        })
        .collect();
    Program {
        routine,
        inputs,
        optimized,
    }
}

/// The routine a backend compiles for `program`.
pub fn compiled_form(program: &Program) -> Result<Routine, Mismatch> {
    if program.optimized {
        optimize(&program.routine).map_err(|e| Mismatch {
            seed: 0,
            message: format!("the optimizer failed: {e}\n{}", program.routine),
        })
    } else {
        Ok(program.routine.clone())
    }
}

/// Whether a compiled cell agrees with the interpreter's: integers and words exactly, floats
/// within `tolerance`.
fn agree(want: Value, got: Value, precision: Precision, tolerance: &Tolerance) -> bool {
    match (want, got) {
        (Value::Float(x), Value::Float(y)) => {
            // A value beyond a precision's range rounds to infinity on one side and not the
            // other when the intermediate precision differs; both are then "huge".
            close(x, y, tolerance.of(precision))
                || (x.abs() > 6e4 && y.abs() > 6e4 && x.signum() == y.signum())
        }
        (a, b) => a == b,
    }
}

/// The programs of `seeds`, and each as a backend compiles it.
fn programs_and_forms(seeds: &[u64]) -> Result<(Vec<Program>, Vec<Routine>), Mismatch> {
    let programs: Vec<Program> = seeds.iter().map(|&s| program(s)).collect();
    let forms = programs
        .iter()
        .zip(seeds)
        .map(|(p, &seed)| compiled_form(p).map_err(|m| Mismatch { seed, ..m }))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((programs, forms))
}

/// `forms` (of the programs of `seeds`) compiled by `compiler` into one library.
fn compile_batch(
    compiler: &Compiler,
    forms: &[Routine],
    seeds: &[u64],
) -> Result<Vec<CompiledRoutine>, Mismatch> {
    compiler.compile_batch(forms).map_err(|e| Mismatch {
        seed: seeds[0],
        message: format!("compiling seeds {seeds:?}: {e}"),
    })
}

/// Runs the programs of `seeds` on the interpreter and, compiled in one library, on the C
/// backend; the first mismatch, if any.
pub fn check(compiler: &Compiler, seeds: &[u64]) -> Result<(), Mismatch> {
    let (programs, forms) = programs_and_forms(seeds)?;
    let compiled = compile_batch(compiler, &forms, seeds)?;
    for (((program, form), compiled), &seed) in
        programs.iter().zip(&forms).zip(&compiled).zip(seeds)
    {
        let on_c = Compared {
            backend: "C",
            source: Some(&compiled.source),
            tolerance: &Tolerance::HOST,
        };
        on_c.compare(program, form, |buffers| {
            compiled.run(buffers, &HashMap::new())
        })
        .map_err(|message| Mismatch { seed, message })?;
    }
    Ok(())
}

/// Runs the programs of `seeds` compiled by `compiler` optimized and by its quick tier (each
/// batch in one library, on the same inputs): every stored cell must have the same bits (the
/// optimization level changes no result: see the C backend's `tiers`); the first mismatch, if
/// any. `None` where the compiler's flags do not optimize (there is no quick tier).
pub fn check_tiers(compiler: &Compiler, seeds: &[u64]) -> Option<Result<(), Mismatch>> {
    let quick = compiler.quick_tier()?;
    let optimized = compiler.clone().with_tiers(false);
    Some(check_tiers_of(&optimized, &quick, seeds))
}

/// [`check_tiers`] with its two compilers.
fn check_tiers_of(optimized: &Compiler, quick: &Compiler, seeds: &[u64]) -> Result<(), Mismatch> {
    let (programs, forms) = programs_and_forms(seeds)?;
    let (fast, slow) = (
        compile_batch(optimized, &forms, seeds)?,
        compile_batch(quick, &forms, seeds)?,
    );
    for (((program, form), (fast, slow)), &seed) in programs
        .iter()
        .zip(&forms)
        .zip(fast.iter().zip(&slow))
        .zip(seeds)
    {
        let mismatch = |message: String| Mismatch { seed, message };
        let run = |compiled: &CompiledRoutine| {
            let mut buffers = Buffers::for_routine(form).map_err(|e| mismatch(e.message))?;
            for (id, values) in &program.inputs {
                buffers
                    .set_values(*id, values)
                    .map_err(|e| mismatch(e.message))?;
            }
            compiled
                .run(&mut buffers, &HashMap::new())
                .map_err(|e| mismatch(e.message))?;
            Ok::<Buffers, Mismatch>(buffers)
        };
        let (optimized_cells, quick_cells) = (run(fast)?, run(slow)?);
        for (id, node) in &form.nodes {
            if node.memory_mode == Some(MemoryMode::Virtual) {
                continue;
            }
            let read = |buffers: &Buffers| buffers.read_cells(*id).map_err(|e| mismatch(e.message));
            let (want, got) = (read(&optimized_cells)?, read(&quick_cells)?);
            for (cell, (w, g)) in want.iter().zip(&got).enumerate() {
                if !same_bits(*w, *g) {
                    return Err(mismatch(format!(
                        "{id} cell {cell}: optimized {w:?}, quick {g:?}\n{form}\n{}",
                        fast.source
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Whether two cells hold the same bits (a float's sign of zero and NaN payload included).
fn same_bits(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (a, b) => a == b,
    }
}

/// Runs the programs of `seeds`, in the precisions `comparison` allows, on the interpreter and
/// on `backend` (each compiled on its own); the first mismatch, if any.
pub fn check_on(
    backend: &dyn Backend,
    seeds: &[u64],
    comparison: &Comparison,
) -> Result<(), Mismatch> {
    for &seed in seeds {
        let program = program_in(seed, comparison.precisions);
        let form = compiled_form(&program).map_err(|m| Mismatch { seed, ..m })?;
        let name = backend.name();
        let executable = backend.compile(&form).map_err(|e| Mismatch {
            seed,
            message: format!(
                "the {name} backend failed to compile: {}\n{}",
                e.message, program.routine
            ),
        })?;
        let on_backend = Compared {
            backend: name,
            source: executable.source(),
            tolerance: &comparison.tolerance,
        };
        on_backend
            .compare(&program, &form, |buffers| {
                executable.run(buffers, &HashMap::new())
            })
            .map_err(|message| Mismatch { seed, message })?;
    }
    Ok(())
}

/// A backend's run of a program, compared with the interpreter's.
struct Compared<'a> {
    /// The backend's name, for messages.
    backend: &'a str,
    /// The code it generated, shown with a mismatch.
    source: Option<&'a str>,
    tolerance: &'a Tolerance,
}

impl Compared<'_> {
    /// Runs `program` on the interpreter and `form` (the program as compiled) with `run`, and
    /// compares every stored cell.
    fn compare(
        &self,
        program: &Program,
        form: &Routine,
        run: impl FnOnce(&mut Buffers) -> Result<(), RunError>,
    ) -> Result<(), String> {
        let routine = &program.routine;
        let backend = self.backend;
        let mut interpreted = Buffers::for_routine(routine).map_err(|e| e.message)?;
        let mut native = Buffers::for_routine(form).map_err(|e| e.message)?;
        for (id, values) in &program.inputs {
            interpreted.set_values(*id, values).map_err(|e| e.message)?;
            native.set_values(*id, values).map_err(|e| e.message)?;
        }
        run_routine(routine, &mut interpreted, &HashMap::new())
            .map_err(|e| format!("the interpreter failed: {}\n{routine}", e.message))?;
        run(&mut native)
            .map_err(|e| format!("the {backend} backend failed: {}\n{routine}", e.message))?;
        for (id, node) in &form.nodes {
            if node.memory_mode == Some(MemoryMode::Virtual) {
                continue;
            }
            let want = interpreted.read_cells(*id).map_err(|e| e.message)?;
            let got = native.read_cells(*id).map_err(|e| e.message)?;
            for (cell, (w, g)) in want.iter().zip(&got).enumerate() {
                if !agree(*w, *g, node.precision, self.tolerance) {
                    let compiled = if program.optimized {
                        format!("optimized, as\n{form}")
                    } else {
                        "run as lowered".to_owned()
                    };
                    return Err(format!(
                        "{id} cell {cell}: interpreter {w:?}, {backend} {g:?}\n{routine}\n\
                         {compiled}\n{}",
                        self.source.unwrap_or("")
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_functions_of_their_seed_and_vary_with_it() {
        let (a, b) = (program(11), program(11));
        assert_eq!(a.routine.to_string(), b.routine.to_string());
        assert_eq!(a.inputs, b.inputs);
        let distinct: std::collections::HashSet<String> =
            (0..50).map(|s| program(s).routine.to_string()).collect();
        assert!(distinct.len() > 45, "{}", distinct.len());
    }

    #[test]
    fn programs_for_a_gpu_draw_the_same_cases_in_the_precisions_it_holds() {
        let gpu = Precisions::Gpu {
            f16: false,
            int64: false,
            f64: false,
        };
        let mut mapped = 0;
        for seed in 0..100 {
            let (host, device) = (program(seed), program_in(seed, gpu));
            for node in device.routine.nodes.values() {
                assert!(
                    node.precision == gpu.fit(node.precision)
                        && !matches!(
                            node.precision,
                            Precision::F16 | Precision::F64 | Precision::I64 | Precision::U64
                        ),
                    "seed {seed}: {}",
                    node.precision
                );
            }
            let precision = host.routine.nodes.values().next().unwrap().precision;
            let renamed = host.routine.to_string().replace(
                &format!(": {precision} ["),
                &format!(": {} [", gpu.fit(precision)),
            );
            mapped += usize::from(precision != gpu.fit(precision));
            // An integer program's exponential, reciprocal or logarithm is the identity there.
            let leaves_32_bits = ["exp(", "recip(", "log("]
                .iter()
                .any(|op| renamed.contains(op));
            if precision.kind() != Kind::Int || !leaves_32_bits {
                assert_eq!(renamed, device.routine.to_string(), "seed {seed}");
            }
            assert_eq!(host.inputs, device.inputs, "seed {seed}");
            assert_eq!(host.optimized, device.optimized, "seed {seed}");
        }
        assert!(
            mapped > 30,
            "{mapped} of 100 programs drew a precision a GPU lacks"
        );
    }
}
