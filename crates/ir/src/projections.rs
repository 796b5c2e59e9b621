//! The projections record of one assignment: its product space (how its loops run), the dims of
//! every tensor it touches, and each tensor's index map. Also what lowering reads off the record
//! (reduction symbols, surjectivity and injectivity of the written map, whether a read of the
//! written tensor sees its prior values) and the slot views that give gradient assignments their
//! records without inferring anything again.

use std::collections::HashMap;

use rustc_hash::{FxHashMap, FxHashSet};
use std::fmt;

use crate::index::{AxisIndex, Symbol};

/// One factor of a product space: a single range, or ranges coupled by a concatenation, traversed
/// one after the other (a disjoint union) instead of nested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Factor {
    /// `(symbol, range)` per component; one component unless coupled.
    pub components: Vec<(Symbol, usize)>,
}

impl Factor {
    /// A factor of one range: a loop of `symbol` over `0..range`.
    pub fn single(symbol: Symbol, range: usize) -> Factor {
        Factor {
            components: vec![(symbol, range)],
        }
    }

    /// A factor of components traversed one after another, in the order given: the symbols of a
    /// concatenation's parts.
    pub fn coupled(components: impl IntoIterator<Item = (Symbol, usize)>) -> Factor {
        Factor {
            components: components.into_iter().collect(),
        }
    }
}

/// Which tensor of an assignment an index map belongs to: the written one or the `i`-th read one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The written tensor.
    Lhs,
    /// The `i`-th read tensor, in operand order.
    Rhs(usize),
}

/// How one assignment iterates and indexes its tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projections {
    /// The factors of the product space, in the order lowering nests their loops (outermost
    /// first): each point is one iteration of the assignment's loops.
    pub product_space: Vec<Factor>,
    /// The dims of the written tensor, without padding.
    pub lhs_dims: Vec<usize>,
    /// Per read tensor, in operand order.
    pub rhs_dims: Vec<Vec<usize>>,
    /// One index per axis of the written tensor.
    pub lhs_index: Vec<AxisIndex>,
    /// Per read tensor, one index per axis.
    pub rhs_index: Vec<Vec<AxisIndex>>,
    /// The margins `(before, after)` each axis of the written tensor is addressed beyond its
    /// size (a padded convolution's input gradient writes there); `(0, 0)` almost everywhere.
    pub lhs_padding: Vec<(usize, usize)>,
    /// The same per read tensor (a padded convolution reads its input there).
    pub rhs_padding: Vec<Vec<(usize, usize)>>,
    /// What the record was derived for (a spec or logic), for printing.
    pub label: String,
}

impl Projections {
    /// The range of every product symbol.
    pub fn ranges(&self) -> HashMap<Symbol, usize> {
        self.product_space
            .iter()
            .flat_map(|factor| factor.components.iter().copied())
            .collect()
    }

    /// The product symbols the written map leaves out, with a range other than 1: the axes the
    /// assignment reduces over (an empty one included: its cells get the neutral element).
    /// Contraction is read off here, never declared.
    pub fn reduction_symbols(&self) -> Vec<Symbol> {
        let written: FxHashSet<Symbol> =
            self.lhs_index.iter().flat_map(AxisIndex::symbols).collect();
        self.product_space
            .iter()
            .flat_map(|factor| factor.components.iter())
            .filter(|(symbol, range)| *range != 1 && !written.contains(symbol))
            .map(|(symbol, _)| *symbol)
            .collect()
    }

    /// Whether every cell of the written tensor is written at some point. Conservative: `false`
    /// may be a cell-by-cell coverage the test cannot see; `true` is always right.
    pub fn is_surjective(&self) -> bool {
        let ranges = self.ranges();
        // A product space without points (a reduction over an empty axis) writes nothing: only
        // a written tensor without cells is then covered.
        if self.product_space_is_empty() {
            return self.lhs_dims.contains(&0);
        }
        // Two concatenated axes over one coupled factor write blocks on a diagonal, not the
        // whole (over different factors, as in a block matrix, they tile it).
        let mut concat_factors = FxHashSet::default();
        for index in &self.lhs_index {
            if let AxisIndex::Concat(symbols) = index
                && let Some(factor) = symbols.first().and_then(|s| self.factor_of(*s))
                && !concat_factors.insert(factor)
            {
                return false;
            }
        }
        let mut seen = FxHashSet::default();
        for (index, &dim) in self.lhs_index.iter().zip(&self.lhs_dims) {
            for symbol in index.symbols() {
                // A symbol outside the product space is one position per run (a slice), and one
                // used on two axes writes only their diagonal.
                if !ranges.contains_key(&symbol) || !seen.insert(symbol) {
                    return false;
                }
            }
            let covered = match index {
                AxisIndex::Fixed(position) => dim <= 1 && *position == 0,
                AxisIndex::Iterator(symbol) => ranges[symbol] >= dim,
                AxisIndex::Concat(symbols) => {
                    symbols.iter().map(|s| ranges[s]).sum::<usize>() >= dim
                }
                AxisIndex::Affine(affine) => {
                    let terms: Vec<(i64, usize)> = affine
                        .terms()
                        .iter()
                        .map(|(c, s)| (*c, ranges[s]))
                        .collect();
                    covers_without_gaps(&terms, affine.offset(), dim)
                }
            };
            if !covered {
                return false;
            }
        }
        // Every nest that addresses the written tensor must write: `a => a^b` leaves the `b`
        // stretch of the result alone, since nothing is read there.
        self.blocks().into_iter().all(|block| {
            !stays_within(&self.lhs_index, &self.inactive(&block)) || self.writes(&block)
        })
    }

    /// Whether no cell of the written tensor is written at two points (so a store needs no
    /// read-back). Any reduction makes it false, unless the product space is empty (nothing is
    /// written at all); so does a strided write that two points reach. Sufficient, not
    /// necessary, for affine indices: see `pins_all`.
    pub fn is_injective(&self) -> bool {
        if self.product_space_is_empty() {
            return true;
        }
        let concat_factors: FxHashSet<usize> = self
            .lhs_index
            .iter()
            .flat_map(|index| match index {
                AxisIndex::Concat(symbols) => symbols.clone(),
                _ => Vec::new(),
            })
            .filter_map(|symbol| self.factor_of(symbol))
            .collect();
        let mut used_components: Vec<FxHashSet<usize>> =
            vec![FxHashSet::default(); self.product_space.len()];
        for (block, written) in self.writing_blocks() {
            let active: FxHashMap<Symbol, usize> = block
                .iter()
                .enumerate()
                .map(|(factor, &component)| self.product_space[factor].components[component])
                .collect();
            if !pins_all(&written, &active) {
                return false;
            }
            for (factor, &component) in block.iter().enumerate() {
                used_components[factor].insert(component);
            }
        }
        // Two components of one coupled factor both writing, with no concatenated index to
        // place them apart, write the same cells.
        used_components
            .iter()
            .enumerate()
            .all(|(factor, used)| used.len() <= 1 || concat_factors.contains(&factor))
    }

    /// Whether read tensor `i`, were it the written tensor itself (an update reading its own
    /// target), would be read only at cells that still hold what they held before the
    /// assignment: read through the written map (the same dims, index and margins), by a write
    /// that reaches no cell twice (else a later point reads what an earlier one accumulated), and
    /// with no fill first (under `initialize_neutral`, lowering fills the written tensor unless
    /// its map is surjective and injective). Conservative: `false` may be a read that sees the
    /// prior values all the same.
    pub fn reads_prior_values(&self, i: usize, initialize_neutral: bool) -> bool {
        self.rhs_dims[i] == self.lhs_dims
            && self.rhs_index[i] == self.lhs_index
            && self.rhs_padding[i] == self.lhs_padding
            && self.is_injective()
            && (!initialize_neutral || self.is_surjective())
    }

    /// Whether the product space has no point: a factor whose ranges are all 0 (an empty axis).
    pub fn product_space_is_empty(&self) -> bool {
        self.product_space
            .iter()
            .any(|factor| factor.components.iter().all(|(_, range)| *range == 0))
    }

    /// The record as another assignment of the same operation sees it: `lhs` names the slot
    /// whose map that assignment writes through, `rhs` the slots of its reads, in order. A
    /// gradient `g1 =+ g * v2` of `v =:+ v1 * v2` is `view(Slot::Rhs(0), &[Slot::Lhs,
    /// Slot::Rhs(1)])`: the same product space, another map written, another reduction.
    pub fn view(&self, lhs: Slot, rhs: &[Slot]) -> Projections {
        let (lhs_dims, lhs_index, lhs_padding) = self.slot(lhs);
        let mut rhs_dims = Vec::new();
        let mut rhs_index = Vec::new();
        let mut rhs_padding = Vec::new();
        for &slot in rhs {
            let (dims, index, padding) = self.slot(slot);
            rhs_dims.push(dims);
            rhs_index.push(index);
            rhs_padding.push(padding);
        }
        Projections {
            product_space: self.product_space.clone(),
            lhs_dims,
            rhs_dims,
            lhs_index,
            rhs_index,
            lhs_padding,
            rhs_padding,
            label: self.label.clone(),
        }
    }

    fn slot(&self, slot: Slot) -> (Vec<usize>, Vec<AxisIndex>, Vec<(usize, usize)>) {
        match slot {
            Slot::Lhs => (
                self.lhs_dims.clone(),
                self.lhs_index.clone(),
                self.lhs_padding.clone(),
            ),
            Slot::Rhs(i) => (
                self.rhs_dims[i].clone(),
                self.rhs_index[i].clone(),
                self.rhs_padding[i].clone(),
            ),
        }
    }

    fn factor_of(&self, symbol: Symbol) -> Option<usize> {
        self.product_space
            .iter()
            .position(|factor| factor.components.iter().any(|(s, _)| *s == symbol))
    }

    /// Every choice of one component per factor (the nests lowering emits).
    fn blocks(&self) -> Vec<Vec<usize>> {
        let mut blocks = vec![Vec::new()];
        for factor in &self.product_space {
            blocks = blocks
                .into_iter()
                .flat_map(|block| {
                    (0..factor.components.len()).map(move |component| {
                        let mut block = block.clone();
                        block.push(component);
                        block
                    })
                })
                .collect();
        }
        blocks
    }

    /// The blocks that write, each with the written indices resolved in it. A block writes when
    /// the written map and at least one read map (if there are any) stay within its active
    /// components: lowering drops a read that would drive an inactive component, and a nest
    /// with nothing left to read.
    fn writing_blocks(&self) -> Vec<(Vec<usize>, Vec<AxisIndex>)> {
        self.blocks()
            .into_iter()
            .filter(|block| self.writes(block))
            .filter_map(|block| {
                let written = self.resolved_in(&block, &self.lhs_index)?;
                Some((block, written))
            })
            .collect()
    }

    /// Whether some read (if there are any) stays within the block's active components.
    fn writes(&self, block: &[usize]) -> bool {
        let inactive = self.inactive(block);
        self.rhs_index.is_empty()
            || (self.rhs_index.iter()).any(|index| stays_within(index, &inactive))
    }

    /// `index` within one block, with each concatenated index resolved to its active
    /// component, or `None` if it drives an inactive component's symbol.
    fn resolved_in(&self, block: &[usize], index: &[AxisIndex]) -> Option<Vec<AxisIndex>> {
        let inactive = self.inactive(block);
        (index.iter())
            .map(|index| match index {
                AxisIndex::Concat(symbols) => (symbols.iter())
                    .find(|s| !inactive.contains(s))
                    .map(|s| AxisIndex::Iterator(*s)),
                other => {
                    stays_within(std::slice::from_ref(other), &inactive).then(|| other.clone())
                }
            })
            .collect()
    }

    /// The symbols of the components a block leaves inactive.
    fn inactive(&self, block: &[usize]) -> FxHashSet<Symbol> {
        block
            .iter()
            .enumerate()
            .flat_map(|(factor, &chosen)| {
                self.product_space[factor]
                    .components
                    .iter()
                    .enumerate()
                    .filter(move |(component, _)| *component != chosen)
                    .map(|(_, (symbol, _))| *symbol)
            })
            .collect()
    }
}

/// Whether `index` stays within a block whose components `inactive` leaves out: a
/// concatenated index has an active component, and no other index drives an inactive symbol.
fn stays_within(index: &[AxisIndex], inactive: &FxHashSet<Symbol>) -> bool {
    index.iter().all(|index| match index {
        AxisIndex::Concat(symbols) => symbols.iter().any(|s| !inactive.contains(s)),
        other => !other.symbols().any(|s| inactive.contains(&s)),
    })
}

/// Whether `written` determines every active symbol of range above 1 (so distinct points write
/// distinct cells). Symbols of range 1 and symbols outside the product space are constants. An
/// iterator pins its symbol; an affine index pins its remaining unpinned symbols when, sorted
/// by the size of their coefficients, each coefficient exceeds the span of all smaller terms
/// (a mixed-radix number: `|c_k| ≥ 1 + Σ_{i<k} |c_i|·(range_i − 1)`). Pinning repeats to a
/// fixpoint, so `(s, s + t)` pins `s`, then `t`. Sufficient, not necessary: `3a + 4b` over
/// ranges 3 and 2 is injective but not mixed-radix.
fn pins_all(written: &[AxisIndex], active: &FxHashMap<Symbol, usize>) -> bool {
    let dynamic = |s: &Symbol| active.get(s).is_some_and(|&range| range > 1);
    let mut pinned: FxHashSet<Symbol> = FxHashSet::default();
    loop {
        let before = pinned.len();
        for index in written {
            match index {
                AxisIndex::Fixed(_) => {}
                AxisIndex::Iterator(symbol) => {
                    pinned.insert(*symbol);
                }
                AxisIndex::Concat(symbols) => pinned.extend(symbols.iter().copied()),
                AxisIndex::Affine(affine) => {
                    let mut free: Vec<(u64, usize, Symbol)> = affine
                        .terms()
                        .iter()
                        .filter(|(_, s)| dynamic(s) && !pinned.contains(s))
                        .map(|(c, s)| (c.unsigned_abs(), active[s], *s))
                        .collect();
                    free.sort_by_key(|(c, _, _)| *c);
                    let mut span: u64 = 0;
                    let mixed_radix = free.iter().all(|(c, range, _)| {
                        let fits = *c > span;
                        span = span.saturating_add(c.saturating_mul(*range as u64 - 1));
                        fits
                    });
                    if mixed_radix {
                        pinned.extend(free.iter().map(|(_, _, s)| *s));
                    }
                }
            }
        }
        if pinned.len() == before {
            break;
        }
    }
    active
        .keys()
        .filter(|s| dynamic(s))
        .all(|s| pinned.contains(s))
}

/// Whether `offset + Σ cᵢ·sᵢ` over `0 ≤ sᵢ < rangeᵢ` reaches every position of `0..dim`: positive
/// coefficients, each at most one past the span of the smaller terms (so the sums leave no
/// gap), and an interval from `offset` that contains `0..dim`.
fn covers_without_gaps(terms: &[(i64, usize)], offset: i64, dim: usize) -> bool {
    if terms.iter().any(|(c, _)| *c <= 0) {
        return false;
    }
    let mut sorted: Vec<(i64, usize)> = terms.to_vec();
    sorted.sort_by_key(|(c, _)| *c);
    let mut span: i64 = 0;
    for (coefficient, range) in sorted {
        if coefficient > span + 1 {
            return false;
        }
        span += coefficient * (range as i64 - 1);
    }
    offset <= 0 && offset + span >= dim as i64 - 1
}

impl fmt::Display for Projections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let factors: Vec<String> = self
            .product_space
            .iter()
            .map(|factor| {
                let parts: Vec<String> = factor
                    .components
                    .iter()
                    .map(|(symbol, range)| format!("{symbol}<{range}>"))
                    .collect();
                match parts.as_slice() {
                    [single] => single.clone(),
                    _ => format!("({})", parts.join(" | ")),
                }
            })
            .collect();
        writeln!(f, "projections for {}", self.label)?;
        writeln!(f, "  product: {}", factors.join(" × "))?;
        let indices = |index: &[AxisIndex]| {
            index
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let padded = |padding: &[(usize, usize)]| {
            if padding.iter().all(|&margins| margins == (0, 0)) {
                String::new()
            } else {
                format!(" padded {padding:?}")
            }
        };
        write!(
            f,
            "  lhs {:?}{}: [{}]",
            self.lhs_dims,
            padded(&self.lhs_padding),
            indices(&self.lhs_index)
        )?;
        for (i, (dims, index)) in self.rhs_dims.iter().zip(&self.rhs_index).enumerate() {
            let padding = self.rhs_padding.get(i).map_or(String::new(), |p| padded(p));
            write!(
                f,
                "\n  rhs{} {dims:?}{padding}: [{}]",
                i + 1,
                indices(index)
            )?;
        }
        let reduced = self.reduction_symbols();
        if !reduced.is_empty() {
            let shown: Vec<String> = reduced.iter().map(ToString::to_string).collect();
            write!(f, "\n  reduces over: {}", shown.join(", "))?;
        }
        Ok(())
    }
}
