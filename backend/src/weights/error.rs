//! The one error type of the weight-loading routes, in vLLM's error shape
//! (`{"object": "error", "message", "type", "code"}`), which trainers written for vLLM read.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The request or the files it names are not something this server can load.
    #[error("{0}")]
    BadRequest(String),
    /// `lora_name` names an adapter that is not loaded.
    #[error("the LoRA adapter {0:?} is not loaded")]
    UnknownAdapter(String),
    /// `lora_name` is already taken (vLLM's answer too: unload it first).
    #[error("the LoRA adapter {0:?} has already been loaded; unload it first")]
    AlreadyLoaded(String),
    /// As many adapters as `--inference-max-lora-adapters` are loaded.
    #[error(
        "this server holds at most {limit} LoRA adapters at once (--inference-max-lora-adapters); unload one first"
    )]
    TooManyAdapters { limit: usize },
    /// The files to read are larger than `--inference-max-weights-mib`.
    #[error(
        "{what} holds {bytes} bytes of weights, more than the {limit} this server reads (--inference-max-weights-mib)"
    )]
    TooLarge {
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    /// The server serves no embedded model, so there is nothing to adapt or replace.
    #[error("no model is loaded: start `lachesis serve` with --model PATH")]
    NoModel,
    /// Reading or building the weights failed for a reason that is ours, not the request's.
    #[error("loading the weights failed: {0}")]
    Internal(String),
}

impl IntoResponse for WeightsError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self {
            WeightsError::BadRequest(_) | WeightsError::AlreadyLoaded(_) => {
                (StatusCode::BAD_REQUEST, "BadRequestError")
            }
            WeightsError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "BadRequestError"),
            WeightsError::UnknownAdapter(_) => (StatusCode::NOT_FOUND, "NotFoundError"),
            WeightsError::TooManyAdapters { .. } => (StatusCode::CONFLICT, "BadRequestError"),
            WeightsError::NoModel => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableError"),
            WeightsError::Internal(_) => {
                tracing::error!(error = %self, "weights load failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError")
            }
        };
        let body = json!({
            "object": "error",
            "message": self.to_string(),
            "type": kind,
            "param": null,
            "code": status.as_u16(),
            // SGLang's weight-update answers carry `success`; a trainer reading either finds it.
            "success": false,
        });
        (status, Json(body)).into_response()
    }
}
