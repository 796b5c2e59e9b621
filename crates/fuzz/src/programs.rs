//! Random programs against the library API, over values with NaN, infinities and signed zeros,
//! one in three with a misuse: leaves with values that do not fit their shapes, meaningless
//! inits, operations over tensors of two graphs or of shapes that cannot agree, host access with
//! wrong lengths or foreign tensors, routines run before their parameters hold values or in
//! another context.
//!
//! Programs run on the interpreter then also misuse state (the `state` module): reads of tensors
//! no routine computed, data never given values, updates reading computed tensors, gradients
//! and parameters, batch normalization applied in train mode outside the loss, and gathers.
//!
//! Every program runs its forward routine on the interpreter (and one in eight on the C backend
//! too). It must never panic; every misuse must be an error; and a program that succeeds must
//! give, for every output, the values a direct evaluation in plain Rust gives (numpy's meaning:
//! NaN propagates through every operation, maxima included). Everything is f64, so the only
//! rounding the two sides may differ in is the order of a sum's terms.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, Tensor};

use crate::rng::{Draw, Rng};
use crate::{Mismatch, close};

/// What a run of programs did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Programs that ran and gave the direct evaluation's values.
    pub agreed: u64,
    /// Programs refused with an error, as their misuse required.
    pub refused: u64,
    /// Programs that then misused state (the `state` module) and were refused or gave the right
    /// values.
    pub state_misuses: u64,
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// It ran and agreed with a direct evaluation; whether it then misused state.
    Agreed { misused_state: bool },
    /// It was refused, as its misuse required.
    Refused,
}

/// A tensor of the program's graph, with its values as a direct evaluation gives them (`None`
/// where the program made it from a misuse).
struct Made {
    tensor: Tensor,
    values: Option<Vec<f64>>,
    /// Whether it has no axes (a reduction's result), so that nothing reduces it again.
    scalar: bool,
}

/// One value of the kinds that trouble numerics.
fn awkward(rng: &mut Rng) -> f64 {
    match rng.below(12) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => -0.0,
        4 => 0.0,
        _ => (rng.uniform() * 8.0 - 4.0).round() / 2.0,
    }
}

/// numpy's maximum and minimum: a NaN operand wins; ties keep the first.
fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

fn relu(x: f64) -> f64 {
    if x.is_nan() || x > 0.0 { x } else { 0.0 }
}

fn sat01(x: f64) -> f64 {
    if x.is_nan() { x } else { x.clamp(0.0, 1.0) }
}

/// The program `seed` makes, run: `Ok(true)` when it ran and agreed, `Ok(false)` when it was
/// refused as its misuse required, `Err` with what went wrong otherwise.
fn program(seed: u64, compiler: Option<&Compiler>) -> Result<Outcome, String> {
    let mut rng = Rng::new(seed);
    let graph = Graph::new();
    let other = Graph::new();
    let stranger = other
        .data("stranger")
        .shape("3")
        .precision(Precision::F64)
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let mut made: Vec<Made> = Vec::new();
    let mut recipe: Vec<String> = Vec::new();
    // The first misuse the program commits: a run must then fail.
    let mut misuse: Option<String> = None;
    let mut params: Vec<usize> = Vec::new();
    // One program in three misuses the library somewhere; the others must run.
    let abuse = rng.one_in(3);
    for step in 0..rng.between(3, 14) {
        let n = rng.between(1, 5);
        let pick_len = |rng: &mut Rng, made: &[Made], n: usize| -> Option<usize> {
            let fits: Vec<usize> = (0..made.len())
                .filter(|&i| made[i].values.as_ref().is_some_and(|v| v.len() == n))
                .collect();
            (!fits.is_empty()).then(|| *rng.pick(&fits))
        };
        let any = if made.is_empty() {
            None
        } else {
            Some(rng.below(made.len()))
        };
        let kinds = match (made.is_empty(), abuse) {
            (true, _) => 2,
            (false, false) => 8,
            (false, true) => 10,
        };
        match rng.below(kinds) {
            0 => {
                let values: Vec<f64> = (0..n).map(|_| awkward(&mut rng)).collect();
                let wrong = abuse && rng.one_in(6);
                let given = if wrong {
                    values[..n - 1].to_vec()
                } else {
                    values.clone()
                };
                let tensor = graph
                    .data(&format!("d{step}"))
                    .shape(&n.to_string())
                    .precision(Precision::F64)
                    .values(given)
                    .build();
                recipe.push(format!(
                    "d{step} = data {values:?}{}",
                    if wrong { " (one short)" } else { "" }
                ));
                if wrong {
                    misuse.get_or_insert_with(|| format!("d{step} has too few values"));
                }
                made.push(Made {
                    tensor,
                    values: (!wrong).then_some(values),
                    scalar: false,
                });
            }
            1 => {
                let (init, values) = match rng.below(if abuse { 6 } else { 4 }) {
                    4 => (Init::Uniform(1.0, -1.0), None),
                    5 => (Init::Normal(0.0, f64::NAN), None),
                    _ => {
                        let c = (rng.below(9) as f64 - 4.0) / 2.0;
                        (Init::Constant(c), Some(vec![c; n]))
                    }
                };
                let tensor = graph
                    .param(&format!("p{step}"))
                    .shape(&n.to_string())
                    .precision(Precision::F64)
                    .init(init.clone())
                    .build();
                recipe.push(format!("p{step} = param {n} {init:?}"));
                if values.is_none() {
                    misuse.get_or_insert_with(|| format!("p{step} has init {init:?}"));
                }
                params.push(made.len());
                made.push(Made {
                    tensor,
                    values,
                    scalar: false,
                });
            }
            2 | 3 => {
                let Some(i) = pick_len(&mut rng, &made, n).or(any) else {
                    continue;
                };
                let x = &made[i];
                let (name, tensor, f): (_, _, fn(f64) -> f64) = match rng.below(5) {
                    0 => ("neg", x.tensor.neg(), |v: f64| -v),
                    1 => ("relu", x.tensor.relu(), relu),
                    2 => ("sat01", x.tensor.sat01(), sat01),
                    3 => ("sqrt", x.tensor.sqrt(), f64::sqrt),
                    _ => ("recip", x.tensor.recip(), |v: f64| 1.0 / v),
                };
                recipe.push(format!("t{step} = {name} #{i}"));
                let values = x.values.as_ref().map(|v| v.iter().map(|&v| f(v)).collect());
                let scalar = x.scalar;
                made.push(Made {
                    tensor,
                    values,
                    scalar,
                });
            }
            4..=6 => {
                let Some(i) = any else { continue };
                let len = made[i].values.as_ref().map_or(0, Vec::len);
                let Some(j) = pick_len(&mut rng, &made, len).or(any) else {
                    continue;
                };
                let (a, b) = (&made[i], &made[j]);
                let (name, tensor, f): (_, _, fn(f64, f64) -> f64) = match rng.below(6) {
                    0 => ("+", &a.tensor + &b.tensor, |x, y| x + y),
                    1 => ("-", &a.tensor - &b.tensor, |x, y| x - y),
                    2 => ("/", &a.tensor / &b.tensor, |x, y| x / y),
                    3 => ("pmul", a.tensor.pmul(&b.tensor), |x, y| x * y),
                    4 => ("max", a.tensor.max(&b.tensor), maximum),
                    _ => ("min", a.tensor.min(&b.tensor), minimum),
                };
                recipe.push(format!("t{step} = #{i} {name} #{j}"));
                let values = match (&a.values, &b.values) {
                    (Some(x), Some(y)) if x.len() == y.len() => {
                        Some(x.iter().zip(y).map(|(&x, &y)| f(x, y)).collect())
                    }
                    _ => None,
                };
                let scalar = a.scalar && b.scalar;
                made.push(Made {
                    tensor,
                    values,
                    scalar,
                });
            }
            7 => {
                let axes: Vec<usize> = (0..made.len()).filter(|&i| !made[i].scalar).collect();
                if axes.is_empty() {
                    continue;
                }
                let i = *rng.pick(&axes);
                let x = &made[i];
                let (name, tensor, values) = if rng.one_in(2) {
                    let sum = x.values.as_ref().map(|v| vec![v.iter().sum()]);
                    ("sum", x.tensor.einsum1("i=>"), sum)
                } else {
                    let max = x
                        .values
                        .as_ref()
                        .map(|v| vec![v.iter().fold(f64::NEG_INFINITY, |m, &v| maximum(m, v))]);
                    ("einmax", x.tensor.einmax1("i=>"), max)
                };
                recipe.push(format!("t{step} = {name} #{i}"));
                made.push(Made {
                    tensor,
                    values,
                    scalar: true,
                });
            }
            8 => {
                // Shapes that cannot agree: an output axis of 2 against one of 3.
                let Some(i) = pick_len(&mut rng, &made, 2) else {
                    continue;
                };
                let Some(j) = pick_len(&mut rng, &made, 3) else {
                    continue;
                };
                let tensor = &made[i].tensor + &made[j].tensor;
                recipe.push(format!("t{step} = #{i} + #{j} (2 against 3)"));
                misuse.get_or_insert_with(|| format!("t{step} adds a 2 to a 3"));
                made.push(Made {
                    tensor,
                    values: None,
                    scalar: false,
                });
            }
            _ => {
                let Some(i) = any else { continue };
                let tensor = &made[i].tensor + &stranger;
                recipe.push(format!("t{step} = #{i} + a tensor of another graph"));
                if tensor.error().is_none() {
                    return Err(format!(
                        "mixing graphs built a tensor\n{}",
                        recipe.join("\n")
                    ));
                }
                misuse.get_or_insert_with(|| format!("t{step} mixes graphs"));
                made.push(Made {
                    tensor,
                    values: None,
                    scalar: false,
                });
            }
        }
    }
    let describe = |what: String| format!("{what}\n{}", recipe.join("\n"));
    let outputs: Vec<&Tensor> = made.iter().map(|m| &m.tensor).collect();
    // Computed but not an output: no routine computes them.
    let hidden: Vec<Tensor> = made
        .iter()
        .filter(|m| m.values.is_some() && rng.one_in(2))
        .map(|m| m.tensor.exp())
        .collect();
    let backend: Box<dyn Backend> = match compiler {
        Some(compiler) => Box::new(compiler.clone()),
        None => Box::new(Interpreter),
    };
    let mut ctx = Context::with_backend(&graph, backend);
    // Host access with a foreign tensor is refused whatever else happens.
    if ctx.values(&stranger).is_ok() || ctx.set_values(&stranger, &[0.0; 3]).is_ok() {
        return Err(describe(
            "the context gave access to another graph's tensor".into(),
        ));
    }
    let forward = match ctx.forward(&outputs) {
        Ok(forward) => forward,
        Err(_) if misuse.is_some() => return Ok(Outcome::Refused),
        Err(e) => return Err(describe(format!("forward failed: {e}"))),
    };
    if let Some(misuse) = &misuse {
        return Err(describe(format!("forward compiled although {misuse}")));
    }
    let initialize = !(abuse && rng.one_in(3));
    if initialize {
        ctx.init_params()
            .map_err(|e| describe(format!("init_params: {e}")))?;
    }
    let ran = ctx.run(&forward);
    match (ran, initialize || params.is_empty()) {
        (Ok(()), true) => {}
        (Err(e), true) => return Err(describe(format!("run failed: {e}"))),
        (Ok(()), false) => {
            return Err(describe(
                "a routine reading parameters that hold no values ran".into(),
            ));
        }
        (Err(_), false) => return Ok(Outcome::Refused),
    }
    crate::state::uncomputed_read(&ctx, &hidden).map_err(describe)?;
    for (i, m) in made.iter().enumerate() {
        let Some(expected) = &m.values else { continue };
        let got = ctx
            .values(&m.tensor)
            .map_err(|e| describe(format!("values of #{i}: {e}")))?;
        let agree = got.len() == expected.len()
            && got.iter().zip(expected).all(|(&g, &e)| {
                (g.is_nan() && e.is_nan()) || g.to_bits() == e.to_bits() || close(g, e, 1e-12)
            });
        if !agree {
            return Err(describe(format!(
                "#{i} ({}) on {}: {got:?}, a direct evaluation gives {expected:?}",
                m.tensor.label(),
                ctx.backend_name()
            )));
        }
    }
    // Setting values of the wrong length is refused and changes nothing.
    if let Some(m) = made.iter().find(|m| m.values.is_some()) {
        let bits = |ctx: &Context| -> Result<Vec<u64>, String> {
            let values = ctx.values(&m.tensor).map_err(|e| e.message)?;
            Ok(values.iter().map(|v| v.to_bits()).collect())
        };
        let before = bits(&ctx)?;
        if ctx
            .set_values(&m.tensor, &vec![0.0; before.len() + 1])
            .is_ok()
        {
            return Err(describe("set_values of the wrong length was taken".into()));
        }
        if bits(&ctx)? != before {
            return Err(describe("a refused set_values changed the values".into()));
        }
    }
    // State misuses on the interpreter: what they check is the context's, not the backend's.
    let known = made.iter().find_map(|m| {
        let values = m.values.as_deref()?;
        Some(crate::state::Known {
            tensor: &m.tensor,
            values,
        })
    });
    let misused_state = match known {
        Some(known) if compiler.is_none() => {
            crate::state::misuses(&mut rng, &graph, &mut ctx, &known).map_err(describe)?;
            true
        }
        _ => false,
    };
    Ok(Outcome::Agreed { misused_state })
}

/// Runs the program of each seed in `seeds` (on the C backend too, for one in eight, when
/// `compiler` is given): the tally, or the first seed that panicked, accepted a misuse or gave
/// values a direct evaluation does not.
pub fn check(compiler: Option<&Compiler>, seeds: std::ops::Range<u64>) -> Result<Tally, Mismatch> {
    let mut tally = Tally::default();
    for seed in seeds {
        let compiler = compiler.filter(|_| seed % 8 == 7);
        let outcome = catch_unwind(AssertUnwindSafe(|| program(seed, compiler)));
        match outcome {
            Ok(Ok(Outcome::Agreed { misused_state })) => {
                tally.agreed += 1;
                tally.state_misuses += u64::from(misused_state);
            }
            Ok(Ok(Outcome::Refused)) => tally.refused += 1,
            Ok(Err(message)) => return Err(Mismatch { seed, message }),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                return Err(Mismatch {
                    seed,
                    message: format!("panicked: {message}"),
                });
            }
        }
    }
    Ok(tally)
}
