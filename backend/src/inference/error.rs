//! The one error type of the inference endpoints, answered in OpenAI's error shape
//! (`{"error": {"message", "type", "param", "code"}}`), which OpenAI clients and atroposlib read.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
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
    /// The request's KV cache would exceed the per-request budget.
    #[error(
        "this request would hold about {estimate_mib:.1} MiB of KV cache: n ({n}) × (prompt {prompt} + max_tokens {max_tokens}) tokens × {bytes_per_token} bytes per token, more than the {budget_mib:.1} MiB one request may use on this server (--inference-kv-budget-mib); lower n or max_tokens, or shorten the prompt"
    )]
    KvBudget {
        n: usize,
        prompt: usize,
        max_tokens: usize,
        bytes_per_token: usize,
        estimate_mib: f64,
        budget_mib: f64,
    },
    /// The request alone asks for more tokens than a caller's bucket holds: waiting never helps.
    #[error(
        "this request may use {cost} tokens (prompt + n × max_tokens), more than one caller may use at once on this server ({burst}, --inference-burst-tokens); lower n or max_tokens"
    )]
    OverBurst { cost: u64, burst: u64 },
    /// The caller spent its tokens for now (a 429 with `Retry-After`).
    #[error(
        "rate limit reached: this request may use {cost} tokens (prompt + n × max_tokens) and this caller has {available} of its {per_minute} tokens per minute left (--inference-tokens-per-minute); retry after {retry_after_secs} s"
    )]
    RateLimited {
        cost: u64,
        available: u64,
        per_minute: u64,
        retry_after_secs: u64,
    },
    /// The caller already has its share of requests in the engine (a 429 with `Retry-After`).
    #[error(
        "this caller already has {running} requests running or waiting, as many as one caller may on this server (--inference-per-caller); send the next when one is answered"
    )]
    TooManyRunning { running: usize },
    /// A chat request offering more tools than the server takes.
    #[error(
        "this request offers {count} tools, more than the {limit} one request may offer on this server (--inference-max-tools)"
    )]
    TooManyTools { count: usize, limit: usize },
    /// A chat request whose tool definitions are too large to put in a prompt.
    #[error(
        "this request's tool definitions take {bytes} bytes of JSON, more than the {limit} one request may send on this server (--inference-max-tool-schema-bytes)"
    )]
    ToolSchemasTooLarge { bytes: usize, limit: usize },
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

/// What a client told "busy" should wait: one second lets it poll without hammering, and a
/// queued request on this engine takes from a fraction of a second to tens of them.
const BUSY_RETRY_AFTER_SECS: u64 = 1;

impl IntoResponse for InferenceError {
    fn into_response(self) -> Response {
        let (status, kind, param) = match &self {
            InferenceError::BadRequest { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                param.clone(),
            ),
            InferenceError::KvBudget { .. } | InferenceError::OverBurst { .. } => {
                (StatusCode::BAD_REQUEST, "invalid_request_error", None)
            }
            InferenceError::TooManyTools { .. } | InferenceError::ToolSchemasTooLarge { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("tools".to_owned()),
            ),
            InferenceError::RateLimited { .. } | InferenceError::TooManyRunning { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded", None)
            }
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
                EngineError::Model(_) | EngineError::Io(_) | EngineError::WorkerCrashed => {
                    tracing::error!(error = %e, "inference failed");
                    (StatusCode::INTERNAL_SERVER_ERROR, "server_error", None)
                }
            },
        };
        let retry_after = match &self {
            InferenceError::RateLimited {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            InferenceError::Engine(EngineError::Busy(_))
            | InferenceError::TooManyRunning { .. } => Some(BUSY_RETRY_AFTER_SECS),
            _ => None,
        };
        let body = json!({
            "error": {
                "message": self.to_string(),
                "type": kind,
                "param": param,
                "code": status.as_u16(),
            }
        });
        let mut response = (status, Json(body)).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after(error: InferenceError) -> (StatusCode, Option<String>) {
        let response = error.into_response();
        let header = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status(), header)
    }

    #[test]
    fn refusals_worth_retrying_say_when() {
        assert_eq!(
            retry_after(EngineError::Busy(64).into()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("1".into()))
        );
        let limited = InferenceError::RateLimited {
            cost: 12,
            available: 3,
            per_minute: 60,
            retry_after_secs: 9,
        };
        assert_eq!(
            retry_after(limited),
            (StatusCode::TOO_MANY_REQUESTS, Some("9".into()))
        );
        let too_large = InferenceError::OverBurst { cost: 9, burst: 8 };
        assert_eq!(retry_after(too_large), (StatusCode::BAD_REQUEST, None));
        assert_eq!(
            retry_after(EngineError::WorkerCrashed.into()),
            (StatusCode::INTERNAL_SERVER_ERROR, None)
        );
    }
}
