//! The cache's bound: the folder's entries are kept under a size cap by evicting the least
//! recently used ones after each store, and can be listed and cleaned.
//!
//! An entry is the files of one kept thing: a library `rc_<key>.so` with its record
//! `rc_<key>.sha256` and source `rc_<key>.c`, or a kept file (a GPU program `gpu_<key>.wgsl`, a
//! driver's pipeline cache `gpu_wgpu_pipeline_cache_<backend>_<vendor>_<device>.bin`) with its
//! record `<name>.sha256`; `<key>` is 64 lower-case hexadecimal digits. Its size is theirs
//! together, and it was last used at the latest of their modification times: loading a library
//! or reading a kept file sets its time to now. The temporary files of a store in progress
//! (the entry's name, then `.<pid>-<counter>`, then the kind of file: see [`entry_of`]) are left
//! alone until they are an hour old, when only a process that died mid-build can have left
//! them.
//!
//! The folder may be shared with files that are not the cache's (`$RCANNL_CACHE_DIR` can name
//! any folder of the user's), so a file is the cache's only when its whole name is one the cache
//! writes, matched exactly: anything else, however close (`rc_local.c`, `gpu_train.py`,
//! `download.partial`), is never counted or removed. For the same reason [`clean`] and [`evict`]
//! refuse a folder the cache itself would not use (`/tmp`, say): what is in it is not the
//! cache's.
//!
//! Removing a library another process has loaded is safe on Linux: its mapping keeps the file's
//! contents alive until it is unloaded, and the cache never writes into a kept file (a store
//! writes a new file and renames it into place). A process that finds an entry gone between
//! checking and loading it builds it again. So eviction needs no lock shared between processes:
//! each removes, oldest first, what its own listing says is over the cap, and a file that another
//! process removed first (or that disappears mid-listing) is simply skipped.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, SystemTime};

use crate::settings;

/// The cap on the cache folder's size when `$RCANNL_CACHE_MAX_BYTES` does not set one: 512 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

/// How old a temporary file must be before it counts as a dead process's leftover.
const STALE: Duration = Duration::from_secs(60 * 60);

/// What a cache folder holds, as [`info`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheInfo {
    /// The folder, as given.
    pub folder: PathBuf,
    /// The number of entries (a library with its record and source counts once).
    pub entries: usize,
    /// The bytes of every entry's files together.
    pub bytes: u64,
    /// The cap stores keep the folder under ([`max_bytes`]).
    pub cap: u64,
}

/// What [`clean`] or [`evict`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Removed {
    /// The number of entries removed.
    pub entries: usize,
    /// Their bytes, with those of stale temporary files.
    pub bytes: u64,
}

/// The cap on the cache folder's size: the `cache_max_bytes` setting (`$RCANNL_CACHE_MAX_BYTES`:
/// a number of bytes, or of KiB, MiB or GiB with a suffix `K`, `M` or `G`: `200M`), else
/// [`DEFAULT_MAX_BYTES`] (after one warning per process when it is set to anything else).
pub fn max_bytes() -> u64 {
    static WARNED: Once = Once::new();
    let Some(setting) = settings::get_or_warn(&settings::CACHE_MAX_BYTES) else {
        return DEFAULT_MAX_BYTES;
    };
    let value = &setting.value;
    match value.to_str().map(parse_size) {
        Some(Ok(bytes)) => bytes,
        Some(Err(why)) => {
            WARNED.call_once(|| {
                eprintln!(
                    "rcannl: {} is {value:?}, {why}; the cache keeps under the default of {} MiB",
                    setting.referred(),
                    DEFAULT_MAX_BYTES >> 20
                );
            });
            DEFAULT_MAX_BYTES
        }
        None => {
            WARNED.call_once(|| {
                eprintln!(
                    "rcannl: {} is not text; the cache keeps under the default of {} MiB",
                    setting.referred(),
                    DEFAULT_MAX_BYTES >> 20
                );
            });
            DEFAULT_MAX_BYTES
        }
    }
}

/// A size such as `1048576`, `512K`, `200M`, `2G` or `2GiB` (binary multiples, any case), in
/// bytes; an error says what is wrong with it.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(
                "not a size (a number of bytes, or of KiB, MiB or GiB as in 512K, 200M, 2G)"
                    .to_owned(),
            );
        }
    };
    let number: u64 = number
        .parse()
        .map_err(|_| "not a size: it does not start with a number".to_owned())?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large a size".to_owned())
}

/// What `folder` holds: its entries and their bytes, with the cap stores keep it under. A
/// missing folder holds nothing.
pub fn info(folder: &Path) -> Result<CacheInfo, String> {
    let listing = Listing::of(folder)?;
    Ok(CacheInfo {
        folder: folder.to_owned(),
        entries: listing.entries.len(),
        bytes: listing.entries.values().map(|e| e.bytes).sum(),
        cap: max_bytes(),
    })
}

/// Removes every entry of `folder`, and the temporary files dead processes left. A folder the
/// cache would not use (see [`evict`]) is an error.
pub fn clean(folder: &Path) -> Result<Removed, String> {
    evict(folder, 0)
}

/// Removes the least recently used entries of `folder` until the rest take at most `cap` bytes,
/// and the temporary files dead processes left. A missing folder holds nothing; one the cache
/// would not use (not private to this user, as `/tmp` is not) is an error, and nothing in it is
/// removed: the files there are not the cache's.
pub fn evict(folder: &Path, cap: u64) -> Result<Removed, String> {
    match super::existing_private_folder(folder) {
        Ok(Some(private)) => evict_except(&private, cap, None),
        Ok(None) => Ok(Removed::default()),
        Err(why) => Err(format!(
            "{why}; the cache does not use such a folder, so it is not cleaned"
        )),
    }
}

/// [`evict`], never removing the entry named `kept` (the one just stored or loaded).
pub(crate) fn evict_except(folder: &Path, cap: u64, kept: Option<&str>) -> Result<Removed, String> {
    let listing = Listing::of(folder)?;
    let mut removed = Removed::default();
    for path in &listing.stale {
        if let Some(bytes) = remove(path) {
            removed.bytes += bytes;
        }
    }
    let mut total: u64 = listing.entries.values().map(|e| e.bytes).sum();
    let mut oldest_first: Vec<(&String, &Entry)> = listing.entries.iter().collect();
    oldest_first.sort_by_key(|(name, entry)| (entry.last_used, *name));
    for (name, entry) in oldest_first {
        if total <= cap {
            break;
        }
        if Some(name.as_str()) == kept {
            continue;
        }
        for path in &entry.files {
            if let Some(bytes) = remove(path) {
                removed.bytes += bytes;
            }
        }
        removed.entries += 1;
        total = total.saturating_sub(entry.bytes);
    }
    Ok(removed)
}

/// Removes the file at `path`; its size if this call removed it.
fn remove(path: &Path) -> Option<u64> {
    let bytes = std::fs::symlink_metadata(path).ok()?.len();
    std::fs::remove_file(path).ok()?;
    Some(bytes)
}

/// Marks the entry whose file is at `path` as used now. A file that cannot be marked (gone,
/// another user's, no regular file) only loses its place in the order of eviction.
pub(crate) fn touch(path: &Path) {
    if let Ok(file) = super::open_own(path)
        && file.metadata().is_ok_and(|m| m.is_file())
    {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// The length of a key: a SHA-256 in hexadecimal.
const KEY_LENGTH: usize = 64;

/// `text` after a key (exactly [`KEY_LENGTH`] lower-case hexadecimal digits) it starts with.
fn after_key(text: &str) -> Option<&str> {
    let key = text.get(..KEY_LENGTH)?;
    key.bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        .then(|| &text[KEY_LENGTH..])
}

/// Whether `text` is a decimal number (digits only, at least one).
fn number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `text` after the unique part of a temporary file's name it starts with: `.<pid>-<counter>`,
/// as [`super::unique`] makes it.
fn after_unique(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('.')?;
    let end = rest.find(|c: char| c != '-' && !c.is_ascii_digit())?;
    let (pid, counter) = rest[..end].split_once('-')?;
    (number(pid) && number(counter)).then(|| &rest[end..])
}

/// Whether `name` is one that files other backends keep in the cache folder ([`super::keep`])
/// may have: a GPU program `gpu_<key>.wgsl`, or a driver's pipeline cache
/// `gpu_wgpu_pipeline_cache_<backend>_<vendor>_<device>.bin` (the name `wgpu` gives it, the
/// numbers decimal). No other name is kept, so that no file of the user's is ever taken for one.
pub(crate) fn kept_name(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix("gpu_").and_then(after_key) {
        return rest == ".wgsl";
    }
    let Some(rest) = name
        .strip_prefix("gpu_wgpu_pipeline_cache_")
        .and_then(|rest| rest.strip_suffix(".bin"))
    else {
        return false;
    };
    match rest.split('_').collect::<Vec<_>>()[..] {
        [backend, vendor, device] => {
            !backend.is_empty()
                && backend
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && number(vendor)
                && number(device)
        }
        _ => false,
    }
}

/// The entry a file of the cache belongs to, by its whole name: `Some(Ok(entry))`,
/// `Some(Err(()))` for a temporary file of a store, `None` for a file that is not the cache's.
///
/// A library's entry `rc_<key>` holds `rc_<key>.so`, `.sha256` and `.c`; its build writes
/// `rc_<key>.<pid>-<counter>.c`, `.so.partial` and `.sha256.partial` (`Entry::build` in the
/// parent module), and a build in parts `rc_<key>.<pid>-<counter>.so.<part>.c` and `.o` (the
/// C backend's `build`). A kept file's entry `<name>` ([`kept_name`]) holds `<name>` and
/// `<name>.sha256`; its store writes `<name>.<pid>-<counter>.partial` and `.sha256.partial`.
fn entry_of(name: &str) -> Option<Result<&str, ()>> {
    if let Some(rest) = name.strip_prefix("rc_").and_then(after_key) {
        let entry = &name[..name.len() - rest.len()];
        if matches!(rest, ".so" | ".sha256" | ".c") {
            return Some(Ok(entry));
        }
        let temporary = match after_unique(rest)? {
            ".c" | ".so.partial" | ".sha256.partial" => true,
            rest => rest
                .strip_prefix(".so.")
                .and_then(|part| part.split_once('.'))
                .is_some_and(|(part, kind)| number(part) && matches!(kind, "c" | "o")),
        };
        return temporary.then_some(Err(()));
    }
    // A kept name has one dot, before its extension: what follows the second is the rest.
    let first_dot = name.find('.')?;
    let end = name[first_dot + 1..]
        .find('.')
        .map_or(name.len(), |at| first_dot + 1 + at);
    let (entry, rest) = name.split_at(end);
    if !kept_name(entry) {
        return None;
    }
    match rest {
        "" | ".sha256" => Some(Ok(entry)),
        rest => matches!(after_unique(rest)?, ".partial" | ".sha256.partial").then_some(Err(())),
    }
}

/// One entry's files.
#[derive(Debug, Default)]
struct Entry {
    files: Vec<PathBuf>,
    bytes: u64,
    last_used: Option<SystemTime>,
}

/// A cache folder's entries, by name, and its stale temporary files.
#[derive(Debug, Default)]
struct Listing {
    entries: BTreeMap<String, Entry>,
    stale: Vec<PathBuf>,
}

impl Listing {
    /// The listing of `folder` (empty when it does not exist). Only regular files of this user
    /// count; a file that vanishes while the folder is read is left out.
    fn of(folder: &Path) -> Result<Listing, String> {
        let mut listing = Listing::default();
        let files = match std::fs::read_dir(folder) {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(listing),
            Err(e) => {
                return Err(format!(
                    "cannot read the cache folder {}: {e}",
                    folder.display()
                ));
            }
        };
        let now = SystemTime::now();
        // SAFETY: `geteuid` has no preconditions and cannot fail.
        let user = unsafe { libc::geteuid() };
        for file in files.flatten() {
            let Ok(metadata) = std::fs::symlink_metadata(file.path()) else {
                continue;
            };
            if !metadata.is_file() || metadata.uid() != user {
                continue;
            }
            let name = file.file_name();
            let Some(kind) = name.to_str().and_then(entry_of) else {
                continue;
            };
            let modified = metadata.modified().ok();
            match kind {
                Ok(stem) => {
                    let entry = listing.entries.entry(stem.to_owned()).or_default();
                    entry.files.push(file.path());
                    entry.bytes += metadata.len();
                    entry.last_used = entry.last_used.max(modified);
                }
                Err(()) => {
                    let age = modified.and_then(|m| now.duration_since(m).ok());
                    if age.is_some_and(|age| age > STALE) {
                        listing.stale.push(file.path());
                    }
                }
            }
        }
        Ok(listing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("200m"), Ok(200 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("12T").unwrap_err().contains("not a size"));
        assert!(parse_size("-1").unwrap_err().contains("not a size"));
        assert!(
            parse_size("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn files_belong_to_entries_by_their_whole_names() {
        let key = "0123456789abcdef".repeat(4);
        let library = format!("rc_{key}");
        for suffix in [".so", ".sha256", ".c"] {
            assert_eq!(
                entry_of(&format!("{library}{suffix}")),
                Some(Ok(library.as_str()))
            );
        }
        for suffix in [
            ".77-3.c",
            ".77-3.so.partial",
            ".77-3.sha256.partial",
            ".77-3.so.0.c",
            ".77-3.so.12.o",
        ] {
            assert_eq!(entry_of(&format!("{library}{suffix}")), Some(Err(())));
        }
        let program = format!("gpu_{key}.wgsl");
        let pipelines = "gpu_wgpu_pipeline_cache_vulkan_4098_29695.bin";
        for kept in [program.as_str(), pipelines] {
            assert!(kept_name(kept), "{kept}");
            assert_eq!(entry_of(kept), Some(Ok(kept)));
            assert_eq!(entry_of(&format!("{kept}.sha256")), Some(Ok(kept)));
            for suffix in [".77-0.partial", ".77-0.sha256.partial"] {
                assert_eq!(entry_of(&format!("{kept}{suffix}")), Some(Err(())));
            }
        }
        let upper = key.to_uppercase();
        for name in [
            "notes.txt",
            "notes.partial",
            "ubuntu.iso.partial",
            "rc_results.csv.bak",
            "rc_local.c",
            "gpu_benchmarks.md",
            "gpu_train.py",
            "gpu_wgpu_pipeline_cache_vulkan_1.bin",
            "gpu_wgpu_pipeline_cache_Vulkan_1_2.bin",
            "gpu_wgpu_pipeline_cache_vulkan_1_2.bin.bak",
            &format!("rc_{}.so", &key[1..]),
            &format!("rc_{key}0.so"),
            &format!("rc_{upper}.so"),
            &format!("{library}.so.bak"),
            &format!("{library}.txt"),
            &format!("{library}.77-3.txt"),
            &format!("{library}.77-.c"),
            &format!("{library}.-3.c"),
            &format!("{library}.7a-3.so.partial"),
            &format!("{library}.77-3.so.partial.bak"),
            &format!("{library}.77-3.so.x.o"),
            &format!("{library}.77-3.so.1.s"),
            &format!("{program}.orig"),
            &format!("{program}.77.partial"),
            &format!("{program}.77-0.tmp"),
            &format!("gpu_{key}.txt"),
        ] {
            assert_eq!(entry_of(name), None, "{name}");
        }
    }
}
