//! `/feedback`: the queues of the caller's teams, each linking to its workspace, and for team
//! owners and members a form to open a queue (with its first items, as JSON lines).

use lachesis_shared::accounts::Role;
use lachesis_shared::feedback::{Earnings, FeedbackKind, NewItem, NewItems, NewQueue, QueueView};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::{KINDS, kind_label};
use crate::api;
use crate::app::Session;
use crate::table::DataTable;

#[component]
pub fn QueuesPage() -> impl IntoView {
    let queues = RwSignal::new(None::<Vec<QueueView>>);
    let error = RwSignal::new(None::<String>);
    // Only signed-in people earn; anyone else simply sees no earnings line.
    let earned = RwSignal::new(None::<Earnings>);
    spawn_local(async move {
        if let Ok(earnings) = api::feedback_earnings().await {
            earned.try_set(Some(earnings));
        }
    });
    spawn_local(async move {
        match api::feedback_queues().await {
            Ok(list) => {
                queues.try_set(Some(list));
            }
            Err(e) => {
                error.try_set(Some(e.to_string()));
            }
        }
    });

    let rows = move || match queues.get() {
        None => view! { <tr><td colspan="6" class="muted">"Loading…"</td></tr> }.into_any(),
        Some(list) if list.is_empty() => view! {
            <tr><td colspan="6" class="muted">"No queues in your teams yet."</td></tr>
        }
        .into_any(),
        Some(list) => list.into_iter().map(queue_row).collect_view().into_any(),
    };

    view! {
        <div class="feedback-page" data-testid="feedback-queues">
            <div class="page-head">
                <h1>"Feedback"</h1>
            </div>
            <p class="muted">
                "Queues of answers for people to judge: rank a group's answers, rate one from 1 to "
                "5, or pick the better of two. Each item is judged by as many different people as "
                "its queue's overlap; the judgements export as preference pairs and ratings."
            </p>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || earned.get().map(|e| view! {
                <p class="muted" data-testid="feedback-earnings">
                    "Paid for your verdicts on human judge cards: " {e.balance.to_string()}
                    " USDC (" {e.payments} " verdicts)."
                </p>
            })}
            <section class="card">
                <DataTable rows testid="feedback-queue-table">
                    <th>"Queue"</th>
                    <th>"Task"</th>
                    <th class="num">"Overlap"</th>
                    <th class="num">"Items"</th>
                    <th class="num">"Complete items"</th>
                    <th class="num">"Judgements"</th>
                </DataTable>
            </section>
            <NewQueueForm queues />
        </div>
    }
}

fn queue_row(q: QueueView) -> impl IntoView {
    view! {
        <tr data-testid="feedback-queue-row" data-id=q.id.to_string() data-kind=q.kind.as_str()>
            <td><A href=format!("/feedback/{}", q.id)>{q.name}</A></td>
            <td>{kind_label(q.kind)}</td>
            <td class="num">{q.overlap}</td>
            <td class="num">{q.items}</td>
            <td class="num">{q.complete_items}</td>
            <td class="num">{q.judgements}</td>
        </tr>
    }
}

/// The items pasted into the form, one JSON object per line.
fn parse_items(text: &str) -> Result<Vec<NewItem>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str::<NewItem>(line).map_err(|e| format!("items, line {}: {e}", n + 1))
        })
        .collect()
}

/// Opens a queue for one of the caller's teams (owners and members), then adds its items.
#[component]
fn NewQueueForm(queues: RwSignal<Option<Vec<QueueView>>>) -> impl IntoView {
    let session = expect_context::<Session>();
    let teams = Memo::new(move |_| {
        session.me.with(|me| {
            me.as_ref().map_or_else(Vec::new, |me| {
                me.teams
                    .iter()
                    .filter(|m| m.role != Role::Viewer)
                    .map(|m| m.team.clone())
                    .collect::<Vec<_>>()
            })
        })
    });
    let auth_off = move || {
        session
            .me
            .with(|me| me.as_ref().is_some_and(|m| !m.auth_enabled))
    };
    let team = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let kind = RwSignal::new(FeedbackKind::Rate);
    let guidelines = RwSignal::new(String::new());
    let overlap = RwSignal::new("2".to_owned());
    let items = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let notice = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        error.set(None);
        notice.set(None);
        let team_name = match team.get_untracked().trim() {
            "" => teams.get_untracked().first().cloned().unwrap_or_default(),
            chosen => chosen.to_owned(),
        };
        let Ok(overlap) = overlap.get_untracked().trim().parse::<u32>() else {
            error.set(Some("The overlap is a whole number from 1 to 20.".into()));
            return;
        };
        let new_items = match parse_items(&items.get_untracked()) {
            Ok(list) => list,
            Err(e) => {
                error.set(Some(e));
                return;
            }
        };
        let queue = NewQueue {
            name: name.get_untracked().trim().to_owned(),
            kind: kind.get_untracked(),
            guidelines: guidelines.get_untracked(),
            overlap,
        };
        busy.set(true);
        spawn_local(async move {
            match api::feedback_open_queue(&team_name, &queue).await {
                Ok(mut view) => {
                    let added = if new_items.is_empty() {
                        Ok(0)
                    } else {
                        api::feedback_add_items(view.id, &NewItems { items: new_items }).await
                    };
                    match added {
                        Ok(added) => {
                            view.items += i64::try_from(added).unwrap_or(0);
                            notice.try_set(Some(format!(
                                "Opened “{}” with {added} items.",
                                view.name
                            )));
                            name.try_set(String::new());
                            items.try_set(String::new());
                        }
                        Err(e) => {
                            error.try_set(Some(format!("The queue is open, its items not: {e}")));
                        }
                    }
                    queues.try_update(|q| q.get_or_insert_with(Vec::new).push(view));
                }
                Err(e) => {
                    error.try_set(Some(e.to_string()));
                }
            }
            busy.try_set(false);
        });
    };

    let team_field = move || {
        let list = teams.get();
        if list.is_empty() {
            view! { <input type="text" placeholder="team name" bind:value=team /> }.into_any()
        } else {
            let options = list
                .into_iter()
                .map(|t| view! { <option value=t.clone()>{t.clone()}</option> })
                .collect_view();
            view! {
                <select on:change=move |ev| team.set(event_target_value(&ev))>{options}</select>
            }
            .into_any()
        }
    };
    let shown = move || !teams.with(Vec::is_empty) || auth_off();
    view! {
        <Show when=shown>
            <section class="card">
                <h2>"Open a queue"</h2>
                <form class="stack feedback-form" on:submit=submit>
                    <label>"Team" {team_field}</label>
                    <label>
                        "Name"
                        <input type="text" required maxlength="80" bind:value=name />
                    </label>
                    <label>
                        "Task"
                        <select on:change=move |ev| {
                            if let Some(k) = FeedbackKind::parse(&event_target_value(&ev)) {
                                kind.set(k);
                            }
                        }>{kind_options()}</select>
                    </label>
                    <label>
                        "Judges per item (overlap)"
                        <input type="number" min="1" max="20" required bind:value=overlap />
                    </label>
                    <label>
                        "Guidelines"
                        <textarea rows="4" bind:value=guidelines></textarea>
                    </label>
                    <label>
                        "Items (optional): one JSON object per line, "
                        <code>{r#"{"prompt": "…", "answers": ["…", "…"]}"#}</code>
                        <textarea rows="5" bind:value=items></textarea>
                    </label>
                    <div class="inline">
                        <button type="submit" class="primary" disabled=move || busy.get()>
                            "Open the queue"
                        </button>
                    </div>
                </form>
                {move || notice.get().map(|n| view! { <p class="muted">{n}</p> })}
                {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            </section>
        </Show>
    }
}

fn kind_options() -> impl IntoView {
    KINDS
        .iter()
        .map(|&k| {
            view! {
                <option value=k.as_str() selected=k == FeedbackKind::Rate>{kind_label(k)}</option>
            }
        })
        .collect_view()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_read_one_per_line() {
        let text = "{\"prompt\": \"p\", \"answers\": [\"a\", \"b\"]}\n\n{\"prompt\": \"q\", \
                    \"answers\": [\"c\"], \"source\": \"run 3\"}\n";
        let items = parse_items(text).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].source.as_deref(), Some("run 3"));
        let err = parse_items("{\"prompt\": \"p\"}\nnot json").unwrap_err();
        assert!(err.starts_with("items, line 1"), "{err}");
    }
}
