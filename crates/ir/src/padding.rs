//! The padding margins of one tensor's buffer: the running maximum of the margins its accesses
//! need (a padded convolution reads, and its gradient writes, before and after each axis), frozen
//! once the buffer exists.
//!
//! Shapes never include padding; buffers do. Margins only grow while accesses are added, so the
//! order of the accesses does not matter; once the buffer is allocated they are fixed, and an
//! access that needs more is an error rather than a read outside the buffer.

/// Margins `(before, after)` per axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Margins {
    per_axis: Vec<(usize, usize)>,
    frozen: bool,
}

/// An access that needs more padding than a frozen buffer has, or that addresses another number
/// of axes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MarginError {
    /// What kind of problem it is.
    pub kind: MarginErrorKind,
    /// The access, the margins it needs and those the buffer has (what `Display` prints).
    pub message: String,
}

/// What kind of problem an access's margins have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MarginErrorKind {
    /// The access addresses another number of axes than the tensor has.
    Rank,
    /// The access needs more margins than the buffer, already allocated, has.
    Frozen,
}

impl Margins {
    /// No margins on any of `rank` axes.
    pub fn new(rank: usize) -> Margins {
        Margins {
            per_axis: vec![(0, 0); rank],
            frozen: false,
        }
    }

    /// The margins `(before, after)` of each axis, in cells.
    pub fn per_axis(&self) -> &[(usize, usize)] {
        &self.per_axis
    }

    /// Whether the buffer exists, so that the margins can no longer grow.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Takes in what one access (`access`, named in errors, e.g. the operation) needs: the
    /// margins grow to cover it, or, once frozen, it must already fit.
    pub fn require(&mut self, needed: &[(usize, usize)], access: &str) -> Result<(), MarginError> {
        if needed.len() != self.per_axis.len() {
            return Err(MarginError {
                kind: MarginErrorKind::Rank,
                message: format!(
                    "padding: {access} addresses {} axes of a tensor with {}",
                    needed.len(),
                    self.per_axis.len()
                ),
            });
        }
        let fits = needed
            .iter()
            .zip(&self.per_axis)
            .all(|(n, have)| n.0 <= have.0 && n.1 <= have.1);
        if fits {
            return Ok(());
        }
        if self.frozen {
            return Err(MarginError {
                kind: MarginErrorKind::Frozen,
                message: format!(
                    "padding: {access} needs margins {needed:?}, but the tensor's buffer already \
                     exists with margins {:?}; declare this access before the buffer is \
                     allocated",
                    self.per_axis
                ),
            });
        }
        for (have, n) in self.per_axis.iter_mut().zip(needed) {
            have.0 = have.0.max(n.0);
            have.1 = have.1.max(n.1);
        }
        Ok(())
    }

    /// Fixes the margins: the buffer is allocated.
    pub fn freeze(&mut self) {
        self.frozen = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_are_the_running_maximum_in_any_order() {
        let accesses: [&[(usize, usize)]; 3] =
            [&[(1, 1), (0, 0)], &[(2, 2), (0, 0)], &[(0, 0), (1, 2)]];
        let mut forward = Margins::new(2);
        let mut backward = Margins::new(2);
        for access in accesses {
            forward.require(access, "a reader").unwrap();
        }
        for access in accesses.iter().rev() {
            backward.require(access, "a reader").unwrap();
        }
        assert_eq!(forward.per_axis(), &[(2, 2), (1, 2)]);
        assert_eq!(forward, backward);
    }

    #[test]
    fn a_frozen_buffer_accepts_what_fits_and_refuses_more() {
        let mut margins = Margins::new(1);
        margins.require(&[(1, 1)], "conv k=3").unwrap();
        margins.freeze();
        margins.require(&[(1, 0)], "a smaller reader").unwrap();
        let error = margins.require(&[(2, 2)], "conv k=5").unwrap_err();
        assert_eq!(error.kind, MarginErrorKind::Frozen);
        assert!(error.message.contains("conv k=5"));
        assert!(error.message.contains("already exists"));
        assert_eq!(
            margins.per_axis(),
            &[(1, 1)],
            "a refused access changes nothing"
        );
        let error = margins.require(&[(0, 0), (0, 0)], "x").unwrap_err();
        assert_eq!(error.kind, MarginErrorKind::Rank);
    }
}
