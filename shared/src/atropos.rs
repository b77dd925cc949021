//! The Atropos trajectory API's wire types, field for field as atroposlib 0.4.0 sends and reads them
//! (`atroposlib/api/server.py`). Lachesis adds fields only where old clients ignore them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /register`: the trainer announces itself and the shape of the batches it wants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub wandb_group: String,
    pub wandb_project: String,
    pub batch_size: i64,
    pub max_token_len: i64,
    pub checkpoint_dir: String,
    pub save_checkpoint_interval: i64,
    pub starting_step: i64,
    pub num_steps: i64,
}

/// `POST /register` answer. Atropos sends a random 128-bit integer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterResponse {
    pub uuid: u128,
}

/// `POST /register-env`: an environment worker joins the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterEnv {
    pub max_token_length: i64,
    pub desired_name: String,
    pub weight: f64,
    pub group_size: i64,
    #[serde(default)]
    pub min_batch_allocation: Option<f64>,
}

/// `POST /register-env` answer: "wait for trainer to start" until the trainer pulled its first batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RegisterEnvResponse {
    Registered(EnvRegistered),
    Waiting { status: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvRegistered {
    pub status: String,
    pub env_id: i64,
    pub wandb_name: String,
    pub checkpoint_dir: String,
    pub starting_step: i64,
    pub checkpoint_interval: i64,
    pub num_steps: i64,
}

/// `POST /disconnect-env` body and `GET /status-env` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvIdentifier {
    pub env_id: i64,
}

/// A scored group of sequences (`ScoredData` in atroposlib). Every optional field is written out as
/// `null` when absent, as atroposlib's `_scored_data_to_dict` does, so trainers may index any key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoredData {
    pub tokens: Vec<Vec<i64>>,
    pub masks: Vec<Vec<i64>>,
    pub scores: Vec<f64>,
    #[serde(default)]
    pub advantages: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    pub ref_logprobs: Option<Vec<Vec<f64>>>,
    /// Chat messages per sequence; each message must carry `role` and `content`.
    #[serde(default)]
    pub messages: Option<Vec<Vec<serde_json::Map<String, Value>>>>,
    #[serde(default)]
    pub generation_params: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub inference_logprobs: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    pub overrides: Option<Vec<serde_json::Map<String, Value>>>,
    #[serde(default)]
    pub group_overrides: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub images: Option<Value>,
    #[serde(default)]
    pub env_id: Option<i64>,
    /// `[sequence][position][top_k]`.
    #[serde(default)]
    pub distill_token_ids: Option<Vec<Vec<Vec<i64>>>>,
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
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_size: Option<i64>,
}

/// `POST /scored_data_list` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredDataListResponse {
    pub status: String,
    pub groups_processed: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_buffer_size: Option<i64>,
}

/// `GET /status-env` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusEnv {
    pub current_step: i64,
    pub queue_size: i64,
    pub unallocated_fraction: f64,
    pub self_queue_size: i64,
    pub max_group_size: i64,
    pub env_weight: f64,
}

/// `GET /batch` answer as a client reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchResponse {
    pub batch: Option<Vec<ScoredData>>,
    /// Lachesis: the distinct weight versions of the groups in the batch, ascending.
    #[serde(default)]
    pub weight_versions: Vec<i64>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}
