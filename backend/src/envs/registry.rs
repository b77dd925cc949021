//! Every built-in environment, once: the CLI, the server's in-process workers and
//! `GET /api/environments` all read this table. Each environment describes itself in its own
//! folder (its `DESCRIPTOR`: name, what the browser and `lachesis env list` say about it, what it
//! needs from the server beyond a policy, how it is built and hosted); a new environment is its
//! folder, its `mod` line and one line here.

use super::in_process::{Hosted, ServerParts};
use super::{EnvError, EnvOptions, Environment};

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
    super::arithmetic::DESCRIPTOR,
    super::cat_caretaker::DESCRIPTOR,
    super::chess_player::DESCRIPTOR,
    super::letter_count::DESCRIPTOR,
    super::mcp_tools::DESCRIPTOR,
    super::pay_to_play::DESCRIPTOR,
    super::protein_binder::DESCRIPTOR,
    super::spatial::DESCRIPTOR,
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
    use std::sync::Arc;

    use lachesis_shared::live::Topic;

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
                "letter_count",
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
