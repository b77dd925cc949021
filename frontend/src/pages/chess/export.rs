//! FEN of the position on the board, and the game's PGN from the server (a copyable text box and
//! a download link).

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::api;

fn copy(text: &str) {
    // The promise is not awaited: a refused clipboard leaves the text box to copy from by hand.
    let _ = window().navigator().clipboard().write_text(text);
}

#[component]
pub fn Export(
    id: String,
    /// The FEN of the position shown on the board.
    #[prop(into)]
    fen: Signal<String>,
    /// Plies played: the PGN box is refreshed when the game moves on.
    #[prop(into)]
    plies: Signal<usize>,
    /// Whether the game is over (the PGN gains its result).
    #[prop(into)]
    over: Signal<bool>,
) -> impl IntoView {
    let pgn = RwSignal::new(None::<String>);
    let error = RwSignal::new(None::<String>);
    let id = StoredValue::new(id);

    let load = move || {
        let id = id.get_value();
        spawn_local(async move {
            match api::pgn(&id).await {
                Ok(text) => {
                    error.set(None);
                    pgn.set(Some(text));
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    // An open PGN box follows the game instead of going stale.
    Effect::new(move |_| {
        plies.track();
        over.track();
        if pgn.with_untracked(Option::is_some) {
            load();
        }
    });

    view! {
        <section class="card export" data-testid="export">
            <label class="fen">
                "FEN"
                <input readonly data-testid="fen" prop:value=move || fen.get() />
            </label>
            <div class="inline">
                <button on:click=move |_| copy(&fen.get_untracked())>"Copy FEN"</button>
                <button data-testid="show-pgn" on:click=move |_| load()>
                    "Show PGN"
                </button>
                <a
                    data-testid="download-pgn"
                    href=api::pgn_url(&id.get_value())
                    download=format!("{}.pgn", id.get_value())
                >
                    "Download PGN"
                </a>
            </div>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || {
                pgn.get()
                    .map(|text| {
                        let copied = text.clone();
                        view! {
                            <textarea readonly rows="10" data-testid="pgn" prop:value=text></textarea>
                            <button on:click=move |_| copy(&copied)>"Copy PGN"</button>
                        }
                    })
            }}
        </section>
    }
}
