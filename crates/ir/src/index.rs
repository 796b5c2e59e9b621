//! Index vocabulary: loop symbols and the index of one tensor axis as a function of them.

use std::fmt;

/// A loop variable of a product space, or an index supplied from outside the operation (the
/// runtime position of a batch slice). Which of the two it is depends on whether the operation's
/// product space has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(pub u32);

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{}", self.0)
    }
}

/// `Σ cᵢ·sᵢ + offset` with at least one symbol, distinct symbols, no zero coefficient, and not
/// a bare symbol: what [`AxisIndex::affine`] leaves of a sum that is neither a constant nor an
/// iterator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Affine {
    terms: Vec<(i64, Symbol)>,
    offset: i64,
}

impl Affine {
    /// The `(coefficient, symbol)` terms, in the order given (first occurrence of each symbol).
    pub fn terms(&self) -> &[(i64, Symbol)] {
        &self.terms
    }

    /// The constant term.
    pub fn offset(&self) -> i64 {
        self.offset
    }
}

/// The index of one axis of a tensor at a point of an operation's product space.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AxisIndex {
    /// A constant position: 0 for a broadcast or size-one axis, any position for a static slice,
    /// negative in padding margins.
    Fixed(i64),
    /// Driven by one symbol: the axis runs in lockstep with it.
    Iterator(Symbol),
    /// A strided or convolution position (`stride·o + dilation·k + offset`).
    Affine(Affine),
    /// A concatenated axis: one symbol per component; at each point the active component's symbol,
    /// shifted by the sizes of the components before it.
    Concat(Vec<Symbol>),
}

impl AxisIndex {
    /// The index `Σ cᵢ·sᵢ + offset`, in its simplest form: terms of one symbol are added up and
    /// zero terms dropped, so that no sum is a constant or a bare iterator in disguise.
    pub fn affine(terms: impl IntoIterator<Item = (i64, Symbol)>, offset: i64) -> AxisIndex {
        let mut merged: Vec<(i64, Symbol)> = Vec::new();
        for (coefficient, symbol) in terms {
            match merged.iter_mut().find(|(_, s)| *s == symbol) {
                Some((c, _)) => *c += coefficient,
                None => merged.push((coefficient, symbol)),
            }
        }
        merged.retain(|(c, _)| *c != 0);
        match (merged.as_slice(), offset) {
            ([], _) => AxisIndex::Fixed(offset),
            ([(1, symbol)], 0) => AxisIndex::Iterator(*symbol),
            _ => AxisIndex::Affine(Affine {
                terms: merged,
                offset,
            }),
        }
    }

    /// The symbols the index mentions.
    pub fn symbols(&self) -> impl Iterator<Item = Symbol> + '_ {
        let (alone, concatenated, affine): (Option<Symbol>, &[Symbol], &[(i64, Symbol)]) =
            match self {
                AxisIndex::Fixed(_) => (None, &[], &[]),
                AxisIndex::Iterator(symbol) => (Some(*symbol), &[], &[]),
                AxisIndex::Affine(affine) => (None, &[], &affine.terms),
                AxisIndex::Concat(symbols) => (None, symbols, &[]),
            };
        (alone.into_iter())
            .chain(concatenated.iter().copied())
            .chain(affine.iter().map(|(_, symbol)| *symbol))
    }

    /// The same index with every symbol renamed.
    pub fn rename(&self, rename: &impl Fn(Symbol) -> Symbol) -> AxisIndex {
        match self {
            AxisIndex::Fixed(position) => AxisIndex::Fixed(*position),
            AxisIndex::Iterator(symbol) => AxisIndex::Iterator(rename(*symbol)),
            AxisIndex::Affine(affine) => AxisIndex::affine(
                affine.terms.iter().map(|(c, s)| (*c, rename(*s))),
                affine.offset,
            ),
            AxisIndex::Concat(symbols) => {
                AxisIndex::Concat(symbols.iter().map(|s| rename(*s)).collect())
            }
        }
    }
}

impl fmt::Display for AxisIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisIndex::Fixed(position) => write!(f, "{position}"),
            AxisIndex::Iterator(symbol) => write!(f, "{symbol}"),
            AxisIndex::Affine(affine) => {
                for (position, (coefficient, symbol)) in affine.terms.iter().enumerate() {
                    match (position, *coefficient) {
                        (0, 1) => write!(f, "{symbol}")?,
                        (0, -1) => write!(f, "-{symbol}")?,
                        (0, c) => write!(f, "{c}*{symbol}")?,
                        (_, 1) => write!(f, "+{symbol}")?,
                        (_, -1) => write!(f, "-{symbol}")?,
                        (_, c) if c < 0 => write!(f, "-{}*{symbol}", -c)?,
                        (_, c) => write!(f, "+{c}*{symbol}")?,
                    }
                }
                match affine.offset {
                    0 => Ok(()),
                    o if o < 0 => write!(f, "-{}", -o),
                    o => write!(f, "+{o}"),
                }
            }
            AxisIndex::Concat(symbols) => {
                let shown: Vec<String> = symbols.iter().map(ToString::to_string).collect();
                write!(f, "{}", shown.join("^"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Symbol = Symbol(1);
    const J: Symbol = Symbol(2);

    #[test]
    fn affine_sums_are_never_degenerate() {
        assert_eq!(AxisIndex::affine([], 3), AxisIndex::Fixed(3));
        assert_eq!(AxisIndex::affine([(1, I)], 0), AxisIndex::Iterator(I));
        assert_eq!(AxisIndex::affine([(2, I), (-2, I)], 1), AxisIndex::Fixed(1));
        assert_eq!(
            AxisIndex::affine([(1, I), (1, J), (-1, J)], 0),
            AxisIndex::Iterator(I)
        );
        let strided = AxisIndex::affine([(2, I), (1, J), (1, I)], -1);
        let AxisIndex::Affine(affine) = &strided else {
            panic!("{strided:?} should stay affine");
        };
        assert_eq!(affine.terms(), [(3, I), (1, J)]);
        assert_eq!(affine.offset(), -1);
    }

    #[test]
    fn indices_print_as_sums() {
        assert_eq!(
            AxisIndex::affine([(2, I), (1, J)], -1).to_string(),
            "2*i1+i2-1"
        );
        assert_eq!(
            AxisIndex::affine([(1, I), (-3, J)], 0).to_string(),
            "i1-3*i2"
        );
        assert_eq!(AxisIndex::affine([(2, I)], 1).to_string(), "2*i1+1");
        assert_eq!(AxisIndex::Concat(vec![I, J]).to_string(), "i1^i2");
        assert_eq!(AxisIndex::Fixed(0).to_string(), "0");
    }

    #[test]
    fn renaming_keeps_the_form() {
        let shifted = |s: Symbol| Symbol(s.0 + 10);
        assert_eq!(
            AxisIndex::affine([(2, I), (1, J)], 0).rename(&shifted),
            AxisIndex::affine([(2, Symbol(11)), (1, Symbol(12))], 0)
        );
        // Renaming two symbols into one collapses their terms.
        let merged = |_: Symbol| I;
        assert_eq!(
            AxisIndex::affine([(1, I), (-1, J)], 4).rename(&merged),
            AxisIndex::Fixed(4)
        );
    }
}
