//! `/chess/:game`: one game against the agent. Moves go over the live socket (HTTP when it is
//! not connected); the server answers on the game's topic with the person's move and then the
//! agent's reply. The board shows the person's move at once and takes it back if it is refused.

use lachesis_shared::chess::rules;
use lachesis_shared::chess::{GameView, Side};
use lachesis_shared::live::{ClientMsg, LiveErrorCode, LiveEvent, Topic};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::{use_navigate, use_params_map};

use super::api;
use super::board::Board;
use super::export::Export;
use super::moves::MoveList;
use super::position;
use super::review::Review;
use crate::live::{Live, Notice, use_live_errors, use_topic};

#[component]
pub fn GamePage() -> impl IntoView {
    let params = use_params_map();
    // Re-created for another game ("New game"), so the subscription follows the URL.
    move || {
        let id = params.with(|p| p.get("game").unwrap_or_default());
        view! { <Game id /> }
    }
}

/// What the page is waiting for, if anything (shown, and no move may be made meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Resigning,
    Starting,
}

#[component]
fn Game(id: String) -> impl IntoView {
    let live = expect_context::<Live>();
    let navigate = use_navigate();
    let game = RwSignal::new(None::<GameView>);
    let error = RwSignal::new(None::<String>);
    let viewing = RwSignal::new(None::<usize>);
    // The person's move sent over the socket and not yet echoed (or refused) by the server.
    let pending = RwSignal::new(None::<String>);
    let busy = RwSignal::new(None::<Busy>);
    let flipped = RwSignal::new(false);
    let subscribed = RwSignal::new(false);
    let confirm_resign = RwSignal::new(false);
    let id = StoredValue::new(id);

    // Answers and reloads can cross: the resignation's answer (not yet reviewed) may arrive after
    // the review's event made the page reload the reviewed game. What shows less is dropped.
    let show_view = move |view: GameView| {
        if !game.with_untracked(|g| g.as_ref().is_some_and(|g| position::is_behind(g, &view))) {
            game.set(Some(view));
        }
    };

    let reload = move || {
        let id = id.get_value();
        spawn_local(async move {
            match api::game(&id).await {
                Ok(view) => {
                    // The first load turns the board so the person's pieces are at the bottom.
                    if game.with_untracked(Option::is_none) {
                        flipped.set(view.agent_side == Side::White);
                    }
                    pending.set(None);
                    show_view(view);
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    reload();

    use_topic(
        Topic::Game {
            game: id.get_value(),
        },
        move |notice| match notice {
            Notice::Event(LiveEvent::ChessMove(event)) if event.game == id.get_value() => {
                let next = game.with_untracked(|g| g.as_ref().map(|g| g.moves.len()));
                let ply = event.record.ply as usize;
                match next {
                    Some(next) if ply == next => {
                        if !event.record.by_agent {
                            pending.set(None);
                        }
                        game.update(|g| {
                            if let Some(g) = g {
                                g.fen = event.record.fen_after.clone();
                                g.outcome = event.outcome.clone();
                                g.moves.push(event.record.clone());
                            }
                        });
                    }
                    // Already here: an HTTP reload overtook the event.
                    Some(next) if ply < next => {}
                    // A gap: something was missed.
                    _ => reload(),
                }
            }
            Notice::Event(LiveEvent::ChessGame(event)) if event.game == id.get_value() => reload(),
            Notice::Event(_) => {}
            Notice::Resync => {
                subscribed.set(true);
                reload();
            }
            Notice::Lost => subscribed.set(false),
        },
    );
    use_live_errors(move |code, message| {
        // `not_found` is the answer for a game this visitor may not play.
        let refusal = matches!(code, LiveErrorCode::Rejected | LiveErrorCode::NotFound);
        if refusal && pending.get_untracked().is_some() {
            // Refused: the piece goes back where it was.
            pending.set(None);
            error.set(Some(message.to_owned()));
        }
    });

    let plies = Memo::new(move |_| game.with(|g| g.as_ref().map_or(0, |g| g.moves.len())));
    let person = Memo::new(move |_| game.with(|g| g.as_ref().map(|g| g.agent_side.other())));
    let over = Memo::new(move |_| game.with(|g| g.as_ref().is_some_and(|g| g.outcome.is_some())));
    // The FEN on the board: the ply picked in the move list, or the live position with the
    // person's unconfirmed move already played.
    let fen = Memo::new(move |_| {
        game.with(|g| {
            let Some(g) = g else {
                return String::new();
            };
            match (viewing.get(), pending.get()) {
                (Some(ply), _) => position::fen_at(g, ply),
                (None, Some(uci)) => rules::play_uci(&g.fen, &uci, g.moves.len())
                    .map(|played| played.fen)
                    .unwrap_or_else(|_| g.fen.clone()),
                (None, None) => g.fen.clone(),
            }
        })
    });
    let shown = Memo::new(move |_| position::show(&fen.get(), flipped.get()));
    let last = Memo::new(move |_| {
        if viewing.get().is_none()
            && let Some(uci) = pending.get()
        {
            return Some((uci.get(0..2)?.to_owned(), uci.get(2..4)?.to_owned()));
        }
        let ply = viewing.get().unwrap_or(plies.get());
        game.with(|g| g.as_ref().and_then(|g| position::last_move(&g.moves, ply)))
    });
    let turn = Memo::new(move |_| shown.with(|s| s.as_ref().map(|s| s.turn)));
    let yours = Memo::new(move |_| game.with(|g| g.as_ref().is_some_and(|g| g.yours)));
    let movable = Memo::new(move |_| {
        let free = yours.get()
            && viewing.get().is_none()
            && pending.get().is_none()
            && busy.get().is_none()
            && !over.get();
        person
            .get()
            .filter(|side| free && turn.get() == Some(*side))
    });

    let send_move = move |uci: String| {
        error.set(None);
        pending.set(Some(uci.clone()));
        let game_id = id.get_value();
        // The socket is used only once the game's topic is confirmed: before that the answer
        // would be published to nobody.
        let sent = subscribed.get_untracked()
            && live.send(ClientMsg::ChessMove {
                game: game_id.clone(),
                uci: uci.clone(),
            });
        if !sent {
            spawn_local(async move {
                match api::play(&game_id, &uci).await {
                    Ok(view) => show_view(view),
                    Err(e) => error.set(Some(e.to_string())),
                }
                pending.set(None);
            });
        }
    };

    let resign = move |_| {
        confirm_resign.set(false);
        busy.set(Some(Busy::Resigning));
        let game_id = id.get_value();
        spawn_local(async move {
            match api::resign(&game_id).await {
                Ok(view) => {
                    viewing.set(None);
                    show_view(view);
                }
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(None);
        });
    };

    let new_game = move |_| {
        let Some(agent_side) = game.with_untracked(|g| g.as_ref().map(|g| g.agent_side)) else {
            return;
        };
        busy.set(Some(Busy::Starting));
        let navigate = navigate.clone();
        spawn_local(async move {
            match api::new_game(agent_side).await {
                Ok(view) => navigate(&format!("/chess/{}", view.id), Default::default()),
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(None);
        });
    };

    let status = move || {
        let Some(person) = person.get() else {
            return "Loading…".to_owned();
        };
        if busy.get() == Some(Busy::Resigning) {
            return "Resigning; the judge is reviewing the agent's moves…".to_owned();
        }
        if let Some(ply) = viewing.get() {
            return format!("Viewing the position after {ply} of {} moves.", plies.get());
        }
        let outcome = game.with(|g| g.as_ref().and_then(|g| g.outcome.clone()));
        if let Some(outcome) = outcome {
            let who = match outcome.winner {
                Some(side) if side == person => "you win",
                Some(_) => "the agent wins",
                None => "a draw",
            };
            return format!(
                "Game over: {} ({}, {who}).",
                outcome.result,
                outcome.end.as_str().replace('_', " ")
            );
        }
        let check = shown.with(|s| s.as_ref().is_some_and(|s| s.check.is_some()));
        let check = if check { " Check!" } else { "" };
        if !yours.get() {
            return format!("Watching live.{check}");
        }
        match (pending.get(), turn.get()) {
            (Some(_), _) => "Sending your move…".to_owned(),
            (None, Some(side)) if side == person => format!("Your move.{check}"),
            _ => format!("The agent is thinking…{check}"),
        }
    };

    let share = move |_| {
        let public = !game.with_untracked(|g| g.as_ref().is_some_and(|g| g.public));
        let game_id = id.get_value();
        spawn_local(async move {
            match api::set_public(&game_id, public).await {
                Ok(()) => game.update(|g| {
                    if let Some(g) = g {
                        g.public = public;
                    }
                }),
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    let share_view = move || {
        yours.get().then(|| {
            let public = game.with(|g| g.as_ref().is_some_and(|g| g.public));
            view! {
                <button
                    data-testid="share"
                    data-public=public.to_string()
                    title="Let anyone watch this game live from the arena page"
                    on:click=share
                >
                    {if public { "Stop sharing" } else { "Let spectators watch" }}
                </button>
            }
        })
    };
    let controls = move || {
        let playing = yours.get() && !over.get() && game.with(|g| g.is_some());
        let resign_view = match (playing, confirm_resign.get()) {
            (false, _) => ().into_any(),
            (true, false) => view! {
                <button
                    class="danger"
                    data-testid="resign"
                    disabled=move || busy.get().is_some()
                    on:click=move |_| confirm_resign.set(true)
                >
                    "Resign"
                </button>
            }
            .into_any(),
            (true, true) => view! {
                <span>"Resign this game?"</span>
                <button class="danger" data-testid="resign-confirm" on:click=resign>
                    "Yes, resign"
                </button>
                <button on:click=move |_| confirm_resign.set(false)>"No"</button>
            }
            .into_any(),
        };
        view! {
            <div class="inline game-controls">
                <button
                    data-testid="flip"
                    title="Turn the board around"
                    on:click=move |_| flipped.update(|f| *f = !*f)
                >
                    "Flip board"
                </button>
                {resign_view}
                {share_view}
                <button
                    class="primary"
                    data-testid="new-game"
                    disabled=move || busy.get().is_some()
                    on:click=new_game.clone()
                >
                    "New game"
                </button>
            </div>
        }
    };

    let header = move || {
        game.with(|g| {
            g.as_ref().map(|g| {
                let person = g.agent_side.other().as_str();
                let who = if g.yours {
                    format!("You play {person}")
                } else {
                    format!("A spectator's view: a person plays {person}")
                };
                view! {
                    <p class="muted">
                        {format!(
                            "{who} against DeepSacrifice policy v{}. Started {}.",
                            g.policy_version,
                            super::started(&g.created_at),
                        )}
                    </p>
                }
            })
        })
    };

    view! {
        <div
            class="chess-game"
            data-testid="chess-game"
            data-subscribed=move || subscribed.get().to_string()
            data-over=move || over.get().to_string()
            data-reviewed=move || {
                game.with(|g| g.as_ref().is_some_and(|g| g.game_return.is_some())).to_string()
            }
        >
            <div class="page-head">
                <h1>"Chess"</h1>
                <a href="/chess">"All games"</a>
            </div>
            {header}
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <div class="chess-layout">
                <Board
                    shown
                    flipped
                    last
                    movable
                    on_move=Callback::new(send_move)
                />
                <aside class="chess-side">
                    <p class="status" data-testid="status" aria-live="polite">{status}</p>
                    {controls}
                    <MoveList game viewing pending />
                </aside>
            </div>
            <Review game viewing />
            <Export id=id.get_value() fen plies over />
        </div>
    }
}
