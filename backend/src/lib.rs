//! Lachesis: a platform for reinforcement-learning environments for language models.
//!
//! This crate is the server (the `lachesis` binary is a thin shell over it): the Atropos-compatible
//! trajectory API ([`trajectory`]), durable in Postgres, with metrics and the browser app's files.

pub mod app;
pub mod arena;
pub mod auth;
pub mod bench;
pub mod cats;
pub mod chess;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod envs;
pub mod evaluations;
pub mod feedback;
pub mod hosting;
pub mod inference;
pub mod ledger;
pub mod live;
pub mod marketplace;
pub mod mcp_server;
pub mod metrics;
pub mod nim_serve;
pub mod policy;
pub mod settlement;
pub mod signals;
pub mod spatial;
pub mod supervisor;
pub mod trainer;
pub mod trajectory;
pub mod weights;
