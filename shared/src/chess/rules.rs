//! Chess rules over shakmaty (lichess's move generator), shared so the browser can show legal
//! destinations instantly while the server stays the authority: it replays every move here too.

use shakmaty::fen::Fen;
use shakmaty::san::{San, SanPlus};
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Move, Position};

use super::{GameEnd, GameOutcome, Side};

/// The standard starting position.
pub const START_FEN: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

/// Games stop here as a draw, so self-play and abandoned games always end.
pub const MAX_PLIES: usize = 300;

/// Why a position or a move was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleError {
    /// Not a valid FEN position; the parser's reason.
    BadFen(String),
    /// Not UCI syntax (`e2e4`, `e7e8q`).
    BadUci(String),
    /// Well formed, but not legal in this position.
    Illegal {
        /// The move as given.
        uci: String,
    },
    /// The game is already over.
    GameOver,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleError::BadFen(why) => write!(f, "not a valid position: {why}"),
            RuleError::BadUci(text) => {
                write!(f, "{text:?} is not a move in UCI form (like e2e4 or e7e8q)")
            }
            RuleError::Illegal { uci } => write!(f, "{uci} is not legal in this position"),
            RuleError::GameOver => write!(f, "the game is over"),
        }
    }
}

impl std::error::Error for RuleError {}

/// A legal move as the board needs it: squares by name, SAN for the move list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegalMove {
    /// The move in UCI notation; castling as the king's two-square move (`e1g1`).
    pub uci: String,
    /// The origin square, e.g. `e2`.
    pub from: String,
    /// The destination square; for castling, where the king lands.
    pub to: String,
    /// The move in SAN with its check suffix.
    pub san: String,
    /// `q`, `r`, `b` or `n` for promotions.
    pub promotion: Option<char>,
}

/// The result of playing one move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Played {
    /// The move in normalized UCI notation.
    pub uci: String,
    /// The move in SAN with its check suffix.
    pub san: String,
    /// The position after the move, as FEN.
    pub fen: String,
    /// How the game ended, when this move ended it; `None`: it goes on.
    pub outcome: Option<GameOutcome>,
}

/// Parses a FEN position (standard castling), surrounding whitespace ignored.
pub fn parse_fen(fen: &str) -> Result<Chess, RuleError> {
    let parsed =
        Fen::from_ascii(fen.trim().as_bytes()).map_err(|e| RuleError::BadFen(e.to_string()))?;
    parsed
        .into_position(CastlingMode::Standard)
        .map_err(|e| RuleError::BadFen(e.to_string()))
}

/// The FEN of `pos`; an en passant square only when the capture is legal.
pub fn fen_of(pos: &Chess) -> String {
    Fen::from_position(pos, EnPassantMode::Legal).to_string()
}

/// shakmaty's colour as a wire [`Side`].
pub fn side_of(color: Color) -> Side {
    match color {
        Color::White => Side::White,
        Color::Black => Side::Black,
    }
}

/// A wire [`Side`] as shakmaty's colour.
pub fn color_of(side: Side) -> Color {
    match side {
        Side::White => Color::White,
        Side::Black => Color::Black,
    }
}

/// UCI text of a move (standard castling notation, `e1g1`).
pub fn uci_of(m: Move) -> String {
    UciMove::from_move(m, CastlingMode::Standard).to_string()
}

/// SAN with its check or mate suffix, as move lists show it.
pub fn san_of(pos: &Chess, m: Move) -> String {
    SanPlus::from_move(pos.clone(), m).to_string()
}

/// Parses UCI text into a legal move of `pos`.
pub fn parse_uci(pos: &Chess, text: &str) -> Result<Move, RuleError> {
    let text = text.trim();
    let uci = UciMove::from_ascii(text.as_bytes()).map_err(|_| RuleError::BadUci(text.into()))?;
    uci.to_move(pos)
        .map_err(|_| RuleError::Illegal { uci: text.into() })
}

/// Parses SAN (`Nf3`, `exd5`, `O-O`, `e8=Q+`) into a legal move of `pos`.
pub fn parse_san(pos: &Chess, text: &str) -> Option<Move> {
    let san = San::from_ascii(
        text.trim()
            .trim_end_matches(['+', '#', '!', '?'])
            .as_bytes(),
    )
    .ok()?;
    san.to_move(pos).ok()
}

/// Every legal move of `pos`, for the board to highlight destinations.
pub fn legal_moves(pos: &Chess) -> Vec<LegalMove> {
    pos.legal_moves()
        .into_iter()
        .map(|m| LegalMove {
            uci: uci_of(m),
            from: m.from().map(|s| s.to_string()).unwrap_or_default(),
            to: castle_destination(m),
            san: san_of(pos, m),
            promotion: m.promotion().map(|r| r.char()),
        })
        .collect()
}

/// Where the king lands, for castling (shakmaty encodes castling as king takes rook).
fn castle_destination(m: Move) -> String {
    match m {
        Move::Castle { king, rook } => {
            let file = if rook.file() > king.file() { 'g' } else { 'c' };
            format!("{file}{}", king.rank().char())
        }
        _ => m.to().to_string(),
    }
}

/// How a position ends the game, if it does. `plies` counts moves played so far.
pub fn outcome_of(pos: &Chess, plies: usize) -> Option<GameOutcome> {
    let end = if pos.is_checkmate() {
        GameEnd::Checkmate
    } else if pos.is_stalemate() {
        GameEnd::Stalemate
    } else if pos.is_insufficient_material() {
        GameEnd::InsufficientMaterial
    } else if pos.halfmoves() >= 100 {
        GameEnd::FiftyMoves
    } else if plies >= MAX_PLIES {
        GameEnd::MoveLimit
    } else {
        return None;
    };
    // In checkmate the side to move has lost.
    let winner = (end == GameEnd::Checkmate).then(|| side_of(pos.turn().other()));
    Some(GameOutcome::new(end, winner))
}

/// Plays `uci` on the position given by `fen`; `plies` is how many moves came before it.
pub fn play_uci(fen: &str, uci: &str, plies: usize) -> Result<Played, RuleError> {
    let pos = parse_fen(fen)?;
    if outcome_of(&pos, plies).is_some() {
        return Err(RuleError::GameOver);
    }
    let m = parse_uci(&pos, uci)?;
    let san = san_of(&pos, m);
    let mut next = pos;
    next.play_unchecked(m);
    Ok(Played {
        uci: uci_of(m),
        san,
        fen: fen_of(&next),
        outcome: outcome_of(&next, plies + 1),
    })
}

/// A PGN document: the seven-tag roster plus FEN tags for non-standard starts.
pub fn pgn(tags: &[(&str, String)], start_fen: &str, sans: &[String], result: &str) -> String {
    let mut out = String::new();
    for (name, value) in tags {
        let value = value.replace('\\', "\\\\").replace('"', "\\\"");
        out.push_str(&format!("[{name} \"{value}\"]\n"));
    }
    out.push_str(&format!("[Result \"{result}\"]\n"));
    let start = parse_fen(start_fen).ok();
    if start_fen != START_FEN {
        out.push_str(&format!("[SetUp \"1\"]\n[FEN \"{start_fen}\"]\n"));
    }
    out.push('\n');
    let (mut number, black_first) = match &start {
        Some(pos) => (pos.fullmoves().get(), pos.turn() == Color::Black),
        None => (1, false),
    };
    let mut line = String::new();
    for (i, san) in sans.iter().enumerate() {
        let white_to_move = (i % 2 == 0) != black_first;
        if white_to_move {
            line.push_str(&format!("{number}. "));
        } else if i == 0 {
            line.push_str(&format!("{number}... "));
        }
        line.push_str(san);
        line.push(' ');
        if !white_to_move {
            number += 1;
        }
    }
    line.push_str(result);
    out.push_str(&wrap(&line, 79));
    out.push('\n');
    out
}

/// PGN export format: lines of at most `width` characters. A command in a comment
/// (`[%eval 0.35]`) is never broken across lines, since readers match it whole.
fn wrap(text: &str, width: usize) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut open_command = false;
    for word in text.split(' ') {
        match words.last_mut() {
            Some(last) if open_command => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
        let last = words.last().map(String::as_str).unwrap_or_default();
        open_command = last.rfind("[%").is_some_and(|i| !last[i..].contains(']'));
    }
    let mut out = String::new();
    let mut len = 0;
    for word in &words {
        if len > 0 && len + 1 + word.len() > width {
            out.push('\n');
            len = 0;
        } else if len > 0 {
            out.push(' ');
            len += 1;
        }
        out.push_str(word);
        len += word.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_has_twenty_moves_with_castling_shown_on_the_kings_square() {
        let pos = parse_fen(START_FEN).unwrap();
        assert_eq!(legal_moves(&pos).len(), 20);
        let castle = parse_fen("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1").unwrap();
        let moves = legal_moves(&castle);
        let short = moves.iter().find(|m| m.san == "O-O").unwrap();
        assert_eq!((short.uci.as_str(), short.to.as_str()), ("e1g1", "g1"));
    }

    #[test]
    fn fools_mate_ends_the_game_for_black() {
        let mut fen = START_FEN.to_string();
        let mut last = None;
        for (i, uci) in ["f2f3", "e7e5", "g2g4", "d8h4"].iter().enumerate() {
            let played = play_uci(&fen, uci, i).unwrap();
            fen = played.fen.clone();
            last = Some(played);
        }
        let last = last.unwrap();
        assert_eq!(last.san, "Qh4#");
        let outcome = last.outcome.unwrap();
        assert_eq!(outcome.end, GameEnd::Checkmate);
        assert_eq!(outcome.result, "0-1");
        assert_eq!(play_uci(&fen, "e2e4", 4), Err(RuleError::GameOver));
    }

    #[test]
    fn bad_and_illegal_moves_are_told_apart() {
        assert!(matches!(
            play_uci(START_FEN, "e2e5", 0),
            Err(RuleError::Illegal { .. })
        ));
        assert!(matches!(
            play_uci(START_FEN, "hello", 0),
            Err(RuleError::BadUci(_))
        ));
        assert!(matches!(
            play_uci("nonsense", "e2e4", 0),
            Err(RuleError::BadFen(_))
        ));
        let pos = parse_fen(START_FEN).unwrap();
        assert_eq!(parse_san(&pos, "Nf3+").map(uci_of).as_deref(), Some("g1f3"));
        assert!(parse_san(&pos, "Nf4").is_none());
    }

    #[test]
    fn promotion_needs_its_piece_and_pgn_numbers_moves() {
        let fen = "8/4P3/8/8/8/8/k7/4K3 w - - 0 1";
        assert!(matches!(
            play_uci(fen, "e7e8", 0),
            Err(RuleError::Illegal { .. })
        ));
        assert_eq!(play_uci(fen, "e7e8q", 0).unwrap().san, "e8=Q");
        let text = pgn(
            &[("Event", "t".into())],
            START_FEN,
            &["e4".into(), "e5".into(), "Nf3".into()],
            "*",
        );
        assert!(text.contains("[Event \"t\"]"));
        assert!(text.trim_end().ends_with("1. e4 e5 2. Nf3 *"), "{text}");
    }

    #[test]
    fn wrapping_never_splits_an_eval_command() {
        let sans: Vec<String> = (0..12)
            .map(|i| format!("Nf3 $1 {{ [%eval {i}.25] a comment long enough to wrap the line }}"))
            .collect();
        let text = pgn(&[], START_FEN, &sans, "*");
        assert!(text.lines().all(|l| l.len() <= 79), "{text}");
        for i in 0..12 {
            assert!(text.contains(&format!("[%eval {i}.25]")), "{text}");
        }
        assert_eq!(text.matches("[%eval ").count(), 12);
    }
}
