//! numpy's einsum notation (`"ij,jk->ik"`), read and checked as numpy reads and checks it, and
//! translated to ours.
//!
//! A label is any letter (`char::is_alphabetic`: numpy's 52 and the letters of every other
//! script, as opt_einsum accepts); spaces are ignored; `...` stands at most once in a slot.
//! An implicit result holds the labels seen once, in code-point order, after `...` if any operand
//! has it. A scalar result is a slot without axes. Refused, as numpy refuses them: characters
//! that are not letters, a `.` outside `...`, `->` twice, a result's label no operand has or that
//! the result repeats, and, once the operands' axes are known, a number of labels that does not
//! fit them, a repeated label over axes of different sizes, a label whose axes differ where
//! neither is 1, and an explicit result without `...` where the operands' `...` stand for axes.
//!
//! When the operands' axes are known, the translation broadcasts as numpy does: a label whose
//! axis is 1 in one operand and longer in another takes, in that operand, a label of its own
//! (`{label}x{operand}`), which only that operand has and the path therefore sums away first; and
//! `...` is spelled out as labels, one per broadcast axis (`dots{position}`, an axis of 1 facing a
//! longer one taking `dots{position}x{operand}`), aligned at the right.

use std::collections::HashMap;

use rcannl_shape::spec::{AxisSpec, EinsumSpec, RowSpec, RowVar, SlotSpec};

use crate::graph::{TensorError, error};

/// A slot in numpy's notation: its labels, and where among them `...` stands, if anywhere.
struct NumpySlot {
    labels: Vec<char>,
    ellipsis: Option<usize>,
}

impl NumpySlot {
    /// The slot text between commas (or after `->`); `place` names it in messages.
    fn parse(text: &str, place: &str) -> Result<NumpySlot, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut slot = NumpySlot {
            labels: Vec::new(),
            ellipsis: None,
        };
        let mut at = 0;
        while at < chars.len() {
            let c = chars[at];
            if c == '.' {
                if !chars[at..].starts_with(&['.', '.', '.']) {
                    return Err(format!("{place} has a `.` that is not part of `...`"));
                }
                if slot.ellipsis.is_some() {
                    return Err(format!("`...` appears twice in {place}"));
                }
                slot.ellipsis = Some(slot.labels.len());
                at += 3;
                continue;
            }
            if c.is_alphabetic() {
                slot.labels.push(c);
            } else if !c.is_whitespace() {
                return Err(format!(
                    "{c:?} in {place} is not a label: labels are letters"
                ));
            }
            at += 1;
        }
        Ok(slot)
    }

    /// The slot in our notation (axes of the output row), each label by its name in `names`,
    /// with `dots` standing where `...` does: labels, or `None` for a row variable.
    fn ours(&self, names: &[String], dots: Option<&[String]>) -> SlotSpec {
        let label = |name: &String| AxisSpec::label(name.clone());
        let row = match (self.ellipsis, dots) {
            (Some(at), None) => RowSpec::open(
                names[..at].iter().map(label).collect(),
                RowVar::Ellipsis,
                names[at..].iter().map(label).collect(),
            ),
            (Some(at), Some(dots)) => RowSpec::closed(
                names[..at]
                    .iter()
                    .chain(dots)
                    .chain(&names[at..])
                    .map(label)
                    .collect(),
            ),
            (None, _) => RowSpec::closed(names.iter().map(label).collect()),
        };
        SlotSpec {
            output: row,
            ..SlotSpec::default()
        }
    }

    /// Each label's size over an operand with these axes (the labels after `...` being the last
    /// axes); `place` names the operand in messages.
    fn sizes(&self, axes: &[usize], place: &str) -> Result<HashMap<char, usize>, String> {
        let labels = self.labels.len();
        match self.ellipsis {
            None if labels < axes.len() => {
                return Err(format!(
                    "{place} has {} ({axes:?}) but {}, and no `...` to stand for the others",
                    count(axes.len(), "axis", "axes"),
                    count(labels, "label", "labels"),
                ));
            }
            _ if labels > axes.len() => {
                let besides = if self.ellipsis.is_some() {
                    " besides `...`"
                } else {
                    ""
                };
                return Err(format!(
                    "{place} has {}{besides} but {} ({axes:?})",
                    count(labels, "label", "labels"),
                    count(axes.len(), "axis", "axes"),
                ));
            }
            _ => {}
        }
        let mut sizes: HashMap<char, usize> = HashMap::new();
        for (i, &c) in self.labels.iter().enumerate() {
            let position = match self.ellipsis {
                Some(at) if i >= at => axes.len() - (labels - i),
                _ => i,
            };
            let size = axes[position];
            match sizes.insert(c, size) {
                Some(earlier) if earlier != size => {
                    return Err(format!(
                        "{place} repeats label '{c}' over axes of {earlier} and {size}: a repeated \
                         label takes the diagonal, whose axes must be equal"
                    ));
                }
                _ => {}
            }
        }
        Ok(sizes)
    }

    /// The axes `...` stands for in an operand with these axes (none without `...`); the axes'
    /// count is checked by [`NumpySlot::sizes`].
    fn dots<'a>(&self, axes: &'a [usize]) -> &'a [usize] {
        match self.ellipsis {
            Some(at) => &axes[at..at + axes.len() - self.labels.len()],
            None => &[],
        }
    }
}

/// `n` and the noun, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How an operand is named in messages.
fn operand_place(k: usize) -> String {
    format!("operand {}", k + 1)
}

/// An equation in numpy's notation: the operands' slots and the result's (an implicit result
/// spelled out).
pub(super) struct Equation {
    spec: String,
    operands: Vec<NumpySlot>,
    result: NumpySlot,
}

impl Equation {
    /// Reads `spec`, refusing what numpy refuses whatever the operands.
    pub(super) fn parse(spec: &str) -> Result<Equation, TensorError> {
        let bad = |why: String| error(format!("numpy einsum {spec:?}: {why}"));
        let mut sides = spec.split("->");
        let inputs = sides.next().unwrap_or_default();
        let output = sides.next();
        if sides.next().is_some() {
            return Err(bad(
                "`->` appears more than once: it separates the operands from the result, once"
                    .to_owned(),
            ));
        }
        let operands = inputs
            .split(',')
            .enumerate()
            .map(|(k, text)| NumpySlot::parse(text, &operand_place(k)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let result = match output {
            Some(text) => {
                let mut result = NumpySlot::parse(text, "the result").map_err(bad)?;
                for (i, c) in result.labels.iter().enumerate() {
                    if result.labels[..i].contains(c) {
                        return Err(bad(format!("the result has label '{c}' twice")));
                    }
                    if !operands.iter().any(|o| o.labels.contains(c)) {
                        return Err(bad(format!("the result's label '{c}' is on no operand")));
                    }
                }
                if operands.iter().all(|o| o.ellipsis.is_none()) {
                    // numpy reads it as standing for no axes.
                    result.ellipsis = None;
                }
                result
            }
            None => {
                let mut seen: HashMap<char, usize> = HashMap::new();
                for c in operands.iter().flat_map(|o| &o.labels) {
                    *seen.entry(*c).or_default() += 1;
                }
                let mut once: Vec<char> = seen
                    .into_iter()
                    .filter(|&(_, n)| n == 1)
                    .map(|(c, _)| c)
                    .collect();
                once.sort_unstable();
                NumpySlot {
                    labels: once,
                    ellipsis: operands.iter().any(|o| o.ellipsis.is_some()).then_some(0),
                }
            }
        };
        Ok(Equation {
            spec: spec.to_owned(),
            operands,
            result,
        })
    }

    /// The translation over operands with these axes (`None` where not known), which must be
    /// as many as the equation's.
    pub(super) fn for_operands(&self, axes: &[Option<Vec<usize>>]) -> Result<String, TensorError> {
        if axes.len() != self.operands.len() {
            return Err(self.error(&format!(
                "the equation takes {}, {} given",
                count(self.operands.len(), "operand", "operands"),
                axes.len()
            )));
        }
        self.for_axes(axes)
    }

    /// An error about this equation.
    fn error(&self, why: &str) -> TensorError {
        error(format!("numpy einsum {:?}: {why}", self.spec))
    }

    /// The translation with `names[k]` naming operand `k`'s labels and `dots[k]` standing for
    /// the `...` of slot `k` (the result's last): labels, or `None` for a row variable. Printed
    /// canonically, so that multi-letter names are read as such.
    fn text(&self, names: &[Vec<String>], dots: &[Option<Vec<String>>]) -> String {
        let result_names: Vec<String> = self.result.labels.iter().map(char::to_string).collect();
        EinsumSpec {
            rhs: self
                .operands
                .iter()
                .zip(names)
                .zip(dots)
                .map(|((slot, names), dots)| slot.ours(names, dots.as_deref()))
                .collect(),
            lhs: self
                .result
                .ours(&result_names, dots[self.operands.len()].as_deref()),
        }
        .to_string()
    }

    /// The translation knowing no sizes: labels by themselves, `...` a row variable.
    fn plain(&self) -> String {
        let names: Vec<Vec<String>> = self
            .operands
            .iter()
            .map(|slot| slot.labels.iter().map(char::to_string).collect())
            .collect();
        self.text(&names, &vec![None; self.operands.len() + 1])
    }

    /// The translation over operands with these axes (`None` where not known; one entry per
    /// operand), checked and broadcast as numpy does.
    fn for_axes(&self, axes: &[Option<Vec<usize>>]) -> Result<String, TensorError> {
        let own: Vec<Option<HashMap<char, usize>>> = self
            .operands
            .iter()
            .zip(axes)
            .enumerate()
            .map(|(k, (slot, axes))| {
                axes.as_ref()
                    .map(|axes| slot.sizes(axes, &operand_place(k)))
                    .transpose()
            })
            .collect::<Result<_, _>>()
            .map_err(|why| self.error(&why))?;
        // Each label's broadcast size and the first operand giving it.
        let mut full: HashMap<char, (usize, usize)> = HashMap::new();
        for (k, (slot, sizes)) in self.operands.iter().zip(&own).enumerate() {
            let Some(sizes) = sizes else { continue };
            for c in &slot.labels {
                let size = sizes[c];
                match full.get(c) {
                    Some(&(known, _)) if known == size || size == 1 => {}
                    Some(&(known, from)) if known != 1 => {
                        return Err(self.error(&format!(
                            "label '{c}' is {known} in {} and {size} in {}: a label's axes must \
                             be equal, or 1 where they broadcast",
                            operand_place(from),
                            operand_place(k)
                        )));
                    }
                    _ => {
                        full.insert(*c, (size, k));
                    }
                }
            }
        }
        let names: Vec<Vec<String>> = self
            .operands
            .iter()
            .zip(&own)
            .enumerate()
            .map(|(k, (slot, sizes))| {
                slot.labels
                    .iter()
                    .map(|c| match sizes {
                        Some(sizes) if sizes[c] == 1 && full[c].0 != 1 => format!("{c}x{k}"),
                        _ => c.to_string(),
                    })
                    .collect()
            })
            .collect();
        let spelled = self.operands.iter().any(|slot| slot.ellipsis.is_some())
            && self
                .operands
                .iter()
                .zip(axes)
                .all(|(slot, axes)| slot.ellipsis.is_none() || axes.is_some());
        let dots = if spelled {
            self.spelled_dots(axes)?
        } else {
            vec![None; self.operands.len() + 1]
        };
        Ok(self.text(&names, &dots))
    }

    /// `...` spelled out as labels, for each operand and the result, over operands whose axes
    /// are known wherever `...` is.
    fn spelled_dots(
        &self,
        axes: &[Option<Vec<usize>>],
    ) -> Result<Vec<Option<Vec<String>>>, TensorError> {
        let covered: Vec<&[usize]> = self
            .operands
            .iter()
            .zip(axes)
            .map(|(slot, axes)| axes.as_deref().map_or(&[][..], |axes| slot.dots(axes)))
            .collect();
        let rank = covered.iter().map(|c| c.len()).max().unwrap_or(0);
        let first_covering = covered
            .iter()
            .enumerate()
            .find(|(_, axes)| !axes.is_empty());
        if let (Some((k, axes)), None) = (first_covering, self.result.ellipsis) {
            return Err(self.error(&format!(
                "{}'s `...` stands for axes {axes:?}, but the result has no `...` to hold them \
                 (numpy's einsum does not sum them away)",
                operand_place(k)
            )));
        }
        let mut broadcast = vec![1; rank];
        for (k, axes) in covered.iter().enumerate() {
            for (j, &size) in axes.iter().enumerate() {
                let p = rank - axes.len() + j;
                if size != 1 && broadcast[p] != 1 && broadcast[p] != size {
                    return Err(self.error(&format!(
                        "{}'s `...` stands for axes {axes:?}, which do not broadcast against {} \
                         (at position {p} of {rank}, aligned at the right)",
                        operand_place(k),
                        broadcast[p]
                    )));
                }
                if size != 1 {
                    broadcast[p] = size;
                }
            }
        }
        let mut dots: Vec<Option<Vec<String>>> = covered
            .iter()
            .enumerate()
            .map(|(k, axes)| {
                Some(
                    (0..axes.len())
                        .map(|j| {
                            let p = rank - axes.len() + j;
                            if axes[j] == 1 && broadcast[p] != 1 {
                                format!("dots{p}x{k}")
                            } else {
                                format!("dots{p}")
                            }
                        })
                        .collect(),
                )
            })
            .collect();
        dots.push(Some((0..rank).map(|p| format!("dots{p}")).collect()));
        Ok(dots)
    }
}

/// numpy's notation in ours: `"ij,jk->ik"` to `"i, j; j, k => i, k"`; `...` becomes a row variable
/// of the output rows (the same axes in every operand: see [`numpy_to_ours_for`] for numpy's
/// broadcasting); an implicit result holds the labels seen once, in code-point order (after
/// `...` if any operand has it); a scalar result is a slot without axes (`"i->"` to `"i =>"`).
/// Equations numpy refuses whatever the operands are refused (see the module documentation).
pub fn numpy_to_ours(spec: &str) -> Result<String, TensorError> {
    Ok(Equation::parse(spec)?.plain())
}

/// numpy's notation in ours for operands with these axes (`None` where not known), broadcasting
/// as numpy does: a label whose axis is 1 in one operand and longer in another takes a label of
/// its own there (summed away first, as a label only one operand has); `...` is spelled out as
/// labels when every operand with `...` has known axes (aligned at the right, an operand with
/// fewer axes there lacking the leading ones, an axis of 1 facing a longer one taking a label of
/// its own). Known axes are checked as numpy checks them: the number of labels, the sizes of a
/// repeated label and of a label across operands, and that a result without `...` leaves no
/// axes of the operands' `...` to sum (as numpy's einsum, unoptimized, does). `axes` has an entry per operand; with another
/// count, no sizes are known (the operands' count is the caller's to check).
pub fn numpy_to_ours_for(spec: &str, axes: &[Option<Vec<usize>>]) -> Result<String, TensorError> {
    let equation = Equation::parse(spec)?;
    if axes.len() != equation.operands.len() {
        return Ok(equation.plain());
    }
    equation.for_axes(axes)
}

#[cfg(test)]
mod tests {
    use rcannl_shape::spec::{Kind, parse_einsum};

    use super::*;

    #[test]
    fn numpy_specs_translate() {
        assert_eq!(numpy_to_ours("ij,jk->ik").unwrap(), "i, j; j, k => i, k");
        assert_eq!(numpy_to_ours("ij,jk").unwrap(), "i, j; j, k => i, k");
        assert_eq!(numpy_to_ours("ii->i").unwrap(), "i, i => i");
        assert_eq!(numpy_to_ours("ii").unwrap(), "i, i =>");
        assert_eq!(
            numpy_to_ours("...ij,...jk->...ik").unwrap(),
            "..., i, j; ..., j, k => ..., i, k"
        );
        assert!(numpy_to_ours("i1,jk").is_err());
        assert_eq!(
            numpy_to_ours("i...j,j...").unwrap(),
            "i, ..., j; j, ... => ..., i"
        );
        assert!(numpy_to_ours("i...j...,jk").is_err());
        assert!(numpy_to_ours("i..j,jk").is_err());
        // An operand without labels is a scalar.
        assert_eq!(numpy_to_ours(",ij->ij").unwrap(), "; i, j => i, j");
        // Spelled-out `...` labels are multi-letter names even where every slot has one axis.
        let one_axis = numpy_to_ours_for("...,...->...", &[Some(vec![3]), Some(vec![3])]).unwrap();
        let parsed = parse_einsum(&one_axis).unwrap();
        assert!(
            parsed
                .slots()
                .all(|(_, slot)| slot.row(Kind::Output).axes().count() == 1),
            "{one_axis}"
        );
    }

    #[test]
    fn a_label_of_one_facing_a_longer_one_takes_a_label_of_its_own() {
        let sizes = |a: &[usize], b: &[usize]| [Some(a.to_vec()), Some(b.to_vec())];
        assert_eq!(
            numpy_to_ours_for("ab,ab->b", &sizes(&[4, 3], &[1, 3])).unwrap(),
            "a, b; ax1, b => b"
        );
        // A repeated label of 1 takes one label of its own for both axes.
        assert_eq!(
            numpy_to_ours_for("aab,ab->b", &sizes(&[1, 1, 3], &[4, 3])).unwrap(),
            "ax0, ax0, b; a, b => b"
        );
        // A label of 1 everywhere keeps its name; an operand of unknown axes keeps its labels.
        assert_eq!(
            numpy_to_ours_for("ab,ab->ab", &sizes(&[1, 3], &[1, 3])).unwrap(),
            "a, b; a, b => a, b"
        );
        assert_eq!(
            numpy_to_ours_for("ab,ab->b", &[Some(vec![1, 3]), None]).unwrap(),
            "a, b; a, b => b"
        );
        // Beside spelled-out `...`.
        assert_eq!(
            numpy_to_ours_for("...a,ab->...b", &sizes(&[2, 1, 3], &[1, 4])).unwrap(),
            "dots0, dots1, a; ax1, b => dots0, dots1, b"
        );
    }
}
