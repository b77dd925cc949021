//! The one error type of the trajectory API boundary. Every variant answers with the FastAPI-shaped
//! JSON body from `lachesis_shared::error`, so Atropos clients and our frontend decode it alike.
//! Database and internal failures are logged once here and leave the server as an opaque 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lachesis_shared::error::{ErrorBody, ErrorDetail, FieldIssue};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("invalid request body")]
    InvalidBody(Vec<FieldIssue>),
    #[error("Invalid gzip payload")]
    InvalidGzip,
    #[error("request body larger than {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("run names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")]
    InvalidRunName,
    #[error("environment {0} is not registered with this run")]
    UnknownEnv(i64),
    #[error("a valid API token is required (Authorization: Bearer ...)")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("a stored group cannot be decoded: {0}")]
    CorruptPayload(String),
}

impl ApiError {
    /// A single field problem, located under `body`.
    pub fn field(kind: &str, loc: &[serde_json::Value], msg: impl Into<String>) -> Self {
        let mut full = vec![serde_json::Value::from("body")];
        full.extend_from_slice(loc);
        ApiError::InvalidBody(vec![FieldIssue {
            kind: kind.into(),
            loc: full,
            msg: msg.into(),
        }])
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidBody(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::InvalidGzip | ApiError::InvalidRunName => StatusCode::BAD_REQUEST,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnknownEnv(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Database(e) if crate::db::is_unavailable(e) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Database(_) | ApiError::CorruptPayload(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// Access decisions made by `crate::auth`, in this boundary's terms.
impl From<crate::app::AppError> for ApiError {
    fn from(err: crate::app::AppError) -> Self {
        use crate::app::AppError;
        match err {
            AppError::Database(e) => ApiError::Database(e),
            AppError::NotFound(what) => ApiError::NotFound(what.to_string()),
            AppError::Forbidden(why) => ApiError::Forbidden(why.to_string()),
            AppError::Csrf => ApiError::Forbidden(err.to_string()),
            AppError::Internal(reason) => ApiError::CorruptPayload(reason),
            _ => ApiError::Unauthorized,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let detail = match self {
            ApiError::InvalidBody(issues) => ErrorDetail::Fields(issues),
            ApiError::Database(err) if crate::db::is_unavailable(&err) => {
                tracing::warn!(error = %err, "database unavailable in the trajectory API");
                ErrorDetail::Message(crate::app::error::DATABASE_UNAVAILABLE.into())
            }
            ApiError::Database(err) => {
                tracing::error!(error = %err, "database error in the trajectory API");
                ErrorDetail::Message("internal server error".into())
            }
            ApiError::CorruptPayload(reason) => {
                tracing::error!(%reason, "undecodable group payload in the database");
                ErrorDetail::Message("internal server error".into())
            }
            other => ErrorDetail::Message(other.to_string()),
        };
        let mut response = (status, axum::Json(ErrorBody { detail })).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Atropos clients retry a 503; this says when.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(crate::db::UNAVAILABLE_RETRY_AFTER_S),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
