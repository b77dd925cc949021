//! Small read models the browser shows about a run.

use serde::{Deserialize, Serialize};

/// `GET /status`: the trainer step and how many groups wait in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub current_step: i64,
    pub queue_size: i64,
}

/// `GET /info`: what the trainer registered (−1 before registration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub batch_size: i64,
    pub max_token_len: i64,
}
