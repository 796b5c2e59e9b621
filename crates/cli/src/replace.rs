//! Writing a file whole or not at all: the new contents go to a temporary file beside the
//! destination, are flushed to disk, and are renamed over it, so that a reader (or a crash, or a
//! kill partway) sees the old file or the new one, never a part.
//!
//! The destination must be a regular file or not exist. A symbolic link is followed to the
//! regular file it names, which is replaced (the link stays); a link to nothing, a device, a FIFO,
//! a socket or a folder is refused rather than replaced by a regular file. A temporary file is
//! removed when anything fails; only a process killed partway leaves one behind (named
//! `.NAME.rcannl-PID-N.tmp`), and never a damaged destination.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::report::{CliError, ErrorKind};

/// Replaces the file at `path` with what `write` writes. Errors name `path` as given.
pub fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), CliError> {
    let error =
        |message: String| CliError::new(ErrorKind::Io, format!("{}: {message}", path.display()));
    let io_error = |err: io::Error| error(err.to_string());
    let (destination, permissions) = destination(path).map_err(error)?;
    let mut temporary = Temporary::create_beside(&destination).map_err(io_error)?;
    if let Some(permissions) = permissions {
        temporary
            .file
            .set_permissions(permissions)
            .map_err(io_error)?;
    }
    let mut sink = BufWriter::new(&temporary.file);
    write(&mut sink)
        .and_then(|()| sink.flush())
        .map_err(io_error)?;
    drop(sink);
    temporary.file.sync_all().map_err(io_error)?;
    fs::rename(&temporary.path, &destination).map_err(io_error)?;
    temporary.renamed = true;
    // The rename is durable once the folder is; some file systems cannot sync a folder, and the
    // file is complete under its name either way, so a failure here is not worth an error.
    if let Ok(folder) = File::open(folder_of(&destination)) {
        let _ = folder.sync_all();
    }
    Ok(())
}

/// The file to replace (the regular file `path` names, through a symbolic link if it is one)
/// and its permissions, which the new file keeps; `None` when there is no file yet.
fn destination(path: &Path) -> Result<(PathBuf, Option<fs::Permissions>), String> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((path.to_owned(), None)),
        Err(err) => return Err(err.to_string()),
    };
    if meta.is_symlink() {
        let target = match fs::metadata(path) {
            Ok(target) => target,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(
                    "is a symbolic link to nothing (-o follows links only to regular \
                            files)"
                        .to_owned(),
                );
            }
            Err(err) => return Err(err.to_string()),
        };
        if !target.is_file() {
            return Err(format!(
                "links to {}, not a regular file (-o replaces only regular files)",
                describe(&target.file_type())
            ));
        }
        let resolved = fs::canonicalize(path).map_err(|err| err.to_string())?;
        return Ok((resolved, Some(target.permissions())));
    }
    if !meta.is_file() {
        return Err(format!(
            "is {}, not a regular file (-o replaces only regular files)",
            describe(&meta.file_type())
        ));
    }
    Ok((path.to_owned(), Some(meta.permissions())))
}

/// What a file that is not a regular file is, in words.
fn describe(file_type: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "something"
    }
}

/// The folder `path` is in (the current folder for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// A new file beside the destination, removed when dropped unless it was renamed.
struct Temporary {
    path: PathBuf,
    file: File,
    renamed: bool,
}

impl Temporary {
    /// Creates `.NAME.rcannl-PID-N.tmp` in the destination's folder (so that the rename stays
    /// within one file system), with the first N that names no file yet: an existing file, or a
    /// link planted there, is never opened.
    fn create_beside(destination: &Path) -> io::Result<Temporary> {
        let name = destination
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
        let folder = folder_of(destination);
        let mut attempt = 0;
        loop {
            let mut temporary = OsString::from(".");
            temporary.push(name);
            temporary.push(format!(".rcannl-{}-{attempt}.tmp", std::process::id()));
            let path = folder.join(temporary);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(Temporary {
                        path,
                        file,
                        renamed: false,
                    });
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.renamed {
            // Best effort: the error being reported matters more than a leftover file.
            let _ = fs::remove_file(&self.path);
        }
    }
}
