//! Environments run inside `lachesis serve`: each one a runner task posting to the server's own
//! address, answered by the embedded model in the same process. They register like any worker and
//! wait for a trainer, then produce groups until the server shuts down.
//!
//! Runners and showcases are supervised (`crate::supervisor`): one that fails is logged, counted
//! and started again after a pause, as tasks `env:NAME` and `showcase:NAME`.

use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::runner::{self, RunnerConfig};
use super::{EnvOptions, build};
use crate::policy::{EmbeddedPolicy, Policy};

/// One `--env` value: `NAME`, or `NAME:{"group_size": 4, "max_tokens": 64, ...}` (EnvOptions as JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    pub name: String,
    pub options: EnvOptions,
}

impl std::str::FromStr for EnvSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (name, options) = match spec.split_once(':') {
            Some((name, json)) => (
                name,
                serde_json::from_str(json).map_err(|e| {
                    format!("--env {name}: options are not valid EnvOptions JSON: {e}")
                })?,
            ),
            None => (spec, EnvOptions::default()),
        };
        if name.is_empty() {
            return Err("--env needs an environment name".into());
        }
        Ok(Self {
            name: name.to_owned(),
            options,
        })
    }
}

/// Starts one supervised runner per spec against `api`. Fails at once for unknown environments or
/// when no embedded model is loaded, so a misconfigured server does not start.
pub fn spawn(
    specs: &[EnvSpec],
    api: &str,
    api_token: Option<String>,
    state: &crate::app::AppState,
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let (engine, db) = (state.engine.as_ref(), &state.db);
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let engine = engine.context(
        "in-process environments (--env) answer with the embedded model: load one with --model",
    )?;
    let policy: Arc<dyn Policy> = Arc::new(EmbeddedPolicy::new(engine.clone()));
    let mut handles = Vec::new();
    for spec in specs {
        let env: Arc<dyn super::Environment> = if spec.name == super::spatial::NAME {
            // Its attempts are shown live on the scene the browser's viewer watches, and a
            // showcase loop keeps the model attempting tasks there while no trainer is attached.
            let (streamer, _player) = crate::spatial::SceneStreamer::spawn(
                db.clone(),
                crate::spatial::LIVE_SCENE.to_string(),
                shutdown.clone(),
            );
            let env = super::spatial::SpatialEnv::new(&spec.options)
                .with_context(|| format!("--env {}", spec.name))?
                .with_sink(streamer);
            let env = Arc::new(env);
            let (showcased, policy, stop) = (env.clone(), policy.clone(), shutdown.clone());
            handles.push(
                state
                    .tasks
                    .spawn("showcase:spatial", shutdown.clone(), move || {
                        crate::spatial::showcase(showcased.clone(), policy.clone(), stop.clone())
                    }),
            );
            env
        } else if spec.name == super::pay_to_play::NAME {
            // Pays through the server's ledger and settler; the embedded model answers, chooses
            // cards when asked to, and runs the model cards. A showcase loop keeps episodes coming
            // while no trainer is attached, so the marketplace page shows a run from the start.
            let market = super::pay_to_play::Marketplace {
                ledger: state.ledger.clone(),
                settler: state.settler.clone(),
                // The platform's showcase: its budget never pays a team's card.
                judges: crate::marketplace::judges::Judges::new(Some(policy.clone()))
                    .platform_cards_only()
                    .with_secrets(state.hosting.secrets_key.clone())
                    .with_limits(state.hosting.judge)
                    .with_probation(state.hosting.probation),
            };
            let env = Arc::new(
                super::pay_to_play::PayToPlayEnv::new(&spec.options, market)
                    .with_context(|| format!("--env {}", spec.name))?,
            );
            let (showcased, policy, stop) = (env.clone(), policy.clone(), shutdown.clone());
            handles.push(
                state
                    .tasks
                    .spawn("showcase:pay_to_play", shutdown.clone(), move || {
                        super::pay_to_play::showcase(
                            showcased.clone(),
                            policy.clone(),
                            stop.clone(),
                        )
                    }),
            );
            env
        } else {
            Arc::from(
                build(&spec.name, &spec.options).with_context(|| format!("--env {}", spec.name))?,
            )
        };
        let config = RunnerConfig {
            api_token: api_token.clone(),
            // Until the server stops, whatever the trainer's step count.
            total_steps: Some(0),
            ..RunnerConfig::default()
        };
        let api = api.to_owned();
        let policy = policy.clone();
        let stop = shutdown.clone();
        let name = spec.name.clone();
        let task = format!("env:{name}");
        handles.push(state.tasks.spawn(&task, shutdown.clone(), move || {
            let (api, env, policy) = (api.clone(), env.clone(), policy.clone());
            let (config, stop, name) = (config.clone(), stop.clone(), name.clone());
            async move {
                let report = runner::run(&api, env.as_ref(), policy, config, stop).await?;
                tracing::info!(env = %name, ?report, "in-process environment stopped");
                Ok(())
            }
        }));
    }
    Ok(handles)
}

#[cfg(test)]
mod tests {
    use super::EnvSpec;

    #[test]
    fn specs_name_an_environment_and_optional_options() {
        let plain: EnvSpec = "arithmetic".parse().unwrap();
        assert_eq!(plain.name, "arithmetic");
        let tuned: EnvSpec = r#"arithmetic:{"group_size": 2, "max_tokens": 16}"#.parse().unwrap();
        assert_eq!(tuned.options.group_size, Some(2));
        assert_eq!(tuned.options.max_tokens, Some(16));
        assert!("arithmetic:{\"group_sise\": 2}".parse::<EnvSpec>().is_err());
        assert!(":{}".parse::<EnvSpec>().is_err());
    }
}
