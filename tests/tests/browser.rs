//! The browser end to end: a real Chromium, driven by `tests/browser/e2e.mjs` (playwright-core),
//! signs in to the real server with authentication on, watches a run's dashboard and sees groups
//! posted by a trainer's token appear on the chart and in the table without a reload; then, on the
//! settings page, creates an invite whose code lets a newcomer join the team.
//!
//! Needs what `make test` provides: the built frontend (`LACHESIS_STATIC_DIR`), Node with the
//! repo's `node_modules` (`npm ci`, done by scripts/ensure-tools.sh) and `/usr/bin/chromium` (or
//! `CHROMIUM`).

use std::time::Duration;

use lachesis_tests::browser::{check_prerequisites, run_script};
use lachesis_tests::{TestApp, config_for, fresh_database, registration};
use reqwest::StatusCode;
use serde_json::{Value, json};

const USERNAME: &str = "ada";
const PASSWORD: &str = "correct horse battery staple";
const TEAM: &str = "lab";
const RUN: &str = "e2e";

/// The first owner, through the first-run endpoint the sign-in page also uses; returns the
/// session cookie and CSRF token.
async fn create_first_owner(app: &TestApp) -> (String, String) {
    let response = app
        .client
        .post(app.url("/api/auth/setup"))
        .json(&json!({"username": USERNAME, "password": PASSWORD, "team": TEAM}))
        .send()
        .await
        .expect("POST /api/auth/setup");
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .expect("an ASCII cookie")
        .split(';')
        .next()
        .expect("a cookie pair")
        .to_string();
    let me: Value = response.json().await.expect("a Me body");
    let csrf = me["csrf_token"].as_str().expect("a CSRF token").to_string();
    (cookie, csrf)
}

async fn create_token(app: &TestApp, cookie: &str, csrf: &str) -> String {
    let response = app
        .client
        .post(app.url(&format!("/api/teams/{TEAM}/tokens")))
        .header("cookie", cookie)
        .header("x-csrf-token", csrf)
        .json(&json!({"name": "trainer"}))
        .send()
        .await
        .expect("POST tokens");
    assert_eq!(response.status(), StatusCode::OK);
    let created: Value = response.json().await.expect("a CreatedToken body");
    created["token"].as_str().expect("a secret").to_string()
}

#[tokio::test]
async fn a_signed_in_browser_sees_posted_groups_arrive_live() {
    check_prerequisites();
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;

    let (cookie, csrf) = create_first_owner(&app).await;
    let token = create_token(&app, &cookie, &csrf).await;
    let registered = app
        .client
        .post(app.url(&format!("/runs/{RUN}/register")))
        .bearer_auth(&token)
        .json(&registration(4))
        .send()
        .await
        .expect("POST register");
    assert_eq!(registered.status(), StatusCode::OK);

    let env = [
        ("USERNAME", USERNAME.to_string()),
        ("PASSWORD", PASSWORD.to_string()),
        ("RUN", RUN.to_string()),
        ("TOKEN", token.clone()),
    ];
    let report = run_script("e2e.mjs", &app.base, &env, Duration::from_secs(180))
        .await
        .passed();

    assert_eq!(report["signed_in"], true);
    assert_eq!(report["live"], true);
    assert_eq!(report["subscribed"], true);
    assert_eq!(report["texts_shown"], true, "an opened row shows its texts");
    assert_eq!(
        report["reloaded"], false,
        "the page must update without a reload"
    );
    assert_eq!(report["posted"], 3);
    let (before, after) = (&report["before"], &report["after"]);
    let grew = |key: &str| after[key].as_i64().unwrap() - before[key].as_i64().unwrap();
    assert!(grew("points") >= 3, "reward points did not grow: {report}");
    assert!(grew("rows") >= 3, "table rows did not grow: {report}");
    // The code the settings page showed lets a newcomer in, as a member of the owner's team.
    let code = report["invite_code"]
        .as_str()
        .expect("an invite code shown");
    let joined = app
        .client
        .post(app.url("/api/auth/register"))
        .json(&json!({"username": "grace", "password": PASSWORD, "invite": code}))
        .send()
        .await
        .expect("POST register");
    assert_eq!(joined.status(), StatusCode::OK);
    let me: Value = joined.json().await.unwrap();
    assert_eq!(me["teams"][0]["team"], TEAM, "{me}");
}

/// Publishes through the live bridge on the test server's database, as the server's own feed does.
struct BridgeFeed(sqlx::PgPool, lachesis_shared::live::Topic);

impl lachesis::envs::in_process::LiveFeed for BridgeFeed {
    fn publish(
        &self,
        event: lachesis_shared::live::LiveEvent,
    ) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = lachesis::live::bridge::publish(&self.0, &self.1, &event).await;
        })
    }
}

/// The tools page watches real MCP episodes (the scripted solver on the reference servers) call
/// by call: the task, the offered tools' schemas, a call's arguments and result, the outcome.
#[tokio::test]
async fn the_tools_page_shows_episodes_call_by_call() {
    use lachesis::envs::mcp_tools::{McpToolsEnv, episode::Observer, solver::PlanPolicy};

    check_prerequisites();
    let app = TestApp::spawn().await;
    let feed = BridgeFeed(
        lachesis::db::connect(&app.database_url, 2).await.unwrap(),
        lachesis_shared::live::Topic::Tools,
    );
    let env = McpToolsEnv::new(&lachesis::envs::EnvOptions::default()).expect("default settings");
    let feeder = async {
        for episode in 0.. {
            let task = env.task(100 + episode).await.expect("a task");
            let policy = PlanPolicy::new(task.clone());
            let observer = Observer {
                feed: Some(&feed),
                episode,
            };
            env.play_observed(&task, &policy, &observer)
                .await
                .expect("the solver plays");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let run = tokio::select! {
        run = run_script("tools.mjs", &app.base, &[], Duration::from_secs(180)) => run,
        () = feeder => unreachable!("the feeder plays until the page has seen an episode"),
    };
    let report = run.passed();
    assert!(!report["task"].as_str().unwrap().is_empty(), "{report:#}");
    assert!(
        report["tools_offered"]
            .as_str()
            .unwrap()
            .ends_with("tools offered"),
        "{report:#}"
    );
    assert!(
        report["schema_shown"]
            .as_str()
            .unwrap()
            .contains("\"type\""),
        "{report:#}"
    );
    assert!(
        !report["call_name"].as_str().unwrap().is_empty(),
        "{report:#}"
    );
    assert!(
        !report["call_result"].as_str().unwrap().is_empty(),
        "{report:#}"
    );
    assert_eq!(report["solved"], "true", "{report:#}");
    assert!(
        report["outcome"].as_str().unwrap().contains("Solved"),
        "{report:#}"
    );
}

/// The protein page follows binder design episodes (the scripted designer on the local NIM
/// services) stage by stage and draws the complex: the timeline shows the four stages done, each
/// labelled with who answered, and the viewer draws target and binder.
#[tokio::test]
async fn the_protein_page_shows_the_pipeline_and_draws_the_complex() {
    use lachesis::envs::protein_binder::ProteinBinderEnv;
    use lachesis::envs::protein_binder::episode::Observer;
    use lachesis::envs::protein_binder::plan::PlanPolicy;

    check_prerequisites();
    let app = TestApp::spawn().await;
    let feed = BridgeFeed(
        lachesis::db::connect(&app.database_url, 2).await.unwrap(),
        lachesis_shared::live::Topic::Protein,
    );
    let env = ProteinBinderEnv::new(&lachesis::envs::EnvOptions::default()).expect("defaults");
    let policy = PlanPolicy::new(3);
    let feeder = async {
        for episode in 0.. {
            let observer = Observer {
                feed: Some(&feed),
                episode,
            };
            env.play(0, episode, &policy, &observer)
                .await
                .expect("the designer plays");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let run = tokio::select! {
        run = run_script("protein.mjs", &app.base, &[], Duration::from_secs(180)) => run,
        () = feeder => unreachable!("the feeder plays until the page has seen an episode"),
    };
    let report = run.passed();
    assert_eq!(
        report["stages"],
        json!([
            "target_structure",
            "binder_backbone",
            "binder_sequence",
            "complex_evaluation"
        ]),
        "{report:#}"
    );
    assert_eq!(
        report["states"],
        json!(["done", "done", "done", "done"]),
        "{report:#}"
    );
    assert!(report["chains"].as_u64().unwrap() >= 2, "{report:#}");
    assert!(report["residues"].as_u64().unwrap() > 29, "{report:#}");
    assert!(report["lit_pixels"].as_u64().unwrap() >= 500, "{report:#}");
    let badges = report["backend_badges"].to_string();
    assert!(
        badges.contains("not a prediction"),
        "stand-ins are labelled: {badges}"
    );
    assert!(badges.contains("ProteinMPNN on this machine"), "{badges}");
}

/// The catbot arena in Chromium, with accounts on and the embedded model answering: a visitor
/// without an account deals a battle, watches both answers being written, reads them, votes and
/// sees who A and B were, while a second page's leaderboard counts the vote without a reload
/// (`tests/browser/arena.mjs`).
#[tokio::test]
async fn a_visitor_votes_in_the_catbot_arena_and_the_leaderboard_updates_live() {
    check_prerequisites();
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.api_token = Some("arena-admin".into());
    config.model = Some(lachesis_tests::model_path());
    let app = TestApp::spawn_with(config).await;
    let names = ["Whiskerbot Calm", "Whiskerbot Brisk"];
    for (name, temperature) in names.iter().zip([0.0, 0.9]) {
        let response = app
            .client
            .post(app.url("/api/arena/contenders"))
            .bearer_auth("arena-admin")
            .json(&json!({"name": name,
                "policy": {"kind": "embedded", "temperature": temperature}}))
            .send()
            .await
            .expect("POST contenders");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let run = run_script("arena.mjs", &app.base, &[], Duration::from_secs(300)).await;
    let report = run.passed();
    for field in ["prompt", "answer_a", "answer_b"] {
        assert!(
            !report[field].as_str().unwrap_or("").is_empty(),
            "{field}: {report:#}"
        );
    }
    // The answers streamed in: the page showed partial texts, each the start of the answer.
    let mut partial = 0;
    for (side, answer) in [("a", "answer_a"), ("b", "answer_b")] {
        let answer = report[answer].as_str().unwrap();
        let shown = report["writing"][side].as_array().expect("writing texts");
        for text in shown.iter().map(|t| t.as_str().unwrap().trim()) {
            assert!(answer.starts_with(text), "{text:?} / {answer:?}");
            partial += usize::from(text.len() < answer.len());
        }
    }
    assert!(partial >= 2, "{partial} partial texts: {report:#}");
    let mut revealed = [
        report["reveal_a"].as_str().unwrap().to_string(),
        report["reveal_b"].as_str().unwrap().to_string(),
    ];
    revealed.sort();
    let mut expected = names.map(str::to_string);
    expected.sort();
    assert_eq!(revealed, expected, "{report:#}");
    assert_eq!(report["subscribed"], true, "{report:#}");
    assert_eq!(report["live_update"], true, "{report:#}");
    assert_eq!(report["reloaded"], false, "{report:#}");
    assert_eq!(report["excluded"], Value::Null, "{report:#}");
    assert_eq!(
        report["counted_after"].as_u64().unwrap(),
        report["counted_before"].as_u64().unwrap() + 1,
        "{report:#}"
    );
}

/// The feedback queue in Chromium: a signed-in annotator works through a ranking, a rating and a
/// comparison queue of two items each until each says there is nothing left, and what the browser
/// sent is what the exports then hold (`tests/browser/feedback.mjs`).
#[tokio::test]
async fn an_annotator_works_through_the_feedback_queues() {
    check_prerequisites();
    let database_url = fresh_database().await;
    let mut config = config_for(&database_url);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let (cookie, csrf) = create_first_owner(&app).await;
    let mut ids = Vec::new();
    for (kind, answers) in [
        ("rank", vec!["first", "second", "third"]),
        ("rate", vec!["only"]),
        ("compare", vec!["left", "right"]),
    ] {
        let response = app
            .client
            .post(app.url("/api/feedback/queues"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .json(
                &json!({"team": TEAM, "name": format!("{kind} queue"), "kind": kind,
                "guidelines": "Prefer what is correct.", "overlap": 1}),
            )
            .send()
            .await
            .expect("POST queues");
        assert_eq!(response.status(), StatusCode::OK);
        let id = response.json::<Value>().await.unwrap()["id"]
            .as_i64()
            .unwrap();
        let items: Vec<Value> = (1..=2)
            .map(|k| json!({"prompt": format!("{kind} prompt {k}"), "answers": answers}))
            .collect();
        let response = app
            .client
            .post(app.url(&format!("/api/feedback/queues/{id}/items")))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .json(&json!({ "items": items }))
            .send()
            .await
            .expect("POST items");
        assert_eq!(response.status(), StatusCode::OK);
        ids.push(id.to_string());
    }
    // The rank queue's first item closes in ten minutes, as a people's round's item does at the
    // round's deadline.
    let db = lachesis::db::connect(&database_url, 1).await.unwrap();
    sqlx::query(
        "UPDATE feedback_items SET closes_at = now() + interval '10 minutes'
         WHERE id = (SELECT min(id) FROM feedback_items WHERE queue_id = $1)",
    )
    .bind(ids[0].parse::<i64>().unwrap())
    .execute(&db)
    .await
    .unwrap();
    let env = [
        ("QUEUE_RANK", ids[0].clone()),
        ("QUEUE_RATE", ids[1].clone()),
        ("QUEUE_COMPARE", ids[2].clone()),
        ("SESSION_COOKIE", cookie.clone()),
    ];
    let run = run_script("feedback.mjs", &app.base, &env, Duration::from_secs(180)).await;
    let report = run.passed();
    assert_eq!(
        report["judged"],
        json!({"rank": 2, "rate": 2, "compare": 2}),
        "{report:#}"
    );
    assert_eq!(
        report["done_shown"],
        json!({"rank": true, "rate": true, "compare": true}),
        "{report:#}"
    );
    // That item showed its time left, counting down; the others, which close only when closed,
    // showed none.
    let deadline = &report["deadline"];
    let [first, later] = [&deadline["rank"][0][0], &deadline["rank"][0][1]].map(|t| {
        t.as_str()
            .unwrap_or_else(|| panic!("{report:#}"))
            .to_owned()
    });
    assert!(first.starts_with("Takes verdicts for another "), "{first}");
    assert!(first.contains(" min "), "{first}");
    assert_ne!(first, later, "the time left counts down: {report:#}");
    assert_eq!(deadline["rank"][1], Value::Null, "{report:#}");
    assert_eq!(
        [&deadline["rate"], &deadline["compare"]],
        [&json!([null, null]), &json!([null, null])],
        "{report:#}"
    );
    assert_eq!(
        report["sent"]["rank"],
        json!([{"kind": "rank", "order": [2, 1, 0]}, {"kind": "rank", "order": [0, 1, 2]}]),
        "{report:#}"
    );
    // What the browser sent is what the server kept.
    let export = |path: String| {
        let request = app.client.get(app.url(&path)).header("cookie", &cookie);
        async move {
            let text = request.send().await.unwrap().text().await.unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<Value>>()
        }
    };
    let ranked = export(format!("/api/feedback/queues/{}/pairs.jsonl", ids[0])).await;
    assert_eq!(
        ranked,
        [
            json!({"prompt": "rank prompt 1", "chosen": "third", "rejected": "first"}),
            json!({"prompt": "rank prompt 2", "chosen": "first", "rejected": "third"}),
        ]
    );
    let rated = export(format!("/api/feedback/queues/{}/ratings.jsonl", ids[1])).await;
    let scores: Vec<&Value> = rated.iter().map(|r| &r["score"]).collect();
    assert_eq!(scores, [&json!(4), &json!(2)]);
    let compared = export(format!("/api/feedback/queues/{}/pairs.jsonl", ids[2])).await;
    assert_eq!(
        compared,
        [json!({"prompt": "compare prompt 1", "chosen": "left", "rejected": "right"})]
    );
}
