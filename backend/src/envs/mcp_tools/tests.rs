//! Against the real reference servers (npm's and PyPI's, installed by `make test`): discovery,
//! calls over stdio and streamable HTTP, the scripted solver, a server killed mid-episode and a
//! malformed call from the model.

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use super::client::{Endpoint, McpConnection, McpError};
use super::sandbox::{Sandbox, ServerKind, ServerPrograms};
use super::*;
use crate::policy::{Finish, PolicyError, Rollout, rollout_from_ids};

const CONNECT: Duration = Duration::from_secs(60);

fn env() -> McpToolsEnv {
    McpToolsEnv::new(&EnvOptions::default()).expect("default settings")
}

fn names(tools: &[lachesis_shared::tools::ToolSpec]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn each_reference_server_lists_its_tools_and_runs_a_call() {
    let programs = ServerPrograms::from_env();
    let mut sandbox = Sandbox::open(&programs, &ServerKind::ALL, CONNECT)
        .await
        .expect("the reference servers start (scripts/ensure-tools.sh and ensure-mcp-servers.sh install them)");
    let mut listed = Vec::new();
    for (kind, connection) in &mut sandbox.servers {
        let tools = connection.tools().await.expect("tools/list");
        listed.push((
            *kind,
            names(tools)
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
        ));
    }
    let has = |kind: ServerKind, tool: &str| {
        listed
            .iter()
            .any(|(k, tools)| *k == kind && tools.iter().any(|t| t == tool))
    };
    assert!(has(ServerKind::Filesystem, "write_file") && has(ServerKind::Filesystem, "move_file"));
    assert!(has(ServerKind::Memory, "create_relations") && has(ServerKind::Memory, "read_graph"));
    assert!(has(ServerKind::Git, "git_commit") && has(ServerKind::Git, "git_log"));
    assert!(has(ServerKind::Everything, "get-sum") && has(ServerKind::Everything, "echo"));

    let fs = sandbox.server(ServerKind::Filesystem).expect("connected");
    let args = json!({"path": "hello.txt", "content": "from a tool"});
    let written = fs
        .call(
            "write_file",
            args.as_object().cloned().unwrap(),
            Duration::from_secs(10),
        )
        .await
        .expect("the call completes");
    assert!(!written.is_error, "{}", written.text);
    let on_disk = std::fs::read_to_string(sandbox.files().join("hello.txt")).expect("written");
    assert_eq!(on_disk, "from a tool");

    // A path outside the sandbox is the server's refusal, reported as an error result.
    let escape = json!({"path": "/etc/hostname"});
    let refused = fs
        .call(
            "read_text_file",
            escape.as_object().cloned().unwrap(),
            Duration::from_secs(10),
        )
        .await;
    assert!(
        matches!(&refused, Ok(r) if r.is_error) || matches!(refused, Err(McpError::Refused(_))),
        "{refused:?}"
    );

    let everything = sandbox.server(ServerKind::Everything).expect("connected");
    let sum = everything
        .call(
            "get-sum",
            json!({"a": 19, "b": 23}).as_object().cloned().unwrap(),
            Duration::from_secs(10),
        )
        .await
        .expect("get-sum");
    assert!(sum.text.contains("42"), "{}", sum.text);
}

#[tokio::test]
async fn a_streamable_http_server_is_reached_over_http() {
    let programs = ServerPrograms::from_env();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = tokio::process::Command::new(programs.npm_bin.join("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server-everything starts");
    let endpoint = Endpoint::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    // The server needs a moment to listen; the handshake is retried until it does.
    let mut connection = None;
    for _ in 0..100 {
        match McpConnection::connect(&endpoint, Duration::from_secs(10)).await {
            Ok(c) => {
                connection = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let mut connection = connection.expect("the HTTP server answers the handshake");
    assert!(names(connection.tools().await.expect("listed")).contains(&"get-sum"));
    let echoed = connection
        .call(
            "echo",
            json!({"message": "over http"})
                .as_object()
                .cloned()
                .unwrap(),
            Duration::from_secs(10),
        )
        .await
        .expect("echo");
    assert!(echoed.text.contains("over http"), "{}", echoed.text);
    child.kill().await.ok();
}

#[tokio::test]
async fn the_scripted_solver_solves_the_generated_tasks() {
    let env = env();
    let report = solver::solve(&env, 40, 11, 4)
        .await
        .expect("tasks generate");
    assert_eq!(report.total, 40);
    assert!(
        report.percent() >= 95.0,
        "solved {}% ({:?})",
        report.percent(),
        report.failures
    );
    // The seeds reach every template, so the check above covers each kind of outcome.
    let catalogue = env.catalogue().await.expect("discovered");
    let mut templates: Vec<String> = (0..40)
        .filter_map(|i| tasks::generate(11 + i, &catalogue))
        .map(|t| t.template)
        .collect();
    templates.sort();
    templates.dedup();
    assert_eq!(templates.len(), 9, "{templates:?}");
}

/// A stand-in for a model: replies with the scripted turns in order, running `before_turn`
/// with the turn's index first.
struct Scripted {
    turns: Vec<String>,
    before_turn: Box<dyn Fn(usize) + Send + Sync>,
    taken: Mutex<usize>,
}

impl Policy for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        (self.before_turn)(*taken);
        let text = self.turns.get(*taken).cloned().unwrap_or_default();
        *taken += 1;
        let prompt: Vec<u32> = request
            .messages
            .iter()
            .flat_map(|m| m.content.bytes().map(u32::from))
            .collect();
        let ids: Vec<u32> = text.bytes().map(u32::from).collect();
        let rollout = rollout_from_ids(&prompt, &ids, &vec![-0.1; ids.len()], text, Finish::Stop);
        Box::pin(async move { Ok(vec![rollout]) })
    }
}

fn sum_task() -> tasks::Task {
    let catalogue = vec![(
        ServerKind::Everything,
        vec![lachesis_shared::tools::ToolSpec {
            name: "get-sum".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
        }],
    )];
    tasks::generate(5, &catalogue).expect("the sum template fits")
}

#[tokio::test]
async fn a_malformed_call_is_told_its_error_and_costs_the_penalty() {
    let task = sum_task();
    let tasks::Check::AnswerIs { value } = task.check else {
        panic!("the sum task checks the answer");
    };
    let policy = Scripted {
        turns: vec![
            "<tool_call>\n{\"name\": \"get-sum\", \"arguments\": {\"a\": 1,\n</tool_call>".into(),
            "<tool_call>\n{\"name\": \"get-sum\", \"arguments\": {\"a\": \"one\", \"b\": 2}}\n</tool_call>".into(),
            lachesis_shared::tools::render_call(&lachesis_shared::tools::ToolCall {
                name: "get-sum".into(),
                arguments: task.plan[0].arguments.clone(),
            }),
            format!("The sum is {value}."),
        ],
        before_turn: Box::new(|_| {}),
        taken: Mutex::new(0),
    };
    let episode = env().play(&task, &policy).await.expect("played");
    assert_eq!(episode.malformed_turns, 1);
    assert!(
        episode.messages[3].content.contains("not a JSON object"),
        "{:?}",
        episode.messages[3]
    );
    // The schema-refused call ran nothing and is wasted; the good one counts.
    assert_eq!(episode.calls.len(), 2);
    assert!(episode.calls[0].failed && episode.calls[0].result.contains("must be number"));
    assert!(!episode.calls[1].failed);
    assert!(episode.solved);
    assert_eq!(episode.wasted_calls, 1);
    let expected = 1.0 - episode::WASTED_CALL_PENALTY - episode::MALFORMED_TURN_PENALTY;
    assert!((episode.score - expected).abs() < 1e-9, "{}", episode.score);
    // Four turns, joined into one row: every turn's tokens are trained, the results masked.
    let rollout = episode.rollout.expect("a row");
    let trained = rollout.masks.iter().filter(|&&m| m != -100).count();
    let written: usize = policy.turns.iter().map(String::len).sum();
    assert_eq!(trained, written);
    let results: usize = episode.messages[2..]
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.len())
        .sum();
    let prompt = episode.messages[..2]
        .iter()
        .map(|m| m.content.len())
        .sum::<usize>();
    assert_eq!(rollout.tokens.len(), prompt + results + written);
}

#[tokio::test]
async fn a_server_killed_mid_episode_ends_it_with_a_typed_failure_and_a_score() {
    let task = sum_task();
    let call = lachesis_shared::tools::render_call(&lachesis_shared::tools::ToolCall {
        name: "get-sum".into(),
        arguments: task.plan[0].arguments.clone(),
    });
    let env = env();
    let programs = ServerPrograms::from_env();
    let mut sandbox = Sandbox::open(&programs, &[ServerKind::Everything], CONNECT)
        .await
        .expect("server-everything starts");
    let pid = sandbox
        .server(ServerKind::Everything)
        .and_then(McpConnection::child_pid)
        .expect("a child process");
    let killed = std::sync::Arc::new(Mutex::new(false));
    let flag = killed.clone();
    let policy = Scripted {
        turns: vec![call.clone(), call, "12".into()],
        // Before the second turn, the server is killed.
        before_turn: Box::new(move |turn| {
            if turn == 1 {
                let status = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                *flag.lock().unwrap() = status.is_ok_and(|s| s.success());
            }
        }),
        taken: Mutex::new(0),
    };
    let (request, limits) = (env.request(), env.limits());
    let play = episode::play(
        &task,
        &mut sandbox,
        &policy,
        &request,
        &limits,
        &episode::Observer::NONE,
    );
    let episode = tokio::time::timeout(Duration::from_secs(60), play)
        .await
        .expect("nothing hangs")
        .expect("the episode is scored");
    assert!(*killed.lock().unwrap(), "the server was found and killed");
    assert!(episode.server_failure.is_some(), "{:?}", episode.calls);
    assert_eq!(episode.calls.len(), 2);
    assert!(!episode.calls[0].failed && episode.calls[1].failed);
    assert!(!episode.solved);
    assert!(
        (episode.score + episode::WASTED_CALL_PENALTY).abs() < 1e-9,
        "{}",
        episode.score
    );
}

#[test]
fn numbers_are_read_from_the_ends_of_results() {
    use tasks::{first_integer, last_integer};
    assert_eq!(last_integer("The sum of 12 and 30 is 42."), Some(42));
    assert_eq!(first_integer("The sum of 12 and 30 is 42."), Some(12));
    assert_eq!(last_integer("it fell to -7"), Some(-7));
    assert_eq!(last_integer("é579"), Some(579));
    assert_eq!(last_integer("no digits"), None);
    assert_eq!(first_integer("99999999999999999999"), None);
}

/// Answers a request's `n` completions with `answers`, in order.
struct Answers(Vec<String>);

impl Policy for Answers {
    fn name(&self) -> String {
        "answers".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let rollouts = self
            .0
            .iter()
            .take(request.n)
            .map(|text| {
                let ids: Vec<u32> = text.bytes().map(u32::from).collect();
                rollout_from_ids(
                    &[1, 2],
                    &ids,
                    &vec![-0.1; ids.len()],
                    text.clone(),
                    Finish::Stop,
                )
            })
            .collect();
        Box::pin(async move { Ok(rollouts) })
    }
}

#[tokio::test]
async fn the_gold_call_mode_scores_answers_against_the_plan_without_running_them() {
    let mut options = EnvOptions {
        group_size: Some(2),
        ..EnvOptions::default()
    };
    options.settings.insert("mode".into(), json!("gold_call"));
    let env = McpToolsEnv::new(&options).expect("gold_call is a mode");
    let seed = 3;
    let task = env.task(seed).await.expect("a task");
    let planned: Vec<String> = task
        .plan
        .iter()
        .map(|c| {
            lachesis_shared::tools::render_call(&lachesis_shared::tools::ToolCall {
                name: c.tool.clone(),
                arguments: c.arguments.clone(),
            })
        })
        .collect();
    let policy = Answers(vec![planned.join("\n"), "I cannot.".into()]);
    let item = serde_json::to_value(SeedItem { seed }).unwrap();
    let collected = Env::collect(&env, item.clone(), &policy)
        .await
        .expect("collected");
    let group = collected.group.expect("the scores differ");
    assert_eq!(group.scores(), [gold::MATCHED, gold::MISMATCHED]);
    // The tools offered are the live ones of the task's servers.
    assert!(
        group.sequences[0].messages[1]
            .content
            .contains(&task.prompt)
    );
    // Two answers that both fail teach nothing: no group.
    let none = Answers(vec!["no".into(), "no".into()]);
    let collected = Env::collect(&env, item, &none).await.expect("collected");
    assert!(collected.group.is_none());
}

/// Keeps what is published.
#[derive(Default)]
struct Recorded(Mutex<Vec<lachesis_shared::live::LiveEvent>>);

impl crate::envs::in_process::LiveFeed for Recorded {
    fn publish(&self, event: lachesis_shared::live::LiveEvent) -> BoxFuture<'_, ()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(event);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn an_observed_episode_is_shown_step_by_step() {
    use lachesis_shared::live::LiveEvent;
    use lachesis_shared::tools::ToolEpisodeStep as Step;

    let task = sum_task();
    let tasks::Check::AnswerIs { value } = task.check else {
        panic!("the sum task checks the answer");
    };
    let call = lachesis_shared::tools::render_call(&lachesis_shared::tools::ToolCall {
        name: "get-sum".into(),
        arguments: task.plan[0].arguments.clone(),
    });
    let policy = Scripted {
        turns: vec![call, value.to_string()],
        before_turn: Box::new(|_| {}),
        taken: Mutex::new(0),
    };
    let feed = Recorded::default();
    let observer = episode::Observer {
        feed: Some(&feed),
        episode: 7,
    };
    let episode = env()
        .play_observed(&task, &policy, &observer)
        .await
        .expect("played");
    assert!(episode.solved);
    let steps: Vec<Step> = feed
        .0
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|event| match event {
            LiveEvent::ToolEpisode(e) if e.episode == 7 => e.step,
            other => panic!("unexpected event {other:?}"),
        })
        .collect();
    let Step::Started {
        tools, template, ..
    } = &steps[0]
    else {
        panic!("starts with the task: {:?}", steps[0]);
    };
    assert_eq!(template, "sum");
    let offered = steps
        .iter()
        .filter(|s| matches!(s, Step::Offered { .. }))
        .count();
    assert_eq!(offered, *tools);
    assert_eq!(offered, episode.tools.len());
    match &steps[1 + offered] {
        Step::Called {
            call,
            server,
            result,
            failed,
        } => {
            assert_eq!(call.name, "get-sum");
            assert_eq!(server.as_deref(), Some("everything"));
            assert!(result.contains(&value.to_string()) && !failed, "{result}");
        }
        other => panic!("then the call: {other:?}"),
    }
    assert!(matches!(
        steps.last(),
        Some(Step::Finished { solved: true, answer: Some(a), .. }) if *a == value.to_string()
    ));
    assert_eq!(steps.len(), offered + 3);
}
