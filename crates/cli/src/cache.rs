//! `rcannl cache info` and `rcannl cache clean [--to-cap]`: the folder compiled kernels are kept
//! in (`$RCANNL_CACHE_DIR`, else `$XDG_CACHE_HOME/rcannl`, else `~/.cache/rcannl`), its size
//! and cap (`$RCANNL_CACHE_MAX_BYTES`, else 512 MiB), and emptying it of the cache's own files
//! (a folder the cache would not use is refused).

use std::process::ExitCode;

use clap::Subcommand;
use rcannl_backends::cache;
use serde::Serialize;

use crate::report::{CliError, ErrorKind, aligned, print_json, write_out};

/// Arguments of `rcannl cache`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Show the cache folder, how many entries it holds, their size and the cap stores keep it
    /// under.
    Info {
        /// Print one JSON object on stdout instead of lines for people.
        #[arg(long)]
        json: bool,
    },
    /// Remove every entry of the cache folder (compiled again when next needed); files the
    /// cache did not write stay, and a folder it would not use (one others can write) is
    /// refused.
    Clean {
        /// Remove only the least recently used entries beyond the cap.
        #[arg(long)]
        to_cap: bool,
        /// Print one JSON object on stdout instead of a line for people.
        #[arg(long)]
        json: bool,
    },
}

/// What `info --json` prints.
#[derive(Serialize)]
struct InfoView {
    folder: String,
    entries: usize,
    bytes: u64,
    cap: u64,
}

/// What `clean --json` prints.
#[derive(Serialize)]
struct CleanView {
    folder: String,
    removed_entries: usize,
    removed_bytes: u64,
}

/// Runs the command: exit status 0, or 1 when the folder cannot be read (or, to clean, is one
/// the cache would not use).
pub fn run(args: &Args) -> ExitCode {
    let folder = cache::default_folder();
    match args.action {
        Action::Info { json } => match cache::info(&folder) {
            Err(message) => CliError::new(ErrorKind::Io, message).report(json),
            Ok(info) if json => print_json(&InfoView {
                folder: info.folder.display().to_string(),
                entries: info.entries,
                bytes: info.bytes,
                cap: info.cap,
            }),
            Ok(info) => write_out(
                std::io::stdout(),
                &aligned(&[
                    ("folder".to_owned(), info.folder.display().to_string()),
                    ("entries".to_owned(), info.entries.to_string()),
                    ("size".to_owned(), size(info.bytes)),
                    ("cap".to_owned(), size(info.cap)),
                ]),
            ),
        },
        Action::Clean { to_cap, json } => {
            let removed = if to_cap {
                cache::evict(&folder, cache::max_bytes())
            } else {
                cache::clean(&folder)
            };
            match removed {
                Err(message) => CliError::new(ErrorKind::Io, message).report(json),
                Ok(removed) if json => print_json(&CleanView {
                    folder: folder.display().to_string(),
                    removed_entries: removed.entries,
                    removed_bytes: removed.bytes,
                }),
                Ok(removed) => write_out(
                    std::io::stdout(),
                    &format!(
                        "removed {} entr{} ({}) from {}\n",
                        removed.entries,
                        if removed.entries == 1 { "y" } else { "ies" },
                        size(removed.bytes),
                        folder.display()
                    ),
                ),
            }
        }
    }
}

/// `bytes` for people: in the largest binary unit that keeps a whole number in front, with the
/// exact count beside anything above a KiB.
fn size(bytes: u64) -> String {
    let units = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    match units.iter().find(|(shift, _)| bytes >= 1 << shift) {
        Some((shift, unit)) => format!(
            "{:.1} {unit} ({bytes} bytes)",
            bytes as f64 / (1u64 << shift) as f64
        ),
        None => format!("{bytes} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(size(0), "0 bytes");
        assert_eq!(size(1023), "1023 bytes");
        assert_eq!(size(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(size(512 << 20), "512.0 MiB (536870912 bytes)");
    }
}
