//! Running routines: only in the context that compiled them, and only while every buffer they
//! read first holds values (else an error naming the tensor and how it gets values).

use std::collections::HashMap;

use rcannl_ir::{NodeId, Symbol};

use crate::graph::{LeafKind, StaticIndex, TensorError, TensorErrorKind, error, error_of};

use super::{Context, Routine, grad_node};

impl Context {
    /// Runs `routine`.
    pub fn run(&mut self, routine: &Routine) -> Result<(), TensorError> {
        self.run_with(routine, &[])
    }

    /// Runs `routine` with a value for each static index it uses.
    pub fn run_with(
        &mut self,
        routine: &Routine,
        statics: &[(StaticIndex, i64)],
    ) -> Result<(), TensorError> {
        if routine.context != self.id {
            return Err(error(format!(
                "run: routine {} was compiled by another context",
                routine.executable.routine().name
            )));
        }
        if let Some(&node) = routine.needs.iter().find(|n| !self.holds.contains(n)) {
            let (what, remedy) = self.holds_nothing(node);
            return Err(error_of(
                TensorErrorKind::NoValues,
                format!(
                    "run: routine {} reads {what}, which holds no values yet: {remedy}",
                    routine.executable.routine().name,
                ),
            ));
        }
        let graph = self.graph.id();
        if statics.iter().any(|(s, _)| s.graph != graph) {
            return Err(error(
                "run: a static index belongs to another graph than the context's",
            ));
        }
        let statics: HashMap<Symbol, i64> = statics.iter().map(|(s, v)| (s.symbol, *v)).collect();
        routine
            .executable
            .run(&mut self.buffers, &statics)
            .map_err(|e| error_of(TensorErrorKind::Run, e.to_string()).caused_by(e))?;
        self.holds.extend(routine.writes.iter().copied());
        Ok(())
    }

    /// What reading `node`, which holds no values, reads: the tensor it belongs to (`parameter
    /// 'w'`, `the gradient of 'w'`), and how it gets values.
    fn holds_nothing(&self, node: NodeId) -> (String, String) {
        let t = (node.0 / 2) as usize;
        let state = self.graph.state.lock();
        let label = &state.tensors[t].label;
        if node == grad_node(t) {
            return (
                format!("the gradient of '{label}'"),
                "no routine that computes and keeps it (a backprop, a training step) has run, \
                 nor was it set"
                    .to_owned(),
            );
        }
        match state.tensors[t].leaf {
            Some(LeafKind::Param(_)) => (
                format!("parameter '{label}'"),
                "call init_params (again, for parameters added since) or set its values first"
                    .to_owned(),
            ),
            Some(LeafKind::Data(_)) => (
                format!("data tensor '{label}'"),
                "give them when building it (`.values(..)`) or set them (set_values, set_cells, \
                 load_npy) first"
                    .to_owned(),
            ),
            _ => (
                format!("'{label}'"),
                format!(
                    "no routine that computes and keeps it has run (compile one with \
                     forward(&[&{}]) and run it)",
                    variable_name(label)
                ),
            ),
        }
    }

    /// An error for reading `node` from the host while it holds no values.
    pub(super) fn unheld(&self, node: NodeId) -> TensorError {
        let (what, remedy) = self.holds_nothing(node);
        error_of(
            TensorErrorKind::NoValues,
            format!("{what} holds no values yet: {remedy}"),
        )
    }
}

/// A name to write in code for the tensor labelled `label`: the label itself when it is one
/// identifier, else a placeholder.
fn variable_name(label: &str) -> &str {
    let identifier = label
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && label.chars().all(|c| c.is_alphanumeric() || c == '_');
    if identifier { label } else { "t" }
}
