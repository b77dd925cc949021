//! What the board shows, computed from a FEN and a game: pure functions, tested natively.

use lachesis_shared::chess::rules::{self, LegalMove};
use lachesis_shared::chess::shakmaty::{Color, File, Position, Rank, Role, Square};
use lachesis_shared::chess::{GameView, MoveRecord, Side};

/// One square as drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// `e4`.
    pub name: String,
    pub light: bool,
    /// The piece's FEN letter (`P` white pawn, `k` black king).
    pub piece: Option<char>,
}

/// A position as the board needs it: cells in drawing order, the legal moves, check.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub cells: Vec<Cell>,
    pub turn: Side,
    /// The square of the king in check, if the side to move is in check.
    pub check: Option<String>,
    pub legal: Vec<LegalMove>,
}

/// Cells from the top-left corner of the screen: rank 8 first from White's side, rank 1 first
/// when `flipped` (Black at the bottom). An unreadable FEN gives `None`.
pub fn show(fen: &str, flipped: bool) -> Option<Shown> {
    let pos = rules::parse_fen(fen).ok()?;
    let board = pos.board();
    let mut cells = Vec::with_capacity(64);
    for row in 0..8u32 {
        for col in 0..8u32 {
            let (file, rank) = if flipped {
                (7 - col, row)
            } else {
                (col, 7 - row)
            };
            let square = Square::from_coords(File::new(file), Rank::new(rank));
            cells.push(Cell {
                name: square.to_string(),
                light: square.is_light(),
                piece: board.piece_at(square).map(|p| p.char()),
            });
        }
    }
    let check = pos
        .is_check()
        .then(|| board.king_of(pos.turn()).map(|s| s.to_string()))
        .flatten();
    Some(Shown {
        cells,
        turn: rules::side_of(pos.turn()),
        check,
        legal: rules::legal_moves(&pos),
    })
}

/// The glyph of a piece letter. The filled set serves both colours (CSS paints them), so white
/// pieces are not hollow outlines that vanish on light squares.
pub fn glyph(piece: char) -> &'static str {
    match piece.to_ascii_lowercase() {
        'k' => "\u{265A}",
        'q' => "\u{265B}",
        'r' => "\u{265C}",
        'b' => "\u{265D}",
        'n' => "\u{265E}",
        // U+FE0E asks for the text form: some systems draw the black pawn as an emoji.
        _ => "\u{265F}\u{FE0E}",
    }
}

pub fn piece_side(piece: char) -> Side {
    if piece.is_ascii_uppercase() {
        Side::White
    } else {
        Side::Black
    }
}

/// The square under a point at (`x`, `y`) inside a board `size` pixels wide.
pub fn square_at(x: f64, y: f64, size: f64, flipped: bool) -> Option<String> {
    if size <= 0.0 || !(0.0..size).contains(&x) || !(0.0..size).contains(&y) {
        return None;
    }
    let col = (x / size * 8.0) as u32;
    let row = (y / size * 8.0) as u32;
    let (file, rank) = if flipped {
        (7 - col, row)
    } else {
        (col, 7 - row)
    };
    Some(Square::from_coords(File::new(file), Rank::new(rank)).to_string())
}

/// The FEN after `ply` moves of `game` (0: the start).
pub fn fen_at(game: &GameView, ply: usize) -> String {
    match ply.checked_sub(1).and_then(|i| game.moves.get(i)) {
        Some(record) => record.fen_after.clone(),
        None => game.start_fen.clone(),
    }
}

/// Whether `incoming` shows less of the game than `current`: fewer moves, not yet ended, or not
/// yet reviewed (an answer that a later event's reload overtook).
pub fn is_behind(current: &GameView, incoming: &GameView) -> bool {
    let progress = |g: &GameView| (g.moves.len(), g.outcome.is_some(), g.game_return.is_some());
    progress(incoming) < progress(current)
}

/// The squares of the move that led to the position after `ply` moves.
pub fn last_move(moves: &[MoveRecord], ply: usize) -> Option<(String, String)> {
    let record = moves.get(ply.checked_sub(1)?)?;
    let uci = record.uci.as_str();
    Some((uci.get(0..2)?.to_owned(), uci.get(2..4)?.to_owned()))
}

/// The legal moves from `from` to `to`: one, or four when it is a promotion.
pub fn moves_between<'a>(legal: &'a [LegalMove], from: &str, to: &str) -> Vec<&'a LegalMove> {
    legal
        .iter()
        .filter(|m| m.from == from && m.to == to)
        .collect()
}

/// One line of the move list: the move number, and the white and black plies on it. A game from
/// a position with Black to move starts with an empty white half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRow {
    pub number: u32,
    pub white: Option<usize>,
    pub black: Option<usize>,
}

/// Groups `plies` moves into numbered rows, starting from `start_fen`.
pub fn move_rows(start_fen: &str, plies: usize) -> Vec<MoveRow> {
    let (mut number, black_first) = match rules::parse_fen(start_fen) {
        Ok(pos) => (pos.fullmoves().get(), pos.turn() == Color::Black),
        Err(_) => (1, false),
    };
    let mut rows = Vec::new();
    let mut ply = 0;
    if black_first && plies > 0 {
        rows.push(MoveRow {
            number,
            white: None,
            black: Some(0),
        });
        number += 1;
        ply = 1;
    }
    while ply < plies {
        rows.push(MoveRow {
            number,
            white: Some(ply),
            black: (ply + 1 < plies).then_some(ply + 1),
        });
        number += 1;
        ply += 2;
    }
    rows
}

/// The pieces a promotion picker offers, as FEN letters of the mover's colour.
pub fn promotion_choices(side: Side) -> [(char, char); 4] {
    let letter = |role: Role| match side {
        Side::White => role.upper_char(),
        Side::Black => role.char(),
    };
    [
        ('q', letter(Role::Queen)),
        ('r', letter(Role::Rook)),
        ('b', letter(Role::Bishop)),
        ('n', letter(Role::Knight)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::chess::rules::START_FEN;
    use lachesis_shared::chess::{GameEnd, GameOutcome};

    #[test]
    fn the_start_is_drawn_from_whites_side_or_flipped() {
        let shown = show(START_FEN, false).unwrap();
        assert_eq!(shown.cells[0].name, "a8");
        assert_eq!(shown.cells[0].piece, Some('r'));
        assert_eq!(shown.cells[63].name, "h1");
        assert!(shown.cells[63].light, "h1 is a light square");
        assert_eq!(shown.turn, Side::White);
        assert_eq!(shown.legal.len(), 20);
        assert_eq!(shown.check, None);
        let flipped = show(START_FEN, true).unwrap();
        assert_eq!(flipped.cells[0].name, "h1");
        assert_eq!(flipped.cells[63].name, "a8");
        assert!(show("not a position", false).is_none());
    }

    #[test]
    fn an_answer_that_shows_less_than_the_page_is_behind() {
        let live = GameView {
            id: "1".into(),
            agent_side: Side::Black,
            start_fen: START_FEN.into(),
            fen: START_FEN.into(),
            moves: Vec::new(),
            outcome: None,
            policy_version: 0,
            game_return: None,
            created_at: "2026-12-05T08:00:00Z".into(),
            public: false,
            yours: true,
        };
        let ended = GameView {
            outcome: Some(GameOutcome::new(GameEnd::Resignation, Some(Side::Black))),
            ..live.clone()
        };
        let reviewed = GameView {
            game_return: Some(1.0),
            ..ended.clone()
        };
        // The resignation's answer after the reviewed reload: dropped.
        assert!(is_behind(&reviewed, &ended));
        assert!(is_behind(&ended, &live));
        // Forward, or the same progress with other details (a rating, sharing): shown.
        assert!(!is_behind(&ended, &reviewed));
        assert!(!is_behind(&reviewed, &reviewed.clone()));
        let mut moved = live.clone();
        moved.moves.push(MoveRecord {
            ply: 0,
            uci: "e2e4".into(),
            san: "e4".into(),
            fen_after: START_FEN.into(),
            by_agent: false,
            reward: None,
            rating: None,
        });
        // A move the socket already showed is not taken back by an older answer.
        assert!(is_behind(&moved, &live));
        assert!(!is_behind(&live, &moved));
    }

    #[test]
    fn a_king_in_check_is_found() {
        // Fool's mate: the white king on e1 is checked by the queen on h4.
        let fen = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3";
        let shown = show(fen, false).unwrap();
        assert_eq!(shown.check.as_deref(), Some("e1"));
        assert!(shown.legal.is_empty());
    }

    #[test]
    fn points_map_to_squares_in_both_orientations() {
        assert_eq!(square_at(1.0, 1.0, 800.0, false).as_deref(), Some("a8"));
        assert_eq!(square_at(799.0, 799.0, 800.0, false).as_deref(), Some("h1"));
        assert_eq!(square_at(450.0, 650.0, 800.0, false).as_deref(), Some("e2"));
        assert_eq!(square_at(1.0, 1.0, 800.0, true).as_deref(), Some("h1"));
        assert_eq!(square_at(-1.0, 10.0, 800.0, false), None);
        assert_eq!(square_at(10.0, 800.0, 800.0, false), None);
    }

    #[test]
    fn promotions_offer_four_moves_between_two_squares() {
        let fen = "8/4P1k1/8/8/8/8/8/4K3 w - - 0 1";
        let shown = show(fen, false).unwrap();
        let moves = moves_between(&shown.legal, "e7", "e8");
        assert_eq!(moves.len(), 4);
        assert!(moves.iter().all(|m| m.promotion.is_some()));
        assert_eq!(promotion_choices(Side::Black)[0], ('q', 'q'));
        assert_eq!(promotion_choices(Side::White)[3], ('n', 'N'));
    }

    #[test]
    fn move_rows_number_pairs_and_a_black_start() {
        let rows = move_rows(START_FEN, 3);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1],
            MoveRow {
                number: 2,
                white: Some(2),
                black: None
            }
        );
        let black = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";
        let rows = move_rows(black, 2);
        assert_eq!(rows[0].white, None);
        assert_eq!(rows[0].black, Some(0));
        assert_eq!(rows[1].number, 2);
        assert_eq!(rows[1].white, Some(1));
        assert!(move_rows(START_FEN, 0).is_empty());
    }

    #[test]
    fn last_move_reads_the_uci_squares() {
        let record = MoveRecord {
            ply: 0,
            uci: "e7e8q".into(),
            san: "e8=Q".into(),
            fen_after: String::new(),
            by_agent: false,
            reward: None,
            rating: None,
        };
        let moves = vec![record];
        assert_eq!(last_move(&moves, 0), None);
        assert_eq!(
            last_move(&moves, 1),
            Some(("e7".to_owned(), "e8".to_owned()))
        );
    }
}
