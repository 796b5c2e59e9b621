//! Settings on the command line: `--setting KEY=VALUE` over the environment over `rcannl.toml`
//! in the working folder, as `rcannl settings` lists them; a wrong key or value, on the command
//! line or in the file, is a usage error naming it and where it was given; `debug_dir` gets a
//! folder per compiled routine holding what `explain` shows of it; `trace_stores` writes the same
//! lines on both CPU backends, into that folder's `trace.log` or onto standard error.

use std::path::Path;
use std::process::{Command, Output};

use rcannl_backends::cc::codegen::PRELUDE;
use rcannl_backends::settings::{KEYS, markdown_table};

use crate::common::{fresh_dir, stderr, stdout};

/// Runs the binary in `folder` with `args`, the variables `env` set and every other setting's
/// variable removed.
fn rcannl_in(folder: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rcannl"));
    for key in KEYS {
        command.env_remove(key.variable());
    }
    command
        .current_dir(folder)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the rcannl binary runs")
}

/// The standard output of a run that succeeded.
fn succeeded(output: &Output) -> String {
    assert!(output.status.success(), "{}", stderr(output));
    stdout(output)
}

#[test]
fn the_listing_shows_each_value_and_where_it_came_from() {
    let folder = fresh_dir("settings-listing");
    std::fs::write(
        folder.join("rcannl.toml"),
        "# test settings\nbackend = \"gpu\"\ncflags = \"-O1\"\ncc_timeout = 7\n",
    )
    .unwrap();
    let output = rcannl_in(
        &folder,
        &[("RCANNL_BACKEND", "cc"), ("RCANNL_CFLAGS", "-O2 -g")],
        &["--setting", "backend=interp", "settings"],
    );
    let text = succeeded(&output);
    for line in [
        "# settings from the command line, then the environment, then the config file rcannl.toml, \
         then defaults",
        "backend = \"interp\"  # --setting backend",
        "cflags = \"-O2 -g\"  # RCANNL_CFLAGS",
        "cc_timeout = \"7\"  # rcannl.toml:4: cc_timeout",
        "log_level = \"warn\"  # default",
        "# debug_dir: unset (nothing is written)",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
    assert_eq!(text.lines().count(), KEYS.len() + 1, "{text}");
}

#[test]
fn a_value_from_the_environment_that_is_not_of_its_kind_is_marked() {
    let folder = fresh_dir("settings-marked");
    let output = rcannl_in(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "lots")],
        &["settings"],
    );
    let text = succeeded(&output);
    assert!(
        text.contains("cache_max_bytes = \"lots\"  # RCANNL_CACHE_MAX_BYTES: not a size"),
        "{text}"
    );
}

#[test]
fn the_markdown_table_is_the_list_of_keys() {
    let folder = fresh_dir("settings-markdown");
    let output = rcannl_in(&folder, &[], &["settings", "--markdown"]);
    assert_eq!(succeeded(&output), markdown_table());
}

#[test]
fn help_names_the_setting_flag() {
    let folder = fresh_dir("settings-help");
    let text = succeeded(&rcannl_in(&folder, &[], &["--help"]));
    assert!(text.contains("--setting <KEY=VALUE>"), "{text}");
    assert!(text.contains("settings"), "{text}");
}

#[test]
fn wrong_keys_and_values_are_usage_errors_naming_them() {
    let folder = fresh_dir("settings-wrong");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--setting", "cache_size=2G", "parse", "ij"],
            "--setting cache_size=2G: unknown key \"cache_size\"; the keys are config, ",
        ),
        (
            &["parse", "ij", "--setting", "cc_timeout=soon"],
            "--setting cc_timeout=soon: not a number of seconds above 0",
        ),
        (
            &["--setting", "backend", "parse", "ij"],
            "--setting backend: not key=value",
        ),
    ];
    for (args, expected) in cases {
        let output = rcannl_in(&folder, &[], args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&output).contains(expected),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let mut json_args = cases[0].0.to_vec();
    json_args.push("--json");
    let output = rcannl_in(&folder, &[], &json_args);
    let error: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(error["error"]["kind"], "usage", "{error}");
}

#[test]
fn a_config_file_with_an_unknown_key_stops_every_command() {
    let folder = fresh_dir("settings-file-error");
    std::fs::write(
        folder.join("rcannl.toml"),
        "backend = \"cc\"\nbakend = \"cc\"\n",
    )
    .unwrap();
    let output = rcannl_in(&folder, &[], &["parse", "ij"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("rcannl.toml:2: unknown key \"bakend\""),
        "{}",
        stderr(&output)
    );
    // The file a variable names is read instead, and must exist.
    let output = rcannl_in(
        &folder,
        &[("RCANNL_CONFIG", "elsewhere.toml")],
        &["parse", "ij"],
    );
    assert!(
        stderr(&output).contains("RCANNL_CONFIG names a file: the config file elsewhere.toml"),
        "{}",
        stderr(&output)
    );
}

/// The text between `start` and `end` in `text` (after `start`'s first occurrence).
fn between<'t>(text: &'t str, start: &str, end: &str) -> &'t str {
    let from = text.find(start).expect("the start") + start.len();
    let to = from + text[from..].find(end).expect("the end");
    &text[from..to]
}

#[test]
fn the_debug_folder_holds_each_routine_as_explain_shows_it() {
    let folder = fresh_dir("settings-debug-dir");
    let dump = folder.join("dump");
    let explain = [
        "--setting",
        &format!("debug_dir={}", dump.display()),
        "explain",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--backend",
        "cc",
    ];
    let text = succeeded(&rcannl_in(&folder, &[], &explain));
    let routines: Vec<String> = std::fs::read_dir(&dump)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(routines, ["0001-forward"]);
    let routine = dump.join("0001-forward");
    let read = |name: &str| std::fs::read_to_string(routine.join(name)).unwrap();
    assert_eq!(
        read("optimized.loops"),
        between(
            &text,
            "(optimized; a pre-fill may become a local accumulator) ==\n",
            "\n== generated"
        )
    );
    assert!(read("lowered.loops").starts_with("routine forward():\n"));
    assert!(
        read("assignments.cd").contains("=:+"),
        "{}",
        read("assignments.cd")
    );
    let generated = read("generated.c");
    let shown = text
        .split("lines) is left out. */\n")
        .nth(1)
        .expect("the C shown");
    assert!(
        generated.starts_with(PRELUDE) && generated.ends_with(shown),
        "{generated}"
    );

    // On the interpreter, the variable: no generated code.
    let interp = fresh_dir("settings-debug-dir-interp");
    let args = [
        "einsum",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--backend",
        "interp",
    ];
    let dump = interp.join("dump");
    let env = [("RCANNL_DEBUG_DIR", dump.to_str().unwrap())];
    succeeded(&rcannl_in(&interp, &env, &args));
    let mut files: Vec<String> = std::fs::read_dir(dump.join("0001-forward"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["assignments.cd", "lowered.loops", "optimized.loops"]
    );
}

#[test]
fn an_unwritable_debug_folder_is_an_error_naming_it() {
    let folder = fresh_dir("settings-debug-dir-unwritable");
    std::fs::write(folder.join("taken"), "a file, not a folder").unwrap();
    let args = [
        "--setting",
        "debug_dir=taken",
        "einsum",
        "ij;jk=>ik",
        "range:3,4",
        "range:4,5",
        "--backend",
        "interp",
    ];
    let output = rcannl_in(&folder, &[], &args);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("(--setting debug_dir)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn traced_stores_are_the_same_lines_on_both_cpu_backends() {
    let folder = fresh_dir("settings-trace-stores");
    let args = |backend: &'static str| {
        [
            "--setting",
            "trace_stores=true",
            "einsum",
            "ij;jk=>ik",
            "range:3,4",
            "range:4,5",
            "--backend",
            backend,
        ]
    };
    let traced = |backend: &'static str| {
        let dump = folder.join(backend);
        let env = [("RCANNL_DEBUG_DIR", dump.to_str().unwrap())];
        succeeded(&rcannl_in(&folder, &env, &args(backend)));
        std::fs::read_to_string(dump.join("0001-forward").join("trace.log")).unwrap()
    };
    let interpreted = traced("interp");
    assert_eq!(interpreted, traced("cc"));
    // The product's cells from 0 (its fill), then each term added; the last is the sum
    // Σ_j (4·2 + j)·(5·j + 4) = 8·(0 + 5 + 10 + 15 + 16) + … of row 2, column 4.
    let last_of_2_4 = interpreted
        .lines()
        .rev()
        .find(|line| line.contains("[2, 4] = "))
        .unwrap();
    let want: i64 = (0..4).map(|j| (8 + j) * (5 * j + 4)).sum();
    assert!(
        last_of_2_4.starts_with("forward '") && last_of_2_4.ends_with(&format!("= {want}")),
        "{interpreted}"
    );
    assert_eq!(
        interpreted.lines().count(),
        3 * 5 * (1 + 4),
        "a fill and four terms per cell:\n{interpreted}"
    );
    // Without a debug folder, on standard error.
    let output = rcannl_in(&folder, &[], &args("interp"));
    succeeded(&output);
    assert!(stderr(&output).contains(last_of_2_4), "{}", stderr(&output));
}
