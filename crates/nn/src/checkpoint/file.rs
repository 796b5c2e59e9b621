//! Checkpoint files on disk: a load's read of a regular file, bounded by its size, and the
//! atomic write of a save.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to a new file beside `path`, flushes it to disk and renames it to `path`; on
/// failure the temporary file is removed.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut temporary = OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = path.with_file_name(temporary);
    let written = (|| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        // The temporary file may not exist (its creation failed): nothing to report then.
        let _ = fs::remove_file(&temporary);
    }
    written
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

/// An error unless `metadata` is a regular file's.
fn regular(metadata: &fs::Metadata) -> Result<(), String> {
    if metadata.is_file() {
        Ok(())
    } else {
        Err(format!(
            "not a regular file: {}",
            kind(metadata.file_type())
        ))
    }
}

/// The contents of the regular file at `path` (a symbolic link is followed), read up to the size
/// it has when opened: a device, a FIFO or a folder is refused, and so is a file larger than the
/// memory that can be reserved for it.
pub(super) fn read_regular(path: &Path) -> Result<Vec<u8>, String> {
    // Checked before opening, since opening a FIFO waits for a writer; and again on the opened
    // file, in case another took its place meanwhile.
    regular(&fs::metadata(path).map_err(|e| e.to_string())?)?;
    let file = fs::File::open(path).map_err(|e| e.to_string())?;
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    regular(&metadata)?;
    let size = metadata.len();
    let mut bytes = Vec::new();
    usize::try_from(size)
        .ok()
        .and_then(|size| bytes.try_reserve_exact(size).ok())
        .ok_or_else(|| format!("the file's {size} bytes do not fit in memory"))?;
    file.take(size)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}
