//! A small evaluation and a shallow alpha-beta search with a capture-only quiescence, enough to
//! tell a sound sacrifice from a blunder at the depths a move must be answered in.

use std::collections::HashMap;

use shakmaty::zobrist::Zobrist64;
use shakmaty::{Chess, Color, EnPassantMode, Move, Position, Role, Square};

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
    let mut memory = OrderMemory::default();
    pos.legal_moves()
        .into_iter()
        .map(|m| {
            let mut after = pos.clone();
            after.play_unchecked(m);
            let value = -deepen(&after, depth.saturating_sub(1), 1, &mut memory, stats);
            (m, value)
        })
        .collect()
}

/// The value of `pos` for the side to move, searched `depth` plies.
pub fn search(pos: &Chess, depth: u32, stats: &mut SearchStats) -> i32 {
    search_with(pos, depth, &mut OrderMemory::default(), stats)
}

/// [`search`], deepening one ply at a time and remembering in `memory` which moves proved best,
/// so each iteration, and any later search sharing `memory`, tries them first. The order only
/// decides how much alpha-beta prunes: a full-window search has the same value in any order.
pub fn search_with(
    pos: &Chess,
    depth: u32,
    memory: &mut OrderMemory,
    stats: &mut SearchStats,
) -> i32 {
    deepen(pos, depth, 0, memory, stats)
}

/// Iterative deepening from a root `ply` plies below the caller's position (mate scores count
/// plies from there).
fn deepen(
    pos: &Chess,
    depth: u32,
    ply: i32,
    memory: &mut OrderMemory,
    stats: &mut SearchStats,
) -> i32 {
    let key = pos.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0;
    let mut value = 0;
    for d in depth.min(1)..=depth {
        let node = Node { key, ply };
        value = negamax(pos, node, d, -INFINITY, INFINITY, memory, stats);
    }
    value
}

/// What earlier searches learned about move order: the move that was best (or refuted the
/// opponent's line) in each position searched to some depth, and per ply the quiet moves that
/// last caused a cut-off ("killers"). Bounded: it forgets everything when full.
#[derive(Debug, Default)]
pub struct OrderMemory {
    best_moves: HashMap<u64, Move>,
    killers: Vec<[Option<Move>; 2]>,
}

/// Positions whose best move is remembered before the memory starts over: about 40 MB.
const REMEMBERED_POSITIONS: usize = 1 << 20;

impl OrderMemory {
    fn remember(&mut self, key: u64, m: Move, ply: usize) {
        if self.best_moves.len() >= REMEMBERED_POSITIONS {
            self.best_moves.clear();
        }
        self.best_moves.insert(key, m);
        if m.is_capture() || m.is_promotion() {
            return;
        }
        if self.killers.len() <= ply {
            self.killers.resize(ply + 1, [None; 2]);
        }
        let slot = &mut self.killers[ply];
        if slot[0] != Some(m) {
            slot[1] = slot[0];
            slot[0] = Some(m);
        }
    }

    /// Remembered best move first, then captures and promotions by value, then the killers.
    fn order(&self, moves: &mut [Move], key: u64, ply: usize) {
        let best = self.best_moves.get(&key).copied();
        let killers = self.killers.get(ply).copied().unwrap_or([None; 2]);
        moves.sort_by_key(|&m| {
            if Some(m) == best {
                i32::MIN
            } else if ordering_key(m) > 0 {
                -ordering_key(m)
            } else if Some(m) == killers[0] {
                1
            } else if Some(m) == killers[1] {
                2
            } else {
                3
            }
        });
    }
}

/// Where a searched position sits: its hash (for the order memory) and its distance from the
/// root.
#[derive(Clone, Copy)]
struct Node {
    key: u64,
    ply: i32,
}

fn negamax(
    pos: &Chess,
    node: Node,
    depth: u32,
    mut alpha: i32,
    beta: i32,
    memory: &mut OrderMemory,
    stats: &mut SearchStats,
) -> i32 {
    stats.nodes += 1;
    let mut moves = pos.legal_moves();
    if moves.is_empty() {
        // Mate sooner is worse for the mated side; stalemate is level.
        return if pos.is_check() { -MATE + node.ply } else { 0 };
    }
    if pos.is_insufficient_material() || pos.halfmoves() >= 100 {
        return 0;
    }
    if depth == 0 {
        return quiesce(pos, alpha, beta, QUIESCENCE_DEPTH, stats);
    }
    let ply_index = usize::try_from(node.ply).unwrap_or(0);
    memory.order(&mut moves, node.key, ply_index);
    let mut best = -INFINITY;
    let mut best_move = None;
    for m in moves {
        let mut after = pos.clone();
        after.play_unchecked(m);
        // The hash is only a hint for ordering, so a collision costs nodes, never correctness.
        let key = pos
            .update_zobrist_hash(Zobrist64(node.key), m, EnPassantMode::Legal)
            .unwrap_or_else(|| after.zobrist_hash(EnPassantMode::Legal))
            .0;
        let child = Node {
            key,
            ply: node.ply + 1,
        };
        let value = -negamax(&after, child, depth - 1, -beta, -alpha, memory, stats);
        if value > best {
            best = value;
            best_move = Some(m);
        }
        alpha = alpha.max(value);
        if alpha >= beta {
            break;
        }
    }
    if let Some(m) = best_move {
        memory.remember(node.key, m, ply_index);
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

    /// Plain minimax over the same tree (every move to `depth`, then captures only, standing
    /// pat allowed), without pruning: what alpha-beta must return in any move order.
    fn minimax(pos: &Chess, depth: u32, ply: i32) -> i32 {
        let moves = pos.legal_moves();
        if moves.is_empty() {
            return if pos.is_check() { -MATE + ply } else { 0 };
        }
        if pos.is_insufficient_material() || pos.halfmoves() >= 100 {
            return 0;
        }
        if depth == 0 {
            return quiescence_minimax(pos, QUIESCENCE_DEPTH);
        }
        moves
            .into_iter()
            .map(|m| {
                let mut after = pos.clone();
                after.play_unchecked(m);
                -minimax(&after, depth - 1, ply + 1)
            })
            .fold(-INFINITY, i32::max)
    }

    fn quiescence_minimax(pos: &Chess, depth: u32) -> i32 {
        let stand_pat = evaluate(pos);
        if depth == 0 {
            return stand_pat;
        }
        pos.capture_moves()
            .into_iter()
            .map(|m| {
                let mut after = pos.clone();
                after.play_unchecked(m);
                -quiescence_minimax(&after, depth - 1)
            })
            .fold(stand_pat, i32::max)
    }

    #[test]
    fn ordered_search_has_the_value_of_plain_minimax() {
        // A quiet opening, an open middlegame with hanging pieces, and a mating attack.
        // Plain minimax is slow: the middlegames are compared two plies deep.
        for (fen, depth) in [
            (START_FEN, 3),
            (
                "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
                2,
            ),
            (
                "r2q1rk1/ppp2ppp/2n1bn2/3pp3/1b1PP3/2NB1N2/PPP2PPP/R1BQ1RK1 w - - 0 8",
                2,
            ),
        ] {
            let pos = parse_fen(fen).unwrap();
            let mut stats = SearchStats::default();
            assert_eq!(
                search(&pos, depth, &mut stats),
                minimax(&pos, depth, 0),
                "{fen}"
            );
        }
    }

    #[test]
    fn a_search_sharing_memory_visits_fewer_nodes_for_the_same_value() {
        let pos = parse_fen("r2q1rk1/ppp2ppp/2n1bn2/3pp3/1b1PP3/2NB1N2/PPP2PPP/R1BQ1RK1 w - - 0 8")
            .unwrap();
        let mut memory = OrderMemory::default();
        let mut first = SearchStats::default();
        let value = search_with(&pos, 4, &mut memory, &mut first);
        let mut again = SearchStats::default();
        assert_eq!(search_with(&pos, 4, &mut memory, &mut again), value);
        assert!(
            again.nodes < first.nodes,
            "{} then {}",
            first.nodes,
            again.nodes
        );
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
