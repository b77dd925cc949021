//! The GRPO trainer's loop, as Atropos's example trainer runs it: register with the
//! trajectory API, pull `/batch`, take one optimizer step per batch, sync the new weights to
//! inference, report the step's numbers to the run's dashboard, checkpoint now and then.
//!
//! The maths lives in the `lachesis-train` crate; this room talks to the API and to inference.

pub mod bench;
pub mod cli;
pub mod demo;
mod held_out;
pub mod sync;

#[cfg(test)]
mod sync_tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lachesis_inference::ModelTokenizer;
use lachesis_shared::atropos::Registration;
use lachesis_shared::runs::TrainerReport;
use lachesis_train::checkpoint::{self, TrainerState};
use lachesis_train::{RowOptions, StepReport, Trainer, rows_from_batch};

use crate::envs::client::{ClientError, TrajectoryClient};
pub use sync::{SyncError, WeightSync};

#[derive(Debug, thiserror::Error)]
pub enum TrainLoopError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error("the trajectory API refused: {0}")]
    Refused(String),
    #[error(transparent)]
    Train(#[from] lachesis_train::TrainError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error("no batch came within {0:?}")]
    NoBatch(Duration),
}

#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// `default` uses the legacy paths, any other name `/runs/{run}`.
    pub run: String,
    pub api_token: Option<String>,
    /// Sequences per batch (one optimizer step).
    pub batch_size: usize,
    pub max_token_len: usize,
    pub steps: usize,
    /// Where checkpoints go (`step_N` or `adapter_step_N` folders); none: no checkpoints.
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between checkpoints (0: only the last step's).
    pub checkpoint_interval: usize,
    /// Steps between weight syncs to inference (1: after every step).
    pub sync_interval: usize,
    pub rows: RowOptions,
    pub poll_interval: Duration,
    /// Give up when no batch arrives for this long.
    pub batch_timeout: Duration,
    /// Recorded in checkpoints (`base_model_name_or_path`).
    pub base_model: String,
}

/// What one step did, the loop's view: the optimizer's report plus the API and sync figures.
#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub step: usize,
    pub report: StepReport,
    /// Weight versions of the groups in the batch.
    pub batch_versions: Vec<i64>,
    pub weight_version: i64,
    pub wait_seconds: f64,
    pub sync_seconds: f64,
    /// Groups the batch held; rows left after dynamic sampling.
    pub groups: usize,
    pub rows: usize,
}

/// A registered trainer with its model, its inference sync and its API client.
pub struct TrainLoop {
    pub trainer: Trainer,
    pub sync: WeightSync,
    pub config: LoopConfig,
    pub tokenizer: Option<ModelTokenizer>,
    client: TrajectoryClient,
    step: usize,
}

impl TrainLoop {
    /// Registers with the trajectory API at `api` (the environments wait for this).
    pub async fn connect(
        api: &str,
        trainer: Trainer,
        sync: WeightSync,
        tokenizer: Option<ModelTokenizer>,
        config: LoopConfig,
    ) -> Result<Self, TrainLoopError> {
        let client = TrajectoryClient::new(
            api,
            &config.run,
            config.api_token.clone(),
            5,
            Duration::from_secs(2),
            Duration::from_secs(60),
        )?;
        let interval = match config.checkpoint_interval {
            0 => config.steps,
            n => n,
        };
        let step = trainer.optimizer.step;
        client
            .register(&Registration {
                wandb_group: String::new(),
                wandb_project: String::new(),
                batch_size: config.batch_size as i64,
                max_token_len: config.max_token_len as i64,
                checkpoint_dir: config
                    .checkpoint_dir
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                save_checkpoint_interval: interval as i64,
                starting_step: step as i64,
                num_steps: config.steps as i64,
            })
            .await?;
        Ok(Self {
            trainer,
            sync,
            config,
            tokenizer,
            client,
            step,
        })
    }

    pub fn step_count(&self) -> usize {
        self.step
    }

    /// Waits for a batch, trains on it, syncs and reports. `None` once `steps` are done.
    pub async fn next_step(&mut self) -> Result<Option<StepOutcome>, TrainLoopError> {
        if self.step >= self.config.steps {
            return Ok(None);
        }
        let waited = Instant::now();
        let batch = loop {
            let answer = self.client.batch().await?;
            if answer.status.as_deref() == Some("error") {
                return Err(TrainLoopError::Refused(answer.message.unwrap_or_default()));
            }
            if let Some(groups) = answer.batch.filter(|b| !b.is_empty()) {
                break (groups, answer.weight_versions);
            }
            if waited.elapsed() > self.config.batch_timeout {
                return Err(TrainLoopError::NoBatch(self.config.batch_timeout));
            }
            tokio::time::sleep(self.config.poll_interval).await;
        };
        let wait_seconds = waited.elapsed().as_secs_f64();
        let (groups, batch_versions) = batch;
        let rows = rows_from_batch(&groups, self.config.rows)?;
        self.step += 1;
        // A batch of groups that all carry no signal (DAPO's dynamic sampling dropped them)
        // still counts as a step, without an update.
        let report = if rows.is_empty() {
            StepReport::default()
        } else {
            // Training is CPU-bound for seconds; keep it off the async workers.
            let trainer = &mut self.trainer;
            tokio::task::block_in_place(|| trainer.step(&rows))?
        };
        let last = self.step >= self.config.steps;
        let mut sync_seconds = 0.0;
        if self.step.is_multiple_of(self.config.sync_interval.max(1)) || last {
            let started = Instant::now();
            let trainer = &self.trainer;
            let dir = self.checkpoint_path("sync");
            self.sync
                .sync(
                    trainer,
                    self.tokenizer.as_ref(),
                    &dir,
                    &self.config.base_model,
                    self.step,
                )
                .await?;
            sync_seconds = started.elapsed().as_secs_f64();
        }
        let interval = self.config.checkpoint_interval;
        if self.config.checkpoint_dir.is_some()
            && (last || (interval > 0 && self.step.is_multiple_of(interval)))
        {
            let dir = self.checkpoint_path("step");
            let state = TrainerState {
                step: self.step,
                weight_version: self.sync.weight_version(),
            };
            tokio::task::block_in_place(|| {
                checkpoint::save(
                    &dir,
                    &self.trainer,
                    self.tokenizer.as_ref(),
                    &self.config.base_model,
                    &state,
                )
            })?;
        }
        let outcome = StepOutcome {
            step: self.step,
            report,
            batch_versions,
            weight_version: self.sync.weight_version(),
            wait_seconds,
            sync_seconds,
            groups: groups.len(),
            rows: rows.len(),
        };
        self.report(&outcome).await;
        Ok(Some(outcome))
    }

    /// `step_N` for a full model, `adapter_step_N` for LoRA (Atropos's example trainer's names), under the
    /// checkpoint folder (or a temporary one for syncs that need files).
    fn checkpoint_path(&self, purpose: &str) -> PathBuf {
        let root =
            self.config.checkpoint_dir.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!("lachesis-{}", self.config.run))
            });
        let lora = matches!(self.trainer.model.mode, lachesis_train::TrainMode::Lora(_));
        let kind = if lora { "adapter_" } else { "" };
        match purpose {
            "sync" => root.join(format!("{kind}sync")),
            _ => root.join(format!("{kind}step_{}", self.step)),
        }
    }

    /// Metrics go to the dashboard; a failure to report is logged, never fatal to training.
    async fn report(&self, outcome: &StepOutcome) {
        let mut values: std::collections::BTreeMap<String, f64> = outcome
            .report
            .metrics()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        values.insert("sync_seconds".into(), outcome.sync_seconds);
        values.insert("batch_wait_seconds".into(), outcome.wait_seconds);
        values.insert("weight_version".into(), outcome.weight_version as f64);
        if let Some(oldest) = outcome.batch_versions.first() {
            values.insert("staleness".into(), (outcome.weight_version - oldest) as f64);
        }
        self.report_values(outcome.step, values).await;
    }

    /// Named figures for `step` on the run's dashboard (one chart per name); non-finite values
    /// are dropped. A failure to report is logged, never fatal to training.
    pub async fn report_values(
        &self,
        step: usize,
        mut values: std::collections::BTreeMap<String, f64>,
    ) {
        values.retain(|_, v| v.is_finite());
        let report = TrainerReport {
            step: step as i64,
            values,
        };
        if let Err(e) = self.client.trainer_metrics(&report).await {
            tracing::warn!(error = %e, "reporting trainer metrics failed");
        }
    }
}
