//! The shape of random values, as OCANNL's histogram tests check it: uniform draws fill equal
//! bins equally, normal ones fill the bins between the normal distribution's quantiles as its
//! probabilities say, on both CPU backends (which draw the same bits) and for parameters drawn at
//! initialization. Every seed is fixed, so each check is deterministic; its bound is a χ² (or a
//! deviation) that a fair generator exceeds with probability below 0.1%.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Init, Tensor};

/// Cells drawn in each check.
const CELLS: usize = 1 << 16;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// The values of `draw` applied to a tensor of [`CELLS`] cells, computed on `backend` with seed 11.
fn drawn(backend: Box<dyn Backend>, draw: impl Fn(&Graph, &Tensor) -> Tensor) -> Vec<f64> {
    let graph = Graph::new();
    let cells = graph
        .data("cells")
        .shape(&CELLS.to_string())
        .values(vec![0.0; CELLS])
        .build();
    let values = draw(&graph, &cells);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(11);
    let forward = ctx.forward(&[&values]).unwrap();
    ctx.run(&forward).unwrap();
    ctx.values(&values).unwrap()
}

/// Pearson's χ² of the counts of `values` between consecutive `edges` (the first bin from −∞,
/// the last to +∞) against the bins' probabilities `expected`.
fn chi_square(values: &[f64], edges: &[f64], expected: &[f64]) -> f64 {
    assert_eq!(edges.len() + 1, expected.len());
    let mut counts = vec![0usize; expected.len()];
    for v in values {
        counts[edges.partition_point(|edge| edge <= v)] += 1;
    }
    let n = values.len() as f64;
    counts
        .iter()
        .zip(expected)
        .map(|(&count, p)| (count as f64 - n * p).powi(2) / (n * p))
        .sum()
}

/// The χ² distribution's 99.9% quantiles for 9 and 19 degrees of freedom.
const CHI_SQUARE_9: f64 = 27.88;
const CHI_SQUARE_19: f64 = 43.82;

/// Twenty equal bins of `[low, high)`: their inner edges and probabilities.
fn equal_bins(low: f64, high: f64) -> (Vec<f64>, Vec<f64>) {
    let width = (high - low) / 20.0;
    (
        (1..20).map(|i| low + width * i as f64).collect(),
        vec![0.05; 20],
    )
}

/// Ten bins cut at 0, ±0.5, ±1, ±1.5 and ±2 standard deviations from `mean`, and the normal
/// distribution's probability of each (from Φ(0.5) = 0.6914625, Φ(1) = 0.8413447,
/// Φ(1.5) = 0.9331928, Φ(2) = 0.9772499).
fn normal_bins(mean: f64, deviation: f64) -> (Vec<f64>, Vec<f64>) {
    let upper = [0.5, 0.691_462_5, 0.841_344_7, 0.933_192_8, 0.977_249_9, 1.0];
    let half: Vec<f64> = upper.windows(2).map(|w| w[1] - w[0]).collect();
    let expected: Vec<f64> = half.iter().rev().chain(&half).copied().collect();
    let edges = [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]
        .iter()
        .map(|z| mean + z * deviation)
        .collect();
    (edges, expected)
}

#[test]
fn uniform_draws_fill_twenty_equal_bins_evenly() {
    let mut per_backend = Vec::new();
    for backend in backends() {
        let name = backend.name();
        let values = drawn(backend, |_, cells| cells.uniform_like());
        assert_eq!(values.len(), CELLS);
        assert!(
            values.iter().all(|v| (0.0..1.0).contains(v)),
            "{name}: a value outside [0, 1)"
        );
        let (edges, expected) = equal_bins(0.0, 1.0);
        let chi = chi_square(&values, &edges, &expected);
        assert!(chi < CHI_SQUARE_19, "{name}: χ² {chi} over 20 bins");
        per_backend.push(values);
    }
    assert_eq!(
        per_backend[0], per_backend[1],
        "the backends drew differently"
    );
}

#[test]
fn normal_draws_fill_the_bins_between_quantiles_as_the_bell_says() {
    let mut per_backend = Vec::new();
    for backend in backends() {
        let name = backend.name();
        let values = drawn(backend, |_, cells| cells.normal_like());
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let kurtosis =
            values.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n / variance.powi(2);
        // The mean's deviation is 1/√n ≈ 0.004, the variance's √(2/n) ≈ 0.0055, the
        // kurtosis's √(24/n) ≈ 0.019: each bound is over 4 of them.
        assert!(mean.abs() < 0.02, "{name}: mean {mean}");
        assert!(
            (variance - 1.0).abs() < 0.025,
            "{name}: variance {variance}"
        );
        assert!((kurtosis - 3.0).abs() < 0.08, "{name}: kurtosis {kurtosis}");
        let (edges, expected) = normal_bins(0.0, 1.0);
        let chi = chi_square(&values, &edges, &expected);
        assert!(chi < CHI_SQUARE_9, "{name}: χ² {chi} over 10 bins");
        per_backend.push(values);
    }
    assert_eq!(
        per_backend[0], per_backend[1],
        "the backends drew differently"
    );
}

#[test]
fn parameters_drawn_at_initialization_have_their_distributions_shape() {
    let cases = [
        (
            Init::Uniform(-2.0, 3.0),
            equal_bins(-2.0, 3.0),
            CHI_SQUARE_19,
        ),
        (Init::Normal(1.0, 0.5), normal_bins(1.0, 0.5), CHI_SQUARE_9),
    ];
    for (init, (edges, expected), bound) in cases {
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape(&CELLS.to_string())
            .init(init.clone())
            .build();
        let mut ctx = Context::new(&graph);
        ctx.set_seed(11);
        ctx.init_params().unwrap();
        let values = ctx.values(&w).unwrap();
        assert_eq!(values.len(), CELLS);
        let chi = chi_square(&values, &edges, &expected);
        assert!(
            chi < bound,
            "{init:?}: χ² {chi} over {} bins",
            expected.len()
        );
    }
}

/// The check has teeth: values squeezed towards the middle, or a uniform draw read as a normal
/// one, fail it.
#[test]
fn the_chi_square_check_refuses_values_of_another_shape() {
    let uniform = drawn(Box::new(Interpreter), |_, cells| cells.uniform_like());
    let squeezed: Vec<f64> = uniform.iter().map(|u| 0.5 + 0.9 * (u - 0.5)).collect();
    let (edges, expected) = equal_bins(0.0, 1.0);
    assert!(chi_square(&squeezed, &edges, &expected) > CHI_SQUARE_19);
    // A uniform on [−√3, √3) has the normal's mean and variance, not its shape.
    let flat: Vec<f64> = uniform
        .iter()
        .map(|u| (2.0 * u - 1.0) * 3f64.sqrt())
        .collect();
    let (edges, expected) = normal_bins(0.0, 1.0);
    assert!(chi_square(&flat, &edges, &expected) > CHI_SQUARE_9);
}
