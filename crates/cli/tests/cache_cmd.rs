//! `rcannl cache info` and `rcannl cache clean`: the folder `$RCANNL_CACHE_DIR` names, filled by
//! a run on the C backend, listed, cleaned down to the cap and emptied; the cap from
//! `$RCANNL_CACHE_MAX_BYTES`; a folder that cannot be read is an `io` error.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{fresh_dir, stderr, stdout};
use serde_json::{Value, json};

/// Runs the binary with the cache in `folder` and the variables `env` set.
fn rcannl_with(folder: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .env("RCANNL_CACHE_DIR", folder)
        .env_remove("RCANNL_CACHE_MAX_BYTES")
        .envs(env.iter().copied())
        .output()
        .expect("the rcannl binary runs")
}

/// The one line of JSON a successful command printed.
fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}{}",
        stdout(output),
        stderr(output)
    );
    serde_json::from_str(&stdout(output)).expect("one JSON value")
}

/// The bytes of the files in `folder` whose names start with `rc_`: the C backend's entries.
fn library_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder)
        .unwrap()
        .map(Result::unwrap)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("rc_"))
        .map(|entry| entry.metadata().unwrap().len())
        .sum()
}

/// Runs a matrix product on the C backend with `folder` as the cache, which keeps its library
/// there.
fn compile_a_product(folder: &Path) {
    let args = [
        "einsum",
        "ij;jk=>ik",
        "range:2,3",
        "range:3,2",
        "--backend",
        "cc",
    ];
    let run = rcannl_with(folder, &[], &args);
    assert!(run.status.success(), "{}", stderr(&run));
}

#[test]
fn info_lists_what_a_run_kept_and_clean_removes_it() {
    let folder = fresh_dir("cache-info").join("cache");
    let empty = json_of(&rcannl_with(&folder, &[], &["cache", "info", "--json"]));
    assert_eq!(
        empty,
        json!({"folder": folder.to_str().unwrap(), "entries": 0, "bytes": 0, "cap": 512 << 20})
    );
    compile_a_product(&folder);
    let filled = json_of(&rcannl_with(&folder, &[], &["cache", "info", "--json"]));
    let entries = filled["entries"].as_u64().unwrap();
    assert!(entries >= 1, "{filled}");
    assert_eq!(filled["bytes"], library_bytes(&folder));

    let text = stdout(&rcannl_with(&folder, &[], &["cache", "info"]));
    assert!(
        text.contains(&format!("entries: {entries}\n"))
            && text.contains("cap:     512.0 MiB (536870912 bytes)"),
        "{text}"
    );

    // Under the default cap nothing goes; under a cap of 0 everything does.
    let to_cap = ["cache", "clean", "--to-cap", "--json"];
    let none = json_of(&rcannl_with(&folder, &[], &to_cap));
    assert_eq!(none["removed_entries"], 0);
    let all = json_of(&rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "0")],
        &to_cap,
    ));
    assert_eq!(all["removed_entries"], entries);
    assert_eq!(all["removed_bytes"], filled["bytes"]);
    assert_eq!(library_bytes(&folder), 0);

    compile_a_product(&folder);
    let cleaned = rcannl_with(&folder, &[], &["cache", "clean"]);
    let line = stdout(&cleaned);
    assert!(
        cleaned.status.success()
            && line.starts_with(&format!("removed {entries} entr"))
            && line.ends_with(&format!("from {}\n", folder.display())),
        "{line}"
    );
    assert_eq!(library_bytes(&folder), 0);
}

#[test]
fn the_cap_comes_from_the_environment() {
    let folder = fresh_dir("cache-cap");
    let capped = json_of(&rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "200M")],
        &["cache", "info", "--json"],
    ));
    assert_eq!(capped["cap"], 200 << 20);
    let invalid = rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "lots")],
        &["cache", "info", "--json"],
    );
    assert_eq!(json_of(&invalid)["cap"], 512 << 20);
    assert!(
        stderr(&invalid).contains("$RCANNL_CACHE_MAX_BYTES is \"lots\", not a size"),
        "{}",
        stderr(&invalid)
    );
}

#[test]
fn a_cache_folder_that_cannot_be_read_is_an_io_error() {
    let file = fresh_dir("cache-unreadable").join("a file");
    std::fs::write(&file, b"not a folder").unwrap();
    for args in [&["cache", "info"][..], &["cache", "clean"]] {
        let output = rcannl_with(&file, &[], args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.starts_with(&format!(
                "error: cannot read the cache folder {}: ",
                file.display()
            )),
            "{args:?}: {message}"
        );
    }
    let output = rcannl_with(&file, &[], &["cache", "info", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let error: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(error["error"]["kind"], "io");
}
