//! The global allocator a program on the `rcannl` facade has (its default `mimalloc` feature),
//! so that the benchmarks which time compiling a graph time it as such a program does.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
