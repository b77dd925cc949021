//! `/tools`: the MCP tools environment's episodes as they happen: the task, the tools offered
//! with their schemas, each call with its arguments and the server's result, the final answer
//! and the outcome check. The server plays episodes only while someone watches this page.

mod model;

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::tools::ToolEpisodeStep;
use leptos::prelude::*;

use self::model::{EpisodeView, apply};
use crate::live::{Notice, use_topic};

#[component]
pub fn ToolsPage() -> impl IntoView {
    let episodes = RwSignal::new(Vec::<EpisodeView>::new());
    let subscribed = RwSignal::new(false);
    use_topic(Topic::Tools, move |notice| match notice {
        Notice::Event(LiveEvent::ToolEpisode(event)) => episodes.update(|e| apply(e, event)),
        Notice::Event(_) => {}
        Notice::Resync => subscribed.set(true),
        Notice::Lost => subscribed.set(false),
    });
    view! {
        <div class="tools-page" data-testid="tools" data-subscribed=move || subscribed.get().to_string()>
            <div class="page-head">
                <h1>"Tool calling"</h1>
                <span class="muted">
                    {move || if subscribed.get() { "Live" } else { "Connecting to the live feed…" }}
                </span>
            </div>
            <p class="muted">
                "The model works on tasks with real MCP servers (files, a memory graph, git). "
                "Episodes run while this page is open and no trainer has the environment ("
                <code>"lachesis serve --env mcp_tools"</code>
                ")."
            </p>
            {move || {
                let list = episodes.get();
                if list.is_empty() {
                    view! { <p class="muted" data-testid="tools-waiting">"Waiting for an episode…"</p> }
                        .into_any()
                } else {
                    list.into_iter().map(episode_card).collect_view().into_any()
                }
            }}
        </div>
    }
}

fn episode_card(episode: EpisodeView) -> impl IntoView {
    let tool_count = episode.tools.len();
    view! {
        <section class="card tool-episode" data-testid="tool-episode">
            <h3>{episode.template.clone()}</h3>
            <p class="tool-task" data-testid="tool-task">{episode.task.clone()}</p>
            <details>
                <summary>{format!("{tool_count} tools offered")}</summary>
                <ul class="tool-list">
                    {episode
                        .tools
                        .into_iter()
                        .map(|(server, tool)| {
                            view! {
                                <li>
                                    <code>{tool.name.clone()}</code>
                                    " (" {server} ") "
                                    <span class="muted">{tool.description.clone().unwrap_or_default()}</span>
                                    <pre>{tool.parameters.to_string()}</pre>
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
            </details>
            <ol class="tool-steps">{episode.steps.into_iter().map(step_row).collect_view()}</ol>
            {episode.finished.map(outcome)}
        </section>
    }
}

fn step_row(step: ToolEpisodeStep) -> AnyView {
    match step {
        ToolEpisodeStep::Called {
            call,
            server,
            result,
            failed,
        } => view! {
            <li class="tool-call" data-testid="tool-call" data-failed=failed.to_string()>
                <code>{call.name}</code>
                {server.map(|s| format!(" on {s}"))}
                <pre>{serde_json::Value::Object(call.arguments).to_string()}</pre>
                <pre class=if failed { "tool-result error" } else { "tool-result" }>{result}</pre>
            </li>
        }
        .into_any(),
        ToolEpisodeStep::Malformed { error } => view! {
            <li class="tool-call error" data-testid="tool-malformed">"Not a well-formed call: " {error}</li>
        }
        .into_any(),
        _ => ().into_any(),
    }
}

fn outcome(finished: ToolEpisodeStep) -> AnyView {
    let ToolEpisodeStep::Finished {
        answer,
        solved,
        score,
        check,
        server_failure,
    } = finished
    else {
        return ().into_any();
    };
    view! {
        <div class="tool-outcome" data-testid="tool-outcome" data-solved=solved.to_string()>
            <p>"Answer: " {answer.unwrap_or_else(|| "(none)".into())}</p>
            <p>
                {if solved { "Solved" } else { "Not solved" }} ": " {check}
                {format!(" · reward {score:.2}")}
            </p>
            {server_failure.map(|f| view! { <p class="error">{f}</p> })}
        </div>
    }
    .into_any()
}
