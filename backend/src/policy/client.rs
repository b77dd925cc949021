//! A pool of HTTP inference servers (vLLM or OpenAI-compatible) behind one `post_json` call.
//!
//! Each request goes to the healthy server with the fewest requests in flight, waits for one of
//! that server's concurrency permits, and is retried with exponential backoff and jitter when the
//! failure is the server's or the network's (connection errors, timeouts, 5xx, 429), never when the
//! request itself was refused (other 4xx). A server that keeps failing cools down for a while: it
//! is only chosen when every other server is cooling down too, so requests are never refused just
//! because all servers had a bad minute.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::Rng;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use serde::Serialize;
use tokio::sync::Semaphore;

use super::PolicyError;
use super::wire::quote;

/// Answers larger than this are refused rather than buffered: a rollout is kilobytes, so this only
/// trips on a misbehaving server.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A `Retry-After` longer than this is ignored in favour of our own backoff, so one server cannot
/// park a request for an hour.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct ServerPoolConfig {
    /// Server addresses, e.g. `http://localhost:9001` or `http://localhost:9001/v1`; a trailing
    /// `/v1` is dropped and each request names its full path (`/generate`, `/v1/completions`).
    pub base_urls: Vec<String>,
    /// Sent as `Authorization: Bearer ...` when set.
    pub api_key: Option<String>,
    /// Limit for one attempt, from sending the request to the last byte of the answer. Waiting for a
    /// concurrency permit does not count: that wait is bounded by the attempts ahead of it.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub max_concurrent_per_server: usize,
}

impl Default for ServerPoolConfig {
    fn default() -> Self {
        Self {
            base_urls: Vec::new(),
            api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 3,
            max_concurrent_per_server: 64,
        }
    }
}

// By hand so the API key never reaches a log line.
impl fmt::Debug for ServerPoolConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerPoolConfig")
            .field("base_urls", &self.base_urls)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("max_concurrent_per_server", &self.max_concurrent_per_server)
            .finish()
    }
}

/// How long to wait between attempts and how to treat a failing server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait before the first retry; it doubles with each further retry.
    pub base: Duration,
    /// The longest wait between two attempts.
    pub max: Duration,
    /// Consecutive failures after which a server cools down.
    pub failures_before_cooldown: u32,
    /// The first cool-down; it doubles with each further failure, up to 8 times as long.
    pub cooldown: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(200),
            max: Duration::from_secs(10),
            failures_before_cooldown: 3,
            cooldown: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait before retry number `retry` (0-based): `base * 2^retry` capped at `max`, then
    /// scaled by a random factor in [0.5, 1] so clients that failed together do not retry together.
    pub fn delay(&self, retry: u32) -> Duration {
        let full = self
            .base
            .saturating_mul(2u32.saturating_pow(retry.min(30)))
            .min(self.max);
        full.mul_f64(rand::rng().random_range(0.5..=1.0))
    }

    fn cooldown_after(&self, failures: u32) -> Option<Duration> {
        let over = failures.checked_sub(self.failures_before_cooldown)?;
        Some(self.cooldown.saturating_mul(1 << over.min(3)))
    }
}

/// What the pool knows about one server, for logs, metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub url: String,
    pub in_flight: usize,
    pub consecutive_failures: u32,
    pub cooling_down: bool,
}

/// Cheap to clone; clones share servers, permits and health.
#[derive(Clone)]
pub struct ServerPool {
    shared: Arc<Shared>,
    backoff: Backoff,
}

struct Shared {
    http: reqwest::Client,
    servers: Vec<Server>,
    api_key: Option<String>,
    timeout: Duration,
    max_retries: u32,
    /// Rotates the starting point of the scan so ties spread over servers.
    next: AtomicUsize,
}

struct Server {
    root: String,
    permits: Semaphore,
    /// Requests waiting for a permit or running on this server.
    in_flight: AtomicUsize,
    /// A std mutex: held for a few instructions, never across an `.await`.
    health: Mutex<Health>,
}

#[derive(Default)]
struct Health {
    consecutive_failures: u32,
    cooling_until: Option<Instant>,
}

impl Server {
    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        // A poisoned lock only means another thread panicked mid-update of two plain numbers.
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record_success(&self) {
        *self.health() = Health::default();
    }

    fn record_failure(&self, backoff: &Backoff) {
        let mut health = self.health();
        health.consecutive_failures = health.consecutive_failures.saturating_add(1);
        if let Some(pause) = backoff.cooldown_after(health.consecutive_failures) {
            health.cooling_until = Some(Instant::now() + pause);
        }
    }

    /// How much longer this server cools down, zero when it is healthy.
    fn cooling_left(&self, now: Instant) -> Duration {
        self.health()
            .cooling_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }
}

/// Counts a request against its server for as long as it lives, cancellation included.
struct InFlight<'a>(&'a Server);

impl<'a> InFlight<'a> {
    fn enter(server: &'a Server) -> Self {
        server.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(server)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One failed attempt and what it means for the next.
struct Failure {
    error: PolicyError,
    /// Worth another attempt (the request may succeed elsewhere or later).
    retryable: bool,
    retry_after: Option<Duration>,
}

/// `http://host:8000/v1/` → `http://host:8000`: requests carry full paths, as atroposlib's
/// `base_url.replace('/v1', '')` does for `/generate`.
pub fn server_root(base_url: &str) -> String {
    let trimmed = base_url.trim().trim_end_matches('/');
    trimmed
        .strip_suffix("/v1")
        .unwrap_or(trimmed)
        .trim_end_matches('/')
        .to_owned()
}

impl ServerPool {
    pub fn new(config: ServerPoolConfig) -> Result<Self, PolicyError> {
        let invalid =
            |why: String| PolicyError::Server(format!("server pool configuration: {why}"));
        if config.base_urls.is_empty() {
            return Err(invalid("no server URLs".into()));
        }
        if config.max_concurrent_per_server == 0 {
            return Err(invalid(
                "max_concurrent_per_server must be at least 1".into(),
            ));
        }
        if config.timeout.is_zero() {
            return Err(invalid("the timeout must be positive".into()));
        }
        let mut servers = Vec::with_capacity(config.base_urls.len());
        for url in &config.base_urls {
            let root = server_root(url);
            match reqwest::Url::parse(&root) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                _ => return Err(invalid(format!("{url:?} is not an http(s) URL"))),
            }
            servers.push(Server {
                root,
                permits: Semaphore::new(config.max_concurrent_per_server),
                in_flight: AtomicUsize::new(0),
                health: Mutex::new(Health::default()),
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| invalid(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                http,
                servers,
                api_key: config.api_key,
                timeout: config.timeout,
                max_retries: config.max_retries,
                next: AtomicUsize::new(0),
            }),
            backoff: Backoff::default(),
        })
    }

    /// Replaces the default backoff and cool-down timings (tests use short ones).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn status(&self) -> Vec<ServerStatus> {
        let now = Instant::now();
        self.shared
            .servers
            .iter()
            .map(|s| {
                // Read once, then release: `cooling_left` takes the same (non-reentrant) lock.
                let consecutive_failures = s.health().consecutive_failures;
                ServerStatus {
                    url: s.root.clone(),
                    in_flight: s.in_flight.load(Ordering::SeqCst),
                    consecutive_failures,
                    cooling_down: !s.cooling_left(now).is_zero(),
                }
            })
            .collect()
    }

    /// POSTs `body` as JSON to `path` (e.g. `/generate`) on one server and returns the body of its
    /// 2xx answer, retrying elsewhere or later as the module documentation describes.
    pub async fn post_json<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<Bytes, PolicyError> {
        let payload = Bytes::from(
            serde_json::to_vec(body)
                .map_err(|e| PolicyError::Server(format!("encoding the request: {e}")))?,
        );
        let mut retry = 0;
        let mut avoid = None;
        loop {
            let index = self.pick(avoid);
            let server = &self.shared.servers[index];
            let failure = match self.attempt(server, path, payload.clone()).await {
                Ok(answer) => {
                    server.record_success();
                    return Ok(answer);
                }
                Err(failure) => failure,
            };
            if !failure.retryable {
                return Err(failure.error);
            }
            // Only failures that say something about the server count against its health; a 4xx
            // is the request's fault and returned above.
            server.record_failure(&self.backoff);
            if retry >= self.shared.max_retries {
                return Err(failure.error);
            }
            let wait = self
                .backoff
                .delay(retry)
                .max(failure.retry_after.unwrap_or_default().min(MAX_RETRY_AFTER));
            tracing::warn!(
                server = %server.root, path, retry = retry + 1, ?wait, error = %failure.error,
                "inference request failed; retrying"
            );
            tokio::time::sleep(wait).await;
            retry += 1;
            avoid = Some(index);
        }
    }

    /// The server for the next attempt: not cooling down, then not the one that just failed, then
    /// the fewest requests in flight; among cooling servers the one that recovers first. Ties go
    /// to the server after the last one picked. Counts are read without a lock, so two requests
    /// picking at the same instant on different threads may both see the same count: balancing is
    /// approximate by a request or two, which costs nothing worth a global lock.
    fn pick(&self, avoid: Option<usize>) -> usize {
        let servers = &self.shared.servers;
        let count = servers.len();
        let start = self.shared.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        (0..count)
            .map(|k| (start.wrapping_add(k)) % count)
            .min_by_key(|&i| {
                let cooling = servers[i].cooling_left(now);
                (
                    !cooling.is_zero(),
                    avoid == Some(i) && count > 1,
                    cooling,
                    servers[i].in_flight.load(Ordering::SeqCst),
                )
            })
            .unwrap_or(0)
    }

    async fn attempt(&self, server: &Server, path: &str, payload: Bytes) -> Result<Bytes, Failure> {
        let _counted = InFlight::enter(server);
        // The semaphore lives as long as the pool and is never closed.
        let _permit = server.permits.acquire().await.map_err(|_| Failure {
            error: PolicyError::Server("the server pool is shutting down".into()),
            retryable: false,
            retry_after: None,
        })?;
        let url = format!("{}{}", server.root, path);
        let timeout = self.shared.timeout;
        match tokio::time::timeout(timeout, self.send(&url, payload)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure {
                error: PolicyError::Timeout(timeout),
                retryable: true,
                retry_after: None,
            }),
        }
    }

    async fn send(&self, url: &str, payload: Bytes) -> Result<Bytes, Failure> {
        let mut request = self
            .shared
            .http
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(payload);
        if let Some(key) = &self.shared.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await.map_err(|e| transport(url, e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| transport(url, e))? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(Failure {
                    error: PolicyError::MalformedResponse(format!(
                        "{url} answered with more than {MAX_RESPONSE_BYTES} bytes"
                    )),
                    retryable: false,
                    retry_after: None,
                });
            }
            body.extend_from_slice(&chunk);
        }
        if status.is_success() {
            return Ok(Bytes::from(body));
        }
        let text = String::from_utf8_lossy(&body);
        Err(Failure {
            error: PolicyError::Server(format!("{url} answered {status}: {}", quote(&text))),
            retryable: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
            retry_after,
        })
    }
}

/// A transport failure: worth retrying unless the request could not even be built.
fn transport(url: &str, e: reqwest::Error) -> Failure {
    Failure {
        retryable: !e.is_builder(),
        error: PolicyError::Server(format!("{url}: {}", error_chain(&e.without_url()))),
        retry_after: None,
    }
}

/// reqwest's own message is generic ("error sending request"); the cause ("connection refused")
/// is further down the source chain. The URL is left out: the caller's message names it once.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
