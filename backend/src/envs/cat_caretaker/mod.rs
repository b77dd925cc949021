//! The cat caretaker: a cat that speaks only through behaviors, a caretaker who must infer its need
//! and act. The data, the rubric a judge can apply without an LLM, the judging protocol every
//! judge of a caretaker follows (what a model judge is shown, the `\boxed{}` verdict and its
//! parser), the dialogue with the simulated cat, and the environment that trains a model as the
//! caretaker. The judge marketplace builds on this module, never the other way round.

pub mod data;
pub mod dialogue;
pub mod env;
pub mod judge;
pub mod rubric;
pub mod verdict;

pub use env::{CatCaretakerEnv, NAME};
