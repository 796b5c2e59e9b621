//! A naive evaluator of numpy's einsum, written from numpy's documented rules and independent of
//! the library: it reads an equation for operands of given shapes ([`Plan::new`]) and sums the
//! product of the operands over every combination of the labels' and broadcast axes' positions
//! ([`Plan::evaluate`]).
//!
//! The rules it follows: labels are letters (any alphabetic character, as opt_einsum allows;
//! numpy's are ASCII); spaces are ignored, but a `.` belongs to a `...`, at most one per term; an
//! implicit result holds `...` when an operand has it, then the labels seen exactly once, in code
//! point order (capitals first); `...` stands for an operand's axes its labels leave over, aligned
//! at the right and broadcast against the other operands' (a size of 1 stretches); a label
//! repeated within an operand takes its diagonal (sizes there must be equal), and a label's size
//! of 1 in one operand stretches to its size in the others; an explicit result may not repeat a
//! label, may not name one no operand has, and must hold `...` when `...` stands for any axes.
//! A zero-size axis gives an empty result, or sums of nothing (zeros).

/// An axis the evaluation loops over: a label, or a position of the axes `...` stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisName {
    /// A label of the equation.
    Label(char),
    /// Position `p` (from the left) of the broadcast axes of `...`.
    Broadcast(usize),
}

/// One loop axis and its size (the operands' sizes for it, broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axis {
    /// What the axis is.
    pub name: AxisName,
    /// Its size after broadcasting.
    pub size: usize,
}

/// An equation read for operands of given shapes, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every loop axis: the labels in order of first appearance, then the broadcast positions.
    pub axes: Vec<Axis>,
    /// For each operand, the loop axis of each of its dimensions.
    pub operand_axes: Vec<Vec<usize>>,
    /// Each operand's shape, as given.
    pub operand_shapes: Vec<Vec<usize>>,
    /// The loop axis of each dimension of the result.
    pub result_axes: Vec<usize>,
    /// The result's shape (empty for a 0-d result).
    pub shape: Vec<usize>,
}

/// A result: its values in row-major order and, per cell, the sum of the absolute values of the
/// products added into it (the scale that rounding errors are relative to).
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The result's cells.
    pub values: Vec<f64>,
    /// `Σ |product|` per cell.
    pub magnitude: Vec<f64>,
}

/// One term of the equation: labels, and where `...` stands among them if it does.
#[derive(Debug, Clone)]
struct Term {
    labels: Vec<char>,
    ellipsis: Option<usize>,
}

fn parse_term(text: &str, what: &str) -> Result<Term, String> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' {
            i += 1;
        } else if c == '.' {
            if chars.get(i + 1) != Some(&'.') || chars.get(i + 2) != Some(&'.') {
                return Err(format!("{what}: a '.' that is not part of '...'"));
            }
            if ellipsis.is_some() {
                return Err(format!("{what}: more than one '...'"));
            }
            ellipsis = Some(labels.len());
            i += 3;
        } else if c.is_alphabetic() {
            labels.push(c);
            i += 1;
        } else {
            return Err(format!("{what}: {c:?} is not a label"));
        }
    }
    Ok(Term { labels, ellipsis })
}

impl Plan {
    /// Reads `equation` (numpy's notation) for operands of `shapes`, or says why numpy would
    /// refuse it.
    pub fn new(equation: &str, shapes: &[Vec<usize>]) -> Result<Plan, String> {
        let (inputs, output) = match equation.split_once("->") {
            Some((inputs, output)) => (inputs, Some(output)),
            None => (equation, None),
        };
        if inputs.contains(['-', '>']) || output.is_some_and(|o| o.contains(['-', '>'])) {
            return Err("a '-' or '>' that is not part of one '->'".to_owned());
        }
        let terms: Vec<Term> = inputs
            .split(',')
            .enumerate()
            .map(|(k, text)| parse_term(text, &format!("operand {k}")))
            .collect::<Result<_, _>>()?;
        if terms.len() != shapes.len() {
            return Err(format!(
                "{} terms for {} operands",
                terms.len(),
                shapes.len()
            ));
        }

        // The axes each operand's `...` stands for, and their broadcast.
        let mut covered: Vec<&[usize]> = Vec::new();
        for (k, (term, shape)) in terms.iter().zip(shapes).enumerate() {
            let count = match term.ellipsis {
                Some(_) => shape.len().checked_sub(term.labels.len()),
                None => (shape.len() == term.labels.len()).then_some(0),
            }
            .ok_or_else(|| {
                format!(
                    "operand {k}: {} labels for {} dimensions",
                    term.labels.len(),
                    shape.len()
                )
            })?;
            let at = term.ellipsis.unwrap_or(0);
            covered.push(&shape[at..at + count]);
        }
        let rank = covered.iter().map(|c| c.len()).max().unwrap_or(0);
        let mut broadcast = vec![1; rank];
        for (k, dims) in covered.iter().enumerate() {
            for (j, &size) in dims.iter().enumerate() {
                let p = rank - dims.len() + j;
                broadcast[p] = stretch(broadcast[p], size)
                    .ok_or_else(|| format!("operand {k}: '...' does not broadcast"))?;
            }
        }

        // Label sizes: equal within an operand, broadcast across operands.
        let mut axes: Vec<Axis> = Vec::new();
        for (k, (term, shape)) in terms.iter().zip(shapes).enumerate() {
            let at = term.ellipsis.unwrap_or(0);
            let mut own: Vec<(char, usize)> = Vec::new();
            for (j, &label) in term.labels.iter().enumerate() {
                let dim = if j < at { j } else { j + covered[k].len() };
                let size = shape[dim];
                match own.iter().find(|(c, _)| *c == label) {
                    Some(&(_, seen)) if seen != size => {
                        return Err(format!(
                            "operand {k}: label {label:?} repeated with sizes {seen} and {size}"
                        ));
                    }
                    Some(_) => {}
                    None => own.push((label, size)),
                }
            }
            for (label, size) in own {
                match axes.iter_mut().find(|a| a.name == AxisName::Label(label)) {
                    Some(axis) => {
                        axis.size = stretch(axis.size, size).ok_or_else(|| {
                            format!(
                                "operand {k}: label {label:?} of size {size} against {}",
                                axis.size
                            )
                        })?;
                    }
                    None => axes.push(Axis {
                        name: AxisName::Label(label),
                        size,
                    }),
                }
            }
        }
        let labels = axes.len();
        axes.extend(broadcast.iter().enumerate().map(|(p, &size)| Axis {
            name: AxisName::Broadcast(p),
            size,
        }));
        let label_axis = |c: char| axes.iter().position(|a| a.name == AxisName::Label(c));

        let operand_axes: Vec<Vec<usize>> = terms
            .iter()
            .zip(&covered)
            .map(|(term, dims)| {
                let at = term.ellipsis.unwrap_or(0);
                let mut row: Vec<usize> = term
                    .labels
                    .iter()
                    .map(|&c| label_axis(c).unwrap())
                    .collect();
                let spread = (rank - dims.len()..rank).map(|p| labels + p);
                row.splice(at..at, spread);
                row
            })
            .collect();

        let result = match output {
            Some(text) => {
                let term = parse_term(text, "the result")?;
                for (j, &c) in term.labels.iter().enumerate() {
                    if term.labels[..j].contains(&c) {
                        return Err(format!("the result repeats label {c:?}"));
                    }
                    if label_axis(c).is_none() {
                        return Err(format!("the result's label {c:?} is in no operand"));
                    }
                }
                if term.ellipsis.is_none() && rank > 0 {
                    return Err("'...' stands for axes but the result lacks it".to_owned());
                }
                term
            }
            None => {
                let mut once: Vec<char> = Vec::new();
                for axis in &axes[..labels] {
                    let AxisName::Label(c) = axis.name else {
                        continue;
                    };
                    let count: usize = terms
                        .iter()
                        .map(|t| t.labels.iter().filter(|&&l| l == c).count())
                        .sum();
                    if count == 1 {
                        once.push(c);
                    }
                }
                once.sort_unstable();
                let ellipsis = terms.iter().any(|t| t.ellipsis.is_some()).then_some(0);
                Term {
                    labels: once,
                    ellipsis,
                }
            }
        };
        let mut result_axes: Vec<usize> = result
            .labels
            .iter()
            .map(|&c| label_axis(c).unwrap())
            .collect();
        if let Some(at) = result.ellipsis {
            result_axes.splice(at..at, labels..labels + rank);
        }
        let shape = result_axes.iter().map(|&a| axes[a].size).collect();
        Ok(Plan {
            axes,
            operand_axes,
            operand_shapes: shapes.to_vec(),
            result_axes,
            shape,
        })
    }

    /// The einsum of operands holding `values` (row-major, one vector per operand): for every
    /// combination of positions along every loop axis, the product of the operands' cells there
    /// (an operand's dimension of 1 facing a longer axis read at 0) added into the result's cell.
    pub fn evaluate(&self, values: &[Vec<f64>]) -> Evaluation {
        let n = self.axes.len();
        let sizes: Vec<usize> = self.axes.iter().map(|a| a.size).collect();
        // strides[k][a]: how far operand k's offset (the result's for k = operands) moves per
        // step along loop axis a; a repeated label adds its dimensions' strides (a diagonal).
        let mut strides: Vec<Vec<usize>> = Vec::new();
        for (shape, axes) in self.operand_shapes.iter().zip(&self.operand_axes) {
            strides.push(axis_strides(shape, axes, &sizes));
        }
        strides.push(axis_strides(&self.shape, &self.result_axes, &sizes));
        let cells: usize = self.shape.iter().product();
        let mut out = Evaluation {
            values: vec![0.0; cells],
            magnitude: vec![0.0; cells],
        };
        if sizes.contains(&0) {
            return out;
        }
        let result = values.len();
        let mut offsets = vec![0usize; result + 1];
        let mut at = vec![0usize; n];
        loop {
            let product: f64 = (0..result).map(|k| values[k][offsets[k]]).product();
            out.values[offsets[result]] += product;
            out.magnitude[offsets[result]] += product.abs();
            // The next combination, the last axis fastest.
            let mut a = n;
            loop {
                if a == 0 {
                    return out;
                }
                a -= 1;
                at[a] += 1;
                if at[a] < sizes[a] {
                    for (offset, s) in offsets.iter_mut().zip(&strides) {
                        *offset += s[a];
                    }
                    break;
                }
                for (offset, s) in offsets.iter_mut().zip(&strides) {
                    *offset -= s[a] * (sizes[a] - 1);
                }
                at[a] = 0;
            }
        }
    }
}

/// The broadcast of two sizes along one axis, if they broadcast (equal, or one of them 1).
fn stretch(a: usize, b: usize) -> Option<usize> {
    match (a, b) {
        _ if a == b => Some(a),
        (1, _) => Some(b),
        (_, 1) => Some(a),
        _ => None,
    }
}

/// Per loop axis, the row-major stride a tensor of `shape` moves by along it: the sum over the
/// tensor's dimensions on that axis, except those of size 1 facing a longer axis (read at 0).
fn axis_strides(shape: &[usize], axes: &[usize], sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; sizes.len()];
    let mut step = 1;
    for (&dim, &axis) in shape.iter().zip(axes).rev() {
        if dim == sizes[axis] {
            strides[axis] += step;
        }
        step *= dim;
    }
    strides
}
