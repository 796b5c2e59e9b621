//! Parameters' random draws as a tensor expression, compiled and run on the host.
//!
//! A parameter's uniform values are OCANNL's composition of counter-based randomness:
//!
//! ```text
//! low + (high − low) ⊙ uniform(threefry(threefry(seed, id), counter))
//! ```
//!
//! - `threefry(seed, id)` hashes the context's seed under the parameter's id into its key;
//! - `threefry(key, counter)` hashes the key under each 128-bit word's position;
//! - `uniform` fans each word out into two f64 uniforms in [0, 1): cell `i` takes value `i`.
//!
//! A normal draw is Box–Muller's `mean + std ⊙ √(−2 ln(1 − u₁)) ⊙ cos(2π u₂)` (one fused
//! multiply-add) of two such draws, the second's counters following the first's.
//!
//! The ids, counters, lows and spans are data rather than constants. So one expression computes
//! every parameter's draws, the words of all of them laid end to end, and its routine does not
//! depend on the parameters, their number or their sizes: it is compiled once for each size of
//! chunk (a power of two), and the C backend's cache keeps it across runs. It runs on the host,
//! in f64, whichever backend the parameters live on: on the interpreter when the words are few
//! (so that a cold start does not wait for a C compiler to build it), else on the host's default
//! backend (the C backend when a C compiler runs). Both compute the same bits. Each value is rounded once, when it is stored into
//! its parameter's precision, so every backend holds the same bits.

use rcannl_backends::{Backend, Interpreter, default_backend};
use rcannl_ir::{MemoryMode, Precision, VecUnop};

use crate::graph::{Graph, Random, TensorError};
use crate::tensor::Tensor;

use super::Context;

/// One parameter to draw: its tensor index (its id), its number of cells, and its draw.
#[derive(Debug, Clone, Copy)]
pub(super) struct Request {
    pub(super) t: usize,
    pub(super) cells: usize,
    pub(super) random: Random,
}

/// How many f64 values one 128-bit word makes.
fn per_word() -> usize {
    VecUnop::Uint4x32ToPrecUniform.length(Precision::F64)
}

/// The fewest words of one run of the expression: fewer are padded.
const FEWEST_WORDS: usize = 64;

/// The most words of one run of the expression: more are drawn in runs of this many.
const MOST_WORDS: usize = 1 << 16;

/// The most words the interpreter draws: a few milliseconds' work for it, about what the C
/// backend takes to load the compiled expression from its cache, where building it takes a C
/// compiler about a tenth of a second (when the cache does not hold it). The interpreter's time
/// grows with the words; the compiled expression's hardly.
const INTERPRETED_WORDS: usize = 1 << 10;

/// The values of each request, in order, drawn with `seed` on the host: by the interpreter
/// where they are few, else on the host's default backend.
pub(super) fn draw(seed: u64, requests: &[Request]) -> Result<Vec<Vec<f64>>, TensorError> {
    let backend = |words: usize| -> Box<dyn Backend> {
        if words <= INTERPRETED_WORDS {
            Box::new(Interpreter)
        } else {
            default_backend()
        }
    };
    draw_on(&backend, seed, requests, MOST_WORDS)
}

/// [`draw`] on the backend `backend` gives for a number of words, in runs of at most `most`
/// words.
fn draw_on(
    backend: &dyn Fn(usize) -> Box<dyn Backend>,
    seed: u64,
    requests: &[Request],
    most: usize,
) -> Result<Vec<Vec<f64>>, TensorError> {
    let mut values = vec![Vec::new(); requests.len()];
    for normal in [false, true] {
        let chosen: Vec<usize> = (0..requests.len())
            .filter(|&r| matches!(requests[r].random, Random::Normal(..)) == normal)
            .collect();
        let total: usize = chosen
            .iter()
            .map(|&r| requests[r].cells.div_ceil(per_word()))
            .sum();
        if total == 0 {
            continue;
        }
        let chunk = total.next_power_of_two().clamp(FEWEST_WORDS, most);
        let mut evaluator = Evaluator::new(backend(total), seed, normal, chunk)?;
        let mut run = Run::default();
        for r in chosen {
            let Request { t, cells, random } = requests[r];
            let words = cells.div_ceil(per_word());
            let mut first = 0;
            while first < words {
                let taken = (chunk - run.ids.len()).min(words - first);
                run.push(r, t, first..first + taken, words, random);
                first += taken;
                if run.ids.len() == chunk {
                    evaluator.evaluate(&mut run, &mut values)?;
                }
            }
        }
        if !run.ids.is_empty() {
            evaluator.evaluate(&mut run, &mut values)?;
        }
    }
    // A parameter of an odd number of cells leaves its last word's second value unused.
    for (values, request) in values.iter_mut().zip(requests) {
        values.truncate(request.cells);
    }
    Ok(values)
}

/// The data of one run of the expression: words of the parameters drawn alike, end to end.
#[derive(Debug, Default)]
struct Run {
    /// Each word's parameter id.
    ids: Vec<f64>,
    /// Each word's position in its parameter's stream, in the first draw and in a normal's
    /// second, which follows the first: a parameter's stream is one run of words, of which each
    /// draw takes its share in turn.
    counters: [Vec<f64>; 2],
    /// Each value's low bound (a normal's mean).
    lows: Vec<f64>,
    /// Each value's span (a normal's deviation).
    spans: Vec<f64>,
    /// Whose words these are, in order: the request and its number of words here.
    owners: Vec<(usize, usize)>,
}

impl Run {
    /// Appends the words `taken` of the draw `random` of request `r`, of parameter id `t` and
    /// `words` words in all.
    fn push(
        &mut self,
        r: usize,
        t: usize,
        taken: std::ops::Range<usize>,
        words: usize,
        random: Random,
    ) {
        let count = taken.len();
        self.ids.extend(std::iter::repeat_n(t as f64, count));
        let (low, span, draws) = match random {
            Random::Uniform(low, high) => (low, high - low, 1),
            Random::Normal(mean, std) => (mean, std, 2),
        };
        for (draw, counters) in self.counters.iter_mut().enumerate().take(draws) {
            counters.extend(taken.clone().map(|w| (draw * words + w) as f64));
        }
        self.lows
            .extend(std::iter::repeat_n(low, count * per_word()));
        self.spans
            .extend(std::iter::repeat_n(span, count * per_word()));
        self.owners.push((r, count));
    }
}

/// The expression compiled for runs of one size, with the context holding its data.
struct Evaluator {
    ctx: Context,
    expression: Expression,
    routine: super::Routine,
    chunk: usize,
}

impl Evaluator {
    fn new(
        backend: Box<dyn Backend>,
        seed: u64,
        normal: bool,
        chunk: usize,
    ) -> Result<Evaluator, TensorError> {
        let graph = Graph::new();
        let expression = Expression::new(&graph, chunk, normal);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.forward(&[&expression.values])?;
        ctx.set_values(&expression.seed, &[seed as f64])?;
        Ok(Evaluator {
            ctx,
            expression,
            routine,
            chunk,
        })
    }

    /// Draws `run`'s words (padded to a chunk), appends each owner's values to its own, and
    /// empties `run`.
    fn evaluate(&mut self, run: &mut Run, values: &mut [Vec<f64>]) -> Result<(), TensorError> {
        let chunk = self.chunk;
        let padded = |data: &mut Vec<f64>, per: usize| {
            data.resize(chunk * per, 0.0);
            std::mem::take(data)
        };
        let (ctx, expression) = (&mut self.ctx, &self.expression);
        ctx.set_values(&expression.ids, &padded(&mut run.ids, 1))?;
        for (tensor, counters) in expression.counters.iter().zip(&mut run.counters) {
            ctx.set_values(tensor, &padded(counters, 1))?;
        }
        ctx.set_values(&expression.lows, &padded(&mut run.lows, per_word()))?;
        ctx.set_values(&expression.spans, &padded(&mut run.spans, per_word()))?;
        ctx.run(&self.routine)?;
        let drawn = ctx.values(&expression.values)?;
        let mut at = 0;
        for (r, words) in run.owners.drain(..) {
            values[r].extend_from_slice(&drawn[at..at + words * per_word()]);
            at += words * per_word();
        }
        Ok(())
    }
}

/// The draws' expression over one chunk of words, and the data it reads.
struct Expression {
    seed: Tensor,
    ids: Tensor,
    /// The counters of the first draw, and of a normal's second.
    counters: Vec<Tensor>,
    lows: Tensor,
    spans: Tensor,
    values: Tensor,
}

impl Expression {
    fn new(graph: &Graph, words: usize, normal: bool) -> Expression {
        let data = |label: &str, axes: &[usize], precision: Precision| {
            graph
                .data(label)
                .batch([0usize; 0])
                .input([0usize; 0])
                .output(axes.iter().copied())
                .precision(precision)
                .build()
        };
        let seed = data("seed", &[], Precision::I64);
        let ids = data("ids", &[words], Precision::I64);
        let counters: Vec<Tensor> = (0..if normal { 2 } else { 1 })
            .map(|d| data(&format!("counters {d}"), &[words], Precision::U32))
            .collect();
        let lows = data("lows", &[words * per_word()], Precision::F64);
        let spans = data("spans", &[words * per_word()], Precision::F64);
        let key = seed.threefry(&ids);
        if normal {
            // Held rather than recomputed where read: both draws read each word's key.
            key.set_memory_mode(MemoryMode::Materialized);
        }
        let uniform = |counters: &Tensor| key.threefry(counters).to_uniform(Precision::F64);
        let number = |value: f64| graph.number_in(value, Precision::F64);
        let u1 = uniform(&counters[0]);
        let values = match counters.get(1) {
            // A normal draw.
            Some(second) => {
                let u2 = uniform(second);
                // √(−2 ln(1 − u₁)) · cos(2π u₂): 1 − u₁ lies in (0, 1].
                let radius = number(-2.0).pmul(&(&number(1.0) - &u1).log()).sqrt();
                let angle = number(std::f64::consts::TAU).pmul(&u2).cos();
                Tensor::fma(&spans, &radius.pmul(&angle), &lows)
            }
            None => &lows + &spans.pmul(&u1),
        };
        Expression {
            seed,
            ids,
            counters,
            lows,
            spans,
            values,
        }
    }
}

#[cfg(test)]
mod tests {
    use rcannl_backends::cc::Compiler;

    use super::*;

    /// Parameters of odd and even sizes, uniform and normal, some spanning several runs.
    fn requests() -> Vec<Request> {
        [(3, 1), (4, 7), (9, 300), (12, 2), (20, 129)]
            .into_iter()
            .flat_map(|(t, cells)| {
                [
                    Request {
                        t,
                        cells,
                        random: Random::Uniform(-0.5, 2.0),
                    },
                    Request {
                        t: t + 1,
                        cells,
                        random: Random::Normal(1.0, 0.25),
                    },
                ]
            })
            .collect()
    }

    /// The draws do not depend on the backend that computes them, nor on how the words are cut
    /// into runs, nor on the other parameters drawn beside: each parameter's values are those
    /// it has drawn alone.
    #[test]
    fn draws_depend_on_the_seed_and_the_parameter_only() {
        let requests = requests();
        let interpreted = draw_on(&|_| Box::new(Interpreter), 5, &requests, 64).unwrap();
        let compiler = Compiler::find().expect("a C compiler");
        let compiled = draw_on(&|_| Box::new(compiler.clone()), 5, &requests, 1 << 16).unwrap();
        assert_eq!(interpreted, compiled);
        for (request, values) in requests.iter().zip(&interpreted) {
            assert_eq!(values.len(), request.cells);
            let alone = draw_on(&|_| Box::new(Interpreter), 5, &[*request], 1 << 16).unwrap();
            assert_eq!(alone[0], *values, "{request:?}");
        }
        for seed in [6, u64::MAX] {
            let reseeded = draw_on(&|_| Box::new(Interpreter), seed, &requests, 1 << 16).unwrap();
            for (a, b) in interpreted.iter().zip(&reseeded) {
                assert!(a.iter().zip(b).all(|(a, b)| a != b), "seed {seed}");
            }
        }
    }
}
