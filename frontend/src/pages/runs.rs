//! `/` and `/runs`: the runs the visitor may read, refreshed every few seconds, with checkboxes to
//! pick runs to compare on one dashboard.

use std::collections::BTreeSet;
use std::time::Duration;

use lachesis_shared::runs::RunSummary;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_navigate;

use crate::api;
use crate::format::{ago, now_ms};
use crate::pages::tasks::ServerTasks;
use crate::table::DataTable;

/// A list page does not need the socket: a slow poll is enough and costs the server little.
const REFRESH: Duration = Duration::from_secs(5);

/// The `/compare` link for the picked runs, in the order they are listed.
pub fn compare_href(runs: &[String]) -> String {
    let ids: Vec<String> = runs.iter().map(|r| api::encode(r)).collect();
    format!("/compare?runs={}", ids.join(","))
}

#[component]
pub fn RunsPage() -> impl IntoView {
    let runs = LocalResource::new(api::runs);
    if let Ok(handle) = set_interval_with_handle(move || runs.refetch(), REFRESH) {
        on_cleanup(move || handle.clear());
    }
    // The last good list stays on screen while a refresh fails.
    let (last, set_last) = signal(None::<Vec<RunSummary>>);
    let error = RwSignal::new(None::<String>);
    Effect::new(move |_| match runs.get() {
        Some(Ok(list)) => {
            set_last.set(Some(list));
            error.set(None);
        }
        Some(Err(e)) => error.set(Some(e.to_string())),
        None => {}
    });
    let picked = RwSignal::new(BTreeSet::<String>::new());
    let navigate = use_navigate();

    let compare = move |_| {
        let ids: Vec<String> = picked.get_untracked().into_iter().collect();
        if !ids.is_empty() {
            navigate(&compare_href(&ids), Default::default());
        }
    };

    let rows = move || {
        let now = now_ms();
        last.get()
            .unwrap_or_default()
            .into_iter()
            .map(|run| {
                let id = run.id.clone();
                let checked = {
                    let id = id.clone();
                    move || picked.with(|p| p.contains(&id))
                };
                let toggle = {
                    let id = id.clone();
                    move |_| {
                        picked.update(|p| {
                            if !p.remove(&id) {
                                p.insert(id.clone());
                            }
                        })
                    }
                };
                let envs: Vec<String> = run.envs.iter().map(|e| e.name.clone()).collect();
                let activity = run
                    .last_group_at_ms
                    .map_or_else(|| "—".to_owned(), |at| ago(now, at));
                view! {
                    <tr data-testid="run-row">
                        <td>
                            <input
                                type="checkbox"
                                aria-label=format!("Compare {id}")
                                prop:checked=checked
                                on:change=toggle
                            />
                        </td>
                        <td>
                            <A href=format!("/runs/{}", api::encode(&id))>{id.clone()}</A>
                            {run.public.then(|| view! { <span class="badge">"public"</span> })}
                        </td>
                        <td class="muted">{run.team.unwrap_or_default()}</td>
                        <td class="num">{run.current_step}</td>
                        <td class="num">{run.queue_size}</td>
                        <td class="num">{run.groups}</td>
                        <td>{activity}</td>
                        <td>{envs.join(", ")}</td>
                    </tr>
                }
            })
            .collect_view()
    };

    let empty = move || {
        last.with(|l| l.as_ref().is_some_and(|l| l.is_empty()))
            .then(|| {
                view! {
                    <p class="muted">
                        "No runs yet. A trainer creates one by registering ("
                        <code>"POST /register"</code> " or " <code>"POST /runs/NAME/register"</code>
                        ")."
                    </p>
                }
            })
    };

    view! {
        <div class="page-head">
            <h1>"Runs"</h1>
            <button
                class="primary"
                disabled=move || picked.with(|p| p.is_empty())
                on:click=compare
            >
                {move || format!("Compare ({})", picked.with(|p| p.len()))}
            </button>
        </div>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <DataTable class="runs" testid="runs-table" rows>
            <th></th>
            <th>"Run"</th>
            <th>"Team"</th>
            <th class="num">"Step"</th>
            <th class="num">"Queue"</th>
            <th class="num">"Groups"</th>
            <th>"Last activity"</th>
            <th>"Environments"</th>
        </DataTable>
        {empty}
        {move || last.get().is_none().then(|| view! { <p class="muted">"Loading…"</p> })}
        <ServerTasks />
    }
}
