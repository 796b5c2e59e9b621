//! The C backend's compiled libraries in the cache folder, and what a library must pass before
//! it is loaded.
//!
//! A library is kept as `rc_<key>.so`, `<key>` the SHA-256 of the compiler's words, the flags
//! and the source, beside `rc_<key>.sha256`: the SHA-256 of the library's bytes and its name, in
//! `sha256sum`'s format. A cached library is loaded only after its bytes are read and match its
//! record; one that does not (damaged, truncated, another routine's, planted) is rebuilt, written
//! beside and renamed into place, and so is one that matches its record but does not load (its
//! entry removed first; an error then names `rcannl cache clean`). Where the cache folder is not
//! private, where it cannot be written, or where its mount forbids running programs (`noexec`:
//! flagged so, or the loader cannot map a library built there), a library is built in a fresh
//! private folder of its own in the temporary folder, loaded and deleted (after one warning per
//! process): nothing is loaded from a folder others can write. Where the temporary folder is on
//! a `noexec` mount too, compiling is an error that says so ([`libraries_load`] tells in
//! advance, and the default backend is then the interpreter).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use libloading::Library;
use sha2::{Digest, Sha256};

use crate::cache::{
    Leftovers, Scratch, evict_except, hex, private_folder, read_own_file, touch, unique, write_new,
};
use crate::error::{CompileError, CompileErrorKind};
use crate::phases::{self, Phase};

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

/// The library kept under `key` in the cache in `folder`, loaded, if it is there and passes its
/// check; nothing is built.
pub(crate) fn cached(folder: &Path, key: &str) -> Option<Library> {
    let private = usable_folder(folder, &noexec_mount).ok()?;
    match Entry::new(&private, key).load_verified() {
        Cached::Loaded(library) => Some(library),
        Cached::Missing | Cached::Unloadable(_) => None,
    }
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
            let _ = evict_except(&private, cap, Some(&entry.name()));
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
            Some(first) => CompileError::new(
                CompileErrorKind::Load,
                format!(
                    "{first}; building it again failed: {error} (`rcannl cache clean` empties \
                     the cache)"
                ),
            ),
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
    let scratch = Scratch::new().map_err(|why| {
        CompileError::new(CompileErrorKind::Load, format!("cannot compile: {why}"))
    })?;
    let nowhere = |refused| {
        CompileError::new(
            CompileErrorKind::Load,
            format!(
                "{}, or RCANNL_BACKEND=interp to run on the interpreter",
                nowhere_to_load(&why, scratch.0.parent().unwrap_or(&scratch.0), refused)
            ),
        )
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
        Err(Failure::Unwritable(e)) => Err(CompileError::new(
            CompileErrorKind::Load,
            format!("cannot write in {}: {e}", scratch.0.display()),
        )),
        Err(Failure::Load(error)) if refused_to_map(&error) => Err(nowhere(true)),
        Err(Failure::Build(error) | Failure::Load(error)) => Err(error),
    }
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
                touch(&self.library);
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
            Failure::Build(CompileError::new(
                CompileErrorKind::Load,
                format!("the compiler wrote no library at {}", partial.display()),
            ))
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
        touch(&self.library);
        // The source stays beside its library, for reading.
        let _ = std::fs::rename(c_path, &self.source);
        Ok(library)
    }
}

/// Loads the library at `path`, which the caller has checked.
fn open(path: &Path) -> Result<Library, CompileError> {
    // SAFETY: the library is one this crate built from code it generated (checked against its
    // record when it comes from the cache); it has no initializers.
    let opened = phases::timed(Phase::Loading, || unsafe { Library::new(path) });
    opened.map_err(|e| {
        CompileError::new(
            CompileErrorKind::Load,
            format!("cannot load {}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::key;

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
            std::fs::write(library, garbage)
                .map_err(|e| CompileError::new(CompileErrorKind::Load, e.to_string()))
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
            .map_err(|e| {
                CompileError::new(CompileErrorKind::Load, format!("cc does not run: {e}"))
            })?;
        if !status.success() {
            return Err(CompileError::new(
                CompileErrorKind::Load,
                format!("cc failed: {status}"),
            ));
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
        let refusal = |message: &str| CompileError::new(CompileErrorKind::Load, message.to_owned());
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
}
