//! The board: an 8x8 grid of squares. Click a piece then a destination, or drag it with the
//! pointer; legal destinations get dots (rings on captures); the last move and a checked king
//! are highlighted; a promotion opens a picker. It only proposes moves: the page decides.

use lachesis_shared::chess::Side;
use leptos::ev;
use leptos::html::Div;
use leptos::prelude::*;

use super::position::{self, Shown};

/// A piece being dragged: where it came from and where the pointer is.
#[derive(Debug, Clone, PartialEq)]
struct Drag {
    from: String,
    piece: char,
    x: f64,
    y: f64,
    start: (f64, f64),
    /// Pixel size of a square when the drag started (the floating piece is drawn that big).
    cell: f64,
    /// Whether the pointer travelled far enough to be a drag rather than a click.
    moved: bool,
}

/// A drag shorter than this (pixels) is a click.
const DRAG_THRESHOLD: f64 = 4.0;

#[component]
pub fn Board(
    /// The position to draw; `None` while loading.
    #[prop(into)]
    shown: Signal<Option<Shown>>,
    #[prop(into)] flipped: Signal<bool>,
    /// From and to of the move that led here.
    #[prop(into)]
    last: Signal<Option<(String, String)>>,
    /// The side the person may move now; `None` when no move may be made (history shown, the
    /// agent to move, a move in flight, the game over).
    #[prop(into)]
    movable: Signal<Option<Side>>,
    /// Gets the chosen move in UCI.
    on_move: Callback<String>,
) -> impl IntoView {
    let selected = RwSignal::new(None::<String>);
    let drag = RwSignal::new(None::<Drag>);
    let promotion = RwSignal::new(None::<(String, String)>);
    let board_ref = NodeRef::<Div>::new();

    // A new position (a move arrived, another ply shown) drops any half-made move.
    Effect::new(move |_| {
        shown.track();
        movable.track();
        selected.set(None);
        drag.set(None);
        promotion.set(None);
    });

    let dests = Memo::new(move |_| {
        let Some(from) = selected.get() else {
            return Vec::new();
        };
        shown.with(|s| {
            s.as_ref()
                .map(|s| {
                    s.legal
                        .iter()
                        .filter(|m| m.from == from)
                        .map(|m| m.to.clone())
                        .collect()
                })
                .unwrap_or_default()
        })
    });
    let drag_from = Memo::new(move |_| drag.with(|d| d.as_ref().map(|d| d.from.clone())));

    let attempt = move |from: String, to: String| {
        selected.set(None);
        let moves: Vec<String> = shown.with_untracked(|s| {
            s.as_ref()
                .map(|s| {
                    position::moves_between(&s.legal, &from, &to)
                        .into_iter()
                        .map(|m| m.uci.clone())
                        .collect()
                })
                .unwrap_or_default()
        });
        match moves.as_slice() {
            [] => {}
            [uci] => on_move.run(uci.clone()),
            _ => promotion.set(Some((from, to))),
        }
    };

    let own_piece = move |piece: Option<char>| {
        piece.filter(|p| movable.get_untracked() == Some(position::piece_side(*p)))
    };

    let press = move |ev: ev::PointerEvent, square: String, piece: Option<char>| {
        if ev.button() != 0 || promotion.get_untracked().is_some() {
            return;
        }
        // No text selection or native image drag while moving pieces.
        ev.prevent_default();
        if let Some(from) = selected.get_untracked()
            && from != square
            && dests.with_untracked(|d| d.contains(&square))
        {
            attempt(from, square);
            return;
        }
        match own_piece(piece) {
            Some(piece) => {
                let cell = board_ref
                    .get_untracked()
                    .map(|b| b.get_bounding_client_rect().width() / 8.0)
                    .unwrap_or(48.0);
                let (x, y) = (f64::from(ev.client_x()), f64::from(ev.client_y()));
                selected.set(Some(square.clone()));
                drag.set(Some(Drag {
                    from: square,
                    piece,
                    x,
                    y,
                    start: (x, y),
                    cell,
                    moved: false,
                }));
            }
            None => selected.set(None),
        }
    };

    let on_pointer_move = window_event_listener(ev::pointermove, move |ev| {
        if drag.with_untracked(Option::is_none) {
            return;
        }
        let (x, y) = (f64::from(ev.client_x()), f64::from(ev.client_y()));
        drag.update(|d| {
            if let Some(d) = d {
                d.x = x;
                d.y = y;
                d.moved |= (x - d.start.0).hypot(y - d.start.1) > DRAG_THRESHOLD;
            }
        });
    });
    let on_pointer_up = window_event_listener(ev::pointerup, move |ev| {
        let Some(done) = drag.get_untracked() else {
            return;
        };
        drag.set(None);
        if !done.moved {
            // A click: the piece stays selected until a destination is clicked.
            return;
        }
        let target = board_ref.get_untracked().and_then(|b| {
            let rect = b.get_bounding_client_rect();
            position::square_at(
                f64::from(ev.client_x()) - rect.left(),
                f64::from(ev.client_y()) - rect.top(),
                rect.width(),
                flipped.get_untracked(),
            )
        });
        match target {
            Some(to) if dests.with_untracked(|d| d.contains(&to)) => attempt(done.from, to),
            Some(to) if to == done.from => {}
            _ => selected.set(None),
        }
    });
    on_cleanup(move || {
        on_pointer_move.remove();
        on_pointer_up.remove();
    });

    let cells = move || {
        let Some(shown) = shown.get() else {
            return view! { <p class="muted board-loading">"Loading…"</p> }.into_any();
        };
        let selected = selected.get();
        let last = last.get();
        let dragging = drag_from.get();
        let dests = dests.get();
        shown
            .cells
            .into_iter()
            .enumerate()
            .map(|(i, cell)| {
                let name = cell.name.clone();
                let is_last = last
                    .as_ref()
                    .is_some_and(|(from, to)| *from == name || *to == name);
                let is_dest = dests.contains(&name);
                let class = [
                    if cell.light {
                        "square light"
                    } else {
                        "square dark"
                    },
                    if selected.as_deref() == Some(name.as_str()) {
                        " selected"
                    } else {
                        ""
                    },
                    if is_last { " last" } else { "" },
                    if shown.check.as_deref() == Some(name.as_str()) {
                        " check"
                    } else {
                        ""
                    },
                    match (is_dest, cell.piece.is_some()) {
                        (true, true) => " dest capture",
                        (true, false) => " dest",
                        _ => "",
                    },
                ]
                .concat();
                let piece = cell.piece;
                let hidden = dragging.as_deref() == Some(name.as_str());
                let piece_view = piece.map(|p| {
                    let side = position::piece_side(p);
                    view! {
                        <span
                            class=format!("piece {}", side.as_str())
                            class:lifted=hidden
                            data-piece=p.to_string()
                        >
                            {position::glyph(p)}
                        </span>
                    }
                });
                // Coordinates along the left edge and the bottom, as on a printed board.
                let rank_label = (i % 8 == 0).then(|| name[1..].to_owned());
                let file_label = (i >= 56).then(|| name[..1].to_owned());
                let square = name.clone();
                view! {
                    <div
                        class=class
                        data-square=name
                        on:pointerdown=move |ev| press(ev, square.clone(), piece)
                    >
                        {rank_label.map(|r| view! { <span class="coord rank">{r}</span> })}
                        {file_label.map(|f| view! { <span class="coord file">{f}</span> })}
                        {piece_view}
                    </div>
                }
            })
            .collect_view()
            .into_any()
    };

    let floating = move || {
        drag.get().filter(|d| d.moved).map(|d| {
            let side = position::piece_side(d.piece);
            view! {
                <span
                    class=format!("piece floating {}", side.as_str())
                    style:left=format!("{}px", d.x)
                    style:top=format!("{}px", d.y)
                    style:font-size=format!("{}px", d.cell * 0.8)
                    style:width=format!("{}px", d.cell)
                    style:height=format!("{}px", d.cell)
                >
                    {position::glyph(d.piece)}
                </span>
            }
        })
    };

    let picker = move || {
        promotion.get().map(|(from, to)| {
            let side = movable.get_untracked().unwrap_or(Side::White);
            let choices = position::promotion_choices(side).map(|(role, letter)| {
                let uci = format!("{from}{to}{role}");
                view! {
                    <button
                        class=format!("piece {}", side.as_str())
                        data-testid=format!("promote-{role}")
                        title=format!("Promote to {role}")
                        on:click=move |_| {
                            promotion.set(None);
                            on_move.run(uci.clone());
                        }
                    >
                        {position::glyph(letter)}
                    </button>
                }
            });
            view! {
                <div class="promotion" data-testid="promotion" role="dialog">
                    <span>"Promote to"</span>
                    {choices.into_iter().collect_view()}
                    <button class="link" on:click=move |_| promotion.set(None)>
                        "Cancel"
                    </button>
                </div>
            }
        })
    };

    view! {
        <div class="board-frame">
            <div
                class="board"
                node_ref=board_ref
                data-testid="board"
                data-flipped=move || flipped.get().to_string()
                data-turn=move || shown.with(|s| s.as_ref().map(|s| s.turn.as_str()))
                data-movable=move || movable.get().map(|s| s.as_str()).unwrap_or("none")
            >
                {cells}
            </div>
            {picker}
            {floating}
        </div>
    }
}
