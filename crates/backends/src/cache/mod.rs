//! The folder every backend keeps its compiled files in, and the rules that keep it safe: where
//! it is ([`default_folder`]), what a folder must be before anything is kept or read there
//! (private: created with mode `0700`, owned by this user and writable by no one else, under
//! folders that others cannot rename it out of), the key files are kept under ([`key`]), and
//! files kept with a record of their SHA-256 beside them, read back only while they match it
//! ([`keep`], [`read_kept`]). Files are opened without blocking and read only if regular, so
//! that a FIFO at an entry's name is replaced, not waited on.
//!
//! The folder is kept under a size cap (`bound`: `$RCANNL_CACHE_MAX_BYTES`, else 512 MiB), the
//! least recently used entries evicted after each store. The C backend's libraries, which must
//! also load, are kept by `cc::library` under these rules.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use crate::settings;

mod bound;

pub use bound::{CacheInfo, DEFAULT_MAX_BYTES, Removed, clean, evict, info, max_bytes, parse_size};
pub(crate) use bound::{evict_except, touch};

/// The cache folder the settings choose: `cache_dir` (`$RCANNL_CACHE_DIR`), else
/// `$XDG_CACHE_HOME/rcannl`, else `$HOME/.cache/rcannl`, else `rcannl-<uid>` in the temporary folder. Empty variables, a
/// relative `$XDG_CACHE_HOME` (which the XDG base-directory specification says to ignore) and a
/// relative `$HOME` count as unset, so that the cache never lands in the working folder unasked.
pub fn default_folder() -> PathBuf {
    let set = |name| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = settings::get_or_warn(&settings::CACHE_DIR) {
        return PathBuf::from(dir.value);
    }
    if let Some(dir) = set("XDG_CACHE_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return dir.join("rcannl");
    }
    if let Some(home) = set("HOME").map(PathBuf::from)
        && home.is_absolute()
    {
        return home.join(".cache").join("rcannl");
    }
    std::env::temp_dir().join(format!("rcannl-{}", this_user()))
}

/// The SHA-256 of `parts`, each preceded by its length (so that no two lists of parts run
/// together into the same bytes), in hexadecimal: the cache key.
pub fn key(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"rcannl cache 1\0");
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hex(&hash.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The line recording the SHA-256 of `bytes` kept as `name`, in `sha256sum`'s format.
fn kept_record(name: &str, bytes: &[u8]) -> String {
    format!("{}  {name}\n", hex(&Sha256::digest(bytes)))
}

/// The bytes kept as `name` in the cache folder `folder` by [`keep`], if the folder is private
/// and they match the record kept beside them; `None` otherwise (and for a name [`keep`]
/// refuses).
pub fn read_kept(folder: &Path, name: &str) -> Option<Vec<u8>> {
    if !bound::kept_name(name) {
        return None;
    }
    let private = private_folder(folder).ok()?;
    let path = private.join(name);
    let bytes = read_own_file(&path)?;
    let record = read_own_file(&private.join(format!("{name}.sha256")))?;
    if record != kept_record(name, &bytes).as_bytes() {
        return None;
    }
    touch(&path);
    Some(bytes)
}

/// Keeps `bytes` as `name` in the cache folder `folder` (private, as for libraries), with a
/// record of their SHA-256 beside them, both written under names of their own and renamed into
/// place, then evicts the least recently used entries beyond [`max_bytes`]; an error says why
/// they were not kept. Only the names of the GPU backend's files are kept (`gpu_<key>.wgsl`,
/// `gpu_wgpu_pipeline_cache_<backend>_<vendor>_<device>.bin`): the cache tells its files from
/// the user's by their exact names, and would never find another again.
pub fn keep(folder: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    if !bound::kept_name(name) {
        return Err(format!(
            "cannot keep {name:?} in {}: not a name the cache keeps files under",
            folder.display()
        ));
    }
    let private = private_folder(folder)?;
    let unique = unique();
    let leftovers = Leftovers(vec![
        private.join(format!("{name}.{unique}.partial")),
        private.join(format!("{name}.{unique}.sha256.partial")),
    ]);
    let [partial, record] = &leftovers.0[..] else {
        unreachable!("two paths")
    };
    let failed = |e: std::io::Error| format!("cannot keep {name} in {}: {e}", folder.display());
    write_new(partial, bytes).map_err(failed)?;
    write_new(record, kept_record(name, bytes).as_bytes()).map_err(failed)?;
    std::fs::rename(partial, private.join(name)).map_err(failed)?;
    std::fs::rename(record, private.join(format!("{name}.sha256"))).map_err(failed)?;
    let _ = evict_except(&private, max_bytes(), Some(name));
    Ok(())
}

/// This process's effective user id: the owner of the files it creates.
pub(crate) fn this_user() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// What makes the names of a store's temporary files its own: `<pid>-<counter>`, this process's
/// id and a count of the stores it began. `bound` recognizes a dead store's leftovers by it.
pub(crate) fn unique() -> String {
    static STORES: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        STORES.fetch_add(1, Ordering::Relaxed)
    )
}

/// `folder`, created with mode `0700` if missing, with every symbolic link resolved, once it is
/// found private: an error saying why not.
pub(crate) fn private_folder(folder: &Path) -> Result<PathBuf, String> {
    if !folder.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(|e| format!("cannot create the cache folder {}: {e}", folder.display()))?;
    }
    checked_private_folder(folder)
}

/// `folder` resolved if it exists and is private, as [`private_folder`] requires (which would
/// create it); `None` if it does not exist (a symbolic link to nothing included, as
/// [`private_folder`] sees it); an error saying why the cache would not use it.
fn existing_private_folder(folder: &Path) -> Result<Option<PathBuf>, String> {
    match std::fs::metadata(folder) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => checked_private_folder(folder).map(Some),
    }
}

/// `folder`, which exists, with every symbolic link resolved, once it is found private: an
/// error saying why not.
fn checked_private_folder(folder: &Path) -> Result<PathBuf, String> {
    // Resolved once, then used for every file: a link swapped later cannot redirect us.
    let resolved = folder
        .canonicalize()
        .map_err(|e| format!("cannot find the cache folder {}: {e}", folder.display()))?;
    let metadata = std::fs::metadata(&resolved)
        .map_err(|e| format!("cannot read the cache folder {}: {e}", folder.display()))?;
    if !metadata.is_dir() {
        return Err(format!(
            "cannot read the cache folder {}: it is not a folder",
            folder.display()
        ));
    }
    if metadata.uid() != this_user() {
        return Err(format!(
            "the cache folder {} belongs to user {}, not to this one ({})",
            folder.display(),
            metadata.uid(),
            this_user()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "the cache folder {} can be written by other users (mode {:o})",
            folder.display(),
            metadata.mode() & 0o7777
        ));
    }
    if let Some(parent) = resolved.parent() {
        safe_folders(parent)
            .map_err(|why| format!("{why}, above the cache folder {}", folder.display()))?;
    }
    Ok(resolved)
}

/// Checks that no other user can rename or replace what is in `folder` (symbolic links resolved):
/// it and every folder above it belong to this user or to root, and others cannot write them
/// unless they are sticky (as `/tmp` is: there only an entry's owner may rename it).
pub(crate) fn safe_folders(folder: &Path) -> Result<(), String> {
    for ancestor in folder.ancestors() {
        let metadata = std::fs::metadata(ancestor)
            .map_err(|e| format!("cannot read {}: {e}", ancestor.display()))?;
        if metadata.uid() != this_user() && metadata.uid() != 0 {
            return Err(format!(
                "{} belongs to user {}",
                ancestor.display(),
                metadata.uid()
            ));
        }
        let sticky = metadata.mode() & 0o1000 != 0;
        if metadata.mode() & 0o022 != 0 && !sticky {
            return Err(format!(
                "{} can be written by other users (mode {:o})",
                ancestor.display(),
                metadata.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// A fresh folder of this process's own, mode `0700`, under an unpredictable name in the
/// temporary folder; deleted, with what is in it, when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new() -> Result<Scratch, String> {
        let temp = std::env::temp_dir();
        let refuse = |why: String| format!("no private temporary folder: {why}");
        let temp = temp
            .canonicalize()
            .map_err(|e| refuse(format!("cannot find {}: {e}", temp.display())))?;
        safe_folders(&temp).map_err(refuse)?;
        let mut last_error = None;
        // A name taken by someone else is skipped: `create` never reuses a folder it did not
        // make.
        for _ in 0..16 {
            let path = temp.join(format!("rcannl-{}-{}", std::process::id(), unpredictable()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch(path)),
                Err(e) => last_error = Some(e),
            }
        }
        Err(refuse(format!(
            "cannot create a folder in {}: {}",
            temp.display(),
            last_error.expect("tried")
        )))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 64 bits no other process can guess: from the operating system's randomness that seeds the
/// standard library's hash maps, with the time and a counter.
fn unpredictable() -> String {
    use std::hash::{BuildHasher, Hasher};
    static DRAWN: AtomicUsize = AtomicUsize::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(DRAWN.fetch_add(1, Ordering::Relaxed));
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    format!("{:016x}", hasher.finish())
}

/// Paths removed, if they still exist, when this is dropped: the temporary files of one build.
pub(crate) struct Leftovers(pub(crate) Vec<PathBuf>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes `bytes` to a file at `path` that must not exist yet, readable by this user only.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// The bytes of the regular file at `path` if it belongs to this user; `None` otherwise (no such
/// file, a symbolic link, a FIFO or device, unreadable).
pub(crate) fn read_own_file(path: &Path) -> Option<Vec<u8>> {
    let mut file = open_own(path).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.uid() != this_user() {
        return None;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The file at `path` opened to read, without following a symbolic link and without blocking:
/// opening a FIFO waits for a writer otherwise, for ever. Whoever reads it checks what it is on
/// the handle (for a regular file, which the cache reads, the flag changes nothing), so that no
/// other file can take its place between a check and the open.
fn open_own(path: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tell_lists_of_parts_apart() {
        let key1 = key(&[b"ab", b"c"]);
        assert_eq!(key1.len(), 64);
        assert_ne!(key1, key(&[b"a", b"bc"]));
        assert_ne!(key1, key(&[b"abc"]));
        assert_eq!(key1, key(&[b"ab", b"c"]));
    }

    #[test]
    fn a_folder_above_that_others_can_write_is_refused_unless_sticky() {
        let base = std::env::temp_dir().join(format!("rcannl-ancestors-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let inner = base.join("open").join("cache");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&inner)
            .unwrap();
        let set_mode = |path: &Path, mode| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set_mode(&base.join("open"), 0o777);
        let error = private_folder(&inner).unwrap_err();
        assert!(
            error.contains("can be written by other users (mode 777)"),
            "{error}"
        );
        assert!(error.contains("above the cache folder"), "{error}");
        set_mode(&base.join("open"), 0o1777);
        assert!(private_folder(&inner).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_folder_of_another_user_is_refused() {
        // Root can give a folder away; anyone else has one of root's at hand.
        let base = std::env::temp_dir().join(format!("rcannl-foreign-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (foreign, owner) = if this_user() == 0 {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&base)
                .unwrap();
            std::os::unix::fs::chown(&base, Some(65534), Some(65534)).unwrap();
            (base.clone(), 65534)
        } else {
            (PathBuf::from("/"), 0)
        };
        let error = private_folder(&foreign).unwrap_err();
        assert!(
            error.contains(&format!("belongs to user {owner}, not to this one")),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn scratch_folders_are_private_and_go_away() {
        let scratch = Scratch::new().unwrap();
        let path = scratch.0.clone();
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(metadata.mode() & 0o777, 0o700);
        assert_eq!(metadata.uid(), this_user());
        assert_ne!(Scratch::new().unwrap().0, path);
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn kept_bytes_come_back_only_while_they_match_their_record() {
        let scratch = Scratch::new().unwrap();
        let folder = scratch.0.join("kept");
        let name = &format!("gpu_{}.wgsl", key(&[b"a program"]));
        assert_eq!(read_kept(&folder, name), None);
        keep(&folder, name, b"first").unwrap();
        assert_eq!(read_kept(&folder, name).as_deref(), Some(&b"first"[..]));
        keep(&folder, name, b"second").unwrap();
        assert_eq!(read_kept(&folder, name).as_deref(), Some(&b"second"[..]));
        std::fs::write(folder.join(name), b"planted").unwrap();
        assert_eq!(read_kept(&folder, name), None);
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no partial files are left: {names:?}");
    }

    #[test]
    fn only_the_names_of_the_caches_files_are_kept() {
        let scratch = Scratch::new().unwrap();
        for name in [
            "a.txt",
            "gpu_train.py",
            "gpu_x.wgsl",
            "../gpu_x.wgsl",
            "rc_x.so",
        ] {
            let error = keep(&scratch.0, name, b"bytes").unwrap_err();
            assert!(error.contains("not a name the cache keeps"), "{error}");
            // Even with a record that matches, such a file is not read as a kept one.
            let at = scratch.0.join(name.trim_start_matches("../"));
            std::fs::write(&at, b"bytes").unwrap();
            let record = kept_record(name, b"bytes");
            std::fs::write(at.with_file_name(format!("{name}.sha256")), record).unwrap();
            assert_eq!(read_kept(&scratch.0, name), None, "{name}");
        }
    }
}
