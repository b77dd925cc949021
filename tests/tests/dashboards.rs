//! The dashboards' HTTP side: history for the charts, the rollout table with texts, status samples,
//! trainer metrics and the CSV/JSONL exports, all from groups posted through the Atropos API.

use std::time::{Duration, Instant};

use lachesis_tests::{TestApp, group, registration};
use serde_json::{Value, json};

/// A group of two sequences with chat messages and per-token advantages.
fn chat_group(question: &str, scores: [f64; 2], env_id: Option<i64>) -> Value {
    let mut body = group(5, 2, env_id);
    body["scores"] = json!(scores);
    body["advantages"] = json!([[0.5, 0.5, 0.5, 0.5], [-0.5, -0.5, -0.5, -0.5]]);
    body["messages"] = json!([
        [{"role": "user", "content": question}, {"role": "assistant", "content": "Answer: 4"}],
        [{"role": "user", "content": question}, {"role": "assistant", "content": "Answer: 5"}],
    ]);
    body
}

#[tokio::test]
async fn posted_groups_become_history_rows_samples_and_exports() {
    let app = TestApp::spawn().await;
    app.post("/runs/dash/register", &registration(2)).await;
    app.post(
        "/runs/dash/scored_data",
        &chat_group("What is 2 + 2?", [1.0, 0.0], None),
    )
    .await;
    app.post(
        "/runs/dash/scored_data_list",
        &json!([chat_group("What is 3 + 3?", [0.25, 0.75], None)]),
    )
    .await;
    let response = app
        .client
        .post(app.url("/runs/dash/trainer-metrics"))
        .json(&json!({"step": 1, "values": {"loss": 0.5, "kl": 0.01, "clip_fraction": 0.1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    let metrics = app.get("/api/runs/dash/metrics").await;
    let groups = metrics["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["scores"], json!([1.0, 0.0]));
    assert_eq!(groups[0]["advantages"], json!([0.5, -0.5]));
    assert_eq!(groups[0]["tokens"], 8);
    assert!(
        groups[0]["id"].as_i64() < groups[1]["id"].as_i64(),
        "oldest first"
    );
    assert_eq!(metrics["trainer"][0]["values"]["kl"], 0.01);

    // The sampler records step and queue depth within a couple of seconds of activity.
    let started = Instant::now();
    let status = loop {
        let status = app.get("/api/runs/dash/metrics").await["status"].clone();
        if status.as_array().is_some_and(|s| !s.is_empty()) {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no status sample"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status[0]["queue_size"], 2);

    let table = app.get("/api/runs/dash/groups?limit=1").await;
    assert_eq!(table.as_array().unwrap().len(), 1, "newest first, limited");
    let texts = &table[0]["texts"];
    assert!(
        texts[0].as_str().unwrap().contains("What is 3 + 3?"),
        "{texts}"
    );
    assert!(texts[1].as_str().unwrap().ends_with("assistant: Answer: 5"));

    let runs = app.get("/api/runs").await;
    let dash = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "dash")
        .unwrap();
    assert_eq!(
        (dash["groups"].clone(), dash["queue_size"].clone()),
        (json!(2), json!(2))
    );

    let csv = app
        .client
        .get(app.url("/api/runs/dash/export/metrics.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(csv.headers()["content-type"], "text/csv");
    let csv = csv.text().await.unwrap();
    assert!(csv.starts_with("series,at_ms,step,env_id,group_id,value\n"));
    assert!(
        csv.lines()
            .any(|l| l.starts_with("trainer/loss,") && l.ends_with(",0.5"))
    );
    assert_eq!(
        csv.lines()
            .filter(|l| l.starts_with("reward_mean,"))
            .count(),
        2
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("reward_mean,") && l.ends_with(",0.5"))
    );

    let jsonl = app
        .client
        .get(app.url("/api/runs/dash/export/rollouts.jsonl"))
        .send()
        .await
        .unwrap();
    let lines: Vec<Value> = jsonl
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1]["group"]["scores"],
        json!([1.0, 0.0]),
        "the first group, as served"
    );

    // /reset_data empties the queue; the dashboards keep the history.
    app.get("/runs/dash/reset_data").await;
    let after = app.get("/api/runs/dash/metrics").await;
    assert_eq!(after["groups"].as_array().unwrap().len(), 2);
    let table = app.get("/api/runs/dash/groups").await;
    assert_eq!(
        table[0]["texts"],
        json!([null, null]),
        "texts went with the payloads"
    );
}

#[tokio::test]
async fn bad_dashboard_requests_get_typed_errors() {
    let app = TestApp::spawn().await;
    for path in [
        "/api/runs/nope/metrics",
        "/api/runs/bad%20name",
        "/api/runs/nope/groups",
    ] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert!(body["detail"].is_string(), "{path}: {body}");
    }
    app.post("/runs/r/register", &registration(1)).await;
    let bad_query = app
        .client
        .get(app.url("/api/runs/r/groups?limit=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_query.status(), 400);
    let bad_metrics = app
        .client
        .post(app.url("/runs/r/trainer-metrics"))
        .json(&json!({"step": "one", "values": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_metrics.status(), 422);
}

#[tokio::test]
async fn groups_too_large_for_a_live_notice_are_still_stored() {
    let app = TestApp::spawn().await;
    app.post("/runs/big/register", &registration(1)).await;
    // 400 sequences whose scores need exponents: the notice cannot carry them.
    let mut body = group(3, 400, None);
    body["scores"] = json!(vec![1.5e-20; 400]);
    app.post("/runs/big/scored_data", &body).await;
    app.post("/runs/big/scored_data_list", &json!([body])).await;
    let metrics = app.get("/api/runs/big/metrics").await;
    let groups = metrics["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[1]["scores"].as_array().unwrap().len(), 400);
}

/// The runs list, `/status` and `/metrics` read running totals instead of counting groups; after
/// concurrent ingest on many connections, buffering, batches and a reset they still equal what a
/// count over the tables says.
#[tokio::test]
async fn run_totals_equal_the_counted_groups_through_ingest_batches_and_reset() {
    let app = TestApp::spawn().await;
    app.post("/runs/tally/register", &registration(8)).await;
    // The trainer's first `/batch` starts the run; environments may register after it.
    app.get("/runs/tally/batch").await;
    app.post(
        "/runs/tally/register-env",
        &lachesis_tests::env_registration("e", 4),
    )
    .await;
    let posts = (0..8).map(|worker| {
        let app = &app;
        async move {
            for i in 0..6 {
                app.post(
                    "/runs/tally/scored_data",
                    &group(worker * 100 + i, 4, Some(0)),
                )
                .await;
            }
        }
    });
    futures::future::join_all(posts).await;
    // Groups of 2 wait in the env's buffer until two of them make its group size of 4.
    for marker in [900, 901, 902] {
        app.post("/runs/tally/scored_data", &group(marker, 2, Some(0)))
            .await;
    }
    for _ in 0..5 {
        app.get("/runs/tally/batch").await;
    }

    let db = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let counted = |state: &'static str| {
        let db = db.clone();
        async move {
            let (n,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM groups WHERE run_id = 'tally' AND state = $1")
                    .bind(state)
                    .fetch_one(&db)
                    .await
                    .unwrap();
            n
        }
    };
    let (received, last_ms): (i64, i64) = sqlx::query_as(
        "SELECT count(*), (extract(epoch FROM max(received_at)) * 1000)::bigint
         FROM group_stats WHERE run_id = 'tally'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    let queued = counted("queued").await;
    assert_eq!(received, 51, "48 groups of 4 and 3 of 2 were acknowledged");
    assert_eq!(counted("buffered").await, 1);
    assert!(counted("batched").await > 0, "the batches took groups");
    assert!(queued > 0, "some groups are still queued");

    let listed = |runs: Value| {
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == "tally")
            .cloned()
            .expect("the run is listed")
    };
    let run = listed(app.get("/api/runs").await);
    assert_eq!(run["groups"], received);
    assert_eq!(run["queue_size"], queued);
    assert_eq!(run["last_group_at_ms"], last_ms);
    assert_eq!(app.get("/runs/tally/status").await["queue_size"], queued);
    let metrics = app.get_text("/metrics").await;
    assert!(
        metrics.contains(&format!("lachesis_queue_depth{{run=\"tally\"}} {queued}")),
        "{metrics}"
    );

    // A reset empties the queue and the buffer; the history and its count stay.
    app.get("/runs/tally/reset_data").await;
    let run = listed(app.get("/api/runs").await);
    assert_eq!(run["queue_size"], 0);
    assert_eq!(run["groups"], received);
    assert_eq!(counted("buffered").await + counted("queued").await, 0);
}
