//! Which backend a context runs on when its caller does not give one: the one the `backend`
//! setting names (`gpu`, `cc` or `interp`; the variable `RCANNL_BACKEND`, or `--setting` or a
//! config file, see `rcannl_backends::settings`), else the default — the C backend when a C
//! compiler runs, else the interpreter after one warning.
//!
//! A choice is honoured or refused, never replaced: `RCANNL_BACKEND=gpu` on a machine without a
//! GPU adapter, `cc` without a C compiler, or a value that names no backend is an error saying
//! what was asked for and what was looked for. [`Context::new`](crate::Context::new), which
//! cannot fail, gives such a context a backend that refuses every routine with that error, so
//! the program stops at its first compilation, as it would on any backend's compile error.
//!
//! In a build without the `gpu` feature the name `gpu` is still known, and choosing it is an
//! error saying that this build has no GPU backend and how to get one.

use std::ffi::OsStr;

use rcannl_backends::cc::Compiler;
use rcannl_backends::settings;
use rcannl_backends::{
    Backend, CompileError, CompileErrorKind, Executable, Interpreter, default_backend,
};
use rcannl_ir::Routine;

use crate::graph::{TensorError, TensorErrorKind, error, error_of};

/// The environment variable that chooses the backend of [`Context::new`](crate::Context::new).
pub const BACKEND_VARIABLE: &str = "RCANNL_BACKEND";

/// A backend by name, as `RCANNL_BACKEND` and the command line's `--backend` give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// WGSL compute shaders on wgpu (Vulkan, Metal or DX12); an error to choose in a build
    /// without the `gpu` feature.
    Gpu,
    /// Generated C, compiled by the system's C compiler.
    Cc,
    /// The reference interpreter.
    Interp,
}

impl BackendChoice {
    /// Every choice, in the order messages list them.
    pub const ALL: [BackendChoice; 3] =
        [BackendChoice::Gpu, BackendChoice::Cc, BackendChoice::Interp];

    /// The name that selects it.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Gpu => "gpu",
            BackendChoice::Cc => "cc",
            BackendChoice::Interp => "interp",
        }
    }

    /// The choice `name` selects, if any.
    pub fn from_name(name: &str) -> Option<BackendChoice> {
        BackendChoice::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The accepted names, comma-separated, for messages.
    pub fn accepted() -> String {
        BackendChoice::ALL.map(BackendChoice::name).join(", ")
    }

    /// The backend itself; the error says why it cannot be used here (what was looked for).
    pub fn backend(self) -> Result<Box<dyn Backend>, TensorError> {
        match self {
            BackendChoice::Gpu => gpu_backend(),
            BackendChoice::Cc => match Compiler::from_environment() {
                Ok(compiler) => Ok(Box::new(compiler)),
                Err(e) => Err(error_of(TensorErrorKind::Compile, e.to_string()).caused_by(e)),
            },
            BackendChoice::Interp => Ok(Box::new(Interpreter)),
        }
    }

    /// The choice of the `backend` setting (`RCANNL_BACKEND`): `None` when it is unset or
    /// empty, an error listing the accepted values when it names no backend.
    pub fn from_environment() -> Result<Option<BackendChoice>, TensorError> {
        let (value, named) = configured()?;
        BackendChoice::from_named_setting(value.as_deref(), &named)
    }

    /// The choice of a value of `RCANNL_BACKEND` (`None`: unset).
    pub fn from_setting(value: Option<&OsStr>) -> Result<Option<BackendChoice>, TensorError> {
        BackendChoice::from_named_setting(value, BACKEND_VARIABLE)
    }

    /// The choice of a value of the `backend` setting given as `named` (`None`: unset).
    fn from_named_setting(
        value: Option<&OsStr>,
        named: &str,
    ) -> Result<Option<BackendChoice>, TensorError> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        match value.to_str().and_then(BackendChoice::from_name) {
            Some(choice) => Ok(Some(choice)),
            None => Err(error(format!(
                "{named}={} names no backend; the accepted values are {} (unset: cc \
                 when a C compiler runs, else interp)",
                value.to_string_lossy(),
                BackendChoice::accepted()
            ))),
        }
    }
}

/// The GPU backend, when a GPU adapter opens.
#[cfg(feature = "gpu")]
fn gpu_backend() -> Result<Box<dyn Backend>, TensorError> {
    match rcannl_gpu::Gpu::new() {
        Ok(gpu) => Ok(Box::new(gpu)),
        Err(e) => Err(error_of(TensorErrorKind::Compile, e.message.clone()).caused_by(e)),
    }
}

/// No GPU backend in this build: the error says which feature brings it.
#[cfg(not(feature = "gpu"))]
fn gpu_backend() -> Result<Box<dyn Backend>, TensorError> {
    Err(error_of(
        TensorErrorKind::Compile,
        "this build of rcannl was made without the `gpu` cargo feature, so it has no GPU \
         backend; rebuild with the default features, or with `--features gpu`",
    ))
}

/// The `backend` setting's value, where set, and the name its origin gives it
/// (`RCANNL_BACKEND`, `--setting backend`, `rcannl.toml:3: backend`); the error is that of a
/// config file it would come from.
fn configured() -> Result<(Option<std::ffi::OsString>, String), TensorError> {
    match settings::get(&settings::BACKEND) {
        Ok(Some(setting)) => Ok((Some(setting.value.clone()), setting.named())),
        Ok(None) => Ok((None, BACKEND_VARIABLE.to_owned())),
        Err(e) => Err(error(e.message)),
    }
}

/// The backend a value of `RCANNL_BACKEND` chooses (`None`: unset, the default backend); the
/// error names the variable, its value, and why that backend cannot be used.
pub fn backend_for_setting(value: Option<&OsStr>) -> Result<Box<dyn Backend>, TensorError> {
    backend_for_named_setting(value, BACKEND_VARIABLE)
}

/// [`backend_for_setting`] for a value of the `backend` setting given as `named`.
fn backend_for_named_setting(
    value: Option<&OsStr>,
    named: &str,
) -> Result<Box<dyn Backend>, TensorError> {
    match BackendChoice::from_named_setting(value, named)? {
        None => Ok(default_backend()),
        Some(choice) => choice.backend().map_err(|e| {
            let message = format!("{named}={}: {}", choice.name(), e.message);
            e.reworded(message)
        }),
    }
}

/// The backend the `backend` setting chooses, else the default one (see the module's
/// documentation).
pub fn chosen_backend() -> Result<Box<dyn Backend>, TensorError> {
    let (value, named) = configured()?;
    backend_for_named_setting(value.as_deref(), &named)
}

/// The backend of a context made by [`Context::new`](crate::Context::new): the one the `backend`
/// setting chooses, or, when the choice cannot be honoured, one that refuses every routine
/// saying why.
pub(crate) fn configured_backend_or_refusal() -> Box<dyn Backend> {
    match configured() {
        Ok((value, named)) => backend_or_refusal(value.as_deref(), &named),
        Err(why) => Box::new(Refusal {
            name: "none",
            why: why.message,
        }),
    }
}

/// The backend a value of the `backend` setting given as `named` chooses, or one that refuses
/// every routine saying why it cannot be had.
fn backend_or_refusal(value: Option<&OsStr>, named: &str) -> Box<dyn Backend> {
    match backend_for_named_setting(value, named) {
        Ok(backend) => backend,
        Err(why) => Box::new(Refusal {
            name: BackendChoice::from_setting(value)
                .ok()
                .flatten()
                .map_or("none", BackendChoice::name),
            why: why.message,
        }),
    }
}

/// A backend that could not be had: every compilation fails with the reason.
#[derive(Debug)]
struct Refusal {
    /// The name of the backend asked for ("none" for a value that names none).
    name: &'static str,
    why: String,
}

impl Backend for Refusal {
    fn name(&self) -> &'static str {
        self.name
    }

    fn compile(&self, _: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        Err(CompileError::new(
            CompileErrorKind::Unavailable,
            self.why.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Graph};

    #[test]
    fn names_select_their_backends_and_unset_or_empty_is_the_default() {
        for choice in BackendChoice::ALL {
            assert_eq!(
                BackendChoice::from_setting(Some(OsStr::new(choice.name()))),
                Ok(Some(choice))
            );
        }
        assert_eq!(BackendChoice::from_setting(None), Ok(None));
        assert_eq!(BackendChoice::from_setting(Some(OsStr::new(""))), Ok(None));
        let interp = backend_for_setting(Some(OsStr::new("interp"))).unwrap();
        assert_eq!(interp.name(), "interpreter");
    }

    #[test]
    fn the_setting_takes_the_names_of_the_choices() {
        let settings::Kind::Choice(accepted) = settings::BACKEND.kind else {
            panic!("the backend setting is a choice");
        };
        assert_eq!(accepted, BackendChoice::ALL.map(BackendChoice::name));
    }

    #[test]
    fn a_value_from_elsewhere_than_the_environment_is_named_as_it_was_given() {
        let e = BackendChoice::from_named_setting(Some(OsStr::new("cuda")), "--setting backend")
            .unwrap_err();
        assert!(
            e.message
                .starts_with("--setting backend=cuda names no backend"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_value_is_an_error_listing_the_accepted_ones() {
        for value in ["cuda", "GPU", " gpu"] {
            let e = BackendChoice::from_setting(Some(OsStr::new(value))).unwrap_err();
            assert!(
                e.message
                    .starts_with(&format!("RCANNL_BACKEND={value} names no backend"))
                    && e.message
                        .contains("the accepted values are gpu, cc, interp"),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn a_context_on_a_refused_choice_fails_at_its_first_routine_saying_why() {
        let graph = Graph::new();
        let w = graph.param("w").shape("3").build();
        let y = w.relu();
        let mut ctx = Context::with_backend(
            &graph,
            backend_or_refusal(Some(OsStr::new("cuda")), BACKEND_VARIABLE),
        );
        assert_eq!(ctx.backend_name(), "none");
        // Parameters are drawn on the host: no routine yet.
        ctx.init_params().unwrap();
        let e = ctx.forward(&[&y]).unwrap_err();
        assert!(
            e.message.contains("RCANNL_BACKEND=cuda names no backend")
                && e.message.contains("gpu, cc, interp"),
            "{}",
            e.message
        );
    }
}
