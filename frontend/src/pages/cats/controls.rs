//! What the person does on their turn: say something as the caretaker, or act as the cat.

use lachesis_shared::cats::{CatBehavior, CatMove};
use leptos::prelude::*;

use super::model::{caretaker_move, cat_move};

/// Either side's "Send": plays the turn, unless there is nothing to send or a turn is under way
/// (`disabled`). `primary` when it is the side's main action.
#[component]
fn SendButton(
    #[prop(into)] disabled: Signal<bool>,
    send: impl Fn() + 'static,
    #[prop(optional)] primary: bool,
) -> impl IntoView {
    view! {
        <button
            id="cat-send"
            type="button"
            class:primary=primary
            disabled=disabled
            on:click=move |_| send()
        >
            "Send"
        </button>
    }
}

/// A text field and its label, which names it by `id` (as do the browser tests): one line, or a
/// box of `rows` lines.
#[component]
fn LabelledText(
    id: &'static str,
    label: &'static str,
    placeholder: &'static str,
    value: RwSignal<String>,
    #[prop(optional)] rows: Option<u32>,
) -> impl IntoView {
    let field = match rows {
        Some(rows) => view! {
            <textarea id=id rows=rows placeholder=placeholder bind:value=value></textarea>
        }
        .into_any(),
        None => view! { <input id=id type="text" placeholder=placeholder bind:value=value /> }
            .into_any(),
    };
    view! {
        <label for=id>{label}</label>
        {field}
    }
}

/// The caretaker's box: "send" to go on, "final answer" for the judge.
#[component]
pub fn CaretakerControls(
    play: Callback<CatMove>,
    #[prop(into)] busy: Signal<bool>,
    /// Caretaker turns left before the judge decides.
    #[prop(into)]
    left: Signal<usize>,
) -> impl IntoView {
    let say = RwSignal::new(String::new());
    let send = move |finish: bool| {
        if let Some(turn) = caretaker_move(&say.get_untracked(), finish) {
            say.set(String::new());
            play.run(turn);
        }
    };
    let empty = move || say.with(|s| s.trim().is_empty());
    view! {
        <div class="cat-controls">
            <LabelledText
                id="cat-say"
                label="Say or do something"
                placeholder="e.g. I check the water bowl and offer fresh water"
                value=say
                rows=3
            />
            <div class="inline">
                <SendButton
                    disabled=Signal::derive(move || busy.get() || empty())
                    send=move || send(false)
                />
                <button
                    id="cat-finish"
                    type="button"
                    class="primary"
                    title="Your last word: the judge then scores the whole dialogue"
                    disabled=move || busy.get() || empty()
                    on:click=move |_| send(true)
                >
                    "Final answer"
                </button>
                <span class="muted">
                    {move || match left.get() {
                        1 => "This is your last turn.".to_owned(),
                        n => format!("{n} turns left."),
                    }}
                </span>
            </div>
        </div>
    }
}

/// The cat's choices: any of the behaviors (the need's own are marked), and a sound.
#[component]
pub fn CatControls(
    play: Callback<CatMove>,
    #[prop(into)] busy: Signal<bool>,
    #[prop(into)] behaviors: Signal<Vec<CatBehavior>>,
    /// The behaviors of the cat's hidden need, marked in the list as hints.
    #[prop(into)]
    hints: Signal<Vec<String>>,
) -> impl IntoView {
    let picked = RwSignal::new(Vec::<String>::new());
    let sound = RwSignal::new(String::new());
    let send = move || {
        let turn = behaviors
            .with_untracked(|all| cat_move(&picked.get_untracked(), all, &sound.get_untracked()));
        if let Some(turn) = turn {
            picked.set(Vec::new());
            sound.set(String::new());
            play.run(turn);
        }
    };
    let toggle = move |name: String, on: bool| {
        picked.update(|p| {
            p.retain(|n| *n != name);
            if on {
                p.push(name);
            }
        })
    };
    let options = move || {
        let hints = hints.get();
        behaviors
            .get()
            .into_iter()
            .map(|b| {
                let name = b.behavior.clone();
                let hinted = hints.contains(&name);
                let checked = {
                    let name = name.clone();
                    move || picked.with(|p| p.contains(&name))
                };
                let on_change = {
                    let name = name.clone();
                    move |ev| toggle(name.clone(), event_target_checked(&ev))
                };
                view! {
                    <label class="check behavior-option" class:hint=hinted title=b.description>
                        <input
                            type="checkbox"
                            value=name.clone()
                            prop:checked=checked
                            on:change=on_change
                        />
                        {name}
                    </label>
                }
            })
            .collect_view()
    };
    let nothing = move || picked.with(Vec::is_empty) && sound.with(|s| s.trim().is_empty());
    view! {
        <div class="cat-controls">
            <fieldset id="cat-behaviors" class="cat-behaviors">
                <legend>
                    "What do you do? "
                    <span class="muted">"(the behaviors of your need are marked)"</span>
                </legend>
                {options}
            </fieldset>
            <div class="inline">
                <LabelledText
                    id="cat-sound"
                    label="Sound (optional)"
                    placeholder="e.g. mrrp"
                    value=sound
                />
                <SendButton
                    disabled=Signal::derive(move || busy.get() || nothing())
                    send
                    primary=true
                />
                <span class="muted">
                    {move || format!("{} picked", picked.with(Vec::len))}
                </span>
            </div>
        </div>
    }
}
