//! Reading a language model's move: it may answer in SAN (`Nf3`, `exd5`, `O-O`, `e8=Q+`) or UCI
//! (`g1f3`), alone or inside prose. The parser is tolerant about where the move sits and strict
//! about what it is: a typed error says what was wrong, so the environment can tell the model.

use lachesis_shared::chess::rules::{parse_san, parse_uci, uci_of};
use shakmaty::{Chess, Move, Position};

use crate::shakmaty;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveParseError {
    #[error("the answer is empty")]
    Empty,
    #[error("no move found: answer with one move in SAN (like Nf3) or UCI (like g1f3)")]
    NoMove,
    #[error("{0} is not legal in this position")]
    Illegal(String),
    #[error("the answer names several different legal moves ({0}); give exactly one")]
    Ambiguous(String),
}

/// The move the answer names. A line `Move: X` (or `Answer: X`) wins; otherwise the answer's
/// tokens are tried in order and they must not name two different legal moves.
pub fn parse_move(pos: &Chess, answer: &str) -> Result<Move, MoveParseError> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(MoveParseError::Empty);
    }
    if let Some(tagged) = tagged_move(answer) {
        return read_token(pos, tagged).ok_or_else(|| {
            if looks_like_move(tagged) {
                MoveParseError::Illegal(clean(tagged).to_string())
            } else {
                MoveParseError::NoMove
            }
        });
    }
    let mut found: Option<Move> = None;
    let mut first_illegal = None;
    for token in answer.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
        let token = clean(token);
        if token.is_empty() {
            continue;
        }
        match read_token(pos, token) {
            Some(m) => match found {
                Some(prev) if prev != m => {
                    return Err(MoveParseError::Ambiguous(format!(
                        "{}, {}",
                        uci_of(prev),
                        uci_of(m)
                    )));
                }
                _ => found = Some(m),
            },
            None if first_illegal.is_none() && looks_like_move(token) => {
                first_illegal = Some(token.to_string());
            }
            None => {}
        }
    }
    match (found, first_illegal) {
        (Some(m), _) => Ok(m),
        (None, Some(token)) => Err(MoveParseError::Illegal(token)),
        (None, None) => Err(MoveParseError::NoMove),
    }
}

fn tagged_move(answer: &str) -> Option<&str> {
    answer.lines().find_map(|line| {
        let line = line.trim();
        let lower = line.to_ascii_lowercase();
        ["move:", "answer:", "best move:"]
            .iter()
            .find(|tag| lower.starts_with(**tag))
            .map(|tag| line[tag.len()..].split_whitespace().next().unwrap_or(""))
    })
}

/// Strips quotes, markdown and move numbers (`12.`, `12...`) around a token.
fn clean(token: &str) -> &str {
    let token = token.trim_matches(|c: char| "`*\"'()[]{}<>".contains(c));
    let token = token.trim_end_matches(['.', '!', '?', ',', ';', ':']);
    match token.rfind('.') {
        Some(dot) if token[..dot].chars().all(|c| c.is_ascii_digit() || c == '.') => {
            &token[dot + 1..]
        }
        _ => token,
    }
}

fn read_token(pos: &Chess, token: &str) -> Option<Move> {
    let token = clean(token);
    if token.is_empty() || token.len() > 12 {
        return None;
    }
    if let Ok(m) = parse_uci(pos, token) {
        return Some(m);
    }
    // Castling written with zeros is common in model output.
    let castle = token.replace('0', "O");
    parse_san(pos, &castle).filter(|m| pos.is_legal(*m))
}

/// Whether a token has the shape of a move, so an illegal one can be reported as such.
fn looks_like_move(token: &str) -> bool {
    let t = token.trim_end_matches(['+', '#']);
    let squares = t
        .as_bytes()
        .windows(2)
        .filter(|w| (b'a'..=b'h').contains(&w[0]) && (b'1'..=b'8').contains(&w[1]))
        .count();
    (squares >= 1
        && t.len() <= 7
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "=x-".contains(c)))
        || t.eq_ignore_ascii_case("o-o")
        || t.eq_ignore_ascii_case("o-o-o")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::chess::rules::{START_FEN, legal_moves, parse_fen};
    use proptest::prelude::*;

    fn parsed(fen: &str, answer: &str) -> Result<String, MoveParseError> {
        let pos = parse_fen(fen).unwrap();
        parse_move(&pos, answer).map(uci_of)
    }

    #[test]
    fn san_and_uci_in_prose_are_found() {
        assert_eq!(parsed(START_FEN, "e4").as_deref(), Ok("e2e4"));
        assert_eq!(
            parsed(START_FEN, "I will play 1. Nf3!").as_deref(),
            Ok("g1f3")
        );
        assert_eq!(
            parsed(START_FEN, "Move: g1f3\nbecause it develops").as_deref(),
            Ok("g1f3")
        );
        assert_eq!(parsed(START_FEN, "**d4**").as_deref(), Ok("d2d4"));
        assert_eq!(
            parsed(START_FEN, "Move: Nc3, Nf3, e4").as_deref(),
            Ok("b1c3")
        );
        let castle = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
        assert_eq!(parsed(castle, "0-0").as_deref(), Ok("e1g1"));
        assert_eq!(parsed(castle, "O-O-O").as_deref(), Ok("e1c1"));
    }

    #[test]
    fn wrong_answers_say_what_is_wrong() {
        assert_eq!(parsed(START_FEN, "  "), Err(MoveParseError::Empty));
        assert_eq!(
            parsed(START_FEN, "I resign, good game"),
            Err(MoveParseError::NoMove)
        );
        assert_eq!(
            parsed(START_FEN, "Qh5"),
            Err(MoveParseError::Illegal("Qh5".into()))
        );
        assert_eq!(
            parsed(START_FEN, "Move: e2e5"),
            Err(MoveParseError::Illegal("e2e5".into()))
        );
        assert!(matches!(
            parsed(START_FEN, "e4 or d4"),
            Err(MoveParseError::Ambiguous(_))
        ));
        // Naming the same move twice is fine.
        assert_eq!(parsed(START_FEN, "e4, that is e2e4").as_deref(), Ok("e2e4"));
    }

    proptest! {
        #[test]
        fn the_parser_never_panics_and_only_returns_legal_moves(text in "\\PC{0,80}") {
            let pos = parse_fen(START_FEN).unwrap();
            if let Ok(m) = parse_move(&pos, &text) {
                prop_assert!(pos.is_legal(m));
            }
        }

        #[test]
        fn every_legal_move_is_read_back_in_both_notations(index in 0usize..20, filler in "[a-z ]{0,20}") {
            let pos = parse_fen(START_FEN).unwrap();
            let moves = legal_moves(&pos);
            let m = &moves[index % moves.len()];
            prop_assert_eq!(parsed(START_FEN, &format!("Move: {}\n{filler}", m.san)), Ok(m.uci.clone()));
            prop_assert_eq!(parsed(START_FEN, &format!("Move: {}", m.uci)), Ok(m.uci.clone()));
        }
    }
}
