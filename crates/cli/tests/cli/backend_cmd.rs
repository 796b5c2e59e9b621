//! Choosing the backend of `rcannl einsum` and `rcannl explain`: `--backend gpu` gives the C
//! backend's values, `explain` shows the WGSL kernels, `RCANNL_BACKEND` chooses when the flag is
//! absent, and a backend that names nothing or cannot be had is an error (status 1) saying why.
//!
//! The tests that run on the GPU print one line and return when there is no GPU adapter, unless
//! `RCANNL_REQUIRE_GPU` is set. Built without the `gpu` feature (`.ci/run` does so), the GPU is
//! never present, and choosing it must be an error naming the feature.

use std::io::Write;
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::{rcannl, run_on, stderr, stdout};
use serde_json::Value;

/// Whether the GPU can run here. Without it, one line on standard error (written past the test
/// harness's capture, once per run) says the GPU suite did not run; with `RCANNL_REQUIRE_GPU=1` (the `require_gpu` setting),
/// that is a test failure.
fn gpu_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| match rcannl_tensor::BackendChoice::Gpu.backend() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                !rcannl_backends::settings::flag(&rcannl_backends::settings::REQUIRE_GPU).unwrap(),
                "RCANNL_REQUIRE_GPU is set: {e}"
            );
            let _ = writeln!(std::io::stderr(), "the GPU suite did not run: {e}");
            false
        }
    })
}

/// Runs the binary with `RCANNL_BACKEND` set to `value`.
fn rcannl_with_backend_variable(value: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .env("RCANNL_BACKEND", value)
        .output()
        .expect("the rcannl binary runs")
}

/// The numbers of a JSON array of numbers (nested arrays flattened).
fn numbers(value: &Value) -> Vec<f64> {
    match value {
        Value::Array(items) => items.iter().flat_map(numbers).collect(),
        Value::Number(n) => vec![n.as_f64().expect("a number")],
        other => panic!("expected numbers, got {other}"),
    }
}

/// Problems whose every product and partial sum is an integer below 2^24, so that f32 gives the
/// exact result in any order of summation: the GPU must give the C backend's JSON exactly.
const EXACT: &[&[&str]] = &[
    &["ij;jk=>ik", "range:3,4", "range:4,5", "--grads"],
    &[
        "b|i->o; i->o => b|->o",
        "range:2|3->4",
        "range:3->4",
        "--grads",
    ],
    &["o<+k; k => o", "range:8", "values:1,-2,3:3", "--grads"],
    &[
        "2*o<+k=>o",
        "values:3,1,4,1,5,9,2,6:8",
        "--op",
        "einmax",
        "--set",
        "k=2",
        "--grads",
    ],
    &[
        "x; y => x^y",
        "range:2",
        "range:3",
        "--op",
        "concat",
        "--grads",
    ],
    &["ij=>j", "range:64,33"],
    &["-", "values:-2,0,3:3", "--op", "relu", "--grads"],
    &[
        "ij;jk=>ik",
        "range:16,16",
        "range:16,16",
        "--dtype",
        "int32",
    ],
    &[
        "i;i=>",
        "values:7,-3,5:3",
        "values:2,4,-6:3",
        "--dtype",
        "int32",
    ],
    // Integers narrower than 32 bits, wrapping: held widened on the GPU, wrapped on the store.
    &["ij;jk=>ik", "range:4,5", "range:5,3", "--dtype", "uint8"],
    &[
        "i;i=>",
        "values:100,100,-7:3",
        "values:2,1,3:3",
        "--dtype",
        "int8",
    ],
    &[
        "ij;jk=>ik",
        "range:16,16",
        "range:16,16",
        "--dtype",
        "uint16",
    ],
];

#[test]
fn the_gpu_gives_the_c_backends_values_exactly_where_f32_is_exact() {
    if !gpu_present() {
        return;
    }
    for case in EXACT {
        let mut args = case.to_vec();
        if !args.contains(&"--dtype") {
            args.extend(["--dtype", "float32"]);
        }
        let gpu = run_on("gpu", &args);
        let cc = run_on("cc", &args);
        assert_eq!(gpu, cc, "{args:?}");
    }
}

#[test]
fn the_gpus_transcendentals_agree_with_the_c_backend_within_f32_tolerance() {
    if !gpu_present() {
        return;
    }
    for op in ["exp", "tanh", "sin", "log", "sqrt", "recip-sqrt"] {
        let args = [
            "-",
            "values:0.25,0.5,1,1.5,2,3.75:6",
            "--op",
            op,
            "--grads",
            "--dtype",
            "float32",
        ];
        let gpu = run_on("gpu", &args);
        let cc = run_on("cc", &args);
        assert_eq!(gpu["shape"], cc["shape"], "{op}");
        for key in ["values", "grads"] {
            let (a, b) = (numbers(&gpu[key]), numbers(&cc[key]));
            assert_eq!(a.len(), b.len(), "{op} {key}");
            for (x, y) in a.iter().zip(&b) {
                // What WGSL promises: sin and cos within 2^-11, the others within a few units
                // in the last place of f32 (3 + 2|x| of them for exp).
                let tolerance = 2f64.powi(-11) + 1e-5 * y.abs();
                assert!((x - y).abs() <= tolerance, "{op} {key}: {x} vs {y}");
            }
        }
    }
}

/// float64 inputs compute on a GPU offering shader-f64 (and shader-int64) as on the C backend,
/// and are an error naming the tensor on one that does not.
#[test]
fn float64_on_the_gpu_computes_as_on_the_c_backend_or_is_an_error_naming_the_tensor() {
    if !gpu_present() {
        return;
    }
    let args = ["einsum", "ij;jk=>ik", "range:2,3", "range:3,4"];
    let on_gpu = rcannl(&[&args[..], &["--backend", "gpu"]].concat());
    if on_gpu.status.success() {
        let on_cc = rcannl(&[&args[..], &["--backend", "cc"]].concat());
        assert!(on_cc.status.success(), "{}", stderr(&on_cc));
        assert_eq!(stdout(&on_gpu), stdout(&on_cc));
    } else {
        assert_eq!(on_gpu.status.code(), Some(1), "{}", stdout(&on_gpu));
        let err = stderr(&on_gpu);
        assert!(
            err.contains("the GPU cannot hold tensor 'x1'") && err.contains("in f64"),
            "{err}"
        );
    }
}

#[test]
fn explain_on_the_gpu_shows_the_wgsl_kernels() {
    if !gpu_present() {
        return;
    }
    let args = [
        "explain",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--dtype",
        "float32",
    ];
    let flagged = rcannl(&[&args[..], &["--backend", "gpu"]].concat());
    let chosen = rcannl_with_backend_variable("gpu", &args);
    for output in [&flagged, &chosen] {
        assert!(output.status.success(), "{}", stderr(output));
        let text = stdout(output);
        for needle in [
            "backend:   gpu\n",
            "== generated WGSL (gpu) ==\n// kernel 0: ",
            "@compute @workgroup_size(",
            "fn main(",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        let nest = text.find("== loop nest").expect("a loop nest");
        let wgsl = text.find("== generated WGSL").expect("WGSL");
        assert!(nest < wgsl, "{text}");
    }
    assert_eq!(stdout(&flagged), stdout(&chosen));
}

/// `rcannl` with the GPU backend and the environment variable `variable` set to `value`.
fn rcannl_on_the_gpu_with(variable: &str, value: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .args(["--backend", "gpu"])
        .env(variable, value)
        .output()
        .expect("the rcannl binary runs")
}

#[test]
fn the_adapter_variable_picks_by_name_and_names_the_adapters_when_none_matches() {
    if !gpu_present() {
        return;
    }
    let args = ["explain", "i=>", "range:3", "--dtype", "float32"];
    let found = stdout(&rcannl(&[&args[..], &["--backend", "gpu"]].concat()));
    let target = found
        .lines()
        .find_map(|l| l.strip_prefix("target:"))
        .expect("a target line")
        .trim()
        .to_owned();
    // The adapter's own name, in other case: the same adapter.
    let name = target.split(" (").next().expect("a name").to_uppercase();
    let picked = rcannl_on_the_gpu_with("RCANNL_GPU_ADAPTER", &name, &args);
    assert!(picked.status.success(), "{}", stderr(&picked));
    assert!(stdout(&picked).contains(&target), "{}", stdout(&picked));
    let none = rcannl_on_the_gpu_with("RCANNL_GPU_ADAPTER", "no such adapter 7", &args);
    assert_eq!(none.status.code(), Some(1));
    let err = stderr(&none);
    assert!(
        err.contains("no GPU adapter's name contains RCANNL_GPU_ADAPTER=no such adapter 7")
            && err.contains(target.split(" (").next().expect("a name")),
        "{err}"
    );
}

#[test]
fn the_wgsl_folder_variable_keeps_every_routines_kernels() {
    if !gpu_present() {
        return;
    }
    let folder = std::env::temp_dir().join(format!("rcannl-wgsl-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let args = [
        "einsum",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--dtype",
        "float32",
    ];
    let output = rcannl_on_the_gpu_with("RCANNL_WGSL_DIR", folder.to_str().expect("UTF-8"), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let kept: Vec<_> = std::fs::read_dir(&folder)
        .expect("the folder was made")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let name = kept[0]
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    assert!(name.starts_with("forward-gpu_"), "{name}");
    let text = std::fs::read_to_string(&kept[0]).expect("readable");
    assert!(
        text.contains("// kernel 0: ") && text.contains("@compute"),
        "{text}"
    );
    std::fs::remove_dir_all(&folder).expect("removed");
}

#[test]
fn a_tensor_larger_than_one_storage_buffer_is_an_error_naming_it() {
    if !gpu_present() {
        return;
    }
    let args = ["einsum", "ij=>i", "fill:1:40,40", "--dtype", "float32"];
    let output = rcannl_on_the_gpu_with("RCANNL_GPU_ARENA_BYTES", "4096", &args);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(
        err.contains("tensor 'x1' of dims [40, 40] needs 6400 bytes on the GPU")
            && err.contains("at most 4096 bytes in one storage buffer")
            && err.lines().count() <= 3,
        "{err}"
    );
    // Within the cap, the tensors share arenas as usual.
    let fits = rcannl_on_the_gpu_with(
        "RCANNL_GPU_ARENA_BYTES",
        "8192",
        &[
            "einsum",
            "ij=>i",
            "fill:1:40,40",
            "--dtype",
            "float32",
            "--json",
        ],
    );
    assert!(fits.status.success(), "{}", stderr(&fits));
    let result: Value = serde_json::from_str(&stdout(&fits)).expect("JSON");
    assert_eq!(numbers(&result["values"]), vec![40.0; 40]);
}

#[test]
fn the_backend_variable_chooses_when_the_flag_is_absent() {
    if !gpu_present() {
        return;
    }
    let args = [
        "einsum",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--dtype",
        "float32",
        "--json",
    ];
    let chosen = rcannl_with_backend_variable("gpu", &args);
    assert!(chosen.status.success(), "{}", stderr(&chosen));
    let flagged = rcannl(&[&args[..], &["--backend", "gpu"]].concat());
    assert_eq!(stdout(&chosen), stdout(&flagged));
    // The flag wins over the variable: float64 runs on the interpreter though the variable
    // names the GPU, which refuses float64.
    let args = [
        "explain",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--backend",
        "interp",
    ];
    let overridden = rcannl_with_backend_variable("gpu", &args);
    assert!(overridden.status.success(), "{}", stderr(&overridden));
    assert!(stdout(&overridden).contains("backend:   interpreter\n"));
}

#[test]
fn the_variable_chooses_the_c_backend_and_the_interpreter_too() {
    let args = ["explain", "ij;jk=>ik", "range:3,4", "range:4,5"];
    for (value, shown) in [
        ("cc", "backend:   cc\n"),
        ("interp", "backend:   interpreter\n"),
    ] {
        let output = rcannl_with_backend_variable(value, &args);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stdout(&output).contains(shown),
            "{value}: {}",
            stdout(&output)
        );
    }
}

#[test]
fn an_unknown_backend_flag_is_a_usage_error_listing_the_accepted_ones() {
    let output = rcannl(&["einsum", "i=>", "range:3", "--backend", "cuda"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("invalid value 'cuda' for '--backend <BACKEND>'")
            && err.contains("[possible values: interp, cc, gpu]"),
        "{err}"
    );
}

#[test]
fn an_unknown_backend_variable_is_a_usage_error_listing_the_accepted_ones() {
    let check = |message: &str| {
        assert!(
            message.starts_with("RCANNL_BACKEND=cuda names no backend")
                && message.contains("the accepted values are gpu, cc, interp"),
            "{message}"
        );
    };
    let output = rcannl_with_backend_variable("cuda", &["einsum", "i=>", "range:3", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let error: Value = serde_json::from_str(&stdout(&output)).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "usage");
    check(error["error"]["message"].as_str().expect("a message"));
    let output = rcannl_with_backend_variable("cuda", &["explain", "i=>", "range:3"]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    check(err.strip_prefix("error: ").expect("an error line"));
    assert_eq!(err.lines().count(), 1, "{err}");
    // The flag, when given, is what counts.
    let output =
        rcannl_with_backend_variable("cuda", &["einsum", "i=>", "range:3", "--backend", "interp"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Without a Vulkan driver (the loader pointed at none), asking for the GPU is an error saying
/// what was looked for, by flag and by variable alike, never a quiet run elsewhere.
#[cfg(all(target_os = "linux", feature = "gpu"))]
#[test]
fn the_gpu_without_an_adapter_is_an_error_saying_what_was_looked_for() {
    let without_driver = |variable: Option<&str>, args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rcannl"));
        command
            .args(args)
            .env("VK_ICD_FILENAMES", "/nonexistent/rcannl-test-icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/rcannl-test-icd.json")
            .env_remove("VK_ADD_DRIVER_FILES")
            .env_remove("RCANNL_BACKEND");
        if let Some(value) = variable {
            command.env("RCANNL_BACKEND", value);
        }
        command.output().expect("the rcannl binary runs")
    };
    let problem = ["i=>", "range:3", "--dtype", "float32", "--json"];
    let flagged = without_driver(
        None,
        &[&["einsum"][..], &problem, &["--backend", "gpu"]].concat(),
    );
    let chosen = without_driver(Some("gpu"), &[&["einsum"][..], &problem].concat());
    for (output, prefix) in [
        (flagged, "--backend gpu: "),
        (chosen, "RCANNL_BACKEND=gpu: "),
    ] {
        assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
        let error: Value = serde_json::from_str(&stdout(&output)).expect("one JSON error");
        assert_eq!(error["error"]["kind"], "run");
        let message = error["error"]["message"].as_str().expect("a message");
        assert!(
            message.starts_with(&format!("{prefix}no GPU adapter found"))
                && message.contains("mesa-vulkan-drivers"),
            "{message}"
        );
    }
}

/// In a build without the `gpu` feature, asking for the GPU by flag, by variable or through the
/// library is an error saying that the build lacks the feature and how to get it, never a run
/// on another backend.
#[cfg(not(feature = "gpu"))]
#[test]
fn the_gpu_in_a_build_without_the_gpu_feature_is_an_error_naming_the_feature() {
    let names_the_feature = |message: &str| {
        message.contains("made without the `gpu` cargo feature")
            && message.contains("--features gpu")
    };
    let problem = ["i=>", "range:3", "--dtype", "float32"];
    let flagged = rcannl(&[&["einsum"][..], &problem, &["--json", "--backend", "gpu"]].concat());
    let chosen =
        rcannl_with_backend_variable("gpu", &[&["einsum"][..], &problem, &["--json"]].concat());
    for (output, prefix) in [
        (flagged, "--backend gpu: "),
        (chosen, "RCANNL_BACKEND=gpu: "),
    ] {
        assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
        let error: Value = serde_json::from_str(&stdout(&output)).expect("one JSON error");
        assert_eq!(error["error"]["kind"], "run");
        let message = error["error"]["message"].as_str().expect("a message");
        assert!(
            message.starts_with(prefix) && names_the_feature(message),
            "{message}"
        );
    }
    let explained = rcannl(&[&["explain"][..], &problem, &["--backend", "gpu"]].concat());
    assert_eq!(explained.status.code(), Some(1), "{}", stdout(&explained));
    assert!(stdout(&explained).is_empty(), "{}", stdout(&explained));
    let err = stderr(&explained);
    assert!(
        err.starts_with("error: --backend gpu: ") && names_the_feature(&err),
        "{err}"
    );
    let library = rcannl_tensor::BackendChoice::Gpu
        .backend()
        .map(|b| b.name());
    assert!(
        library
            .as_ref()
            .is_err_and(|e| names_the_feature(&e.message)),
        "{library:?}"
    );
    let chosen =
        rcannl_tensor::backend_choice::backend_for_setting(Some("gpu".as_ref())).map(|b| b.name());
    assert!(
        chosen.as_ref().is_err_and(
            |e| e.message.starts_with("RCANNL_BACKEND=gpu: ") && names_the_feature(&e.message)
        ),
        "{chosen:?}"
    );
}
