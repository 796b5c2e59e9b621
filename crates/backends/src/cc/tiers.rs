//! Tiered compilation. A routine whose optimized library the cache does not hold is first built
//! at `-Og` (the other flags kept: the optimizations that cost little to make, registers kept
//! across statements, nothing vectorized or inlined at length), which takes a fraction of the
//! optimized build's time, and runs at once. Once it has spent as long running as that quick
//! build took, and at least a tenth of a second (a routine run once or twice never pays for a
//! second build; one trained for many steps does), the optimized build starts on a thread of
//! its own, is kept in the cache, and replaces the quick kernels at the first run after it is
//! done. While it runs, the routine runs on one thread, leaving the other cores to the compiler.
//!
//! Both tiers compute the same bits: the generated C fixes the order of every floating-point
//! operation (sums kept in lanes combined in a fixed order, no contraction into fused
//! multiply-adds, no fast math), so the optimization level changes only the speed. The
//! conformance suite checks this bit for bit on random routines for every target and compiler
//! (`.ci/matrix`). `products.c` is not tiered: it is prebuilt with the crate, or built once with
//! the optimized flags.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use libloading::Library;

use super::{Compiler, KernelFn};
use crate::error::CompileError;

/// The least time a routine runs quick kernels before its optimized build starts, whatever its
/// quick build took: about what the quickest build takes (the prelude alone), so that a quick
/// library found in the cache, which took no time to have, does not start an optimized build
/// after a routine's one short run (an initialization).
const MIN_QUICK_RUN: Duration = Duration::from_millis(100);

/// The optimization level of the quick tier.
pub(super) const QUICK_LEVEL: &str = "-Og";

/// The flags of the quick tier of a compiler with `flags`: every optimization level replaced
/// by [`QUICK_LEVEL`]; `None` where no flag asks for more than it or `-O0` (nothing would be
/// quicker to build).
pub(super) fn quick_flags(flags: &[String]) -> Option<Vec<String>> {
    let optimizing = |flag: &str| flag.starts_with("-O") && !matches!(flag, "-O0" | QUICK_LEVEL);
    flags.iter().any(|flag| optimizing(flag)).then(|| {
        flags
            .iter()
            .map(|flag| {
                if flag.starts_with("-O") {
                    QUICK_LEVEL.to_owned()
                } else {
                    flag.clone()
                }
            })
            .collect()
    })
}

/// Where the optimized build of a quick library stands.
enum Build {
    /// Not asked for yet.
    Waiting,
    /// Running on its thread.
    Running(JoinHandle<()>),
    /// Joined: its outcome is in [`Upgrade::outcome`].
    Joined,
}

/// The optimized build of a quick library, shared by the routines compiled into it.
pub(super) struct Upgrade {
    /// The compiler with the optimized flags.
    compiler: Compiler,
    /// The generated C both tiers are built from.
    source: String,
    /// How long the routines run quick kernels before this build starts: the time the quick
    /// library took to build (or to load from the cache), at least [`MIN_QUICK_RUN`].
    quick_build: Duration,
    build: Mutex<Build>,
    /// The optimized library once built, or why it could not be.
    outcome: OnceLock<Result<Arc<Library>, CompileError>>,
}

impl std::fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgrade")
            .field("quick_build", &self.quick_build)
            .field("outcome", &self.outcome.get().map(|o| o.as_ref().map(drop)))
            .finish_non_exhaustive()
    }
}

impl Upgrade {
    /// The optimized build by `compiler` of `source`, whose quick build took `quick_build`.
    pub(super) fn new(compiler: Compiler, source: String, quick_build: Duration) -> Arc<Upgrade> {
        Arc::new(Upgrade {
            compiler,
            source,
            quick_build: quick_build.max(MIN_QUICK_RUN),
            build: Mutex::new(Build::Waiting),
            outcome: OnceLock::new(),
        })
    }

    /// Starts the optimized build on a thread of its own, unless it has started.
    fn start(self: &Arc<Self>) {
        let mut build = self
            .build
            .lock()
            .expect("the build's state is never left half-set");
        if matches!(*build, Build::Waiting) {
            let upgrade = Arc::clone(self);
            *build = Build::Running(std::thread::spawn(move || {
                let outcome = upgrade
                    .compiler
                    .load(&upgrade.source)
                    .map(|(library, _)| library);
                let _ = upgrade.outcome.set(outcome);
            }));
        }
    }

    /// Starts the optimized build if it has not started, and waits for it.
    fn finish(self: &Arc<Self>) {
        self.start();
        let mut build = self
            .build
            .lock()
            .expect("the build's state is never left half-set");
        if let Build::Running(thread) = std::mem::replace(&mut *build, Build::Joined) {
            // The thread only builds and records the outcome; a panic there is a bug that the
            // missing outcome then reports.
            let _ = thread.join();
        }
    }

    /// The optimized library, once built: `None` while it is not.
    fn outcome(&self) -> Option<&Result<Arc<Library>, CompileError>> {
        self.outcome.get()
    }
}

/// A routine's place in the tiers: running quick kernels until the optimized build of their
/// library is done, then the optimized ones.
#[derive(Debug)]
pub(super) struct Tiered {
    upgrade: Arc<Upgrade>,
    /// Nanoseconds the routine has spent running quick kernels.
    quick_run: AtomicU64,
    /// The routine's kernels in the optimized library, in the order of its kernel steps; or why
    /// they cannot be had (the routine then keeps its quick kernels).
    optimized: OnceLock<Result<Vec<KernelFn>, String>>,
}

impl Tiered {
    /// The tiers of a routine built quick, whose optimized build is `upgrade`.
    pub(super) fn new(upgrade: Arc<Upgrade>) -> Tiered {
        Tiered {
            upgrade,
            quick_run: AtomicU64::new(0),
            optimized: OnceLock::new(),
        }
    }

    /// The optimized kernels, once their library is built; `link` finds them in it (the
    /// kernels' names in order). A failed build or lookup is said once on standard error: the
    /// routine keeps running its quick kernels, which compute the same values.
    pub(super) fn optimized(
        &self,
        link: impl FnOnce(&Library) -> Result<Vec<KernelFn>, String>,
    ) -> Option<&[KernelFn]> {
        if self.optimized.get().is_none() {
            let outcome = self.upgrade.outcome()?;
            let _ = self.optimized.set(match outcome {
                Ok(library) => link(library),
                Err(e) => Err(e.to_string()),
            });
        }
        match self.optimized.get()? {
            Ok(kernels) => Some(kernels),
            Err(why) => {
                static WARNED: Once = Once::new();
                WARNED.call_once(|| {
                    eprintln!(
                        "rcannl: the optimized build of a routine failed ({why}); it keeps \
                         running unoptimized"
                    );
                });
                None
            }
        }
    }

    /// Counts `elapsed` spent running quick kernels; once that adds up to the quick build's
    /// time, the optimized build starts.
    pub(super) fn ran_quick(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let total = self
            .quick_run
            .fetch_add(nanos, Ordering::Relaxed)
            .saturating_add(nanos);
        if Duration::from_nanos(total) >= self.upgrade.quick_build {
            self.upgrade.start();
        }
    }

    /// Waits for the optimized build, starting it if it has not started.
    pub(super) fn finish(&self) {
        self.upgrade.finish();
    }

    /// The optimized build's error, once it has failed.
    pub(super) fn failure(&self) -> Option<String> {
        match self.optimized.get() {
            Some(Err(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Whether the optimized build has started.
    pub(super) fn started(&self) -> bool {
        !matches!(
            *self
                .upgrade
                .build
                .lock()
                .expect("the build's state is never left half-set"),
            Build::Waiting
        )
    }

    /// The optimized build's flags.
    pub(super) fn optimized_flags(&self) -> String {
        self.upgrade.compiler.flags.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_quick_tier_drops_every_optimization_level_and_keeps_the_target() {
        assert_eq!(
            quick_flags(&words("-O3 -march=native")),
            Some(words("-Og -march=native"))
        );
        assert_eq!(
            quick_flags(&words("-O2 -march=x86-64-v3 -Os -g")),
            Some(words("-Og -march=x86-64-v3 -Og -g"))
        );
        // Nothing to gain where the flags ask for no more.
        assert_eq!(quick_flags(&words("-O0 -march=native")), None);
        assert_eq!(quick_flags(&words("-Og -march=native")), None);
        assert_eq!(quick_flags(&words("-march=native")), None);
    }
}
