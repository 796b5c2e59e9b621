//! Running the built binary on one case's arguments under a time limit, and how the run ended;
//! the command line as a shell would take it, for reproducing a failure.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it (an abort, a crash, a kill for memory).
    Signal(i32),
    /// It ran past the limit and was killed.
    TimedOut,
}

/// A finished run.
pub struct Outcome {
    pub ended: Ended,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The most address space a run may take (8 GiB): an absurd allocation fails, as an abort the
/// fuzzer reports, instead of taking the machine's memory.
const ADDRESS_SPACE_KIB: u64 = 8 << 20;

/// Runs the binary on `args` in folder `dir` (where a relative path in them goes) with `cache`
/// as its compiled-code cache, killing it after `limit`.
pub fn run(args: &[OsString], dir: &Path, cache: &Path, limit: Duration) -> Outcome {
    let binary = env!("CARGO_BIN_EXE_rcannl");
    let mut command = if cfg!(unix) {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" \"$@\""))
            .arg(binary);
        command
    } else {
        Command::new(binary)
    };
    let mut child = command
        .args(args)
        .current_dir(dir)
        .env("RCANNL_CACHE_DIR", cache)
        .env("RUST_BACKTRACE", "0")
        .env("RAYON_NUM_THREADS", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rcannl binary starts");
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let ended = wait(&mut child, limit);
    Outcome {
        ended,
        stdout: stdout.join().expect("stdout is read"),
        stderr: stderr.join().expect("stderr is read"),
    }
}

/// Reads a pipe to its end on a thread of its own, so that a full pipe never blocks the child.
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A pipe closed early only shortens what is read.
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Waits for `child`, polling ever less often, and kills it after `limit`.
fn wait(child: &mut Child, limit: Duration) -> Ended {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait().expect("the child's status is read") {
            return match status.code() {
                Some(code) => Ended::Code(code),
                None => Ended::Signal(signal(&status)),
            };
        }
        if start.elapsed() > limit {
            // Already gone if it ended since: either way it is reaped below.
            let _ = child.kill();
            let _ = child.wait();
            return Ended::TimedOut;
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(unix)]
fn signal(status: &std::process::ExitStatus) -> i32 {
    std::os::unix::process::ExitStatusExt::signal(status).unwrap_or(-1)
}

#[cfg(not(unix))]
fn signal(_: &std::process::ExitStatus) -> i32 {
    -1
}

/// `args` quoted for a POSIX shell, bytes that are not printable ASCII escaped as `$'\xHH'`.
pub fn shell_line(args: &[OsString]) -> String {
    let mut words = vec![env!("CARGO_BIN_EXE_rcannl").to_owned()];
    words.extend(args.iter().map(|arg| quote(arg)));
    words.join(" ")
}

fn quote(arg: &OsStr) -> String {
    let bytes = arg.as_encoded_bytes();
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"_./:=,+@%^-".contains(b);
    if !bytes.is_empty() && bytes.iter().all(plain) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut quoted = "$'".to_owned();
    for &b in bytes {
        match b {
            b'\'' | b'\\' => {
                quoted.push('\\');
                quoted.push(char::from(b));
            }
            0x20..=0x7e => quoted.push(char::from(b)),
            _ => quoted.push_str(&format!("\\x{b:02x}")),
        }
    }
    quoted.push('\'');
    quoted
}
