//! The one place a token's scope is checked, for every route and every socket action: a read-only
//! token changes nothing anywhere, and a run-scoped token acts only through the trajectory API (on
//! its own run, which `trajectory::RunId` holds it to) and the model. Handlers still check who owns
//! what they touch; this check only makes sure no handler can forget a token's scope.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::HostingError;
use crate::app::AppState;
use crate::auth::Viewer;

/// Where an action lands, as far as a token's scope is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The trajectory API (legacy paths address the token's own run) or the model.
    RunOrModel,
    /// Anything else: teams, cards, games, sessions, attempts, ratings, visibility.
    Outside,
}

/// Whether `viewer` may change something that lies in `reach`.
pub fn check_change(viewer: &Viewer, reach: Reach) -> Result<(), HostingError> {
    match viewer {
        Viewer::Token {
            read_only: true, ..
        } => Err(HostingError::ReadOnly),
        Viewer::Token { run: Some(run), .. } if reach == Reach::Outside => {
            Err(HostingError::OutsideRun(run.clone()))
        }
        _ => Ok(()),
    }
}

/// Atropos's paths, bare or under `/runs/{run}`, and the model's.
const TRAJECTORY_PATHS: &[&str] = &[
    "/register",
    "/register-env",
    "/disconnect-env",
    "/wandb_info",
    "/info",
    "/batch",
    "/latest_example",
    "/scored_data",
    "/scored_data_list",
    "/status",
    "/status-env",
    "/reset_data",
    "/trainer-metrics",
];

pub fn reach_of(path: &str) -> Reach {
    let tail = match path.strip_prefix("/runs/") {
        Some(rest) => rest.find('/').map_or("", |cut| &rest[cut..]),
        None => path,
    };
    if TRAJECTORY_PATHS.contains(&tail)
        || path.starts_with("/v1/")
        || path == "/generate"
        || path == "/health_generate"
    {
        Reach::RunOrModel
    } else {
        Reach::Outside
    }
}

/// Whether a request changes state: any method but GET, HEAD and OPTIONS, and Atropos's two GETs
/// that do (`/batch` hands a batch out, `/reset_data` deletes). Asking the model changes nothing
/// (what it may cost is the inference quota's business).
///
/// MCP's calls are all POSTs, but every tool at `/mcp` only reads and checks its caller's reach
/// itself (`crate::mcp_server`), so read-only and run tokens may use it; a tool that changes
/// something would have to call [`check_change`] itself.
pub fn changes_state(method: &Method, path: &str) -> bool {
    if path.starts_with("/v1/") || path == "/generate" || path == crate::mcp_server::PATH {
        return false;
    }
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || path.ends_with("/batch")
        || path.ends_with("/reset_data")
}

pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if !state.auth.enabled || !changes_state(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    // Identified once here and handed to the handler's own `Viewer` extractor.
    let viewer = match crate::auth::identify(req.headers(), &state).await {
        Ok(viewer) => viewer,
        // The handler answers a bad credential in its own error shape.
        Err(_) => return next.run(req).await,
    };
    if let Err(e) = check_change(&viewer, reach_of(req.uri().path())) {
        return e.into_response();
    }
    req.extensions_mut().insert(viewer);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(run: Option<&str>, read_only: bool) -> Viewer {
        Viewer::Token {
            id: 1,
            team_id: 1,
            run: run.map(str::to_string),
            read_only,
            inference: false,
        }
    }

    #[test]
    fn paths_are_sorted_into_the_run_and_the_rest() {
        for path in [
            "/scored_data",
            "/runs/a/batch",
            "/runs/a/register-env",
            "/v1/chat/completions",
            "/generate",
        ] {
            assert_eq!(reach_of(path), Reach::RunOrModel, "{path}");
        }
        for path in [
            "/api/marketplace/cards",
            "/api/chess/games",
            "/runs/a/api/x",
            "/api/runs/a/visibility",
            "/registerx",
        ] {
            assert_eq!(reach_of(path), Reach::Outside, "{path}");
        }
        assert!(changes_state(&Method::GET, "/runs/a/batch"));
        assert!(changes_state(&Method::GET, "/reset_data"));
        assert!(!changes_state(&Method::GET, "/status"));
        assert!(changes_state(&Method::DELETE, "/api/teams/t/tokens/1"));
        assert!(!changes_state(&Method::POST, "/v1/completions"));
        assert!(!changes_state(&Method::POST, "/mcp"));
    }

    #[test]
    fn read_only_tokens_change_nothing_and_run_tokens_stay_in_their_run() {
        assert_eq!(
            check_change(&token(None, true), Reach::RunOrModel),
            Err(HostingError::ReadOnly)
        );
        assert_eq!(
            check_change(&token(Some("r"), true), Reach::Outside),
            Err(HostingError::ReadOnly)
        );
        assert_eq!(
            check_change(&token(Some("r"), false), Reach::Outside),
            Err(HostingError::OutsideRun("r".into()))
        );
        assert!(check_change(&token(Some("r"), false), Reach::RunOrModel).is_ok());
        assert!(check_change(&token(None, false), Reach::Outside).is_ok());
        assert!(check_change(&Viewer::Admin, Reach::Outside).is_ok());
        assert!(check_change(&Viewer::Anonymous, Reach::Outside).is_ok());
    }
}
