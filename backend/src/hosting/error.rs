//! The one error type of the hosting guards (they answer before any route does), in the same body
//! shape as every other route (`{"detail": "..."}`), which the browser app and atroposlib read.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lachesis_shared::error::{ErrorBody, ErrorDetail};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostingError {
    #[error(
        "this server answers only to loopback names (localhost, 127.0.0.1, [::1]) while accounts \
         are off; Host {0:?} is refused (a web page may be rebinding its name to this machine)"
    )]
    ForeignHost(String),
    #[error(
        "a request from another site cannot change anything here while accounts are off \
         (Origin {0:?})"
    )]
    CrossSite(String),
    #[error("a request body must be JSON: send Content-Type: application/json")]
    NotJson,
    #[error("a read-only token cannot change anything")]
    ReadOnly,
    #[error("this token is scoped to run {0:?} and cannot act outside it")]
    OutsideRun(String),
    #[error("too many open connections from this address (at most {0})")]
    TooManyConnections(usize),
    #[error("the request took longer than {0} s")]
    Timeout(u64),
    /// The instance is draining after SIGTERM: a new request, or one still in flight at the
    /// shutdown deadline (whose work was not done).
    #[error("this server is shutting down; retry shortly (on another instance if there is one)")]
    ShuttingDown,
}

impl HostingError {
    fn status(&self) -> StatusCode {
        match self {
            HostingError::ForeignHost(_)
            | HostingError::CrossSite(_)
            | HostingError::ReadOnly
            | HostingError::OutsideRun(_) => StatusCode::FORBIDDEN,
            HostingError::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HostingError::TooManyConnections(_) => StatusCode::TOO_MANY_REQUESTS,
            HostingError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            HostingError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for HostingError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry = matches!(
            self,
            HostingError::TooManyConnections(_) | HostingError::ShuttingDown
        );
        let mut response = (
            status,
            axum::Json(ErrorBody {
                detail: ErrorDetail::Message(self.to_string()),
            }),
        )
            .into_response();
        if retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}
