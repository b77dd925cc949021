//! `GET /api/system/tasks`: the supervised tasks for the dashboard's "Server tasks" panel.
//!
//! Who may read it: task names and (redacted) error texts say how the server is doing, not what
//! anyone owns, so any signed-in caller (a user or a token) may; nobody anonymous. With accounts
//! off the server only binds loopback, and the caller must be on this machine too (a reverse proxy
//! on the same host still is: it is then the operator's to restrict).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::system::TaskStatus;

use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/system/tasks", get(tasks))
}

async fn tasks(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    viewer: Viewer,
) -> Result<Json<Vec<TaskStatus>>, AppError> {
    match viewer {
        Viewer::Anonymous => Err(AppError::NotSignedIn),
        Viewer::Open if !peer.ip().is_loopback() => Err(AppError::Forbidden(
            "with accounts off, the server's tasks are shown on this machine only",
        )),
        _ => Ok(Json(state.tasks.snapshot())),
    }
}
