//! The dialogue as a chat, the hidden need once it may be seen, and the judge's verdict.

use lachesis_shared::cats::{CatBehavior, CatRole, CatScenario, CatSession, CatTurn, CatVerdict};
use leptos::prelude::*;

use super::model::{describe, percent};

/// Who is speaking, as the person sees it.
fn speaker(turn: &CatTurn, role: CatRole) -> &'static str {
    match (turn, role) {
        (CatTurn::Cat { .. }, CatRole::Cat) => "You (the cat)",
        (CatTurn::Cat { .. }, CatRole::Caretaker) => "The cat",
        (CatTurn::Caretaker { .. }, CatRole::Caretaker) => "You (the caretaker)",
        (CatTurn::Caretaker { .. }, CatRole::Cat) => "The caretaker (model)",
    }
}

fn turn_view(index: usize, turn: CatTurn, role: CatRole, behaviors: &[CatBehavior]) -> AnyView {
    let who = speaker(&turn, role);
    match turn {
        CatTurn::Cat {
            behaviors: shown,
            sound,
        } => {
            let items = shown
                .into_iter()
                .map(|name| {
                    let description = describe(behaviors, &name).map(str::to_owned);
                    let key = name.clone();
                    view! {
                        <li class="behavior" data-behavior=key>
                            <b>{name}</b>
                            {description.map(|d| view! { <span class="muted">{format!(" — {d}")}</span> })}
                        </li>
                    }
                })
                .collect_view();
            let sound = sound.map(|s| view! { <p class="sound">{format!("“{s}”")}</p> });
            view! {
                <li class="turn turn-cat" data-index=index>
                    <div class="turn-who">{who}</div>
                    <ul class="behaviors-shown">{items}</ul>
                    {sound}
                </li>
            }
            .into_any()
        }
        CatTurn::Caretaker { text } => view! {
            <li class="turn turn-caretaker" data-index=index>
                <div class="turn-who">{who}</div>
                <p class="turn-text">{text}</p>
            </li>
        }
        .into_any(),
    }
}

#[component]
pub fn Transcript(
    session: RwSignal<Option<CatSession>>,
    #[prop(into)] behaviors: Signal<Vec<CatBehavior>>,
) -> impl IntoView {
    let turns = move || {
        session.with(|s| {
            let s = s.as_ref()?;
            let known = behaviors.get();
            Some(
                s.turns
                    .iter()
                    .cloned()
                    .enumerate()
                    .map(|(i, t)| turn_view(i, t, s.role, &known))
                    .collect_view(),
            )
        })
    };
    let count = move || session.with(|s| s.as_ref().map_or(0, |s| s.turns.len()));
    view! {
        <ol id="cat-transcript" class="cat-transcript" data-turns=count aria-live="polite">
            {turns}
        </ol>
    }
}

/// The need behind the behaviors. `full` adds what a good caretaker would have done.
pub fn scenario_view(scenario: &CatScenario, full: bool) -> impl IntoView + use<> {
    let behaviors = scenario.behaviors.join(", ");
    let remedy = full.then(|| {
        view! {
            <div>
                <dt>"What helps"</dt>
                <dd class="scenario-remedy">{scenario.remedy.join(", ")}</dd>
            </div>
        }
    });
    view! {
        <dl class="scenario" data-category=scenario.category.as_str()>
            <div>
                <dt>"Need"</dt>
                <dd class="scenario-need">{scenario.scenario.clone()}</dd>
            </div>
            <div>
                <dt>"Category"</dt>
                <dd class="scenario-category">{scenario.category.as_str()}</dd>
            </div>
            <div>
                <dt>"Behaviors it shows"</dt>
                <dd>{behaviors}</dd>
            </div>
            {remedy}
        </dl>
    }
}

#[component]
pub fn Verdict(verdict: CatVerdict, scenario: Option<CatScenario>) -> impl IntoView {
    let matched = if verdict.matched.is_empty() {
        view! { <p class="muted">"No remedy was mentioned."</p> }.into_any()
    } else {
        let items = verdict
            .matched
            .iter()
            .map(|m| view! { <li>{m.clone()}</li> })
            .collect_view();
        view! { <ul class="matched">{items}</ul> }.into_any()
    };
    view! {
        <section class="card" id="cat-verdict">
            <h2>"Verdict"</h2>
            <p class="score" data-score=verdict.score>{percent(verdict.score)}</p>
            <h3>"Remedies mentioned"</h3>
            {matched}
            <h3>"The judge"</h3>
            <pre class="judge-text">{verdict.text}</pre>
            {scenario.map(|s| view! { <h3>"The hidden need"</h3> {scenario_view(&s, true)} })}
        </section>
    }
}
