//! Bad input gets a clear 4xx JSON error and changes nothing.

use lachesis_tests::{
    TestApp, config_for, env_registration, fresh_database, group, gzip, registration,
};
use serde_json::{Value, json};

async fn registered_app() -> TestApp {
    let app = TestApp::spawn().await;
    app.post("/register", &registration(4)).await;
    app.get("/batch").await;
    app.post("/register-env", &env_registration("env", 4)).await;
    app
}

/// Posts raw bytes and returns (status, JSON body).
async fn post_raw(app: &TestApp, path: &str, body: Vec<u8>, gzipped: bool) -> (u16, Value) {
    let mut req = app
        .client
        .post(app.url(path))
        .header("content-type", "application/json")
        .body(body);
    if gzipped {
        req = req.header("content-encoding", "gzip");
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("error bodies are JSON, got {text:?}"));
    (status, body)
}

async fn post_value(app: &TestApp, path: &str, value: &Value) -> (u16, Value) {
    post_raw(app, path, serde_json::to_vec(value).unwrap(), false).await
}

async fn assert_nothing_queued(app: &TestApp) {
    assert_eq!(
        app.get("/status").await["queue_size"],
        0,
        "a rejected request must not change the queue"
    );
    assert_eq!(app.get("/latest_example").await["tokens"], json!([]));
}

#[tokio::test]
async fn malformed_json_is_a_422_naming_the_problem() {
    let app = registered_app().await;
    let (status, body) = post_raw(
        &app,
        "/scored_data",
        b"{\"tokens\": [[1, 2]".to_vec(),
        false,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["type"], "json_invalid");
    assert_eq!(body["detail"][0]["loc"][0], "body");
    assert_nothing_queued(&app).await;
}

#[tokio::test]
async fn wrong_types_are_located_down_to_the_element() {
    let app = registered_app().await;
    let bad = json!({"tokens": [[1, "two"]], "masks": [[1, 2]], "scores": [1.0]});
    let (status, body) = post_value(&app, "/scored_data", &bad).await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["type"], "int_type");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "tokens", 0, 1]));

    let bad = json!({"tokens": [[1]], "masks": [[1]], "scores": "high"});
    let (status, body) = post_value(&app, "/scored_data", &bad).await;
    assert_eq!(
        (status, body["detail"][0]["loc"].clone()),
        (422, json!(["body", "scores"]))
    );
    assert_nothing_queued(&app).await;
}

#[tokio::test]
async fn missing_fields_are_named() {
    let app = registered_app().await;
    let (status, body) = post_raw(
        &app,
        "/scored_data",
        br#"{"tokens": [[1]], "scores": [1]}"#.to_vec(),
        false,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["detail"][0],
        json!({"type": "missing", "loc": ["body", "masks"], "msg": "Field required"})
    );
    let (status, body) = post_raw(
        &app,
        "/register",
        br#"{"wandb_group": "g"}"#.to_vec(),
        false,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["type"], "missing");
    assert_eq!(
        app.get("/info").await["batch_size"],
        4,
        "a bad registration changes nothing"
    );
}

#[tokio::test]
async fn messages_without_role_or_content_are_refused() {
    let app = registered_app().await;
    let mut bad = group(1, 1, None);
    bad["messages"] = json!([[{"role": "user"}]]);
    let (status, body) = post_value(&app, "/scored_data", &bad).await;
    assert_eq!(status, 422);
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("'role' and 'content'")
    );
    // In a list, one bad group rejects the whole list.
    let list = json!([group(2, 4, Some(0)), bad]);
    let (status, body) = post_value(&app, "/scored_data_list", &list).await;
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["loc"], json!(["body", 1, "messages"]));
    assert_nothing_queued(&app).await;
}

#[tokio::test]
async fn bad_gzip_is_a_400_invalid_gzip_payload() {
    let app = registered_app().await;
    let (status, body) =
        post_raw(&app, "/scored_data", b"definitely not gzip".to_vec(), true).await;
    assert_eq!(status, 400);
    assert_eq!(body["detail"], "Invalid gzip payload");
    // A truncated stream is just as bad.
    let mut cut = gzip(&serde_json::to_vec(&group(1, 4, Some(0))).unwrap());
    cut.truncate(cut.len() / 2);
    let (status, _) = post_raw(&app, "/scored_data", cut, true).await;
    assert_eq!(status, 400);
    assert_nothing_queued(&app).await;
}

#[tokio::test]
async fn oversized_bodies_and_gzip_bombs_are_413() {
    let mut config = config_for(&fresh_database().await);
    config.body_limit_bytes = 64 * 1024;
    let app = TestApp::spawn_with(config).await;
    app.post("/register", &registration(4)).await;
    let mut huge = group(1, 4, None);
    huge["tokens"] = json!(vec![vec![7; 20_000]; 4]);
    let (status, body) = post_value(&app, "/scored_data", &huge).await;
    assert_eq!(status, 413);
    assert!(body["detail"].as_str().unwrap().contains("larger than"));
    // Small on the wire, far past the limit once inflated.
    let bomb = gzip(&vec![b' '; 4 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024);
    let (status, _) = post_raw(&app, "/scored_data", bomb, true).await;
    assert_eq!(status, 413);
    assert_nothing_queued(&app).await;
}

#[tokio::test]
async fn unknown_envs_bad_run_names_and_bad_registrations_are_clear_errors() {
    let app = registered_app().await;
    let resp = app
        .client
        .get(app.url("/status-env"))
        .json(&json!({"env_id": 9}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(
        resp.json::<Value>().await.unwrap()["detail"]
            .as_str()
            .unwrap()
            .contains("not registered")
    );

    let resp = app
        .client
        .get(app.url("/runs/bad%20name/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    let mut zero = env_registration("env", 0);
    zero["group_size"] = json!(0);
    let (status, _) = post_value(&app, "/register-env", &zero).await;
    assert_eq!(status, 422);
    let (status, _) = post_raw(
        &app,
        "/register",
        serde_json::to_vec(&registration(0)).unwrap(),
        false,
    )
    .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn with_a_token_configured_the_api_requires_it() {
    let mut config = config_for(&fresh_database().await);
    config.api_token = Some("s3cret-token".into());
    let app = TestApp::spawn_with(config).await;
    let resp = app.client.get(app.url("/info")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = app
        .client
        .get(app.url("/info"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = app
        .client
        .get(app.url("/info"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = app
        .client
        .get(app.url("/runs/x/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "every run's API is behind the token");
}
