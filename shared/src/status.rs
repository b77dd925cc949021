//! Small read models the browser shows about a run.

use serde::{Deserialize, Serialize};

/// `GET /status`: the trainer step and how many groups wait in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    /// Batches handed to the trainer so far, which is its step.
    pub current_step: i64,
    /// Scored groups posted by environments and not yet taken in a batch.
    pub queue_size: i64,
}

/// `GET /info`: what the trainer registered (−1 before registration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Sequences per training batch, as the trainer registered it.
    pub batch_size: i64,
    /// The longest sequence the trainer accepts, in tokens.
    pub max_token_len: i64,
}
