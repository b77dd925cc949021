//! Accounts, sessions, CSRF, tokens, and the negative authorization matrix: a member of team A can
//! neither read nor write team B's runs over any route family, over HTTP or the live socket.

use futures::{SinkExt, StreamExt};
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, group, registration};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A signed-in browser: its session cookie and CSRF token.
type Session = (String, String);

async fn auth_app() -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    TestApp::spawn_with(config).await
}

async fn sign_up(app: &TestApp, path: &str, user: &str, team: &str) -> Session {
    let response = app
        .client
        .post(app.url(path))
        .json(&json!({"username": user, "password": "a long enough password", "team": team}))
        .send()
        .await
        .unwrap();
    session_from(response).await
}

async fn session_from(response: reqwest::Response) -> Session {
    assert_eq!(response.status(), StatusCode::OK);
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(
            set_cookie.contains(attribute),
            "{set_cookie} lacks {attribute}"
        );
    }
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let me: Value = response.json().await.unwrap();
    (cookie, me["csrf_token"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn the_first_run_creates_one_owner_and_passwords_are_stored_as_argon2id() {
    let app = auth_app().await;
    let state = app.get("/api/auth/state").await;
    assert_eq!(
        state,
        json!({"enabled": true, "needs_first_owner": true, "registration": "open"})
    );
    let owner = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let (status, me) = app
        .call(Caller::Session(&owner), Method::GET, "/api/me", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["user"]["username"], "ada");
    assert_eq!(me["teams"], json!([{"team": "lab", "role": "owner"}]));
    let (again, _) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/auth/setup",
            Some(json!({"username": "eve", "password": "a long enough password", "team": "x"})),
        )
        .await;
    assert_eq!(again, StatusCode::CONFLICT);
    assert_eq!(app.get("/api/auth/state").await["needs_first_owner"], false);
    let (anonymous, _) = app.call(Caller::Nobody, Method::GET, "/api/me", None).await;
    assert_eq!(anonymous, StatusCode::UNAUTHORIZED);
    let db = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let (hash,): (String,) =
        sqlx::query_as("SELECT password_hash FROM users WHERE username = 'ada'")
            .fetch_one(&db)
            .await
            .unwrap();
    assert!(hash.starts_with("$argon2id$") && !hash.contains("a long enough password"));
    let (short, body) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/auth/register",
            Some(json!({"username": "bob", "password": "short"})),
        )
        .await;
    assert_eq!(short, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (bad_json, body) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/auth/login",
            Some(json!({"user": 1})),
        )
        .await;
    assert_eq!(bad_json, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["detail"].is_string(), "{body}");
}

#[tokio::test]
async fn sign_in_is_rate_limited_and_sign_out_ends_the_session() {
    let app = auth_app().await;
    let owner = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let login = |password: &str| json!({"username": "ada", "password": password});
    for _ in 0..5 {
        let (status, _) = app
            .call(
                Caller::Nobody,
                Method::POST,
                "/api/auth/login",
                Some(login("wrong password!")),
            )
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (limited, _) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/auth/login",
            Some(login("a long enough password")),
        )
        .await;
    assert_eq!(limited, StatusCode::TOO_MANY_REQUESTS);
    let (out, _) = app
        .call(
            Caller::Session(&owner),
            Method::POST,
            "/api/auth/logout",
            None,
        )
        .await;
    assert_eq!(out, StatusCode::NO_CONTENT);
    let (after, _) = app
        .call(Caller::Session(&owner), Method::GET, "/api/me", None)
        .await;
    assert_eq!(after, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn cookie_mutations_need_the_csrf_token() {
    let app = auth_app().await;
    let owner = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let without = app
        .client
        .post(app.url("/api/teams"))
        .header("cookie", &owner.0)
        .json(&json!({"name": "second"}))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), StatusCode::FORBIDDEN);
    let (with, _) = app
        .call(
            Caller::Session(&owner),
            Method::POST,
            "/api/teams",
            Some(json!({"name": "second"})),
        )
        .await;
    assert_eq!(with, StatusCode::OK);
    let trajectory = app
        .client
        .post(app.url("/runs/r1/register"))
        .header("cookie", &owner.0)
        .json(&registration(2))
        .send()
        .await
        .unwrap();
    assert_eq!(trajectory.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn tokens_are_shown_once_stored_hashed_and_revocable() {
    let app = auth_app().await;
    let owner = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let token = app
        .new_token(&owner, "lab", json!({"name": "trainer", "run": "r1"}))
        .await;
    let (_, listed) = app
        .call(
            Caller::Session(&owner),
            Method::GET,
            "/api/teams/lab/tokens",
            None,
        )
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(
        !listed.to_string().contains(&token),
        "a listing must never show the secret"
    );
    let db = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let stored: Vec<(Vec<u8>,)> = sqlx::query_as("SELECT token_hash FROM api_tokens")
        .fetch_all(&db)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0.len(), 32);
    assert!(!String::from_utf8_lossy(&stored[0].0).contains(&token));
    // A run-scoped token serves its run on the legacy paths, as unmodified atroposlib clients call.
    let (registered, _) = app
        .call(
            Caller::Token(&token),
            Method::POST,
            "/register",
            Some(registration(2)),
        )
        .await;
    assert_eq!(registered, StatusCode::OK);
    let (info, body) = app
        .call(Caller::Token(&token), Method::GET, "/runs/r1/info", None)
        .await;
    assert_eq!(
        (info, body["batch_size"].clone()),
        (StatusCode::OK, json!(2))
    );
    let id = listed[0]["id"].as_i64().unwrap();
    let (revoked, _) = app
        .call(
            Caller::Session(&owner),
            Method::DELETE,
            &format!("/api/teams/lab/tokens/{id}"),
            None,
        )
        .await;
    assert_eq!(revoked, StatusCode::NO_CONTENT);
    let (after, _) = app
        .call(Caller::Token(&token), Method::GET, "/info", None)
        .await;
    assert_eq!(after, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_member_of_team_b_can_neither_read_nor_write_team_a_runs() {
    let app = auth_app().await;
    let alice = sign_up(&app, "/api/auth/setup", "alice", "team-a").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "team-b").await;
    let a_token = app.new_token(&alice, "team-a", json!({"name": "a"})).await;
    let b_token = app.new_token(&bob, "team-b", json!({"name": "b"})).await;
    // Team A's run, with a group in it.
    for (path, body) in [
        ("/runs/a-run/register", registration(1)),
        ("/runs/a-run/scored_data", group(1, 2, None)),
    ] {
        let (status, answer) = app
            .call(Caller::Token(&a_token), Method::POST, path, Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    }
    let (own, _) = app
        .call(
            Caller::Session(&alice),
            Method::GET,
            "/api/runs/a-run/metrics",
            None,
        )
        .await;
    assert_eq!(own, StatusCode::OK);

    let trajectory: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/runs/a-run/info", None),
        (Method::GET, "/runs/a-run/status", None),
        (Method::GET, "/runs/a-run/latest_example", None),
        (Method::GET, "/runs/a-run/batch", None),
        (Method::GET, "/runs/a-run/reset_data", None),
        (Method::POST, "/runs/a-run/register", Some(registration(1))),
        (
            Method::POST,
            "/runs/a-run/register-env",
            Some(
                json!({"max_token_length": 8, "desired_name": "x", "weight": 1.0, "group_size": 2}),
            ),
        ),
        (
            Method::POST,
            "/runs/a-run/scored_data",
            Some(group(9, 2, None)),
        ),
        (
            Method::POST,
            "/runs/a-run/scored_data_list",
            Some(json!([group(9, 2, None)])),
        ),
        (
            Method::POST,
            "/runs/a-run/trainer-metrics",
            Some(json!({"step": 1, "values": {"loss": 1.0}})),
        ),
    ];
    let dashboards: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/api/runs/a-run", None),
        (Method::GET, "/api/runs/a-run/metrics", None),
        (Method::GET, "/api/runs/a-run/groups", None),
        (Method::GET, "/api/runs/a-run/export/metrics.csv", None),
        (Method::GET, "/api/runs/a-run/export/rollouts.jsonl", None),
        (
            Method::PUT,
            "/api/runs/a-run/visibility",
            Some(json!({"public": true})),
        ),
    ];
    let teams: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/api/teams/team-a/members", None),
        (
            Method::POST,
            "/api/teams/team-a/members",
            Some(json!({"username": "bob", "role": "owner"})),
        ),
        (Method::DELETE, "/api/teams/team-a/members/alice", None),
        (Method::GET, "/api/teams/team-a/tokens", None),
        (
            Method::POST,
            "/api/teams/team-a/tokens",
            Some(json!({"name": "stolen"})),
        ),
        (Method::DELETE, "/api/teams/team-a/tokens/1", None),
    ];
    for (method, path, body) in trajectory.iter().chain(&dashboards).chain(&teams) {
        for who in [Caller::Session(&bob), Caller::Token(&b_token)] {
            let label = match who {
                Caller::Session(_) => "bob's session",
                _ => "team B's token",
            };
            let (status, answer) = app.call(who, method.clone(), path, body.clone()).await;
            let refused = [StatusCode::NOT_FOUND, StatusCode::FORBIDDEN].contains(&status);
            assert!(
                refused,
                "{label} got {status} for {method} {path}: {answer}"
            );
        }
        let (status, _) = app
            .call(Caller::Nobody, method.clone(), path, body.clone())
            .await;
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::NOT_FOUND,
            "anonymous got {status} for {method} {path}"
        );
    }
    let (_, listed) = app
        .call(Caller::Session(&bob), Method::GET, "/api/runs", None)
        .await;
    assert!(!listed.to_string().contains("a-run"), "{listed}");
    // Nothing changed: still one group, still private, still alice's team and token.
    let (_, metrics) = app
        .call(
            Caller::Session(&alice),
            Method::GET,
            "/api/runs/a-run/metrics",
            None,
        )
        .await;
    assert_eq!(metrics["groups"].as_array().unwrap().len(), 1);
    let (_, members) = app
        .call(
            Caller::Session(&alice),
            Method::GET,
            "/api/teams/team-a/members",
            None,
        )
        .await;
    assert_eq!(members, json!([{"username": "alice", "role": "owner"}]));
    // The model and Prometheus: any signed-in caller, and the admin token only, respectively.
    let (inference, _) = app
        .call(Caller::Nobody, Method::GET, "/v1/models", None)
        .await;
    assert_eq!(inference, StatusCode::UNAUTHORIZED);
    let (prometheus, _) = app
        .call(Caller::Token(&b_token), Method::GET, "/metrics", None)
        .await;
    assert_eq!(prometheus, StatusCode::UNAUTHORIZED);
    // The live socket: bob's subscription to team A's run is refused, alice's accepted.
    assert_eq!(subscribe(&app, &bob, "a-run").await["type"], "error");
    assert_eq!(subscribe(&app, &alice, "a-run").await["type"], "subscribed");
}

/// Subscribes to a run's topic with a session cookie and returns the server's answer frame.
async fn subscribe(app: &TestApp, session: &Session, run: &str) -> Value {
    let mut request = app
        .url("/ws")
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("cookie", session.0.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let welcome = next_json(&mut socket).await;
    assert_eq!(welcome["type"], "welcome");
    let frame = json!({"type": "subscribe", "topic": {"kind": "run", "run": run}});
    socket.send(Message::text(frame.to_string())).await.unwrap();
    next_json(&mut socket).await
}

async fn next_json<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        match socket.next().await.expect("an open socket").unwrap() {
            Message::Text(text) => return serde_json::from_str(&text).unwrap(),
            _ => continue,
        }
    }
}

#[tokio::test]
async fn roles_and_public_runs_grant_reading_without_writing() {
    let app = auth_app().await;
    let alice = sign_up(&app, "/api/auth/setup", "alice", "team-a").await;
    let carol = sign_up(&app, "/api/auth/register", "carol", "carols").await;
    let token = app
        .new_token(&alice, "team-a", json!({"name": "a", "run": "shared"}))
        .await;
    let (status, _) = app
        .call(
            Caller::Token(&token),
            Method::POST,
            "/register",
            Some(registration(1)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (added, _) = app
        .call(
            Caller::Session(&alice),
            Method::POST,
            "/api/teams/team-a/members",
            Some(json!({"username": "carol", "role": "viewer"})),
        )
        .await;
    assert_eq!(added, StatusCode::OK);
    let (reads, _) = app
        .call(
            Caller::Session(&carol),
            Method::GET,
            "/api/runs/shared",
            None,
        )
        .await;
    assert_eq!(reads, StatusCode::OK);
    let (writes, _) = app
        .call(
            Caller::Session(&carol),
            Method::PUT,
            "/api/runs/shared/visibility",
            Some(json!({"public": true})),
        )
        .await;
    assert_eq!(writes, StatusCode::FORBIDDEN);
    let (last_owner, _) = app
        .call(
            Caller::Session(&alice),
            Method::POST,
            "/api/teams/team-a/members",
            Some(json!({"username": "alice", "role": "member"})),
        )
        .await;
    assert_eq!(
        last_owner,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a team keeps an owner"
    );
    let (anonymous, _) = app
        .call(Caller::Nobody, Method::GET, "/api/runs/shared", None)
        .await;
    assert_eq!(anonymous, StatusCode::UNAUTHORIZED);
    let (public, _) = app
        .call(
            Caller::Session(&alice),
            Method::PUT,
            "/api/runs/shared/visibility",
            Some(json!({"public": true})),
        )
        .await;
    assert_eq!(public, StatusCode::NO_CONTENT);
    let (visitor, run) = app
        .call(Caller::Nobody, Method::GET, "/api/runs/shared", None)
        .await;
    assert_eq!(
        (visitor, run["public"].clone()),
        (StatusCode::OK, json!(true))
    );
    let (visitor_writes, _) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/runs/shared/scored_data",
            Some(group(1, 2, None)),
        )
        .await;
    assert_eq!(visitor_writes, StatusCode::UNAUTHORIZED);
}

#[path = "accounts/feedback.rs"]
mod feedback;
#[path = "accounts/human_judge.rs"]
mod human_judge;
#[path = "accounts/signals.rs"]
mod signals;
