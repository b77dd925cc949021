//! Step-by-step replay of a recorded episode: a slider over its frames, step buttons and play.

use std::time::Duration;

use lachesis_shared::spatial::ObjectPose;
use leptos::prelude::*;

/// Shows `frames` one at a time through `show`; `frames` empty hides the controls.
#[component]
pub fn Replay(
    frames: Signal<Vec<Vec<ObjectPose>>>,
    show: Callback<Vec<ObjectPose>>,
) -> impl IntoView {
    let at = RwSignal::new(0usize);
    let playing = RwSignal::new(false);
    let count = move || frames.with(Vec::len);
    // A new recording starts at its last frame (the final state), as it was judged.
    Effect::new(move |_| {
        let n = count();
        at.set(n.saturating_sub(1));
    });
    let go = move |i: usize| {
        let i = i.min(count().saturating_sub(1));
        at.set(i);
        if let Some(frame) = frames.with_untracked(|f| f.get(i).cloned()) {
            show.run(frame);
        }
    };
    let tick = move || {
        if !playing.get_untracked() {
            return;
        }
        let next = at.get_untracked() + 1;
        if next >= count() {
            playing.set(false);
        } else {
            go(next);
        }
    };
    let handle = set_interval_with_handle(tick, Duration::from_millis(50)).ok();
    on_cleanup(move || {
        if let Some(h) = handle {
            h.clear();
        }
    });
    view! {
        <Show when=move || { count() > 1 }>
            <div class="replay" data-testid="replay">
                <button on:click=move |_| go(at.get_untracked().saturating_sub(1))>"◀ step"</button>
                <button on:click=move |_| {
                    if at.get_untracked() + 1 >= count() {
                        go(0);
                    }
                    playing.set(true);
                }>"▶ play"</button>
                <button on:click=move |_| go(at.get_untracked() + 1)>"step ▶"</button>
                <input
                    type="range"
                    min="0"
                    max=move || count().saturating_sub(1).to_string()
                    prop:value=move || at.get().to_string()
                    on:input=move |e| {
                        playing.set(false);
                        go(event_target_value(&e).parse().unwrap_or(0));
                    }
                />
                <span class="muted">{move || format!("frame {} of {}", at.get() + 1, count())}</span>
            </div>
        </Show>
    }
}
