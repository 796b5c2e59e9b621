//! Config files: `key = value` lines, the flat subset of TOML that settings need.
//!
//! A line is empty, a comment (`# …`), or a key, `=` and a value: a string in double quotes
//! (with the escapes `\"`, `\\`, `\n` and `\t`), a string in single quotes (taken as written),
//! or a bare word or number (`60`, `true`, `200M`), each followed by nothing but an optional
//! comment. Every key must be one of [`KEYS`](super::KEYS), given once, with a value of its
//! kind: anything else is an error naming the file, the line and the key. Tables (`[section]`)
//! are refused, as every key is at the top level.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::SettingsError;
use super::keys::{self, Key};

/// The settings of one config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// The file, as it was named.
    pub path: PathBuf,
    /// Each key the file sets: its value and the line (from 1) setting it.
    pub entries: BTreeMap<&'static str, (String, usize)>,
}

impl ConfigFile {
    /// Reads and checks the file at `path`.
    pub fn read(path: &Path) -> Result<ConfigFile, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SettingsError::new(format!(
                "the config file {} cannot be read: {e}",
                path.display()
            ))
        })?;
        ConfigFile::parse(path, &text)
    }

    /// Checks `text`, the contents of the file at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, SettingsError> {
        let mut entries: BTreeMap<&'static str, (String, usize)> = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let at = |message: String| {
                SettingsError::new(format!("{}:{number}: {message}", path.display()))
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.starts_with('[') {
                return Err(at(format!(
                    "{line} starts a table, but settings have none: write every key at the top \
                     level"
                )));
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(at(format!("{line:?} is not `key = value`")));
            };
            let name = name.trim();
            let key = known_key(name).map_err(&at)?;
            let value = parse_value(value.trim()).map_err(|why| at(format!("{name}: {why}")))?;
            if !value.is_empty() {
                key.kind
                    .check(&value)
                    .map_err(|why| at(format!("{name} = {value:?}: {why}")))?;
            }
            if let Some((_, first)) = entries.insert(key.name, (value, number)) {
                return Err(at(format!(
                    "{name} is set a second time (first on line {first})"
                )));
            }
        }
        Ok(ConfigFile {
            path: path.to_owned(),
            entries,
        })
    }
}

/// The key a config file names `name`; an error when there is none, or when it names the file.
fn known_key(name: &str) -> Result<&'static Key, String> {
    match keys::find(name) {
        Some(key) if key.allowed_in_file() => Ok(key),
        Some(key) => Err(format!(
            "{name} names the config file itself: set it on the command line (--setting) or in \
             {}",
            key.variable()
        )),
        None => Err(format!(
            "unknown key {name:?}; the keys are {}",
            keys::names()
        )),
    }
}

/// The value written `text` (everything after `=`, trimmed).
fn parse_value(text: &str) -> Result<String, String> {
    let (value, rest) = if let Some(quoted) = text.strip_prefix('"') {
        basic_string(quoted)?
    } else if let Some(quoted) = text.strip_prefix('\'') {
        let end = quoted
            .find('\'')
            .ok_or_else(|| "the string has no closing '".to_owned())?;
        (quoted[..end].to_owned(), &quoted[end + 1..])
    } else {
        let bare = text.split('#').next().unwrap_or_default().trim();
        if bare.is_empty() {
            return Err("no value after `=`".to_owned());
        }
        if bare.contains(char::is_whitespace) {
            return Err(format!(
                "{bare:?} has spaces: put a value of several words in quotes"
            ));
        }
        return Ok(bare.to_owned());
    };
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(value)
    } else {
        Err(format!("{rest:?} follows the closing quote"))
    }
}

/// The string in double quotes that `text` (after the opening quote) starts with, and what
/// follows its closing quote.
fn basic_string(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[at + 1..])),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('"') => value.push('"'),
                Some('\\') => value.push('\\'),
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some(other) => {
                    return Err(format!("\\{other} is no escape (\\\", \\\\, \\n, \\t)"));
                }
                None => break,
            },
            c => value.push(c),
        }
    }
    Err("the string has no closing \"".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, SettingsError> {
        ConfigFile::parse(Path::new("rcannl.toml"), text)
    }

    fn value(text: &str, key: &str) -> String {
        let file = parse(text).unwrap();
        file.entries[key].0.clone()
    }

    #[test]
    fn values_are_quoted_literal_or_bare_and_comments_are_skipped() {
        let text = "# settings\n\ncflags = \"-O2 -march=x86-64-v3\" # portable\n\
                    cache_dir = 'C:\\cache'\ncc_timeout = 60\nrequire_gpu = true # CI\n";
        assert_eq!(value(text, "cflags"), "-O2 -march=x86-64-v3");
        assert_eq!(value(text, "cache_dir"), "C:\\cache");
        assert_eq!(value(text, "cc_timeout"), "60");
        assert_eq!(value(text, "require_gpu"), "true");
        assert_eq!(parse(text).unwrap().entries["require_gpu"].1, 6);
        assert_eq!(
            value("loss_log = \"a \\\"b\\\"\\tc\"", "loss_log"),
            "a \"b\"\tc"
        );
    }

    #[test]
    fn every_mistake_names_the_file_the_line_and_the_key() {
        let cases = [
            (
                "backend = \"cc\"\nbakend = \"cc\"",
                "rcannl.toml:2: unknown key \"bakend\"",
            ),
            (
                "cache_max_bytes = lots",
                "rcannl.toml:1: cache_max_bytes = \"lots\": not a size",
            ),
            (
                "backend = \"cuda\"",
                "rcannl.toml:1: backend = \"cuda\": not one of gpu, cc, interp",
            ),
            (
                "cc_timeout = 1\ncc_timeout = 2",
                "rcannl.toml:2: cc_timeout is set a second time",
            ),
            (
                "[rcannl]\nbackend = \"cc\"",
                "rcannl.toml:1: [rcannl] starts a table",
            ),
            ("backend", "rcannl.toml:1: \"backend\" is not `key = value`"),
            ("backend =", "rcannl.toml:1: backend: no value"),
            (
                "cflags = -O2 -g",
                "rcannl.toml:1: cflags: \"-O2 -g\" has spaces",
            ),
            (
                "cflags = \"-O2",
                "rcannl.toml:1: cflags: the string has no closing",
            ),
            (
                "cflags = \"-O2\" -g",
                "rcannl.toml:1: cflags: \"-g\" follows the closing quote",
            ),
            (
                "config = \"other.toml\"",
                "rcannl.toml:1: config names the config file itself",
            ),
            (
                "log_level = \"loud\"",
                "rcannl.toml:1: log_level = \"loud\": \"loud\" is no level",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert!(error.message.starts_with(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn an_empty_string_is_kept_as_no_value() {
        assert_eq!(value("cache_dir = \"\"", "cache_dir"), "");
    }
}
