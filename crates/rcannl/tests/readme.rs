//! The README's first program is the `first_model` example, word for word: CI runs the example,
//! so the program a reader copies from the README builds and runs.

use std::path::Path;

/// The README of the workspace, when this crate is built from it (a published package has none).
fn readme() -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).ok()
}

#[test]
fn the_readme_shows_the_first_model_example_verbatim() {
    let Some(readme) = readme() else {
        println!("no workspace README beside this crate: the README check did not run");
        return;
    };
    let example = include_str!("../examples/first_model.rs");
    let program: String = example
        .lines()
        .filter(|line| !line.starts_with("//!"))
        .skip_while(|line| line.is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    let shown = format!("```rust\n{program}```\n");
    assert!(
        readme.contains(&shown),
        "README.md's program differs from crates/rcannl/examples/first_model.rs: copy the \
         example (without its //! lines) into the README's \"Using rcannl in a project\" section"
    );
}
