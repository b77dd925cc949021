//! Supervised server tasks end to end: a real server on port 0 with a fresh database each. A task
//! that fails for real (the live bridge's connection terminated by Postgres, an in-process
//! environment refused by its trainer) is restarted, counted on `/metrics` and listed by
//! `GET /api/system/tasks`; the live bridge's watchers are told what they missed.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lachesis::supervisor::Backoff;
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_shared::runs::TrainerPoint;
use lachesis_shared::system::{TaskState, TaskStatus};
use lachesis_tests::{
    Caller, TestApp, config_for, fresh_database, model_path, registration, sign_up,
};
use reqwest::{Method, StatusCode};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const WAIT: Duration = Duration::from_secs(30);

/// Short pauses, so restarts come quickly; their growth is unit-tested on a paused clock.
fn quick_restarts() -> Backoff {
    Backoff {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(400),
        healthy_after: Duration::from_secs(60),
    }
}

async fn tasks(app: &TestApp) -> Vec<TaskStatus> {
    serde_json::from_value(app.get("/api/system/tasks").await).expect("the task list")
}

fn find<'a>(tasks: &'a [TaskStatus], name: &str) -> Option<&'a TaskStatus> {
    tasks.iter().find(|t| t.name == name)
}

/// Polls the task list until `done` holds for the task `name`.
async fn wait_for_task(
    app: &TestApp,
    name: &str,
    mut done: impl FnMut(&TaskStatus) -> bool,
) -> TaskStatus {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let listed = tasks(app).await;
        if let Some(task) = find(&listed, name).filter(|t| done(t)) {
            return task.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never reached the expected state: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of `metric{task="name"}` on `/metrics`.
async fn task_metric(app: &TestApp, metric: &str, name: &str) -> Option<u64> {
    let text = app.get("/metrics").await;
    let text = text.as_str().expect("the exposition text");
    let prefix = format!("{metric}{{task=\"{name}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
}

struct Watcher {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Watcher {
    async fn subscribe(app: &TestApp, topic: &Topic) -> Self {
        let url = format!("{}/ws", app.base.replacen("http://", "ws://", 1));
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("upgrade");
        let mut watcher = Self { ws };
        assert!(matches!(watcher.recv().await, ServerMsg::Welcome { .. }));
        let subscribe = ClientMsg::Subscribe {
            topic: topic.clone(),
        };
        let text = serde_json::to_string(&subscribe).unwrap();
        watcher.ws.send(Message::text(text)).await.expect("send");
        assert_eq!(
            watcher.recv().await,
            ServerMsg::Subscribed {
                topic: topic.clone()
            }
        );
        watcher
    }

    /// The next protocol frame (WebSocket pings are skipped).
    async fn recv(&mut self) -> ServerMsg {
        loop {
            let frame = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a frame before the deadline");
            match frame.expect("the connection is open").expect("a frame") {
                Message::Text(text) => return serde_json::from_str(&text).expect("a frame"),
                Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }
}

fn trainer(step: i64) -> LiveEvent {
    LiveEvent::Trainer(TrainerPoint {
        at_ms: 1_700_000_000_000 + step,
        step,
        values: BTreeMap::from([("loss".to_string(), 0.5)]),
    })
}

#[tokio::test]
async fn a_terminated_listener_is_restarted_and_its_watchers_told_to_reload() {
    let mut config = config_for(&fresh_database().await);
    config.restart_backoff = quick_restarts();
    let app = TestApp::spawn_with(config).await;
    let db = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let topic = Topic::Run { run: "r".into() };
    let mut watcher = Watcher::subscribe(&app, &topic).await;

    let bridge = wait_for_task(&app, "live-bridge", |t| t.state == TaskState::Running).await;
    assert_eq!((bridge.restarts, bridge.last_error), (0, None));
    lachesis::live::publish(&db, &topic, &trainer(1))
        .await
        .unwrap();
    assert!(matches!(watcher.recv().await, ServerMsg::Event { .. }));

    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(killed, [true], "one listening connection");

    assert_eq!(
        watcher.recv().await,
        ServerMsg::Lagged {
            topic: topic.clone(),
            dropped: 0
        },
        "the watcher is told it may have missed events"
    );
    // Told after listening again: what is published now arrives.
    lachesis::live::publish(&db, &topic, &trainer(2))
        .await
        .unwrap();
    match watcher.recv().await {
        ServerMsg::Event {
            event: LiveEvent::Trainer(point),
            ..
        } => assert_eq!(point.step, 2),
        other => panic!("expected the event published after the reconnect, got {other:?}"),
    }

    let bridge = wait_for_task(&app, "live-bridge", |t| t.state == TaskState::Running).await;
    assert_eq!(bridge.restarts, 1);
    assert!(
        bridge
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("database connection")),
        "{bridge:?}"
    );
    assert_eq!(
        task_metric(&app, "lachesis_task_restarts_total", "live-bridge").await,
        Some(1)
    );
    assert_eq!(
        task_metric(&app, "lachesis_task_up", "live-bridge").await,
        Some(1)
    );
    let listed = tasks(&app).await;
    assert!(find(&listed, "status-sampler").is_some(), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_environment_that_fails_is_restarted_until_it_can_run() {
    let mut config = config_for(&fresh_database().await);
    config.restart_backoff = quick_restarts();
    config.model = Some(model_path());
    config.envs = vec![
        r#"arithmetic:{"group_size": 4, "max_tokens": 24, "seed": 3}"#
            .parse()
            .unwrap(),
    ];
    let app = TestApp::spawn_with(config).await;
    let engine = wait_for_task(&app, "inference-worker", |_| true).await;
    assert_eq!((engine.state, engine.restarts), (TaskState::Running, 0));

    // A trainer whose batches are smaller than the environment's groups: the runner registers,
    // reads the trainer's batch size and fails.
    app.post("/register", &registration(2)).await;
    app.get("/batch").await;
    let failing = wait_for_task(&app, "env:arithmetic", |t| t.restarts >= 2).await;
    assert!(
        failing
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("batch_size")),
        "{failing:?}"
    );
    let counted = task_metric(&app, "lachesis_task_restarts_total", "env:arithmetic")
        .await
        .expect("the environment's restarts on /metrics");
    assert!(counted >= 2, "{counted}");

    // The trainer starts over with room for a group: the next restart serves it a batch.
    app.get("/reset_data").await;
    app.post("/register", &registration(4)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let answer = app.get("/batch").await;
        if !answer["batch"].is_null() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no batch from the restarted environment"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let serving = tasks(&app).await;
    let env = find(&serving, "env:arithmetic").expect("listed");
    assert_eq!(env.state, TaskState::Running, "{env:?}");
    assert!(env.restarts >= 2);
}

#[tokio::test]
async fn with_accounts_on_the_task_list_is_for_signed_in_callers() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let (status, _) = app
        .call(Caller::Nobody, Method::GET, "/api/system/tasks", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let session = sign_up(&app, "/api/auth/setup", "owner", "team").await;
    let (status, body) = app
        .call(
            Caller::Session(&session),
            Method::GET,
            "/api/system/tasks",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: Vec<TaskStatus> = serde_json::from_value(body).unwrap();
    assert!(find(&listed, "live-bridge").is_some(), "{listed:?}");
}
