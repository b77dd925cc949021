//! `lachesis nim serve`: the four binder-design tools behind NVIDIA NIM's own protocol, so the
//! protein environment runs end to end on a machine without GPUs. ProteinMPNN is the real model
//! (our candle port, with the published weights); AlphaFold2, RFdiffusion and AlphaFold2-Multimer
//! are geometric stand-ins that predict nothing: their answers say so in a `REMARK` of every PDB
//! they write and in the `x-lachesis-backend` header, and the browser labels them.

mod jobs;
mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::{Value, json};

use self::jobs::{Answer, Jobs};
pub use self::tools::{BACKEND_HEADER, LocalTools, default_weights};
use crate::envs::protein_binder::nim::client::NimTool;
use crate::envs::protein_binder::nim::shapes::{
    POLL_SECONDS_HEADER, Problem, READY_PATH, REQUEST_ID_HEADER, STATUS_HEADER,
};

/// What the local services allow and how they behave.
#[derive(Debug, Clone, clap::Args)]
pub struct NimServeOptions {
    /// The least time a stand-in takes, standing for a GPU's; with callers that hold requests
    /// for less than this, every stand-in answer goes through 202 and polling.
    #[arg(long = "stand-in-latency-ms", default_value_t = 0)]
    pub stand_in_latency_ms: u64,
    /// Unfinished requests held at once; more are answered 429.
    #[arg(long = "nim-max-pending", default_value_t = 16)]
    pub max_pending: usize,
    /// The largest request body (a target PDB and its options).
    #[arg(long = "nim-max-body-bytes", default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// The longest a caller may ask a request or poll to be held (`NVCF-POLL-SECONDS`).
    #[arg(long = "nim-max-poll-seconds", default_value_t = 30)]
    pub max_poll_seconds: u64,
    /// Fault drill: the first N requests to each tool are answered 503.
    #[arg(long = "nim-fail-first", default_value_t = 0)]
    pub fail_first: u32,
    /// ProteinMPNN's weights (`scripts/ensure-proteinmpnn.sh` puts them at the default).
    #[arg(long = "proteinmpnn-weights", env = "LACHESIS_PROTEINMPNN_WEIGHTS")]
    pub proteinmpnn_weights: Option<PathBuf>,
}

impl Default for NimServeOptions {
    fn default() -> Self {
        Self {
            stand_in_latency_ms: 0,
            max_pending: 16,
            max_body_bytes: 4 << 20,
            max_poll_seconds: 30,
            fail_first: 0,
            proteinmpnn_weights: None,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct NimServeArgs {
    /// Where to listen; loopback unless you put it behind something that authenticates.
    #[arg(long, default_value = "127.0.0.1:8010")]
    pub bind: SocketAddr,
    #[command(flatten)]
    pub options: NimServeOptions,
}

struct NimState {
    tools: Arc<LocalTools>,
    jobs: Jobs,
    options: NimServeOptions,
    failures_left: [AtomicU32; 4],
}

/// The router serving the four tools, the status endpoint and readiness.
pub fn router(options: NimServeOptions) -> Router {
    let state = Arc::new(NimState {
        tools: Arc::new(LocalTools::new(options.proteinmpnn_weights.clone())),
        jobs: Jobs::new(options.max_pending, Duration::from_secs(600)),
        failures_left: std::array::from_fn(|_| AtomicU32::new(options.fail_first)),
        options: options.clone(),
    });
    Router::new()
        .route(
            NimTool::Alphafold2.path(),
            tool_route(NimTool::Alphafold2, LocalTools::alphafold2),
        )
        .route(
            NimTool::Rfdiffusion.path(),
            tool_route(NimTool::Rfdiffusion, LocalTools::rfdiffusion),
        )
        .route(
            NimTool::Proteinmpnn.path(),
            tool_route(NimTool::Proteinmpnn, LocalTools::proteinmpnn),
        )
        .route(
            NimTool::Multimer.path(),
            tool_route(NimTool::Multimer, LocalTools::multimer),
        )
        .route("/v1/status/{id}", get(status))
        .route(
            READY_PATH,
            get(|| async { axum::Json(json!({"status": "ready"})) }),
        )
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .with_state(state)
}

/// How a tool checks a request and makes its work.
type Prepare = fn(&Arc<LocalTools>, Value) -> Result<tools::Work, tools::Refusal>;

fn tool_route(tool: NimTool, prepare: Prepare) -> MethodRouter<Arc<NimState>> {
    post(
        move |State(state): State<Arc<NimState>>, headers: HeaderMap, body: Bytes| {
            submit(state, tool, headers, body, prepare)
        },
    )
}

/// Serves the tools on `bind` until the process ends.
pub async fn serve(args: NimServeArgs) -> anyhow::Result<()> {
    if !args.bind.ip().is_loopback() {
        tracing::warn!(bind = %args.bind, "the NIM stand-ins have no authentication; anyone who reaches this address can use them");
    }
    let listener = tokio::net::TcpListener::bind(args.bind).await?;
    println!("NIM services on http://{}", listener.local_addr()?);
    axum::serve(listener, router(args.options)).await?;
    Ok(())
}

/// Starts the services on an ephemeral loopback port inside this process; the base URL.
pub async fn spawn_local(options: NimServeOptions) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router(options)).await {
            tracing::error!(%error, "the local NIM services stopped");
        }
    });
    Ok(format!("http://{addr}"))
}

pub(crate) fn problem(status: StatusCode, detail: impl Into<String>) -> (StatusCode, Problem) {
    (
        status,
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: detail.into(),
            request_id: None,
        },
    )
}

fn problem_response((status, problem): (StatusCode, Problem), headers: HeaderMap) -> Response {
    (status, headers, axum::Json(problem)).into_response()
}

fn hold(state: &NimState, headers: &HeaderMap) -> Duration {
    let asked = headers
        .get(POLL_SECONDS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(state.options.max_poll_seconds);
    Duration::from_secs(asked.min(state.options.max_poll_seconds))
}

fn answer_response(answer: Answer, backend: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(BACKEND_HEADER, HeaderValue::from_static(backend));
    match answer {
        Answer::Ready(Ok(body)) => {
            headers.insert(STATUS_HEADER, HeaderValue::from_static("fulfilled"));
            (StatusCode::OK, headers, axum::Json(body)).into_response()
        }
        Answer::Ready(Err(problem)) => {
            headers.insert(STATUS_HEADER, HeaderValue::from_static("errored"));
            problem_response(problem, headers)
        }
        Answer::Pending(id) => {
            if let Ok(value) = HeaderValue::from_str(&id) {
                headers.insert(REQUEST_ID_HEADER, value);
            }
            headers.insert(
                STATUS_HEADER,
                HeaderValue::from_static("pending-evaluation"),
            );
            (StatusCode::ACCEPTED, headers).into_response()
        }
    }
}

/// Runs one tool's request as a job and answers as NVCF does.
async fn submit(
    state: Arc<NimState>,
    tool: NimTool,
    headers: HeaderMap,
    body: Bytes,
    work: Prepare,
) -> Response {
    let backend = tools::backend_of(tool);
    let index = tool as usize;
    let drill = state.failures_left[index]
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if drill {
        let mut headers = HeaderMap::new();
        headers.insert(BACKEND_HEADER, HeaderValue::from_static(backend));
        return problem_response(
            problem(StatusCode::SERVICE_UNAVAILABLE, "fault drill: try again"),
            headers,
        );
    }
    // JSON only: a web page cannot send that cross-origin without a preflight this server never
    // grants, so a page in the operator's browser cannot make the services work for it.
    let json_body = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json_body {
        return problem_response(
            problem(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as application/json",
            ),
            HeaderMap::new(),
        );
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => {
            return problem_response(
                problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!(
                        "the body is not JSON (line {}, column {})",
                        e.line(),
                        e.column()
                    ),
                ),
                HeaderMap::new(),
            );
        }
    };
    let latency = if backend == tools::STAND_IN {
        Duration::from_millis(state.options.stand_in_latency_ms)
    } else {
        Duration::ZERO
    };
    // Checks run now, so a bad request is refused at once, as the hosted service does.
    let work = match work(&state.tools, request) {
        Ok(work) => work,
        Err(refusal) => return problem_response(refusal, HeaderMap::new()),
    };
    let started = state.jobs.start(backend, async move {
        tokio::time::sleep(latency).await;
        tokio::task::spawn_blocking(work).await.unwrap_or_else(|_| {
            Err(problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the tool failed unexpectedly",
            ))
        })
    });
    let id = match started {
        Ok(id) => id,
        Err(limit) => {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_static("1"));
            return problem_response(
                problem(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("{limit} requests are already running; retry shortly"),
                ),
                headers,
            );
        }
    };
    match state.jobs.wait(&id, hold(&state, &headers)).await {
        Some((answer, backend)) => answer_response(answer, backend),
        None => answer_response(Answer::Pending(id), backend),
    }
}

async fn status(
    State(state): State<Arc<NimState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match state.jobs.wait(&id, hold(&state, &headers)).await {
        Some((answer, backend)) => answer_response(answer, backend),
        None => problem_response(
            problem(
                StatusCode::NOT_FOUND,
                "no such request (finished answers are fetched once)",
            ),
            HeaderMap::new(),
        ),
    }
}
