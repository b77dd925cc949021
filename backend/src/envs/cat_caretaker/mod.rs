//! The cat caretaker: a cat that speaks only through behaviors, a caretaker who must infer its need
//! and act. The data and the rubric a judge can apply without an LLM live here.

pub mod data;
pub mod rubric;
