//! Wire types used by both the backend and the browser app.
//!
//! Everything here is serde + pure code so it compiles to wasm32 and native alike.

#![warn(missing_docs)]

pub mod accounts;
pub mod arena;
pub mod atropos;
pub mod cats;
pub mod chess;
pub mod error;
pub mod feedback;
pub mod health;
pub mod ledger;
pub mod live;
pub mod marketplace;
pub mod mcp;
pub mod protein;
pub mod runs;
#[cfg(feature = "spatial")]
pub mod spatial;
pub mod status;
pub mod system;
pub mod tools;
