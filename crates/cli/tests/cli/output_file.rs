//! End-to-end tests of `rcannl einsum -o FILE`: the file is replaced whole or not at all (through
//! a temporary file beside it and a rename), a destination that is not a regular file is refused,
//! a symbolic link is followed to the regular file it names, and a failed write is an error that
//! leaves nothing behind.

#![cfg(unix)]

use crate::common::{fresh_dir, rcannl, rcannl_os, stderr, stdout};

use std::ffi::OsStr;
use std::fs;
use std::io::BufReader;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output};

/// What a destination holds before a run that must not change it.
const PREVIOUS: &[u8] = b"the previous contents";

/// `rcannl einsum i=>i range:N --backend interp -o DEST [--json]`: a result of `8·N` bytes of
/// data, computed without writing any other file.
fn einsum_args(cells: usize, dest: &Path, json: bool) -> Vec<String> {
    let mut args = [
        "einsum",
        "i=>i",
        &format!("range:{cells}"),
        "--backend",
        "interp",
        "-o",
        dest.to_str().expect("a UTF-8 test path"),
    ]
    .map(str::to_owned)
    .to_vec();
    if json {
        args.push("--json".to_owned());
    }
    args
}

/// Runs the binary under `sh` after `prelude` (shell commands setting limits and signals).
fn rcannl_under(prelude: &str, args: &[String]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{prelude}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .output()
        .expect("sh runs")
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("the test folder is readable")
        .map(|entry| {
            let entry = entry.expect("a folder entry");
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    names.sort();
    names
}

/// The dims and values of the f64 array in `path`, read with an independent reader.
fn read_npy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let file = fs::File::open(path).expect("the array file opens");
    let npy = npyz::NpyFile::new(BufReader::new(file)).expect("a .npy file");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec().expect("f64 values"))
}

fn range(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

#[test]
fn a_write_killed_midway_leaves_the_previous_file() {
    let dir = fresh_dir("killed-write");
    let dest = dir.join("out.npy");
    fs::write(&dest, PREVIOUS).expect("the previous file is written");
    // A file size limit of 8 blocks kills the process (SIGXFSZ) partway through 160 KB.
    let output = rcannl_under("ulimit -f 8", &einsum_args(20_000, &dest, false));
    assert_eq!(output.status.code(), None, "killed by a signal: {output:?}");
    assert_eq!(fs::read(&dest).expect("the destination is there"), PREVIOUS);
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn a_failed_write_is_an_error_and_leaves_nothing_behind() {
    let dir = fresh_dir("failed-write");
    let dest = dir.join("out.npy");
    fs::write(&dest, PREVIOUS).expect("the previous file is written");
    // With SIGXFSZ ignored, writing past the limit fails with EFBIG instead.
    let output = rcannl_under(
        "trap '' XFSZ; ulimit -f 8",
        &einsum_args(20_000, &dest, false),
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!("error: {}: ", dest.display())) && message.contains("large"),
        "{message}"
    );
    assert_eq!(fs::read(&dest).expect("the destination is there"), PREVIOUS);
    assert_eq!(listing(&dir), ["out.npy"], "no temporary file is left");
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn a_new_file_is_written_whole() {
    let dir = fresh_dir("new-file");
    let dest = dir.join("out.npy");
    let output = rcannl(
        &einsum_args(5, &dest, true)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(output.status.success(), "{}", stdout(&output));
    assert_eq!(read_npy(&dest), (vec![5], range(5)));
    assert_eq!(listing(&dir), ["out.npy"], "no temporary file is left");
    // Replacing it keeps its permissions.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o640)).expect("chmod");
    let output = rcannl(
        &einsum_args(3, &dest, true)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(output.status.success(), "{}", stdout(&output));
    assert_eq!(read_npy(&dest), (vec![3], range(3)));
    let mode = fs::metadata(&dest).expect("metadata").permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn a_destination_that_is_not_a_regular_file_is_refused() {
    let dir = fresh_dir("not-regular");
    let fifo = dir.join("pipe.npy");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Held open for reading and writing, so that a run that opens it for writing cannot block.
    let _held = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .expect("the FIFO opens");
    let folder = dir.join("folder");
    fs::create_dir(&folder).expect("a folder is made");
    for dest in [fifo.as_path(), Path::new("/dev/full"), folder.as_path()] {
        let args = einsum_args(3, dest, true);
        let output = rcannl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(output.status.code(), Some(1), "{dest:?}: {output:?}");
        let value: serde_json::Value =
            serde_json::from_str(&stdout(&output)).expect("one JSON value");
        assert_eq!(value["error"]["kind"], "io", "{value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{}: ", dest.display()))
                && message.contains("not a regular file"),
            "{message}"
        );
    }
    assert!(fs::metadata(&fifo).expect("metadata").file_type().is_fifo());
    assert!(
        fs::metadata("/dev/full")
            .expect("metadata")
            .file_type()
            .is_char_device()
    );
    assert!(fs::metadata(&folder).expect("metadata").is_dir());
    assert_eq!(listing(&dir), ["folder", "pipe.npy"], "no temporary file");
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn a_symbolic_link_is_followed_to_the_file_it_names() {
    let dir = fresh_dir("symlink");
    let target = dir.join("target.npy");
    fs::write(&target, PREVIOUS).expect("the target is written");
    let link = dir.join("link.npy");
    std::os::unix::fs::symlink("target.npy", &link).expect("a symbolic link is made");
    let args = einsum_args(4, &link, true);
    let output = rcannl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(fs::symlink_metadata(&link).expect("metadata").is_symlink());
    assert_eq!(read_npy(&target), (vec![4], range(4)));
    assert_eq!(listing(&dir), ["link.npy", "target.npy"]);

    // A link to nothing, or to something that is not a regular file, is refused.
    let dangling = dir.join("dangling.npy");
    std::os::unix::fs::symlink("missing.npy", &dangling).expect("a symbolic link is made");
    let to_device = dir.join("device.npy");
    std::os::unix::fs::symlink("/dev/full", &to_device).expect("a symbolic link is made");
    for (link, why) in [
        (&dangling, "which cannot be followed"),
        (&to_device, "not a regular file"),
    ] {
        let args = einsum_args(4, link, true);
        let output = rcannl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(output.status.code(), Some(1), "{link:?}: {output:?}");
        let text = stdout(&output);
        assert!(text.contains(why), "{text}");
    }
    assert!(!dir.join("missing.npy").exists());
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn a_destination_need_not_be_utf8() {
    let dir = fresh_dir("non-utf8-name");
    let dest = dir.join(OsStr::from_bytes(b"out\xff.npy"));
    let output = rcannl_os(&[
        OsStr::new("einsum"),
        OsStr::new("i=>i"),
        OsStr::new("range:3"),
        OsStr::new("--backend"),
        OsStr::new("interp"),
        OsStr::new("-o"),
        dest.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(read_npy(&dest), (vec![3], range(3)));
    fs::remove_dir_all(&dir).expect("the test folder is removed");
}
