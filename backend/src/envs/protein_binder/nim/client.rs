//! A client for NVIDIA's NIM APIs as the hosted service runs them: a POST that answers at once
//! (200) or queues (202 with a request id, then `GET /v1/status/{id}` until it is done), rate
//! limits (429, honouring `Retry-After`) and transient failures (5xx, dropped connections) retried
//! with backoff, and every call bounded by the episode's time and call budget.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::shapes::{
    ALPHAFOLD2_PATH, MULTIMER_PATH, POLL_SECONDS_HEADER, PROTEINMPNN_PATH, Problem,
    REQUEST_ID_HEADER, RFDIFFUSION_PATH, STATUS_PATH,
};

/// The four tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NimTool {
    Alphafold2,
    Rfdiffusion,
    Proteinmpnn,
    Multimer,
}

impl NimTool {
    pub fn path(self) -> &'static str {
        match self {
            NimTool::Alphafold2 => ALPHAFOLD2_PATH,
            NimTool::Rfdiffusion => RFDIFFUSION_PATH,
            NimTool::Proteinmpnn => PROTEINMPNN_PATH,
            NimTool::Multimer => MULTIMER_PATH,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            NimTool::Alphafold2 => "AlphaFold2",
            NimTool::Rfdiffusion => "RFdiffusion",
            NimTool::Proteinmpnn => "ProteinMPNN",
            NimTool::Multimer => "AlphaFold2-Multimer",
        }
    }
}

/// NVIDIA's hosted service; the default base URL of every tool.
pub const HOSTED_BASE_URL: &str = "https://health.api.nvidia.com";

/// The base URL of each tool, so one may be a self-hosted NIM and another the hosted service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NimEndpoints {
    pub alphafold2: String,
    pub rfdiffusion: String,
    pub proteinmpnn: String,
    pub multimer: String,
}

impl NimEndpoints {
    /// Every tool at one base URL.
    pub fn all_at(base: &str) -> Self {
        let base = base.trim_end_matches('/').to_string();
        Self {
            alphafold2: base.clone(),
            rfdiffusion: base.clone(),
            proteinmpnn: base.clone(),
            multimer: base,
        }
    }

    pub fn base(&self, tool: NimTool) -> &str {
        match tool {
            NimTool::Alphafold2 => &self.alphafold2,
            NimTool::Rfdiffusion => &self.rfdiffusion,
            NimTool::Proteinmpnn => &self.proteinmpnn,
            NimTool::Multimer => &self.multimer,
        }
    }
}

/// How calls are paced and bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct NimLimits {
    /// The longest one tool call may take, queueing and polling included.
    pub call_timeout: Duration,
    /// How long the service may hold each request or poll before answering 202.
    pub poll_seconds: u32,
    /// Retries of a rate-limited or transiently failed request.
    pub max_retries: u32,
    /// The first retry's wait; each later one doubles it, up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The largest answer read; a PDB of a large complex is a few MB.
    pub max_response_bytes: usize,
}

impl Default for NimLimits {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(600),
            poll_seconds: 5,
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_response_bytes: 32 << 20,
        }
    }
}

/// What one episode may still spend: wall time and calls (each hosted call costs credits).
#[derive(Debug, Clone)]
pub struct EpisodeBudget {
    pub deadline: Instant,
    pub calls_left: u32,
}

impl EpisodeBudget {
    pub fn new(time: Duration, calls: u32) -> Self {
        Self {
            deadline: Instant::now() + time,
            calls_left: calls,
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A successful answer and where its time went.
#[derive(Debug, Clone)]
pub struct NimAnswer<T> {
    pub body: T,
    /// Time spent queued (polling after a 202) and backing off between retries.
    pub waited: Duration,
    /// The rest of the call: the service working on a request it held.
    pub worked: Duration,
    pub polls: u32,
    pub retries: u32,
    /// Who computed it, as the local services say (`stand-in`, `local`); NVIDIA's say nothing.
    pub backend: Option<String>,
}

/// Why a call failed; each says what a model (or a person) can do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NimError {
    #[error("{tool} did not answer within {seconds} s")]
    Timeout { tool: &'static str, seconds: u64 },
    #[error("the episode's budget is spent ({0})")]
    BudgetSpent(&'static str),
    #[error("{tool} refused the request ({status}): {detail}")]
    Rejected {
        tool: &'static str,
        status: u16,
        detail: String,
    },
    #[error("{tool} is unavailable after {attempts} attempts ({status}): {detail}")]
    Unavailable {
        tool: &'static str,
        status: u16,
        attempts: u32,
        detail: String,
    },
    #[error("{tool} could not be reached: {reason}")]
    Transport { tool: &'static str, reason: String },
    #[error("{tool} answered something that is not its documented shape: {reason}")]
    Malformed { tool: &'static str, reason: String },
}

/// The client; cheap to clone.
#[derive(Clone)]
pub struct NimClient {
    http: reqwest::Client,
    endpoints: NimEndpoints,
    limits: NimLimits,
    api_key: Option<String>,
}

impl std::fmt::Debug for NimClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NimClient")
            .field("endpoints", &self.endpoints)
            .field("api_key", &self.api_key.as_ref().map(|_| "set"))
            .finish()
    }
}

/// The key is sent only to NVIDIA's own hosts over TLS: a self-hosted NIM needs none, and a base
/// URL someone else chose must never receive it.
pub fn key_may_go_to(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("https://") else {
        return false;
    };
    let host = rest.split(['/', ':', '?', '#']).next().unwrap_or_default();
    host == "health.api.nvidia.com"
        || host == "api.nvcf.nvidia.com"
        || host.ends_with(".api.nvidia.com")
}

/// The header the local services name who computed an answer in.
pub const BACKEND_HEADER: &str = "x-lachesis-backend";

enum Attempt {
    Done(bytes::Bytes, Option<String>),
    Queued(String),
    Retry {
        status: u16,
        after: Option<Duration>,
        detail: String,
    },
}

impl NimClient {
    pub fn new(endpoints: NimEndpoints, limits: NimLimits, api_key: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            http,
            endpoints,
            limits,
            api_key: api_key.filter(|k| !k.trim().is_empty()),
        }
    }

    /// The key from `NVIDIA_API_KEY`, if set.
    pub fn api_key_from_env() -> Option<String> {
        std::env::var("NVIDIA_API_KEY").ok()
    }

    pub fn endpoints(&self) -> &NimEndpoints {
        &self.endpoints
    }

    pub fn limits(&self) -> &NimLimits {
        &self.limits
    }

    /// Calls `tool` with `request` and reads its answer as `T`.
    pub async fn call<R: Serialize + Sync, T: DeserializeOwned>(
        &self,
        tool: NimTool,
        request: &R,
        budget: &mut EpisodeBudget,
    ) -> Result<NimAnswer<T>, NimError> {
        if budget.calls_left == 0 {
            return Err(NimError::BudgetSpent("no tool calls left"));
        }
        if budget.remaining().is_zero() {
            return Err(NimError::BudgetSpent("no time left"));
        }
        budget.calls_left -= 1;
        let started = Instant::now();
        let allowed = self.limits.call_timeout.min(budget.remaining());
        let deadline = started + allowed;
        let timeout = || NimError::Timeout {
            tool: tool.label(),
            seconds: allowed.as_secs().max(1),
        };
        let base = self.endpoints.base(tool).trim_end_matches('/').to_string();
        let mut waited = Duration::ZERO;
        let mut polls = 0;
        let mut retries = 0;
        let mut queued: Option<String> = None;
        let mut queued_at: Option<Instant> = None;
        let mut last_poll = Instant::now();
        loop {
            let attempt = match &queued {
                None => {
                    let url = format!("{base}{}", tool.path());
                    let builder = self.http.post(&url).json(request);
                    self.attempt(tool, &url, builder, deadline).await
                }
                Some(id) => {
                    let url = format!("{base}{STATUS_PATH}/{id}");
                    let builder = self.http.get(&url);
                    self.attempt(tool, &url, builder, deadline).await
                }
            };
            let attempt = match attempt {
                Ok(a) => a,
                Err(NimError::Transport { .. }) if Instant::now() >= deadline => {
                    return Err(timeout());
                }
                Err(NimError::Transport { reason, .. }) if retries < self.limits.max_retries => {
                    Attempt::Retry {
                        status: 0,
                        after: None,
                        detail: reason,
                    }
                }
                Err(e) => return Err(e),
            };
            match attempt {
                Attempt::Done(bytes, answered_by) => {
                    let body = serde_json::from_slice(&bytes).map_err(|e| NimError::Malformed {
                        tool: tool.label(),
                        reason: format!(
                            "{} at line {} column {}",
                            category(&e),
                            e.line(),
                            e.column()
                        ),
                    })?;
                    let total = started.elapsed();
                    waited += queued_at.map_or(Duration::ZERO, |at| at.elapsed());
                    return Ok(NimAnswer {
                        body,
                        waited,
                        worked: total.saturating_sub(waited),
                        polls,
                        retries,
                        backend: answered_by,
                    });
                }
                Attempt::Queued(id) => {
                    polls += 1;
                    if Instant::now() >= deadline {
                        return Err(timeout());
                    }
                    // Each poll is held server-side for up to `poll_seconds`, so polls need no
                    // sleep between them; a service that answers 202 at once is paced here.
                    if polls > 1
                        && queued_at
                            .is_some_and(|_| last_poll.elapsed() < Duration::from_millis(200))
                    {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    queued_at.get_or_insert_with(Instant::now);
                    last_poll = Instant::now();
                    queued = Some(id);
                }
                Attempt::Retry {
                    status,
                    after,
                    detail,
                } => {
                    retries += 1;
                    if retries > self.limits.max_retries {
                        return Err(NimError::Unavailable {
                            tool: tool.label(),
                            status,
                            attempts: retries,
                            detail,
                        });
                    }
                    let backoff = after.unwrap_or_else(|| {
                        let doubled = self
                            .limits
                            .initial_backoff
                            .saturating_mul(1 << (retries - 1).min(16));
                        doubled.min(self.limits.max_backoff)
                    });
                    if Instant::now() + backoff >= deadline {
                        return Err(timeout());
                    }
                    tokio::time::sleep(backoff).await;
                    waited += backoff;
                }
            }
        }
    }

    async fn attempt(
        &self,
        tool: NimTool,
        url: &str,
        builder: reqwest::RequestBuilder,
        deadline: Instant,
    ) -> Result<Attempt, NimError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let poll = u64::from(self.limits.poll_seconds).min(left.as_secs());
        let mut builder = builder
            .header(POLL_SECONDS_HEADER, poll.to_string())
            .timeout(left + Duration::from_millis(50));
        if let Some(key) = self.api_key.as_deref().filter(|_| key_may_go_to(url)) {
            builder = builder.bearer_auth(key);
        }
        let transport = |e: reqwest::Error| NimError::Transport {
            tool: tool.label(),
            reason: if e.is_timeout() {
                "timed out".into()
            } else if e.is_connect() {
                "connection refused or dropped".into()
            } else {
                "the request failed".into()
            },
        };
        let response = builder.send().await.map_err(transport)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = read_capped(response, self.limits.max_response_bytes)
            .await
            .map_err(|reason| NimError::Transport {
                tool: tool.label(),
                reason,
            })?;
        match status {
            StatusCode::OK => Ok(Attempt::Done(body, header(&headers, BACKEND_HEADER))),
            StatusCode::ACCEPTED => match header(&headers, REQUEST_ID_HEADER) {
                Some(id) if valid_request_id(&id) => Ok(Attempt::Queued(id)),
                _ => Err(NimError::Malformed {
                    tool: tool.label(),
                    reason: "a 202 without a usable NVCF-REQID header".into(),
                }),
            },
            StatusCode::TOO_MANY_REQUESTS
            | StatusCode::INTERNAL_SERVER_ERROR
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Ok(Attempt::Retry {
                status: status.as_u16(),
                after: retry_after(&headers),
                detail: problem_detail(&body),
            }),
            other => Err(NimError::Rejected {
                tool: tool.label(),
                status: other.as_u16(),
                detail: problem_detail(&body),
            }),
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_string)
}

/// Request ids go into a URL path: only the characters NVCF's ids use.
fn valid_request_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = header(headers, RETRY_AFTER.as_str())?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.min(120)))
}

/// The detail of a problem body, cut short; never the raw body of something that is not one.
fn problem_detail(body: &[u8]) -> String {
    match serde_json::from_slice::<Problem>(body) {
        Ok(problem) if !problem.detail.is_empty() => cut(&problem.detail, 300),
        Ok(problem) if !problem.title.is_empty() => cut(&problem.title, 300),
        _ => "no details given".into(),
    }
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn category(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "an I/O error",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected fields or types",
        serde_json::error::Category::Eof => "a truncated body",
    }
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<bytes::Bytes, String> {
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(format!("the answer is larger than {cap} bytes"));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| "the answer was cut off".to_string())?
    {
        if body.len() + chunk.len() > cap {
            return Err(format!("the answer is larger than {cap} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_goes_only_to_nvidia_over_tls() {
        assert!(key_may_go_to(
            "https://health.api.nvidia.com/v1/biology/ipd/rfdiffusion/generate"
        ));
        assert!(key_may_go_to(
            "https://api.nvcf.nvidia.com/v2/nvcf/pexec/status/x"
        ));
        assert!(!key_may_go_to("http://health.api.nvidia.com/v1/x"));
        assert!(!key_may_go_to(
            "https://health.api.nvidia.com.evil.example/v1/x"
        ));
        assert!(!key_may_go_to(
            "https://evil.example/?h=health.api.nvidia.com"
        ));
        assert!(!key_may_go_to("http://127.0.0.1:8000/v1/x"));
    }

    #[test]
    fn request_ids_are_checked_before_they_reach_a_path() {
        assert!(valid_request_id("3f2a9c1e-77b0-4b8e-9a52-0d2c5a1f9e10"));
        assert!(!valid_request_id("../../admin"));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id(&"a".repeat(129)));
    }
}
