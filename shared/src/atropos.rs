//! The Atropos trajectory API's wire types, field for field as atroposlib 0.4.0 sends and reads them
//! (`atroposlib/api/server.py`). Lachesis adds fields only where old clients ignore them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /register`: the trainer announces itself and the shape of the batches it wants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    /// The Weights & Biases group the trainer logs to; environments log beside it.
    pub wandb_group: String,
    /// The Weights & Biases project the trainer logs to.
    pub wandb_project: String,
    /// Sequences per batch that `GET /batch` hands out.
    pub batch_size: i64,
    /// The longest sequence the trainer accepts, in tokens.
    pub max_token_len: i64,
    /// Where the trainer saves checkpoints; passed on to environments.
    pub checkpoint_dir: String,
    /// Steps between checkpoints; passed on to environments.
    pub save_checkpoint_interval: i64,
    /// The step the trainer starts (or resumes) from; the run's step starts there.
    pub starting_step: i64,
    /// Steps the trainer will run in total.
    pub num_steps: i64,
}

/// `POST /register` answer. Atropos sends a random 128-bit integer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterResponse {
    /// The trainer's id, a JSON integer wider than 64 bits.
    pub uuid: u128,
}

/// `POST /register-env`: an environment worker joins the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterEnv {
    /// The longest sequence this environment produces, in tokens; it scales the env's share.
    pub max_token_length: i64,
    /// A name for the environment; the server appends `_{n}` to tell same-named workers apart.
    pub desired_name: String,
    /// Its share of the batches, relative to the other environments' weights.
    pub weight: f64,
    /// Sequences per group it sends; groups of another size are buffered until they add up.
    pub group_size: i64,
    /// The fraction of every batch reserved for this environment (0..1); `None`: no reservation.
    #[serde(default)]
    pub min_batch_allocation: Option<f64>,
}

/// `POST /register-env` answer: "wait for trainer to start" until the trainer pulled its first batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RegisterEnvResponse {
    /// The environment joined the run.
    Registered(EnvRegistered),
    /// The trainer has not started: register again later.
    Waiting {
        /// `wait for trainer to start`.
        status: String,
    },
}

/// A successful `POST /register-env`: the environment's id and the trainer's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvRegistered {
    /// `success`.
    pub status: String,
    /// The environment's id within the run; it sends it back in every group and status call.
    pub env_id: i64,
    /// The name it was given: `desired_name` with `_{n}` appended.
    pub wandb_name: String,
    /// The trainer's [`Registration::checkpoint_dir`].
    pub checkpoint_dir: String,
    /// The run's current step at registration.
    pub starting_step: i64,
    /// The trainer's [`Registration::save_checkpoint_interval`].
    pub checkpoint_interval: i64,
    /// The trainer's [`Registration::num_steps`].
    pub num_steps: i64,
}

/// `POST /disconnect-env` body and `GET /status-env` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvIdentifier {
    /// The id `POST /register-env` gave the environment.
    pub env_id: i64,
}

/// A scored group of sequences (`ScoredData` in atroposlib). Every optional field is written out as
/// `null` when absent, as atroposlib's `_scored_data_to_dict` does, so trainers may index any key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoredData {
    /// Token ids per sequence, prompt and completion.
    pub tokens: Vec<Vec<i64>>,
    /// Per sequence, one entry per token: the token id where the trainer learns from it, `-100`
    /// where it does not (the prompt).
    pub masks: Vec<Vec<i64>>,
    /// One reward per sequence.
    pub scores: Vec<f64>,
    /// Per-token advantages per sequence; `None`: trainers fall back to `scores`.
    #[serde(default)]
    pub advantages: Option<Vec<Vec<f64>>>,
    /// Per-token log-probabilities under a reference model, per sequence.
    #[serde(default)]
    pub ref_logprobs: Option<Vec<Vec<f64>>>,
    /// Chat messages per sequence; each message must carry `role` and `content`.
    #[serde(default)]
    pub messages: Option<Vec<Vec<serde_json::Map<String, Value>>>>,
    /// The sampling settings the sequences were generated with (temperature, ...), passed through.
    #[serde(default)]
    pub generation_params: Option<serde_json::Map<String, Value>>,
    /// Per-token log-probabilities the inference server reported while sampling, per sequence.
    #[serde(default)]
    pub inference_logprobs: Option<Vec<Vec<f64>>>,
    /// Per-sequence settings the trainer should apply to that sequence, passed through.
    #[serde(default)]
    pub overrides: Option<Vec<serde_json::Map<String, Value>>>,
    /// Settings the trainer should apply to the whole group, passed through.
    #[serde(default)]
    pub group_overrides: Option<serde_json::Map<String, Value>>,
    /// Images of multimodal prompts, in whatever shape the environment sends; passed through.
    #[serde(default)]
    pub images: Option<Value>,
    /// The sending environment's id, from `POST /register-env`; `None`: the sender did not say.
    #[serde(default)]
    pub env_id: Option<i64>,
    /// A teacher's top-k token ids for distillation, `[sequence][position][top_k]`.
    #[serde(default)]
    pub distill_token_ids: Option<Vec<Vec<Vec<i64>>>>,
    /// The teacher's log-probabilities of `distill_token_ids`, same shape.
    #[serde(default)]
    pub distill_logprobs: Option<Vec<Vec<Vec<f64>>>>,
    /// Lachesis: the policy weight version that produced the group (bumped by every weight sync).
    #[serde(default)]
    pub weight_version: Option<i64>,
}

impl ScoredData {
    /// The number of sequences in the group; Atropos counts `tokens`.
    pub fn group_size(&self) -> usize {
        self.tokens.len()
    }
}

/// `POST /scored_data` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredDataResponse {
    /// `received` (queued for batching) or `buffered` (held until partners fill the env's
    /// group size).
    pub status: String,
    /// When buffered: the env's sequences still held back; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_size: Option<i64>,
}

/// `POST /scored_data_list` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredDataListResponse {
    /// `received`: the whole list was stored.
    pub status: String,
    /// Groups in the list.
    pub groups_processed: i64,
    /// How many of them were buffered; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<i64>,
    /// The env's sequences still held back after the last buffered group; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_buffer_size: Option<i64>,
}

/// `GET /status-env` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusEnv {
    /// Batches handed to the trainer so far, which is its step.
    pub current_step: i64,
    /// Groups this environment competes with: its own queued ones plus what other environments
    /// queued beyond their reservations, in its group size.
    pub queue_size: i64,
    /// The share of a batch not reserved by any `min_batch_allocation` (0..1).
    pub unallocated_fraction: f64,
    /// This environment's own queued groups, in its group size.
    pub self_queue_size: i64,
    /// The largest group queued by anyone (at least 1), in sequences.
    pub max_group_size: i64,
    /// This environment's share of the rollout budget, floored at 0.01.
    pub env_weight: f64,
}

/// `GET /batch` answer as a client reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// The next batch's groups; `None`: not enough queued yet, ask again.
    pub batch: Option<Vec<ScoredData>>,
    /// Lachesis: the distinct weight versions of the groups in the batch, ascending.
    #[serde(default)]
    pub weight_versions: Vec<i64>,
    /// `error` when the server refused (the trainer is not registered); absent otherwise.
    #[serde(default)]
    pub status: Option<String>,
    /// Why it refused, in words; absent otherwise.
    #[serde(default)]
    pub message: Option<String>,
}
