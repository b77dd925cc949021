//! The error type of the `/api` boundary (accounts, teams, tokens, dashboards, games, cards and the ledger). The body
//! is `lachesis_shared::error::ErrorBody`, which the browser app decodes; database failures are
//! logged once and leave as an opaque 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lachesis_shared::error::{ErrorBody, ErrorDetail};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("sign in first")]
    NotSignedIn,
    #[error("wrong username or password")]
    BadCredentials,
    #[error("too many sign-in attempts; try again in {retry_after_s} s")]
    TooManyAttempts { retry_after_s: u64 },
    #[error("too many accounts created from this address; try again in {retry_after_s} s")]
    TooManySignUps { retry_after_s: u64 },
    #[error("missing or wrong X-CSRF-Token header")]
    Csrf,
    /// Also the answer for things that exist but the caller may not see, so that names of other
    /// teams' runs and teams do not leak.
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    /// The caller's per-minute allowance of `what` is spent.
    #[error("too many {what} from you; try again in {retry_after_s} s")]
    RateLimited {
        what: &'static str,
        retry_after_s: u64,
    },
    /// A bounded resource (the chess agent's searches) is in use to its limit.
    #[error("{what} is busy; try again in {retry_after_s} s")]
    Busy {
        what: &'static str,
        retry_after_s: u64,
    },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("internal error: {0}")]
    Internal(String),
}

impl AppError {
    fn status(&self) -> StatusCode {
        match self {
            AppError::NotSignedIn | AppError::BadCredentials => StatusCode::UNAUTHORIZED,
            AppError::TooManyAttempts { .. }
            | AppError::TooManySignUps { .. }
            | AppError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Csrf | AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Database(e) if crate::db::is_unavailable(e) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Database(_) | AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Maps a unique-key violation to 409 with `what` named; anything else stays a database error.
    pub fn conflict_on_unique(err: sqlx::Error, what: impl Into<String>) -> AppError {
        match &err {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                AppError::Conflict(what.into())
            }
            sqlx::Error::Database(db) if db.is_check_violation() => {
                AppError::Invalid(db.message().to_string())
            }
            _ => AppError::Database(err),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            AppError::Database(err) if crate::db::is_unavailable(err) => {
                tracing::warn!(error = %err, "database unavailable behind /api");
                DATABASE_UNAVAILABLE.to_string()
            }
            AppError::Database(err) => {
                tracing::error!(error = %err, "database error behind /api");
                "internal server error".to_string()
            }
            AppError::Internal(reason) => {
                tracing::error!(%reason, "internal error behind /api");
                "internal server error".to_string()
            }
            other => other.to_string(),
        };
        let mut response = (
            status,
            axum::Json(ErrorBody {
                detail: ErrorDetail::Message(message),
            }),
        )
            .into_response();
        let retry_after_s = match self {
            AppError::TooManyAttempts { retry_after_s }
            | AppError::TooManySignUps { retry_after_s }
            | AppError::RateLimited { retry_after_s, .. }
            | AppError::Busy { retry_after_s, .. } => Some(retry_after_s),
            AppError::Database(e) if crate::db::is_unavailable(&e) => {
                Some(crate::db::UNAVAILABLE_RETRY_AFTER_S)
            }
            _ => None,
        };
        if let Some(retry_after_s) = retry_after_s {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(retry_after_s),
            );
        }
        response
    }
}

/// What a caller is told while Postgres cannot be reached (a 503 with `Retry-After`).
pub const DATABASE_UNAVAILABLE: &str = "the database is unavailable; retry shortly";

/// `axum::Json`, with rejections (bad JSON, wrong fields, wrong content type) answered as
/// [`AppError::Invalid`] in the shared error body instead of axum's plain text.
pub struct Body<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, AppError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(AppError::Invalid(rejection.body_text())),
        }
    }
}
