//! Lachesis as an MCP server at `/mcp` (streamable HTTP, through the official SDK `rmcp`): tools
//! that list the environments and the runs a caller may read, read a run's metrics and recent
//! groups and an arena's leaderboard, and start and read evaluations. All but `start_evaluation`
//! only read, so the scope guard lets read-only tokens through; each tool checks the caller's
//! reach the way the dashboards' routes do, and `start_evaluation` refuses read-only, run-scoped
//! and inference-less tokens itself (`crate::evaluations`).
//!
//! Who may call it: an API token (any scope: each one reads its own team's runs, or its one run)
//! or the admin token, sent as `Authorization: Bearer`. A browser session alone is refused, like
//! at the model: a page the user visits must not drive tools with the user's cookie. With accounts
//! off it is open to this machine's own programs, as the rest of the API is (the optional
//! `--api-token` then guards it), behind the loopback guard's `Host` and `Origin` checks.
//!
//! DNS rebinding: with accounts off, the outermost loopback guard refuses a foreign `Host`, and
//! [`require_caller`] also refuses a foreign `Origin` on every method (the guard checks it only on
//! changes). With accounts on, every call needs a bearer token, which a rebinding page cannot
//! send; the server may be reached by any name there, so rmcp's own `Host` allow-list is off.
//!
//! Sessions: none. The server runs stateless (each POST answered on its own), so any instance
//! behind a balancer can answer any call, and no stream stays open to hold a shutdown.

mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::app::{AppError, AppState};
use crate::auth::Viewer;
pub use tools::{LachesisMcp, RunWindowArgs, TOOL_NAMES};

/// Where the server is mounted.
pub const PATH: &str = "/mcp";

/// The `/mcp` routes, behind [`require_caller`].
pub fn routes(state: &AppState) -> Router<AppState> {
    let for_sessions = state.clone();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The API's body limit; no MCP request this server answers comes near it.
        .with_max_request_body_bytes(state.body_limit)
        // `require_caller` and the loopback guard check `Host` and `Origin` (see above).
        .disable_allowed_hosts()
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || Ok(LachesisMcp::new(for_sessions.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service(PATH, service)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            require_caller,
        ))
}

/// An API token or the admin token (anyone on this machine, with accounts off and no
/// `--api-token`); the caller is handed to the tools in the request's extensions.
pub async fn require_caller(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let viewer = match crate::auth::identify(req.headers(), &state).await {
        Ok(viewer) => viewer,
        Err(e) => return with_challenge(e.into_response()),
    };
    match &viewer {
        Viewer::Admin | Viewer::Token { .. } => {}
        // With accounts off, `--api-token` guards the API as `app::require_token` does; a
        // matching one made the caller `Admin` above.
        Viewer::Open if state.auth.admin_token.is_some() => {
            return with_challenge(AppError::NotSignedIn.into_response());
        }
        Viewer::Open => {
            if let Err(e) =
                crate::hosting::loopback::check(&Method::POST, PATH, &origin_of(req.headers()))
            {
                return e.into_response();
            }
        }
        Viewer::User { .. } => {
            return AppError::Forbidden(
                "MCP is called with an API token (Authorization: Bearer), not a browser session",
            )
            .into_response();
        }
        Viewer::Anonymous => return with_challenge(AppError::NotSignedIn.into_response()),
    }
    req.extensions_mut().insert(viewer);
    next.run(req).await
}

/// Only what says where a request comes from, for the loopback rule (which also judges bodies,
/// and rmcp judges those itself).
fn origin_of(headers: &HeaderMap) -> HeaderMap {
    let mut only = HeaderMap::new();
    for name in [header::HOST, header::ORIGIN] {
        if let Some(value) = headers.get(&name) {
            only.insert(name, value.clone());
        }
    }
    if let Some(value) = headers.get("sec-fetch-site") {
        only.insert("sec-fetch-site", value.clone());
    }
    only
}

/// A 401 names the scheme it wants (RFC 6750), so MCP clients know to send a bearer token.
fn with_challenge(mut response: Response) -> Response {
    if response.status() == axum::http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"lachesis\""),
        );
    }
    response
}
