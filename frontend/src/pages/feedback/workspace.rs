//! `/feedback/:id`: the annotator's workspace. The guidelines, the caller's progress, then one
//! item at a time — the prompt, the answers and the controls of the queue's kind — until the
//! server has nothing left for them (204), when it shows how far the annotators agree and links
//! to the exports.

use lachesis_shared::feedback::{AgreementReport, ItemToJudge, Judgement, NewJudgement, QueueView};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::controls::ItemView;
use super::{alpha_text, kind_help, kind_label, percent};
use crate::api::{self, ApiError};
use crate::app::Session;
use crate::table::DataTable;

#[component]
pub fn QueuePage() -> impl IntoView {
    let params = use_params_map();
    // Re-created for another queue, so everything follows the URL.
    move || {
        let id = params.with(|p| p.get("id").and_then(|id| id.parse::<i64>().ok()));
        match id {
            Some(id) => view! { <Workspace id /> }.into_any(),
            None => view! { <p class="card error">"No such queue."</p> }.into_any(),
        }
    }
}

/// Where the workspace stands.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Waiting for the first item.
    Loading,
    /// An item to judge.
    Item(ItemToJudge),
    /// Nothing left for the caller.
    Done,
}

impl Phase {
    /// For `data-state`.
    fn name(&self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Item(_) => "item",
            Phase::Done => "done",
        }
    }
}

/// The workspace's state, shared by its parts.
#[derive(Clone, Copy)]
pub(super) struct Desk {
    queue: i64,
    phase: RwSignal<Phase>,
    report: RwSignal<Option<AgreementReport>>,
    error: RwSignal<Option<String>>,
    /// A judgement or the next item is on its way.
    busy: RwSignal<bool>,
}

impl Desk {
    /// Asks for the caller's next item; on 204, for the agreement report.
    fn next(self) {
        spawn_local(async move {
            match api::feedback_next(self.queue).await {
                Ok(Some(item)) => {
                    self.phase.try_set(Phase::Item(item));
                }
                Ok(None) => {
                    self.phase.try_set(Phase::Done);
                    match api::feedback_agreement(self.queue).await {
                        Ok(report) => {
                            self.report.try_set(Some(report));
                        }
                        Err(e) => {
                            self.error.try_set(Some(e.to_string()));
                        }
                    }
                }
                Err(e) => {
                    self.error.try_set(Some(e.to_string()));
                }
            }
            self.busy.try_set(false);
        });
    }

    /// Sends the judgement of the item shown, then loads the next one. An item already judged
    /// (409: a second tab, a double submission) is skipped the same way.
    pub(super) fn judge(self, judgement: Judgement) {
        let item = self.phase.with_untracked(|p| match p {
            Phase::Item(item) => Some(item.item),
            _ => None,
        });
        let Some(item) = item else { return };
        if self.busy.get_untracked() {
            return;
        }
        self.busy.set(true);
        self.error.set(None);
        spawn_local(async move {
            match api::feedback_judge(item, &NewJudgement { judgement }).await {
                Ok(()) | Err(ApiError::Status { status: 409, .. }) => self.next(),
                Err(e) => {
                    self.error.try_set(Some(e.to_string()));
                    self.busy.try_set(false);
                }
            }
        });
    }
}

#[component]
fn Workspace(id: i64) -> impl IntoView {
    let session = expect_context::<Session>();
    let queue = RwSignal::new(None::<QueueView>);
    let desk = Desk {
        queue: id,
        phase: RwSignal::new(Phase::Loading),
        report: RwSignal::new(None),
        error: RwSignal::new(None),
        busy: RwSignal::new(true),
    };
    spawn_local(async move {
        match api::feedback_queues().await {
            Ok(list) => {
                queue.try_set(list.into_iter().find(|q| q.id == id));
            }
            Err(e) => {
                desk.error.try_set(Some(e.to_string()));
            }
        }
    });
    desk.next();

    // Judgements are mutations: they wait for the session (and its CSRF token) to be known.
    let ready = Signal::derive(move || session.me.with(Option::is_some) && !desk.busy.get());
    let kind = Memo::new(move |_| {
        desk.phase
            .with(|p| match p {
                Phase::Item(item) => Some(item.kind),
                _ => None,
            })
            .or_else(|| queue.with(|q| q.as_ref().map(|q| q.kind)))
    });
    let guidelines = Memo::new(move |_| {
        desk.phase
            .with(|p| match p {
                Phase::Item(item) => Some(item.guidelines.clone()),
                _ => None,
            })
            .or_else(|| queue.with(|q| q.as_ref().map(|q| q.guidelines.clone())))
            .unwrap_or_default()
    });
    let title = move || {
        queue.with(|q| {
            q.as_ref()
                .map_or_else(|| format!("Queue #{id}"), |q| q.name.clone())
        })
    };
    let item_id = move || {
        desk.phase.with(|p| match p {
            Phase::Item(item) => Some(item.item.to_string()),
            _ => None,
        })
    };

    let body = move || match desk.phase.get() {
        Phase::Loading => view! { <p class="card muted">"Loading…"</p> }.into_any(),
        Phase::Item(item) => view! { <ItemView item desk ready /> }.into_any(),
        Phase::Done => view! { <DoneView desk /> }.into_any(),
    };

    view! {
        <div
            class="feedback-page"
            data-testid="feedback-queue"
            data-kind=move || kind.get().map(|k| k.as_str())
            data-state=move || desk.phase.with(Phase::name)
            data-item=item_id
        >
            <div class="page-head">
                <h1>{title}</h1>
                <div class="inline">
                    {move || kind.get().map(|k| view! { <span class="badge">{kind_label(k)}</span> })}
                    <A href="/feedback">"All queues"</A>
                </div>
            </div>
            {move || desk.error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <details class="card feedback-guidelines" open>
                <summary>"Guidelines"</summary>
                {move || kind.get().map(|k| view! { <p class="muted">{kind_help(k)}</p> })}
                {move || {
                    let text = guidelines.get();
                    if text.trim().is_empty() {
                        view! { <p class="muted">"The host gave no guidelines."</p> }.into_any()
                    } else {
                        view! { <p class="feedback-text" data-testid="feedback-guidelines">{text}</p> }
                            .into_any()
                    }
                }}
            </details>
            {body}
        </div>
    }
}

/// Nothing left for the caller: thanks, the agreement figures and the exports.
#[component]
fn DoneView(desk: Desk) -> impl IntoView {
    let queue = desk.queue;
    let report = move || {
        desk.report.get().map(|r| {
            let annotators = r
                .annotators
                .into_iter()
                .map(|a| {
                    view! {
                        <tr data-testid="feedback-annotator">
                            <td>{a.annotator}</td>
                            <td class="num">{a.judgements}</td>
                            <td class="num">{percent(a.agreement)}</td>
                        </tr>
                    }
                })
                .collect_view();
            let kappas = (!r.kappas.is_empty()).then(|| {
                let rows = r
                    .kappas
                    .into_iter()
                    .map(|k| {
                        let kappa = k
                            .kappa
                            .map_or_else(|| "—".to_owned(), |k| format!("{k:.3}"));
                        view! {
                            <tr>
                                <td>{format!("{} & {}", k.first, k.second)}</td>
                                <td class="num">{k.shared}</td>
                                <td class="num">{kappa}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                view! {
                    <h3>"Cohen's κ per pair of annotators"</h3>
                    <DataTable rows testid="feedback-kappas">
                        <th>"Annotators"</th>
                        <th class="num">"Shared items"</th>
                        <th class="num">"κ"</th>
                    </DataTable>
                }
            });
            let items = format!("{} items judged by at least two people", r.items.len());
            view! {
                <p data-testid="feedback-alpha">{alpha_text(r.alpha)}</p>
                <p class="muted">{items}</p>
                <h3>"Agreement per annotator"</h3>
                <DataTable rows=annotators testid="feedback-annotators">
                    <th>"Annotator"</th>
                    <th class="num">"Judgements"</th>
                    <th class="num">"Agreement with the others"</th>
                </DataTable>
                {kappas}
            }
        })
    };
    view! {
        <section class="card" data-testid="feedback-done">
            <h2>"Nothing left for you in this queue — thank you"</h2>
            {report}
            <div class="inline">
                {export_link(queue, "pairs", "Download preference pairs (JSONL)")}
                {export_link(queue, "ratings", "Download ratings (JSONL)")}
            </div>
        </section>
    }
}

/// The link that downloads the queue's export `<what>.jsonl`.
fn export_link(queue: i64, what: &'static str, text: &'static str) -> impl IntoView {
    let file = format!("{what}.jsonl");
    view! {
        <a
            href=api::feedback_export_url(queue, &file)
            download=format!("feedback-{queue}-{file}")
            rel="external"
            data-testid=format!("feedback-export-{what}")
        >
            {text}
        </a>
    }
}
