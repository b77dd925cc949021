//! What a move does, as numbers: the inputs of the agent's policy and of the engine judge.
//!
//! Every feature is seen from the mover's side and scaled to roughly [-1, 1] per typical move, so
//! one learning rate suits all weights.

use shakmaty::attacks;
use shakmaty::{Bitboard, Chess, Color, Move, Position, Role, Square};

use crate::piece_value;
use crate::shakmaty;

/// Feature names, in the order of [`MoveFeatures::values`].
pub const NAMES: [&str; FEATURE_COUNT] = [
    "search",
    "material",
    "sacrifice",
    "check",
    "capture",
    "king_attack",
    "lines_to_king",
    "advance",
    "mobility",
    "own_king_exposure",
    "backed_sacrifice",
    "loose_sacrifice",
    "verified_sacrifice",
    "offers_material",
];
pub const FEATURE_COUNT: usize = 14;
/// The index of `verified_sacrifice` in [`NAMES`] and [`MoveFeatures::values`].
pub const VERIFIED_SACRIFICE: usize = 12;
/// The index of `offers_material`.
pub const OFFERS_MATERIAL: usize = 13;

/// A sacrifice the agent's own search rates within this of its best move is "backed": the
/// search sees something for the material inside its horizon.
pub const BACKED_WITHIN_CP: i32 = 50;

/// The features of one move in one position.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MoveFeatures {
    /// The shallow search's value of the move, in pawns (clamped to ±10).
    pub search: f64,
    /// Material won by static exchange, in pawns (negative when the exchange loses material).
    pub material: f64,
    /// Material the move offers by static exchange, in pawns (0 for moves that offer nothing).
    pub sacrifice: f64,
    pub check: f64,
    pub capture: f64,
    /// Change in our attacks on the squares around the enemy king, per 4 attacks.
    pub king_attack: f64,
    /// Change in squares of the enemy king zone our rooks, bishops and queens see, per 4.
    pub lines_to_king: f64,
    /// Ranks the piece moved toward the enemy, per 4.
    pub advance: f64,
    /// Change in how many squares our pieces attack, per 16.
    pub mobility: f64,
    /// Change in enemy attacks on our own king zone, per 4 (higher is more exposed).
    pub own_king_exposure: f64,
    /// The sacrifice, in pawns, when the search rates the move within [`BACKED_WITHIN_CP`] of its
    /// best: what a sound sacrifice looks like from inside a shallow search.
    pub backed_sacrifice: f64,
    /// The sacrifice, in pawns, when the search finds the move worse than that.
    pub loose_sacrifice: f64,
    /// 1 for a sacrifice that a deeper search still finds close to the best move (see
    /// [`crate::verify`]), else 0. [`extract`] leaves it at 0: only the agent pays for that search.
    pub verified_sacrifice: f64,
    /// 1 for a move that offers any material by static exchange, else 0: lets a policy price
    /// sacrificing at all apart from how much is offered.
    pub offers_material: f64,
}

impl MoveFeatures {
    pub fn values(&self) -> [f64; FEATURE_COUNT] {
        [
            self.search,
            self.material,
            self.sacrifice,
            self.check,
            self.capture,
            self.king_attack,
            self.lines_to_king,
            self.advance,
            self.mobility,
            self.own_king_exposure,
            self.backed_sacrifice,
            self.loose_sacrifice,
            self.verified_sacrifice,
            self.offers_material,
        ]
    }

    /// Centipawns put en prise, for the judge and the sacrifice rate.
    pub fn offered_centipawns(&self) -> i32 {
        (self.sacrifice * 100.0).round() as i32
    }
}

/// The features of `m` in `pos`; `search_value` is the search's score of the move and
/// `best_value` that of the best move, in centipawns.
pub fn extract(pos: &Chess, m: Move, search_value: i32, best_value: i32) -> MoveFeatures {
    let us = pos.turn();
    let them = us.other();
    let exchange = static_exchange(pos, m);
    let mut after = pos.clone();
    after.play_unchecked(m);
    let their_king = pos.board().king_of(them);
    let our_king = pos.board().king_of(us);
    let zone_attacks = |p: &Chess, attacker: Color, king: Option<Square>, sliders_only: bool| {
        king.map_or(0, |k| zone_pressure(p, attacker, k, sliders_only))
    };
    let advance = match m.from() {
        Some(from) => {
            let gained = rank_index(m.to()) - rank_index(from);
            f64::from(if us == Color::White { gained } else { -gained })
        }
        None => 0.0,
    };
    let scale = |before: i32, after: i32, per: f64| f64::from(after - before) / per;
    let sacrifice = (f64::from((-exchange).max(0)) / 100.0).min(9.0);
    let backed = best_value.saturating_sub(search_value) <= BACKED_WITHIN_CP;
    MoveFeatures {
        search: (f64::from(search_value) / 100.0).clamp(-10.0, 10.0),
        material: (f64::from(exchange) / 100.0).clamp(-9.0, 9.0),
        sacrifice,
        check: if after.is_check() { 1.0 } else { 0.0 },
        capture: if m.is_capture() { 1.0 } else { 0.0 },
        king_attack: scale(
            zone_attacks(pos, us, their_king, false),
            zone_attacks(&after, us, their_king, false),
            4.0,
        ),
        lines_to_king: scale(
            zone_attacks(pos, us, their_king, true),
            zone_attacks(&after, us, their_king, true),
            4.0,
        ),
        advance: advance / 4.0,
        mobility: scale(
            attacked_squares(pos, us),
            attacked_squares(&after, us),
            16.0,
        ),
        own_king_exposure: scale(
            zone_attacks(pos, them, our_king, false),
            zone_attacks(&after, them, our_king, false),
            4.0,
        ),
        backed_sacrifice: if backed { sacrifice } else { 0.0 },
        loose_sacrifice: if backed { 0.0 } else { sacrifice },
        verified_sacrifice: 0.0,
        offers_material: if sacrifice > 0.0 { 1.0 } else { 0.0 },
    }
}

fn rank_index(sq: Square) -> i32 {
    sq.rank() as i32
}

/// Attacks by `attacker` on the king square and its neighbours, counted per attacking piece.
fn zone_pressure(pos: &Chess, attacker: Color, king: Square, sliders_only: bool) -> i32 {
    let board = pos.board();
    let zone = attacks::king_attacks(king) | Bitboard::from_square(king);
    let mut pieces = board.by_color(attacker);
    if sliders_only {
        pieces &= board.sliders();
    }
    pieces
        .into_iter()
        .map(|sq| (board.attacks_from(sq) & zone).count() as i32)
        .sum()
}

fn attacked_squares(pos: &Chess, side: Color) -> i32 {
    let board = pos.board();
    let mut all = Bitboard::EMPTY;
    for sq in board.by_color(side) {
        all |= board.attacks_from(sq);
    }
    all.count() as i32
}

/// Material the mover gains (positive) or loses (negative) on the destination square if both
/// sides keep capturing there with their least valuable piece and stop when it stops paying.
pub fn static_exchange(pos: &Chess, m: Move) -> i32 {
    let Some(from) = m.from() else { return 0 };
    if m.is_castle() {
        return 0;
    }
    let board = pos.board();
    let to = m.to();
    let mut occupied = board.occupied() ^ Bitboard::from_square(from);
    let captured = match m {
        Move::EnPassant { to, .. } => {
            // The captured pawn stands beside the mover, on the destination's file.
            let victim = Square::from_coords(to.file(), from.rank());
            occupied ^= Bitboard::from_square(victim);
            piece_value(Role::Pawn)
        }
        _ => m.capture().map_or(0, piece_value),
    };
    let promotion_gain = m
        .promotion()
        .map_or(0, |r| piece_value(r) - piece_value(Role::Pawn));
    let mut gain = [0i32; 34];
    gain[0] = captured + promotion_gain;
    let mut on_square = m.promotion().unwrap_or(m.role());
    let mut side = pos.turn().other();
    let mut depth = 0;
    loop {
        let attackers = board.attacks_to(to, side, occupied) & occupied;
        let Some((sq, role)) = least_valuable(pos, attackers, side) else {
            break;
        };
        if role == Role::King {
            // A king may only take last: it cannot step onto a square that is still defended.
            let defenders =
                board.attacks_to(to, side.other(), occupied ^ Bitboard::from_square(sq));
            if (defenders & occupied).any() {
                break;
            }
        }
        depth += 1;
        gain[depth] = piece_value(on_square) - gain[depth - 1];
        if (-gain[depth - 1]).max(gain[depth]) < 0 || depth == gain.len() - 1 {
            break;
        }
        occupied ^= Bitboard::from_square(sq);
        on_square = role;
        side = side.other();
    }
    while depth > 0 {
        gain[depth - 1] = -(-gain[depth - 1]).max(gain[depth]);
        depth -= 1;
    }
    gain[0]
}

fn least_valuable(pos: &Chess, attackers: Bitboard, side: Color) -> Option<(Square, Role)> {
    let board = pos.board();
    let ours = attackers & board.by_color(side);
    [
        Role::Pawn,
        Role::Knight,
        Role::Bishop,
        Role::Rook,
        Role::Queen,
        Role::King,
    ]
    .into_iter()
    .find_map(|role| (ours & board.by_role(role)).first().map(|sq| (sq, role)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::chess::rules::{parse_fen, parse_uci};

    fn exchange(fen: &str, uci: &str) -> i32 {
        let pos = parse_fen(fen).unwrap();
        static_exchange(&pos, parse_uci(&pos, uci).unwrap())
    }

    #[test]
    fn static_exchange_counts_the_whole_sequence() {
        // A free pawn.
        assert_eq!(exchange("4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5"), 100);
        // Pawn takes a defended pawn: trade, nothing won.
        assert_eq!(exchange("4k3/8/2p5/3p4/4P3/8/8/4K3 w - - 0 1", "e4d5"), 0);
        // Queen takes a pawn defended by a pawn: loses 800.
        assert_eq!(
            exchange("4k3/8/2p5/3p4/8/8/3Q4/4K3 w - - 0 1", "d2d5"),
            -800
        );
        // A knight moved where a pawn takes it: offers 300.
        assert_eq!(exchange("4k3/8/4p3/8/8/2N5/8/4K3 w - - 0 1", "c3d5"), -300);
        // Rook takes a rook defended by the king, with our second rook behind (x-ray): wins 500.
        assert_eq!(exchange("3rk3/8/8/8/8/8/3R4/3RK3 w - - 0 1", "d2d8"), 500);
    }

    #[test]
    fn a_queen_sacrifice_with_check_shows_in_the_features() {
        // Qxf7+ into a defended square: check, capture, a sacrifice of queen for pawn.
        let pos =
            parse_fen("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5Q2/PPPP1PPP/RNB1KBNR w KQkq - 2 3").unwrap();
        let m = parse_uci(&pos, "f3f7").unwrap();
        let f = extract(&pos, m, -800, 50);
        assert_eq!(f.check, 1.0);
        assert_eq!(f.capture, 1.0);
        assert_eq!(f.offered_centipawns(), 800);
        assert_eq!(f.material, -8.0);
        assert!(f.king_attack != 0.0 || f.lines_to_king != 0.0, "{f:?}");
        // The search finds it 8.5 pawns worse than the best move: a loose sacrifice.
        assert_eq!((f.loose_sacrifice, f.backed_sacrifice), (8.0, 0.0));
        // The same move rated within half a pawn of the best is a backed one.
        let backed = extract(&pos, m, 0, 40);
        assert_eq!(
            (backed.loose_sacrifice, backed.backed_sacrifice),
            (0.0, 8.0)
        );
        // A quiet developing move offers nothing.
        let quiet = extract(&pos, parse_uci(&pos, "g1e2").unwrap(), 0, 50);
        assert_eq!(
            (
                quiet.sacrifice,
                quiet.check,
                quiet.capture,
                quiet.backed_sacrifice
            ),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert!(quiet.advance > 0.0);
    }
}
