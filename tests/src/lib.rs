//! Helpers for the end-to-end suites: fresh databases, the real server in-process on port 0 or as a
//! child process (for crash tests), and a small Atropos client.
//!
//! The suites need a Postgres they may create databases in: `LACHESIS_TEST_DATABASE_URL` (an admin
//! URL, e.g. `postgres://postgres@127.0.0.1:55432/postgres`). `make test` starts one and sets it.

pub mod browser;
pub mod chain_world;
pub mod drills;
pub mod listener;
pub mod private_postgres;
pub mod python;
pub mod scripted;

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use lachesis::config::ServeConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the suites through `make test`, which starts Postgres and sets it")
    })
}

/// Creates an empty database for one test and returns its URL.
pub async fn fresh_database() -> String {
    let admin = required_env("LACHESIS_TEST_DATABASE_URL");
    let name = format!("lachesis_test_{:016x}", rand_u64());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .expect("connect to the test Postgres");
    sqlx::Executor::execute(&mut conn, format!("CREATE DATABASE {name}").as_str())
        .await
        .expect("create a test database");
    match admin.rfind('/') {
        Some(cut) => format!("{}/{}", &admin[..cut], name),
        None => panic!("LACHESIS_TEST_DATABASE_URL has no database part: {admin}"),
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}

pub fn config_for(database_url: &str) -> ServeConfig {
    ServeConfig {
        static_dir: std::env::var_os("LACHESIS_STATIC_DIR").map(PathBuf::from),
        db_max_connections: 16,
        ..ServeConfig::local(database_url)
    }
}

/// The embedded model's GGUF, fetched by the test command (`scripts/ensure-model.sh`).
pub fn model_path() -> PathBuf {
    let path = std::env::var_os("LACHESIS_MODEL")
        .map(PathBuf::from)
        .expect("set LACHESIS_MODEL to the SmolLM2 GGUF (the README's test command fetches it)");
    assert!(
        path.exists(),
        "LACHESIS_MODEL {} does not exist",
        path.display()
    );
    path
}

/// The real app, serving on a free port inside this test process.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub database_url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    pub async fn spawn() -> Self {
        let database_url = fresh_database().await;
        Self::spawn_with(config_for(&database_url)).await
    }

    pub async fn spawn_with(config: ServeConfig) -> Self {
        let server = lachesis::app::Server::build(&config)
            .await
            .expect("build the server");
        let base = format!("http://{}", server.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(server.run_until(async move {
            let _ = rx.await;
        }));
        Self {
            base,
            client: client(),
            database_url: config.database_url,
            shutdown: Some(tx),
            served: Some(served),
        }
    }

    /// Stops the server as a signal does and waits until it has drained (dropping a `TestApp`
    /// only signals).
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(served) = self.served.take() {
            served
                .await
                .expect("the server's task")
                .expect("the server drained");
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str) -> Value {
        let resp = self.client.get(self.url(path)).send().await.expect("GET");
        expect_ok(resp).await
    }

    /// The body of a successful GET as text (`/metrics`, exports).
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self.client.get(self.url(path)).send().await.expect("GET");
        let status = resp.status();
        let text = resp.text().await.expect("a body");
        assert!(
            status.is_success(),
            "expected success, got {status}: {text}"
        );
        text
    }

    pub async fn post(&self, path: &str, body: &Value) -> Value {
        let resp = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST");
        expect_ok(resp).await
    }

    /// Any request as `who`, with an optional JSON body: the status and the body (JSON, or the
    /// text as a JSON string, or null when empty).
    pub async fn call(
        &self,
        who: Caller<'_>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (reqwest::StatusCode, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = who
            .authorize(request)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        let body = match text.is_empty() {
            true => Value::Null,
            false => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        };
        (status, body)
    }

    /// `GET` with a JSON body, as atroposlib calls `/status-env`.
    pub async fn get_with_body(&self, path: &str, body: &Value) -> Value {
        let resp = self
            .client
            .get(self.url(path))
            .json(body)
            .send()
            .await
            .expect("GET with body");
        expect_ok(resp).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client")
}

async fn expect_ok(resp: reqwest::Response) -> Value {
    let status = resp.status();
    let text = resp.text().await.expect("a body");
    assert!(
        status.is_success(),
        "expected success, got {status}: {text}"
    );
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The trainer's registration, as atroposlib's example trainer sends it.
pub fn registration(batch_size: i64) -> Value {
    json!({
        "wandb_group": "group", "wandb_project": "project", "batch_size": batch_size,
        "max_token_len": 2048, "checkpoint_dir": "/tmp/ckpt", "save_checkpoint_interval": 10,
        "starting_step": 0, "num_steps": 100,
    })
}

pub fn env_registration(name: &str, group_size: i64) -> Value {
    json!({"max_token_length": 2048, "desired_name": name, "weight": 1.0, "group_size": group_size})
}

/// A scored group of `n` sequences whose first token is `marker`, so tests can follow it.
pub fn group(marker: i64, n: usize, env_id: Option<i64>) -> Value {
    let tokens: Vec<Vec<i64>> = (0..n).map(|i| vec![marker, i as i64, 7, 8]).collect();
    let masks: Vec<Vec<i64>> = (0..n).map(|i| vec![-100, i as i64, 7, 8]).collect();
    let scores: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
    json!({"tokens": tokens, "masks": masks, "scores": scores, "env_id": env_id})
}

/// The markers (first token of the first sequence) of the groups in a `/batch` answer.
pub fn markers(batch: &Value) -> Vec<i64> {
    batch["batch"]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .map(|g| g["tokens"][0][0].as_i64().expect("a marker"))
                .collect()
        })
        .unwrap_or_default()
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).expect("in-memory write");
    enc.finish().expect("in-memory write")
}

/// Who sends a request: a signed-in browser (its cookie and CSRF token, as [`sign_up`] returns
/// them), a bearer token, or nobody.
#[derive(Clone, Copy)]
pub enum Caller<'a> {
    Session(&'a (String, String)),
    Token(&'a str),
    Nobody,
}

impl Caller<'_> {
    /// `request` with this caller's credentials: cookie and CSRF token, or bearer token.
    pub fn authorize(self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Caller::Session((cookie, csrf)) => request
                .header("cookie", cookie)
                .header("x-csrf-token", csrf),
            Caller::Token(token) => request.bearer_auth(token),
            Caller::Nobody => request,
        }
    }
}

impl TestApp {
    /// A new API token of `team`, made by `owner`'s session with `body`'s settings.
    pub async fn new_token(&self, owner: &(String, String), team: &str, body: Value) -> String {
        let (status, created) = self
            .call(
                Caller::Session(owner),
                reqwest::Method::POST,
                &format!("/api/teams/{team}/tokens"),
                Some(body),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{created}");
        created["token"].as_str().expect("a token").to_string()
    }
}

/// Signs a browser up through `path` (`/api/auth/setup` for the first owner,
/// `/api/auth/register` after) with a new team; returns its session cookie and CSRF token.
pub async fn sign_up(app: &TestApp, path: &str, user: &str, team: &str) -> (String, String) {
    let response = app
        .client
        .post(app.url(path))
        .json(&json!({"username": user, "password": "a long enough password", "team": team}))
        .send()
        .await
        .expect("POST sign-up");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .expect("an ASCII cookie")
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    let me: Value = response.json().await.expect("the signed-in user");
    (
        cookie,
        me["csrf_token"].as_str().unwrap_or_default().to_string(),
    )
}

/// The `lachesis` binary built by `make test` (or `cargo build`).
pub fn lachesis_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("LACHESIS_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug/lachesis");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p lachesis-backend` (make test does)",
        path.display()
    );
    path
}

/// A server on a fresh database with accounts on.
pub async fn accounts_app() -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    TestApp::spawn_with(config).await
}

/// A new chess game of `who`'s, the agent playing `agent_side` (`"white"` or `"black"`).
pub async fn start_chess_game(
    app: &TestApp,
    who: &(String, String),
    agent_side: &str,
) -> lachesis_shared::chess::GameView {
    let (status, created) = app
        .call(
            Caller::Session(who),
            reqwest::Method::POST,
            "/api/chess/games",
            Some(json!({ "agent_side": agent_side })),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{created}");
    serde_json::from_value(created).expect("a GameView")
}

/// `lachesis train run` against the server at `api`, syncing by `sync`: a rank-8 LoRA of the test
/// model at learning rate `lr`, `steps` steps of batches of 4 sequences, its checkpoints in
/// `checkpoints`. Callers add their own arguments (`--vllm-url`, a token) before running it.
pub fn trainer_command(
    api: &str,
    sync: &str,
    lr: &str,
    steps: usize,
    checkpoints: &std::path::Path,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(lachesis_bin());
    command
        .args(["train", "run", "--api", api, "--sync", sync])
        .arg("--model")
        .arg(model_path())
        .args([
            "--lora-rank",
            "8",
            "--lr",
            lr,
            "--steps",
            &steps.to_string(),
        ])
        .args([
            "--batch-size",
            "4",
            "--micro-batch",
            "4",
            "--max-token-len",
            "512",
        ])
        .arg("--checkpoint-dir")
        .arg(checkpoints)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// The server as a child process, for tests that kill it.
pub struct ServerProcess {
    pub child: tokio::process::Child,
    pub base: String,
}

impl ServerProcess {
    pub async fn start(database_url: &str) -> anyhow::Result<Self> {
        Self::start_with(database_url, &[]).await
    }

    /// `lachesis serve` on a free loopback port with `extra` flags after the defaults.
    pub async fn start_with(database_url: &str, extra: &[&str]) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(lachesis_bin())
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env("DATABASE_URL", database_url)
            .env_remove("LACHESIS_API_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting lachesis serve")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("the server did not announce its address in 60 s")??
            .context("the server exited before serving")?;
        let Some(base) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
            bail!("unexpected first line from the server: {line}");
        };
        Ok(Self {
            child,
            base: base.to_string(),
        })
    }

    /// SIGTERM, as an orchestrator stops a server; its exit is for the caller to await.
    pub fn sigterm(&self) {
        sigterm(&self.child);
    }

    /// SIGKILL: no shutdown, no flushing, as a crash.
    pub async fn kill9(mut self) {
        self.child.start_kill().expect("kill the server");
        let _ = self.child.wait().await;
    }
}

/// SIGTERM to a running child process, as an orchestrator stops it; its exit is for the caller to
/// await.
pub fn sigterm(child: &tokio::process::Child) {
    let pid = child.id().expect("the process is running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid} failed");
}
