//! A small evaluation and a shallow alpha-beta search with a capture-only quiescence, enough to
//! tell a sound sacrifice from a blunder at the depths a move must be answered in.

use shakmaty::{Chess, Color, Move, Position, Role, Square};

use crate::piece_value;
use crate::shakmaty;

/// Larger than any evaluation; mate scores sit just below it.
pub const INFINITY: i32 = 1_000_000;
pub const MATE: i32 = 100_000;
/// Captures followed beyond the nominal depth, so a search never stops mid-exchange.
const QUIESCENCE_DEPTH: u32 = 6;

/// The position's value for the side to move, in centipawns.
pub fn evaluate(pos: &Chess) -> i32 {
    let board = pos.board();
    let mut white = 0;
    for sq in board.occupied() {
        let Some(piece) = board.piece_at(sq) else {
            continue;
        };
        let value = piece_value(piece.role) * i32::from(piece.role != Role::King)
            + placement(piece.role, piece.color, sq);
        white += if piece.color == Color::White {
            value
        } else {
            -value
        };
    }
    if pos.turn() == Color::White {
        white
    } else {
        -white
    }
}

/// Small positional terms: central knights and bishops, advanced pawns, a sheltered king.
fn placement(role: Role, color: Color, sq: Square) -> i32 {
    let file = sq.file() as i32;
    let rank = sq.rank() as i32;
    let forward = if color == Color::White {
        rank
    } else {
        7 - rank
    };
    let centrality = 6 - ((2 * file - 7).abs() + (2 * rank - 7).abs()) / 2;
    match role {
        Role::Knight | Role::Bishop => 4 * centrality,
        Role::Pawn => 6 * forward.saturating_sub(1) + if (2..=5).contains(&file) { 4 } else { 0 },
        Role::King => -3 * forward,
        Role::Rook | Role::Queen => centrality,
    }
}

/// Counts positions visited, for the benchmark.
#[derive(Debug, Default, Clone, Copy)]
pub struct SearchStats {
    pub nodes: u64,
}

/// Every legal move of `pos` with its value for the mover after `depth` plies (the move itself
/// counts as one), each searched with a full window so the values are exact, not bounds.
pub fn score_moves(pos: &Chess, depth: u32, stats: &mut SearchStats) -> Vec<(Move, i32)> {
    let moves = pos.legal_moves();
    moves
        .into_iter()
        .map(|m| {
            let mut after = pos.clone();
            after.play_unchecked(m);
            let value = -negamax(
                &after,
                depth.saturating_sub(1),
                -INFINITY,
                INFINITY,
                1,
                stats,
            );
            (m, value)
        })
        .collect()
}

/// The value of `pos` for the side to move, searched `depth` plies.
pub fn search(pos: &Chess, depth: u32, stats: &mut SearchStats) -> i32 {
    negamax(pos, depth, -INFINITY, INFINITY, 0, stats)
}

fn negamax(
    pos: &Chess,
    depth: u32,
    mut alpha: i32,
    beta: i32,
    ply: i32,
    stats: &mut SearchStats,
) -> i32 {
    stats.nodes += 1;
    let mut moves = pos.legal_moves();
    if moves.is_empty() {
        // Mate sooner is worse for the mated side; stalemate is level.
        return if pos.is_check() { -MATE + ply } else { 0 };
    }
    if pos.is_insufficient_material() || pos.halfmoves() >= 100 {
        return 0;
    }
    if depth == 0 {
        return quiesce(pos, alpha, beta, QUIESCENCE_DEPTH, stats);
    }
    moves.sort_by_key(|m| -ordering_key(*m));
    let mut best = -INFINITY;
    for m in moves {
        let mut after = pos.clone();
        after.play_unchecked(m);
        let value = -negamax(&after, depth - 1, -beta, -alpha, ply + 1, stats);
        best = best.max(value);
        alpha = alpha.max(value);
        if alpha >= beta {
            break;
        }
    }
    best
}

fn quiesce(pos: &Chess, mut alpha: i32, beta: i32, depth: u32, stats: &mut SearchStats) -> i32 {
    stats.nodes += 1;
    let stand_pat = evaluate(pos);
    if stand_pat >= beta || depth == 0 {
        return stand_pat;
    }
    alpha = alpha.max(stand_pat);
    let mut captures = pos.capture_moves();
    captures.sort_by_key(|m| -ordering_key(*m));
    for m in captures {
        let mut after = pos.clone();
        after.play_unchecked(m);
        let value = -quiesce(&after, -beta, -alpha, depth - 1, stats);
        if value >= beta {
            return value;
        }
        alpha = alpha.max(value);
    }
    alpha
}

/// Most valuable victim, least valuable attacker first; promotions with them.
fn ordering_key(m: Move) -> i32 {
    let victim = m.capture().map_or(0, piece_value);
    let promotion = m.promotion().map_or(0, piece_value);
    if victim + promotion == 0 {
        0
    } else {
        10 * (victim + promotion) - piece_value(m.role()) / 100
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::chess::rules::{START_FEN, parse_fen, uci_of};

    fn best(fen: &str, depth: u32) -> (String, i32) {
        let pos = parse_fen(fen).unwrap();
        let mut stats = SearchStats::default();
        let scored = score_moves(&pos, depth, &mut stats);
        let (m, v) = scored.into_iter().max_by_key(|(_, v)| *v).unwrap();
        (uci_of(m), v)
    }

    #[test]
    fn the_start_is_level_and_symmetric() {
        let pos = parse_fen(START_FEN).unwrap();
        assert_eq!(evaluate(&pos), 0);
    }

    #[test]
    fn search_finds_mate_in_one_and_a_free_queen() {
        // Back-rank mate: Rd8#.
        let (m, v) = best("6k1/5ppp/8/8/8/8/8/3R2K1 w - - 0 1", 2);
        assert_eq!(m, "d1d8");
        assert!(v > MATE - 10, "{v}");
        // A hanging queen is taken, leaving White a rook up.
        let (m, v) = best("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1", 2);
        assert_eq!(m, "d2d5");
        assert!(v >= 500, "{v}");
    }

    #[test]
    fn quiescence_sees_the_recapture() {
        // Qxd5 wins a pawn but loses the queen to ...exd5; depth 1 plus quiescence sees it.
        let pos = parse_fen("4k3/8/4p3/3p4/8/8/3Q4/4K3 w - - 0 1").unwrap();
        let mut stats = SearchStats::default();
        let scored = score_moves(&pos, 1, &mut stats);
        let take = scored.iter().find(|(m, _)| uci_of(*m) == "d2d5").unwrap().1;
        let quiet = scored.iter().find(|(m, _)| uci_of(*m) == "d2d3").unwrap().1;
        assert!(take < quiet - 500, "take {take} quiet {quiet}");
        assert!(stats.nodes > 0);
    }
}
