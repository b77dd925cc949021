//! Protein binder design: the model drives four scientific tools (AlphaFold2, RFdiffusion,
//! ProteinMPNN, AlphaFold2-Multimer) through NVIDIA NIM's protocol, choosing each call and its
//! arguments, and is rewarded by the confidence of the complex it ends with. Without NIM URLs it
//! starts the local services (`nim_serve`) inside the process: ProteinMPNN for real, the other
//! three as labelled geometric stand-ins.

pub mod cli;
pub mod episode;
pub mod nim;
pub mod pipeline;
pub mod plan;
pub mod targets;

use super::in_process::Hosted;
use super::registry::{EnvDescriptor, ServerNeeds};
use lachesis_shared::live::Topic;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use self::episode::{Episode, Observer};
use self::nim::client::{EpisodeBudget, NimClient, NimEndpoints, NimLimits};
use self::targets::Target;
use super::episode::EpisodeFeed;
use super::in_process::{LiveFeed, Showcase};
use super::{
    Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item, metrics, parse_item,
    parse_settings, some_item,
};
use crate::nim_serve::NimServeOptions;
use crate::policy::{Policy, PolicyRequest};

pub const NAME: &str = "protein_binder";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "Protein binder design over NVIDIA NIM's protocol: the model calls \
                  AlphaFold2, RFdiffusion, ProteinMPNN and AlphaFold2-Multimer in turn, \
                  choosing contigs, hotspots and sampling; rewarded by the complex's \
                  confidence with credit per stage reached.",
    needs: ServerNeeds::LiveFeed,
    build: Some(|o| Ok(Box::new(ProteinBinderEnv::new(o)?))),
    // Its showcase's episodes appear stage by stage, structures included, on the protein page.
    hosted: Some(|o, parts| {
        let env = ProteinBinderEnv::new(o)?.with_feed(parts.live_feed(Topic::Protein));
        Ok(Hosted::showcased(env, Topic::Protein))
    }),
};

/// Pause between showcase episodes.
const SHOWCASE_PAUSE: Duration = Duration::from_secs(3);

/// The environment's settings (`--setting key=value`); every one has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProteinSettings {
    /// PDB files of further targets (their first chain).
    pub targets: Vec<PathBuf>,
    /// Whether the shipped debug target is among the targets.
    pub debug_target: bool,
    /// One NIM base URL for every tool (`https://health.api.nvidia.com` for NVIDIA's); none:
    /// the local services, started in this process.
    pub nim_url: Option<String>,
    /// Per-tool base URLs, over `nim_url`.
    pub alphafold2_url: Option<String>,
    pub rfdiffusion_url: Option<String>,
    pub proteinmpnn_url: Option<String>,
    pub multimer_url: Option<String>,
    pub call_timeout_s: u64,
    pub poll_seconds: u32,
    pub max_retries: u32,
    /// Wall time and tool calls one episode may spend.
    pub episode_time_s: u64,
    pub episode_calls: u32,
    /// Model turns before the episode ends.
    pub max_turns: usize,
    /// Failed attempts at one stage before the episode ends.
    pub max_failures_per_stage: usize,
    /// Credit for each of the first three stages reached.
    pub stage_credit: f64,
    /// Weights of the complex's confidence figures in the final stage's score (normalised over
    /// the figures the prediction returned).
    pub plddt_weight: f64,
    pub iptm_weight: f64,
    /// Taken off per malformed, out-of-order or refused call.
    pub invalid_call_penalty: f64,
    /// For the local services: the stand-ins' least latency (exercises 202 polling).
    pub stand_in_latency_ms: u64,
    pub proteinmpnn_weights: Option<PathBuf>,
    /// Episodes `evaluate` plays.
    pub eval_size: usize,
}

impl Default for ProteinSettings {
    fn default() -> Self {
        Self {
            targets: Vec::new(),
            debug_target: true,
            nim_url: None,
            alphafold2_url: None,
            rfdiffusion_url: None,
            proteinmpnn_url: None,
            multimer_url: None,
            call_timeout_s: 600,
            poll_seconds: 5,
            max_retries: 3,
            episode_time_s: 1800,
            episode_calls: 12,
            max_turns: 10,
            max_failures_per_stage: 3,
            stage_credit: 0.1,
            plddt_weight: 1.0,
            iptm_weight: 1.0,
            invalid_call_penalty: 0.1,
            stand_in_latency_ms: 0,
            proteinmpnn_weights: None,
            eval_size: 8,
        }
    }
}

impl ProteinSettings {
    fn check(&self) -> Result<(), EnvError> {
        let bad = |what: &str| Err(EnvError::InvalidOption(format!("{NAME}: {what}")));
        if !(1..=64).contains(&self.max_turns) {
            return bad("max_turns must be 1 to 64");
        }
        if !(1..=16).contains(&self.max_failures_per_stage) {
            return bad("max_failures_per_stage must be 1 to 16");
        }
        if !(1..=100).contains(&self.episode_calls)
            || self.episode_time_s == 0
            || self.call_timeout_s == 0
        {
            return bad(
                "episode_calls must be 1 to 100, and episode_time_s and call_timeout_s positive",
            );
        }
        let weights = [
            self.stage_credit,
            self.plddt_weight,
            self.iptm_weight,
            self.invalid_call_penalty,
        ];
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
            || self.stage_credit > 1.0 / 3.0
            || self.plddt_weight == 0.0
        {
            return bad(
                "weights must be finite and non-negative, stage_credit at most 1/3, plddt_weight positive",
            );
        }
        for url in [
            &self.nim_url,
            &self.alphafold2_url,
            &self.rfdiffusion_url,
            &self.proteinmpnn_url,
            &self.multimer_url,
        ]
        .into_iter()
        .flatten()
        {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return bad("NIM URLs must be http:// or https://");
            }
        }
        if !(1..=1000).contains(&self.eval_size) {
            return bad("eval_size must be 1 to 1000");
        }
        Ok(())
    }

    fn limits(&self) -> NimLimits {
        NimLimits {
            call_timeout: Duration::from_secs(self.call_timeout_s),
            poll_seconds: self.poll_seconds,
            max_retries: self.max_retries,
            ..NimLimits::default()
        }
    }
}

/// An item: which target, and the seed of the group's service calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DesignItem {
    target: usize,
    seed: u64,
}

pub struct ProteinBinderEnv {
    config: EnvConfig,
    settings: ProteinSettings,
    targets: Vec<Target>,
    nim: OnceCell<NimClient>,
    next_target: AtomicUsize,
    rng: Mutex<StdRng>,
    /// Where the showcase's and training's episodes are shown.
    shown: EpisodeFeed,
}

impl ProteinBinderEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let settings: ProteinSettings = parse_settings(NAME, options)?;
        settings.check()?;
        let mut targets = Vec::new();
        if settings.debug_target {
            targets.push(Target::debug());
        }
        for path in &settings.targets {
            targets.push(Target::from_file(path)?);
        }
        if targets.is_empty() {
            return Err(EnvError::InvalidOption(format!("{NAME}: no targets")));
        }
        let config = EnvConfig::from_options(
            options,
            EnvConfig {
                group_size: 4,
                max_tokens: 256,
                temperature: 0.7,
                ..EnvConfig::default()
            },
        )?;
        Ok(Self {
            config,
            settings,
            targets,
            nim: OnceCell::new(),
            next_target: AtomicUsize::new(0),
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            shown: EpisodeFeed::default(),
        })
    }

    pub fn with_feed(mut self, feed: Arc<dyn LiveFeed>) -> Self {
        self.shown.show_on(feed);
        self
    }

    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The NIM client: the configured URLs, or the local services started now.
    pub async fn nim(&self) -> Result<&NimClient, EnvError> {
        self.nim
            .get_or_try_init(|| async {
                let s = &self.settings;
                let base = match &s.nim_url {
                    Some(url) => url.clone(),
                    None if [
                        &s.alphafold2_url,
                        &s.rfdiffusion_url,
                        &s.proteinmpnn_url,
                        &s.multimer_url,
                    ]
                    .iter()
                    .all(|u| u.is_some()) =>
                    {
                        String::new()
                    }
                    None => {
                        crate::nim_serve::spawn_local(NimServeOptions {
                            stand_in_latency_ms: s.stand_in_latency_ms,
                            proteinmpnn_weights: s.proteinmpnn_weights.clone(),
                            ..NimServeOptions::default()
                        })
                        .await?
                    }
                };
                let mut endpoints = NimEndpoints::all_at(&base);
                let choose = |own: &Option<String>, default: String| {
                    own.clone()
                        .map_or(default, |u| u.trim_end_matches('/').to_string())
                };
                endpoints.alphafold2 = choose(&s.alphafold2_url, endpoints.alphafold2);
                endpoints.rfdiffusion = choose(&s.rfdiffusion_url, endpoints.rfdiffusion);
                endpoints.proteinmpnn = choose(&s.proteinmpnn_url, endpoints.proteinmpnn);
                endpoints.multimer = choose(&s.multimer_url, endpoints.multimer);
                Ok(NimClient::new(
                    endpoints,
                    s.limits(),
                    NimClient::api_key_from_env(),
                ))
            })
            .await
    }

    fn request(&self) -> PolicyRequest {
        self.config.request(Vec::new(), 1, self.config.temperature)
    }

    fn budget(&self) -> EpisodeBudget {
        EpisodeBudget::new(
            Duration::from_secs(self.settings.episode_time_s),
            self.settings.episode_calls,
        )
    }

    /// One episode on target `target` with `policy`, shown through `observer`.
    pub async fn play(
        &self,
        target: usize,
        seed: u64,
        policy: &dyn Policy,
        observer: &Observer<'_>,
    ) -> Result<Episode, EnvError> {
        let target = self
            .targets
            .get(target)
            .ok_or_else(|| EnvError::InvalidItem(format!("no target {target}")))?;
        let nim = self.nim().await?;
        episode::play(
            target,
            seed,
            policy,
            &self.request(),
            nim,
            self.budget(),
            &self.settings,
            observer,
        )
        .await
    }
}

impl Showcase for ProteinBinderEnv {
    fn prepare(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(async { self.nim().await.map(|_| ()) })
    }

    fn show_one<'a>(&'a self, policy: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>> {
        Box::pin(async move {
            let target = self.next_target.fetch_add(1, Ordering::Relaxed) % self.targets.len();
            let observer = self.shown.next();
            let seed = super::SeedItem::draw(&self.rng);
            self.play(target, seed, policy, &observer).await?;
            Ok(SHOWCASE_PAUSE)
        })
    }
}

impl Env for ProteinBinderEnv {
    const NAME: &'static str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn setup(&self) -> Result<(), EnvError> {
        self.nim().await.map(|_| ())
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        let target = self.next_target.fetch_add(1, Ordering::Relaxed) % self.targets.len();
        some_item(&DesignItem {
            target,
            seed: super::SeedItem::draw(&self.rng),
        })
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let item: DesignItem = parse_item(item)?;
        let episodes = futures::future::join_all((0..self.config.group_size).map(|i| {
            let observer = self.shown.next();
            async move {
                self.play(
                    item.target,
                    item.seed.wrapping_add(i as u64),
                    policy,
                    &observer,
                )
                .await
            }
        }))
        .await;
        Collected::dialogues(episodes, &self.config, policy)
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let size = self.settings.eval_size;
        let mut reached = [0usize; 4];
        let mut confidences = Vec::new();
        let mut rewards = Vec::new();
        let mut samples = Vec::new();
        let (mut waited, mut worked, mut model) = (0u64, 0u64, 0u64);
        for i in 0..size {
            let episode = self
                .play(
                    i % self.targets.len(),
                    1000 + i as u64,
                    policy,
                    &Observer::NONE,
                )
                .await?;
            for (stage, count) in reached.iter_mut().enumerate() {
                if episode.stages > stage {
                    *count += 1;
                }
            }
            if let Some(plddt) = episode.plddt {
                confidences.push(plddt);
            }
            rewards.push(episode.score);
            waited += episode.waited_ms;
            worked += episode.worked_ms;
            model += episode.model_ms;
            samples.push(serde_json::json!({
                "target": episode.target, "stages": episode.stages, "score": episode.score,
                "plddt": episode.plddt, "iptm": episode.iptm, "invalid_calls": episode.invalid_calls,
                "service_failures": episode.service_failures,
            }));
        }
        let n = size as f64;
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        Ok(EvalOutcome {
            metrics: metrics(&[
                ("eval/target_structure_rate", reached[0] as f64 / n),
                ("eval/binder_backbone_rate", reached[1] as f64 / n),
                ("eval/binder_sequence_rate", reached[2] as f64 / n),
                ("eval/complex_rate", reached[3] as f64 / n),
                ("eval/mean_plddt", mean(&confidences)),
                ("eval/mean_reward", mean(&rewards)),
                ("eval/tool_wait_ms", waited as f64 / n),
                ("eval/tool_work_ms", worked as f64 / n),
                ("eval/model_ms", model as f64 / n),
            ]),
            samples,
        })
    }
}
