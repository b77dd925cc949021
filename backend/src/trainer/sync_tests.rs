//! The vLLM syncs against stand-ins, because vLLM cannot run on these machines (no GPU): the LoRA
//! mode against a server that answers `POST /v1/load_lora_adapter` and
//! `POST /v1/unload_lora_adapter` with vLLM's documented request and response shapes (success is
//! a 200 with a plain-text message; errors are 400/404 with vLLM's `ErrorResponse` JSON), and the
//! restart mode against a stand-in `vllm serve DIR --port P` (a Python HTTP server answering
//! `/health`). The embedded mode runs for real in the learning test.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use lachesis_train::tiny::{tiny_config, tiny_tokenizer};
use lachesis_train::{LoraConfig, TrainConfig, TrainLlama, TrainMode, Trainer};
use serde_json::{Value, json};

use super::sync::{SyncError, VllmLora, VllmRestart, WeightSync};
use crate::envs::TempDir;

#[derive(Default)]
struct FakeVllm {
    loaded: Option<String>,
    calls: Vec<(String, Value)>,
}

type Shared = Arc<Mutex<FakeVllm>>;

fn error(status: StatusCode, kind: &str, message: String) -> (StatusCode, String) {
    let body = json!({"object": "error", "message": message, "type": kind, "param": null,
                      "code": status.as_u16()});
    (status, body.to_string())
}

async fn load(State(s): State<Shared>, Json(body): Json<Value>) -> (StatusCode, String) {
    let mut s = s.lock().unwrap();
    s.calls.push(("load".into(), body.clone()));
    let name = body["lora_name"].as_str().unwrap_or_default().to_owned();
    let path = PathBuf::from(body["lora_path"].as_str().unwrap_or_default());
    if s.loaded.as_deref() == Some(&name) {
        let m = format!(
            "The lora adapter '{name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."
        );
        return error(StatusCode::BAD_REQUEST, "InvalidUserInput", m);
    }
    // vLLM reads the PEFT config and weights when it loads; a folder without them fails.
    if !path.join("adapter_config.json").exists()
        || !path.join("adapter_model.safetensors").exists()
    {
        let m = format!(
            "Loading lora {name} failed: No adapter found for {}",
            path.display()
        );
        return error(StatusCode::BAD_REQUEST, "BadRequestError", m);
    }
    s.loaded = Some(name.clone());
    (
        StatusCode::OK,
        format!("Success: LoRA adapter '{name}' added successfully."),
    )
}

async fn unload(State(s): State<Shared>, Json(body): Json<Value>) -> (StatusCode, String) {
    let mut s = s.lock().unwrap();
    s.calls.push(("unload".into(), body.clone()));
    let name = body["lora_name"].as_str().unwrap_or_default().to_owned();
    if s.loaded.as_deref() != Some(&name) {
        let m = format!("The lora adapter '{name}' cannot be found.");
        return error(StatusCode::NOT_FOUND, "NotFoundError", m);
    }
    s.loaded = None;
    (
        StatusCode::OK,
        format!("Success: LoRA adapter '{name}' removed successfully."),
    )
}

async fn fake_vllm() -> (String, Shared) {
    let state = Shared::default();
    let app = Router::new()
        .route("/v1/load_lora_adapter", post(load))
        .route("/v1/unload_lora_adapter", post(unload))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, state)
}

fn trainer(mode: TrainMode) -> Trainer {
    let model = TrainLlama::random(tiny_config(), 1, mode).unwrap();
    let config = TrainConfig {
        loss: Default::default(),
        optim: Default::default(),
        micro_batch: 4,
    };
    Trainer::new(model, config).unwrap()
}

fn lora_mode() -> TrainMode {
    TrainMode::Lora(LoraConfig {
        rank: 2,
        alpha: 4.0,
        targets: vec!["q_proj".into(), "v_proj".into()],
        seed: 0,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lora_sync_swaps_the_adapter_under_one_name_and_bumps_the_version() {
    let (base, state) = fake_vllm().await;
    let dir = TempDir::new("vllm-lora");
    let t = trainer(lora_mode());
    let mut sync = WeightSync::VllmLora(VllmLora::new(&base, "policy", None));
    let adapter = dir.0.join("adapter_sync");
    assert_eq!(sync.sync(&t, None, &adapter, "tiny", 1).await.unwrap(), 1);
    assert_eq!(sync.sync(&t, None, &adapter, "tiny", 2).await.unwrap(), 2);
    assert_eq!(sync.weight_version(), 2);
    let calls = state.lock().unwrap().calls.clone();
    let kinds: Vec<&str> = calls.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["load", "unload", "load"]);
    assert_eq!(calls[0].1["lora_name"], "policy");
    let path = PathBuf::from(calls[2].1["lora_path"].as_str().unwrap());
    assert!(path.is_absolute() && path.join("adapter_config.json").exists());

    // A refusal is a typed error, and a full fine-tune cannot be synced as an adapter.
    let mut broken = VllmLora::new(&base, "other", None);
    let err = broken.load(&dir.0.join("nothing-here")).await.unwrap_err();
    assert!(err.to_string().contains("No adapter found"), "{err}");
    let mut full = WeightSync::VllmLora(VllmLora::new(&base, "policy", None));
    let err = full
        .sync(&trainer(TrainMode::Full), None, &adapter, "tiny", 1)
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::NotLora));
}

/// A stand-in for `vllm serve DIR --port P`: answers `/health` once the folder holds a model.
const STAND_IN: &str = r#"
import http.server, os, sys
model, port = sys.argv[1], int(sys.argv[sys.argv.index("--port") + 1])
assert os.path.exists(os.path.join(model, "config.json")), model
assert os.path.exists(os.path.join(model, "model.safetensors")), model
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_sync_relaunches_the_server_on_each_new_merged_checkpoint() {
    let dir = TempDir::new("vllm-restart");
    let script = dir.0.join("vllm_stand_in.py");
    std::fs::write(&script, STAND_IN).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let restart = VllmRestart::new(
        vec!["python3".into(), script.display().to_string()],
        vec!["--port".into(), port.to_string()],
        format!("http://127.0.0.1:{port}/health"),
        Duration::from_secs(30),
    );
    let mut sync = WeightSync::VllmRestart(Box::new(restart));
    let t = trainer(lora_mode());
    let tokenizer = tiny_tokenizer().unwrap();
    let model_dir = dir.0.join("sync");
    assert_eq!(
        sync.sync(&t, Some(&tokenizer), &model_dir, "tiny", 1)
            .await
            .unwrap(),
        1
    );
    let WeightSync::VllmRestart(r) = &mut sync else {
        unreachable!()
    };
    let first = r.pid().expect("a running server");
    assert_eq!(
        sync.sync(&t, Some(&tokenizer), &model_dir, "tiny", 2)
            .await
            .unwrap(),
        2
    );
    let WeightSync::VllmRestart(r) = &mut sync else {
        unreachable!()
    };
    let second = r.pid().expect("a running server");
    assert_ne!(first, second, "the server was relaunched");
    // The folder is a plain HF model (LoRA merged), the form vLLM serves.
    let config: Value =
        serde_json::from_slice(&std::fs::read(model_dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "llama");
    assert!(model_dir.join("tokenizer.json").exists());
    r.stop().await;
    assert!(r.pid().is_none());

    // A command that cannot start is a typed error.
    let mut missing = VllmRestart::new(
        vec!["/nonexistent/vllm".into()],
        Vec::new(),
        format!("http://127.0.0.1:{port}/health"),
        Duration::from_secs(1),
    );
    assert!(matches!(
        missing.start(&model_dir).await,
        Err(SyncError::Vllm(_))
    ));
}
