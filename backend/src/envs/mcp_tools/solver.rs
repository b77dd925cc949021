//! The scripted solver: a policy that follows a task's plan call by call and answers as the plan
//! says, played through the same episode loop, servers and checks as a model. That it solves
//! (nearly) every generated task is the proof that the tasks are solvable.

use futures::StreamExt;
use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use lachesis_shared::tools::{ToolCall, render_call};

use super::McpToolsEnv;
use super::tasks::{PlannedAnswer, Task, last_integer};
use crate::envs::EnvError;
use crate::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout, rollout_from_ids};

/// Follows one task's plan.
pub struct PlanPolicy {
    task: Task,
}

impl PlanPolicy {
    pub fn new(task: Task) -> Self {
        Self { task }
    }

    /// The next turn after `messages`: the next planned call, or the planned answer.
    fn next_turn(&self, messages: &[ChatMessage]) -> String {
        let turns_taken = messages.iter().filter(|m| m.role == "assistant").count();
        if let Some(planned) = self.task.plan.get(turns_taken) {
            return render_call(&ToolCall {
                name: planned.tool.clone(),
                arguments: planned.arguments.clone(),
            });
        }
        match &self.task.answer {
            PlannedAnswer::Text(text) => text.clone(),
            PlannedAnswer::NumberFromLastResult => messages
                .iter()
                .rev()
                .find(|m| m.role == "tool")
                .and_then(|m| last_integer(&m.content))
                .map_or_else(|| "I could not find it.".into(), |n| n.to_string()),
        }
    }
}

/// ChatML as bytes: a prompt's tokens for a policy with no tokenizer, laid out so that each
/// turn's prompt begins with the previous turn's prompt and completion.
fn chatml_bytes(messages: &[ChatMessage]) -> Vec<u32> {
    let rendered: String = messages
        .iter()
        .map(|m| format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content))
        .chain(std::iter::once("<|im_start|>assistant\n".to_string()))
        .collect();
    rendered.bytes().map(u32::from).collect()
}

/// A scripted policy's turn `text` after `messages`, as a rollout over ChatML bytes.
pub(crate) fn scripted_rollout(messages: &[ChatMessage], text: String) -> Rollout {
    // The turn ends with the end-of-turn marker the next prompt renders after it.
    let completion: Vec<u32> = format!("{text}<|im_end|>\n")
        .bytes()
        .map(u32::from)
        .collect();
    let prompt = chatml_bytes(messages);
    let logprobs = vec![0.0; completion.len()];
    rollout_from_ids(&prompt, &completion, &logprobs, text, Finish::Stop)
}

impl Policy for PlanPolicy {
    fn name(&self) -> String {
        "planned".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let rollout = scripted_rollout(&request.messages, self.next_turn(&request.messages));
        Box::pin(async move { Ok(vec![rollout; request.n]) })
    }
}

/// How the solver did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SolveReport {
    pub solved: usize,
    pub total: usize,
    /// (template, why) of each unsolved task.
    pub failures: Vec<(String, String)>,
}

impl SolveReport {
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.solved as f64 / self.total as f64
        }
    }
}

/// Generates `tasks` tasks from `seed` and plays each with its plan, `concurrency` at a time.
pub async fn solve(
    env: &McpToolsEnv,
    tasks: usize,
    seed: u64,
    concurrency: usize,
) -> Result<SolveReport, EnvError> {
    let catalogue = env.catalogue().await?;
    let outcomes = futures::stream::iter(0..tasks as u64)
        .map(|i| {
            let catalogue = &catalogue;
            async move {
                let task = super::tasks::generate(seed.wrapping_add(i), catalogue)
                    .ok_or_else(|| EnvError::Other("no task fits the servers' tools".into()))?;
                let policy = PlanPolicy::new(task.clone());
                let episode = env.play(&task, &policy).await;
                Ok::<_, EnvError>((task.template, episode))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    let mut report = SolveReport::default();
    for outcome in outcomes {
        let (template, episode) = outcome?;
        report.total += 1;
        match episode {
            Ok(e) if e.solved => report.solved += 1,
            Ok(e) => report.failures.push((
                template,
                e.server_failure
                    .or_else(|| e.calls.iter().find(|c| c.failed).map(|c| c.result.clone()))
                    .unwrap_or_else(|| "the outcome check failed".into()),
            )),
            Err(e) => report.failures.push((template, e.to_string())),
        }
    }
    Ok(report)
}
