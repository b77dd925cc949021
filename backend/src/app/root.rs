//! `/` and the static files of the browser app. Atropos clients get their JSON greeting at `/`;
//! browsers (which ask for HTML) get the app.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tower::ServiceExt;
use tower_http::services::ServeDir;

use super::AppState;

pub async fn root(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if let (true, Some(dir)) = (wants_html, &state.static_dir)
        && let Ok(page) = tokio::fs::read(dir.join("index.html")).await
    {
        return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    }
    Json(json!({"message": "AtroposLib API"})).into_response()
}

/// Files of the built frontend. A browser opening one of the app's own addresses (`/runs/x`,
/// `/settings`: a GET asking for HTML, no file extension, outside `/api/`) gets the app, whose
/// router then shows the page; anything else is a JSON 404.
pub async fn static_file(State(state): State<AppState>, req: Request) -> Response {
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            Json(lachesis_shared::error::ErrorBody::message("Not Found")),
        )
            .into_response()
    };
    let Some(dir) = &state.static_dir else {
        return not_found();
    };
    let app_page = is_app_page(&req);
    match ServeDir::new(dir).oneshot(req).await {
        Ok(response) if response.status() != StatusCode::NOT_FOUND => response.into_response(),
        _ if app_page => match tokio::fs::read(dir.join("index.html")).await {
            Ok(page) => {
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
            }
            Err(_) => not_found(),
        },
        _ => not_found(),
    }
}

fn is_app_page(req: &Request) -> bool {
    let path = req.uri().path();
    let last = path.rsplit('/').next().unwrap_or("");
    req.method() == axum::http::Method::GET
        && !path.starts_with("/api/")
        && !last.contains('.')
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
}
