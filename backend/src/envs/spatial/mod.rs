//! `spatial`: Padres spatial reasoning, re-made. Each item is a generated task (a seed and a
//! difficulty, see [`generate`]); the model answers with JSON actions ([`parse`]); the actions
//! run in a rapier3d world until it is at rest ([`physics`]); the final poses are judged by the
//! shared scorer (`lachesis_shared::spatial::score`), which gives documented partial credit per
//! goal. Reward: that score, 0 when the actions do not parse.
//!
//! Every attempt can be shown live: a [`SceneSink`] (the server's scene streamer, when hosted by
//! `lachesis serve`) receives the task, the model's text and the recorded episode; hosted, the
//! environment is also a [`Showcase`] that keeps attempting tasks there between groups.

pub mod bench;
mod eval;
pub mod generate;
pub mod parse;
pub mod physics;
pub mod solve;

use super::in_process::Hosted;
use super::registry::{EnvDescriptor, ServerNeeds};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use lachesis_shared::spatial::{Recording, Task, Verdict, describe_task, score};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::in_process::{SHOWCASE_PAUSE, Showcase};
use super::{Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item};
use crate::policy::{Policy, PolicyRequest};
pub use parse::{ActionError, parse_actions, render_actions};

pub const NAME: &str = "spatial";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "Generated 3D scenes (rapier3d) with placement, distance, orientation and \
                  stacking goals; the model answers with JSON actions, the world runs to \
                  rest and the scorer gives partial credit per goal.",
    needs: ServerNeeds::SceneStream,
    build: Some(|o| Ok(Box::new(SpatialEnv::new(o)?))),
    // Its attempts play on the live scene the browser's viewer watches, and its showcase keeps
    // the model attempting tasks there while no trainer is attached.
    hosted: Some(|o, parts| {
        let scene = parts.live_scene();
        let env = SpatialEnv::new(o)?.with_sink(scene.sink);
        Ok(Hosted::showcased(env, scene.topic))
    }),
};

/// Frames of an episode are recorded every this many physics steps (20 per simulated second).
pub const STEPS_PER_FRAME: u32 = 3;
/// Evaluation seeds start here, far from the training stream's usual seeds.
pub const EVAL_SEED: u64 = 0x5_0000_0000;
/// The worked example shown before the task (its seed, at difficulty 1).
const EXAMPLE_SEED: u64 = 0xE_0000_0000;

const SYSTEM_PROMPT: &str = "You move objects in a 3D scene to meet goals. Y is up; the ground \
    is y = 0; positions are in metres. Answer with only a JSON list of actions, each one of:\n\
    {\"action\": \"move\", \"object\": ID, \"x\": X, \"z\": Z} (put the object down at x, z; it \
    lands on whatever is below),\n\
    {\"action\": \"rotate\", \"object\": ID, \"yaw_deg\": DEGREES} (turn it about the vertical axis),\n\
    {\"action\": \"push\", \"object\": ID, \"direction\": [DX, DZ], \"speed\": M_PER_S}.\n\
    After your actions the world runs until everything is at rest, then the goals are checked.";

/// An item: which task to pose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    pub seed: u64,
    pub difficulty: u8,
}

/// One attempt, for whoever shows it live.
#[derive(Debug, Clone)]
pub struct Episode {
    pub task: Task,
    pub caption: String,
    /// The model's text, or the parse error it earned.
    pub attempt: String,
    pub recording: Recording,
    pub verdict: Verdict,
}

/// Receives episodes as they are judged; must not block (the streamer drops when busy).
pub trait SceneSink: Send + Sync {
    fn episode(&self, episode: Episode);
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Difficulties drawn from for training items.
    pub difficulties: Vec<u8>,
    /// Evaluation tasks per difficulty (fixed seeds from [`EVAL_SEED`]).
    pub eval_per_difficulty: u64,
    pub eval_temperature: f32,
    /// Worked examples before the task (0 or 1).
    pub examples: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            difficulties: vec![1, 2],
            eval_per_difficulty: 8,
            eval_temperature: 0.0,
            examples: 1,
        }
    }
}

pub struct SpatialEnv {
    config: EnvConfig,
    settings: Settings,
    rng: Mutex<StdRng>,
    sink: Option<Arc<dyn SceneSink>>,
}

/// The conversation posing `task`, after `examples` worked examples.
pub fn messages(task: &Task, examples: usize) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::new("system", SYSTEM_PROMPT)];
    if examples > 0 {
        // Solved once per process: the solver takes milliseconds, prompts are made per item.
        static EXAMPLE: OnceLock<(String, String)> = OnceLock::new();
        let (question, answer) = EXAMPLE.get_or_init(|| {
            let example = generate::generate(EXAMPLE_SEED, 1);
            let solution = solve::solve(&example);
            (describe_task(&example), render_actions(&solution.actions))
        });
        messages.push(ChatMessage::new("user", question.clone()));
        messages.push(ChatMessage::new("assistant", answer.clone()));
    }
    messages.push(ChatMessage::new("user", describe_task(task)));
    messages
}

/// Judges one answer: the verdict, the episode's recording and the text to show for it.
pub fn judge(task: &Task, answer: &str) -> (Verdict, Recording, String) {
    match parse_actions(answer, task) {
        Ok(actions) => {
            let settled = physics::simulate(&task.objects, &actions, STEPS_PER_FRAME);
            let last = settled.recording.frames.last().cloned().unwrap_or_default();
            (
                score(task, &last),
                settled.recording,
                render_actions(&actions),
            )
        }
        Err(e) => {
            let start = task.start_poses();
            // Nothing was done: every goal earns nothing, whatever the start happens to meet.
            let mut verdict = score(task, &start);
            verdict.score = 0.0;
            for goal in &mut verdict.goals {
                goal.credit = 0.0;
                goal.satisfied = false;
                goal.detail = "not judged: the answer has no readable actions".into();
            }
            (
                verdict,
                Recording {
                    steps_per_frame: STEPS_PER_FRAME,
                    frames: vec![start],
                },
                format!("unreadable answer: {e}"),
            )
        }
    }
}

impl SpatialEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let settings: Settings = super::parse_settings(NAME, options)?;
        if settings.difficulties.is_empty()
            || settings
                .difficulties
                .iter()
                .any(|d| !lachesis_shared::spatial::DIFFICULTIES.contains(d))
        {
            return Err(EnvError::InvalidOption(
                "difficulties must be a non-empty list of 1 to 4".into(),
            ));
        }
        if settings.examples > 1 {
            return Err(EnvError::InvalidOption("examples must be 0 or 1".into()));
        }
        let defaults = EnvConfig {
            group_size: 4,
            max_token_length: 2048,
            max_tokens: 160,
            ..EnvConfig::default()
        };
        let config = EnvConfig::from_options(options, defaults)?;
        Ok(Self {
            config,
            settings,
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            sink: None,
        })
    }

    /// Shows every judged attempt through `sink`.
    pub fn with_sink(mut self, sink: Arc<dyn SceneSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    fn draw(&self) -> TaskRef {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let difficulties = &self.settings.difficulties;
        TaskRef {
            // Below EVAL_SEED, so training never poses an evaluation task.
            seed: rng.random_range(0..EVAL_SEED),
            difficulty: difficulties[rng.random_range(0..difficulties.len())],
        }
    }

    fn request(&self, task: &Task, n: usize, temperature: f32) -> PolicyRequest {
        self.config
            .request(messages(task, self.settings.examples), n, temperature)
    }

    fn show(
        &self,
        task: &Task,
        caption: String,
        attempt: String,
        recording: Recording,
        verdict: &Verdict,
    ) {
        if let Some(sink) = &self.sink {
            sink.episode(Episode {
                task: task.clone(),
                caption,
                attempt,
                recording,
                verdict: verdict.clone(),
            });
        }
    }

    /// One attempt at a fresh training task, only to be shown (nothing is scored for training):
    /// what the live scene plays while no trainer asks for groups. Returns the attempt's score.
    async fn show_attempt(&self, policy: &dyn Policy) -> Result<f32, EnvError> {
        let task_ref = self.draw();
        let task = generate::generate(task_ref.seed, task_ref.difficulty);
        let request = self.request(&task, 1, self.config.temperature);
        let rollout = policy
            .complete(request)
            .await?
            .pop()
            .ok_or_else(|| EnvError::Other("the policy returned no rollout".into()))?;
        let (verdict, recording, shown) = judge(&task, &rollout.completion);
        self.show(
            &task,
            format!("{} (showcase, no trainer attached)", answered_by(policy)),
            shown,
            recording,
            &verdict,
        );
        Ok(verdict.score)
    }
}

/// Who answers, for the scene's caption: the policy, and its weight version when it reports one
/// (it rises as a trainer syncs new weights, so viewers see training reach the scene).
fn answered_by(policy: &dyn Policy) -> String {
    match policy.weight_version() {
        Some(version) => format!("{}, weights v{version}", policy.name()),
        None => policy.name().to_string(),
    }
}

impl Env for SpatialEnv {
    const NAME: &str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        super::some_item(&self.draw())
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let task_ref: TaskRef = super::parse_item(item)?;
        if !lachesis_shared::spatial::DIFFICULTIES.contains(&task_ref.difficulty) {
            return Err(EnvError::InvalidItem(format!(
                "difficulty {} is not 1 to 4",
                task_ref.difficulty
            )));
        }
        let task = generate::generate(task_ref.seed, task_ref.difficulty);
        let messages = messages(&task, self.settings.examples);
        Collected::sampled(&self.config, policy, messages, |i, n, rollout| {
            let (verdict, recording, shown) = judge(&task, &rollout.completion);
            self.show(
                &task,
                format!("{} (attempt {} of {n})", answered_by(policy), i + 1),
                shown,
                recording,
                &verdict,
            );
            f64::from(verdict.score)
        })
        .await
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        self.evaluate_set(policy).await
    }
}

/// The live scene's showcase: one attempt, then the usual pause.
impl Showcase for SpatialEnv {
    fn show_one<'a>(&'a self, policy: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>> {
        Box::pin(async move {
            let score = self.show_attempt(policy).await?;
            tracing::debug!(score, "spatial showcase attempt");
            Ok(SHOWCASE_PAUSE)
        })
    }
}

#[cfg(test)]
mod tests;
