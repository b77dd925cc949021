//! A client of the trajectory API as atroposlib's `BaseEnv` speaks it: JSON bodies (gzipped when
//! that pays), a JSON body on the `GET /status-env`, three tries on connection errors and 5xx with
//! randomised exponential backoff, no retry on 4xx (the request itself is wrong).

use std::time::Duration;

use bytes::Bytes;
use lachesis_shared::atropos::{
    BatchResponse, EnvIdentifier, EnvRegistered, RegisterEnv, RegisterEnvResponse,
    RegisterResponse, Registration, ScoredData, ScoredDataResponse, StatusEnv,
};
use lachesis_shared::runs::TrainerReport;
use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::trajectory::{DEFAULT_RUN, valid_run_name};

/// atroposlib compresses bodies of at least this many bytes (`minimum_size=1024`).
pub const GZIP_MIN_BYTES: usize = 1024;
/// atroposlib's `wait_random_exponential(max=10)`.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Longest stretch of an answer body quoted in an error.
const BODY_QUOTE: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid run name {0:?}")]
    InvalidRun(String),
    #[error("{path}: {message}")]
    Transport { path: String, message: String },
    #[error("{path}: HTTP {status}: {body}")]
    Status {
        path: String,
        status: u16,
        body: String,
    },
    #[error("{path}: unexpected answer: {message}")]
    Decode { path: String, message: String },
}

impl ClientError {
    /// Worth another try: the server or the network failed, not the request.
    fn transient(&self) -> bool {
        match self {
            ClientError::Transport { .. } => true,
            ClientError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// `GET /info`: the trainer's batch size and longest sequence (−1 each before it registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ServerInfo {
    pub batch_size: i64,
    pub max_token_len: i64,
}

#[derive(Debug, Clone)]
pub struct TrajectoryClient {
    http: reqwest::Client,
    /// The API root, with `/runs/{run}` appended for runs other than `default`.
    base: String,
    token: Option<String>,
    tries: usize,
    backoff: Duration,
}

impl TrajectoryClient {
    /// `tries` counts the first attempt; `backoff` is the first retry's typical delay.
    pub fn new(
        api: &str,
        run: &str,
        token: Option<String>,
        tries: usize,
        backoff: Duration,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        if !valid_run_name(run) {
            return Err(ClientError::InvalidRun(run.to_string()));
        }
        let root = api.trim_end_matches('/');
        let base = if run == DEFAULT_RUN {
            root.to_string()
        } else {
            format!("{root}/runs/{run}")
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .map_err(|e| ClientError::Transport {
                path: String::new(),
                message: e.to_string(),
            })?;
        Ok(Self {
            http,
            base,
            token,
            tries: tries.max(1),
            backoff,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// `POST /register-env` once; `None` while the trainer has not started.
    pub async fn register_env(
        &self,
        request: &RegisterEnv,
    ) -> Result<Option<EnvRegistered>, ClientError> {
        let answer: RegisterEnvResponse = self.call(Method::POST, "/register-env", request).await?;
        Ok(match answer {
            RegisterEnvResponse::Registered(r) if r.status == "success" => Some(r),
            _ => None,
        })
    }

    pub async fn info(&self) -> Result<ServerInfo, ClientError> {
        self.call(Method::GET, "/info", &()).await
    }

    pub async fn status_env(&self, env_id: i64) -> Result<StatusEnv, ClientError> {
        self.call(Method::GET, "/status-env", &EnvIdentifier { env_id })
            .await
    }

    pub async fn scored_data(&self, group: &ScoredData) -> Result<ScoredDataResponse, ClientError> {
        self.call(Method::POST, "/scored_data", group).await
    }

    pub async fn disconnect_env(&self, env_id: i64) -> Result<serde_json::Value, ClientError> {
        self.call(Method::POST, "/disconnect-env", &EnvIdentifier { env_id })
            .await
    }

    /// `POST /register`, as a trainer starts (atroposlib's `register_trainer`).
    pub async fn register(
        &self,
        registration: &Registration,
    ) -> Result<RegisterResponse, ClientError> {
        self.call(Method::POST, "/register", registration).await
    }

    /// `GET /batch`: `batch` is `None` while no full batch is queued.
    pub async fn batch(&self) -> Result<BatchResponse, ClientError> {
        self.call(Method::GET, "/batch", &()).await
    }

    /// `POST /trainer-metrics` (Lachesis): one step's numbers for the run's dashboard.
    pub async fn trainer_metrics(&self, report: &TrainerReport) -> Result<(), ClientError> {
        self.call(Method::POST, "/trainer-metrics", report).await
    }

    /// One request with retries. `()` as the body means "no body" (plain GETs).
    async fn call<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let json = serde_json::to_vec(body).map_err(|e| ClientError::Decode {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        let payload = (json.as_slice() != b"null").then(|| encode_body(json));
        let mut attempt = 0;
        loop {
            match self.once(&method, path, payload.as_ref()).await {
                Err(e) if e.transient() && attempt + 1 < self.tries => {
                    tracing::debug!(error = %e, attempt, "retrying");
                    tokio::time::sleep(backoff_delay(self.backoff, attempt, rand::random())).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn once<T: DeserializeOwned>(
        &self,
        method: &Method,
        path: &str,
        payload: Option<&(Bytes, bool)>,
    ) -> Result<T, ClientError> {
        let transport = |e: reqwest::Error| ClientError::Transport {
            path: path.to_string(),
            message: error_chain(&e),
        };
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some((body, gzipped)) = payload {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            if *gzipped {
                request = request.header(CONTENT_ENCODING, "gzip");
            }
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let cut = text
                .char_indices()
                .nth(BODY_QUOTE)
                .map_or(text.len(), |(i, _)| i);
            return Err(ClientError::Status {
                path: path.to_string(),
                status: status.as_u16(),
                body: text[..cut].to_string(),
            });
        }
        // 204 answers have no body; they decode as `()`.
        let bytes = if bytes.is_empty() {
            Bytes::from_static(b"null")
        } else {
            bytes
        };
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            path: path.to_string(),
            message: e.to_string(),
        })
    }
}

/// reqwest's own message ("error sending request") hides the cause (refused, timed out): add it.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The body to send and whether it is gzipped: as atroposlib, only bodies of at least 1 KiB are
/// compressed, and only when that makes them smaller.
pub fn encode_body(json: Vec<u8>) -> (Bytes, bool) {
    use std::io::Write;
    if json.len() < GZIP_MIN_BYTES {
        return (Bytes::from(json), false);
    }
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(json.len() / 3),
        flate2::Compression::default(),
    );
    let packed = encoder.write_all(&json).and_then(|()| encoder.finish());
    match packed {
        Ok(packed) if packed.len() < json.len() => (Bytes::from(packed), true),
        _ => (Bytes::from(json), false),
    }
}

/// Delay before retry `attempt` (0-based): `base·2^attempt`, capped at 10 s, scaled by a random
/// factor in [0.5, 1) so that workers that failed together do not retry together.
pub fn backoff_delay(base: Duration, attempt: usize, unit_random: f64) -> Duration {
    let exponential = base
        .saturating_mul(1u32 << attempt.min(16))
        .min(MAX_BACKOFF);
    exponential.mul_f64(0.5 + unit_random.clamp(0.0, 1.0) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn small_bodies_go_plain_and_large_ones_gzipped_when_smaller() {
        let (small, gz) = encode_body(b"{\"a\":1}".to_vec());
        assert!(!gz);
        assert_eq!(&small[..], b"{\"a\":1}");

        let large = serde_json::to_vec(&vec![7; 2000]).unwrap();
        let (body, gz) = encode_body(large.clone());
        assert!(gz && body.len() < large.len());
        let mut unpacked = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked, large);

        // Incompressible bytes (xorshift64 noise: gzip makes these 4096 bytes 4119) are sent as
        // they are, byte for byte, not gzip-wrapped.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 56) as u8
            })
            .collect();
        let (body, gz) = encode_body(noise.clone());
        assert!(!gz, "incompressible bytes are not gzip-wrapped");
        assert_eq!(&body[..], &noise[..]);

        // The 1 KiB threshold: 1023 compressible bytes go plain, 1024 are gzipped.
        let (body, gz) = encode_body(vec![b' '; 1023]);
        assert!(!gz);
        assert_eq!(&body[..], &[b' '; 1023][..]);
        let (_, gz) = encode_body(vec![b' '; 1024]);
        assert!(gz);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff_delay(base, 0, 1.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(base, 1, 0.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(base, 2, 1.0), Duration::from_secs(2));
        assert_eq!(backoff_delay(base, 60, 1.0), MAX_BACKOFF);
    }

    #[test]
    fn runs_other_than_default_live_under_runs() {
        let t = Duration::from_secs(1);
        let c = TrajectoryClient::new("http://h:1/", "default", None, 3, t, t).unwrap();
        assert_eq!(c.base(), "http://h:1");
        let c = TrajectoryClient::new("http://h:1", "exp-2", None, 3, t, t).unwrap();
        assert_eq!(c.base(), "http://h:1/runs/exp-2");
        assert!(TrajectoryClient::new("http://h:1", "../x", None, 3, t, t).is_err());
    }
}
