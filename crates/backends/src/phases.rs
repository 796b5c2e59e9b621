//! Where the time of turning a graph into running code goes, summed for the whole process: shape
//! inference, lowering to loops, optimization, code generation, the C compiler's runs and the
//! loading of libraries. Benchmarks read the difference around a compilation
//! ([`PhaseTimes::since`]); the compilers time their phases through [`timed`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A phase of turning a graph into running code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Shape inference finishing a context's graph.
    Inference,
    /// Lowering a routine's assignments to loops.
    Lowering,
    /// Optimizing the loops.
    Optimization,
    /// Writing a backend's code for the loops.
    Codegen,
    /// The C compiler's runs building a library.
    Compilation,
    /// Loading a built or cached library.
    Loading,
}

impl Phase {
    /// Every phase, in the order a compilation passes through them.
    pub const ALL: [Phase; 6] = [
        Phase::Inference,
        Phase::Lowering,
        Phase::Optimization,
        Phase::Codegen,
        Phase::Compilation,
        Phase::Loading,
    ];

    /// The phase's name, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Inference => "inference",
            Phase::Lowering => "lowering",
            Phase::Optimization => "optimization",
            Phase::Codegen => "codegen",
            Phase::Compilation => "compilation",
            Phase::Loading => "loading",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Nanoseconds spent in each phase, indexed by [`Phase::index`].
static NANOS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

/// Runs `f`, counting the time it takes to `phase`, and returns its value.
pub fn timed<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let value = f();
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    NANOS[phase.index()].fetch_add(nanos, Ordering::Relaxed);
    value
}

/// The time spent in each phase up to one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseTimes([Duration; 6]);

impl PhaseTimes {
    /// The times now.
    pub fn now() -> PhaseTimes {
        PhaseTimes(
            NANOS
                .each_ref()
                .map(|n| Duration::from_nanos(n.load(Ordering::Relaxed))),
        )
    }

    /// The time spent in each phase since `earlier`.
    pub fn since(self, earlier: PhaseTimes) -> PhaseTimes {
        PhaseTimes(std::array::from_fn(|i| {
            self.0[i].saturating_sub(earlier.0[i])
        }))
    }

    /// The time spent in `phase`.
    pub fn of(&self, phase: Phase) -> Duration {
        self.0[phase.index()]
    }

    /// The time spent in all phases together.
    pub fn total(&self) -> Duration {
        self.0.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_returns_the_value_and_counts_its_time_to_its_phase() {
        let before = PhaseTimes::now();
        let value = timed(Phase::Codegen, || {
            std::thread::sleep(Duration::from_millis(5));
            42
        });
        let spent = PhaseTimes::now().since(before);
        assert_eq!(value, 42);
        assert!(spent.of(Phase::Codegen) >= Duration::from_millis(5));
    }
}
