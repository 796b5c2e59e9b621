//! Settings: what the command line, the environment and a config file say about how rcannl runs,
//! for every key of one list ([`KEYS`]).
//!
//! A key's value comes from the first of these that gives one:
//!
//! 1. the command line: `rcannl --setting cache_dir=/tmp/kernels …`, which a program passes to
//!    [`install`] before anything reads a setting;
//! 2. the environment: `RCANNL_` and the key in upper case (`RCANNL_CACHE_DIR`); an empty
//!    variable counts as unset;
//! 3. the config file: the one the `config` key names (`RCANNL_CONFIG`), else `rcannl.toml` in
//!    the working folder if there is one, `key = value` lines (see [`mod@file`]), read once;
//! 4. the key's default ([`DefaultValue`]), which the code reading the key applies.
//!
//! A config file or `--setting` naming an unknown key, or giving a value that is not of the key's
//! kind, is an error naming the key and where it was given: the command-line tool stops on it;
//! a library reading a key whose value would come from a file that has such an error says so once
//! on standard error and reads the key as unset. Values from the environment are checked by the
//! code that reads them, as they always were, and their messages name the variable.
//!
//! The process's settings ([`global`]) are made once; the command line's part is fixed before
//! the first read, and the environment is read at each lookup.

pub mod file;
mod keys;
pub mod logging;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

pub use file::ConfigFile;
pub use keys::*;
pub use logging::install_logger;

/// The config file read when the `config` key names none, if the working folder has one.
pub const DEFAULT_CONFIG_FILE: &str = "rcannl.toml";

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `--setting key=value`.
    CommandLine,
    /// The key's environment variable.
    Environment,
    /// A config file, at a line (from 1).
    File {
        /// The file, as it was named.
        path: PathBuf,
        /// The line setting the key.
        line: usize,
    },
}

/// A key's value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key.
    pub key: &'static Key,
    /// Its value, as given (the environment's need not be text).
    pub value: OsString,
    /// Where it was given.
    pub origin: Origin,
}

impl Setting {
    /// The key as its origin names it, for messages: `RCANNL_CACHE_DIR`, `--setting cache_dir`,
    /// `rcannl.toml:3: cache_dir`.
    pub fn named(&self) -> String {
        match &self.origin {
            Origin::CommandLine => format!("--setting {}", self.key.name),
            Origin::Environment => self.key.variable(),
            Origin::File { path, line } => format!("{}:{line}: {}", path.display(), self.key.name),
        }
    }

    /// [`Setting::named`], a variable written as a shell reads it (`$RCANNL_CACHE_DIR`).
    pub fn referred(&self) -> String {
        match self.origin {
            Origin::Environment => format!("${}", self.key.variable()),
            _ => self.named(),
        }
    }

    /// The value as text; an error naming the key when it is not UTF-8.
    pub fn text(&self) -> Result<&str, SettingsError> {
        self.value.to_str().ok_or_else(|| {
            SettingsError::new(format!(
                "{} is {:?}, which is not text",
                self.named(),
                self.value
            ))
        })
    }

    /// The value as text its key takes ([`Key::kind`]); an error naming the key when it is not.
    pub fn checked_text(&self) -> Result<&str, SettingsError> {
        let text = self.text()?;
        self.key
            .kind
            .check(text)
            .map_err(|why| SettingsError::new(format!("{}={text}: {why}", self.named())))?;
        Ok(text)
    }

    /// The value as a yes or no ([`Kind::Flag`]); an error naming the key when it is neither.
    pub fn flag(&self) -> Result<bool, SettingsError> {
        parse_flag(self.checked_text()?).map_err(SettingsError::new)
    }

    /// The value as a limit ([`Kind::Limit`]): `None` for `none`; an error naming the key when
    /// it is neither a number above 0 nor `none`.
    pub fn limit(&self) -> Result<Option<f64>, SettingsError> {
        parse_limit(self.checked_text()?).map_err(SettingsError::new)
    }
}

/// A config file or command line that does not say what settings it means: an unknown key, a
/// value not of its key's kind, a file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// What is wrong, naming the key and where it was given.
    pub message: String,
}

impl SettingsError {
    /// The error saying `message`.
    pub fn new(message: impl Into<String>) -> SettingsError {
        SettingsError {
            message: message.into(),
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SettingsError {}

/// The environment settings are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Environment {
    /// The process's, read at each lookup.
    Process,
    /// These variables only (for tests and tools that run with another environment).
    Given(BTreeMap<String, OsString>),
}

impl Environment {
    /// The variable `name`, unless it is unset or empty.
    fn variable(&self, name: &str) -> Option<OsString> {
        let value = match self {
            Environment::Process => std::env::var_os(name),
            Environment::Given(variables) => variables.get(name).cloned(),
        };
        value.filter(|value| !value.is_empty())
    }
}

/// The settings of a command line, an environment and the config file they lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    command_line: BTreeMap<&'static str, String>,
    environment: Environment,
    file: Result<Option<ConfigFile>, SettingsError>,
}

impl Settings {
    /// The settings of `command_line` (from [`parse_command_line`]) and `environment`, with the
    /// config file they name (else `rcannl.toml` in the working folder, if it exists) read now.
    pub fn new(command_line: BTreeMap<&'static str, String>, environment: Environment) -> Settings {
        let mut settings = Settings {
            command_line,
            environment,
            file: Ok(None),
        };
        settings.file = settings.read_file();
        settings
    }

    /// The config file these settings name, read and checked; `None` when none is named and the
    /// working folder has no `rcannl.toml`.
    fn read_file(&self) -> Result<Option<ConfigFile>, SettingsError> {
        match self.lookup(&CONFIG) {
            Some(named) => {
                let path = PathBuf::from(&named.value);
                ConfigFile::read(&path)
                    .map(Some)
                    .map_err(|e| SettingsError::new(format!("{} names a file: {e}", named.named())))
            }
            None if Path::new(DEFAULT_CONFIG_FILE).is_file() => {
                ConfigFile::read(Path::new(DEFAULT_CONFIG_FILE)).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The config file these settings read, if any; the error that reading it met.
    pub fn file(&self) -> Result<Option<&ConfigFile>, &SettingsError> {
        self.file.as_ref().map(Option::as_ref)
    }

    /// The value of `key` from the command line or the environment.
    fn lookup(&self, key: &'static Key) -> Option<Setting> {
        let given = |value: OsString, origin| Setting { key, value, origin };
        if let Some(value) = self.command_line.get(key.name) {
            return Some(given(value.into(), Origin::CommandLine));
        }
        let value = self.environment.variable(&key.variable())?;
        Some(given(value, Origin::Environment))
    }

    /// The value of `key` and where it came from; `None` when nothing sets it (its default
    /// applies). The error is the config file's, when the value would come from a file that has
    /// one.
    pub fn get(&self, key: &'static Key) -> Result<Option<Setting>, SettingsError> {
        if let Some(setting) = self.lookup(key) {
            return Ok(Some(setting));
        }
        let Some(file) = self.file.as_ref().map_err(Clone::clone)? else {
            return Ok(None);
        };
        Ok(file.entries.get(key.name).and_then(|(value, line)| {
            (!value.is_empty()).then(|| Setting {
                key,
                value: value.into(),
                origin: Origin::File {
                    path: file.path.clone(),
                    line: *line,
                },
            })
        }))
    }
}

/// The settings `--setting key=value` flags give (each flag's `key=value`); an error names a
/// flag whose key is unknown or whose value is not of its key's kind.
pub fn parse_command_line(
    flags: &[String],
) -> Result<BTreeMap<&'static str, String>, SettingsError> {
    let mut settings = BTreeMap::new();
    for flag in flags {
        let wrong = |why: String| SettingsError::new(format!("--setting {flag}: {why}"));
        let (name, value) = flag
            .split_once('=')
            .ok_or_else(|| wrong("not key=value".to_owned()))?;
        let key = find(name.trim()).ok_or_else(|| {
            wrong(format!(
                "unknown key {:?}; the keys are {}",
                name.trim(),
                names()
            ))
        })?;
        if !value.is_empty() {
            key.kind.check(value).map_err(wrong)?;
        }
        settings.insert(key.name, value.to_owned());
    }
    Ok(settings)
}

static GLOBAL: OnceLock<Settings> = OnceLock::new();

/// Makes the process's settings from `command_line` (see [`parse_command_line`]) and its
/// environment; an error when something has read a setting already, which fixed them without.
pub fn install(command_line: BTreeMap<&'static str, String>) -> Result<(), SettingsError> {
    let mut settings = Some(Settings::new(command_line, Environment::Process));
    GLOBAL.get_or_init(|| settings.take().unwrap_or_else(no_command_line));
    match settings {
        None => Ok(()),
        Some(_) => Err(SettingsError::new(
            "the command line's settings came after the first setting was read",
        )),
    }
}

/// The settings of the process's environment alone.
fn no_command_line() -> Settings {
    Settings::new(BTreeMap::new(), Environment::Process)
}

/// The process's settings: those [`install`] made, else its environment's and config file's.
pub fn global() -> &'static Settings {
    GLOBAL.get_or_init(no_command_line)
}

/// The process's value of `key` (see [`Settings::get`]).
pub fn get(key: &'static Key) -> Result<Option<Setting>, SettingsError> {
    global().get(key)
}

/// The process's value of `key`; the config file's error, when the value would come from a file
/// that has one, is written to standard error (once per process) and the key read as unset.
pub fn get_or_warn(key: &'static Key) -> Option<Setting> {
    get(key).unwrap_or_else(|error| {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| eprintln!("rcannl: {error}; its settings are not used"));
        None
    })
}

/// The process's value of `key` where it is set and text (see [`get_or_warn`]).
pub fn text_or_warn(key: &'static Key) -> Option<String> {
    get_or_warn(key).and_then(|setting| setting.value.into_string().ok())
}

/// Whether the yes-or-no `key` is on in this process: its value's, else its default's; an error
/// names a value that is neither.
pub fn flag(key: &'static Key) -> Result<bool, SettingsError> {
    match get(key)? {
        Some(setting) => setting.flag(),
        None => {
            Ok(matches!(key.default, DefaultValue::Value(text) if parse_flag(text) == Ok(true)))
        }
    }
}

/// The limit `key` ([`Kind::Limit`]) sets in this process: its value's, else its default's
/// (`None` for `none`); an error names a value that is neither a number above 0 nor `none`.
pub fn limit(key: &'static Key) -> Result<Option<f64>, SettingsError> {
    match get(key)? {
        Some(setting) => setting.limit(),
        None => Ok(match key.default {
            DefaultValue::Value(text) => parse_limit(text).ok().flatten(),
            DefaultValue::Unset(_) => None,
        }),
    }
}

/// Whether `value` is what `key` takes, for a listing of settings.
pub fn check(key: &Key, value: &OsStr) -> Result<(), String> {
    match value.to_str() {
        Some(text) => key.kind.check(text),
        None => Err("not text".to_owned()),
    }
}
