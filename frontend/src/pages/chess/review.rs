//! After the game: Stockfish's evaluation graph, and the judge's verdict on each agent move (its
//! mark, aggression, brilliance, soundness, the total the agent learns from, the material offered,
//! the engine's better move and why), with a 1–5 rating per move.

use lachesis_shared::chess::{GameView, MoveRecord, MoveReward};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::table::DataTable;

use super::api;
use super::eval_graph::{self, EvalGraph};

fn score(value: f64) -> String {
    format!("{value:.1}")
}

/// A move's label in the review: `12.` for White's twelfth move, `12…` for Black's.
fn move_label(record: &MoveRecord, white_starts: bool) -> String {
    let ply = record.ply + u32::from(!white_starts);
    let number = ply / 2 + 1;
    let dots = if ply.is_multiple_of(2) { "." } else { "…" };
    format!("{number}{dots} {}", record.san)
}

/// What a mark means, for its tooltip.
fn mark_title(reward: &MoveReward) -> &'static str {
    use lachesis_shared::chess::MoveMark;
    match reward.mark {
        Some(MoveMark::Brilliant) => {
            "Brilliant: a sound sacrifice, Stockfish's best move or nearly"
        }
        Some(MoveMark::Good) => "Good: a sound sacrifice",
        Some(MoveMark::Inaccuracy) => "Inaccuracy",
        Some(MoveMark::Mistake) => "Mistake",
        Some(MoveMark::Blunder) => "Blunder",
        None => "",
    }
}

#[component]
pub fn Review(
    game: RwSignal<Option<GameView>>,
    /// Shows a move on the board when its row is clicked.
    viewing: RwSignal<Option<usize>>,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);

    let rate = move |ply: u32, rating: u8| {
        let Some(id) = game.with_untracked(|g| g.as_ref().map(|g| g.id.clone())) else {
            return;
        };
        spawn_local(async move {
            match api::rate(&id, ply, rating).await {
                Ok(updated) => {
                    error.set(None);
                    game.set(Some(updated));
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };

    let stars = move |ply: u32, rating: Option<u8>| {
        (1..=5u8)
            .map(|n| {
                let on = rating.is_some_and(|r| n <= r);
                view! {
                    <button
                        class="star"
                        class:on=on
                        aria-pressed=(rating == Some(n)).to_string()
                        title=format!("Rate this move {n} of 5")
                        data-testid=format!("rate-{ply}-{n}")
                        // Only the game's owner rates; spectators see the ratings.
                        disabled=move || !game.with(|g| g.as_ref().is_some_and(|g| g.yours))
                        on:click=move |_| rate(ply, n)
                    >
                        {if on { "★" } else { "☆" }}
                    </button>
                }
            })
            .collect_view()
    };

    let row = move |record: &MoveRecord, reward: &MoveReward, white_starts: bool| {
        let ply = record.ply;
        view! {
            <tr data-testid="review-row" data-ply=ply>
                <td>
                    <button
                        class="link"
                        on:click=move |_| viewing.set(Some(ply as usize + 1))
                    >
                        {move_label(record, white_starts)}
                    </button>
                </td>
                <td class="mark" data-testid="reward-mark" title=mark_title(reward)>
                    {reward.mark.map(|m| m.symbol()).unwrap_or("")}
                </td>
                <td class="num" data-testid="reward-aggression">{score(reward.aggression)}</td>
                <td class="num" data-testid="reward-brilliance">{score(reward.brilliance)}</td>
                <td class="num" data-testid="reward-soundness">{score(reward.soundness)}</td>
                <td class="num" data-testid="reward-total">{format!("{:.2}", reward.total)}</td>
                <td class="num">{reward.material_offered}</td>
                <td class="better" data-testid="reward-better">
                    {reward.engine.as_ref().map(|e| {
                        let after = eval_graph::shown(e.played_cp);
                        match &e.better_move {
                            Some(better) => format!("{after}; best {better} {}", eval_graph::shown(e.best_cp)),
                            None => format!("{after}; best"),
                        }
                    })}
                </td>
                <td class="justification">
                    {reward.justification.clone()}
                    <span class="muted judge">" — " {reward.judge.clone()}</span>
                </td>
                <td class="rating" data-testid="rating" data-rating=record.rating.unwrap_or(0)>
                    {stars(ply, record.rating)}
                </td>
            </tr>
        }
    };

    let body = move || {
        game.with(|g| {
            let g = g.as_ref()?;
            let outcome = g.outcome.as_ref()?;
            let white_starts = !g.start_fen.contains(" b ");
            let rows: Vec<_> = g
                .moves
                .iter()
                .filter(|m| m.by_agent)
                .filter_map(|m| m.reward.as_ref().map(|r| row(m, r, white_starts)))
                .collect();
            let agent_moves = g.moves.iter().filter(|m| m.by_agent).count();
            let summary = match g.game_return {
                Some(value) => format!(
                    "The agent's return for this game: {value:.3} (policy v{}).",
                    g.policy_version
                ),
                None => "The game is being reviewed…".to_owned(),
            };
            let empty = (rows.is_empty()).then(|| {
                let why = if agent_moves == 0 {
                    "The agent made no moves in this game."
                } else {
                    "No rewards yet."
                };
                view! { <p class="muted">{why}</p> }
            });
            let graph_points = eval_graph::points(g);
            let graph = (!graph_points.is_empty()).then(|| {
                view! { <EvalGraph points=graph_points plies=g.moves.len() viewing /> }
            });
            Some(view! {
                <section class="card review" data-testid="review">
                    <h2>"Review"</h2>
                    <p data-testid="review-summary">
                        {format!("Result {} by {}. ", outcome.result, outcome.end.as_str().replace('_', " "))}
                        {summary}
                    </p>
                    {graph}
                    {empty}
                    <DataTable testid="review-table" rows>
                        <th>"Agent move"</th>
                        <th title="!! brilliant sacrifice, ! sound sacrifice, ?! inaccuracy, ? mistake, ?? blunder">"Mark"</th>
                        <th class="num" title="0 to 10">"Aggression"</th>
                        <th class="num" title="0 to 10">"Brilliance"</th>
                        <th class="num" title="0 to 10">"Soundness"</th>
                        <th class="num" title="0 to 1: what the agent learns from">"Total"</th>
                        <th class="num" title="Material put en prise, centipawns">"Offered"</th>
                        <th title="Stockfish's evaluation after the move (the mover's side), and its best move when different">"Stockfish"</th>
                        <th>"Justification"</th>
                        <th>"Your rating"</th>
                    </DataTable>
                </section>
            })
        })
    };

    view! {
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        {body}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_number_moves_for_either_side() {
        let record = |ply: u32| MoveRecord {
            ply,
            uci: String::new(),
            san: "Nf3".into(),
            fen_after: String::new(),
            by_agent: true,
            reward: None,
            rating: None,
        };
        assert_eq!(move_label(&record(0), true), "1. Nf3");
        assert_eq!(move_label(&record(1), true), "1… Nf3");
        assert_eq!(move_label(&record(4), true), "3. Nf3");
        assert_eq!(move_label(&record(0), false), "1… Nf3");
    }
}
