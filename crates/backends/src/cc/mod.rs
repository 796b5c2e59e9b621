//! The C backend: writes C for a routine (`codegen`, the C dialect of [`crate::emit`]), compiles
//! it with the system's C compiler (`process`: `$CC` split into words, each run bounded in time)
//! into a shared library kept in the cache folder, where every library is checked before it is
//! loaded (`library`), loads it, and runs its kernels over [`Buffers`], splitting each splittable
//! kernel's outer loop across the threads of a pool of our own (`pool`); matrix products run on
//! `gemm`'s kernels. It also makes the default choice of backend ([`default_backend`]). A
//! routine built traced ([`Compiler::compile_traced`], the `trace_stores` setting) logs every
//! store through the helpers of `trace` and runs on one thread (see [`crate::trace`]).

pub mod codegen;
mod flags;
mod gemm;
mod identity;
mod library;
mod parts;
mod pool;
mod process;
mod target;
mod tiers;
mod trace;

pub use flags::DEFAULT_FLAGS;
pub use gemm::F32Product;
pub use library::libraries_load;
pub use pool::kernel_threads;
pub use process::DEFAULT_TIMEOUT;
pub use target::{Target, cpu_extensions, cpu_levels};

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use rcannl_ir::{NodeId, Precision, Routine, Symbol};

use crate::backend::{Backend, Executable};
use crate::cache;
use crate::error::{CompileError, CompileErrorKind, RunError, check_buffer, static_values};
use crate::phases::{self, Phase};
use crate::settings;
use crate::{Buffers, Interpreter};
use codegen::{Kernel, PRELUDE, Step, generate, generate_named};
use flags::REQUIRED_FLAGS;
use process::CommandLine;

/// A failure of the toolchain: no compiler, flags for another CPU, the compiler's errors.
fn toolchain(message: String) -> CompileError {
    CompileError::new(CompileErrorKind::Toolchain, message)
}

/// A failure to load what was compiled.
fn unloadable(message: String) -> CompileError {
    CompileError::new(CompileErrorKind::Load, message)
}

impl Executable for CompiledRoutine {
    fn run(&self, buffers: &mut Buffers, statics: &HashMap<Symbol, i64>) -> Result<(), RunError> {
        CompiledRoutine::run(self, buffers, statics)
    }

    fn routine(&self) -> &Routine {
        &self.routine
    }

    fn source(&self) -> Option<&str> {
        Some(&self.source)
    }

    fn finish_compiling(&self) -> Result<(), CompileError> {
        CompiledRoutine::finish_compiling(self)
    }

    fn tier(&self) -> Option<String> {
        Some(CompiledRoutine::tier(self))
    }

    fn trace_into(&mut self, sink: crate::trace::Sink) {
        if let Some(traced) = &mut self.traced {
            traced.sink = sink;
        }
    }
}

/// A C compiler, the flags it compiles routines with, the folder they are cached in, and how
/// long one run of it may take.
#[derive(Debug, Clone)]
pub struct Compiler {
    command: CommandLine,
    flags: Vec<String>,
    cache_dir: PathBuf,
    /// The cap on the cache folder's size, kept after each store.
    cache_max_bytes: u64,
    timeout: Duration,
    /// The f32 product asked for in place of [`F32Product::choose`]'s pick.
    f32_product: Option<F32Product>,
    /// Whether a routine the cache does not hold runs quick kernels while its optimized build
    /// finishes (see `tiers`).
    tiered: bool,
}

impl Compiler {
    /// [`Compiler::from_environment`], if it finds a compiler that runs.
    pub fn find() -> Option<Compiler> {
        Compiler::from_environment().ok()
    }

    /// The compiler the environment chooses, if it runs (`--version` succeeds): `$CC` split into
    /// words as a shell splits them (a program and the arguments it always gets, such as
    /// `ccache gcc` or `gcc -O1`), else `cc` on the `PATH`. Its flags come from
    /// `$RCANNL_CFLAGS` (split at whitespace), else [`DEFAULT_FLAGS`]; each run of it may take
    /// `$RCANNL_CC_TIMEOUT` seconds, else [`DEFAULT_TIMEOUT`] (after one warning when the
    /// variable is no number of seconds above 0); compiled routines are cached in
    /// `$RCANNL_CACHE_DIR`, else `$XDG_CACHE_HOME/rcannl`, else `$HOME/.cache/rcannl`, else
    /// `rcannl-<uid>` in the temporary folder (empty variables, and relative `$XDG_CACHE_HOME`
    /// or `$HOME`, count as unset), kept under `$RCANNL_CACHE_MAX_BYTES` bytes, else
    /// [`cache::DEFAULT_MAX_BYTES`] (see [`cache::max_bytes`]); routines are compiled in tiers
    /// unless `$RCANNL_TIERED` is false (see [`Compiler::with_tiers`]). The error says what was
    /// tried and why it failed.
    pub fn from_environment() -> Result<Compiler, CompileError> {
        let timeout = timeout_from_environment();
        let cc = std::env::var("CC").ok();
        let (command, tried) = match cc.as_deref().map(CommandLine::parse) {
            None => (
                CommandLine::program("cc"),
                "$CC is not set, so cc was tried".to_owned(),
            ),
            Some(Ok(None)) => (
                CommandLine::program("cc"),
                "$CC is empty, so cc was tried".to_owned(),
            ),
            Some(Ok(Some(command))) => (command, format!("$CC is {:?}", cc.unwrap_or_default())),
            Some(Err(e)) => {
                return Err(toolchain(format!("no C compiler found: $CC {e}")));
            }
        };
        let not_found = |why: String| toolchain(format!("no C compiler found ({tried}): {why}"));
        let version = command.run(&["--version"], timeout).map_err(not_found)?;
        if !version.status.success() {
            return Err(not_found(
                version.failure(&format!("`{command} --version`")),
            ));
        }
        let flags = match settings::text_or_warn(&settings::CFLAGS) {
            Some(flags) if !flags.trim().is_empty() => {
                flags.split_whitespace().map(str::to_owned).collect()
            }
            _ => DEFAULT_FLAGS.map(str::to_owned).to_vec(),
        };
        let tiered = settings::flag(&settings::TIERED).unwrap_or_else(|e| {
            static WARNED: Once = Once::new();
            WARNED.call_once(|| eprintln!("rcannl: {e}; compiling in tiers"));
            true
        });
        Ok(Compiler {
            command,
            flags,
            cache_dir: cache::default_folder(),
            cache_max_bytes: cache::max_bytes(),
            timeout,
            f32_product: None,
            tiered,
        })
    }

    /// The same compiler, caching in `dir` (created with mode 0700 if missing, and used only
    /// while it is private: see the `cache` module and `SECURITY.md`).
    pub fn with_cache_dir(mut self, dir: &Path) -> Compiler {
        self.cache_dir = dir.to_owned();
        self
    }

    /// The same compiler, keeping its cache folder under `bytes` (the least recently used
    /// entries are evicted after each store) instead of [`cache::max_bytes`].
    pub fn with_cache_max_bytes(mut self, bytes: u64) -> Compiler {
        self.cache_max_bytes = bytes;
        self
    }

    /// The folder compiled routines are cached in.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The same compiler with other optimization and target flags in place of
    /// [`DEFAULT_FLAGS`] or `$RCANNL_CFLAGS` (`["-O2", "-march=x86-64-v3"]`, say). The flags every
    /// build needs are added anyway.
    pub fn with_flags<S: AsRef<str>>(mut self, flags: &[S]) -> Compiler {
        self.flags = flags.iter().map(|f| f.as_ref().to_owned()).collect();
        self
    }

    /// The same compiler, running f32 matrix products on `kernel` rather than the one the
    /// target calls for: for tests and benchmarks that compare kernels on one machine (the AVX2
    /// kernel on a CPU with AVX-512, say). Compiling fails if this CPU or the flags cannot run
    /// it.
    pub fn with_f32_product(mut self, kernel: F32Product) -> Compiler {
        self.f32_product = Some(kernel);
        self
    }

    /// What code this compiler makes with these flags (asked of the compiler once per process).
    /// An error if the compiler rejects the flags.
    pub fn target(&self) -> Result<Target, CompileError> {
        target::query(&self.command, &self.flags, self.timeout).map_err(toolchain)
    }

    /// The target, checked against this CPU: an error naming the extensions the flags enable
    /// and the CPU lacks, whose code would stop on an illegal instruction.
    fn runnable_target(&self) -> Result<Target, CompileError> {
        let target = self.target()?;
        let missing = target.missing_on_this_cpu();
        if !missing.is_empty() {
            return Err(toolchain(format!(
                "{} with {} generates instructions this CPU lacks ({}): the code would stop \
                 on an illegal instruction; choose other flags (RCANNL_CFLAGS), such as \
                 -march={}",
                self.command,
                self.flags.join(" "),
                missing.join(" "),
                target::cpu_levels().last().copied().unwrap_or("native")
            )));
        }
        Ok(target)
    }

    /// The same compiler, compiling in tiers when `tiered` (the default unless
    /// `$RCANNL_TIERED` says otherwise: see the `tiers` module) or straight to optimized code.
    pub fn with_tiers(mut self, tiered: bool) -> Compiler {
        self.tiered = tiered;
        self
    }

    /// The compiler of the quick tier: the same compiler and target, at `-Og` in place of the
    /// optimization level, compiling straight to its own code; `None` where the flags ask for no
    /// more than that.
    pub fn quick_tier(&self) -> Option<Compiler> {
        let flags = tiers::quick_flags(&self.flags)?;
        Some(Compiler {
            flags,
            tiered: false,
            ..self.clone()
        })
    }

    /// Compiles `routine` (or loads it from the cache).
    pub fn compile(&self, routine: &Routine) -> Result<CompiledRoutine, CompileError> {
        self.compile_owned(routine.clone())
    }

    /// [`Compiler::compile`] of a routine the caller no longer needs: the compiled routine keeps
    /// it instead of a copy.
    pub fn compile_owned(&self, routine: Routine) -> Result<CompiledRoutine, CompileError> {
        self.runnable_target()?;
        let generated = phases::timed(Phase::Codegen, || generate(&routine))?;
        let products = wants_products(&routine, &generated);
        let built = self.load_in_tiers(&generated.source, products)?;
        self.link(routine, generated, &built)
    }

    /// Compiles `routine` in its tracing form (see [`crate::trace`]), its runs logging every
    /// store to `sink`: built at once at the optimization level of the flags (no tiers), its
    /// kernels run on one thread, in the routine's order.
    pub fn compile_traced(
        &self,
        routine: &Routine,
        sink: crate::trace::Sink,
    ) -> Result<CompiledRoutine, CompileError> {
        self.runnable_target()?;
        let form = crate::trace::tracing_form(routine);
        let generated = phases::timed(Phase::Codegen, || codegen::generate_traced(&form))?;
        let (library, from_cache) = self.load(&generated.source)?;
        let traced = trace::Traced::new(&library, &routine.name, sink)?;
        let built = Built {
            library,
            from_cache,
            upgrade: None,
        };
        let mut compiled = self.link(form, generated, &built)?;
        compiled.routine = routine.clone();
        compiled.traced = Some(traced);
        Ok(compiled)
    }

    /// Compiles several routines into one library (one run of the compiler, which costs less
    /// than one per routine when there are many); each runs as [`Compiler::compile`]'s would.
    pub fn compile_batch(
        &self,
        routines: &[Routine],
    ) -> Result<Vec<CompiledRoutine>, CompileError> {
        self.runnable_target()?;
        let generated = phases::timed(Phase::Codegen, || {
            routines
                .iter()
                .enumerate()
                .map(|(i, routine)| generate_named(routine, &format!("rc_r{i}_k")))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let mut source = PRELUDE.to_owned();
        for g in &generated {
            source.push_str(&g.source[PRELUDE.len()..]);
        }
        let products = routines
            .iter()
            .zip(&generated)
            .any(|(routine, g)| wants_products(routine, g));
        let built = self.load_in_tiers(&source, products)?;
        routines
            .iter()
            .zip(generated)
            .map(|(routine, g)| self.link(routine.clone(), g, &built))
            .collect()
    }

    /// The library of `source`: the optimized one where the cache holds it or where this
    /// compiler does not compile in tiers, else the quick one, with the optimized build to
    /// come. `products.c` is loaded beside it when `products`.
    fn load_in_tiers(&self, source: &str, products: bool) -> Result<Built, CompileError> {
        let built = |(library, from_cache), upgrade| Built {
            library,
            from_cache,
            upgrade,
        };
        let quick = if self.tiered { self.quick_tier() } else { None };
        let Some(quick) = quick else {
            return Ok(built(
                self.load_beside_products(products, || self.load(source))?,
                None,
            ));
        };
        if let Some(library) = library::cached(&self.cache_dir, &self.key(source)) {
            return Ok(built((Arc::new(library), true), None));
        }
        let started = Instant::now();
        let loaded = self.load_beside_products(products, || quick.load(source))?;
        let upgrade = tiers::Upgrade::new(
            self.clone().with_tiers(false),
            source.to_owned(),
            started.elapsed(),
        );
        Ok(built(loaded, Some(upgrade)))
    }

    /// The library compiled from `source` (from the cache if it holds one that passes its
    /// check), loaded; and whether it came from the cache.
    fn load(&self, source: &str) -> Result<(Arc<libloading::Library>, bool), CompileError> {
        self.load_built_by(source, &|c_file, library| self.build(c_file, library))
    }

    /// [`Compiler::load`] of `products.c`, whose build is the library built with this crate
    /// where this compiler and flags are the ones it was built with.
    fn load_products(&self) -> Result<(Arc<libloading::Library>, bool), CompileError> {
        let prebuilt = self.target().is_ok_and(|target| {
            !PREBUILT_PRODUCTS.is_empty() && target.fingerprint == PREBUILT_FOR
        });
        self.load_built_by(PRODUCTS, &|c_file, library| {
            if !prebuilt {
                return self.build(c_file, library);
            }
            std::fs::write(library, PREBUILT_PRODUCTS)
                .map_err(|e| toolchain(format!("cannot write {}: {e}", library.display())))
        })
    }

    /// The library `build` makes of `source`, or the cache's copy: see [`Compiler::load`].
    fn load_built_by(
        &self,
        source: &str,
        build: library::Build,
    ) -> Result<(Arc<libloading::Library>, bool), CompileError> {
        let (library, from_cache) = library::load(
            &self.cache_dir,
            self.cache_max_bytes,
            &self.key(source),
            source,
            &|c_file, library| phases::timed(Phase::Compilation, || build(c_file, library)),
        )?;
        Ok((Arc::new(library), from_cache))
    }

    /// The cache's key of the library this compiler builds from `source`.
    fn key(&self, source: &str) -> String {
        let mut parts: Vec<&[u8]> = self.command.words().map(str::as_bytes).collect();
        parts.extend(self.flags.iter().map(|flag| flag.as_bytes()));
        parts.extend(REQUIRED_FLAGS.map(str::as_bytes));
        parts.push(source.as_bytes());
        cache::key(&parts)
    }

    /// `load` (a [`Compiler::load`]), with `products.c` built at the same time when
    /// `products` (a cold start would otherwise wait for the two compilers one after the
    /// other); [`Compiler::link`] then finds it in the cache, and reports a failed build.
    fn load_beside_products(
        &self,
        products: bool,
        load: impl FnOnce() -> Result<(Arc<libloading::Library>, bool), CompileError>,
    ) -> Result<(Arc<libloading::Library>, bool), CompileError> {
        if !products {
            return load();
        }
        std::thread::scope(|scope| {
            let products = scope.spawn(|| self.load_products().map(|_| ()));
            let loaded = load();
            // Whatever became of it, `link` loads it again and says why it cannot.
            let _ = products.join();
            loaded
        })
    }

    /// The routine's steps, with its kernels found in the `built` library.
    fn link(
        &self,
        routine: Routine,
        generated: codegen::Generated,
        built: &Built,
    ) -> Result<CompiledRoutine, CompileError> {
        let library = &built.library;
        let (products_library, native) = if wants_products(&routine, &generated) {
            self.products()?
        } else {
            (None, gemm::Native::default())
        };
        // Looked up by every product: a search of the list per product would be quadratic in
        // the routine's size.
        let positions: HashMap<NodeId, usize> = generated
            .buffers
            .iter()
            .enumerate()
            .map(|(position, &id)| (id, position))
            .collect();
        let mut steps = Vec::new();
        for step in generated.steps {
            steps.push(match step {
                Step::Kernel(kernel) => {
                    let function = kernel_in(library, &kernel.name).map_err(unloadable)?;
                    Loaded::Kernel(function, kernel)
                }
                Step::Gemm(plan) => Loaded::Gemm(Box::new(gemm::Prepared::new(
                    &plan,
                    &routine,
                    &positions,
                    &generated.statics,
                    &native,
                ))),
            });
        }
        Ok(CompiledRoutine {
            _library: Arc::clone(library),
            _products_library: products_library,
            native,
            splits: splits(&steps),
            steps,
            routine,
            buffers: generated.buffers,
            scratch_words: generated
                .scratch
                .iter()
                .map(|node| {
                    let cells: usize = node.buffer_dims().iter().product();
                    (cells * node.precision.size_in_bytes()).div_ceil(8)
                })
                .collect(),
            source: generated.source,
            from_cache: built.from_cache,
            tiers: built.upgrade.clone().map(tiers::Tiered::new),
            traced: None,
        })
    }

    /// Builds (or finds in the cache) and loads `products.c`: its vector kernels, and the f32
    /// matrix product [`F32Product::choose`] picks for the target, this CPU and the override.
    fn products(&self) -> Result<(Option<Arc<libloading::Library>>, gemm::Native), CompileError> {
        let (library, _) = self.load_products()?;
        let missing = |name: &str, e: libloading::Error| unloadable(format!("no {name}: {e}"));
        // SAFETY: `products.c` defines these functions with exactly these signatures.
        let native = unsafe {
            let available = *library
                .get::<unsafe extern "C" fn() -> i32>(b"rc_sgemm_available")
                .map_err(|e| missing("rc_sgemm_available", e))?;
            let f32_product = F32Product::choose(
                &self.target()?,
                &target::cpu_extensions(),
                available() != 0,
                self.f32_product,
            )
            .map_err(toolchain)?;
            let sgemm = match f32_product {
                F32Product::Avx512 => Some(b"rc_sgemm".as_slice()),
                F32Product::Avx2 => Some(b"rc_sgemm_avx2".as_slice()),
                F32Product::GemmCrate => None,
            };
            let sgemm = sgemm
                .map(|name| {
                    library
                        .get::<gemm::Sgemm>(name)
                        .map(|kernel| *kernel)
                        .map_err(|e| missing(&String::from_utf8_lossy(name), e))
                })
                .transpose()?;
            gemm::Native {
                f32_product: Some(f32_product),
                sgemm,
                sdot: Some(
                    *library
                        .get::<gemm::Dot<f32>>(b"rc_sdot")
                        .map_err(|e| missing("rc_sdot", e))?,
                ),
                ddot: Some(
                    *library
                        .get::<gemm::Dot<f64>>(b"rc_ddot")
                        .map_err(|e| missing("rc_ddot", e))?,
                ),
                sadd_scaled: Some(
                    *library
                        .get::<gemm::AddScaled<f32>>(b"rc_sadd_scaled")
                        .map_err(|e| missing("rc_sadd_scaled", e))?,
                ),
                dadd_scaled: Some(
                    *library
                        .get::<gemm::AddScaled<f64>>(b"rc_dadd_scaled")
                        .map_err(|e| missing("rc_dadd_scaled", e))?,
                ),
            }
        };
        Ok((Some(library), native))
    }

    /// Compiles the C file `c_file` into the shared library `library`: a long generated source
    /// is cut into one translation unit per kernel thread (`parts`), compiled at once and linked.
    fn build(&self, c_file: &Path, library: &Path) -> Result<(), CompileError> {
        let source = std::fs::read_to_string(c_file)
            .map_err(|e| toolchain(format!("cannot read back {}: {e}", c_file.display())))?;
        let Some(units) = parts::split(&source, kernel_threads()) else {
            return self.run_compiler(&[c_file.as_os_str()], library, true);
        };
        // Named after the library being built, `.partial` giving way to `<part>.c` and
        // `<part>.o`: the cache's listing knows these names as a build's temporaries.
        let paths = cache::Leftovers(
            (0..units.len())
                .flat_map(|i| ["c", "o"].map(|ext| library.with_extension(format!("{i}.{ext}"))))
                .collect(),
        );
        let pairs: Vec<(&PathBuf, &PathBuf)> =
            paths.0.chunks(2).map(|pair| (&pair[0], &pair[1])).collect();
        for ((c_path, _), unit) in pairs.iter().zip(&units) {
            std::fs::write(c_path, unit)
                .map_err(|e| toolchain(format!("cannot write {}: {e}", c_path.display())))?;
        }
        std::thread::scope(|scope| {
            let runs: Vec<_> = pairs
                .iter()
                .map(|&(c_path, object)| {
                    scope.spawn(move || {
                        self.run_compiler(&[OsStr::new("-c"), c_path.as_os_str()], object, false)
                    })
                })
                .collect();
            runs.into_iter()
                .map(|run| run.join().expect("a compiler run does not panic"))
                .collect::<Result<Vec<()>, CompileError>>()
        })?;
        let objects: Vec<&OsStr> = pairs.iter().map(|(_, object)| object.as_os_str()).collect();
        self.run_compiler(&objects, library, true)
    }

    /// Runs the compiler with the routine flags on `inputs`, writing `output`; `linking` adds
    /// the flags of a shared library and the math library.
    fn run_compiler(
        &self,
        inputs: &[&OsStr],
        output: &Path,
        linking: bool,
    ) -> Result<(), CompileError> {
        let mut args: Vec<&OsStr> = self.flags.iter().map(OsStr::new).collect();
        args.extend(
            REQUIRED_FLAGS
                .iter()
                .filter(|flag| linking || **flag != "-shared")
                .map(OsStr::new),
        );
        args.extend([OsStr::new("-o"), output.as_os_str()]);
        args.extend(inputs);
        if linking {
            args.push(OsStr::new("-lm"));
        }
        let finished = self.command.run(&args, self.timeout).map_err(toolchain)?;
        if !finished.status.success() {
            return Err(toolchain(
                finished.failure(&format!("{} on the generated C", self.command)),
            ));
        }
        Ok(())
    }
}

/// Whether `generated` (of `routine`) runs a product on `products.c`'s kernels: an f32 or f64
/// one.
fn wants_products(routine: &Routine, generated: &codegen::Generated) -> bool {
    generated.steps.iter().any(|step| {
        matches!(step, Step::Gemm(plan)
            if matches!(routine.nodes[&plan.c].precision, Precision::F32 | Precision::F64))
    })
}

/// Our product kernels' source (`products.c`), built with the routines' compiler and flags.
const PRODUCTS: &str = include_str!("products.c");

/// `products.c` built when this crate was, with `cc` and [`DEFAULT_FLAGS`] (see the build
/// script): empty where `cc` did not run.
const PREBUILT_PRODUCTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/products.so"));

/// The [`Target::fingerprint`] of the compiler and flags [`PREBUILT_PRODUCTS`] was built with.
const PREBUILT_FOR: &str = include_str!(concat!(env!("OUT_DIR"), "/products.fingerprint"));

/// The time limit `$RCANNL_CC_TIMEOUT` sets, else [`DEFAULT_TIMEOUT`] (after one warning per
/// process when the variable is set to something else than a number of seconds above 0).
fn timeout_from_environment() -> Duration {
    let value = settings::text_or_warn(&settings::CC_TIMEOUT).unwrap_or_default();
    if value.trim().is_empty() {
        return DEFAULT_TIMEOUT;
    }
    process::parse_timeout(&value).unwrap_or_else(|warning| {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| eprintln!("rcannl: {warning}"));
        DEFAULT_TIMEOUT
    })
}

type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i64, i64);

/// The kernel named `name` in `library`.
fn kernel_in(library: &libloading::Library, name: &str) -> Result<KernelFn, String> {
    // SAFETY: every kernel the generator writes has exactly this signature.
    unsafe {
        library
            .get::<KernelFn>(name.as_bytes())
            .map(|function| *function)
            .map_err(|e| format!("no kernel {name}: {e}"))
    }
}

/// A routine's library, loaded.
struct Built {
    library: Arc<libloading::Library>,
    /// Whether it came from the cache.
    from_cache: bool,
    /// The optimized build to come, where the library is the quick tier's.
    upgrade: Option<Arc<tiers::Upgrade>>,
}

/// A step ready to run.
#[derive(Debug)]
enum Loaded {
    Kernel(KernelFn, Kernel),
    /// A matrix product.
    Gemm(Box<gemm::Prepared>),
}

impl Loaded {
    /// The step's work, as the splitting thresholds count it: a kernel's work per iteration of
    /// its splittable loop times that loop's range, a product's multiply-adds.
    fn work(&self) -> usize {
        match self {
            Loaded::Kernel(_, kernel) => kernel
                .parallel
                .unwrap_or(1)
                .saturating_mul(kernel.work_per_iteration),
            Loaded::Gemm(product) => product.work(),
        }
    }
}

/// Whether a routine of `steps` splits its work across threads: some step has enough work to be
/// split (waking the team costs more than a small routine's whole run), and all of them
/// together enough that the threads' wake-ups and hand-offs between the many short steps of a
/// small model's training step cost less than they save.
fn splits(steps: &[Loaded]) -> bool {
    let splittable = |step: &Loaded| match step {
        Loaded::Kernel(_, kernel) => kernel.parallel.is_some_and(|range| range > 1),
        Loaded::Gemm(..) => true,
    };
    let total = steps
        .iter()
        .fold(0usize, |total, step| total.saturating_add(step.work()));
    total >= ROUTINE_PARALLEL_WORK
        && steps
            .iter()
            .any(|step| splittable(step) && step.work() >= PARALLEL_WORK)
}

/// A loaded routine.
#[derive(Debug)]
pub struct CompiledRoutine {
    /// The library the kernels are in, shared by the routines of one batch.
    _library: Arc<libloading::Library>,
    /// The library of our own product kernels, kept loaded while `native` may be called.
    _products_library: Option<Arc<libloading::Library>>,
    native: gemm::Native,
    steps: Vec<Loaded>,
    /// Whether runs split work across threads ([`splits`]).
    splits: bool,
    routine: Routine,
    buffers: Vec<NodeId>,
    /// The size, in 8-byte words, of each scratch buffer the kernels take after the buffers
    /// (the parts of sums cut for threads), allocated for each run.
    scratch_words: Vec<usize>,
    /// The generated C.
    pub source: String,
    /// Whether the library came from the cache (nothing was compiled).
    pub from_cache: bool,
    /// Where the library is the quick tier's: the optimized build to come.
    tiers: Option<tiers::Tiered>,
    /// Where the routine is traced: the library's entry points and where its lines go.
    traced: Option<trace::Traced>,
}

/// Buffer pointers handed to kernels on several threads.
#[derive(Clone, Copy)]
struct Pointers<'a>(&'a [*mut u8]);

impl Pointers<'_> {
    /// The first pointer (a method, so that closures capture the whole `Pointers`, which
    /// crosses into other threads, not its field, which does not).
    fn start(self) -> *const *mut u8 {
        self.0.as_ptr()
    }
}

// SAFETY: only the chunks of one kernel run at once, and a kernel is split only over a loop that
// `nests::splittable` accepts: its iterations write disjoint cells and read no cell another
// iteration writes.
unsafe impl Send for Pointers<'_> {}
// SAFETY: as above.
unsafe impl Sync for Pointers<'_> {}

/// Below this much work a kernel runs on one thread: splitting costs more than it saves. A split
/// costs well under a microsecond (the team's helpers spin while a routine runs), which a
/// kernel of a few thousand cells already earns back.
const PARALLEL_WORK: usize = 1 << 12;

/// Below this much work in all, a routine runs on one thread.
const ROUTINE_PARALLEL_WORK: usize = 1 << 22;

impl CompiledRoutine {
    /// The kernel the routine's f32 matrix products run on; `None` when it has no f32 or f64
    /// matrix product (the products that load `products.c`).
    pub fn f32_product(&self) -> Option<F32Product> {
        self.native.f32_product
    }

    /// Waits until the routine runs its optimized kernels, starting their build if it has not
    /// started (see the `tiers` module); at once where it already does. The error is the
    /// optimized build's, whose routine keeps running its quick kernels.
    pub fn finish_compiling(&self) -> Result<(), CompileError> {
        let Some(tiers) = &self.tiers else {
            return Ok(());
        };
        tiers.finish();
        match self.optimized_kernels() {
            Some(_) => Ok(()),
            None => Err(toolchain(tiers.failure().unwrap_or_else(|| {
                "the optimized build ended without a library".to_owned()
            }))),
        }
    }

    /// Which code runs: the optimized build, or the quick tier's while the optimized build is
    /// to come, is under way, or has failed.
    pub fn tier(&self) -> String {
        let Some(tiers) = &self.tiers else {
            return "optimized".to_owned();
        };
        if self.optimized_kernels().is_some() {
            return format!(
                "optimized ({}), in place of the quick build it started on",
                tiers.optimized_flags()
            );
        }
        let optimized = tiers.optimized_flags();
        let quick = format!(
            "quick ({} in place of the optimization level)",
            tiers::QUICK_LEVEL
        );
        match tiers.failure() {
            Some(why) => format!("{quick}: the optimized build ({optimized}) failed: {why}"),
            None if tiers.started() => {
                format!("{quick}, while the optimized build ({optimized}) runs")
            }
            None => format!(
                "{quick}; the optimized build ({optimized}) starts once the routine has run as \
                 long as the quick build took"
            ),
        }
    }

    /// The routine's kernels in the optimized library, in the order of its kernel steps, once
    /// that is built; `None` while the quick ones run (or where there are no tiers).
    fn optimized_kernels(&self) -> Option<&[KernelFn]> {
        self.tiers.as_ref()?.optimized(|library| {
            self.steps
                .iter()
                .filter_map(|step| match step {
                    Loaded::Kernel(_, kernel) => Some(kernel_in(library, &kernel.name)),
                    Loaded::Gemm(_) => None,
                })
                .collect()
        })
    }

    /// Runs the routine over `buffers`, with a value for each of its static indices, splitting
    /// work across [`kernel_threads`] threads.
    pub fn run(
        &self,
        buffers: &mut Buffers,
        statics: &HashMap<Symbol, i64>,
    ) -> Result<(), RunError> {
        self.run_on(buffers, statics, kernel_threads())
    }

    /// [`CompiledRoutine::run`] splitting work into at most `threads` parts, which run on the
    /// threads of the kernel pool (at most [`kernel_threads`] at once). The results do not depend
    /// on `threads`.
    pub fn run_on(
        &self,
        buffers: &mut Buffers,
        statics: &HashMap<Symbol, i64>,
        threads: usize,
    ) -> Result<(), RunError> {
        let threads = threads.max(1);
        let static_values = static_values(&self.routine, statics)?;
        buffers.hand_to_host()?;
        let mut pointers = Vec::with_capacity(self.buffers.len());
        for id in &self.buffers {
            check_buffer(&self.routine, *id, buffers.node(*id)?)?;
            pointers.push(buffers.storage_mut(*id)?.as_mut_ptr());
        }
        // Each run has its own scratch, which its kernels write before they read: two runs of
        // one routine on two threads share nothing.
        let mut scratch: Vec<Vec<u64>> = self.scratch_words.iter().map(|&w| vec![0; w]).collect();
        pointers.extend(
            scratch
                .iter_mut()
                .map(|words| words.as_mut_ptr().cast::<u8>()),
        );
        // Each kernel's own buffers, in its function's order, one kernel's after another's.
        let arguments: Vec<*mut u8> = self
            .steps
            .iter()
            .flat_map(|step| match step {
                Loaded::Kernel(_, kernel) => kernel.arguments.as_slice(),
                Loaded::Gemm(_) => &[],
            })
            .map(|&at| pointers[at])
            .collect();
        let pointers = Pointers(&pointers);
        let statics = &static_values;
        crate::traffic::count_kernels(self.steps.len() as u64);
        let optimized = self.optimized_kernels();
        let run_steps = |threads: usize| {
            let mut next_arguments = 0;
            let mut kernels = 0;
            for step in &self.steps {
                let (function, kernel) = match step {
                    Loaded::Kernel(quick, kernel) => {
                        let function = optimized.map_or(*quick, |functions| functions[kernels]);
                        kernels += 1;
                        (function, kernel)
                    }
                    Loaded::Gemm(product) => {
                        // SAFETY: the buffers match the routine's nodes (checked above) and the
                        // product's accesses were checked against them when generating.
                        unsafe { product.run(pointers.0, statics, threads) };
                        continue;
                    }
                };
                let own = next_arguments..next_arguments + kernel.arguments.len();
                next_arguments = own.end;
                let pointers = Pointers(&arguments[own]);
                match kernel.parallel {
                    Some(range)
                        if threads > 1
                            && range > 1
                            && range.saturating_mul(kernel.work_per_iteration) >= PARALLEL_WORK =>
                    {
                        let chunks = threads.min(range);
                        let run_chunk = |chunk: usize| {
                            let part = pool::stretch(range, chunks, chunk);
                            // SAFETY: the buffers match the routine's nodes (checked above),
                            // every index was checked against them when generating, and the
                            // chunks write disjoint cells.
                            unsafe {
                                function(
                                    pointers.start(),
                                    statics.as_ptr(),
                                    part.start as i64,
                                    part.end as i64,
                                );
                            }
                        };
                        pool::for_each_part(chunks, &run_chunk);
                    }
                    _ => {
                        let end = kernel.parallel.unwrap_or(1);
                        // SAFETY: as above, on one thread.
                        unsafe { function(pointers.start(), statics.as_ptr(), 0, end as i64) };
                    }
                }
            }
        };
        // Routines too small to split run on one thread and leave the team asleep; so do quick
        // kernels while their optimized build runs, leaving the other cores to the compiler
        // (a team spinning beside it slows both).
        let building = self
            .tiers
            .as_ref()
            .is_some_and(|t| optimized.is_none() && t.started());
        let threads = if self.splits && !building { threads } else { 1 };
        if let Some(traced) = &self.traced {
            // One thread, the routine's order: the lines come as the interpreter writes them.
            return traced.around(|| pool::with_team(1, run_steps));
        }
        let started = Instant::now();
        pool::with_team(threads, run_steps);
        if let Some(tiers) = &self.tiers
            && optimized.is_none()
        {
            tiers.ran_quick(started.elapsed());
        }
        Ok(())
    }
}

impl Backend for Compiler {
    fn name(&self) -> &'static str {
        "cc"
    }

    fn target(&self) -> Option<String> {
        Some(match Compiler::target(self) {
            Ok(target) => target.to_string(),
            Err(e) => format!("unknown ({e})"),
        })
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        if crate::trace::requested()? {
            let sink = crate::trace::Sink::StandardError;
            return Ok(Box::new(Compiler::compile_traced(self, routine, sink)?));
        }
        Ok(Box::new(Compiler::compile(self, routine)?))
    }

    fn compile_owned(&self, routine: Routine) -> Result<Box<dyn Executable>, CompileError> {
        if crate::trace::requested()? {
            return Backend::compile(self, &routine);
        }
        Ok(Box::new(Compiler::compile_owned(self, routine)?))
    }

    fn compile_traced(
        &self,
        routine: &Routine,
        sink: crate::trace::Sink,
    ) -> Result<Box<dyn Executable>, CompileError> {
        Ok(Box::new(Compiler::compile_traced(self, routine, sink)?))
    }
}

static NO_COMPILER: Once = Once::new();

/// The C backend when a C compiler runs here and what it compiles can be loaded (the cache
/// folder, or else the temporary folder, is not on a `noexec` mount: see
/// [`libraries_load`]), else the interpreter, after one warning on standard error (once
/// per process).
pub fn default_backend() -> Box<dyn Backend> {
    match Compiler::from_environment() {
        Ok(compiler) => match libraries_load(compiler.cache_dir()) {
            Ok(()) => Box::new(compiler),
            Err(why) => {
                NO_COMPILER.call_once(|| {
                    eprintln!("rcannl: {why}; running on the interpreter, which is much slower.");
                });
                Box::new(Interpreter)
            }
        },
        Err(why) => {
            NO_COMPILER.call_once(|| {
                eprintln!(
                    "rcannl: {why}; running on the interpreter, which is much slower. Install a \
                     C compiler or set CC."
                );
            });
            Box::new(Interpreter)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of the libraries in the cache folder `dir`.
    fn cached_libraries(dir: &Path) -> Vec<Vec<u8>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension() == Some(OsStr::new("so")) {
                found.push(std::fs::read(path).unwrap());
            }
        }
        found
    }

    #[test]
    fn products_built_with_the_crate_stand_in_only_for_the_same_compiler_and_flags() {
        let scratch = std::env::temp_dir().join(format!("rcannl-prebuilt-{}", cache::unique()));
        let (same, other) = (scratch.join("same"), scratch.join("other"));
        // The compiler and flags the build script built with.
        let compiler = Compiler {
            command: CommandLine::program("cc"),
            ..Compiler::from_environment().unwrap()
        }
        .with_flags(&DEFAULT_FLAGS)
        .with_cache_dir(&same);
        assert!(!PREBUILT_PRODUCTS.is_empty());
        assert_eq!(compiler.target().unwrap().fingerprint, PREBUILT_FOR);
        compiler.load_products().unwrap();
        assert_eq!(cached_libraries(&same), [PREBUILT_PRODUCTS]);

        let compiler = compiler
            .with_flags(&["-O2", "-march=native"])
            .with_cache_dir(&other);
        assert_ne!(compiler.target().unwrap().fingerprint, PREBUILT_FOR);
        let (library, _) = compiler.load_products().unwrap();
        // SAFETY: `products.c` defines it with this signature.
        let available = unsafe {
            *library
                .get::<unsafe extern "C" fn() -> i32>(b"rc_sgemm_available")
                .unwrap()
        };
        // SAFETY: it reads nothing.
        let available = unsafe { available() } != 0;
        assert_eq!(available, target::cpu_extensions().contains(&"avx512f"));
        let built = cached_libraries(&other);
        assert_eq!(built.len(), 1);
        assert_ne!(built[0], PREBUILT_PRODUCTS);
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
