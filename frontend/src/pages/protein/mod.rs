//! `/protein`: the protein binder design environment's episodes as they happen. Each episode is a
//! timeline: the target, then its four stages (target structure, binder backbone, binder
//! sequence, complex evaluation) with the model's arguments, the tool's answer, the time spent
//! waiting and working and who answered (a stand-in is said to be one), the turns the
//! environment refused, and the outcome. A 3D view draws the selected episode's latest structure
//! as a backbone trace. The server plays episodes only while someone watches this page.

mod geometry;
mod model;
mod viewer;

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::protein::{DesignStage, StructureTrace, ToolBackend};
use leptos::prelude::*;

use self::geometry::{Colouring, Layout, has_plddt, layout};
use self::model::{
    EpisodeView, Outcome, Refusal, StageView, apply, backend_key, backend_label, compact, duration,
    stage_key,
};
use self::viewer::StructureViewer;
use crate::live::{Notice, use_topic};

/// The arguments shown per call, in characters.
const ARGUMENTS_SHOWN: usize = 400;

/// The structure in the 3D view and where it came from.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    episode: u64,
    target: String,
    sequence: String,
    stage: DesignStage,
    backend: Option<ToolBackend>,
    trace: StructureTrace,
}

#[component]
pub fn ProteinPage() -> impl IntoView {
    let episodes = RwSignal::new(Vec::<EpisodeView>::new());
    let subscribed = RwSignal::new(false);
    let lost = RwSignal::new(false);
    // The episode pinned to the 3D view; without one, the newest with a structure.
    let selected = RwSignal::new(None::<u64>);
    // The reader's choice; without one, pLDDT where the structure has it.
    let colouring = RwSignal::new(None::<Colouring>);
    use_topic(Topic::Protein, move |notice| match notice {
        Notice::Event(LiveEvent::ProteinEpisode(event)) => episodes.update(|e| apply(e, *event)),
        Notice::Event(_) => {}
        Notice::Resync => {
            subscribed.set(true);
            lost.set(false);
        }
        Notice::Lost => {
            subscribed.set(false);
            lost.set(true);
        }
    });

    let shown = Memo::new(move |_| {
        episodes.with(|list| {
            let pinned = selected
                .get()
                .and_then(|id| list.iter().find(|e| e.id == id));
            let episode = pinned.or_else(|| list.iter().find(|e| e.structure.is_some()))?;
            let (stage, trace) = episode.structure.as_ref()?;
            Some(Shown {
                episode: episode.id,
                target: episode.target.clone(),
                sequence: episode.sequence.clone(),
                stage: *stage,
                backend: episode.stages[stage.index()]
                    .answer
                    .as_ref()
                    .map(|a| a.backend),
                trace: trace.clone(),
            })
        })
    });
    let scored =
        Memo::new(move |_| shown.with(|s| s.as_ref().is_some_and(|s| has_plddt(&s.trace))));
    let mode = Memo::new(move |_| match colouring.get() {
        Some(Colouring::Plddt) if scored.get() => Colouring::Plddt,
        Some(choice @ Colouring::Chain) => choice,
        _ if scored.get() => Colouring::Plddt,
        _ => Colouring::Chain,
    });
    let drawn: Memo<Layout> = Memo::new(move |_| {
        shown.with(|s| {
            s.as_ref()
                .map(|s| layout(&s.trace, &s.sequence, mode.get()))
                .unwrap_or_default()
        })
    });
    let label = Signal::derive(move || {
        shown.with(|s| match s {
            Some(s) => {
                let l = drawn.get();
                format!(
                    "Backbone trace of episode {} after {}: {} chains, {} residues",
                    s.episode,
                    s.stage.label(),
                    l.chains,
                    l.residues
                )
            }
            None => "No structure yet".to_owned(),
        })
    });

    view! {
        <div class="protein-page" data-testid="protein" data-subscribed=move || subscribed.get().to_string()>
            <div class="page-head">
                <h1>"Protein binder design"</h1>
                <span class="muted" role="status">
                    {move || {
                        if subscribed.get() {
                            "Live"
                        } else if lost.get() {
                            "Connection lost: reconnecting…"
                        } else {
                            "Connecting to the live feed…"
                        }
                    }}
                </span>
            </div>
            <p class="muted">
                "The model designs a protein that binds a target, one tool call per stage: the "
                "target's structure, a binder backbone against it, sequences for that backbone, "
                "then the complex folded together and scored. Episodes run on the server only while "
                "this page is open and no trainer has the environment ("
                <code>"lachesis serve --env protein_binder"</code>
                ")."
            </p>
            <div class="protein-layout">
                <div class="protein-episodes">
                    {move || {
                        episodes
                            .with(Vec::is_empty)
                            .then(|| {
                                view! {
                                    <p class="card muted" data-testid="protein-waiting">
                                        "Waiting for an episode…"
                                    </p>
                                }
                            })
                    }}
                    // A card is drawn again only when its episode changed, so the buttons of
                    // finished episodes stay put while others stream in.
                    <For
                        each=move || episodes.get()
                        key=|e| (e.id, e.revision)
                        children=move |e| episode_card(e, selected)
                    />
                </div>
                <section class="card protein-structure" aria-label="3D structure">
                    <h2>"Structure"</h2>
                    <p class="protein-caption" data-testid="protein-caption">
                        {move || match shown.get() {
                            Some(s) => view! {
                                {format!("Episode {}: {} after {}", s.episode, s.target, s.stage.label())}
                                {s.backend.map(|b| view! { " " {badge(b)} })}
                            }
                            .into_any(),
                            None => view! {
                                <span class="muted">
                                    "No structure yet: the first stage draws the target."
                                </span>
                            }
                            .into_any(),
                        }}
                    </p>
                    <StructureViewer layout=drawn label=label />
                    <div class="protein-colouring" role="group" aria-label="Colour by">
                        <span class="muted">"Colour by "</span>
                        <button
                            class:active=move || mode.get() == Colouring::Chain
                            aria-pressed=move || (mode.get() == Colouring::Chain).to_string()
                            data-testid="protein-colour-chain"
                            on:click=move |_| colouring.set(Some(Colouring::Chain))
                        >
                            "chain"
                        </button>
                        <button
                            class:active=move || mode.get() == Colouring::Plddt
                            aria-pressed=move || (mode.get() == Colouring::Plddt).to_string()
                            disabled=move || !scored.get()
                            title=move || {
                                if scored.get() { "" } else { "This structure has no pLDDT" }
                            }
                            data-testid="protein-colour-plddt"
                            on:click=move |_| colouring.set(Some(Colouring::Plddt))
                        >
                            "pLDDT"
                        </button>
                    </div>
                    <ul class="protein-legend" data-testid="protein-legend" aria-label="Legend">
                        {move || {
                            drawn
                                .get()
                                .legend
                                .into_iter()
                                .map(|k| {
                                    let [r, g, b] = k.color;
                                    view! {
                                        <li>
                                            <span
                                                class="swatch"
                                                aria-hidden="true"
                                                style=format!("background:rgb({r},{g},{b})")
                                            ></span>
                                            {k.text}
                                        </li>
                                    }
                                })
                                .collect_view()
                        }}
                    </ul>
                    <p class="muted protein-hint">"Drag to turn, scroll to zoom."</p>
                </section>
            </div>
        </div>
    }
}

fn badge(backend: ToolBackend) -> impl IntoView {
    view! {
        <span
            class=format!("protein-backend backend-{}", backend_key(backend))
            data-testid="protein-backend"
            data-backend=backend_key(backend)
        >
            {backend_label(backend)}
        </span>
    }
}

fn episode_card(episode: EpisodeView, selected: RwSignal<Option<u64>>) -> impl IntoView {
    let id = episode.id;
    let pinned = move || selected.get() == Some(id);
    let has_structure = episode.structure.is_some();
    let finished = episode.outcome.is_some();
    let progress = format!(
        "{} of {} stages done{}",
        episode.done(),
        DesignStage::ALL.len(),
        if finished { "" } else { " so far" }
    );
    let length = episode.sequence.chars().count();
    let refusals = |at: usize| {
        episode
            .refused
            .iter()
            .filter(|r| r.before == at)
            .cloned()
            .map(refused_row)
            .collect_view()
    };
    let rows = episode
        .stages
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, stage)| view! { {refusals(i)} {stage_row(stage)} })
        .collect_view();
    let after = refusals(episode.stages.len());
    view! {
        <section
            class="card protein-episode"
            data-testid="protein-episode"
            data-episode=id.to_string()
            data-finished=finished.to_string()
        >
            <div class="protein-episode-head">
                <h3>{format!("Episode {id}: {}", episode.target)}</h3>
                <span class="muted">{progress}</span>
                <button
                    data-testid="protein-select"
                    aria-pressed=move || pinned().to_string()
                    disabled=!has_structure
                    on:click=move |_| selected.set(if pinned() { None } else { Some(id) })
                >
                    {move || if pinned() { "Shown in 3D (unpin)" } else { "Show in 3D" }}
                </button>
            </div>
            <p class="protein-target">
                <span class="muted">{format!("Target sequence ({length} residues) ")}</span>
                <code class="protein-sequence" data-testid="protein-sequence">{episode.sequence.clone()}</code>
            </p>
            <ol class="protein-stages">{rows} {after}</ol>
            {episode.outcome.map(outcome)}
        </section>
    }
}

fn stage_row(row: StageView) -> impl IntoView {
    let StageView {
        stage,
        state,
        arguments,
        answer,
        attempts,
    } = row;
    view! {
        <li
            class=format!("protein-stage state-{}", state.key())
            data-testid="protein-stage"
            data-stage=stage_key(stage)
            data-state=state.key()
        >
            <div class="protein-stage-head">
                <span class="protein-state">{state.label()}</span>
                <strong>{stage.label()}</strong>
                " "
                <code class="muted">{stage.tool()}</code>
                {(attempts > 1).then(|| view! { <span class="muted">{format!(" · call {attempts}")}</span> })}
            </div>
            {arguments.map(|a| view! {
                <code class="protein-args" data-testid="protein-args" title="The model's arguments">
                    {compact(&a, ARGUMENTS_SHOWN)}
                </code>
            })}
            {answer.map(|a| view! {
                <p class=if a.ok { "protein-summary" } else { "protein-summary error" }>{a.summary}</p>
                <p class="protein-timing muted">
                    {format!("waited {} · worked {} · ", duration(a.waited_ms), duration(a.worked_ms))}
                    {badge(a.backend)}
                </p>
            })}
        </li>
    }
}

fn refused_row(refusal: Refusal) -> impl IntoView {
    view! {
        <li class="protein-refused" data-testid="protein-refused">
            <strong>"Refused turn: "</strong>
            {refusal.reason}
        </li>
    }
}

fn outcome(o: Outcome) -> impl IntoView {
    let score = |v: Option<f64>, digits: usize| {
        v.filter(|v| v.is_finite())
            .map_or_else(|| "—".to_owned(), |v| format!("{v:.digits$}"))
    };
    view! {
        <div
            class="protein-outcome"
            data-testid="protein-outcome"
            data-reward=o.reward.to_string()
            data-stages=o.stages.to_string()
        >
            <strong>{format!("Reward {:.3}", o.reward)}</strong>
            {format!(
                " · {} of {} stages · pLDDT {} · ipTM {}",
                o.stages,
                DesignStage::ALL.len(),
                score(o.plddt, 1),
                score(o.iptm, 2),
            )}
        </div>
    }
}
