//! The evaluation after each judged agent move, from White's side, as lichess draws it: above
//! the line White stands better. Points carry the move's mark; a click shows the move.

use lachesis_shared::chess::{GameView, MoveMark, eval_text};
use leptos::prelude::*;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 140.0;
/// Evaluations are drawn within ± this many pawns; mates sit on the edge.
const RANGE_PAWNS: f64 = 5.0;

/// One judged agent move on the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalPoint {
    pub ply: u32,
    pub san: String,
    /// Centipawns from White's side after the move (mates near ±30000).
    pub white_cp: i32,
    pub mark: Option<MoveMark>,
}

/// The points of a reviewed game: agent moves Stockfish judged.
pub fn points(game: &GameView) -> Vec<EvalPoint> {
    game.moves
        .iter()
        .filter_map(|m| {
            let reward = m.reward.as_ref()?;
            let engine = reward.engine.as_ref()?;
            // The side to move after the move is the mover's opponent.
            let mover_is_white = m.fen_after.split(' ').nth(1) == Some("b");
            let white_cp = if mover_is_white {
                engine.played_cp
            } else {
                -engine.played_cp
            };
            Some(EvalPoint {
                ply: m.ply,
                san: m.san.clone(),
                white_cp,
                mark: reward.mark,
            })
        })
        .collect()
}

/// The evaluation as a label: `+1.3`, `-0.4`, `#3`, `#-2`.
pub fn shown(white_cp: i32) -> String {
    eval_text(white_cp, 1, true)
}

fn y_of(white_cp: i32) -> f64 {
    let pawns = (f64::from(white_cp) / 100.0).clamp(-RANGE_PAWNS, RANGE_PAWNS);
    HEIGHT / 2.0 - pawns / RANGE_PAWNS * (HEIGHT / 2.0 - 6.0)
}

fn mark_class(mark: Option<MoveMark>) -> &'static str {
    match mark {
        Some(MoveMark::Brilliant) => "eval-point brilliant",
        Some(MoveMark::Good) => "eval-point good",
        Some(MoveMark::Inaccuracy) => "eval-point inaccuracy",
        Some(MoveMark::Mistake) => "eval-point mistake",
        Some(MoveMark::Blunder) => "eval-point blunder",
        None => "eval-point",
    }
}

#[component]
pub fn EvalGraph(
    points: Vec<EvalPoint>,
    /// Plies in the game, for the horizontal scale.
    plies: usize,
    /// Shows a move on the board when its point is clicked.
    viewing: RwSignal<Option<usize>>,
) -> impl IntoView {
    let span = plies.max(2) as f64;
    let x_of = move |ply: u32| 8.0 + f64::from(ply) / (span - 1.0) * (WIDTH - 16.0);
    let line = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x_of(p.ply), y_of(p.white_cp)))
        .collect::<Vec<_>>()
        .join(" ");
    let dots = points
        .into_iter()
        .map(|p| {
            let title = format!(
                "{} {}{}",
                p.san,
                shown(p.white_cp),
                p.mark
                    .map(|m| format!(" {}", m.symbol()))
                    .unwrap_or_default()
            );
            let ply = p.ply;
            view! {
                <circle
                    class=mark_class(p.mark)
                    data-testid="eval-point"
                    data-ply=ply
                    cx=format!("{:.1}", x_of(ply))
                    cy=format!("{:.1}", y_of(p.white_cp))
                    r=if p.mark.is_some() { "5" } else { "3" }
                    on:click=move |_| viewing.set(Some(ply as usize + 1))
                >
                    <title>{title}</title>
                </circle>
            }
        })
        .collect_view();
    view! {
        <figure class="eval-graph">
            <svg
                data-testid="eval-graph"
                viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                role="img"
                aria-label="Stockfish's evaluation after each agent move, White's side up"
            >
                <rect class="eval-black" x="0" y=HEIGHT / 2.0 width=WIDTH height=HEIGHT / 2.0 />
                <line class="eval-zero" x1="0" x2=WIDTH y1=HEIGHT / 2.0 y2=HEIGHT / 2.0 />
                <polyline class="eval-line" points=line />
                {dots}
            </svg>
            <figcaption class="muted">
                "Stockfish's evaluation after each agent move (White's side up, ±5 pawns)."
            </figcaption>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluations_read_and_scale_like_lichess() {
        assert_eq!(shown(130), "+1.3");
        assert_eq!(shown(-40), "-0.4");
        assert_eq!(shown(30_000 - 3), "#3");
        assert_eq!(shown(-30_000 + 2), "#-2");
        // Level is the middle; five pawns and any mate sit at the edges.
        assert_eq!(y_of(0), HEIGHT / 2.0);
        assert_eq!(y_of(500), 6.0);
        assert_eq!(y_of(29_990), 6.0);
        assert_eq!(y_of(-29_990), HEIGHT - 6.0);
    }
}
