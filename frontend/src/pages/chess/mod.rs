//! `/chess`: play DeepSacrifice, the aggressive agent. Start a game with either colour, reopen
//! past games (each is replayable), and see the agent's current policy. The game itself is
//! [`game::GamePage`] at `/chess/:game`.

pub mod api;
mod board;
mod eval_graph;
mod export;
mod game;
mod moves;
mod position;
mod review;

pub use game::GamePage;

/// A position drawn from its FEN, from the side to move's view, for reading only (the arena's
/// chess battles show theirs with it).
#[component]
pub fn PositionBoard(fen: String) -> impl IntoView {
    let from_black = fen.split_whitespace().nth(1) == Some("b");
    let shown = position::show(&fen, from_black);
    view! {
        <div class="position-board" data-testid="position-board">
            <board::Board
                shown=Signal::stored(shown)
                flipped=Signal::stored(from_black)
                last=Signal::stored(None)
                movable=Signal::stored(None)
                on_move=Callback::new(|_: String| {})
            />
        </div>
    }
}

use lachesis_shared::chess::{AgentInfo, AgentRating, FeatureWeight, GameSummary, Side};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;
use leptos_router::hooks::use_navigate;

use crate::button::ActionButton;
use crate::table::DataTable;

/// How many of the agent's weights the page lists (the largest by size).
const TOP_WEIGHTS: usize = 8;

/// The weights that matter most to the agent's choices, largest magnitude first.
fn top_weights(weights: &[FeatureWeight], n: usize) -> Vec<FeatureWeight> {
    let mut sorted = weights.to_vec();
    sorted.sort_by(|a, b| b.weight.abs().total_cmp(&a.weight.abs()));
    sorted.truncate(n);
    sorted
}

/// `2026-11-30 21:55` from the server's RFC 3339 time (UTC), short enough for a table.
fn started(created_at: &str) -> String {
    let minutes = created_at.get(..16).unwrap_or(created_at);
    format!("{} UTC", minutes.replacen('T', " ", 1))
}

/// What the agent card's Elo is measured against.
const YARDSTICK: &str = "Elo against a ladder of fixed opponents anchored at Stockfish's UCI_Elo \
                         1350 (lachesis chess rate)";

/// `Elo 780 (95% 690–860), sacrifice rate 0.12`, or `not rated yet`.
fn rating_text(rating: Option<&AgentRating>) -> String {
    match rating {
        Some(r) => format!("{}, sacrifice rate {:.2}", r.elo_text(), r.sacrifice_rate),
        None => "not rated yet".to_owned(),
    }
}

/// The yardstick's line for the agent card: the current version's latest rating, then version
/// 0's (the baseline it learned from) when the agent has moved on.
fn ratings_line(info: &AgentInfo) -> String {
    let mut line = format!(
        "{} — version {}",
        rating_text(info.rating.as_ref()),
        info.version
    );
    if info.version != 0 {
        line.push_str(&format!(
            "; version 0: {}",
            rating_text(info.baseline_rating.as_ref())
        ));
    }
    line
}

fn result_text(game: &GameSummary) -> String {
    match &game.outcome {
        Some(outcome) => format!(
            "{} ({})",
            outcome.result,
            outcome.end.as_str().replace('_', " ")
        ),
        None => "in progress".to_owned(),
    }
}

#[component]
pub fn ChessPage() -> impl IntoView {
    let games = LocalResource::new(api::games);
    let agent = LocalResource::new(api::agent);
    let error = RwSignal::new(None::<String>);
    let starting = RwSignal::new(false);
    let navigate = use_navigate();

    // The person picks their colour; the agent takes the other.
    let start = move |person: Side| {
        let navigate = navigate.clone();
        starting.set(true);
        spawn_local(async move {
            match api::new_game(person.other()).await {
                Ok(game) => navigate(&format!("/chess/{}", game.id), Default::default()),
                Err(e) => error.set(Some(e.to_string())),
            }
            starting.set(false);
        });
    };
    let play_white = {
        let start = start.clone();
        move |_| start(Side::White)
    };
    let play_black = move |_| start(Side::Black);

    let rows = move || {
        games.get().map(|answer| match answer {
            Ok(list) if list.is_empty() => {
                view! { <tr><td colspan="6" class="muted">"No games yet."</td></tr> }.into_any()
            }
            Ok(list) => list
                .into_iter()
                .map(|g| {
                    let result = result_text(&g);
                    let review = g
                        .game_return
                        .map_or_else(|| "—".to_owned(), |r| format!("{r:.3}"));
                    view! {
                        <tr data-testid="game-row">
                            <td>
                                <A href=format!("/chess/{}", g.id)>{started(&g.created_at)}</A>
                            </td>
                            <td>{g.agent_side.other().as_str()}</td>
                            <td class="num">{g.plies}</td>
                            <td>{result}</td>
                            <td class="num">{format!("v{}", g.policy_version)}</td>
                            <td class="num">{review}</td>
                        </tr>
                    }
                })
                .collect_view()
                .into_any(),
            Err(e) => {
                view! { <tr><td colspan="6" class="error">{e.to_string()}</td></tr> }.into_any()
            }
        })
    };

    view! {
        <div class="page-head">
            <h1>"Chess"</h1>
        </div>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <section class="card new-game">
            <h2>"New game against DeepSacrifice"</h2>
            <p class="muted">
                "An agent that learns to sacrifice: after each game a judge scores its moves for "
                "aggression, brilliance and soundness, and it learns from the scores (and your "
                "ratings)."
            </p>
            <div class="inline">
                <ActionButton testid="play-white" busy=starting primary=true on_click=play_white>
                    "Play as White"
                </ActionButton>
                <ActionButton testid="play-black" busy=starting on_click=play_black>
                    "Play as Black"
                </ActionButton>
            </div>
        </section>
        <AgentCard agent />
        <section class="card">
            <h2>"Games"</h2>
            <DataTable testid="games-table" rows>
                <th>"Started"</th>
                <th>"You played"</th>
                <th class="num">"Plies"</th>
                <th>"Result"</th>
                <th class="num">"Policy"</th>
                <th class="num" title="The agent's return from the review">"Return"</th>
            </DataTable>
        </section>
    }
}

#[component]
fn AgentCard(agent: LocalResource<Result<AgentInfo, crate::api::ApiError>>) -> impl IntoView {
    let body = move || {
        agent.get().map(|answer| match answer {
            Ok(info) => {
                let weights = top_weights(&info.weights, TOP_WEIGHTS)
                    .into_iter()
                    .map(|w| {
                        view! {
                            <tr>
                                <td>{w.name.replace('_', " ")}</td>
                                <td class="num">{format!("{:+.3}", w.weight)}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                let unrated = info.rating.is_none()
                    || (info.version != 0 && info.baseline_rating.is_none());
                let yardstick = ratings_line(&info);
                let ratings = if info.uses_ratings {
                    "counted"
                } else {
                    "recorded, not yet learned from"
                };
                view! {
                    <dl class="stats">
                        <div class="stat"><dt>"Policy"</dt><dd data-testid="agent-version">{format!("v{}", info.version)}</dd></div>
                        <div class="stat"><dt>"Games learned"</dt><dd>{info.games_learned}</dd></div>
                        <div class="stat"><dt>"Search depth"</dt><dd>{info.depth}</dd></div>
                        <div class="stat"><dt>"Temperature"</dt><dd>{format!("{:.2}", info.temperature)}</dd></div>
                        <div class="stat"><dt>"Judge"</dt><dd>{info.judge.clone()}</dd></div>
                    </dl>
                    <p title=YARDSTICK>
                        <strong>"Yardstick: "</strong>
                        <span data-testid="agent-rating">{yardstick}</span>
                        {unrated.then(|| view! {
                            <span class="muted">
                                " (rate with " <code>"lachesis chess rate --record"</code> ")"
                            </span>
                        })}
                    </p>
                    <p class="muted">{format!("Your ratings are {ratings}.")}</p>
                    <table class="weights" data-testid="agent-weights">
                        <thead><tr><th>"Feature"</th><th class="num">"Weight"</th></tr></thead>
                        <tbody>{weights}</tbody>
                    </table>
                }
                .into_any()
            }
            Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
        })
    };
    view! {
        <section class="card agent" data-testid="agent">
            <h2>"The agent"</h2>
            {body}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_weights_are_the_largest_by_size() {
        let w = |name: &str, weight: f64| FeatureWeight {
            name: name.into(),
            weight,
        };
        let top = top_weights(&[w("a", 0.1), w("b", -2.0), w("c", 1.0)], 2);
        let names: Vec<&str> = top.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
    }

    #[test]
    fn the_ratings_line_shows_the_current_version_then_version_0() {
        let rating = |version: i64, elo: f64| AgentRating {
            policy_version: version,
            elo: Some(elo),
            elo_low: Some(elo - 90.0),
            elo_high: Some(elo + 80.0),
            games: 60,
            sacrifice_rate: 0.123,
            measured_at: "2026-12-02T10:00:00Z".into(),
        };
        let mut info = AgentInfo {
            version: 5,
            weights: Vec::new(),
            depth: 2,
            temperature: 0.4,
            games_learned: 50,
            judge: "engine".into(),
            uses_ratings: true,
            rating: Some(rating(5, 780.0)),
            baseline_rating: None,
        };
        assert_eq!(
            ratings_line(&info),
            "Elo 780 (95% 690–860), sacrifice rate 0.12 — version 5; version 0: not rated yet"
        );
        info.version = 0;
        info.rating = None;
        assert_eq!(ratings_line(&info), "not rated yet — version 0");
    }

    #[test]
    fn start_times_are_shortened_to_the_minute() {
        assert_eq!(started("2026-11-30T21:55:16Z"), "2026-11-30 21:55 UTC");
        assert_eq!(started("soon"), "soon UTC");
    }
}
