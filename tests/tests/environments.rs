//! `lachesis env process | evaluate | serve` on the built-in arithmetic environment with the
//! embedded SmolLM2 model: Atropos-format files, and groups a trainer pulls from `/batch`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use lachesis_shared::atropos::ScoredData;
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_shared::spatial::SceneEvent;
use lachesis_tests::{TestApp, config_for, fresh_database, lachesis_bin, model_path, registration};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// A directory under the temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "lachesis-{label}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The policy and size flags every test shares: the embedded model, small groups, short answers.
fn small_embedded_run() -> Vec<String> {
    [
        "--policy",
        "embedded",
        "--group-size",
        "2",
        "--max-tokens",
        "24",
        "--seed",
        "7",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["--model".to_owned(), model_path().display().to_string()])
    .collect()
}

async fn run_env(args: &[String]) {
    let output = tokio::process::Command::new(lachesis_bin())
        .arg("env")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "lachesis env {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The groups `lachesis env process` wrote, one `ScoredDataGroup` a line.
fn read_groups(path: &std::path::Path) -> Vec<ScoredData> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is a ScoredDataGroup"))
        .collect()
}

/// Atropos's training layout: prompt positions masked with -100 and logprob 1.0, answer positions
/// carrying their token id and a real logprob.
fn assert_training_layout(group: &ScoredData) {
    let logprobs = group
        .inference_logprobs
        .as_ref()
        .expect("inference_logprobs");
    assert_eq!(group.tokens.len(), group.scores.len());
    for ((tokens, masks), lps) in group.tokens.iter().zip(&group.masks).zip(logprobs) {
        assert_eq!(tokens.len(), masks.len());
        assert_eq!(tokens.len(), lps.len());
        let prompt = masks.iter().take_while(|&&m| m == -100).count();
        assert!(
            prompt > 10 && prompt < tokens.len(),
            "prompt of {prompt} tokens"
        );
        for i in 0..tokens.len() {
            if i < prompt {
                assert_eq!(lps[i], 1.0);
            } else {
                assert_eq!(masks[i], tokens[i]);
                assert!(lps[i] <= 0.0, "logprob {} at {i}", lps[i]);
            }
        }
    }
}

/// Arithmetic's rewards: 1 exact, 0.1 well-formed, 0 otherwise.
fn assert_arithmetic_scores(group: &ScoredData) {
    for score in &group.scores {
        assert!([0.0, 0.1, 1.0].contains(score), "score {score}");
    }
}

#[tokio::test]
async fn process_writes_atropos_groups_and_a_viewer() {
    let dir = TempDir::new("process");
    let out = dir.0.join("groups.jsonl");
    let mut args = vec!["process".to_owned(), "arithmetic".to_owned()];
    args.extend(small_embedded_run());
    args.extend(["--groups", "2", "--out"].map(String::from));
    args.push(out.display().to_string());
    run_env(&args).await;

    let groups = read_groups(&out);
    assert_eq!(groups.len(), 2);
    for group in &groups {
        assert_training_layout(group);
        assert_arithmetic_scores(group);
        assert_eq!(group.tokens.len(), 2);
    }
    let html = std::fs::read_to_string(out.with_extension("html")).unwrap();
    assert!(html.contains("<html") && !html.contains("<script"));
    let first_answer = groups[0].messages.as_ref().unwrap()[0].last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = lachesis::envs::process::escape(first_answer.lines().next().unwrap_or_default());
    assert!(html.contains(&shown), "the viewer shows {shown:?}");
}

#[tokio::test]
async fn evaluate_writes_metrics_and_samples() {
    let dir = TempDir::new("evaluate");
    let mut args = vec!["evaluate".to_owned(), "arithmetic".to_owned()];
    args.extend(small_embedded_run());
    args.extend(["--set", "eval_size=4", "--out"].map(String::from));
    args.push(dir.0.display().to_string());
    run_env(&args).await;

    let metrics: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.0.join("metrics.json")).unwrap())
            .unwrap();
    let general = &metrics["config_general"];
    assert!(general["model_name"].is_string());
    assert!(general["generation_parameters"].is_object());
    let results = metrics["results"].as_object().unwrap();
    let task = results
        .keys()
        .find(|k| k.starts_with("atropos|"))
        .expect("an atropos|task|0 entry");
    assert_eq!(results[task], results["all"]);
    let correct = results["all"]["eval/percent_correct"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&correct));
    let samples = std::fs::read_to_string(dir.0.join("samples.jsonl")).unwrap();
    assert_eq!(samples.lines().count(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_pushes_groups_a_trainer_pulls() {
    let app = TestApp::spawn().await;
    app.post("/register", &registration(4)).await;
    let mut args = vec!["serve".to_owned(), "arithmetic".to_owned()];
    args.extend(small_embedded_run());
    args.extend(["--allow-same-scores", "--api"].map(String::from));
    args.push(app.base.clone());
    let mut worker = tokio::process::Command::new(lachesis_bin())
        .arg("env")
        .args(&args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let started = Instant::now();
    let batch = loop {
        let answer = app.get("/batch").await;
        if !answer["batch"].is_null() {
            break answer["batch"].clone();
        }
        if let Ok(Some(status)) = worker.try_wait() {
            panic!("the environment worker exited early: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no batch after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let groups: Vec<ScoredData> = serde_json::from_value(batch).unwrap();
    let sequences: usize = groups.iter().map(|g| g.tokens.len()).sum();
    assert_eq!(sequences, 4, "a batch of batch_size sequences");
    for group in &groups {
        assert_training_layout(group);
        assert_arithmetic_scores(group);
    }
    let status = app.get("/status").await;
    assert!(status["queue_size"].as_i64().is_some());
    worker.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_an_environment_in_process() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.envs = vec![
        r#"arithmetic:{"group_size": 4, "max_tokens": 24, "seed": 3}"#
            .parse()
            .unwrap(),
    ];
    let app = TestApp::spawn_with(config).await;
    app.post("/register", &registration(4)).await;
    let started = Instant::now();
    let batch = loop {
        let answer = app.get("/batch").await;
        if !answer["batch"].is_null() {
            break answer["batch"].clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no batch from the in-process environment after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let groups: Vec<ScoredData> = serde_json::from_value(batch).unwrap();
    assert_eq!(groups.len(), 1);
    assert_training_layout(&groups[0]);
    assert_arithmetic_scores(&groups[0]);
    let scores = &groups[0].scores;
    assert!(
        scores.iter().any(|s| *s != scores[0]),
        "equal-score groups are dropped: {scores:?}"
    );
}

/// The caption of the next episode the live scene starts playing.
async fn next_caption(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> String {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(300), ws.next())
            .await
            .expect("an episode on the live scene within 5 minutes");
        let Some(Ok(Message::Text(text))) = frame else {
            continue;
        };
        if let ServerMsg::Event {
            event: LiveEvent::Scene(scene),
            ..
        } = serde_json::from_str(&text).unwrap()
            && let SceneEvent::Snapshot(snapshot) = *scene
        {
            return snapshot.caption;
        }
    }
}

/// `lachesis_showcase_attempts_total` for `env`, 0 before its first attempt.
async fn showcase_attempts(app: &TestApp, env: &str) -> u64 {
    let metrics = app.get_text("/metrics").await;
    let series = format!("lachesis_showcase_attempts_total{{env=\"{env}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |value| value.parse().unwrap())
}

/// What a hosted environment's showcase costs: nothing while nobody watches its page, attempts on
/// the live scene while someone does, and nothing again once a trainer takes the environment on
/// (the trainer's own rollouts are what the scene shows then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_showcase_runs_only_while_watched_and_never_beside_a_trainer() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.envs = vec![r#"spatial:{"group_size": 2, "max_tokens": 24}"#.parse().unwrap()];
    let app = TestApp::spawn_with(config).await;

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        showcase_attempts(&app, "spatial").await,
        0,
        "nobody watches"
    );

    let ws_url = app.url("/ws").replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url)
        .await
        .expect("upgrade");
    let subscribe = ClientMsg::Subscribe {
        topic: Topic::Scene {
            scene: "live".into(),
        },
    };
    ws.send(Message::text(serde_json::to_string(&subscribe).unwrap()))
        .await
        .unwrap();
    let caption = next_caption(&mut ws).await;
    assert!(caption.contains("showcase"), "{caption}");
    assert!(
        caption.contains("weights v0"),
        "the weights that answer: {caption}"
    );
    assert!(showcase_attempts(&app, "spatial").await >= 1);

    // A trainer takes the environment on: the scene shows its rollouts, and the showcase stops
    // though the scene is still watched.
    app.post("/register", &registration(2)).await;
    // The trainer's first pull is what lets environments register (atroposlib's `started`).
    app.get("/batch").await;
    while !next_caption(&mut ws).await.contains("attempt 1 of 2") {}
    let attached = showcase_attempts(&app, "spatial").await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(showcase_attempts(&app, "spatial").await, attached);
    drop(ws);
}

/// Pay-to-Play's showcase spends the showcase budget only while its page is watched and no trainer
/// has the environment: once one registers, no showcase episode runs, so the showcase pays no
/// judge and makes no group (the rounds after that are the trainer's own rollouts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pay_to_play_showcase_pays_nothing_beside_a_trainer() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.envs = vec![
        r#"pay_to_play:{"group_size": 2, "max_tokens": 16, "settings": {"run": "showcase"}}"#
            .parse()
            .unwrap(),
    ];
    let app = TestApp::spawn_with(config).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(showcase_attempts(&app, "pay_to_play").await, 0);
    let feed = app.get("/api/marketplace/feed?run=showcase").await;
    assert_eq!(
        feed.as_array().map(Vec::len),
        Some(0),
        "nobody watches: {feed}"
    );

    let ws_url = app.url("/ws").replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url)
        .await
        .expect("upgrade");
    let subscribe = ClientMsg::Subscribe {
        topic: Topic::Marketplace,
    };
    ws.send(Message::text(serde_json::to_string(&subscribe).unwrap()))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while showcase_attempts(&app, "pay_to_play").await == 0 {
        assert!(
            Instant::now() < deadline,
            "no showcase episode while watched"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let paid = app.get("/api/marketplace/runs/showcase/ledger").await;
    assert!(
        !paid.as_array().unwrap().is_empty(),
        "the watched showcase paid its panel"
    );

    // A trainer takes the environment on. An attempt already running may finish; none starts.
    app.post("/register", &registration(2)).await;
    app.get("/batch").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let attached = showcase_attempts(&app, "pay_to_play").await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(showcase_attempts(&app, "pay_to_play").await, attached);
    drop(ws);
}

/// Pay-to-Play from the command line with a remote policy: `--policy vllm` against a server's
/// `/generate` (the test server's embedded model, reached over HTTP like any vLLM), paying the
/// platform's judges through the ledger of the database it is given. The server on that database
/// shows the run's budget spent, and the groups are in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_to_play_runs_from_the_cli_with_a_remote_policy_paying_through_the_database() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    let app = TestApp::spawn_with(config).await;
    let dir = TempDir::new("p2p-cli");
    let out = dir.0.join("groups.jsonl");
    let mut args: Vec<String> = [
        "process",
        "pay_to_play",
        "--policy",
        "vllm",
        "--group-size",
        "2",
        "--max-tokens",
        "24",
        "--groups",
        "2",
        "--set",
        "run=p2p-cli",
        "--set",
        "budget_usdc=\"0.5\"",
        "--server",
    ]
    .map(String::from)
    .to_vec();
    args.push(app.base.clone());
    args.extend(["--model".into(), model_path().display().to_string()]);
    args.extend(["--database-url".into(), app.database_url.clone()]);
    args.extend(["--out".into(), out.display().to_string()]);
    run_env(&args).await;

    let groups = read_groups(&out);
    assert_eq!(groups.len(), 2);
    for group in &groups {
        assert_training_layout(group);
    }
    let budgets = app.get("/api/marketplace/budgets").await;
    let budget = budgets
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["run"] == "p2p-cli")
        .expect("the run's budget is on the server's marketplace")
        .clone();
    assert_eq!(budget["funded"], 500_000, "{budget}");
    let spent = budget["spent"].as_i64().unwrap();
    assert!(spent > 0, "the judges were paid: {budget}");
    let ledger = app.get("/api/marketplace/runs/p2p-cli/ledger").await;
    assert!(ledger.as_array().unwrap().len() >= 3, "{ledger}");

    // Without a database the environment says what it needs.
    let output = tokio::process::Command::new(lachesis_bin())
        .args([
            "env",
            "process",
            "pay_to_play",
            "--policy",
            "baseline",
            "--out",
        ])
        .arg(dir.0.join("none.jsonl"))
        .env_remove("DATABASE_URL")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--database-url"), "{stderr}");
}
