//! The server's own long-running tasks (`GET /api/system/tasks`): the live bridge, the status
//! sampler, in-process environments and their showcases, the embedded model's worker. Each is
//! supervised: restarted with a growing pause when it fails, and shown here so nothing stays
//! silently dead.

use serde::{Deserialize, Serialize};

/// Where a supervised task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Started and working.
    Running,
    /// It failed and waits before starting again (`retry_at_ms`).
    BackingOff,
    /// It finished (server shutting down, or nothing left to do) and will not start again.
    Stopped,
}

/// One supervised task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// What it is, e.g. `live-bridge`, `env:arithmetic`, `showcase:spatial`.
    pub name: String,
    /// Running, waiting to restart after a failure, or stopped for good.
    pub state: TaskState,
    /// Times it failed (an error or a panic) and was started again, or is about to be.
    pub restarts: u64,
    /// The last failure, credentials removed.
    pub last_error: Option<String>,
    /// When it entered `state`, in milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// When backing off: when it starts again, in milliseconds since the Unix epoch.
    pub retry_at_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_travel_in_snake_case() {
        let status = TaskStatus {
            name: "live-bridge".into(),
            state: TaskState::BackingOff,
            restarts: 2,
            last_error: Some("connection lost".into()),
            since_ms: 1,
            retry_at_ms: Some(2),
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["state"], "backing_off");
        assert_eq!(serde_json::from_value::<TaskStatus>(json).unwrap(), status);
    }
}
