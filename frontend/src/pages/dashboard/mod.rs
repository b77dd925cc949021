//! `/runs/:run` and `/compare?runs=a,b`: a run's live charts, its latest groups, exports and
//! visibility, with other runs overlaid on the same charts.

mod charts;
mod feed;
mod groups;
mod history;

use std::collections::BTreeMap;

use lachesis_shared::live::LiveEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api;
use crate::app::Session;
use crate::charts::{LineChart, XAxis};
use crate::format::{ago, now_ms};
use crate::live::Notice;
use feed::{OverlayFeed, Runs, follow};
use groups::{GroupsTable, Row, TABLE_ROWS};
use history::RunHistory;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let params = use_params_map();
    // Re-created when the route moves to another run, so every subscription follows the URL.
    move || {
        let run = params.with(|p| p.get("run").unwrap_or_default());
        view! { <Dashboard run overlays=Vec::new() /> }
    }
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = use_query_map();
    move || {
        let ids: Vec<String> = query.with(|q| {
            q.get("runs")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        });
        match ids.split_first() {
            Some((run, rest)) => {
                view! { <Dashboard run=run.clone() overlays=rest.to_vec() /> }.into_any()
            }
            None => view! {
                <p class="card muted">"Pick runs to compare on the " <a href="/runs">"runs page"</a> "."</p>
            }
            .into_any(),
        }
    }
}

#[component]
fn Dashboard(run: String, overlays: Vec<String>) -> impl IntoView {
    let runs: Runs = RwSignal::new(BTreeMap::new());
    let error = RwSignal::new(None::<String>);
    let overlay_ids = RwSignal::new(overlays);
    let smoothing = RwSignal::new(0.6);
    let rows = RwSignal::new(Vec::<Row>::new());
    let env_filter = RwSignal::new(None::<i64>);
    let main = StoredValue::new(run.clone());
    // Whether live events of this run are arriving (the server confirmed the subscription);
    // exposed as `data-subscribed` so browser tests know when a posted group must show up.
    let subscribed = RwSignal::new(false);

    // The table: reloaded on mount, on a filter change and after a resync; extended live.
    let load_table = move || {
        let run = main.get_value();
        let env = env_filter.get_untracked();
        spawn_local(async move {
            match api::groups(&run, TABLE_ROWS, env).await {
                Ok(list) => {
                    // A filter change while the request was in flight makes this answer stale.
                    if env_filter.get_untracked() == env {
                        rows.update(|r| groups::replace(r, list));
                    }
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    Effect::new(move |_| {
        env_filter.track();
        rows.set(Vec::new());
        load_table();
    });
    follow(run.clone(), runs, error, move |notice| match notice {
        Notice::Event(LiveEvent::Group(g)) => {
            let wanted = env_filter.with_untracked(|f| f.is_none_or(|id| g.env_id == Some(id)));
            if wanted {
                rows.update(|r| groups::prepend(r, g.clone()));
            }
        }
        Notice::Resync => {
            subscribed.set(true);
            load_table();
        }
        Notice::Lost => subscribed.set(false),
        Notice::Event(_) => {}
    });

    let history =
        Memo::new(move |_| runs.with(|m| m.get(&main.get_value()).cloned().unwrap_or_default()));
    let set = Memo::new(move |_| {
        runs.with(|m| overlay_ids.with(|o| charts::build(m, &main.get_value(), o)))
    });
    let env_name = Callback::new(move |env: Option<i64>| history.with(|h| h.env_name(env)));

    let chart =
        move |title: &str,
              x_axis: XAxis,
              pick: fn(&charts::ChartSet) -> Vec<crate::charts::series::Series>| {
            view! {
                <LineChart
                    title=title.to_owned()
                    x_axis
                    series=Signal::derive(move || set.with(pick))
                    smoothing=smoothing
                />
            }
        };
    let trainer_charts = move || {
        let keys: Vec<String> = set.with(|s| s.trainer.iter().map(|t| t.0.clone()).collect());
        keys.into_iter()
            .map(|key| {
                let title = format!("Trainer: {key}");
                let series = Signal::derive(move || {
                    set.with(|s| {
                        s.trainer
                            .iter()
                            .find(|t| t.0 == key)
                            .map(|t| t.1.clone())
                            .unwrap_or_default()
                    })
                });
                view! { <LineChart title x_axis=XAxis::Step series smoothing=smoothing /> }
            })
            .collect_view()
    };

    // Keyed, so adding an overlay does not re-follow the ones already drawn.
    let overlay_feeds = view! {
        <For
            each=move || overlay_ids.get().into_iter().filter(move |id| *id != main.get_value())
            key=|id| id.clone()
            children=move |id| view! { <OverlayFeed run=id runs error /> }
        />
    };

    view! {
        <div
            class="dashboard"
            data-testid="dashboard"
            data-subscribed=move || subscribed.get().to_string()
        >
        <Header history runs />
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <div class="controls card">
            <label class="slider">
                "Smoothing "
                <input
                    type="range"
                    min="0"
                    max="0.99"
                    step="0.01"
                    prop:value=move || smoothing.get().to_string()
                    on:input=move |ev| {
                        if let Ok(v) = event_target_value(&ev).parse::<f64>() {
                            smoothing.set(v);
                        }
                    }
                    data-testid="smoothing"
                />
                <span class="num">{move || format!("{:.2}", smoothing.get())}</span>
            </label>
            <OverlayPicker main=main.get_value() overlay_ids />
            <span class="spacer"></span>
            <a href=api::export_url(&run, "metrics.csv") download>"Export CSV"</a>
            <a href=api::export_url(&run, "rollouts.jsonl") download>"Export JSONL"</a>
        </div>
        {overlay_feeds}
        <div class="charts">
            <LineChart
                title="Reward (mean, min–max band)".to_owned()
                x_axis=XAxis::Elapsed
                series=Signal::derive(move || set.with(|s| s.reward.clone()))
                smoothing=smoothing
                testid="reward-chart"
            />
            {chart("Groups per second", XAxis::Elapsed, |s| s.rate.clone())}
            {chart("Queue depth", XAxis::Elapsed, |s| s.queue.clone())}
            {chart("Step", XAxis::Elapsed, |s| s.step.clone())}
            {chart("Tokens per group", XAxis::Elapsed, |s| s.tokens.clone())}
            {trainer_charts}
        </div>
        <section class="card">
            <div class="page-head">
                <h2>"Latest groups"</h2>
                <label>
                    "Environment "
                    <select
                        data-testid="env-filter"
                        on:change=move |ev| env_filter.set(event_target_value(&ev).parse().ok())
                    >
                        <option value="">"all"</option>
                        {move || {
                            history
                                .with(|h| {
                                    h.summary.as_ref().map(|s| s.envs.clone()).unwrap_or_default()
                                })
                                .into_iter()
                                .map(|e| view! { <option value=e.env_id.to_string()>{e.name}</option> })
                                .collect_view()
                        }}
                    </select>
                </label>
            </div>
            <GroupsTable rows env_name load_texts=Callback::new(move |()| load_table()) />
        </section>
        </div>
    }
}

/// The run's name, figures and environments, and the public/private switch for writers.
#[component]
fn Header(history: Memo<RunHistory>, runs: Runs) -> impl IntoView {
    let session = expect_context::<Session>();
    let busy = RwSignal::new(false);
    let toggle_error = RwSignal::new(None::<String>);
    move || {
        let h = history.get();
        let Some(s) = h.summary else {
            return view! { <h1>"Loading run…"</h1> }.into_any();
        };
        let can_write = session
            .role_in(s.team.as_deref())
            .is_some_and(|r| r.can_write());
        let run = s.id.clone();
        let public = s.public;
        let toggle = move |_| {
            let run = run.clone();
            busy.set(true);
            spawn_local(async move {
                match api::set_visibility(&run, !public).await {
                    Ok(()) => {
                        toggle_error.set(None);
                        runs.update(|m| {
                            if let Some(s) = m.get_mut(&run).and_then(|h| h.summary.as_mut()) {
                                s.public = !public;
                            }
                        });
                    }
                    Err(e) => toggle_error.set(Some(e.to_string())),
                }
                busy.set(false);
            });
        };
        let envs = s
            .envs
            .iter()
            .map(|e| {
                let class = if e.connected { "badge ok" } else { "badge" };
                let title = format!("group size {}, weight {}", e.group_size, e.weight);
                view! { <span class=class title=title>{e.name.clone()}</span> }
            })
            .collect_view();
        let last = s
            .last_group_at_ms
            .map_or_else(|| "no groups yet".to_owned(), |at| ago(now_ms(), at));
        view! {
            <div class="page-head">
                <h1>
                    {s.id.clone()}
                    {s.public.then(|| view! { <span class="badge">"public"</span> })}
                </h1>
                {can_write
                    .then(|| {
                        view! {
                            <button disabled=move || busy.get() on:click=toggle data-testid="visibility">
                                {if public { "Make private" } else { "Make public" }}
                            </button>
                        }
                    })}
            </div>
            {move || toggle_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <dl class="stats">
                <div class="stat"><dt>"Step"</dt><dd>{s.current_step}</dd></div>
                <div class="stat"><dt>"Queue"</dt><dd>{s.queue_size}</dd></div>
                <div class="stat"><dt>"Groups"</dt><dd>{s.groups}</dd></div>
                <div class="stat"><dt>"Last group"</dt><dd>{last}</dd></div>
                <div class="stat"><dt>"Team"</dt><dd>{s.team.clone().unwrap_or_else(|| "—".to_owned())}</dd></div>
            </dl>
            <p class="envs">{envs}</p>
        }
        .into_any()
    }
}

/// Picks other runs to draw on the same charts.
#[component]
fn OverlayPicker(main: String, overlay_ids: RwSignal<Vec<String>>) -> impl IntoView {
    let all = LocalResource::new(api::runs);
    let options = move || {
        let main = main.clone();
        all.get()
            .and_then(Result::ok)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.id != main)
            .map(|r| {
                let id = r.id.clone();
                let checked = {
                    let id = id.clone();
                    move || overlay_ids.with(|o| o.contains(&id))
                };
                let toggle = {
                    let id = id.clone();
                    move |_| {
                        overlay_ids.update(|o| match o.iter().position(|x| *x == id) {
                            Some(at) => {
                                o.remove(at);
                            }
                            None => o.push(id.clone()),
                        })
                    }
                };
                view! {
                    <label class="check">
                        <input type="checkbox" prop:checked=checked on:change=toggle />
                        {id.clone()}
                    </label>
                }
            })
            .collect_view()
    };
    view! {
        <details class="overlay">
            <summary>{move || format!("Overlay runs ({})", overlay_ids.with(Vec::len))}</summary>
            <div class="overlay-list">{options}</div>
        </details>
    }
}
