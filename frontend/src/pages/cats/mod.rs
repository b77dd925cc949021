//! `/cats`: a caretaker dialogue with a person in it. Play the caretaker of a cat the platform
//! simulates (it shows behaviors and makes sounds; you say or do something, then give a final
//! answer), or play the cat with its hidden need in view while the model cares for you. The judge
//! then scores the caretaker's turns against the need's remedies and the need is revealed.

mod api;
mod controls;
mod model;
mod transcript;

use lachesis_shared::cats::{CatBehavior, CatMove, CatRole, CatSession};
use leptos::prelude::*;
use leptos::task::spawn_local;

use controls::{CaretakerControls, CatControls};
use transcript::{Transcript, Verdict, scenario_view};

#[component]
pub fn CatsPage() -> impl IntoView {
    let behaviors = RwSignal::new(Vec::<CatBehavior>::new());
    let session = RwSignal::new(None::<CatSession>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);

    spawn_local(async move {
        match api::behaviors().await {
            Ok(list) => behaviors.set(list),
            Err(e) => error.set(Some(e.to_string())),
        }
    });

    let start = move |role: CatRole| {
        if busy.get_untracked() {
            return;
        }
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::start(role).await {
                Ok(s) => session.set(Some(s)),
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(false);
        });
    };

    let play = Callback::new(move |turn: CatMove| {
        let Some(id) = session.with_untracked(|s| s.as_ref().map(|s| s.id.clone())) else {
            return;
        };
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::play(&id, &turn).await {
                Ok(s) => session.set(Some(s)),
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(false);
        });
    });

    let role = Memo::new(move |_| session.with(|s| s.as_ref().map(|s| s.role)));
    let finished =
        Memo::new(move |_| session.with(|s| s.as_ref().is_some_and(|s| s.verdict.is_some())));
    let left = Signal::derive(move || {
        session.with(|s| {
            s.as_ref()
                .map_or(0, |s| s.max_turns.saturating_sub(model::caretaker_turns(s)))
        })
    });
    let hints = Signal::derive(move || {
        session.with(|s| {
            s.as_ref()
                .and_then(|s| s.scenario.as_ref())
                .map(|sc| sc.behaviors.clone())
                .unwrap_or_default()
        })
    });

    let intro = move || match role.get() {
        None => "Pick a side to start a session.",
        Some(CatRole::Caretaker) => {
            "You care for the cat: watch what it does, then say or do something. When you know \
             what it needs, give your final answer."
        }
        Some(CatRole::Cat) => {
            "You are the cat: show behaviors (and maybe a sound) that fit your need. The model \
             plays the caretaker."
        }
    };

    // The need, for a person playing the cat, while the session runs (the verdict shows it after).
    let need = move || {
        if finished.get() {
            return None;
        }
        session.with(|s| {
            let s = s.as_ref().filter(|s| s.role == CatRole::Cat)?;
            let scenario = s.scenario.as_ref()?;
            Some(view! {
                <section class="card" id="cat-scenario">
                    <h2>"Your hidden need"</h2>
                    {scenario_view(scenario, false)}
                </section>
            })
        })
    };

    let controls = move || {
        if finished.get() {
            return None;
        }
        Some(match role.get()? {
            CatRole::Caretaker => view! { <CaretakerControls play busy left /> }.into_any(),
            CatRole::Cat => view! { <CatControls play busy behaviors hints /> }.into_any(),
        })
    };

    let verdict = move || {
        session.with(|s| {
            let s = s.as_ref()?;
            let verdict = s.verdict.clone()?;
            Some(view! { <Verdict verdict scenario=s.scenario.clone() /> })
        })
    };

    // A button that starts a new session with the person playing `side`, marked while it is theirs.
    let side_button = move |side: CatRole, id: &'static str, label: &'static str| {
        view! {
            <button
                id=id
                type="button"
                class:primary=move || role.get() == Some(side)
                disabled=move || busy.get()
                on:click=move |_| start(side)
            >
                {label}
            </button>
        }
    };

    view! {
        <div
            class="cats"
            data-testid="cats"
            data-role=move || match role.get() {
                Some(CatRole::Caretaker) => "caretaker",
                Some(CatRole::Cat) => "cat",
                None => "",
            }
            data-busy=move || busy.get().to_string()
            data-finished=move || finished.get().to_string()
        >
            <div class="page-head">
                <h1>"Cat caretaker"</h1>
            </div>
            <section class="card">
                <div class="inline">
                    {side_button(CatRole::Caretaker, "cat-role-caretaker", "Play the caretaker")}
                    {side_button(CatRole::Cat, "cat-role-cat", "Play the cat")}
                    <span class="muted">"Each click starts a new session."</span>
                </div>
                <p class="muted">{intro}</p>
            </section>
            {move || error.get().map(|e| view! { <p class="error" id="cat-error" role="alert">{e}</p> })}
            {need}
            <section class="card cat-dialogue">
                <h2>"Dialogue"</h2>
                <Transcript session behaviors />
                {move || {
                    (busy.get() && role.get().is_some())
                        .then(|| view! { <p class="muted waiting">"Waiting for the answer…"</p> })
                }}
                {controls}
            </section>
            {verdict}
        </div>
    }
}
