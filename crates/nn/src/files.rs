//! Files written whole or not at all ([`replace_file`], from the tensor library), and read no
//! further than they are long ([`read_regular`]): what checkpoints and the `rcannl` command's
//! files go through.

use std::fs;
use std::io::Read;
use std::path::Path;

use rcannl_tensor::files::regular;
pub use rcannl_tensor::files::replace_file;

/// The contents of the regular file at `path` (a symbolic link is followed), read up to the size
/// it has when opened: a device, a FIFO or a folder is refused, and so is a file larger than the
/// memory that can be reserved for it.
pub fn read_regular(path: &Path) -> Result<Vec<u8>, String> {
    // Opened without blocking, since opening a FIFO waits for a writer otherwise, then checked
    // as opened: no other file can take its place between a check and the open.
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| e.to_string())?;
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
