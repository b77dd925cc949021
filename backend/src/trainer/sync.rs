//! Getting new weights into inference after a step, and counting versions.
//!
//! - `Embedded`: the in-process engine swaps its model in memory (no disk); requests already
//!   decoding finish on the old weights, the next ones use the new.
//! - `VllmRestart`: Atropos's example trainer's "none" mode: stop the vLLM process, write a full Hugging Face
//!   checkpoint (adapters merged), launch `vllm serve CHECKPOINT` and wait for `/health`.
//! - `VllmLora`: write a PEFT adapter and hot-load it into a running vLLM started with
//!   `--enable-lora` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, through vLLM's own
//!   `POST /v1/unload_lora_adapter` and `POST /v1/load_lora_adapter {lora_name, lora_path}`.
//!   The adapter keeps one name, so environments keep asking for the same model; between the
//!   unload and the load (milliseconds) a request for it gets vLLM's 404 and is retried.
//!
//! - `Reload`: write the merged model as a Hugging Face folder and have a running server read it
//!   through `POST /update_weights_from_disk {model_path}` (SGLang's request; Lachesis answers it
//!   too, replacing the model its whole platform runs on). The server says the version it now runs.
//!
//! Every sync bumps the weight version. The embedded engine stamps it on rollouts, so groups and
//! batches carry it; with vLLM the trainer reports it on the dashboard (`weight_version`), and
//! environments in other processes cannot see it unless they are told.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lachesis_inference::{Engine, ModelTokenizer};
use lachesis_train::checkpoint::{self, TrainerState};
use lachesis_train::{TrainMode, Trainer, inference_model};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("engine: {0}")]
    Engine(#[from] lachesis_inference::EngineError),
    #[error(transparent)]
    Train(#[from] lachesis_train::TrainError),
    #[error("vLLM: {0}")]
    Vllm(String),
    #[error("LoRA sync needs a LoRA model (the trainer is fine-tuning every weight)")]
    NotLora,
}

pub enum WeightSync {
    /// Training without inference to update (benchmarks, offline data).
    None {
        version: i64,
    },
    Embedded {
        engine: Engine,
        quantize: bool,
    },
    VllmRestart(Box<VllmRestart>),
    VllmLora(VllmLora),
    Reload(RemoteReload),
}

impl WeightSync {
    pub fn weight_version(&self) -> i64 {
        match self {
            WeightSync::None { version } => *version,
            WeightSync::Embedded { engine, .. } => engine.weight_version(),
            WeightSync::VllmRestart(r) => r.version,
            WeightSync::VllmLora(l) => l.version,
            WeightSync::Reload(r) => r.version,
        }
    }

    /// Pushes the trainer's weights to inference; `dir` is where file-based syncs write.
    pub async fn sync(
        &mut self,
        trainer: &Trainer,
        tokenizer: Option<&ModelTokenizer>,
        dir: &Path,
        base_model: &str,
        step: usize,
    ) -> Result<i64, SyncError> {
        match self {
            WeightSync::None { version } => {
                *version += 1;
                Ok(*version)
            }
            WeightSync::Embedded { engine, quantize } => {
                let model =
                    tokio::task::block_in_place(|| inference_model(&trainer.model, *quantize))?;
                Ok(engine.swap_model(model)?)
            }
            WeightSync::VllmRestart(restart) => restart.sync(trainer, tokenizer, dir).await,
            WeightSync::VllmLora(lora) => {
                if !matches!(trainer.model.mode, TrainMode::Lora(_)) {
                    return Err(SyncError::NotLora);
                }
                let state = TrainerState {
                    step,
                    weight_version: lora.version + 1,
                };
                tokio::task::block_in_place(|| {
                    checkpoint::save(dir, trainer, None, base_model, &state)
                })?;
                lora.load(dir).await
            }
            WeightSync::Reload(reload) => {
                tokio::task::block_in_place(|| {
                    checkpoint::save_merged(dir, &trainer.model, tokenizer)
                })?;
                reload.load(dir).await
            }
        }
    }
}

/// Atropos's example trainer's restart mode: one vLLM process, relaunched on each new checkpoint.
pub struct VllmRestart {
    /// The program and the arguments before the model path: `["vllm", "serve"]`.
    pub command: Vec<String>,
    /// Added after the model path (`--port`, `--served-model-name`, `--gpu-memory-utilization` ...).
    pub args: Vec<String>,
    /// Where the server answers `GET /health` once it is up.
    pub health_url: String,
    pub startup_timeout: Duration,
    pub version: i64,
    child: Option<tokio::process::Child>,
    http: reqwest::Client,
}

impl VllmRestart {
    pub fn new(
        command: Vec<String>,
        args: Vec<String>,
        health_url: String,
        startup_timeout: Duration,
    ) -> Self {
        Self {
            command,
            args,
            health_url,
            startup_timeout,
            version: 0,
            child: None,
            http: reqwest::Client::new(),
        }
    }

    /// Stops the running server (if any), writes the merged model and starts a server on it.
    async fn sync(
        &mut self,
        trainer: &Trainer,
        tokenizer: Option<&ModelTokenizer>,
        dir: &Path,
    ) -> Result<i64, SyncError> {
        self.stop().await;
        tokio::task::block_in_place(|| checkpoint::save_merged(dir, &trainer.model, tokenizer))?;
        self.start(dir).await?;
        self.version += 1;
        Ok(self.version)
    }

    /// Launches the server on `model_dir` and waits for it to answer `/health`.
    pub async fn start(&mut self, model_dir: &Path) -> Result<(), SyncError> {
        let (program, before) = self
            .command
            .split_first()
            .ok_or_else(|| SyncError::Vllm("no vLLM command configured".into()))?;
        let mut child = tokio::process::Command::new(program)
            .args(before)
            .arg(model_dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| SyncError::Vllm(format!("starting {program}: {e}")))?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(SyncError::Vllm(format!(
                    "the server exited at startup: {status}"
                )));
            }
            let healthy = self
                .http
                .get(&self.health_url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if healthy {
                self.child = Some(child);
                return Ok(());
            }
            if started.elapsed() > self.startup_timeout {
                let _ = child.kill().await;
                return Err(SyncError::Vllm(format!(
                    "{} did not answer within {:?}",
                    self.health_url, self.startup_timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the server and waits for it to exit (its GPU memory is free after that).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// The running server's process id, for logs and tests.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }
}

/// `request` with the server's API key as a bearer token, when there is one.
fn with_key(request: reqwest::RequestBuilder, key: &Option<String>) -> reqwest::RequestBuilder {
    match key {
        Some(key) => request.bearer_auth(key),
        None => request,
    }
}

/// vLLM's runtime LoRA loading.
pub struct VllmLora {
    /// The server root, without `/v1`.
    pub base_url: String,
    pub lora_name: String,
    pub api_key: Option<String>,
    pub version: i64,
    http: reqwest::Client,
}

impl VllmLora {
    pub fn new(base_url: &str, lora_name: &str, api_key: Option<String>) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            lora_name: lora_name.to_owned(),
            api_key,
            version: 0,
            http: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> Result<(u16, String), SyncError> {
        let request = self
            .http
            .post(format!("{}{path}", self.base_url))
            .json(&body);
        let response = with_key(request, &self.api_key)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .map_err(|e| SyncError::Vllm(format!("{path}: {e}")))?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.unwrap_or_default()))
    }

    /// Replaces the served adapter with the one in `adapter_dir`.
    pub async fn load(&mut self, adapter_dir: &Path) -> Result<i64, SyncError> {
        if self.version > 0 {
            let (status, body) = self
                .post(
                    "/v1/unload_lora_adapter",
                    json!({"lora_name": self.lora_name}),
                )
                .await?;
            // 404: already gone (a restarted server); anything else is a real refusal.
            if status != 200 && status != 404 {
                return Err(SyncError::Vllm(format!(
                    "unload refused ({status}): {body}"
                )));
            }
        }
        let path: PathBuf =
            std::fs::canonicalize(adapter_dir).unwrap_or_else(|_| adapter_dir.to_owned());
        let (status, body) = self
            .post(
                "/v1/load_lora_adapter",
                json!({"lora_name": self.lora_name, "lora_path": path}),
            )
            .await?;
        if status != 200 {
            return Err(SyncError::Vllm(format!("load refused ({status}): {body}")));
        }
        self.version += 1;
        // Lachesis lists an adapter's version in `/v1/models` (it keeps counting across a
        // trainer's restarts); vLLM does not, and then this trainer's count stands.
        if let Some(served) = self.served_version().await {
            self.version = served;
        }
        Ok(self.version)
    }

    async fn served_version(&self) -> Option<i64> {
        let request = self.http.get(format!("{}/v1/models", self.base_url));
        let models: serde_json::Value = with_key(request, &self.api_key)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        models["data"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == self.lora_name.as_str())?["weight_version"]
            .as_i64()
    }
}

/// A running server told to read a full checkpoint from disk.
pub struct RemoteReload {
    /// The server root, without `/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub version: i64,
    http: reqwest::Client,
}

impl RemoteReload {
    pub fn new(base_url: &str, api_key: Option<String>) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            version: 0,
            http: reqwest::Client::new(),
        }
    }

    /// Has the server replace its weights with the Hugging Face folder `model_dir`.
    pub async fn load(&mut self, model_dir: &Path) -> Result<i64, SyncError> {
        let path: PathBuf =
            std::fs::canonicalize(model_dir).unwrap_or_else(|_| model_dir.to_owned());
        let request = self
            .http
            .post(format!("{}/update_weights_from_disk", self.base_url))
            .json(&json!({"model_path": path}));
        let response = with_key(request, &self.api_key)
            .timeout(Duration::from_secs(600))
            .send()
            .await
            .map_err(|e| SyncError::Vllm(format!("/update_weights_from_disk: {e}")))?;
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        if status != 200 || body["success"] != true {
            return Err(SyncError::Vllm(format!(
                "reload refused ({status}): {}",
                body["message"].as_str().unwrap_or("no message")
            )));
        }
        self.version = body["weight_version"].as_i64().unwrap_or(self.version + 1);
        Ok(self.version)
    }
}
