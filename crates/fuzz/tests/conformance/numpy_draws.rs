//! Random numpy-notation einsums as proptest strategies: one to four operands, repeated
//! labels, capitals among the labels, `...` anywhere in a term standing for up to two broadcast
//! axes, axes of size 1 facing longer ones, now and then a zero-size axis, implicit and explicit
//! results, spaces. Every expression drawn is one numpy accepts.

use proptest::prelude::*;

/// The labels expressions draw from: capitals sort before lower case in an implicit result.
pub const LABELS: [char; 6] = ['a', 'b', 'c', 'd', 'A', 'B'];

/// One operand as drawn: labels (indices into [`LABELS`]) with, per label, whether this operand
/// has size 1 there; where `...` goes (clamped to the labels) and how many of the broadcast axes
/// it stands for (clamped to them, taken from the right), with which of those are 1 here.
#[derive(Debug, Clone)]
pub struct OperandDraw {
    pub labels: Vec<(usize, bool)>,
    pub ellipsis: Option<(usize, usize, [bool; 2])>,
}

/// A whole expression as drawn.
#[derive(Debug, Clone)]
pub struct Draw {
    /// Size per label.
    pub sizes: Vec<usize>,
    /// The broadcast axes `...` may stand for.
    pub broadcast: Vec<usize>,
    pub operands: Vec<OperandDraw>,
    /// An explicit result: labels (kept if some operand has them, once) and where `...` goes.
    pub result: Option<(Vec<usize>, usize)>,
    /// Whether terms are separated by spaces as well.
    pub spaced: bool,
}

/// An expression ready to run: the equation and the operands' shapes.
#[derive(Debug, Clone)]
pub struct Expression {
    pub equation: String,
    pub shapes: Vec<Vec<usize>>,
}

pub fn size() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 2..=3usize, 3 => Just(1), 1 => Just(0)]
}

pub fn operand() -> impl Strategy<Value = OperandDraw> {
    (
        proptest::collection::vec((0..LABELS.len(), proptest::bool::weighted(0.25)), 0..=3),
        proptest::option::weighted(
            0.5,
            (
                0..=3usize,
                0..=2usize,
                proptest::array::uniform2(proptest::bool::weighted(0.25)),
            ),
        ),
    )
        .prop_map(|(labels, ellipsis)| OperandDraw { labels, ellipsis })
}

pub fn draw() -> impl Strategy<Value = Draw> {
    (
        proptest::collection::vec(size(), LABELS.len()),
        proptest::collection::vec(2..=3usize, 0..=2),
        proptest::collection::vec(operand(), 1..=4),
        proptest::option::of((
            proptest::collection::vec(0..LABELS.len(), 0..=4),
            0..=4usize,
        )),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(sizes, broadcast, operands, result, spaced)| Draw {
            sizes,
            broadcast,
            operands,
            result,
            spaced,
        })
}

impl Draw {
    /// The equation and shapes the draw stands for; numpy accepts every one of them.
    pub fn expression(&self) -> Expression {
        let rank = self.broadcast.len();
        let mut terms = Vec::new();
        let mut shapes = Vec::new();
        for operand in &self.operands {
            let mut term: Vec<String> = Vec::new();
            let mut shape = Vec::new();
            for (j, &(label, one)) in operand.labels.iter().enumerate() {
                // A repeated label is a diagonal: its sizes within the operand must be equal.
                let first = operand.labels[..j].iter().find(|(l, _)| *l == label);
                let one = first.map_or(one, |&(_, one)| one);
                term.push(LABELS[label].to_string());
                shape.push(if one { 1 } else { self.sizes[label] });
            }
            if let Some((at, covered, ones)) = operand.ellipsis {
                let at = at.min(term.len());
                let covered = covered.min(rank);
                let dims = self.broadcast[rank - covered..]
                    .iter()
                    .zip(ones)
                    .map(|(&size, one)| if one { 1 } else { size });
                term.insert(at, "...".to_owned());
                shape.splice(at..at, dims);
            }
            terms.push(term.concat());
            shapes.push(shape);
        }
        let separator = if self.spaced { ", " } else { "," };
        let mut equation = terms.join(separator);
        if let Some((labels, at)) = &self.result {
            let mut result: Vec<String> = Vec::new();
            for &label in labels {
                let name = LABELS[label].to_string();
                let held = self
                    .operands
                    .iter()
                    .any(|o| o.labels.iter().any(|(l, _)| *l == label));
                if held && !result.contains(&name) {
                    result.push(name);
                }
            }
            // `...` must be in the result when it stands for axes; it may be when it does not.
            if self.operands.iter().any(|o| o.ellipsis.is_some()) || *at == 0 {
                result.insert((*at).min(result.len()), "...".to_owned());
            }
            equation.push_str(if self.spaced { " -> " } else { "->" });
            equation.push_str(&result.concat());
        }
        Expression { equation, shapes }
    }
}
