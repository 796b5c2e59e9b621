//! What `op!` and `cd!` refuse when they expand, with the span of the offending tokens: each
//! file under `tests/ui` must fail to compile with the message beside it.

#[test]
fn the_macros_refuse_at_expansion() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
