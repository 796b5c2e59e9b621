//! The threads compiled kernels and matrix products run on: a team of our own, as many threads as
//! `$RAYON_NUM_THREADS` asks for but never more than this machine runs at once (so that an absurd
//! request cannot spawn absurd numbers of threads), the calling thread among them.
//!
//! A routine's run splits many short steps in turn: each split must reach the other threads in
//! well under a microsecond, or small kernels gain nothing from being split. So while a routine
//! that splits runs, the helper threads wait for work spinning ([`with_team`]); between runs they
//! sleep, after a short grace period that bridges the gap between a training loop's steps. A
//! split ([`for_each_part`]) runs part 0 on the calling thread and lets every thread claim the
//! others, one atomic counter for claims and one for parts finished. The calling thread claims
//! what no helper has taken once its own part is done: a helper the system has descheduled (the
//! machine busy with other work) never holds up a split, which then runs on fewer threads
//! rather than waiting a scheduler's time slice for it. Which thread runs a part does not change
//! what the part computes.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

pub use rcannl_ir::in_parallel::threads as kernel_threads;

/// How long helpers keep spinning after a routine's run before they sleep.
const GRACE: Duration = Duration::from_micros(200);

/// A split's work: part `i` of it, for each `i` below the split's number of parts.
type Job = dyn Fn(usize) + Sync;

/// What the helpers share with the thread that leads them.
struct Team {
    /// The helpers (the leader is not counted).
    helpers: usize,
    /// The current split: its number in the high bits, its number of parts in the low byte.
    /// Helpers start a split when the number changes.
    split: AtomicU64,
    /// The current split's number in the high bits, the next part to claim in the low ones.
    claims: AtomicU64,
    /// The current split's work, valid while its parts run. Written by the leader only while no
    /// helper is running a part.
    job: Mutex<Option<&'static Job>>,
    /// The parts of the current split that helpers claimed and finished.
    finished: AtomicUsize,
    /// Whether a part panicked (the leader panics in turn, once all parts are done).
    panicked: AtomicBool,
    /// Whether helpers should spin for work (a routine's run is under way) rather than sleep.
    awake: AtomicBool,
    /// Where sleeping helpers wait to be woken: `awake` is set under this lock, so that none
    /// misses the wake-up between checking it and going to sleep.
    sleeping: Mutex<()>,
    wake: Condvar,
    /// Held by the thread leading the team: one routine's run at a time.
    lead: Mutex<()>,
}

impl Team {
    /// A team of `helpers` before its first split, asleep.
    fn new(helpers: usize) -> Team {
        Team {
            helpers,
            split: AtomicU64::new(0),
            claims: AtomicU64::new(0),
            job: Mutex::new(None),
            finished: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            awake: AtomicBool::new(false),
            sleeping: Mutex::new(()),
            wake: Condvar::new(),
            lead: Mutex::new(()),
        }
    }
}

/// Bits of [`Team::split`] that hold the number of parts.
const PART_BITS: u32 = 8;

thread_local! {
    /// Whether this thread is running a part of a split (which then runs nested splits itself).
    static IN_PART: Cell<bool> = const { Cell::new(false) };
}

/// The team of [`kernel_threads`] threads (helpers started on first use), `None` if there is only
/// one thread or the system refused to start the helpers (after one warning).
fn team() -> Option<&'static Team> {
    static TEAM: OnceLock<Option<&'static Team>> = OnceLock::new();
    *TEAM.get_or_init(|| {
        // A part number must fit the split word's low bits.
        let helpers = kernel_threads().min(1 << PART_BITS) - 1;
        if helpers == 0 {
            return None;
        }
        let team: &'static Team = Box::leak(Box::new(Team::new(helpers)));
        for index in 1..=helpers {
            let started = std::thread::Builder::new()
                .name(format!("rcannl-kernels-{index}"))
                .spawn(move || help(team));
            if let Err(e) = started {
                eprintln!("rcannl: cannot start threads for kernels ({e}); running on one");
                return None;
            }
        }
        Some(team)
    })
}

/// A helper's life: wait for a split (spinning while the team is awake, sleeping otherwise) and
/// run the parts of it that it claims.
fn help(team: &'static Team) {
    // The split the team was made with: a helper that starts late still runs the first one.
    let mut seen = 0;
    loop {
        let mut idle_since: Option<Instant> = None;
        let mut spins = 0u32;
        let split = loop {
            let split = team.split.load(Ordering::Acquire);
            if split != seen {
                break split;
            }
            if team.awake.load(Ordering::Relaxed) {
                idle_since = None;
            } else {
                // Checking the clock costs more than a spin: only now and then.
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= GRACE {
                        let sleeping = team.sleeping.lock().unwrap_or_else(|e| e.into_inner());
                        let _sleeping = team
                            .wake
                            .wait_while(sleeping, |_| {
                                !team.awake.load(Ordering::Relaxed)
                                    && team.split.load(Ordering::Acquire) == seen
                            })
                            .unwrap_or_else(|e| e.into_inner());
                        idle_since = None;
                    }
                }
            }
            std::hint::spin_loop();
        };
        seen = split;
        let (number, parts) = (
            split >> PART_BITS,
            (split & ((1 << PART_BITS) - 1)) as usize,
        );
        while let Some(index) = claim(team, number, parts) {
            let job = team
                .job
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .expect("a split's job is set until its claimed parts finish");
            IN_PART.set(true);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(index))).is_err() {
                team.panicked.store(true, Ordering::Relaxed);
            }
            IN_PART.set(false);
            team.finished.fetch_add(1, Ordering::Release);
        }
    }
}

/// The next unclaimed part of split `number` (of `parts` parts), claimed for this thread; `None`
/// when every part is taken or another split has started.
fn claim(team: &Team, number: u64, parts: usize) -> Option<usize> {
    let mut word = team.claims.load(Ordering::Acquire);
    loop {
        let next = (word & ((1 << PART_BITS) - 1)) as usize;
        if word >> PART_BITS != number || next >= parts {
            return None;
        }
        match team
            .claims
            .compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(next),
            Err(current) => word = current,
        }
    }
}

/// Runs `body` with the team awake, giving it the number of threads its splits may use: up to
/// `threads` (counting the calling thread), or 1 where there is no team or another thread's run
/// leads it now (that run keeps it; this one runs alone, to the same results).
pub(crate) fn with_team<R>(threads: usize, body: impl FnOnce(usize) -> R) -> R {
    // A run that cannot split starts no helpers.
    if threads <= 1 || IN_PART.get() {
        return body(1);
    }
    let Some(team) = team() else {
        return body(1);
    };
    let _lead = match team.lead.try_lock() {
        Ok(lead) => lead,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return body(1),
    };
    {
        let _sleeping = team.sleeping.lock().unwrap_or_else(|e| e.into_inner());
        team.awake.store(true, Ordering::Relaxed);
        team.wake.notify_all();
    }
    // The team goes back to sleep even if `body` panics.
    struct Asleep<'a>(&'a Team);
    impl Drop for Asleep<'_> {
        fn drop(&mut self) {
            LEADING.set(false);
            self.0.awake.store(false, Ordering::Relaxed);
        }
    }
    let _asleep = Asleep(team);
    LEADING.set(true);
    body(threads.min(team.helpers + 1))
}

thread_local! {
    /// Whether this thread leads the team now (inside [`with_team`]).
    static LEADING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `part(i)` for every `i` in `0..parts`, part 0 on this thread and the others at once on
/// the team's helpers; returns when all are done. Outside [`with_team`] (or with more parts than
/// threads) the parts beyond the team's run here, one after another.
///
/// # Panics
/// If a part panics (once every part has finished).
pub(crate) fn for_each_part(parts: usize, part: &(dyn Fn(usize) + Sync)) {
    let leading = LEADING.get() && !IN_PART.get() && parts > 1;
    let Some(team) = (if leading { team() } else { None }) else {
        (0..parts).for_each(part);
        return;
    };
    let shared = parts.min(team.helpers + 1);
    // SAFETY: the reference is used only by the helpers running this split's parts, and this
    // function returns only after all of them have finished.
    let job: &'static Job =
        unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(part) };
    *team.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
    team.finished.store(0, Ordering::Relaxed);
    let number = (team.split.load(Ordering::Relaxed) >> PART_BITS) + 1;
    // Part 0 is this thread's.
    team.claims
        .store((number << PART_BITS) | 1, Ordering::Release);
    team.split
        .store((number << PART_BITS) | shared as u64, Ordering::Release);
    IN_PART.set(true);
    let mut claimed_here = 0;
    let ours = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        part(0);
        while let Some(index) = claim(team, number, shared) {
            claimed_here += 1;
            part(index);
        }
        (shared..parts).for_each(part);
    }));
    IN_PART.set(false);
    // After a panic here, the parts nobody claimed are closed to the helpers too.
    while claim(team, number, shared).is_some() {
        claimed_here += 1;
    }
    let claimed_by_helpers = shared - 1 - claimed_here;
    let mut spins = 0u32;
    while team.finished.load(Ordering::Acquire) < claimed_by_helpers {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) {
            // A helper descheduled by the system: let it have the core.
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
    *team.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
    if let Err(panic) = ours {
        std::panic::resume_unwind(panic);
    }
    if team.panicked.swap(false, Ordering::Relaxed) {
        panic!("a part of a split kernel panicked");
    }
}

/// The stretch of `0..total` that part `part` of `parts` takes: the parts cover it in order, in
/// stretches that differ in length by at most one.
pub(crate) fn stretch(total: usize, parts: usize, part: usize) -> std::ops::Range<usize> {
    total * part / parts..total * (part + 1) / parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_led_or_not_and_splits_nest_safely() {
        for led in [false, true] {
            for parts in [0, 1, 2, 3, 7, 300] {
                let counts: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
                let split = || {
                    for_each_part(parts, &|i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                        // A split inside a part runs where it is.
                        for_each_part(2, &|_| {});
                    })
                };
                if led {
                    with_team(kernel_threads(), |_| {
                        for _ in 0..50 {
                            split();
                        }
                    });
                } else {
                    (0..50).for_each(|_| split());
                }
                assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 50));
            }
        }
    }

    #[test]
    fn runs_from_several_threads_at_once_each_finish_every_part() {
        let (done, expected) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..200 {
                        // One run leads the team at a time; the others run alone.
                        with_team(kernel_threads(), |threads| {
                            for parts in [threads, 3] {
                                for_each_part(parts, &|_| {
                                    done.fetch_add(1, Ordering::Relaxed);
                                });
                                expected.fetch_add(parts, Ordering::Relaxed);
                            }
                        });
                    }
                });
            }
        });
        assert_eq!(
            done.load(Ordering::Relaxed),
            expected.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn each_part_is_claimed_once_and_only_during_its_split() {
        let team = Team::new(2);
        team.claims.store((3 << PART_BITS) | 1, Ordering::Relaxed);
        // A helper still looking at split 2 takes nothing of split 3.
        assert_eq!(claim(&team, 2, 3), None);
        // Part 0 is the leader's; parts 1 and 2 go to whoever asks first, once.
        assert_eq!(claim(&team, 3, 3), Some(1));
        assert_eq!(claim(&team, 3, 3), Some(2));
        assert_eq!(claim(&team, 3, 3), None);
    }

    #[test]
    fn a_panicking_part_panics_the_split_and_leaves_the_team_working() {
        let panicked = std::panic::catch_unwind(|| {
            with_team(kernel_threads(), |_| {
                for_each_part(4, &|i| {
                    if i == 1 {
                        panic!("part 1 fails");
                    }
                })
            })
        });
        assert!(panicked.is_err());
        let done = AtomicUsize::new(0);
        with_team(kernel_threads(), |_| {
            for_each_part(4, &|_| {
                done.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(done.load(Ordering::Relaxed), 4);
    }
}
