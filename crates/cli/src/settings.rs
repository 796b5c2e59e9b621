//! Settings on the command line: the `--setting KEY=VALUE` flag every subcommand takes, made the
//! process's settings before anything reads one, and `rcannl settings`, which lists every key
//! with its value and where the value came from (or, with `--markdown`, the README's table of
//! keys). See `rcannl_backends::settings` for the keys and the order they are read in.

use std::process::ExitCode;

use rcannl_backends::settings::{self, DefaultValue, KEYS, Setting};

use crate::report::{self, CliError, ErrorKind};

/// Arguments of `rcannl settings`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the table of keys in Markdown, as the README shows it, instead of their values.
    #[arg(long)]
    pub markdown: bool,
}

/// Makes the process's settings from the `--setting` flags `flags` and its environment, and reads
/// the config file; an error (a usage error) names a flag or a line of the file that is wrong.
pub fn install(flags: &[String]) -> Result<(), CliError> {
    let usage = |e: settings::SettingsError| CliError::new(ErrorKind::Usage, e.message);
    settings::install(settings::parse_command_line(flags).map_err(usage)?).map_err(usage)?;
    settings::global().file().map_err(|e| usage(e.clone()))?;
    settings::install_logger();
    Ok(())
}

/// Runs the command: exit status 0 on success, 1 on any error.
pub fn run(args: &Args) -> ExitCode {
    let text = if args.markdown {
        settings::markdown_table()
    } else {
        listing()
    };
    report::write_out(std::io::stdout(), &text)
}

/// Every key, a line each in the form of a config file's: `key = "value"` and, after `#`, where
/// the value came from and whether it is one of the key's; an unset key with what that means.
fn listing() -> String {
    let file = match settings::global().file() {
        Ok(Some(file)) => format!("the config file {}", file.path.display()),
        Ok(None) | Err(_) => format!(
            "no config file ({} is absent)",
            settings::DEFAULT_CONFIG_FILE
        ),
    };
    let mut text = format!(
        "# settings from the command line, then the environment, then {file}, then defaults\n"
    );
    for key in KEYS {
        let line = match settings::get(key) {
            Ok(Some(setting)) => set_line(&setting),
            Ok(None) | Err(_) => match key.default {
                DefaultValue::Value(value) => format!("{} = {value:?}  # default", key.name),
                DefaultValue::Unset(words) => format!("# {}: unset ({words})", key.name),
            },
        };
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The line of a key that `setting` sets.
fn set_line(setting: &Setting) -> String {
    let value = setting.value.to_string_lossy();
    let check = match settings::check(setting.key, &setting.value) {
        Ok(()) => String::new(),
        Err(why) => format!(": {why}"),
    };
    format!(
        "{} = {value:?}  # {}{check}",
        setting.key.name,
        setting.named()
    )
}
