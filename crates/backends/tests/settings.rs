//! Settings: the command line over the environment over the config file over the default; every
//! mistake in a config file or a `--setting` named with its key and where it was given; the
//! defaults the list documents are those the code applies; the README's table is the list's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rcannl_backends::cache::{DEFAULT_MAX_BYTES, parse_size};
use rcannl_backends::cc::{DEFAULT_FLAGS, DEFAULT_TIMEOUT};
use rcannl_backends::settings::{
    self, DefaultValue, Environment, KEYS, Key, Origin, Settings, parse_command_line,
};

/// A fresh folder for one test's files.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rcannl-settings-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A config file holding `text`, in a fresh folder named after `name`.
fn config_file(name: &str, text: &str) -> PathBuf {
    let path = fresh_dir(name).join("settings.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The settings of `command_line` flags and the environment `variables`.
fn settings(command_line: &[&str], variables: &[(&str, &Path)]) -> Settings {
    let flags: Vec<String> = command_line.iter().map(|f| (*f).to_owned()).collect();
    let variables: BTreeMap<String, OsString> = variables
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.as_os_str().to_owned()))
        .collect();
    Settings::new(
        parse_command_line(&flags).unwrap(),
        Environment::Given(variables),
    )
}

fn value_and_origin(settings: &Settings, key: &'static Key) -> Option<(String, Origin)> {
    let setting = settings.get(key).unwrap()?;
    Some((setting.value.into_string().unwrap(), setting.origin))
}

#[test]
fn the_command_line_wins_over_the_environment_which_wins_over_the_file() {
    let file = config_file(
        "precedence",
        "cache_dir = \"/from/file\"\ncflags = \"-O1\"\ncc_timeout = 7\n",
    );
    let settings = settings(
        &["cache_dir=/from/command/line"],
        &[
            ("RCANNL_CONFIG", &file),
            ("RCANNL_CACHE_DIR", Path::new("/from/environment")),
            ("RCANNL_CFLAGS", Path::new("-O2")),
        ],
    );
    assert_eq!(
        value_and_origin(&settings, &settings::CACHE_DIR),
        Some(("/from/command/line".to_owned(), Origin::CommandLine))
    );
    assert_eq!(
        value_and_origin(&settings, &settings::CFLAGS),
        Some(("-O2".to_owned(), Origin::Environment))
    );
    assert_eq!(
        value_and_origin(&settings, &settings::CC_TIMEOUT),
        Some((
            "7".to_owned(),
            Origin::File {
                path: file.clone(),
                line: 3
            }
        ))
    );
    assert_eq!(value_and_origin(&settings, &settings::LOSS_LOG), None);
}

#[test]
fn a_setting_is_named_as_its_origin_names_it() {
    let file = config_file("naming", "# kernels\nbackend = \"interp\"\n");
    let from_file = settings(&[], &[("RCANNL_CONFIG", &file)]);
    let setting = from_file.get(&settings::BACKEND).unwrap().unwrap();
    assert_eq!(setting.named(), format!("{}:2: backend", file.display()));
    let from_environment = settings(&[], &[("RCANNL_BACKEND", Path::new("cc"))]);
    let setting = from_environment.get(&settings::BACKEND).unwrap().unwrap();
    assert_eq!(
        (setting.named(), setting.referred()),
        ("RCANNL_BACKEND".to_owned(), "$RCANNL_BACKEND".to_owned())
    );
    let from_command_line = settings(&["backend=gpu"], &[]);
    let setting = from_command_line.get(&settings::BACKEND).unwrap().unwrap();
    assert_eq!(setting.named(), "--setting backend");
}

#[test]
fn empty_values_count_as_unset() {
    let file = config_file("empty", "cache_dir = \"\"\n");
    let settings = settings(
        &["cflags="],
        &[("RCANNL_CONFIG", &file), ("RCANNL_LOSS_LOG", Path::new(""))],
    );
    for key in [&settings::CACHE_DIR, &settings::LOSS_LOG] {
        assert_eq!(settings.get(key), Ok(None), "{}", key.name);
    }
    // An empty value on the command line still hides the environment's.
    assert_eq!(
        settings.get(&settings::CFLAGS).unwrap().map(|s| s.origin),
        Some(Origin::CommandLine)
    );
}

#[test]
fn a_broken_config_file_is_an_error_for_the_keys_it_would_set() {
    let file = config_file("broken", "backend = \"cc\"\nbakend = \"interp\"\n");
    let settings = settings(
        &[],
        &[
            ("RCANNL_CONFIG", &file),
            ("RCANNL_CFLAGS", Path::new("-O2")),
        ],
    );
    let error = settings.get(&settings::BACKEND).unwrap_err();
    assert!(
        error.message.starts_with(&format!(
            "RCANNL_CONFIG names a file: {}:2: unknown key \"bakend\"",
            file.display()
        )),
        "{error}"
    );
    // What the environment sets does not need the file.
    assert!(settings.get(&settings::CFLAGS).unwrap().is_some());
}

#[test]
fn a_config_file_that_is_named_must_exist() {
    let missing = fresh_dir("missing").join("nowhere.toml");
    let settings = settings(&[&format!("config={}", missing.display())], &[]);
    let error = settings.file().unwrap_err();
    assert!(
        error.message.starts_with(&format!(
            "--setting config names a file: the config file {}",
            missing.display()
        )),
        "{error}"
    );
}

#[test]
fn command_line_mistakes_name_the_flag_and_the_key() {
    let cases = [
        (
            "cache_size=2G",
            "--setting cache_size=2G: unknown key \"cache_size\"; the keys are config,",
        ),
        (
            "cache_max_bytes=lots",
            "--setting cache_max_bytes=lots: not a size",
        ),
        (
            "require_gpu=maybe",
            "--setting require_gpu=maybe: not true or false",
        ),
        ("max_steps=-1", "--setting max_steps=-1: not a whole number"),
        (
            "cc_timeout=0",
            "--setting cc_timeout=0: not a number of seconds above 0",
        ),
        ("backend", "--setting backend: not key=value"),
    ];
    for (flag, expected) in cases {
        let error = parse_command_line(&[flag.to_owned()]).unwrap_err();
        assert!(error.message.starts_with(expected), "{flag}: {error}");
    }
}

#[test]
fn flags_read_yes_and_no_in_their_usual_spellings() {
    for (value, on) in [
        ("1", true),
        ("TRUE", true),
        ("on", true),
        ("0", false),
        ("no", false),
    ] {
        let settings = settings(&[], &[("RCANNL_REQUIRE_GPU", Path::new(value))]);
        let setting = settings.get(&settings::REQUIRE_GPU).unwrap().unwrap();
        assert_eq!(setting.flag(), Ok(on), "{value}");
    }
    let settings = settings(&[], &[("RCANNL_REQUIRE_GPU", Path::new("sometimes"))]);
    let error = settings
        .get(&settings::REQUIRE_GPU)
        .unwrap()
        .unwrap()
        .flag()
        .unwrap_err();
    assert_eq!(
        error.message,
        "RCANNL_REQUIRE_GPU=sometimes: not true or false"
    );
}

#[test]
fn the_half_precision_cutoff_takes_a_number_above_zero_or_none() {
    let key = &settings::CHECK_HALF_PREC_CONSTANTS_CUTOFF;
    let limit = |command_line: &[&str]| settings(command_line, &[]).get(key).unwrap();
    assert!(limit(&[]).is_none(), "unset here: the default applies");
    assert_eq!(key.default, DefaultValue::Value("16384"));
    let set = limit(&["check_half_prec_constants_cutoff=1.5e3"]).unwrap();
    assert_eq!(set.limit(), Ok(Some(1500.0)));
    let off = limit(&["check_half_prec_constants_cutoff=None"]).unwrap();
    assert_eq!(off.limit(), Ok(None));
    for bad in ["0", "-3", "inf", "lots"] {
        let given = format!("check_half_prec_constants_cutoff={bad}");
        let e = match parse_command_line(std::slice::from_ref(&given)) {
            // Checked where it is given, or else where it is read.
            Err(e) => e.message,
            Ok(_) => {
                limit(&[given.as_str()])
                    .unwrap()
                    .limit()
                    .unwrap_err()
                    .message
            }
        };
        assert!(e.contains("check_half_prec_constants_cutoff"), "{e}");
        assert!(e.contains("not a number above 0"), "{e}");
    }
    assert_eq!(settings::parse_limit(" 16384 "), Ok(Some(16384.0)));
}

#[test]
fn keys_are_unique_lower_case_and_their_default_values_are_of_their_kind() {
    for (i, key) in KEYS.iter().enumerate() {
        assert!(
            key.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{}",
            key.name
        );
        assert!(KEYS[..i].iter().all(|k| k.name != key.name), "{}", key.name);
        assert!(!key.description().is_empty(), "{}", key.name);
        if let DefaultValue::Value(value) = key.default {
            assert_eq!(key.kind.check(value), Ok(()), "{}", key.name);
        }
    }
}

#[test]
fn the_documented_defaults_are_those_the_code_applies() {
    let default = |key: &Key| match key.default {
        DefaultValue::Value(value) => value,
        DefaultValue::Unset(_) => panic!("{} has a default value", key.name),
    };
    assert_eq!(
        parse_size(default(&settings::CACHE_MAX_BYTES)),
        Ok(DEFAULT_MAX_BYTES)
    );
    assert_eq!(
        settings::parse_seconds(default(&settings::CC_TIMEOUT)),
        Ok(DEFAULT_TIMEOUT)
    );
    assert_eq!(default(&settings::CFLAGS), DEFAULT_FLAGS.join(" "));
}

#[test]
fn the_readme_lists_every_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let Ok(readme) = std::fs::read_to_string(path) else {
        println!("no workspace README beside this crate: the README check did not run");
        return;
    };
    let table = settings::markdown_table();
    assert!(
        readme.contains(&format!("\n\n{table}\n")),
        "README.md's table of settings differs from the list of keys \
         (rcannl_backends::settings::KEYS): replace it with the output of \
         `rcannl settings --markdown`:\n{table}"
    );
}
