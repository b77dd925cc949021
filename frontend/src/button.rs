//! The button a page starts something with (deal a battle, start a game).

use leptos::ev::MouseEvent;
use leptos::prelude::*;

/// A page's action: off while `busy` (this action, or one it would clash with, is under way),
/// `primary` while it is what the page expects next. `testid` is its `data-testid`, for the
/// browser tests.
#[component]
pub fn ActionButton(
    testid: &'static str,
    #[prop(into)] busy: Signal<bool>,
    #[prop(into, optional)] primary: Signal<bool>,
    on_click: impl FnMut(MouseEvent) + 'static,
    children: Children,
) -> impl IntoView {
    view! {
        <button
            type="button"
            class:primary=primary
            data-testid=testid
            disabled=busy
            on:click=on_click
        >
            {children()}
        </button>
    }
}
