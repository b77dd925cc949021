//! One module per page of the router.

pub mod arena;
pub mod cats;
pub mod chess;
pub mod dashboard;
pub mod environments;
pub mod feedback;
pub mod login;
pub mod marketplace;
pub mod protein;
pub mod runs;
pub mod settings;
pub mod spatial;
pub mod tasks;
pub mod tools;
