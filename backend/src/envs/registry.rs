//! Every built-in environment, once: its name, what the browser and `lachesis env list` say about
//! it, what it needs from the server beyond a policy, and how it is built. The CLI, the server's
//! in-process workers and `GET /api/environments` all read this table; a new environment is its
//! own folder plus one entry here.

use super::{EnvError, EnvOptions, Environment};

/// What an environment needs from the server that hosts it, beyond a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerNeeds {
    /// Nothing: it also runs from the CLI against any trajectory API.
    Nothing,
    /// The live 3D scene stream its showcase draws on (`/spatial` in the browser).
    SceneStream,
    /// The ledger, to pay its judges: it runs only inside `lachesis serve`.
    Ledger,
}

/// Builds an environment from its options.
pub type BuildEnv = fn(&EnvOptions) -> Result<Box<dyn Environment>, EnvError>;

/// One built-in environment.
pub struct EnvDescriptor {
    pub name: &'static str,
    pub description: &'static str,
    pub needs: ServerNeeds,
    /// Builds it from its options; `None` for those only the server can build (see `needs`).
    pub build: Option<BuildEnv>,
}

/// The built-in environments, in the order they are listed.
pub const REGISTRY: &[EnvDescriptor] = &[
    EnvDescriptor {
        name: super::arithmetic::NAME,
        description: "Seeded integer problems (+, -, x) with a verifiable answer; reward 1 when \
                      exact, a small bonus for a well-formed wrong answer.",
        needs: ServerNeeds::Nothing,
        build: Some(|o| Ok(Box::new(super::arithmetic::ArithmeticEnv::new(o)?))),
    },
    EnvDescriptor {
        name: super::cat_caretaker::NAME,
        description: "A simulated cat shows behaviors and sounds; the model, as its caretaker, \
                      answers with care; a rubric of the cat's hidden need scores the reply.",
        needs: ServerNeeds::Nothing,
        build: Some(|o| Ok(Box::new(super::cat_caretaker::CatCaretakerEnv::new(o)?))),
    },
    EnvDescriptor {
        name: super::chess_player::NAME,
        description: "DeepSacrifice positions: the model names a move (SAN or UCI); the engine \
                      judge scores attack and sound sacrifices in [0, 1]; -1 for no legal move.",
        needs: ServerNeeds::Nothing,
        build: Some(|o| Ok(Box::new(super::chess_player::ChessPlayerEnv::new(o)?))),
    },
    EnvDescriptor {
        name: super::pay_to_play::NAME,
        description: "The cat caretaker judged by a panel of paid agent cards: the agent picks \
                      judges under a USDC budget, pays them through the ledger and is scored by \
                      their consensus.",
        needs: ServerNeeds::Ledger,
        build: None,
    },
    EnvDescriptor {
        name: super::spatial::NAME,
        description: "Generated 3D scenes (rapier3d) with placement, distance, orientation and \
                      stacking goals; the model answers with JSON actions, the world runs to \
                      rest and the scorer gives partial credit per goal.",
        needs: ServerNeeds::SceneStream,
        build: Some(|o| Ok(Box::new(super::spatial::SpatialEnv::new(o)?))),
    },
];

/// The built-in environment of that name.
pub fn find(name: &str) -> Option<&'static EnvDescriptor> {
    REGISTRY.iter().find(|d| d.name == name)
}

/// The names, for messages.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|d| d.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_environment_is_described() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        assert_eq!(
            names,
            [
                "arithmetic",
                "cat_caretaker",
                "chess_player",
                "pay_to_play",
                "spatial"
            ]
        );
        assert!(REGISTRY.iter().all(|d| d.description.len() > 40));
    }

    #[test]
    fn what_needs_the_ledger_is_built_only_by_the_server() {
        for descriptor in REGISTRY {
            assert_eq!(
                descriptor.build.is_none(),
                descriptor.needs == ServerNeeds::Ledger,
                "{}",
                descriptor.name
            );
        }
    }
}
