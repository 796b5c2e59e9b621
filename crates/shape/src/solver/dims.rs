//! Dimension rules: equality is unification; the broadcast inequality `res ⊑ opnd` pins a variable
//! that must refine an atom, pins a variable above `1*` to `1*`, records an atom below a variable as
//! its cap (two different caps join to `1*`: the axis broadcasts), and records variable-to-variable
//! adjacencies, forwarding caps along them.

use super::{DimState, Solver, derived, push_short};
use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::term::{Dim, DimVar};
use crate::words;

impl Solver {
    pub(super) fn dim_eq(&mut self, a: &Dim, b: &Dim) -> Result<(), ShapeError> {
        // Plain: a pending derived equation must not meet the size it gives itself.
        let a = self.resolve_dim_plain(a);
        let b = self.resolve_dim_plain(b);
        derived::check_bases(&a, Some(&b))?;
        derived::check_bases(&b, Some(&a))?;
        if a == b {
            return Ok(());
        }
        match (&a, &b) {
            // A rounding axis does not give its input a size: the two wait side by side.
            (Dim::Var(_), _) | (_, Dim::Var(_)) if derived::rounds(&a) || derived::rounds(&b) => {
                self.derived_eq(a, b)
            }
            (Dim::Var(var), _) => self.bind_dim(*var, b),
            (_, Dim::Var(var)) => self.bind_dim(*var, a),
            (Dim::Affine(_) | Dim::Concat(_), _) | (_, Dim::Affine(_) | Dim::Concat(_)) => {
                self.derived_eq(a, b)
            }
            _ => Err(clash(&a, &b)),
        }
    }

    pub(super) fn dim_le(&mut self, res: &Dim, opnd: &Dim) -> Result<(), ShapeError> {
        let res = self.resolve_dim(res);
        let opnd = self.resolve_dim(opnd);
        derived::check_bases(&res, None)?;
        derived::check_bases(&opnd, None)?;
        if res == opnd || opnd == Dim::Unit {
            return Ok(());
        }
        match (&res, &opnd) {
            // Below an atom lies only the atom itself; above the top, only the top.
            (Dim::Var(_) | Dim::Affine(_) | Dim::Concat(_), Dim::Atom { .. })
            | (Dim::Unit, Dim::Var(_) | Dim::Affine(_) | Dim::Concat(_)) => {
                self.dim_eq(&res, &opnd)
            }
            (Dim::Affine(_) | Dim::Concat(_), _) | (_, Dim::Affine(_) | Dim::Concat(_)) => {
                self.defer(Constraint::DimLe { res, opnd });
                Ok(())
            }
            (Dim::Atom { .. }, Dim::Var(var)) => self.add_cap(*var, res),
            (Dim::Var(low), Dim::Var(high)) => {
                let (low, high) = (*low, *high);
                if self
                    .dim_bounds(low)
                    .is_some_and(|b| b.above.contains(&high))
                {
                    return Ok(());
                }
                let cap = self.dim_bounds(low).and_then(|b| b.cap.clone());
                if let Some(bounds) = self.dim_bounds(low) {
                    push_short(&mut bounds.above, high);
                }
                if let Some(bounds) = self.dim_bounds(high) {
                    push_short(&mut bounds.below, low);
                }
                if let Some(cap) = cap {
                    self.queue.push_back(Constraint::DimLe {
                        res: cap,
                        opnd: Dim::Var(high),
                    });
                }
                Ok(())
            }
            _ => Err(ShapeError::new(format!(
                "an axis of size {} does not broadcast to size {} (only an equal size or the \
                 unit 1* broadcasts to a size)",
                words::dim(&opnd),
                words::dim(&res)
            ))),
        }
    }

    pub(super) fn at_least(&mut self, dim: &Dim, size: usize) -> Result<(), ShapeError> {
        match self.resolve_dim(dim) {
            Dim::Var(var) => {
                let Some(bounds) = self.dim_bounds(var) else {
                    unreachable!("a resolved variable is free")
                };
                bounds.at_least = bounds.at_least.max(size);
                match &bounds.cap {
                    Some(cap) => check_index_below_cap(bounds.at_least, cap),
                    None => Ok(()),
                }
            }
            ground @ (Dim::Unit | Dim::Atom { .. }) => match ground.ground_size() {
                Some(actual) if actual >= size => Ok(()),
                _ => Err(ShapeError::new(format!(
                    "a fixed index {} is used on an axis of size {}, which has no position {}",
                    size - 1,
                    words::dim(&ground),
                    size - 1
                ))),
            },
            derived => {
                self.defer(Constraint::AtLeast { dim: derived, size });
                Ok(())
            }
        }
    }

    /// Records `atom ⊑ var`, joining with an earlier cap.
    fn add_cap(&mut self, var: DimVar, atom: Dim) -> Result<(), ShapeError> {
        let Some(bounds) = self.dim_bounds(var) else {
            unreachable!("add_cap is called on resolved, hence free, variables")
        };
        match &bounds.cap {
            Some(cap) if *cap == atom => Ok(()),
            // Two different atoms below one variable: only the claim-free unit is above both.
            Some(_) => self.bind_dim(var, Dim::Unit),
            None => {
                check_index_below_cap(bounds.at_least, &atom)?;
                bounds.cap = Some(atom.clone());
                let above = bounds.above.clone();
                for high in above {
                    self.queue.push_back(Constraint::DimLe {
                        res: atom.clone(),
                        opnd: Dim::Var(high),
                    });
                }
                Ok(())
            }
        }
    }

    /// Binds a free variable and re-emits everything stored on it, instantiated at `value`.
    pub(super) fn bind_dim(&mut self, var: DimVar, value: Dim) -> Result<(), ShapeError> {
        let mut occurs = false;
        value.for_each_var(&mut |v| occurs |= v == var);
        if occurs {
            return Err(ShapeError::new(format!(
                "an axis size would be defined through itself (as {})",
                words::dim(&value)
            )));
        }
        let old = std::mem::replace(self.dim_state(var), DimState::Solved(value.clone()));
        self.n_bindings += 1;
        let DimState::Free(bounds) = old else {
            unreachable!("bind_dim is called on resolved, hence free, variables")
        };
        if let Some(cap) = bounds.cap {
            self.queue.push_back(Constraint::DimLe {
                res: cap,
                opnd: value.clone(),
            });
        }
        for high in bounds.above {
            self.queue.push_back(Constraint::DimLe {
                res: value.clone(),
                opnd: Dim::Var(high),
            });
        }
        for low in bounds.below {
            self.queue.push_back(Constraint::DimLe {
                res: Dim::Var(low),
                opnd: value.clone(),
            });
        }
        if bounds.at_least > 0 {
            self.queue.push_back(Constraint::AtLeast {
                dim: value,
                size: bounds.at_least,
            });
        }
        Ok(())
    }

    /// Equality where at least one side is an affine or concatenated term.
    ///
    /// Retrying the pending ones (see `Solver::solve`) re-enters here with their parts resolved.
    fn derived_eq(&mut self, a: Dim, b: Dim) -> Result<(), ShapeError> {
        match derived::solve_eq(&a, &b, self.settle_units)? {
            Some(equations) => {
                self.queue
                    .extend(equations.into_iter().map(|(x, y)| Constraint::DimEq(x, y)));
                // A padded convolution's sizes are settled without its kernel, but not its
                // basis: the equation stays, to be checked again once the kernel is known.
                let awaits_kernel =
                    |d: &Dim| matches!(d, Dim::Affine(affine) if derived::awaits_kernel(affine));
                if awaits_kernel(&a) || awaits_kernel(&b) {
                    self.keep_pending(a, b);
                }
                Ok(())
            }
            None => {
                self.keep_pending(a, b);
                Ok(())
            }
        }
    }

    /// Keeps the derived equation `a = b` to be retried when its parts change.
    fn keep_pending(&mut self, a: Dim, b: Dim) {
        if !self.derived_eqs.contains(&(a.clone(), b.clone())) {
            self.derived_eqs.push((a, b));
            // What the equation says of its derived term may settle deferred constraints.
            self.n_bindings += 1;
        }
    }
}

/// A fixed index `n` (`at_least = n+1`) on an axis that a use of size `cap` refines: the axis can
/// only be `cap` or the unit `1*`, both too small unless `n` is 0 or fits `cap`.
fn check_index_below_cap(at_least: usize, cap: &Dim) -> Result<(), ShapeError> {
    match cap.ground_size() {
        Some(size) if at_least > 1 && size < at_least => Err(ShapeError::new(format!(
            "a fixed index {} is used on an axis that a use gives size {}, which has no position {}",
            at_least - 1,
            words::dim(cap),
            at_least - 1
        ))),
        _ => Ok(()),
    }
}

/// The error for two ground dimensions that should agree but do not. The session replaces it
/// with one naming the label and the operands where it can tell them (`session::diagnose`).
pub(super) fn clash(a: &Dim, b: &Dim) -> ShapeError {
    let same_size = a.ground_size().is_some() && a.ground_size() == b.ground_size();
    let (a, b) = (words::dim(a), words::dim(b));
    if same_size {
        ShapeError::new(format!(
            "an axis must be both {a} and {b}: the same size with different bases"
        ))
    } else {
        ShapeError::new(format!("an axis must be both of size {a} and of size {b}"))
    }
}
