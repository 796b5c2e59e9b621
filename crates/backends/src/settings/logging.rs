//! Logging with a level per module: rcannl's crates log through the `log` facade, and
//! [`install_logger`] gives the process a logger writing to standard error at the levels the
//! `log_level` setting chooses, unless the program installed a logger of its own first.
//!
//! `log_level` is a level for every module (`off`, `error`, `warn`, `info`, `debug`, `trace`)
//! and `module=level` pairs, comma-separated: `warn,rcannl_tensor=debug` logs warnings, and
//! everything down to debug messages of `rcannl_tensor` and the modules inside it. The pair
//! naming the longest matching module decides.

use std::sync::{Once, OnceLock};

use log::{LevelFilter, Log, Metadata, Record};

use super::keys::LOG_LEVEL;

/// The levels `log_level` gives: one for every module, and one for each module named. The
/// default logs warnings only, as `log_level`'s default says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The level of modules no pair names.
    pub everywhere: LevelFilter,
    /// Each module named (`rcannl_tensor`, `rcannl_backends::cache`) with its level.
    pub modules: Vec<(String, LevelFilter)>,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            everywhere: LevelFilter::Warn,
            modules: Vec::new(),
        }
    }
}

impl Filter {
    /// The filter `text` writes; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut filter = Filter::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                None => filter.everywhere = level(part)?,
                Some((module, level_text)) => {
                    let module = module.trim();
                    if module.is_empty() || module.contains(char::is_whitespace) {
                        return Err(format!("{part:?} names no module"));
                    }
                    filter
                        .modules
                        .push((module.to_owned(), level(level_text.trim())?));
                }
            }
        }
        Ok(filter)
    }

    /// The level of the module `target` (a path such as `rcannl_backends::cache::bound`).
    pub fn level_of(&self, target: &str) -> LevelFilter {
        let inside = |module: &str| {
            target == module
                || target
                    .strip_prefix(module)
                    .is_some_and(|rest| rest.starts_with("::"))
        };
        self.modules
            .iter()
            .filter(|(module, _)| inside(module))
            .max_by_key(|(module, _)| module.len())
            .map_or(self.everywhere, |(_, level)| *level)
    }

    /// The most detailed level any module logs at.
    pub fn most_detailed(&self) -> LevelFilter {
        let modules = self.modules.iter().map(|(_, level)| *level);
        modules.fold(self.everywhere, Ord::max)
    }
}

/// The level `text` names, in any case.
fn level(text: &str) -> Result<LevelFilter, String> {
    text.parse::<LevelFilter>()
        .map_err(|_| format!("{text:?} is no level (off, error, warn, info, debug, trace)"))
}

/// Writes each record its filter lets through to standard error, one line each.
#[derive(Debug)]
struct Logger {
    filter: Filter,
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.filter.level_of(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "rcannl {} {}: {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Gives the process the logger of the `log_level` setting (see the module's documentation),
/// once; a program that installed a logger of its own keeps it. A `log_level` that cannot be
/// read is reported once and the default levels used.
pub fn install_logger() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let filter = match super::get_or_warn(&LOG_LEVEL) {
            None => Filter::default(),
            Some(setting) => {
                match setting
                    .text()
                    .map_err(|e| e.message)
                    .and_then(Filter::parse)
                {
                    Ok(filter) => filter,
                    Err(why) => {
                        eprintln!(
                            "rcannl: {} is {:?}: {why}; logging warnings only",
                            setting.named(),
                            setting.value
                        );
                        Filter::default()
                    }
                }
            }
        };
        static LOGGER: OnceLock<Logger> = OnceLock::new();
        let logger = LOGGER.get_or_init(|| Logger { filter });
        if log::set_logger(logger).is_ok() {
            log::set_max_level(logger.filter.most_detailed());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_module_named_decides() {
        let filter =
            Filter::parse("info, rcannl_backends=debug,rcannl_backends::cache=off").unwrap();
        assert_eq!(filter.level_of("rcannl_tensor::context"), LevelFilter::Info);
        assert_eq!(filter.level_of("rcannl_backends"), LevelFilter::Debug);
        assert_eq!(filter.level_of("rcannl_backends::cc"), LevelFilter::Debug);
        assert_eq!(
            filter.level_of("rcannl_backends::cache::bound"),
            LevelFilter::Off
        );
        assert_eq!(filter.level_of("rcannl_backendsx"), LevelFilter::Info);
        assert_eq!(filter.most_detailed(), LevelFilter::Debug);
    }

    #[test]
    fn a_filter_without_a_level_for_every_module_keeps_warnings() {
        let filter = Filter::parse("rcannl_tensor=TRACE").unwrap();
        assert_eq!(filter.everywhere, LevelFilter::Warn);
        assert_eq!(filter.level_of("rcannl_tensor"), LevelFilter::Trace);
    }

    #[test]
    fn the_default_filter_is_the_settings_default() {
        let super::super::keys::DefaultValue::Value(text) = LOG_LEVEL.default else {
            panic!("log_level has a default value");
        };
        assert_eq!(Filter::parse(text), Ok(Filter::default()));
    }

    #[test]
    fn a_bad_filter_says_what_is_wrong() {
        assert!(
            Filter::parse("loud")
                .unwrap_err()
                .contains("\"loud\" is no level")
        );
        assert!(
            Filter::parse("=debug")
                .unwrap_err()
                .contains("names no module")
        );
        assert!(
            Filter::parse("a b=debug")
                .unwrap_err()
                .contains("names no module")
        );
    }
}
