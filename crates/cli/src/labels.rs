//! Names for the symbols of a projections record: the spec's labels, read off where each
//! label's axis sits in each tensor. A symbol no label names keeps its own name (`i3`).
//!
//! A slot's rows line up with the tensor's axes in memory order (batch, output, input): a row's
//! leading axes are its first ones, its trailing axes its last ones (a row variable takes the
//! rest). A label on a plain axis names the iterator there; the labels of a concatenation name
//! its components; a strided or convolution axis names what is left of its terms once the other
//! axes have named theirs (matching coefficients to stride and dilation when two are left).

use std::collections::{HashMap, HashSet};

use rcannl_ir::{AxisIndex, Symbol};
use rcannl_shape::spec::{AxisSpec, Coefficient, ConcatComponent, Kind, SlotSpec};

/// Names of symbols.
#[derive(Debug, Default)]
pub struct Names {
    by_symbol: HashMap<Symbol, String>,
    /// The names given, so that each is given once (found in constant time: a spec may have
    /// tens of thousands of labels).
    given: HashSet<String>,
}

/// One tensor of the record: its slot of the spec, its index map and its rows' lengths
/// (batch, input, output).
pub type Placed<'a> = (&'a SlotSpec, &'a [AxisIndex], [usize; 3]);

impl Names {
    /// Names from the spec's slots placed over their tensors.
    pub fn from_slots(slots: &[Placed<'_>]) -> Names {
        let axes: Vec<(&AxisSpec, &AxisIndex)> = slots
            .iter()
            .flat_map(|(slot, index, rows)| axes_of(slot, index, *rows))
            .collect();
        let mut names = Names::default();
        for (axis, index) in &axes {
            match (axis, index) {
                (AxisSpec::Label { name }, AxisIndex::Iterator(symbol)) => names.add(*symbol, name),
                (AxisSpec::Concat { components }, AxisIndex::Concat(symbols))
                    if components.len() == symbols.len() =>
                {
                    for (component, symbol) in components.iter().zip(symbols) {
                        if let ConcatComponent::Label { name } = component {
                            names.add(*symbol, name);
                        }
                    }
                }
                _ => {}
            }
        }
        for (axis, index) in &axes {
            if let AxisSpec::Affine(affine) = axis {
                let mut candidates = vec![(affine.over.as_str(), &affine.stride)];
                if let Some(conv) = &affine.conv {
                    candidates.push((conv.kernel.as_str(), &conv.dilation));
                }
                names.add_affine(index, &candidates);
            }
        }
        names
    }

    /// Names `symbol` `name`, unless either is named already.
    fn add(&mut self, symbol: Symbol, name: &str) {
        if !self.by_symbol.contains_key(&symbol) && !self.given.contains(name) {
            self.by_symbol.insert(symbol, name.to_owned());
            self.given.insert(name.to_owned());
        }
    }

    /// Names the unnamed symbols of a strided axis's index from its unused labels, each with
    /// its coefficient.
    fn add_affine(&mut self, index: &AxisIndex, candidates: &[(&str, &Coefficient)]) {
        let terms: Vec<(i64, Symbol)> = match index {
            AxisIndex::Iterator(symbol) => vec![(1, *symbol)],
            AxisIndex::Affine(affine) => affine.terms().to_vec(),
            _ => return,
        };
        let free: Vec<(i64, Symbol)> = terms
            .into_iter()
            .filter(|(_, s)| !self.by_symbol.contains_key(s))
            .collect();
        let unused: Vec<(&str, &Coefficient)> = candidates
            .iter()
            .copied()
            .filter(|(name, _)| !self.given.contains(*name))
            .collect();
        if let ([(_, symbol)], [(name, _)]) = (free.as_slice(), unused.as_slice()) {
            self.add(*symbol, name);
            return;
        }
        for (coefficient, symbol) in free {
            let matching: Vec<&str> = unused
                .iter()
                .filter(|(_, c)| **c == Coefficient::Int(coefficient.unsigned_abs() as usize))
                .map(|(name, _)| *name)
                .collect();
            if let [name] = matching.as_slice() {
                self.add(symbol, name);
            }
        }
    }

    pub fn symbol(&self, symbol: Symbol) -> String {
        self.by_symbol
            .get(&symbol)
            .cloned()
            .unwrap_or_else(|| symbol.to_string())
    }

    /// The index as the IR prints it, with symbols named.
    pub fn index(&self, index: &AxisIndex) -> String {
        // The IR prints symbols as `i` and digits, and nothing else there has letters.
        let text = index.to_string();
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let mut digits = String::new();
            while c == 'i' && chars.peek().is_some_and(char::is_ascii_digit) {
                digits.extend(chars.next());
            }
            match digits.parse::<u32>() {
                Ok(n) => out += &self.symbol(Symbol(n)),
                Err(_) => out.push(c),
            }
        }
        out
    }
}

/// The slot's axes paired with the tensor's indices, by position.
fn axes_of<'a>(
    slot: &'a SlotSpec,
    index: &'a [AxisIndex],
    [batch, input, output]: [usize; 3],
) -> Vec<(&'a AxisSpec, &'a AxisIndex)> {
    let mut pairs = Vec::new();
    for (kind, start, len) in [
        (Kind::Batch, 0, batch),
        (Kind::Output, batch, output),
        (Kind::Input, batch + output, input),
    ] {
        let row = slot.row(kind);
        if row.leading.len() + row.trailing.len() > len {
            continue;
        }
        let trailing_start = start + len - row.trailing.len();
        let positions = (start..)
            .zip(&row.leading)
            .chain((trailing_start..).zip(&row.trailing));
        for (position, axis) in positions {
            if let Some(axis_index) = index.get(position) {
                pairs.push((axis, axis_index));
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use rcannl_shape::spec::parse_einsum;

    use super::*;

    #[test]
    fn labels_name_iterators_and_affine_terms() {
        let spec = parse_einsum("2*o<+k, c => o, c").unwrap();
        let (o, k, c) = (Symbol(0), Symbol(1), Symbol(2));
        let rhs = [
            AxisIndex::affine([(2, o), (1, k)], 0),
            AxisIndex::Iterator(c),
        ];
        let lhs = [AxisIndex::Iterator(o), AxisIndex::Iterator(c)];
        let names = Names::from_slots(&[
            (&spec.lhs, &lhs, [0, 0, 2]),
            (&spec.rhs[0], &rhs, [0, 0, 2]),
        ]);
        assert_eq!(names.index(&rhs[0]), "2*o+k");
        assert_eq!(names.symbol(c), "c");
        assert_eq!(names.symbol(Symbol(12)), "i12");
        assert_eq!(
            names.index(&AxisIndex::Concat(vec![o, Symbol(12)])),
            "o^i12"
        );
    }

    #[test]
    fn row_variables_place_trailing_axes_last() {
        let spec = parse_einsum("..., i => i").unwrap();
        let index = [
            AxisIndex::Iterator(Symbol(3)),
            AxisIndex::Iterator(Symbol(4)),
        ];
        let names = Names::from_slots(&[(&spec.rhs[0], &index, [0, 0, 2])]);
        assert_eq!(names.symbol(Symbol(4)), "i");
        assert_eq!(names.symbol(Symbol(3)), "i3");
    }
}
