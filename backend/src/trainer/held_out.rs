//! Held-out evaluation during a run: each in-process environment's own evaluation set (fixed,
//! never drawn for training), answered by the engine the trainer swaps its weights into, before
//! the first step and every `--eval-interval` steps. This is the learning curve: the batch's
//! mean reward moves with the problems drawn, the held-out score only with the model.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use lachesis_inference::Engine;

use super::TrainLoop;
use crate::envs::Environment;
use crate::envs::in_process::EnvSpec;
use crate::policy::{EmbeddedPolicy, Policy};

pub struct HeldOut {
    envs: Vec<(String, Box<dyn Environment>)>,
    policy: Arc<dyn Policy>,
    interval: usize,
}

impl HeldOut {
    /// `None` when `interval` is 0; otherwise the run must have in-process environments and the
    /// embedded engine (`--env` with `--sync embedded`).
    pub fn new(
        specs: &[EnvSpec],
        engine: Option<&Engine>,
        interval: usize,
    ) -> anyhow::Result<Option<Self>> {
        if interval == 0 {
            return Ok(None);
        }
        if specs.is_empty() {
            anyhow::bail!("--eval-interval evaluates the run's --env environments; none is given");
        }
        let engine =
            engine.context("--eval-interval needs --sync embedded (the trained engine)")?;
        let envs = specs
            .iter()
            .map(|spec| {
                Ok((
                    spec.name.clone(),
                    crate::envs::build(&spec.name, &spec.options)?,
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Some(Self {
            envs,
            policy: Arc::new(EmbeddedPolicy::new(engine.clone())),
            interval,
        }))
    }

    /// Whether the evaluation runs after `step` (0: before training).
    pub fn due(&self, step: usize) -> bool {
        step.is_multiple_of(self.interval)
    }

    /// Evaluates every environment, prints `eval step S ENV: metric value, …` and reports the
    /// metrics to the run's dashboard as `ENV:eval/...` at step `step`.
    pub async fn run(&self, step: usize, train: &TrainLoop) -> anyhow::Result<()> {
        let mut values = BTreeMap::new();
        for (name, env) in &self.envs {
            let outcome = env
                .evaluate(self.policy.as_ref())
                .await
                .with_context(|| format!("evaluating {name} at step {step}"))?;
            let line: Vec<String> = outcome
                .metrics
                .iter()
                .map(|(k, v)| format!("{k} {v:.3}"))
                .collect();
            println!("eval step {step:>4} {name}: {}", line.join(", "));
            values.extend(
                outcome
                    .metrics
                    .into_iter()
                    .map(|(k, v)| (format!("{name}:{k}"), v)),
            );
        }
        train.report_values(step, values).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_needs_in_process_environments_and_the_embedded_engine() {
        assert!(HeldOut::new(&[], None, 0).unwrap().is_none());
        let no_envs = HeldOut::new(&[], None, 5).err().unwrap();
        assert!(no_envs.to_string().contains("--env"), "{no_envs}");
        let spec: EnvSpec = "arithmetic".parse().unwrap();
        let no_engine = HeldOut::new(&[spec], None, 5).err().unwrap();
        assert!(
            no_engine.to_string().contains("--sync embedded"),
            "{no_engine}"
        );
    }
}
