//! Protein binder design end to end: NVIDIA NIM's documented shapes against our client and local
//! services, the services' queueing, timeouts and failures, ProteinMPNN designing for a diffused
//! backbone, and groups of design episodes reaching the trajectory API.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use lachesis::envs::in_process::LiveFeed;
use lachesis::envs::protein_binder::ProteinBinderEnv;
use lachesis::envs::protein_binder::nim::client::{
    EpisodeBudget, NimClient, NimEndpoints, NimError, NimLimits, NimTool,
};
use lachesis::envs::protein_binder::nim::shapes::{
    Alphafold2Request, MultimerRequest, ProteinmpnnRequest, ProteinmpnnResponse,
    RfdiffusionRequest, RfdiffusionResponse,
};
use lachesis::envs::protein_binder::plan::PlanPolicy;
use lachesis::envs::runner::{self, RunnerConfig};
use lachesis::envs::{EnvOptions, Environment};
use lachesis::nim_serve::{NimServeOptions, spawn_local};
use lachesis_protein::structure::{DEBUG_TARGET_PDB, Structure, parse_fasta};
use lachesis_shared::atropos::ScoredData;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::protein::{DesignOutcome, ProteinEpisodeStep, ToolBackend};
use lachesis_tests::{TestApp, lachesis_bin, registration};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = lachesis_tests::browser::repo_root()
        .join("tests/fixtures/nim")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn weights() -> std::path::PathBuf {
    let path = std::env::var_os("LACHESIS_PROTEINMPNN_WEIGHTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(lachesis::nim_serve::default_weights);
    assert!(
        path.is_file(),
        "ProteinMPNN's weights are not at {}: run scripts/ensure-proteinmpnn.sh",
        path.display()
    );
    path
}

fn local_options() -> NimServeOptions {
    NimServeOptions {
        proteinmpnn_weights: Some(weights()),
        ..NimServeOptions::default()
    }
}

fn client(base: &str, limits: NimLimits) -> NimClient {
    NimClient::new(NimEndpoints::all_at(base), limits, None)
}

fn budget() -> EpisodeBudget {
    EpisodeBudget::new(Duration::from_secs(600), 50)
}

#[test]
fn documented_requests_are_the_shapes_the_client_sends_and_the_services_read() {
    let af2 = fixture("alphafold2.json");
    let parsed: Alphafold2Request = serde_json::from_value(af2["request"].clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), af2["request"]);
    assert_eq!(
        Alphafold2Request::for_sequence(&parsed.sequence),
        parsed,
        "the client's request is the documented one"
    );
    assert_eq!(af2["path"], NimTool::Alphafold2.path());

    let rfd = fixture("rfdiffusion.json");
    let parsed: RfdiffusionRequest = serde_json::from_value(rfd["request"].clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), rfd["request"]);
    let answer: RfdiffusionResponse = serde_json::from_value(rfd["response"].clone()).unwrap();
    assert_eq!(answer.elapsed_ms, Some(10342));
    assert_eq!(rfd["path"], NimTool::Rfdiffusion.path());

    let mpnn = fixture("proteinmpnn.json");
    let parsed: ProteinmpnnRequest = serde_json::from_value(mpnn["request"].clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), mpnn["request"]);
    assert_eq!(parsed.steering_options(), ["omit_AAs"]);
    let ours = ProteinmpnnRequest::new(parsed.input_pdb.clone(), vec!["A".into()], 10, 0.1, 3);
    assert!(ours.steering_options().is_empty());
    let answer: ProteinmpnnResponse = serde_json::from_value(mpnn["response"].clone()).unwrap();
    assert_eq!(
        answer.scores.len(),
        parse_fasta(&answer.mfasta).unwrap().len()
    );
    assert_eq!(mpnn["path"], NimTool::Proteinmpnn.path());

    let multimer = fixture("multimer.json");
    let parsed: MultimerRequest = serde_json::from_value(multimer["request"].clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), multimer["request"]);
    let ours = MultimerRequest::for_sequences(parsed.sequences.clone(), true);
    assert_eq!(
        MultimerRequest {
            selected_models: Some(vec![1]),
            ..ours
        },
        parsed
    );
    let models: Vec<String> = serde_json::from_value(multimer["response"].clone()).unwrap();
    assert!(Structure::from_pdb(&models[0]).is_ok());
    assert_eq!(multimer["path"], NimTool::Multimer.path());
    // Unknown fields are refused, not ignored.
    let mut extra = af2["request"].clone();
    extra["turbo"] = json!(true);
    assert!(serde_json::from_value::<Alphafold2Request>(extra).is_err());
}

/// Replays NVCF's documented answers: a rate limit, then a queued request polled twice.
#[derive(Default)]
struct Replay {
    posts: Mutex<Vec<(HeaderMap, Value)>>,
    polls: Mutex<u32>,
}

async fn replay_post(
    State(replay): State<Arc<Replay>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let nvcf = fixture("nvcf.json");
    let count = {
        let mut posts = replay.posts.lock().unwrap();
        posts.push((headers, body));
        posts.len()
    };
    if count == 1 {
        let limited = &nvcf["rate_limited"];
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(
                "retry-after",
                limited["headers"]["Retry-After"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )],
            axum::Json(limited["body"].clone()),
        )
            .into_response();
    }
    queued(&nvcf)
}

fn queued(nvcf: &Value) -> Response {
    let headers = &nvcf["queued"]["headers"];
    (
        StatusCode::ACCEPTED,
        [
            (
                "nvcf-reqid",
                headers["NVCF-REQID"].as_str().unwrap().to_string(),
            ),
            (
                "nvcf-status",
                headers["NVCF-STATUS"].as_str().unwrap().to_string(),
            ),
        ],
    )
        .into_response()
}

async fn replay_status(State(replay): State<Arc<Replay>>) -> Response {
    let nvcf = fixture("nvcf.json");
    let polls = {
        let mut polls = replay.polls.lock().unwrap();
        *polls += 1;
        *polls
    };
    if polls < 2 {
        return queued(&nvcf);
    }
    axum::Json(fixture("rfdiffusion.json")["response"].clone()).into_response()
}

async fn replay_unprocessable() -> Response {
    let problem = fixture("nvcf.json")["unprocessable"]["body"].clone();
    (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(problem)).into_response()
}

#[tokio::test]
async fn the_client_follows_nvcf_queueing_rate_limits_and_errors() {
    let replay = Arc::new(Replay::default());
    let nvcf = fixture("nvcf.json");
    let app = axum::Router::new()
        .route(
            NimTool::Rfdiffusion.path(),
            axum::routing::post(replay_post),
        )
        .route(
            nvcf["status_path"].as_str().unwrap(),
            axum::routing::get(replay_status),
        )
        .route(
            NimTool::Proteinmpnn.path(),
            axum::routing::post(replay_unprocessable),
        )
        .with_state(replay.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    // A key is configured, yet this is not NVIDIA's host: it must never be sent here.
    let limits = NimLimits {
        poll_seconds: 2,
        initial_backoff: Duration::from_millis(50),
        ..NimLimits::default()
    };
    let nim = NimClient::new(
        NimEndpoints::all_at(&base),
        limits,
        Some("nvapi-secret".into()),
    );
    let request: RfdiffusionRequest =
        serde_json::from_value(fixture("rfdiffusion.json")["request"].clone()).unwrap();
    let answer = nim
        .call::<_, RfdiffusionResponse>(NimTool::Rfdiffusion, &request, &mut budget())
        .await
        .expect("answered after the rate limit and the queue");
    assert_eq!(answer.retries, 1, "one retry after the 429");
    assert_eq!(answer.polls, 2, "the 202 and one pending poll");
    assert_eq!(
        serde_json::to_value(&answer.body).unwrap(),
        fixture("rfdiffusion.json")["response"]
    );
    assert!(
        answer.waited >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    let posts = replay.posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 2);
    for (headers, body) in &posts {
        assert_eq!(body, &fixture("rfdiffusion.json")["request"]);
        assert!(
            headers.get("authorization").is_none(),
            "the key went to {base}"
        );
        assert_eq!(headers.get("nvcf-poll-seconds").unwrap(), "2");
    }

    let request = ProteinmpnnRequest::new("x".into(), vec!["A".into()], 1, 0.1, 1);
    let refused = nim
        .call::<_, ProteinmpnnResponse>(NimTool::Proteinmpnn, &request, &mut budget())
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        NimError::Rejected {
            tool: "ProteinMPNN",
            status: 422,
            detail: nvcf["unprocessable"]["body"]["detail"]
                .as_str()
                .unwrap()
                .to_string(),
        }
    );
    let mut spent = EpisodeBudget::new(Duration::from_secs(60), 0);
    let refused = nim
        .call::<_, ProteinmpnnResponse>(NimTool::Proteinmpnn, &request, &mut spent)
        .await
        .unwrap_err();
    assert!(matches!(refused, NimError::BudgetSpent(_)), "{refused:?}");
}

#[tokio::test]
async fn the_local_services_queue_time_out_and_fail_as_nim_does() {
    let target = Alphafold2Request::for_sequence("EYFTLQIRGRERFEKIREYNEALELKDAQ");
    // A stand-in slower than the caller lets requests be held: answered through 202 and polling.
    let slow = spawn_local(NimServeOptions {
        stand_in_latency_ms: 1500,
        ..local_options()
    })
    .await
    .unwrap();
    let polling = client(
        &slow,
        NimLimits {
            poll_seconds: 0,
            ..NimLimits::default()
        },
    );
    let answer = polling
        .call::<_, Vec<String>>(NimTool::Alphafold2, &target, &mut budget())
        .await
        .unwrap();
    assert!(answer.polls >= 1, "{answer:?}");
    assert_eq!(answer.backend.as_deref(), Some("stand-in"));
    assert!(answer.body[0].contains("NOT A PREDICTION"));
    let folded = Structure::from_pdb(&answer.body[0]).unwrap();
    assert_eq!(folded.sequence("A").unwrap(), target.sequence);

    // A caller that allows less time than the service takes gets a timeout, not a hang.
    let impatient = client(
        &slow,
        NimLimits {
            call_timeout: Duration::from_secs(1),
            poll_seconds: 1,
            ..NimLimits::default()
        },
    );
    let started = Instant::now();
    let error = impatient
        .call::<_, Vec<String>>(NimTool::Alphafold2, &target, &mut budget())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            NimError::Timeout {
                tool: "AlphaFold2",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // Bad input is refused with the reason before any work.
    let fast = spawn_local(local_options()).await.unwrap();
    let nim = client(&fast, NimLimits::default());
    let bad = RfdiffusionRequest {
        input_pdb: DEBUG_TARGET_PDB.to_string(),
        contigs: "C1-10/0 20-30".into(),
        hotspot_res: vec![],
        diffusion_steps: 15,
        random_seed: Some(1),
    };
    match nim
        .call::<_, RfdiffusionResponse>(NimTool::Rfdiffusion, &bad, &mut budget())
        .await
    {
        Err(NimError::Rejected {
            status: 422,
            detail,
            ..
        }) => {
            assert!(detail.contains('C'), "{detail}")
        }
        other => panic!("expected a 422, got {other:?}"),
    }

    // Transient failures are retried with backoff; too many surface as unavailable.
    let flaky = spawn_local(NimServeOptions {
        fail_first: 2,
        ..local_options()
    })
    .await
    .unwrap();
    let patient = client(
        &flaky,
        NimLimits {
            initial_backoff: Duration::from_millis(20),
            ..NimLimits::default()
        },
    );
    let answer = patient
        .call::<_, Vec<String>>(NimTool::Alphafold2, &target, &mut budget())
        .await
        .unwrap();
    assert_eq!(answer.retries, 2);
    let broken = spawn_local(NimServeOptions {
        fail_first: 10,
        ..local_options()
    })
    .await
    .unwrap();
    let brief = client(
        &broken,
        NimLimits {
            max_retries: 1,
            initial_backoff: Duration::from_millis(20),
            ..NimLimits::default()
        },
    );
    let error = brief
        .call::<_, Vec<String>>(NimTool::Alphafold2, &target, &mut budget())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            NimError::Unavailable {
                status: 503,
                attempts: 2,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn proteinmpnn_designs_sequences_for_a_diffused_backbone() {
    let base = spawn_local(local_options()).await.unwrap();
    let nim = client(&base, NimLimits::default());
    let sequence = "EYFTLQIRGRERFEKIREYNEALELKDAQ";
    let folded = nim
        .call::<_, Vec<String>>(
            NimTool::Alphafold2,
            &Alphafold2Request::for_sequence(sequence),
            &mut budget(),
        )
        .await
        .unwrap();
    let backbone = nim
        .call::<_, RfdiffusionResponse>(
            NimTool::Rfdiffusion,
            &RfdiffusionRequest {
                input_pdb: folded.body[0].clone(),
                contigs: "A1-29/0 30".into(),
                hotspot_res: vec!["A5".into(), "A9".into()],
                diffusion_steps: 15,
                random_seed: Some(4),
            },
            &mut budget(),
        )
        .await
        .unwrap();
    let backbone_pdb = backbone.body.output_pdb;
    let parsed = Structure::from_pdb(&backbone_pdb).unwrap();
    assert_eq!(parsed.chains.len(), 2);
    assert!(
        parsed.sequence("B").unwrap().chars().all(|c| c == 'G'),
        "a bare backbone"
    );
    let design = |seed: u64| {
        let nim = nim.clone();
        let pdb = backbone_pdb.clone();
        async move {
            nim.call::<_, ProteinmpnnResponse>(
                NimTool::Proteinmpnn,
                &ProteinmpnnRequest::new(pdb, vec!["B".into()], 6, 0.1, seed),
                &mut budget(),
            )
            .await
            .unwrap()
        }
    };
    let first = design(3).await;
    assert_eq!(first.backend.as_deref(), Some("local"));
    let records = parse_fasta(&first.body.mfasta).unwrap();
    assert_eq!(records.len(), 7, "the input, then six designs");
    assert_eq!(first.body.scores.len(), 6);
    for (record, score) in records[1..].iter().zip(&first.body.scores) {
        let (target_part, binder) = record.sequence.split_once('/').unwrap();
        assert_eq!(target_part, sequence, "the fixed chain is kept");
        assert_eq!(binder.len(), 30);
        assert!(
            binder.chars().all(|c| "ACDEFGHIKLMNPQRSTVWY".contains(c)),
            "{binder}"
        );
        assert!(
            binder.chars().filter(|&c| c == 'G').count() < 15,
            "designed, not the glycine input: {binder}"
        );
        assert!(score.is_finite() && *score > 0.0);
        assert!(
            record.header.contains(&format!("score={score:.4}")),
            "{}",
            record.header
        );
    }
    assert_eq!(
        design(3).await.body.mfasta,
        first.body.mfasta,
        "a seed replays"
    );
    assert_ne!(design(4).await.body.mfasta, first.body.mfasta);
}

/// Keeps the protein events an environment publishes.
#[derive(Default)]
struct Collector(Mutex<Vec<lachesis_shared::protein::ProteinEpisodeEvent>>);

impl LiveFeed for Collector {
    fn publish(&self, event: LiveEvent) -> BoxFuture<'_, ()> {
        if let LiveEvent::ProteinEpisode(event) = event {
            self.0.lock().unwrap().push(*event);
        }
        Box::pin(async {})
    }
}

/// `lachesis nim serve` as a process, on a free port.
async fn nim_process(latency_ms: u64) -> (tokio::process::Child, String) {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let child = tokio::process::Command::new(lachesis_bin())
        .args(["nim", "serve", "--bind", &format!("127.0.0.1:{port}")])
        .args(["--stand-in-latency-ms", &latency_ms.to_string()])
        .arg("--proteinmpnn-weights")
        .arg(weights())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while reqwest::get(format!("{base}/v1/health/ready"))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "lachesis nim serve did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_of_design_episodes_reach_the_trajectory_api_with_rewards_that_differ() {
    // Stand-ins slower than the client holds a request: every stand-in stage is polled.
    let (_services, base) = nim_process(1200).await;
    let app = TestApp::spawn().await;
    app.post("/register", &registration(4)).await;
    let mut settings = serde_json::Map::new();
    settings.insert("nim_url".into(), json!(base));
    settings.insert("poll_seconds".into(), json!(1));
    let collector = Arc::new(Collector::default());
    let env = ProteinBinderEnv::new(&EnvOptions {
        seed: 5,
        group_size: Some(4),
        settings,
        ..EnvOptions::default()
    })
    .unwrap()
    .with_feed(collector.clone());
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let api = app.base.clone();
    let worker = async {
        let env: &dyn Environment = &env;
        runner::run(
            &api,
            env,
            Arc::new(PlanPolicy::new(11)),
            RunnerConfig {
                max_workers: 1,
                total_steps: Some(0),
                ..RunnerConfig::default()
            },
            shutdown,
        )
        .await
    };
    let pull = async {
        let started = Instant::now();
        loop {
            let answer = app.get("/batch").await;
            if !answer["batch"].is_null() {
                break answer["batch"].clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "no batch in 5 minutes"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    let batch = tokio::select! {
        batch = pull => batch,
        report = worker => panic!("the runner ended first: {report:?}"),
    };
    let _ = stop.send(true);
    let groups: Vec<ScoredData> = serde_json::from_value(batch).unwrap();
    let scores: Vec<f64> = groups.iter().flat_map(|g| g.scores.clone()).collect();
    assert_eq!(scores.len(), 4, "{scores:?}");
    assert!(
        scores.iter().all(|s| *s > 0.3),
        "every episode reached the complex: {scores:?}"
    );
    assert!(
        scores.windows(2).any(|w| w[0] != w[1]),
        "rewards differ within the group: {scores:?}"
    );
    for group in &groups {
        assert!(group.tokens.iter().all(|t| !t.is_empty()));
    }
    let events = collector.0.lock().unwrap().clone();
    let mut per_backend: HashMap<&str, Vec<u64>> = HashMap::new();
    for event in &events {
        if let ProteinEpisodeStep::Answered {
            ok: true,
            backend,
            waited_ms,
            ..
        } = &event.step
        {
            let name = match backend {
                ToolBackend::StandIn => "stand-in",
                ToolBackend::Local => "local",
                ToolBackend::Nim => "nim",
            };
            per_backend.entry(name).or_default().push(*waited_ms);
        }
    }
    assert_eq!(
        per_backend.get("local").map(Vec::len),
        Some(4),
        "{per_backend:?}"
    );
    assert_eq!(
        per_backend.get("stand-in").map(Vec::len),
        Some(12),
        "{per_backend:?}"
    );
    assert!(
        per_backend["stand-in"].iter().all(|&w| w > 0),
        "stand-in answers were queued: {per_backend:?}"
    );
    let finished = events
        .iter()
        .filter(|e| {
            matches!(
                e.step,
                ProteinEpisodeStep::Finished(DesignOutcome { stages: 4, .. })
            )
        })
        .count();
    assert_eq!(finished, 4);
}

#[tokio::test]
async fn the_local_services_refuse_what_would_cost_too_much() {
    let base = spawn_local(NimServeOptions {
        max_pending: 1,
        max_body_bytes: 64 << 10,
        stand_in_latency_ms: 2000,
        ..local_options()
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .header("nvcf-poll-seconds", "0")
            .json(&body)
    };
    // A page in the operator's browser can send text/plain cross-origin without a preflight.
    let plain = http
        .post(format!("{base}{}", NimTool::Alphafold2.path()))
        .header("content-type", "text/plain")
        .body(r#"{"sequence": "EYFTLQ"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);
    let huge = post(
        NimTool::Alphafold2.path(),
        json!({"sequence": "A".repeat(100_000)}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(huge.status(), 413);
    let many = post(
        NimTool::Proteinmpnn.path(),
        json!({"input_pdb": DEBUG_TARGET_PDB, "num_seq_per_target": 60, "sampling_temp": [0.1, 0.2]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(many.status(), 422);
    let problem: Value = many.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("120 designs"),
        "{problem}"
    );
    let big_complex = post(
        NimTool::Multimer.path(),
        json!({"sequences": ["A".repeat(900), "L".repeat(900)]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(big_complex.status(), 422);
    // One slow request is queued; a second one while it runs is told to come back.
    let first = post(
        NimTool::Alphafold2.path(),
        json!({"sequence": "EYFTLQIRGRERFEK"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(first.status(), 202);
    let id = first.headers()["nvcf-reqid"].to_str().unwrap().to_string();
    let second = post(
        NimTool::Alphafold2.path(),
        json!({"sequence": "EYFTLQIRGRERFEK"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(second.status(), 429);
    assert_eq!(second.headers()["retry-after"], "1");
    let unknown = http
        .get(format!("{base}/v1/status/0000-not-a-job"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let done = http
        .get(format!("{base}/v1/status/{id}"))
        .header("nvcf-poll-seconds", "10")
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    let again = http
        .get(format!("{base}/v1/status/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404, "an answer is handed over once");
}
