//! The move list in SAN: click a move to see the board after it (replay), step with the buttons
//! or the arrow keys, and come back to the live position.

use lachesis_shared::chess::GameView;
use leptos::ev;
use leptos::prelude::*;

use super::position;

/// Where the shown ply goes on a replay step, or `None` for "follow the game".
fn step(viewing: Option<usize>, plies: usize, delta: isize) -> Option<usize> {
    let at = viewing.unwrap_or(plies) as isize + delta;
    let at = at.clamp(0, plies as isize) as usize;
    (at != plies).then_some(at)
}

#[component]
pub fn MoveList(
    #[prop(into)] game: Signal<Option<GameView>>,
    /// The ply shown on the board (`None`: the latest, following the game).
    viewing: RwSignal<Option<usize>>,
    /// The person's move sent but not yet confirmed by the server.
    #[prop(into)]
    pending: Signal<Option<String>>,
) -> impl IntoView {
    let plies = Memo::new(move |_| game.with(|g| g.as_ref().map_or(0, |g| g.moves.len())));
    let go = move |delta: isize| viewing.update(|v| *v = step(*v, plies.get_untracked(), delta));

    let keys = window_event_listener(ev::keydown, move |ev| {
        // Arrow keys typed into a text box are not replay steps.
        let typing = ev
            .target()
            .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
            .is_some_and(|e| matches!(e.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
        if typing {
            return;
        }
        match ev.key().as_str() {
            "ArrowLeft" => go(-1),
            "ArrowRight" => go(1),
            "Home" => viewing.set(Some(0)),
            "End" => viewing.set(None),
            _ => return,
        }
        ev.prevent_default();
    });
    on_cleanup(move || keys.remove());

    let san_button = move |game: &GameView, ply: usize| {
        let san = game.moves[ply].san.clone();
        let by_agent = game.moves[ply].by_agent;
        let current = move || viewing.get().unwrap_or(plies.get()) == ply + 1;
        view! {
            <button
                class="move"
                class:current=current
                class:agent=by_agent
                data-testid="move"
                data-ply=ply
                title=if by_agent { "The agent's move" } else { "Your move" }
                on:click=move |_| viewing.set(step(Some(ply + 1), plies.get_untracked(), 0))
            >
                {san}
            </button>
        }
    };

    let rows = move || {
        game.with(|g| {
            let Some(g) = g else {
                return Vec::new();
            };
            position::move_rows(&g.start_fen, g.moves.len())
                .into_iter()
                .map(|row| {
                    let white = row.white.map(|p| san_button(g, p));
                    let black = row.black.map(|p| san_button(g, p));
                    view! {
                        <li>
                            <span class="number">{row.number} "."</span>
                            <span class="half">{white}</span>
                            <span class="half">{black}</span>
                        </li>
                    }
                })
                .collect::<Vec<_>>()
        })
    };

    view! {
        <div class="move-panel">
            <ol class="moves" data-testid="move-list" data-plies=move || plies.get()>
                {rows}
            </ol>
            {move || {
                pending
                    .get()
                    .map(|uci| {
                        view! {
                            <p class="muted pending" data-testid="pending-move">
                                "Sending " {uci} "…"
                            </p>
                        }
                    })
            }}
            <div class="replay" role="group" aria-label="Replay">
                <button title="Start (Home)" on:click=move |_| viewing.set(Some(0))>
                    "«"
                </button>
                <button title="Back (←)" data-testid="replay-back" on:click=move |_| go(-1)>
                    "‹"
                </button>
                <button title="Forward (→)" data-testid="replay-forward" on:click=move |_| go(1)>
                    "›"
                </button>
                <button
                    title="Live position (End)"
                    data-testid="replay-live"
                    on:click=move |_| viewing.set(None)
                >
                    "»"
                </button>
            </div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::step;

    #[test]
    fn replay_steps_stay_inside_the_game_and_return_to_live() {
        assert_eq!(step(None, 4, -1), Some(3));
        assert_eq!(
            step(Some(3), 4, 1),
            None,
            "the last ply is the live position"
        );
        assert_eq!(step(Some(0), 4, -1), Some(0));
        assert_eq!(step(None, 4, 1), None);
        assert_eq!(step(Some(2), 4, 0), Some(2));
        assert_eq!(step(None, 0, -1), None, "an empty game has only the start");
    }
}
