//! `mcp_tools`: the model completes tasks by calling the tools of real MCP servers over several
//! turns. Each episode gets a fresh sandbox (files, a git repository, a memory graph) and the
//! reference servers its task needs, started for it alone; tasks are drawn from a seed and the
//! servers' live tool lists; the reward comes from the outcome (what the tools actually did),
//! less a penalty per wasted call and per malformed turn.

pub mod bfcl;
pub mod checks;
pub mod cli;
pub mod client;
pub mod episode;
pub mod gold;
pub mod sandbox;
pub mod solver;
pub mod tasks;

#[cfg(test)]
mod tests;

use super::in_process::Hosted;
use super::registry::{EnvDescriptor, ServerNeeds};
use lachesis_shared::live::Topic;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lachesis_inference::ChatMessage;
use lachesis_shared::tools::ToolSpec;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Deserialize;
use tokio::sync::OnceCell;

use self::episode::{Episode, EpisodeLimits, Observer};
use self::sandbox::{Sandbox, ServerKind, ServerPrograms};
use self::tasks::{Catalogue, Task};
use super::episode::EpisodeFeed;
use super::in_process::{LiveFeed, SHOWCASE_PAUSE, Showcase};
use super::{
    Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item, ScoredSequence, SeedItem,
    metrics, parse_settings, some_item,
};
use crate::policy::{Policy, PolicyRequest};
use futures::future::BoxFuture;

pub const NAME: &str = "mcp_tools";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "Tasks done by calling real MCP servers (filesystem, memory, git, \
                  everything) over several turns; the reward checks what the tools did, \
                  less a penalty per wasted call and per malformed call.",
    needs: ServerNeeds::LiveFeed,
    build: Some(|o| Ok(Box::new(McpToolsEnv::new(o)?))),
    // Its showcase's episodes appear call by call on the tools page while someone watches.
    hosted: Some(|o, parts| {
        let env = McpToolsEnv::new(o)?.with_feed(parts.live_feed(Topic::Tools));
        Ok(Hosted::showcased(env, Topic::Tools))
    }),
};

/// How an item is played.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Multi-turn episodes on live servers, scored by their outcome.
    Episodes,
    /// One answer compared with the plan's calls, nothing run (+1/-1; see `gold`).
    GoldCall,
}

/// `settings` keys of `mcp_tools`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpToolsSettings {
    pub mode: Mode,
    /// The servers tasks may use (default: all four reference servers).
    pub servers: Vec<ServerKind>,
    /// Model turns per episode.
    pub max_turns: usize,
    pub max_calls_per_turn: usize,
    pub call_timeout_ms: u64,
    /// Starting a server and its handshake.
    pub connect_timeout_ms: u64,
    pub max_result_chars: usize,
    /// Tasks in one `evaluate` pass.
    pub eval_tasks: usize,
    /// BFCL questions per category added to `evaluate` (`eval/bfcl_<category>`); 0: none.
    pub bfcl_per_category: usize,
}

impl Default for McpToolsSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Episodes,
            servers: ServerKind::ALL.to_vec(),
            max_turns: 6,
            max_calls_per_turn: lachesis_shared::tools::DEFAULT_MAX_CALLS_PER_TURN,
            call_timeout_ms: 10_000,
            connect_timeout_ms: 30_000,
            max_result_chars: 4_000,
            eval_tasks: 20,
            bfcl_per_category: 0,
        }
    }
}

pub struct McpToolsEnv {
    config: EnvConfig,
    settings: McpToolsSettings,
    programs: ServerPrograms,
    rng: Mutex<StdRng>,
    eval_seed: u64,
    catalogue: OnceCell<Catalogue>,
    /// Where the showcase's episodes are shown (the server's tools page).
    shown: EpisodeFeed,
}

impl McpToolsEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let settings: McpToolsSettings = parse_settings(NAME, options)?;
        if settings.servers.is_empty() || !(1..=32).contains(&settings.max_turns) {
            return Err(EnvError::InvalidOption(
                "mcp_tools needs at least one server and max_turns in 1..=32".into(),
            ));
        }
        let defaults = EnvConfig {
            group_size: 4,
            max_tokens: 256,
            max_token_length: 8192,
            temperature: 0.7,
            ..EnvConfig::default()
        };
        Ok(Self {
            config: EnvConfig::from_options(options, defaults)?,
            settings,
            programs: ServerPrograms::from_env(),
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            eval_seed: options.seed ^ 0xe7a1,
            catalogue: OnceCell::new(),
            shown: EpisodeFeed::default(),
        })
    }

    /// Shows the showcase's episodes on `feed`.
    pub fn with_feed(mut self, feed: Arc<dyn LiveFeed>) -> Self {
        self.shown.show_on(feed);
        self
    }

    /// Where this environment finds the servers (tests point it elsewhere).
    pub fn with_programs(mut self, programs: ServerPrograms) -> Self {
        self.programs = programs;
        self
    }

    fn limits(&self) -> EpisodeLimits {
        EpisodeLimits {
            max_turns: self.settings.max_turns,
            max_calls_per_turn: self.settings.max_calls_per_turn,
            call_timeout: Duration::from_millis(self.settings.call_timeout_ms),
            max_result_chars: self.settings.max_result_chars,
        }
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.connect_timeout_ms)
    }

    /// The configured servers' tools, discovered once from live servers.
    pub async fn catalogue(&self) -> Result<Catalogue, EnvError> {
        self.catalogue
            .get_or_try_init(|| async {
                let mut sandbox = Sandbox::open(
                    &self.programs,
                    &self.settings.servers,
                    self.connect_timeout(),
                )
                .await
                .map_err(|e| EnvError::Other(e.to_string()))?;
                let mut catalogue = Vec::new();
                for (kind, connection) in &mut sandbox.servers {
                    let tools = connection
                        .tools()
                        .await
                        .map_err(|e| EnvError::Other(e.to_string()))?;
                    catalogue.push((*kind, tools.to_vec()));
                }
                Ok(catalogue)
            })
            .await
            .cloned()
    }

    /// The task for `seed`.
    pub async fn task(&self, seed: u64) -> Result<Task, EnvError> {
        let catalogue = self.catalogue().await?;
        tasks::generate(seed, &catalogue)
            .ok_or_else(|| EnvError::Other("no task template fits the servers' tools".into()))
    }

    /// One episode of `task` in a fresh sandbox with the servers it needs.
    pub async fn play(&self, task: &Task, policy: &dyn Policy) -> Result<Episode, EnvError> {
        self.play_observed(task, policy, &Observer::NONE).await
    }

    /// One episode of `task`, each step shown through `observer` as it happens.
    pub async fn play_observed(
        &self,
        task: &Task,
        policy: &dyn Policy,
        observer: &Observer<'_>,
    ) -> Result<Episode, EnvError> {
        let kinds: Vec<ServerKind> = task.servers.iter().copied().collect();
        let mut sandbox = Sandbox::open(&self.programs, &kinds, self.connect_timeout())
            .await
            .map_err(|e| EnvError::Other(e.to_string()))?;
        for seeded in &task.seeded {
            tokio::fs::write(sandbox.files().join(&seeded.path), &seeded.content).await?;
        }
        let request = self.request();
        episode::play(
            task,
            &mut sandbox,
            policy,
            &request,
            &self.limits(),
            observer,
        )
        .await
    }

    /// The tools of the servers `task` uses, as discovered.
    async fn tools_for(&self, task: &Task) -> Result<Vec<ToolSpec>, EnvError> {
        Ok(self
            .catalogue()
            .await?
            .into_iter()
            .filter(|(kind, _)| task.servers.contains(kind))
            .flat_map(|(_, tools)| tools)
            .collect())
    }

    /// One single-turn group scored against the plan's calls; none when every answer scored
    /// the same (nothing to learn from).
    async fn collect_gold(&self, task: &Task, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let messages = vec![
            ChatMessage::new("system", episode::SYSTEM),
            ChatMessage::new("user", task.prompt.clone()),
        ];
        let request = PolicyRequest {
            messages: messages.clone(),
            n: self.config.group_size,
            tools: self.tools_for(task).await?,
            ..self.request()
        };
        let rollouts = policy.complete(request).await?;
        let max_calls = self.settings.max_calls_per_turn;
        let mut scores: Vec<f64> = rollouts
            .iter()
            .map(|r| gold::score(&r.completion, &task.plan, max_calls))
            .collect();
        let lengths: Vec<usize> = rollouts
            .iter()
            .map(|r| {
                r.masks
                    .iter()
                    .filter(|&&m| m != crate::policy::rollout::PROMPT_MASK)
                    .count()
            })
            .collect();
        gold::prefer_short(&mut scores, &lengths, self.config.max_tokens);
        if scores.windows(2).all(|w| w[0] == w[1]) {
            return Ok(Collected::default());
        }
        let sequences = rollouts
            .into_iter()
            .zip(scores)
            .map(|(rollout, score)| ScoredSequence::answered(&messages, rollout, score))
            .collect();
        Ok(Collected::group(sequences, &self.config, policy))
    }

    fn request(&self) -> PolicyRequest {
        self.config.request(Vec::new(), 1, self.config.temperature)
    }
}

impl Showcase for McpToolsEnv {
    fn prepare(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(async { self.catalogue().await.map(|_| ()) })
    }

    fn show_one<'a>(&'a self, policy: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>> {
        Box::pin(async move {
            let task = self.task(SeedItem::draw(&self.rng)).await?;
            self.play_observed(&task, policy, &self.shown.next())
                .await?;
            Ok(SHOWCASE_PAUSE)
        })
    }
}

impl Env for McpToolsEnv {
    const NAME: &'static str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn setup(&self) -> Result<(), EnvError> {
        self.catalogue().await.map(|_| ())
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        some_item(&SeedItem {
            seed: SeedItem::draw(&self.rng),
        })
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let task = self.task(SeedItem::parse(item)?.seed).await?;
        if self.settings.mode == Mode::GoldCall {
            return self.collect_gold(&task, policy).await;
        }
        let episodes = futures::future::join_all(
            (0..self.config.group_size).map(|_| self.play(&task, policy)),
        )
        .await;
        Collected::dialogues(episodes, &self.config, policy)
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let mut samples = Vec::new();
        let (mut solved, mut score, mut malformed, mut calls) = (0.0, 0.0, 0.0, 0.0);
        let n = self.settings.eval_tasks.max(1);
        for i in 0..n as u64 {
            let task = self.task(self.eval_seed.wrapping_add(i)).await?;
            let episode = self.play(&task, policy).await?;
            solved += f64::from(u8::from(episode.solved));
            score += episode.score;
            malformed += episode.malformed_turns as f64;
            calls += episode.calls.len() as f64;
            samples.push(serde_json::json!({
                "template": task.template,
                "prompt": task.prompt,
                "answer": episode.answer,
                "calls": episode.calls,
                "solved": episode.solved,
                "score": episode.score,
            }));
        }
        let n = n as f64;
        let mut metrics = metrics(&[
            ("eval/solved", solved / n),
            ("eval/mean_score", score / n),
            ("eval/malformed_turns_per_episode", malformed / n),
            ("eval/calls_per_episode", calls / n),
        ]);
        if self.settings.bfcl_per_category > 0 {
            let bfcl = bfcl::metrics(
                policy,
                self.settings.bfcl_per_category,
                self.config.max_tokens,
            )
            .await
            .map_err(|e| EnvError::Other(format!("BFCL: {e}")))?;
            metrics.extend(bfcl);
        }
        Ok(EvalOutcome { metrics, samples })
    }
}
