//! The disk cache of compiled libraries, and what a library must pass before it is loaded; other
//! backends keep their own files in the same folder under the same rules ([`keep`],
//! [`read_kept`]).
//!
//! A library is kept as `rc_<key>.so`, `<key>` the SHA-256 of the compiler's words, the flags
//! and the source, beside `rc_<key>.sha256`: the SHA-256 of the library's bytes and its name, in
//! `sha256sum`'s format. A cached library is loaded only after its bytes are read and match its
//! record; one that does not (damaged, truncated, another routine's, planted) is rebuilt, written
//! beside and renamed into place, and so is one that matches its record but does not load (its
//! entry removed first; an error then names `rcannl cache clean`). Files are opened without
//! blocking and read only if regular, so that a FIFO at an entry's name is replaced, not waited
//! on. The cache folder must be private: created with mode `0700`, owned by this user and
//! writable by no one else, under folders that others cannot rename it out of. Where it is not,
//! where it cannot be written, or where its mount forbids running programs (`noexec`: flagged
//! so, or the loader cannot map a library built there), a library is built in a fresh private
//! folder of its own in the temporary folder, loaded and deleted (after one warning per
//! process): nothing is loaded from a folder others can write. Where the temporary folder is on
//! a `noexec` mount too, compiling is an error that says so ([`libraries_load`] tells in
//! advance, and the default backend is then the interpreter).
//!
//! The folder is kept under a size cap (`bound`: `$RCANNL_CACHE_MAX_BYTES`, else 512 MiB), the
//! least recently used entries evicted after each store.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use libloading::Library;
use sha2::{Digest, Sha256};

use super::CompileError;

mod bound;

pub use bound::{
    CacheInfo, DEFAULT_MAX_BYTES, MAX_BYTES_VARIABLE, Removed, clean, evict, info, max_bytes,
    parse_size,
};

/// The cache folder the environment chooses: `$RCANNL_CACHE_DIR`, else `$XDG_CACHE_HOME/rcannl`,
/// else `$HOME/.cache/rcannl`, else `rcannl-<uid>` in the temporary folder. Empty variables, a
/// relative `$XDG_CACHE_HOME` (which the XDG base-directory specification says to ignore) and a
/// relative `$HOME` count as unset, so that the cache never lands in the working folder unasked.
pub fn default_folder() -> PathBuf {
    let set = |name| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("RCANNL_CACHE_DIR") {
        return PathBuf::from(dir);
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Builds `source` (a C file at the first path) into a shared library (at the second).
pub(crate) type Build<'a> = &'a dyn Fn(&Path, &Path) -> Result<(), CompileError>;

/// The library built from `source` under `key`, loaded: from the cache in `folder` when it holds
/// one that passes its check, else built (and kept there when the folder is private, writable
/// and on a mount that allows running libraries, evicting the least recently used entries
/// beyond `cap` bytes); and whether it came from the cache.
pub(crate) fn load(
    folder: &Path,
    cap: u64,
    key: &str,
    source: &str,
    build: Build,
) -> Result<(Library, bool), CompileError> {
    load_in(folder, cap, key, source, build, &noexec_mount)
}

/// [`load`], with `noexec` saying whether a folder is on a mount that forbids running what is in
/// it (a parameter so that tests can say so of any folder).
fn load_in(
    folder: &Path,
    cap: u64,
    key: &str,
    source: &str,
    build: Build,
    noexec: Noexec,
) -> Result<(Library, bool), CompileError> {
    let unkept = |why: String| load_unkept(why, key, source, build, noexec);
    let private = match usable_folder(folder, noexec) {
        Ok(private) => private,
        Err(why) => return unkept(why),
    };
    let entry = Entry::new(&private, key);
    let unloadable = match entry.load_verified() {
        Cached::Loaded(library) => return Ok((library, true)),
        Cached::Missing => None,
        // The mount forbids running libraries though its flags did not say so: nothing kept
        // there can load.
        Cached::Unloadable(error) if refused_to_map(&error) => {
            refused_in(&private);
            return unkept(noexec_reason(folder, true));
        }
        // The bytes are the ones recorded, yet the loader refuses them: damaged together with
        // the record (a faulty disk or copy), or written by a loader-incompatible toolchain.
        // Rebuilt once rather than failing on every run.
        Cached::Unloadable(error) => {
            entry.remove();
            Some(error)
        }
    };
    match entry.build(source, build) {
        Ok(library) => {
            // A cache that cannot be listed is only over its cap until a later store.
            let _ = bound::evict_except(&private, cap, Some(&entry.name()));
            Ok((library, false))
        }
        Err(Failure::Unwritable(e)) => unkept(format!(
            "cannot write in the cache folder {}: {e}",
            folder.display()
        )),
        Err(Failure::Load(error)) if refused_to_map(&error) => {
            refused_in(&private);
            unkept(noexec_reason(folder, true))
        }
        Err(Failure::Build(error) | Failure::Load(error)) => Err(match unloadable {
            None => error,
            Some(first) => CompileError {
                message: format!(
                    "{first}; building it again failed: {error} (`rcannl cache clean` empties \
                     the cache)"
                ),
            },
        }),
    }
}

/// Says whether a folder is on a mount that forbids running what is in it.
type Noexec<'a> = &'a dyn Fn(&Path) -> bool;

/// The cache folder `folder`, resolved, if libraries can be kept and loaded there: it is
/// private ([`private_folder`]) and its mount allows running them; else why not.
fn usable_folder(folder: &Path, noexec: Noexec) -> Result<PathBuf, String> {
    let private = private_folder(folder)?;
    if noexec(&private) {
        return Err(noexec_reason(folder, false));
    }
    Ok(private)
}

/// Whether the libraries the C backend compiles with the cache folder `folder` can be loaded
/// here: where the cache folder cannot serve (not private, or on a `noexec` mount)
/// they are built in the temporary folder, and where that is on a `noexec` mount too, nowhere;
/// the error then says so. The default backend runs on the interpreter instead.
pub fn libraries_load(folder: &Path) -> Result<(), String> {
    let Err(why) = usable_folder(folder, &noexec_mount) else {
        return Ok(());
    };
    let temp = std::env::temp_dir();
    if noexec_mount(&temp) {
        return Err(nowhere_to_load(&why, &temp, false));
    }
    Ok(())
}

/// Why libraries are not kept in the cache folder `folder`: its mount is flagged `noexec`, or
/// (`refused`) the loader could not map one there to run it, as on such a mount.
fn noexec_reason(folder: &Path, refused: bool) -> String {
    if refused {
        format!(
            "the loader cannot map libraries in the cache folder {} to run them, as on a noexec \
             mount",
            folder.display()
        )
    } else {
        format!(
            "the cache folder {} is on a noexec mount, where libraries cannot be loaded",
            folder.display()
        )
    }
}

/// The error when the cache folder cannot serve (`why`) and libraries do not load from the
/// temporary folder `temp` either: its mount is flagged `noexec`, or (`refused`) the loader
/// could not map one there: nowhere is left to load them from.
fn nowhere_to_load(why: &str, temp: &Path, refused: bool) -> String {
    let temp_too = if refused {
        "the loader cannot map them in the temporary folder either, as on a noexec mount"
    } else {
        "the temporary folder is on a noexec mount too"
    };
    format!(
        "compiled routines cannot be loaded: {why}, and {temp_too} ({}); set RCANNL_CACHE_DIR \
         or TMPDIR to a folder on a mount that allows running programs",
        temp.display()
    )
}

/// Folders where the loader could not map a library this process built there, as on a mount
/// that forbids running programs though its flags do not say so: passed over from then on, as
/// flagged ones are, rather than building there in vain again (glibc also keeps a mapping of
/// every library it fails so to load).
static REFUSED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Notes that the loader could not map a library built in `folder` ([`REFUSED`]).
fn refused_in(folder: &Path) {
    let mut refused = REFUSED.lock().unwrap_or_else(|p| p.into_inner());
    if !refused.iter().any(|f| f == folder) {
        refused.push(folder.to_owned());
    }
}

/// Whether `folder` is on a mount that forbids running programs: flagged `noexec`, or one where
/// the loader already could not map a library ([`REFUSED`]).
fn noexec_mount(folder: &Path) -> bool {
    let refused = REFUSED.lock().unwrap_or_else(|p| p.into_inner());
    refused.iter().any(|f| f == folder) || flagged_noexec(folder)
}

/// Whether `folder` is on a mount with the `noexec` flag (`statvfs`'s `ST_NOEXEC`). A folder
/// whose mount cannot be asked counts as not: loading a library there tells ([`refused_to_map`]).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn flagged_noexec(folder: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(folder.as_os_str().as_bytes()) else {
        return false;
    };
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stats` room for one `statvfs`, both alive
    // for the call.
    if unsafe { libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: `statvfs` succeeded, so it filled `stats`.
    let stats = unsafe { stats.assume_init() };
    stats.f_flag & libc::ST_NOEXEC != 0
}

/// Whether `folder` is on a mount with the `noexec` flag: not asked where `statvfs` has no such
/// flag; loading a library there tells ([`refused_to_map`]).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn flagged_noexec(_folder: &Path) -> bool {
    false
}

/// Whether a loader's error says it could not map the library to run it: what a mount that
/// forbids running programs (`noexec`) makes `mmap` answer (glibc's "failed to map segment from
/// shared object", musl's "Operation not permitted").
fn refused_to_map(error: &CompileError) -> bool {
    ["failed to map segment", "Operation not permitted"]
        .iter()
        .any(|words| error.message.contains(words))
}

/// Builds the library in a fresh private folder, loads it and deletes the folder, after one
/// warning per process saying why the cache was not used; an error where the temporary folder's
/// mount does not let libraries load either.
fn load_unkept(
    why: String,
    key: &str,
    source: &str,
    build: Build,
    noexec: Noexec,
) -> Result<(Library, bool), CompileError> {
    let scratch = Scratch::new()?;
    let nowhere = |refused| CompileError {
        message: format!(
            "{}, or RCANNL_BACKEND=interp to run on the interpreter",
            nowhere_to_load(&why, scratch.0.parent().unwrap_or(&scratch.0), refused)
        ),
    };
    if noexec(&scratch.0) {
        return Err(nowhere(false));
    }
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "rcannl: {why}; compiling into a private temporary folder instead, without keeping \
             the result"
        );
    });
    match Entry::new(&scratch.0, key).build(source, build) {
        Ok(library) => Ok((library, false)),
        Err(Failure::Unwritable(e)) => Err(CompileError {
            message: format!("cannot write in {}: {e}", scratch.0.display()),
        }),
        Err(Failure::Load(error)) if refused_to_map(&error) => Err(nowhere(true)),
        Err(Failure::Build(error) | Failure::Load(error)) => Err(error),
    }
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
    bound::touch(&path);
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
    let _ = bound::evict_except(&private, max_bytes(), Some(name));
    Ok(())
}

/// This process's effective user id: the owner of the files it creates.
fn this_user() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// What makes the names of a store's temporary files its own: `<pid>-<counter>`, this process's
/// id and a count of the stores it began. `bound` recognizes a dead store's leftovers by it.
fn unique() -> String {
    static STORES: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        STORES.fetch_add(1, Ordering::Relaxed)
    )
}

/// `folder`, created with mode `0700` if missing, with every symbolic link resolved, once it is
/// found private: an error saying why not.
fn private_folder(folder: &Path) -> Result<PathBuf, String> {
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
fn safe_folders(folder: &Path) -> Result<(), String> {
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
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, CompileError> {
        let temp = std::env::temp_dir();
        let refuse = |why: String| CompileError {
            message: format!("no private folder to compile in: {why}"),
        };
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

/// Why a library could not be built.
enum Failure {
    /// The folder cannot be written: the build may go elsewhere.
    Unwritable(std::io::Error),
    /// The compiler failed: nowhere else would it do better.
    Build(CompileError),
    /// The library built does not load: elsewhere it may, where the folder's mount is to blame.
    Load(CompileError),
}

/// What the cache holds for an entry.
enum Cached {
    /// Its library, which matched its record, loaded.
    Loaded(Library),
    /// No library, or one that does not match its record.
    Missing,
    /// A library that matches its record but does not load: why.
    Unloadable(CompileError),
}

/// One library's files in a private folder.
struct Entry {
    folder: PathBuf,
    key: String,
    library: PathBuf,
    record: PathBuf,
    /// The C the library was built from, kept beside it for reading.
    source: PathBuf,
}

impl Entry {
    fn new(folder: &Path, key: &str) -> Entry {
        Entry {
            folder: folder.to_owned(),
            key: key.to_owned(),
            library: folder.join(format!("rc_{key}.so")),
            record: folder.join(format!("rc_{key}.sha256")),
            source: folder.join(format!("rc_{key}.c")),
        }
    }

    /// The entry's name in the folder's listing (see `bound`).
    fn name(&self) -> String {
        format!("rc_{}", self.key)
    }

    /// The line of the record of a library with `digest`.
    fn record_line(&self, digest: &str) -> String {
        format!("{digest}  rc_{}.so\n", self.key)
    }

    /// The cached library, loaded if its bytes match its record.
    fn load_verified(&self) -> Cached {
        let (Some(bytes), Some(record)) =
            (read_own_file(&self.library), read_own_file(&self.record))
        else {
            return Cached::Missing;
        };
        if record != self.record_line(&hex(&Sha256::digest(&bytes))).as_bytes() {
            return Cached::Missing;
        }
        // Only this user can write the folder, so the file is still the one whose bytes were
        // just checked, unless another process evicted it meanwhile: then it is built again.
        match open(&self.library) {
            Ok(library) => {
                bound::touch(&self.library);
                Cached::Loaded(library)
            }
            Err(_) if !self.library.exists() => Cached::Missing,
            Err(e) => Cached::Unloadable(e),
        }
    }

    /// Removes the entry's files, those that exist: a build puts them back.
    fn remove(&self) {
        for path in [&self.library, &self.record, &self.source] {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Builds the library beside its place (under a name no other build uses), loads it, then
    /// renames it and its record into place, so that a concurrent build of the same source, in
    /// another process or thread, never sees half a library. Whatever the outcome, no file but
    /// the entry's is left behind.
    fn build(&self, source: &str, build: Build) -> Result<Library, Failure> {
        let unique = unique();
        let at = |suffix: &str| {
            self.folder
                .join(format!("rc_{}.{unique}.{suffix}", self.key))
        };
        let leftovers = Leftovers(vec![at("c"), at("so.partial"), at("sha256.partial")]);
        let [c_path, partial, record] = &leftovers.0[..] else {
            unreachable!("three paths")
        };
        write_new(c_path, source.as_bytes()).map_err(Failure::Unwritable)?;
        build(c_path, partial).map_err(Failure::Build)?;
        let bytes = read_own_file(partial).ok_or_else(|| {
            Failure::Build(CompileError {
                message: format!("the compiler wrote no library at {}", partial.display()),
            })
        })?;
        write_new(
            record,
            self.record_line(&hex(&Sha256::digest(&bytes))).as_bytes(),
        )
        .map_err(Failure::Unwritable)?;
        let library = open(partial).map_err(Failure::Load)?;
        // Kept only once loaded: a library that does not load is not cached.
        std::fs::rename(partial, &self.library).map_err(Failure::Unwritable)?;
        std::fs::rename(record, &self.record).map_err(Failure::Unwritable)?;
        // Stored is used: the compiler's clock may be coarser than the order of uses.
        bound::touch(&self.library);
        // The source stays beside its library, for reading.
        let _ = std::fs::rename(c_path, &self.source);
        Ok(library)
    }
}

/// Paths removed, if they still exist, when this is dropped: the temporary files of one build.
struct Leftovers(Vec<PathBuf>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes `bytes` to a file at `path` that must not exist yet, readable by this user only.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// The bytes of the regular file at `path` if it belongs to this user; `None` otherwise (no such
/// file, a symbolic link, a FIFO or device, unreadable).
fn read_own_file(path: &Path) -> Option<Vec<u8>> {
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

/// Loads the library at `path`, which the caller has checked.
fn open(path: &Path) -> Result<Library, CompileError> {
    // SAFETY: the library is one this crate built from code it generated (checked against its
    // record when it comes from the cache); it has no initializers.
    unsafe { Library::new(path) }.map_err(|e| CompileError {
        message: format!("cannot load {}: {e}", path.display()),
    })
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
    fn a_cached_library_that_does_not_load_and_cannot_be_rebuilt_names_cache_clean() {
        let scratch = Scratch::new().unwrap();
        let key = key(&[b"a library"]);
        let entry = Entry::new(&scratch.0, &key);
        let garbage = b"not a library";
        std::fs::write(&entry.library, garbage).unwrap();
        let digest = hex(&Sha256::digest(garbage));
        std::fs::write(&entry.record, entry.record_line(&digest)).unwrap();
        // A compiler that writes the same bytes again.
        let build = |_: &Path, library: &Path| {
            std::fs::write(library, garbage).map_err(|e| CompileError {
                message: e.to_string(),
            })
        };
        let error = load(&scratch.0, u64::MAX, &key, "source", &build).unwrap_err();
        assert!(error.message.contains("rcannl cache clean"), "{error}");
        assert!(error.message.contains("building it again"), "{error}");
        assert!(!entry.library.exists() && !entry.record.exists());
    }

    /// Builds the C file at `c_file` into a shared library at `library` with `cc`.
    fn cc(c_file: &Path, library: &Path) -> Result<(), CompileError> {
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(library)
            .arg(c_file)
            .status()
            .map_err(|e| CompileError {
                message: format!("cc does not run: {e}"),
            })?;
        if !status.success() {
            return Err(CompileError {
                message: format!("cc failed: {status}"),
            });
        }
        Ok(())
    }

    const SOURCE: &str = "int rc_answer(void) { return 42; }\n";

    #[test]
    fn a_cache_folder_on_a_noexec_mount_is_passed_over_for_a_private_one() {
        let scratch = Scratch::new().unwrap();
        let folder = scratch.0.join("cache");
        let key = key(&[SOURCE.as_bytes()]);
        assert!(usable_folder(&folder, &|_| false).is_ok());
        let why = usable_folder(&folder, &|_| true).unwrap_err();
        assert!(
            why.contains("noexec") && why.contains(&folder.display().to_string()),
            "{why}"
        );
        // Only the cache folder's mount forbids running libraries: built elsewhere, not kept.
        let on_cache_mount = |path: &Path| path.starts_with(&scratch.0);
        let (library, from_cache) =
            load_in(&folder, u64::MAX, &key, SOURCE, &cc, &on_cache_mount).unwrap();
        assert!(!from_cache);
        // SAFETY: `SOURCE` defines `rc_answer` with this signature.
        let answer = unsafe { *library.get::<extern "C" fn() -> i32>(b"rc_answer").unwrap() };
        assert_eq!(answer(), 42);
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
        // Every mount forbids it: an error naming the cause and the ways out, with nothing built.
        let built = std::cell::Cell::new(false);
        let build = |c: &Path, library: &Path| {
            built.set(true);
            cc(c, library)
        };
        let error = load_in(&folder, u64::MAX, &key, SOURCE, &build, &|_| true).unwrap_err();
        for words in [
            "noexec",
            "temporary folder",
            "RCANNL_CACHE_DIR",
            "RCANNL_BACKEND",
        ] {
            assert!(error.message.contains(words), "{words}: {error}");
        }
        assert!(!built.get());
    }

    #[test]
    fn a_library_the_loader_cannot_map_counts_as_on_a_noexec_mount() {
        let refusal = |message: &str| CompileError {
            message: message.to_owned(),
        };
        let glibc = "/c/rc_1.so: failed to map segment from shared object";
        let musl = "Error loading shared library /c/rc_1.so: Operation not permitted";
        assert!(refused_to_map(&refusal(glibc)) && refused_to_map(&refusal(musl)));
        assert!(!refused_to_map(&refusal("/c/rc_1.so: invalid ELF header")));
        assert!(!refused_to_map(&refusal("/c/rc_1.so: file too short")));
    }

    #[test]
    fn where_a_mounts_flags_do_not_say_noexec_the_failed_load_does() {
        use std::io::Write;
        let scratch = Scratch::new().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "noexec,mode=0700,size=16m", "tmpfs"])
            .arg(&scratch.0)
            .output();
        match mounted {
            Ok(output) if output.status.success() => {}
            outcome => {
                let why = outcome.map_or_else(
                    |e| e.to_string(),
                    |o| String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                );
                // Past the test harness's capture: a test that did not run must not pass unseen.
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: a noexec tmpfs cannot be mounted here ({why})"
                );
                return;
            }
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                // Lazily: the loader keeps a mapping of the library it failed to load (glibc),
                // which holds the mount until this process ends.
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(self.0)
                    .status();
            }
        }
        let _unmount = Unmount(&scratch.0);
        assert!(noexec_mount(&scratch.0));
        let folder = scratch.0.join("cache");
        let key = key(&[SOURCE.as_bytes()]);
        // As where `statvfs` has no flag to say so: the library built there does not load.
        let (_, from_cache) = load_in(&folder, u64::MAX, &key, SOURCE, &cc, &|_| false).unwrap();
        assert!(!from_cache);
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
        // Remembered, so that the next build goes elsewhere at once.
        let resolved = folder.canonicalize().unwrap();
        assert!(REFUSED.lock().unwrap().contains(&resolved));
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
