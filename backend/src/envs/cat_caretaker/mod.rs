//! The cat caretaker: a cat that speaks only through behaviors, a caretaker who must infer its need
//! and act. The data, the rubric a judge can apply without an LLM, the dialogue with the simulated
//! cat, and the environment that trains a model as the caretaker.

pub mod data;
pub mod dialogue;
pub mod env;
pub mod rubric;

pub use env::{CatCaretakerEnv, NAME};
