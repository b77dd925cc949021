//! Safe functions over C libraries that Lachesis uses when they are present.
//!
//! Every other crate of the workspace forbids `unsafe`; the foreign calls live here, each behind
//! a function that checks what the C side would otherwise trust (slice lengths, dimensions).

pub mod allocator;
pub mod blas;
