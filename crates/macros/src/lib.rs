//! The `op!` and `cd!` macros of rcannl, OCANNL's `%op` and `%cd` in Rust.
//!
//! Use them through `rcannl` (or `rcannl-tensor`), whose `op!` and `cd!` hand these the path of
//! the tensor crate; the syntax is documented there.

#![warn(missing_docs)]

mod basis;
mod cd;
mod common;
mod compose;
mod op;
mod shorthand;

use proc_macro::TokenStream;

/// Tensor expressions; see `rcannl_tensor::op!`.
#[proc_macro]
pub fn op(input: TokenStream) -> TokenStream {
    op::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Assignments and operation definitions; see `rcannl_tensor::cd!`.
#[proc_macro]
pub fn cd(input: TokenStream) -> TokenStream {
    cd::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
