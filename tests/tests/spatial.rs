//! Spatial reasoning over HTTP and the live socket: a person's attempt is judged by the same
//! physics and scorer as the model's, stored and exported; bad attempts change nothing; with
//! accounts on, attempts need a session and its CSRF token; a streamed episode arrives as a
//! snapshot then deltas that chain, and the scene's latest state is served over HTTP.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lachesis::envs::spatial::{
    Episode, SceneSink, generate::generate, judge, render_actions, solve,
};
use lachesis::spatial::SceneStreamer;
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_shared::spatial::{Action, SceneEvent, Task, Verdict};
use lachesis_tests::{TestApp, config_for, fresh_database};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

async fn post_attempt(
    app: &TestApp,
    body: &Value,
    auth: Option<(&str, &str)>,
) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url("/api/spatial/attempts")).json(body);
    if let Some((cookie, csrf)) = auth {
        request = request.header("cookie", cookie);
        if !csrf.is_empty() {
            request = request.header("x-csrf-token", csrf);
        }
    }
    let response = request.send().await.expect("POST attempts");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn export(app: &TestApp, cookie: Option<&str>) -> (StatusCode, String) {
    let mut request = app.client.get(app.url("/api/spatial/demonstrations.jsonl"));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("GET export");
    (response.status(), response.text().await.expect("a body"))
}

#[tokio::test]
async fn a_solved_attempt_is_judged_stored_and_exported_and_bad_ones_change_nothing() {
    let app = TestApp::spawn().await;
    let task: Value = app.get("/api/spatial/tasks/3/17").await;
    let expected = generate(17, 3);
    let task: Task = serde_json::from_value(task).expect("a task");
    assert_eq!(task, expected, "the same task as the generator's");

    let solution = solve::solve(&expected);
    let (status, result) = post_attempt(
        &app,
        &json!({"seed": 17, "difficulty": 3, "actions": solution.actions}),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    let score = result["verdict"]["score"].as_f64().unwrap();
    assert!(score >= 0.95, "{result}");
    assert!(
        (score - f64::from(solution.score)).abs() < 1e-6,
        "the same physics and scorer"
    );
    assert!(result["recording"]["frames"].as_array().unwrap().len() >= 2);
    assert_eq!(result["rested"], true);

    let movable = expected.movable[0].clone();
    let fixed = expected
        .objects
        .iter()
        .find(|o| !expected.is_movable(&o.id))
        .unwrap()
        .id
        .clone();
    let bad = [
        json!({"seed": 17, "difficulty": 3, "actions": [{"action": "move", "object": fixed, "x": 1.0, "z": 1.0, "y": null}]}),
        json!({"seed": 17, "difficulty": 3, "actions": [{"action": "move", "object": movable, "x": 40.0, "z": 1.0, "y": null}]}),
        json!({"seed": 17, "difficulty": 3, "actions": [{"action": "move", "object": "ghost", "x": 1.0, "z": 1.0, "y": null}]}),
        json!({"seed": 17, "difficulty": 3, "actions": []}),
        json!({"seed": 17, "difficulty": 9, "actions": [{"action": "rotate", "object": movable, "yaw_deg": 10.0}]}),
        json!({"seed": u64::MAX, "difficulty": 1, "actions": [{"action": "rotate", "object": movable, "yaw_deg": 10.0}]}),
        json!({"seed": 17, "difficulty": 3, "actions": [{"action": "fly", "object": movable}]}),
        json!({"seed": "seventeen"}),
    ];
    for body in bad {
        let (status, error) = post_attempt(&app, &body, None).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body} -> {error}"
        );
        assert!(error["detail"].is_string(), "a readable error: {error}");
    }
    let garbage = app
        .client
        .post(app.url("/api/spatial/attempts"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let (status, body) = export(&app, None).await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "only the good attempt was stored: {body}");
    assert_eq!(lines[0]["task_id"], "d3-s17");
    let stored: Vec<Action> = serde_json::from_value(lines[0]["actions"].clone()).unwrap();
    assert_eq!(stored, solution.actions);
    assert_eq!(lines[0]["id"], result["demonstration_id"]);

    let missing = app
        .client
        .get(app.url("/api/spatial/scenes/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        missing.status(),
        StatusCode::NOT_FOUND,
        "no scene before anything streamed"
    );
}

#[tokio::test]
async fn with_accounts_on_attempts_need_a_session_and_its_csrf_token() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let response = app
        .client
        .post(app.url("/api/auth/setup"))
        .json(&json!({"username": "grace", "password": "correct horse battery staple", "team": "lab"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let me: Value = response.json().await.unwrap();
    let csrf = me["csrf_token"].as_str().unwrap().to_string();

    let task = generate(5, 1);
    let body = json!({"seed": 5, "difficulty": 1, "actions": solve::solve(&task).actions});
    let anonymous = app
        .client
        .get(app.url("/api/spatial/tasks/1/5"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        post_attempt(&app, &body, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post_attempt(&app, &body, Some((&cookie, ""))).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        export(&app, Some(&cookie)).await.1,
        "",
        "nothing stored by refused attempts"
    );
    let (status, result) = post_attempt(&app, &body, Some((&cookie, &csrf))).await;
    assert_eq!(status, StatusCode::OK, "{result}");

    let (status, exported) = export(&app, Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    let line: Value = serde_json::from_str(exported.trim()).unwrap();
    assert_eq!(line["user"], "grace");
    assert_eq!(export(&app, None).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_streamed_episode_arrives_as_a_snapshot_then_chained_deltas() {
    let app = TestApp::spawn().await;
    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (streamer, player) = SceneStreamer::spawn(db, "test".into(), stopped);

    let ws_url = format!("{}/ws", app.base.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url)
        .await
        .expect("upgrade");
    assert!(matches!(next_msg(&mut ws).await, ServerMsg::Welcome { .. }));
    let topic = Topic::Scene {
        scene: "test".into(),
    };
    let subscribe = serde_json::to_string(&ClientMsg::Subscribe {
        topic: topic.clone(),
    })
    .unwrap();
    ws.send(Message::text(subscribe)).await.unwrap();

    let task = generate(8, 2);
    let answer = render_actions(&solve::solve(&task).actions);
    let (verdict, recording, attempt) = judge(&task, &answer);
    let frames = recording.frames.len();
    streamer.episode(Episode {
        task: task.clone(),
        caption: "test policy (attempt 1 of 1)".into(),
        attempt,
        recording,
        verdict: verdict.clone(),
    });

    let mut events = Vec::new();
    loop {
        match next_msg(&mut ws).await {
            ServerMsg::Subscribed { .. } => {}
            ServerMsg::Event {
                topic: t,
                event: LiveEvent::Scene(event),
            } => {
                assert_eq!(t, topic);
                let done = matches!(&*event, SceneEvent::Delta(d) if d.verdict.is_some());
                events.push(*event);
                if done {
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let SceneEvent::Snapshot(snapshot) = &events[0] else {
        panic!("a snapshot first: {:?}", events[0]);
    };
    assert_eq!(snapshot.task, task);
    assert_eq!(snapshot.verdict, None);
    let mut seq = snapshot.seq;
    for event in &events[1..] {
        let SceneEvent::Delta(delta) = event else {
            panic!("deltas after the snapshot: {event:?}");
        };
        assert_eq!(delta.base_seq, seq, "every delta applies to the one before");
        seq = delta.seq;
    }
    assert!(
        events.len() >= 2 && events.len() <= frames + 1,
        "{} events for {frames} frames",
        events.len()
    );
    let SceneEvent::Delta(last) = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(last.verdict.as_ref(), Some(&verdict));

    let latest: Value = app.get("/api/spatial/scenes/test").await;
    assert_eq!(latest["seq"].as_u64(), Some(seq));
    let stored: Verdict = serde_json::from_value(latest["verdict"].clone()).unwrap();
    assert_eq!(stored, verdict);
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), player).await;
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next protocol frame (pings skipped).
async fn next_msg(ws: &mut Ws) -> ServerMsg {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a frame");
        if let Message::Text(text) = frame {
            return serde_json::from_str(&text).expect("a server frame");
        }
    }
}
