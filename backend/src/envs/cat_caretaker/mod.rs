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

use std::sync::Arc;

use super::registry::{EnvDescriptor, ServerNeeds};
use crate::marketplace::judges::Judges;
pub use env::{CatCaretakerEnv, NAME};

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "A simulated cat shows behaviors and sounds; the model, as its caretaker, \
                  answers with care; a rubric of the cat's hidden need scores the reply.",
    needs: ServerNeeds::Nothing,
    // Its `openai` judge option calls endpoints the way the platform calls the operator's.
    build: Some(|o| {
        let env = CatCaretakerEnv::new(o)?;
        Ok(Box::new(
            env.with_endpoint_judge(Arc::new(Judges::default())),
        ))
    }),
    hosted: None,
};
