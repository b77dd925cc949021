//! Attacks on a hosted server and on a laptop's loopback server, played against the real app and
//! Postgres: tokens acting beyond their scope, a revoked token's socket, web pages reaching a
//! loopback server, and requests sized to exhaust it.

use futures::{SinkExt, StreamExt};
use lachesis_tests::{
    Caller, TestApp, config_for, env_registration, fresh_database, group, registration, sign_up,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

async fn token(app: &TestApp, owner: &(String, String), body: Value) -> (i64, String) {
    let (status, created) = app
        .call(
            Caller::Session(owner),
            Method::POST,
            "/api/teams/cats-inc/tokens",
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    (
        created["info"]["id"].as_i64().unwrap(),
        created["token"].as_str().unwrap().to_string(),
    )
}

async fn count(db: &sqlx::PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(db)
        .await
        .unwrap()
}

async fn hosted() -> (TestApp, sqlx::PgPool, (String, String)) {
    let url = fresh_database().await;
    let mut config = config_for(&url);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let owner = sign_up(&app, "/api/auth/setup", "ada", "cats-inc").await;
    let db = lachesis::db::connect(&url, 2).await.unwrap();
    (app, db, owner)
}

#[tokio::test]
async fn a_read_only_token_changes_nothing_anywhere() {
    let (app, db, ada) = hosted().await;
    let (_, runs) = token(&app, &ada, json!({"name": "writer", "run": "r1"})).await;
    let (status, _) = app
        .call(
            Caller::Token(&runs),
            Method::POST,
            "/register",
            Some(registration(4)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, read_only) = token(&app, &ada, json!({"name": "dashboard", "read_only": true})).await;
    let before: Vec<i64> = futures::future::join_all(
        ["chess_games", "cat_sessions", "agent_cards", "groups"].map(|t| count(&db, t)),
    )
    .await;

    let attempts: Vec<(Method, &str, Option<Value>)> = vec![
        (
            Method::POST,
            "/api/chess/games",
            Some(json!({"agent_side": "black"})),
        ),
        (
            Method::POST,
            "/api/cats/sessions",
            Some(json!({"role": "caretaker"})),
        ),
        (Method::POST, "/api/spatial/attempts", Some(json!({}))),
        (
            Method::POST,
            "/api/marketplace/cards",
            Some(
                json!({"slug": "ro-card", "name": "x", "specialties": ["comfort"], "price": 1000,
                        "team": "cats-inc", "judge": {"kind": "rubric"}}),
            ),
        ),
        (
            Method::PATCH,
            "/api/marketplace/cards/panel-chair",
            Some(json!({"price": 1})),
        ),
        (
            Method::POST,
            "/runs/r1/scored_data",
            Some(group(1, 2, None)),
        ),
        (Method::GET, "/runs/r1/batch", None),
        (Method::GET, "/runs/r1/reset_data", None),
        (
            Method::PUT,
            "/api/runs/r1/visibility",
            Some(json!({"public": true})),
        ),
    ];
    for (method, path, body) in attempts {
        let (status, answer) = app
            .call(Caller::Token(&read_only), method.clone(), path, body)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
        assert!(
            answer["detail"].as_str().unwrap().contains("read-only"),
            "{answer}"
        );
    }
    let after: Vec<i64> = futures::future::join_all(
        ["chess_games", "cat_sessions", "agent_cards", "groups"].map(|t| count(&db, t)),
    )
    .await;
    assert_eq!(before, after, "nothing changed");
    // It still reads.
    let (status, _) = app
        .call(
            Caller::Token(&read_only),
            Method::GET,
            "/runs/r1/status",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_run_scoped_token_acts_only_in_its_run_and_only_owners_publish_runs() {
    let (app, db, ada) = hosted().await;
    let (_, scoped) = token(&app, &ada, json!({"name": "r1 only", "run": "r1"})).await;
    for (method, path, body) in [
        (Method::POST, "/api/chess/games", Some(json!({}))),
        (
            Method::POST,
            "/api/cats/sessions",
            Some(json!({"role": "caretaker"})),
        ),
        (
            Method::POST,
            "/api/marketplace/cards",
            Some(
                json!({"slug": "scoped-card", "name": "x", "specialties": ["comfort"],
                        "price": 1000, "team": "cats-inc", "judge": {"kind": "rubric"}}),
            ),
        ),
        (
            Method::PUT,
            "/api/runs/r1/visibility",
            Some(json!({"public": true})),
        ),
    ] {
        let (status, answer) = app
            .call(Caller::Token(&scoped), method.clone(), path, body)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
    }
    assert_eq!(count(&db, "chess_games").await, 0);
    // Its own run, by the legacy paths and by name; another run does not exist for it.
    let (status, _) = app
        .call(
            Caller::Token(&scoped),
            Method::POST,
            "/register",
            Some(registration(4)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .call(
            Caller::Token(&scoped),
            Method::POST,
            "/runs/r1/register-env",
            Some(env_registration("e", 2)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .call(
            Caller::Token(&scoped),
            Method::POST,
            "/runs/r2/register",
            Some(registration(4)),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A member may write the team's runs but not publish them; an owner may.
    let bob = sign_up(&app, "/api/auth/register", "bob", "bobs").await;
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::POST,
            "/api/teams/cats-inc/members",
            Some(json!({"username": "bob", "role": "member"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let publish = Some(json!({"public": true}));
    let (status, _) = app
        .call(
            Caller::Session(&bob),
            Method::PUT,
            "/api/runs/r1/visibility",
            publish.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::PUT,
            "/api/runs/r1/visibility",
            publish,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

async fn next_text(
    ws: &mut (impl StreamExt<Item = Result<Message, tungstenite::Error>> + Unpin),
) -> Option<Value> {
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return serde_json::from_str(&text).ok(),
            Ok(Some(Ok(Message::Close(frame)))) => {
                return Some(json!({"closed": frame.map(|f| u16::from(f.code))}));
            }
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_)) | None) => return Some(json!({"closed": null})),
            Err(_) => return None,
        }
    }
}

#[tokio::test]
async fn a_revoked_tokens_socket_goes_quiet_within_seconds() {
    let (app, _db, ada) = hosted().await;
    let (id, secret) = token(&app, &ada, json!({"name": "watcher", "run": "r1"})).await;
    let (status, _) = app
        .call(
            Caller::Token(&secret),
            Method::POST,
            "/register",
            Some(registration(4)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ws_url = app.base.replacen("http://", "ws://", 1) + "/ws";
    let mut request = ws_url.clone().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {secret}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(next_text(&mut ws).await.unwrap()["type"], "welcome");
    let subscribe = json!({"type": "subscribe", "topic": {"kind": "run", "run": "r1"}});
    ws.send(Message::Text(subscribe.to_string().into()))
        .await
        .unwrap();
    assert_eq!(next_text(&mut ws).await.unwrap()["type"], "subscribed");

    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::DELETE,
            &format!("/api/teams/cats-inc/tokens/{id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Whatever is still queued may arrive; then the server closes for a policy reason.
    let mut closed = None;
    for _ in 0..50 {
        match next_text(&mut ws).await {
            Some(frame) if frame.get("closed").is_some() => {
                closed = Some(frame["closed"].clone());
                break;
            }
            Some(_) => continue,
            None => break,
        }
    }
    assert_eq!(
        closed,
        Some(json!(1008)),
        "the socket was closed as revoked"
    );
    let mut again = ws_url.into_client_request().unwrap();
    again
        .headers_mut()
        .insert("authorization", format!("Bearer {secret}").parse().unwrap());
    match tokio_tungstenite::connect_async(again).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!(
            "a revoked token reconnected: {:?}",
            other.map(|(_, r)| r.status())
        ),
    }
}

#[tokio::test]
async fn a_loopback_server_refuses_web_pages_and_serves_programs() {
    let url = fresh_database().await;
    let app = TestApp::spawn_with(config_for(&url)).await;
    app.post("/register", &registration(4)).await;
    app.post("/register-env", &env_registration("env", 2)).await;
    app.post("/scored_data", &group(7, 2, Some(0))).await;
    let queued = || async { app.get("/status").await["queue_size"].as_i64().unwrap() };
    assert_eq!(queued().await, 1);

    // DNS rebinding: the page's own name, re-pointed at 127.0.0.1.
    let rebound = app
        .client
        .get(app.url("/status"))
        .header("host", "attacker.example:8000")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
    // A cross-site page's requests that would change something.
    for (method, path, headers) in [
        (
            Method::POST,
            "/register",
            vec![("origin", "https://attacker.example")],
        ),
        (
            Method::GET,
            "/reset_data",
            vec![("sec-fetch-site", "cross-site")],
        ),
        (
            Method::GET,
            "/reset_data",
            vec![("origin", "https://attacker.example")],
        ),
        (Method::POST, "/scored_data", vec![("origin", "null")]),
    ] {
        let mut request = app.client.request(method.clone(), app.url(path));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if method == Method::POST {
            request = request.json(&group(8, 2, Some(0)));
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert!(
            body["detail"].as_str().unwrap().contains("another site"),
            "{body}"
        );
    }
    // A form's body (no preflight) is not JSON by its declared type.
    let form = app
        .client
        .post(app.url("/scored_data"))
        .header("content-type", "text/plain")
        .body(serde_json::to_vec(&group(9, 2, Some(0))).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(queued().await, 1, "nothing was queued or reset by a page");
    // A page's WebSocket to the loopback server.
    let mut request = (app.base.replacen("http://", "ws://", 1) + "/ws")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("origin", "https://attacker.example".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    // Programs (no Origin) keep every path, atroposlib's GET /reset_data included.
    app.get("/reset_data").await;
    assert_eq!(queued().await, 0);
}

#[tokio::test]
async fn sizes_and_connections_are_bounded_by_flags() {
    let url = fresh_database().await;
    let mut config = config_for(&url);
    config.hosting.max_batch_size = 64;
    config.hosting.max_group_size = 16;
    config.hosting.ws_per_address = 2;
    let app = TestApp::spawn_with(config).await;
    for (path, body, field) in [
        ("/register", registration(65), "batch_size"),
        ("/register", registration(0), "batch_size"),
        ("/register-env", env_registration("e", 17), "group_size"),
        (
            "/register-env",
            env_registration("e", 1_000_000_000),
            "group_size",
        ),
    ] {
        let response = app
            .client
            .post(app.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path} {body}"
        );
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["detail"][0]["loc"][1], field, "{answer}");
    }
    assert_eq!(
        app.get("/info").await["batch_size"],
        -1,
        "no trainer registered"
    );
    app.post("/register", &registration(64)).await;

    let ws_url = app.base.replacen("http://", "ws://", 1) + "/ws";
    let first = tokio_tungstenite::connect_async(ws_url.clone())
        .await
        .unwrap();
    let second = tokio_tungstenite::connect_async(ws_url.clone())
        .await
        .unwrap();
    match tokio_tungstenite::connect_async(ws_url.clone()).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert!(response.headers().contains_key("retry-after"));
        }
        other => panic!(
            "a third socket from one address: {:?}",
            other.map(|(_, r)| r.status())
        ),
    }
    drop(first);
    // The slot comes back once the server sees the socket gone.
    let mut reconnected = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if tokio_tungstenite::connect_async(ws_url.clone())
            .await
            .is_ok()
        {
            reconnected = true;
            break;
        }
    }
    assert!(reconnected, "a closed socket's slot is freed");
    drop(second);
}
