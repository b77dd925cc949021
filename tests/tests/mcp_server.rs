//! Lachesis as an MCP server at `/mcp`: its tools called through the official SDK's own client over
//! streamable HTTP with team tokens (each sees its own team's runs and no other's), callers without
//! a token refused, and the MCP conformance suite run against it.

use std::path::PathBuf;
use std::time::Duration;

use lachesis_shared::mcp::{EnvironmentList, RecentGroups, RunList, RunMetricsReport, ToolError};
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, group, registration, sign_up};
use reqwest::{Method, StatusCode};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

type Client = RunningService<RoleClient, ()>;

async fn auth_app() -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    TestApp::spawn_with(config).await
}

/// An MCP session with `/mcp` through rmcp's streamable HTTP client, as `token`.
async fn connect(app: &TestApp, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the MCP handshake")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let arguments: Map<String, Value> = serde_json::from_value(arguments).unwrap();
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A successful tool result's `structuredContent` as `T`.
fn answer<T: DeserializeOwned>(result: CallToolResult) -> T {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    serde_json::from_value(result.structured_content.expect("structured content")).unwrap()
}

fn refusal(result: CallToolResult) -> ToolError {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    serde_json::from_value(result.structured_content.expect("structured content")).unwrap()
}

#[tokio::test]
async fn tools_answer_each_team_with_its_own_runs() {
    let app = auth_app().await;
    let alice = sign_up(&app, "/api/auth/setup", "alice", "team-a").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "team-b").await;
    let a_token = app.new_token(&alice, "team-a", json!({"name": "a"})).await;
    let a_reader = app
        .new_token(&alice, "team-a", json!({"name": "r", "read_only": true}))
        .await;
    let b_token = app.new_token(&bob, "team-b", json!({"name": "b"})).await;
    let a_other = app
        .new_token(&alice, "team-a", json!({"name": "o", "run": "a-other"}))
        .await;
    // Team A's run, with a scored group that carries its chat messages, and a trainer report.
    let mut scored = group(3, 2, None);
    scored["scores"] = json!([1.0, 0.25]);
    scored["messages"] = json!([
        [{"role": "user", "content": "What is 6 x 7?"}, {"role": "assistant", "content": "42"}],
        [{"role": "user", "content": "What is 6 x 7?"}, {"role": "assistant", "content": "41"}],
    ]);
    for (path, body) in [
        ("/runs/a-run/register", registration(1)),
        ("/runs/a-run/scored_data", scored),
        (
            "/runs/a-run/trainer-metrics",
            json!({"step": 1, "values": {"loss": 0.75}}),
        ),
    ] {
        let (status, answer) = app
            .call(Caller::Token(&a_token), Method::POST, path, Some(body))
            .await;
        assert!(status.is_success(), "{path}: {status} {answer}");
    }

    let a = connect(&app, &a_reader).await;
    let info = a.peer_info().expect("the server's initialize answer");
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("lachesis")
    );
    let tools = a.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, lachesis::mcp_server::TOOL_NAMES);
    // The arena's leaderboard is public; with no votes yet it is empty, and an unknown arena is
    // the caller's mistake.
    let board: lachesis_shared::arena::LeaderboardView =
        answer(call(&a, "arena_leaderboard", json!({"style_control": true})).await);
    assert_eq!((board.rows.len(), board.counted_votes), (0, 0));
    assert!(board.style_control);
    let unknown = refusal(call(&a, "arena_leaderboard", json!({"arena": "dogbot"})).await);
    assert_eq!(unknown.error, "invalid", "{unknown:?}");

    let envs: EnvironmentList = answer(call(&a, "list_environments", json!({})).await);
    let registry: Vec<&str> = lachesis::envs::registry::REGISTRY
        .iter()
        .map(|e| e.name)
        .collect();
    let listed: Vec<&str> = envs.environments.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(listed, registry);
    assert!(envs.environments.iter().all(|e| !e.description.is_empty()));

    // A read-only token reads through every reading tool (it cannot start an evaluation).
    let runs: RunList = answer(call(&a, "list_runs", json!({})).await);
    let a_run = runs
        .runs
        .iter()
        .find(|r| r.id == "a-run")
        .expect("team A's run listed for team A");
    assert_eq!((a_run.team.as_deref(), a_run.groups), (Some("team-a"), 1));

    let report: RunMetricsReport =
        answer(call(&a, "run_metrics", json!({"run": "a-run", "limit": 10})).await);
    assert_eq!(report.run.id, "a-run");
    assert_eq!(report.metrics.groups.len(), 1);
    assert_eq!(report.metrics.groups[0].scores, vec![1.0, 0.25]);
    assert_eq!(report.metrics.trainer[0].values["loss"], 0.75);

    let recent: RecentGroups =
        answer(call(&a, "recent_groups", json!({"run": "a-run", "limit": 5})).await);
    assert_eq!(recent.groups.len(), 1);
    let texts = &recent.groups[0].texts;
    assert!(
        texts[0]
            .as_deref()
            .is_some_and(|t| t.contains("What is 6 x 7?") && t.ends_with("42")),
        "{texts:?}"
    );

    // Bad arguments: a typed tool error, or the protocol's invalid-params error, never a panic.
    let out_of_range =
        refusal(call(&a, "recent_groups", json!({"run": "a-run", "limit": 51})).await);
    assert_eq!(out_of_range.error, "invalid");
    for run in ["no-such-run", "../etc/passwd", ""] {
        let missing = refusal(call(&a, "run_metrics", json!({"run": run})).await);
        assert_eq!(missing.error, "not_found", "{run:?}");
    }
    for arguments in [
        json!({}),
        json!({"run": 5}),
        json!({"run": "a-run", "extra": 1}),
    ] {
        let args: Map<String, Value> = serde_json::from_value(arguments.clone()).unwrap();
        let refused = a
            .call_tool(CallToolRequestParams::new("recent_groups").with_arguments(args))
            .await;
        // rmcp answers arguments that do not fit the schema as a tool error, naming them.
        match refused {
            Ok(result) => assert_eq!(result.is_error, Some(true), "{arguments}: {result:?}"),
            Err(e) => assert!(e.to_string().contains("param"), "{arguments}: {e}"),
        }
    }
    let unknown = a.call_tool(CallToolRequestParams::new("leaderboard")).await;
    assert!(unknown.is_err(), "{unknown:?}");

    // A token scoped to another of team A's runs sees that run alone.
    let scoped = connect(&app, &a_other).await;
    let runs: RunList = answer(call(&scoped, "list_runs", json!({})).await);
    let ids: Vec<&str> = runs.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a-other"]);
    let outside = refusal(call(&scoped, "recent_groups", json!({"run": "a-run"})).await);
    assert_eq!(outside.error, "not_found");
    scoped.cancel().await.unwrap();

    // Team B sees neither the run nor its data, and its name does not leak.
    let b = connect(&app, &b_token).await;
    let runs: RunList = answer(call(&b, "list_runs", json!({})).await);
    assert!(runs.runs.iter().all(|r| r.id != "a-run"), "{runs:?}");
    for tool in ["run_metrics", "recent_groups"] {
        let hidden = refusal(call(&b, tool, json!({"run": "a-run"})).await);
        assert_eq!(hidden.error, "not_found", "{tool}");
    }
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn callers_without_a_token_are_refused() {
    let app = auth_app().await;
    let alice = sign_up(&app, "/api/auth/setup", "alice", "team-a").await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    });
    let post = |who: Caller<'_>| {
        let request = app
            .client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        who.authorize(request).send()
    };
    let nobody = post(Caller::Nobody).await.unwrap();
    assert_eq!(nobody.status(), StatusCode::UNAUTHORIZED);
    assert!(
        nobody.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let wrong = post(Caller::Token("not-a-token")).await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // A signed-in browser session alone drives no tools, CSRF token and all.
    let session = post(Caller::Session(&alice)).await.unwrap();
    assert_eq!(session.status(), StatusCode::FORBIDDEN);
    let token = app.new_token(&alice, "team-a", json!({"name": "a"})).await;
    let admitted = post(Caller::Token(&token)).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
    // Revoked, it is refused again.
    let (_, listed) = app
        .call(
            Caller::Session(&alice),
            Method::GET,
            "/api/teams/team-a/tokens",
            None,
        )
        .await;
    let id = listed[0]["id"].as_i64().unwrap();
    let (status, _) = app
        .call(
            Caller::Session(&alice),
            Method::DELETE,
            &format!("/api/teams/team-a/tokens/{id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let revoked = post(Caller::Token(&token)).await.unwrap();
    assert_eq!(revoked.status(), StatusCode::UNAUTHORIZED);
}

/// The repository root, where `scripts/ensure-tools.sh` installs Node and the suite.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The MCP conformance suite's active scenarios against `/mcp`, with the features Lachesis does
/// not offer baselined (`tests/mcp-conformance-baseline.yml`, each with its reason). The suite
/// cannot send a bearer token, so it runs against the accounts-off mode, where the API is open to
/// this machine's own programs and `/mcp` with it; the token checks are the tests above.
#[tokio::test]
async fn passes_the_mcp_conformance_suite() {
    let root = repo_root();
    let node = root.join("node_modules/.bin/node");
    let suite = root.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    for needed in [&node, &suite] {
        assert!(
            needed.exists(),
            "{} is missing: run scripts/ensure-tools.sh (it installs Node 22 and the MCP \
             conformance suite)",
            needed.display()
        );
    }
    let app = TestApp::spawn().await;
    // The suite checks a foreign `Host`; a foreign `Origin` (a web page) is refused too, on reads
    // as well as calls.
    for method in [Method::GET, Method::POST, Method::DELETE] {
        let response = app
            .client
            .request(method.clone(), app.url("/mcp"))
            .header("origin", "http://evil.example")
            .header("accept", "application/json, text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method}");
    }
    let out = std::env::temp_dir().join(format!("lachesis-mcp-conformance-{}", std::process::id()));
    let run = tokio::process::Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", &app.url("/mcp"), "--suite", "active"])
        .arg("--expected-failures")
        .arg(root.join("tests/mcp-conformance-baseline.yml"))
        .arg("-o")
        .arg(&out)
        .current_dir(&root)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the suite finishes within 5 minutes")
        .expect("node runs");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the conformance suite failed ({}):\n{report}",
        output.status
    );
    // Kept for inspection only when the suite fails.
    let _ = std::fs::remove_dir_all(&out);
    // The scenarios that apply ran and passed, not just an empty selection.
    for scenario in [
        "server-initialize",
        "tools-list",
        "dns-rebinding-protection",
        "ping",
    ] {
        assert!(
            report.contains(scenario),
            "{scenario} did not run:\n{report}"
        );
    }
}

/// `start_evaluation` runs an environment's evaluation set on the server's model and `evaluation`
/// reads it back: the metrics are the environment's own (arithmetic's percent correct, between 0
/// and 1, over the asked number of samples). Only an inference-scope token may start one, one at a
/// time; another team cannot read it; environments that pay judges are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_start_run_and_are_read_by_their_team_only() {
    use lachesis_shared::mcp::{EvaluationStatus, EvaluationView};
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.model = Some(lachesis_tests::model_path());
    let app = TestApp::spawn_with(config).await;
    let alice = sign_up(&app, "/api/auth/setup", "alice", "team-a").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "team-b").await;
    let runner = app
        .new_token(&alice, "team-a", json!({"name": "e", "inference": true}))
        .await;
    let plain = app.new_token(&alice, "team-a", json!({"name": "p"})).await;
    let reader = app
        .new_token(
            &alice,
            "team-a",
            json!({"name": "r", "read_only": true, "inference": true}),
        )
        .await;
    let outsider = app
        .new_token(&bob, "team-b", json!({"name": "b", "inference": true}))
        .await;

    let ask = json!({"environment": "arithmetic", "eval_size": 3});
    for token in [&plain, &reader] {
        let client = connect(&app, token).await;
        let refused = refusal(call(&client, "start_evaluation", ask.clone()).await);
        assert_eq!(refused.error, "forbidden", "{}", refused.message);
    }
    let client = connect(&app, &runner).await;
    for (bad, why) in [
        (json!({"environment": "pay_to_play"}), "pays its judges"),
        (json!({"environment": "nope"}), "no environment"),
        (
            json!({"environment": "arithmetic", "eval_size": 65}),
            "eval_size",
        ),
    ] {
        let refused = refusal(call(&client, "start_evaluation", bad).await);
        assert_eq!(refused.error, "invalid");
        assert!(refused.message.contains(why), "{}", refused.message);
    }
    let started: EvaluationView = answer(call(&client, "start_evaluation", ask.clone()).await);
    assert_eq!(started.status, EvaluationStatus::Running);
    let again = refusal(call(&client, "start_evaluation", ask.clone()).await);
    assert!(
        ["conflict", "busy"].contains(&again.error.as_str()),
        "{again:?}"
    );

    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let done = loop {
        let view: EvaluationView =
            answer(call(&client, "evaluation", json!({"id": started.id})).await);
        if view.status != EvaluationStatus::Running {
            break view;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(done.status, EvaluationStatus::Done, "{done:?}");
    let correct = done.metrics["eval/percent_correct"];
    assert!((0.0..=1.0).contains(&correct), "{:?}", done.metrics);
    assert_eq!(done.samples.len(), 3);

    // The team's other tokens read it; another team's cannot tell it exists.
    let teammate = connect(&app, &plain).await;
    let seen: EvaluationView =
        answer(call(&teammate, "evaluation", json!({"id": started.id})).await);
    assert_eq!(seen, done);
    let other = connect(&app, &outsider).await;
    let hidden = refusal(call(&other, "evaluation", json!({"id": started.id})).await);
    assert_eq!(hidden.error, "not_found");
    // Finished, it no longer blocks its caller.
    let next: EvaluationView = answer(call(&client, "start_evaluation", ask).await);
    assert!(next.id > started.id);
}
