//! Present so that the host-side dependencies (`[build-dependencies]`) take part in the build.

fn main() {}
