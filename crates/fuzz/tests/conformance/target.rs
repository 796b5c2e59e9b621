//! The backends a conformance case runs on, and [`conformance!`], which instantiates a case once
//! per backend: `conformance!(case)` makes a module `case` of tests `interpreter`, `cc` and
//! `gpu`, each calling `case(&Target)`; `conformance!(case: cc, gpu)` makes only those named (a
//! case whose oracle is the interpreter leaves the interpreter out). The filters `::gpu`, `::cc`
//! and `::interpreter` select one backend's tests.
//!
//! The GPU is the process's device. Where this machine has no adapter, the first GPU test says so
//! in one line, and every GPU test passes without running, unless `RCANNL_REQUIRE_GPU` is set,
//! which makes the missing device a failure.

use std::io::Write;
use std::sync::{Once, OnceLock};

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, CompileError, Executable, Interpreter};
use rcannl_gpu::Gpu;
use rcannl_gpu::wgsl::check_precisions;
use rcannl_ir::{Precision, Routine};

/// Instantiates the case `$case` (a `fn(&Target)`) as one test per backend named, all three when
/// none is: `$case::interpreter`, `$case::cc`, `$case::gpu`.
macro_rules! conformance {
    ($case:ident) => {
        conformance!($case: interpreter, cc, gpu);
    };
    ($case:ident: $($kind:ident),+) => {
        mod $case {
            $(
                #[test]
                fn $kind() {
                    let kind = crate::target::Kind::named(stringify!($kind));
                    if let Some(target) = crate::target::Target::open(kind) {
                        super::$case(&target);
                    }
                }
            )+
        }
    };
}

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The reference interpreter.
    Interpreter,
    /// Generated C, compiled by the C compiler `Compiler::find` finds.
    Cc,
    /// WGSL on the process's GPU.
    Gpu,
}

impl Kind {
    /// The backend a test instantiation is named for.
    ///
    /// # Panics
    /// For a name [`conformance!`] does not make.
    pub fn named(name: &str) -> Kind {
        match name {
            "interpreter" => Kind::Interpreter,
            "cc" => Kind::Cc,
            "gpu" => Kind::Gpu,
            other => panic!("conformance!: no backend is named {other}"),
        }
    }
}

/// An opened backend, of which a case makes as many [`Backend`]s as it needs.
#[derive(Debug, Clone)]
pub struct Target {
    kind: Kind,
    /// The C compiler, for [`Kind::Cc`].
    compiler: Option<Compiler>,
    /// The device, for [`Kind::Gpu`].
    gpu: Option<OnDevice>,
}

impl Target {
    /// The backend of `kind`; `None` for the GPU on a machine without an adapter (see the
    /// module's documentation). A missing C compiler is a failure, as everywhere in the tests.
    pub fn open(kind: Kind) -> Option<Target> {
        let (compiler, gpu) = match kind {
            Kind::Interpreter => (None, None),
            Kind::Cc => (
                Some(Compiler::find().expect("a C compiler (cc or $CC)")),
                None,
            ),
            Kind::Gpu => (None, Some(OnDevice(gpu()?))),
        };
        Some(Target {
            kind,
            compiler,
            gpu,
        })
    }

    /// A fresh backend of this kind.
    pub fn backend(&self) -> Box<dyn Backend> {
        match (&self.compiler, &self.gpu) {
            (Some(compiler), _) => Box::new(compiler.clone()),
            (_, Some(gpu)) => Box::new(gpu.clone()),
            (None, None) => Box::new(Interpreter),
        }
    }

    /// The C compiler, on [`Kind::Cc`].
    pub fn compiler(&self) -> Option<&Compiler> {
        self.compiler.as_ref()
    }

    /// The device, on [`Kind::Gpu`].
    pub fn gpu(&self) -> Option<&OnDevice> {
        self.gpu.as_ref()
    }

    /// The widest float precision the backend computes in: f64 on the host, f32 on a GPU.
    pub fn float(&self) -> Precision {
        match self.kind {
            Kind::Interpreter | Kind::Cc => Precision::F64,
            Kind::Gpu => Precision::F32,
        }
    }

    /// The backend's name, for messages.
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Interpreter => "interpreter",
            Kind::Cc => "cc",
            Kind::Gpu => "gpu",
        }
    }
}

/// The process's GPU; `None`, after one line on standard error (once per process, past the test
/// harness's capture) saying why, when this machine has no adapter, unless `RCANNL_REQUIRE_GPU`
/// is set, which makes its absence a failure.
fn gpu() -> Option<Gpu> {
    static OPENED: OnceLock<Result<Gpu, String>> = OnceLock::new();
    static SAID: Once = Once::new();
    match OPENED.get_or_init(|| Gpu::new().map_err(|e| e.message)) {
        Ok(gpu) => Some(gpu.clone()),
        Err(e) => {
            assert!(
                !rcannl_backends::settings::flag(&rcannl_backends::settings::REQUIRE_GPU).unwrap(),
                "RCANNL_REQUIRE_GPU is set but there is no GPU: {e}"
            );
            SAID.call_once(|| {
                let _ = writeln!(std::io::stderr(), "the GPU suite did not run: {e}");
            });
            None
        }
    }
}

/// The GPU backend, refusing to compile a routine that it would run on the host (every routine
/// but parameter initialization, which computes in f64 on the host by design), so that a case
/// meant for the device cannot pass on the host's results.
#[derive(Debug, Clone)]
pub struct OnDevice(pub Gpu);

impl Backend for OnDevice {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn target(&self) -> Option<String> {
        self.0.target()
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        let features = self.0.device().features();
        if routine.name != "init"
            && let Err(e) = check_precisions(routine, features)
        {
            return Err(CompileError::from(e).context(format_args!(
                "routine {} would run on the host, not on the GPU",
                routine.name
            )));
        }
        self.0.compile(routine)
    }
}
