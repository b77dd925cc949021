//! One multi-turn episode: the model sees the task and the live tools, calls tools over several
//! turns (each call checked against its schema, run on its server with a timeout, its result
//! returned as a `tool` message) until it answers without a call; then the outcome is checked
//! and scored. A malformed turn is told its error and costs a penalty; a server that dies ends
//! the episode, which is still scored.

use std::collections::HashMap;
use std::time::Duration;

use lachesis_inference::ChatMessage;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::tools::{
    ToolCall, ToolEpisodeEvent, ToolEpisodeStep, ToolSpec, check_call, parse_assistant_turn,
};
use serde::{Deserialize, Serialize};

use super::checks;
use super::client::McpError;
use super::sandbox::{Sandbox, ServerKind};
use super::tasks::Task;
use crate::envs::EnvError;
pub use crate::envs::episode::Observer;
use crate::envs::episode::{Dialogue, EpisodeStep, next_turn, record_turn};
use crate::policy::{Policy, PolicyRequest, Rollout};

/// What bounds an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeLimits {
    /// Model turns before the episode ends unanswered.
    pub max_turns: usize,
    /// Calls one turn may make.
    pub max_calls_per_turn: usize,
    pub call_timeout: Duration,
    /// A tool result longer than this is cut before the model reads it.
    pub max_result_chars: usize,
}

/// Reward shaping: the outcome is worth 1; these are taken off it.
pub const WASTED_CALL_PENALTY: f64 = 0.1;
pub const MALFORMED_TURN_PENALTY: f64 = 0.25;

/// What happened to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub call: ToolCall,
    pub server: Option<ServerKind>,
    /// The text the model was given back.
    pub result: String,
    /// The call failed (refused by its schema, an error result, a timeout, a dead server).
    pub failed: bool,
}

/// A finished episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub calls: Vec<CallRecord>,
    pub answer: Option<String>,
    pub malformed_turns: usize,
    pub wasted_calls: usize,
    /// The server failure that ended the episode early, if one did.
    pub server_failure: Option<String>,
    pub solved: bool,
    pub score: f64,
    /// The whole dialogue as one training row when the turns join (see `join_turns`), else the
    /// last turn alone.
    #[serde(skip)]
    pub rollout: Option<Rollout>,
}

pub const SYSTEM: &str = "You complete tasks with the tools you are given. Paths are relative to \
your working folder. Call tools until the task is done, then reply briefly without a tool call.";

/// Longest tool result a viewer is sent (the model may read more).
const SHOWN_RESULT_CHARS: usize = 600;

impl EpisodeStep for ToolEpisodeStep {
    fn into_event(self, episode: u64) -> LiveEvent {
        LiveEvent::ToolEpisode(ToolEpisodeEvent {
            episode,
            step: self,
        })
    }
}

impl Dialogue for Episode {
    fn into_dialogue(self) -> (Vec<ChatMessage>, Option<Rollout>, f64) {
        (self.messages, self.rollout, self.score)
    }
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{} [cut]", &text[..end]),
        None => text.to_string(),
    }
}

fn server_name(kind: ServerKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The tools of every connected server, each name routed to the first server offering it.
async fn offered(
    sandbox: &mut Sandbox,
) -> Result<(Vec<ToolSpec>, HashMap<String, ServerKind>), McpError> {
    let mut tools = Vec::new();
    let mut route = HashMap::new();
    for (kind, connection) in &mut sandbox.servers {
        for tool in connection.tools().await? {
            if route.insert(tool.name.clone(), *kind).is_none() {
                tools.push(tool.clone());
            }
        }
    }
    Ok((tools, route))
}

/// Plays `task` in `sandbox` with `policy`.
pub async fn play(
    task: &Task,
    sandbox: &mut Sandbox,
    policy: &dyn Policy,
    request: &PolicyRequest,
    limits: &EpisodeLimits,
    observer: &Observer<'_>,
) -> Result<Episode, EnvError> {
    let (tools, route) = offered(sandbox)
        .await
        .map_err(|e| EnvError::Other(e.to_string()))?;
    observer
        .emit(ToolEpisodeStep::Started {
            task: task.prompt.clone(),
            template: task.template.clone(),
            tools: tools.len(),
        })
        .await;
    for tool in &tools {
        let server = route.get(&tool.name).copied().map(server_name);
        observer
            .emit(ToolEpisodeStep::Offered {
                tool: tool.clone(),
                server: server.unwrap_or_default(),
            })
            .await;
    }
    let mut episode = Episode {
        messages: vec![
            ChatMessage::new("system", SYSTEM),
            ChatMessage::new("user", task.prompt.clone()),
        ],
        tools: tools.clone(),
        calls: Vec::new(),
        answer: None,
        malformed_turns: 0,
        wasted_calls: 0,
        server_failure: None,
        solved: false,
        score: 0.0,
        rollout: None,
    };
    'turns: for _ in 0..limits.max_turns {
        let rollout = next_turn(policy, request, &episode.messages, &tools).await?;
        let text = record_turn(&mut episode.messages, &mut episode.rollout, rollout);
        let turn = match parse_assistant_turn(&text, limits.max_calls_per_turn) {
            Ok(turn) => turn,
            Err(error) => {
                episode.malformed_turns += 1;
                observer
                    .emit(ToolEpisodeStep::Malformed {
                        error: error.to_string(),
                    })
                    .await;
                episode.messages.push(ChatMessage::new(
                    "tool",
                    format!("Error: {error}. No tool was run."),
                ));
                continue;
            }
        };
        if turn.calls.is_empty() {
            episode.answer = Some(turn.content);
            break;
        }
        for call in turn.calls {
            let record = run_call(call, &tools, &route, sandbox, limits).await;
            let gone = record.1;
            let record = record.0;
            observer
                .emit(ToolEpisodeStep::Called {
                    call: record.call.clone(),
                    server: record.server.map(server_name),
                    result: cut(&record.result, SHOWN_RESULT_CHARS),
                    failed: record.failed,
                })
                .await;
            episode
                .messages
                .push(ChatMessage::new("tool", record.result.clone()));
            episode.calls.push(record);
            if let Some(failure) = gone {
                episode.server_failure = Some(failure.to_string());
                break 'turns;
            }
        }
    }
    let failed = episode.calls.iter().filter(|c| c.failed).count();
    let succeeded = episode.calls.len() - failed;
    episode.wasted_calls = failed + succeeded.saturating_sub(task.plan.len());
    episode.solved = checks::holds(&task.check, sandbox, episode.answer.as_deref()).await;
    let outcome = if episode.solved { 1.0 } else { 0.0 };
    episode.score = (outcome
        - WASTED_CALL_PENALTY * episode.wasted_calls as f64
        - MALFORMED_TURN_PENALTY * episode.malformed_turns as f64)
        .max(-1.0);
    observer
        .emit(ToolEpisodeStep::Finished {
            answer: episode.answer.clone(),
            solved: episode.solved,
            score: episode.score,
            check: task.check.describe(),
            server_failure: episode.server_failure.clone(),
        })
        .await;
    Ok(episode)
}

/// Runs one call; the second value is set when its server is gone (the episode ends).
async fn run_call(
    call: ToolCall,
    tools: &[ToolSpec],
    route: &HashMap<String, ServerKind>,
    sandbox: &Sandbox,
    limits: &EpisodeLimits,
) -> (CallRecord, Option<McpError>) {
    let refused = |call: ToolCall, server, result: String| CallRecord {
        call,
        server,
        result,
        failed: true,
    };
    if let Err(error) = check_call(tools, &call) {
        return (refused(call, None, format!("Error: {error}.")), None);
    }
    let server = route.get(&call.name).copied();
    let Some(connection) = server.and_then(|kind| sandbox.server(kind)) else {
        return (
            refused(call, server, "Error: no server offers this tool.".into()),
            None,
        );
    };
    match connection
        .call(&call.name, call.arguments.clone(), limits.call_timeout)
        .await
    {
        Ok(result) => {
            let mut text = result.text;
            if text.chars().nth(limits.max_result_chars).is_some() {
                text = cut(&text, limits.max_result_chars);
            }
            let record = CallRecord {
                call,
                server,
                result: text,
                failed: result.is_error,
            };
            (record, None)
        }
        Err(error @ (McpError::ServerGone | McpError::Protocol(_))) => {
            let text = format!("Error: {error}.");
            (refused(call, server, text), Some(error))
        }
        Err(error) => (refused(call, server, format!("Error: {error}.")), None),
    }
}
