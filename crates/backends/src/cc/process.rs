//! Running the C compiler: its command line (`$CC` split into words as a shell splits them, so
//! that `CC="ccache gcc"` or `CC="gcc -O1"` work), and each run bounded in time, the compiler and
//! every process it started killed when the limit passes so that a hanging compiler cannot hang
//! us.

use std::ffi::OsStr;
use std::fmt;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one run of the compiler may take unless `$RCANNL_CC_TIMEOUT` says otherwise: far
/// beyond any build of ours, short of forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the processes of a killed compiler are given to go away.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// The variable that sets the time limit, in seconds.
pub const TIMEOUT_VARIABLE: &str = "RCANNL_CC_TIMEOUT";

/// A compiler's command line: the program and the arguments that come before ours.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CommandLine {
    pub program: String,
    pub leading: Vec<String>,
}

impl CommandLine {
    /// The command line `text` spells (`$CC`'s value): words split at whitespace, with `'…'`
    /// taken literally, `"…"` and `\` as a shell takes them. `None` when there is no word.
    pub fn parse(text: &str) -> Result<Option<CommandLine>, String> {
        let mut words = split_words(text)?.into_iter();
        Ok(words.next().map(|program| CommandLine {
            program,
            leading: words.collect(),
        }))
    }

    /// The command line of a program named `program`, with no arguments of its own.
    pub fn program(program: &str) -> CommandLine {
        CommandLine {
            program: program.to_owned(),
            leading: Vec::new(),
        }
    }

    /// The words, for a cache key: each one, so that `"a b"` and `a b` differ.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.program.as_str()).chain(self.leading.iter().map(String::as_str))
    }

    /// Runs the command line with `args` after its own, on an empty standard input, and waits
    /// at most `limit` for it to finish and close its output: then the compiler and every
    /// process it started are killed, and the error names the command and the limit.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S], limit: Duration) -> Result<Finished, String> {
        let shown = || {
            let mut shown = self.to_string();
            for arg in args {
                shown.push(' ');
                shown.push_str(&arg.as_ref().to_string_lossy());
            }
            shown
        };
        let mut command = Command::new(&self.program);
        command
            .args(&self.leading)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A group of its own, so that the processes it starts (`cc1`, `as`, `ld`, or whatever a
        // wrapper runs) can be killed with it.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run `{}`: {e}", shown()))?;
        let deadline = Instant::now().checked_add(limit);
        let (sender, outputs) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        for (stream, mut reader) in [
            (Stream::Out, Box::new(stdout) as Box<dyn Read + Send>),
            (Stream::Err, Box::new(stderr)),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = reader.read_to_end(&mut bytes);
                let _ = sender.send((stream, bytes));
            });
        }
        let too_long = || {
            format!(
                "`{}` did not finish within {} s and was killed ({TIMEOUT_VARIABLE} sets the \
                 limit in seconds)",
                shown(),
                limit.as_secs_f64()
            )
        };
        let failed = match wait(&mut child, deadline) {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err(too_long()),
            Err(e) => Err(format!("cannot wait for `{}`: {e}", shown())),
        };
        let status = failed.inspect_err(|_| {
            kill_group(&mut child);
            // The group is gone once its last member has closed the output (a process that left
            // it may hold on: it is not waited for long).
            let grace = Instant::now() + KILL_GRACE;
            for _ in 0..2 {
                let _ = outputs.recv_timeout(grace.saturating_duration_since(Instant::now()));
            }
        })?;
        // Both streams, unless a process it left behind keeps them open past the limit.
        let mut finished = Finished {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        for _ in 0..2 {
            let received = match deadline {
                Some(deadline) => {
                    outputs.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                }
                None => outputs
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match received {
                Ok((Stream::Out, bytes)) => finished.stdout = bytes,
                Ok((Stream::Err, bytes)) => finished.stderr = bytes,
                Err(_) => return Err(too_long()),
            }
        }
        Ok(finished)
    }
}

impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = self.words().collect();
        f.write_str(&words.join(" "))
    }
}

/// What a compiler run that finished in time ended with.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    /// That the run of `what` failed: its exit status, and its standard error when it wrote
    /// one.
    pub fn failure(&self, what: &str) -> String {
        let stderr = String::from_utf8_lossy(&self.stderr);
        let stderr = stderr.trim_end();
        if stderr.is_empty() {
            format!("{what} failed ({})", self.status)
        } else {
            format!("{what} failed ({}):\n{stderr}", self.status)
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Out,
    Err,
}

/// The child's exit status, or `None` when `deadline` passes first (the child not reaped).
fn wait(child: &mut Child, deadline: Option<Instant>) -> std::io::Result<Option<ExitStatus>> {
    let Some(deadline) = deadline else {
        return child.wait().map(Some);
    };
    // Polled, in steps that grow to a few milliseconds: short builds pay little, and the child
    // stays ours (unreaped, its process group alive) until we decide to kill it.
    let mut step = Duration::from_micros(500);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        std::thread::sleep(step.min(deadline - now));
        step = (step * 2).min(Duration::from_millis(20));
    }
}

/// Kills the child's process group (the child and what it started), then reaps the child.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        // The child is not reaped yet, so its id still names its process group.
        if let Ok(group) = libc::pid_t::try_from(child.id()) {
            // SAFETY: `kill` has no memory-safety preconditions.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The time limit `$RCANNL_CC_TIMEOUT` gives (`value`): a number of seconds above 0, such as `60`
/// or `2.5`.
pub(crate) fn parse_timeout(value: &str) -> Result<Duration, String> {
    crate::settings::parse_seconds(value).map_err(|why| {
        format!(
            "{TIMEOUT_VARIABLE} is {value:?}, {why}; using {} s",
            DEFAULT_TIMEOUT.as_secs()
        )
    })
}

/// Splits `text` into words as a POSIX shell does, without expansions: whitespace separates
/// words; `'…'` is literal; in `"…"`, `\` escapes `"`, `\`, `$` and `` ` ``; elsewhere `\`
/// escapes the next character.
fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    let unterminated = |what: &str| format!("{text:?} has an unterminated {what}");
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(unterminated("single quote")),
                    }
                }
            }
            '"' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(unterminated("double quote")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(unterminated("double quote")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(format!("{text:?} ends with a lone backslash")),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        split_words(text).unwrap()
    }

    #[test]
    fn words_split_at_whitespace() {
        assert_eq!(words("gcc"), ["gcc"]);
        assert_eq!(words("  ccache\tgcc  -O1\n"), ["ccache", "gcc", "-O1"]);
        assert_eq!(words(""), Vec::<String>::new());
        assert_eq!(words(" \t "), Vec::<String>::new());
    }

    #[test]
    fn quotes_and_backslashes_are_taken_as_a_shell_takes_them() {
        assert_eq!(
            words(r#"'/opt/my cc/bin/gcc' -DX="a b" -DY=it\'s"#),
            ["/opt/my cc/bin/gcc", "-DX=a b", "-DY=it's"]
        );
        assert_eq!(words(r#""a\"b\\c\d" '\n' ''"#), [r#"a"b\c\d"#, r"\n", ""]);
        assert_eq!(words(r"a\ b"), ["a b"]);
    }

    #[test]
    fn unterminated_quotes_are_errors() {
        for text in ["'gcc", r#""gcc"#, r#""gcc\"#, r"gcc\"] {
            let error = split_words(text).unwrap_err();
            assert!(error.contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn a_command_line_is_its_program_and_leading_arguments() {
        let line = CommandLine::parse("ccache gcc -O1").unwrap().unwrap();
        assert_eq!(line.program, "ccache");
        assert_eq!(line.leading, ["gcc", "-O1"]);
        assert_eq!(line.to_string(), "ccache gcc -O1");
        assert_eq!(CommandLine::parse("  ").unwrap(), None);
    }

    #[test]
    fn time_limits_are_positive_numbers_of_seconds() {
        assert_eq!(parse_timeout("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_timeout(" 2.5 "), Ok(Duration::from_millis(2500)));
        for bad in ["0", "-1", "abc", "inf", "NaN", "1e30", "-0", "1s"] {
            let error = parse_timeout(bad).unwrap_err();
            assert!(error.contains(TIMEOUT_VARIABLE), "{error}");
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn a_run_past_its_limit_is_killed() {
        let sleeper = CommandLine::parse("sh -c").unwrap().unwrap();
        let error = sleeper
            .run(&["sleep 30"], Duration::from_millis(200))
            .unwrap_err();
        assert!(
            error.contains("`sh -c sleep 30` did not finish within 0.2 s"),
            "{error}"
        );
    }

    #[test]
    fn a_finished_run_gives_its_status_and_output() {
        let shell = CommandLine::parse("sh -c").unwrap().unwrap();
        let finished = shell
            .run(&["echo out; echo err >&2; exit 3"], Duration::from_secs(60))
            .unwrap();
        assert_eq!(finished.status.code(), Some(3));
        assert_eq!(finished.stdout, b"out\n");
        assert_eq!(finished.stderr, b"err\n");
        assert_eq!(
            finished.failure("the shell"),
            "the shell failed (exit status: 3):\nerr"
        );
        let quiet = shell.run(&["exit 4"], Duration::from_secs(60)).unwrap();
        assert_eq!(quiet.failure("exit"), "exit failed (exit status: 4)");
        let missing = CommandLine::program("/nonexistent/cc")
            .run(&["--version"], Duration::from_secs(60))
            .unwrap_err();
        assert!(
            missing.starts_with("cannot run `/nonexistent/cc --version`: "),
            "{missing}"
        );
    }
}
