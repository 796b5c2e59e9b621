//! Files written whole or not at all: what `.npy` saves, checkpoints and the `rcannl`
//! command's output files go through.
//!
//! A write goes to a new file beside the destination, is flushed to disk, and is renamed over
//! it, so that a reader (or a crash, or a kill partway) sees the old file or the new one, never a
//! part. The destination must be a regular file or not exist: a symbolic link is followed (to the
//! end of a chain of them) and the file it names is replaced, the link staying a link; anything
//! else (a folder, a device, a FIFO, a socket, a link that leads nowhere) is refused and left as
//! it is. The new file is removed when anything fails; only a process killed partway leaves one
//! behind (`.NAME.PID-N.tmp`), and never a damaged destination.

use std::ffi::OsString;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces the regular file at `path` (or makes a new one) with what `write` writes, atomically
/// (see the module doc). Errors say which step failed; callers add the path they were given.
pub fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), String> {
    let (destination, permissions) = destination(path)?;
    replace(&destination, write, permissions)
}

/// Where a save to `path` writes, and the permissions of the file there, if there is one: `path`
/// itself, or the file a symbolic link at `path` points to; an error for anything else.
fn destination(path: &Path) -> Result<(PathBuf, Option<fs::Permissions>), String> {
    let metadata = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((path.to_path_buf(), None)),
        Err(e) => return Err(e.to_string()),
        Ok(metadata) => metadata,
    };
    if !metadata.file_type().is_symlink() {
        regular(&metadata)?;
        return Ok((path.to_path_buf(), Some(metadata.permissions())));
    }
    let link = fs::read_link(path).map_err(|e| e.to_string())?;
    let target = fs::canonicalize(path).map_err(|e| {
        format!(
            "a symbolic link to {}, which cannot be followed: {e}",
            link.display()
        )
    })?;
    let metadata = fs::metadata(&target).map_err(|e| e.to_string())?;
    regular(&metadata).map_err(|e| format!("a symbolic link to {}, {e}", target.display()))?;
    Ok((target, Some(metadata.permissions())))
}

/// Writes what `write` writes to a new file beside `destination` (with `permissions`, when
/// given), flushes it to disk and renames it to `destination`; on any failure the new file is
/// removed.
fn replace(
    destination: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    permissions: Option<fs::Permissions>,
) -> Result<(), String> {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let name = destination
        .file_name()
        .ok_or_else(|| "the path names no file".to_owned())?;
    let mut temporary = OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = destination.with_file_name(temporary);
    // A new name only: a file or link someone else put there is never written through.
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .map_err(|e| format!("cannot create {}: {e}", temporary.display()))?;
    let written = (|| {
        let mut sink = BufWriter::new(&file);
        write(&mut sink)
            .and_then(|()| sink.flush())
            .map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
        drop(sink);
        if let Some(permissions) = permissions {
            file.set_permissions(permissions).map_err(|e| {
                format!("cannot set the permissions of {}: {e}", temporary.display())
            })?;
        }
        file.sync_all()
            .map_err(|e| format!("cannot flush {} to disk: {e}", temporary.display()))?;
        drop(file);
        fs::rename(&temporary, destination).map_err(|e| {
            format!(
                "cannot rename {} to {}: {e}",
                temporary.display(),
                destination.display()
            )
        })
    })();
    if written.is_err() {
        // Best effort: the error that matters is the one already in hand.
        let _ = fs::remove_file(&temporary);
        return written;
    }
    // The rename lasts through a crash once the folder is flushed too. The file's bytes are on
    // disk already, and some file systems cannot flush a folder: that is no failed save.
    let folder = match destination.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if let Ok(folder) = fs::File::open(folder) {
        let _ = folder.sync_all();
    }
    Ok(())
}

/// What a file that is not a regular file is, for a message.
fn kind(file_type: fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        return "a folder";
    }
    "neither a file nor a folder"
}

/// An error unless `metadata` is a regular file's, saying what the file is instead.
pub fn regular(metadata: &fs::Metadata) -> Result<(), String> {
    if metadata.is_file() {
        Ok(())
    } else {
        Err(format!(
            "not a regular file: {}",
            kind(metadata.file_type())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rename_removes_the_new_file() {
        let dir = std::env::temp_dir().join(format!("rcannl-replace-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let occupied = dir.join("occupied");
        fs::create_dir_all(occupied.join("inside")).expect("folders");
        // A folder with something in it cannot be renamed over: the write succeeds, the rename
        // fails.
        let e = replace(&occupied, |sink| sink.write_all(b"bytes"), None)
            .expect_err("the rename fails");
        assert!(e.starts_with("cannot rename "), "{e}");
        let mut names: Vec<_> = fs::read_dir(&dir)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["occupied"]);
        fs::remove_dir_all(&dir).expect("clean up");
    }
}
