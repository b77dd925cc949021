//! Every built-in environment, once: its name, what the browser and `lachesis env list` say about
//! it, what it needs from the server beyond a policy, how it is built, and how the server hosts
//! it. The CLI, the server's in-process workers and `GET /api/environments` all read this table; a
//! new environment is its own folder plus one entry here.

use std::sync::Arc;

use lachesis_shared::live::Topic;

use super::in_process::{Hosted, ServerParts};
use super::{EnvError, EnvOptions, Environment};
use crate::marketplace::judges::Judges;

/// What an environment needs from the server that hosts it, beyond a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerNeeds {
    /// Nothing: it also runs from the CLI against any trajectory API.
    Nothing,
    /// The live 3D scene stream its showcase draws on (`/spatial` in the browser).
    SceneStream,
    /// The live feed its showcase publishes episodes on (`/tools` in the browser).
    LiveFeed,
    /// The ledger, to pay its judges: it runs inside `lachesis serve`, or from `lachesis env`
    /// given the platform's database (`envs::standalone`).
    Ledger,
}

/// Builds an environment from its options.
pub type BuildEnv = fn(&EnvOptions) -> Result<Box<dyn Environment>, EnvError>;

/// Builds an environment for the server that hosts it, from its options and what the server lends.
pub type HostEnv = fn(&EnvOptions, &dyn ServerParts) -> Result<Hosted, EnvError>;

/// One built-in environment.
pub struct EnvDescriptor {
    pub name: &'static str,
    pub description: &'static str,
    pub needs: ServerNeeds,
    /// Builds it from its options; `None` for those only the server can build (see `needs`).
    pub build: Option<BuildEnv>,
    /// How the server hosts it, for those that need more of the server than a policy (see
    /// `needs`); `None`: hosted as `build` makes it, with no showcase.
    pub hosted: Option<HostEnv>,
}

impl EnvDescriptor {
    /// The environment as the server hosts it.
    pub fn host(&self, options: &EnvOptions, parts: &dyn ServerParts) -> Result<Hosted, EnvError> {
        match (self.hosted, self.build) {
            (Some(host), _) => host(options, parts),
            (None, Some(build)) => Ok(Hosted::plain(build(options)?)),
            (None, None) => Err(EnvError::Other(format!(
                "{} has no way to be built",
                self.name
            ))),
        }
    }
}

/// The built-in environments, in the order they are listed.
pub const REGISTRY: &[EnvDescriptor] = &[
    EnvDescriptor {
        name: super::arithmetic::NAME,
        description: "Seeded integer problems (+, -, x) with a verifiable answer; reward 1 when \
                      exact, a small bonus for a well-formed wrong answer.",
        needs: ServerNeeds::Nothing,
        build: Some(|o| Ok(Box::new(super::arithmetic::ArithmeticEnv::new(o)?))),
        hosted: None,
    },
    EnvDescriptor {
        name: super::cat_caretaker::NAME,
        description: "A simulated cat shows behaviors and sounds; the model, as its caretaker, \
                      answers with care; a rubric of the cat's hidden need scores the reply.",
        needs: ServerNeeds::Nothing,
        // Its `openai` judge option calls endpoints the way the platform calls the operator's.
        build: Some(|o| {
            let env = super::cat_caretaker::CatCaretakerEnv::new(o)?;
            Ok(Box::new(
                env.with_endpoint_judge(Arc::new(Judges::default())),
            ))
        }),
        hosted: None,
    },
    EnvDescriptor {
        name: super::chess_player::NAME,
        description: "DeepSacrifice positions: the model names a move (SAN or UCI); the engine \
                      judge scores attack and sound sacrifices in [0, 1]; -1 for no legal move.",
        needs: ServerNeeds::Nothing,
        build: Some(|o| Ok(Box::new(super::chess_player::ChessPlayerEnv::new(o)?))),
        hosted: None,
    },
    EnvDescriptor {
        name: super::mcp_tools::NAME,
        description: "Tasks done by calling real MCP servers (filesystem, memory, git, \
                      everything) over several turns; the reward checks what the tools did, \
                      less a penalty per wasted call and per malformed call.",
        needs: ServerNeeds::LiveFeed,
        build: Some(|o| Ok(Box::new(super::mcp_tools::McpToolsEnv::new(o)?))),
        // Its showcase's episodes appear call by call on the tools page while someone watches.
        hosted: Some(|o, parts| {
            let env =
                super::mcp_tools::McpToolsEnv::new(o)?.with_feed(parts.live_feed(Topic::Tools));
            Ok(Hosted::showcased(env, Topic::Tools))
        }),
    },
    EnvDescriptor {
        name: super::pay_to_play::NAME,
        description: "The cat caretaker judged by a panel of paid agent cards: the agent picks \
                      judges under a USDC budget, pays them through the ledger and is scored by \
                      their consensus.",
        needs: ServerNeeds::Ledger,
        build: None,
        // Pays through the server's ledger and settler; its showcase keeps episodes coming while
        // no trainer is attached, so the marketplace page shows a run from the start.
        hosted: Some(|o, parts| {
            let env = super::pay_to_play::PayToPlayEnv::new(o, parts.marketplace())?;
            Ok(Hosted::showcased(env, Topic::Marketplace))
        }),
    },
    EnvDescriptor {
        name: super::protein_binder::NAME,
        description: "Protein binder design over NVIDIA NIM's protocol: the model calls \
                      AlphaFold2, RFdiffusion, ProteinMPNN and AlphaFold2-Multimer in turn, \
                      choosing contigs, hotspots and sampling; rewarded by the complex's \
                      confidence with credit per stage reached.",
        needs: ServerNeeds::LiveFeed,
        build: Some(|o| Ok(Box::new(super::protein_binder::ProteinBinderEnv::new(o)?))),
        // Its showcase's episodes appear stage by stage, structures included, on the protein page.
        hosted: Some(|o, parts| {
            let env = super::protein_binder::ProteinBinderEnv::new(o)?
                .with_feed(parts.live_feed(Topic::Protein));
            Ok(Hosted::showcased(env, Topic::Protein))
        }),
    },
    EnvDescriptor {
        name: super::spatial::NAME,
        description: "Generated 3D scenes (rapier3d) with placement, distance, orientation and \
                      stacking goals; the model answers with JSON actions, the world runs to \
                      rest and the scorer gives partial credit per goal.",
        needs: ServerNeeds::SceneStream,
        build: Some(|o| Ok(Box::new(super::spatial::SpatialEnv::new(o)?))),
        // Its attempts play on the live scene the browser's viewer watches, and its showcase keeps
        // the model attempting tasks there while no trainer is attached.
        hosted: Some(|o, parts| {
            let scene = parts.live_scene();
            let env = super::spatial::SpatialEnv::new(o)?.with_sink(scene.sink);
            Ok(Hosted::showcased(env, scene.topic))
        }),
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
                "mcp_tools",
                "pay_to_play",
                "protein_binder",
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

    #[test]
    fn what_needs_more_of_the_server_than_a_policy_has_its_own_hosting() {
        for descriptor in REGISTRY {
            assert_eq!(
                descriptor.hosted.is_some(),
                descriptor.needs != ServerNeeds::Nothing,
                "{}",
                descriptor.name
            );
        }
    }

    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::super::in_process::LiveScene;
    use super::super::pay_to_play::Marketplace;
    use super::super::spatial::{Episode, SceneSink};
    use crate::policy::{Policy, PolicyError, PolicyRequest, Rollout};

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl SceneSink for Counting {
        fn episode(&self, _: Episode) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Lends a scene sink that counts episodes; no marketplace (that needs a database).
    #[derive(Default)]
    struct Parts(Arc<Counting>);

    impl ServerParts for Parts {
        fn live_scene(&self) -> LiveScene {
            LiveScene {
                sink: self.0.clone(),
                topic: Topic::Scene {
                    scene: "lent".into(),
                },
            }
        }

        fn marketplace(&self) -> Marketplace {
            panic!("only pay_to_play asks for the marketplace")
        }

        fn live_feed(&self, _topic: Topic) -> Arc<dyn super::super::in_process::LiveFeed> {
            Arc::new(Silent)
        }
    }

    /// Drops what it is given.
    struct Silent;

    impl super::super::in_process::LiveFeed for Silent {
        fn publish(&self, _event: lachesis_shared::live::LiveEvent) -> BoxFuture<'_, ()> {
            futures::future::ready(()).boxed()
        }
    }

    /// Never sure of anything.
    struct Unsure;

    impl Policy for Unsure {
        fn name(&self) -> String {
            "unsure".into()
        }

        fn complete(
            &self,
            request: PolicyRequest,
        ) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
            let rollout = Rollout {
                completion: "I am not sure.".into(),
                ..crate::envs::test_rollout(&[1], &[2])
            };
            futures::future::ready(Ok(vec![rollout; request.n])).boxed()
        }
    }

    #[tokio::test]
    async fn the_server_hosts_each_environment_as_its_entry_says() {
        let parts = Parts::default();
        for descriptor in REGISTRY {
            if descriptor.needs == ServerNeeds::Ledger {
                continue;
            }
            let hosted = descriptor
                .host(&EnvOptions::default(), &parts)
                .unwrap_or_else(|e| panic!("{}: {e}", descriptor.name));
            assert_eq!(hosted.env.name(), descriptor.name);
            assert_eq!(
                hosted.showcase.is_some(),
                descriptor.needs != ServerNeeds::Nothing,
                "{}",
                descriptor.name
            );
        }
        // The spatial showcase plays on the live scene it was lent.
        let hosted = find("spatial")
            .unwrap()
            .host(&EnvOptions::default(), &parts)
            .unwrap();
        let showcase = hosted.showcase.expect("spatial is showcased");
        assert_eq!(
            showcase.on,
            Topic::Scene {
                scene: "lent".into()
            }
        );
        showcase.show.show_one(&Unsure).await.expect("an attempt");
        assert_eq!(parts.0.0.load(Ordering::SeqCst), 1);
    }
}
