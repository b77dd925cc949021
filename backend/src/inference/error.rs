//! The one error type of the inference endpoints, answered in OpenAI's error shape
//! (`{"error": {"message", "type", "param", "code"}}`), which OpenAI clients and atroposlib read.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lachesis_inference::EngineError;
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// The body is not the JSON this endpoint takes (wrong type, missing field, bad value).
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<String>,
    },
    /// The server runs without an embedded model.
    #[error(
        "no model is loaded: start `lachesis serve` with --model PATH (or let `make run` fetch SmolLM2)"
    )]
    NoModel,
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl InferenceError {
    pub fn bad(message: impl Into<String>, param: &str) -> Self {
        InferenceError::BadRequest {
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }
}

impl IntoResponse for InferenceError {
    fn into_response(self) -> Response {
        let (status, kind, param) = match &self {
            InferenceError::BadRequest { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                param.clone(),
            ),
            InferenceError::NoModel => (StatusCode::SERVICE_UNAVAILABLE, "model_not_loaded", None),
            InferenceError::Engine(e) => match e {
                EngineError::InvalidRequest(_) | EngineError::ContextLength { .. } => {
                    (StatusCode::BAD_REQUEST, "invalid_request_error", None)
                }
                EngineError::Template(_) | EngineError::Tokenizer(_) => {
                    (StatusCode::BAD_REQUEST, "invalid_request_error", None)
                }
                EngineError::Busy(_) | EngineError::Stopped => {
                    (StatusCode::SERVICE_UNAVAILABLE, "server_busy", None)
                }
                EngineError::Model(_) | EngineError::Io(_) => {
                    tracing::error!(error = %e, "inference failed");
                    (StatusCode::INTERNAL_SERVER_ERROR, "server_error", None)
                }
            },
        };
        let body = json!({
            "error": {
                "message": self.to_string(),
                "type": kind,
                "param": param,
                "code": status.as_u16(),
            }
        });
        (status, Json(body)).into_response()
    }
}
