//! The trajectory API behaves as atroposlib 0.4.0's server does, against the real app and Postgres.

use lachesis_tests::{TestApp, env_registration, group, gzip, markers, registration};
use serde_json::{Value, json};

#[tokio::test]
async fn before_registration_the_run_reports_nothing_and_refuses_batches() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/").await, json!({"message": "AtroposLib API"}));
    assert_eq!(
        app.get("/info").await,
        json!({"batch_size": -1, "max_token_len": -1})
    );
    assert_eq!(
        app.get("/wandb_info").await,
        json!({"group": null, "project": null})
    );
    assert_eq!(
        app.get("/status").await,
        json!({"current_step": 0, "queue_size": 0})
    );
    let batch = app.get("/batch").await;
    assert_eq!(batch["status"], "error");
    assert_eq!(
        batch["message"],
        "Trainer not registered. Call /register first."
    );
    assert_eq!(batch["batch"], json!([]));
}

#[tokio::test]
async fn a_trainer_registers_and_envs_wait_until_it_pulls_a_batch() {
    let app = TestApp::spawn().await;
    let first = app.post("/register", &registration(8)).await;
    assert!(
        first["uuid"].is_u64() || first["uuid"].is_number(),
        "uuid is an integer: {first}"
    );
    assert_eq!(
        app.get("/info").await,
        json!({"batch_size": 8, "max_token_len": 2048})
    );
    assert_eq!(
        app.get("/wandb_info").await,
        json!({"group": "group", "project": "project"})
    );

    let waiting = app
        .post("/register-env", &env_registration("gsm8k", 4))
        .await;
    assert_eq!(waiting, json!({"status": "wait for trainer to start"}));

    assert_eq!(app.get("/batch").await, json!({"batch": null}));
    let env = app
        .post("/register-env", &env_registration("gsm8k", 4))
        .await;
    assert_eq!(env["status"], "success");
    assert_eq!(env["env_id"], 0);
    assert_eq!(env["wandb_name"], "gsm8k_0");
    assert_eq!(env["checkpoint_dir"], "/tmp/ckpt");
    assert_eq!(env["checkpoint_interval"], 10);
    assert_eq!(env["num_steps"], 100);
    let twin = app
        .post("/register-env", &env_registration("gsm8k", 4))
        .await;
    assert_eq!(
        (twin["env_id"].as_i64(), twin["wandb_name"].as_str()),
        (Some(1), Some("gsm8k_1"))
    );

    // A second registration keeps the first one's settings, as atroposlib does.
    app.post("/register", &registration(64)).await;
    assert_eq!(app.get("/info").await["batch_size"], 8);
}

async fn registered_app(batch_size: i64, group_size: i64) -> TestApp {
    let app = TestApp::spawn().await;
    app.post("/register", &registration(batch_size)).await;
    app.get("/batch").await;
    app.post("/register-env", &env_registration("env", group_size))
        .await;
    app
}

#[tokio::test]
async fn groups_are_batched_in_exact_sizes_oldest_first_and_served_once() {
    let app = registered_app(8, 4).await;
    for marker in 1..=5 {
        assert_eq!(
            app.post("/scored_data", &group(marker, 4, Some(0))).await,
            json!({"status": "received"})
        );
    }
    assert_eq!(
        app.get("/status").await,
        json!({"current_step": 0, "queue_size": 5})
    );
    let latest = app.get("/latest_example").await;
    assert_eq!(latest["tokens"][0][0], 5);
    for field in [
        "advantages",
        "ref_logprobs",
        "messages",
        "generation_params",
        "inference_logprobs",
        "overrides",
    ] {
        assert_eq!(latest[field], Value::Null, "{field} is written out as null");
    }

    // One call forms both possible batches (the step advances by two) and serves the oldest.
    let first = app.get("/batch").await;
    assert_eq!(markers(&first), vec![1, 2]);
    assert_eq!(
        app.get("/status").await,
        json!({"current_step": 2, "queue_size": 1})
    );
    assert_eq!(markers(&app.get("/batch").await), vec![3, 4]);
    assert_eq!(app.get("/batch").await["batch"], Value::Null);
    assert_eq!(
        app.get("/status").await,
        json!({"current_step": 2, "queue_size": 1})
    );
}

#[tokio::test]
async fn odd_sized_groups_wait_in_the_buffer_until_they_complete_a_group() {
    let app = registered_app(4, 4).await;
    assert_eq!(
        app.post("/scored_data", &group(1, 3, Some(0))).await,
        json!({"status": "buffered", "buffer_size": 3})
    );
    assert_eq!(
        app.post("/scored_data", &group(2, 2, Some(0))).await,
        json!({"status": "buffered", "buffer_size": 5})
    );
    assert_eq!(app.get("/status").await["queue_size"], 0);
    // 2 + 2 sum to the group size: both leave the buffer for the queue; the 3 keeps waiting.
    assert_eq!(
        app.post("/scored_data", &group(3, 2, Some(0))).await,
        json!({"status": "buffered", "buffer_size": 3})
    );
    assert_eq!(app.get("/status").await["queue_size"], 2);
    assert_eq!(markers(&app.get("/batch").await), vec![2, 3]);
}

#[tokio::test]
async fn a_list_of_groups_is_taken_in_one_call() {
    let app = registered_app(8, 4).await;
    let list = json!([
        group(1, 4, Some(0)),
        group(2, 2, Some(0)),
        group(3, 4, Some(0))
    ]);
    let answer = app.post("/scored_data_list", &list).await;
    assert_eq!(
        answer,
        json!({"status": "received", "groups_processed": 3, "buffered": 1, "last_buffer_size": 2})
    );
    assert_eq!(app.get("/status").await["queue_size"], 2);
}

#[tokio::test]
async fn status_env_reports_atropos_figures_and_disconnects_are_honoured() {
    let app = registered_app(16, 4).await;
    app.post(
        "/register-env",
        &json!({"max_token_length": 6144, "desired_name": "other", "weight": 1.0,
        "group_size": 4, "min_batch_allocation": 0.25}),
    )
    .await;
    for marker in 0..3 {
        app.post("/scored_data", &group(marker, 4, Some(0))).await;
    }
    app.post("/scored_data", &group(9, 4, Some(1))).await;
    let figures = app
        .get_with_body("/status-env", &json!({"env_id": 0}))
        .await;
    assert_eq!(figures["current_step"], 0);
    assert_eq!(figures["self_queue_size"], 3);
    // Own 12 sequences + env 1's one pack of 4 less its reserved 16*0.25 = 4: 12 / 4.
    assert_eq!(figures["queue_size"], 3);
    assert_eq!(figures["max_group_size"], 4);
    assert_eq!(figures["unallocated_fraction"], 0.75);
    assert_eq!(figures["env_weight"], 0.25);

    assert_eq!(
        app.post("/disconnect-env", &json!({"env_id": 1})).await,
        json!({"status": "success"})
    );
    let figures = app
        .get_with_body("/status-env", &json!({"env_id": 0}))
        .await;
    assert_eq!(
        (
            figures["env_weight"].as_f64(),
            figures["unallocated_fraction"].as_f64()
        ),
        (Some(1.0), Some(1.0))
    );
    assert_eq!(
        app.post("/disconnect-env", &json!({"env_id": 7})).await["status"],
        "failure"
    );
}

#[tokio::test]
async fn reset_forgets_the_run() {
    let app = registered_app(4, 4).await;
    app.post("/scored_data", &group(1, 4, Some(0))).await;
    let resp = app.client.get(app.url("/reset_data")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "Reset successful");
    assert_eq!(
        app.get("/status").await,
        json!({"current_step": 0, "queue_size": 0})
    );
    assert_eq!(
        app.get("/info").await,
        json!({"batch_size": -1, "max_token_len": -1})
    );
    assert_eq!(app.get("/latest_example").await["tokens"], json!([]));
}

#[tokio::test]
async fn runs_side_by_side_do_not_see_each_other() {
    let app = registered_app(4, 4).await;
    app.post("/runs/exp-2/register", &registration(8)).await;
    app.post("/scored_data", &group(1, 4, Some(0))).await;
    app.post("/runs/exp-2/scored_data", &group(2, 4, None))
        .await;
    app.post("/runs/exp-2/scored_data", &group(3, 4, None))
        .await;
    assert_eq!(app.get("/runs/exp-2/info").await["batch_size"], 8);
    assert_eq!(markers(&app.get("/batch").await), vec![1]);
    assert_eq!(markers(&app.get("/runs/exp-2/batch").await), vec![2, 3]);
    assert_eq!(app.get("/runs/default/status").await["current_step"], 1);
}

#[tokio::test]
async fn batches_report_the_weight_versions_of_their_groups() {
    let app = registered_app(8, 4).await;
    for (marker, version) in [(1, 3), (2, 5)] {
        let mut g = group(marker, 4, Some(0));
        g["weight_version"] = json!(version);
        app.post("/scored_data", &g).await;
    }
    let batch = app.get("/batch").await;
    assert_eq!(batch["weight_versions"], json!([3, 5]));
    assert_eq!(batch["batch"][1]["weight_version"], 5);
}

#[tokio::test]
async fn gzip_bodies_are_accepted_and_large_answers_are_compressed() {
    let app = registered_app(8, 4).await;
    let body = serde_json::to_vec(&group(42, 4, Some(0))).unwrap();
    let resp = app
        .client
        .post(app.url("/scored_data"))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(gzip(&body))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["status"], "received");

    let mut big = group(43, 4, Some(0));
    big["tokens"] = json!(vec![vec![43; 400]; 4]);
    app.post("/scored_data", &big).await;
    // A client that accepts gzip but does not decode it, so the encoding stays visible.
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let get_accepting_gzip = |path: &str| {
        raw.get(app.url(path))
            .header("accept-encoding", "gzip")
            .send()
    };
    let encoding = |resp: &reqwest::Response| {
        resp.headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let resp = get_accepting_gzip("/latest_example").await.unwrap();
    assert_eq!(
        encoding(&resp).as_deref(),
        Some("gzip"),
        "answers of 1000 bytes and more are gzipped"
    );
    // Batches go uncompressed unless the server is told otherwise (deflate costs more than it saves).
    let resp = get_accepting_gzip("/batch").await.unwrap();
    assert_eq!(encoding(&resp), None);
    assert_eq!(
        lachesis_tests::markers(&resp.json().await.unwrap()),
        vec![42, 43]
    );
}

#[tokio::test]
async fn batches_are_gzipped_when_configured() {
    let mut config = lachesis_tests::config_for(&lachesis_tests::fresh_database().await);
    config.batch_gzip = true;
    let app = TestApp::spawn_with(config).await;
    app.post("/register", &registration(4)).await;
    app.post("/scored_data", &group(7, 4, None)).await;
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let resp = raw
        .get(app.url("/batch"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers().get("content-encoding").unwrap(), "gzip");
    let mut json = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&resp.bytes().await.unwrap()[..]),
        &mut json,
    )
    .unwrap();
    let batch: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(markers(&batch), vec![7]);
    // A client that does not take gzip gets plain JSON from the same server.
    let resp = raw.get(app.url("/batch")).send().await.unwrap();
    assert_eq!(resp.headers().get("content-encoding"), None);
}

#[tokio::test]
async fn metrics_count_groups_batches_and_latency() {
    let app = registered_app(4, 4).await;
    app.post("/scored_data", &group(1, 4, Some(0))).await;
    app.post("/scored_data", &group(2, 2, Some(0))).await;
    app.get("/batch").await;
    let text = app.get_text("/metrics").await;
    for line in [
        "lachesis_groups_received_total{run=\"default\"} 2",
        "lachesis_groups_buffered_total{run=\"default\"} 1",
        "lachesis_groups_batched_total{run=\"default\"} 1",
        "lachesis_batches_served_total{run=\"default\"} 1",
        "lachesis_queue_depth{run=\"default\"} 0",
        "lachesis_buffered_groups{run=\"default\"} 1",
    ] {
        assert!(text.contains(line), "metrics lack `{line}`:\n{text}");
    }
    assert!(text.contains("lachesis_http_request_duration_seconds_count{method=\"POST\",route=\"/scored_data\",status=\"200\"} 2"));
}

#[tokio::test]
async fn browsers_get_the_page_at_the_root() {
    let app = TestApp::spawn().await;
    let resp = app
        .client
        .get(app.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("<html") || page.contains("<!DOCTYPE"),
        "the root serves the app's page"
    );
    assert!(
        page.contains(".wasm") || page.contains(".js"),
        "the page loads the wasm app"
    );
    // The app's own addresses load the app too (reloads, shared links); other misses stay 404s.
    let html = |path: &str| {
        app.client
            .get(app.url(path))
            .header("accept", "text/html")
            .send()
    };
    let deep = html("/runs/some-run").await.unwrap();
    assert_eq!(deep.status(), 200);
    assert_eq!(deep.text().await.unwrap(), page);
    assert_eq!(html("/missing.js").await.unwrap().status(), 404);
    assert_eq!(html("/api/nothing").await.unwrap().status(), 404);
    let json_client = app
        .client
        .get(app.url("/runs/some-run"))
        .send()
        .await
        .unwrap();
    assert_eq!(json_client.status(), 404);
}
