//! DeepSacrifice chess: the wire types of games against the aggressive agent, and the rules
//! ([`rules`]) both the browser and the server run.

pub mod rules;

/// The move generator itself, for the server's search and features.
pub use shakmaty;

use serde::{Deserialize, Serialize};

/// A colour: which pieces a player moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Moves first from the standard start.
    White,
    /// Moves second from the standard start.
    Black,
}

impl Side {
    /// The opponent's colour.
    pub fn other(self) -> Side {
        match self {
            Side::White => Side::Black,
            Side::Black => Side::White,
        }
    }

    /// `white` or `black`, as stored and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::White => "white",
            Side::Black => "black",
        }
    }

    /// The inverse of [`Side::as_str`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Side> {
        match text {
            "white" => Some(Side::White),
            "black" => Some(Side::Black),
            _ => None,
        }
    }
}

/// How a game ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GameEnd {
    /// The side to move is in check with no legal move: it lost.
    Checkmate,
    /// The side to move has no legal move but is not in check: a draw.
    Stalemate,
    /// Neither side can mate: a draw.
    InsufficientMaterial,
    /// Fifty moves each without a capture or a pawn move: a draw.
    FiftyMoves,
    /// [`rules::MAX_PLIES`] reached: scored as a draw.
    MoveLimit,
    /// A player gave up: the other side won.
    Resignation,
}

impl GameEnd {
    /// The snake_case name, as stored and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            GameEnd::Checkmate => "checkmate",
            GameEnd::Stalemate => "stalemate",
            GameEnd::InsufficientMaterial => "insufficient_material",
            GameEnd::FiftyMoves => "fifty_moves",
            GameEnd::MoveLimit => "move_limit",
            GameEnd::Resignation => "resignation",
        }
    }

    /// The inverse of [`GameEnd::as_str`]; `None` for an unknown name.
    pub fn parse(text: &str) -> Option<GameEnd> {
        [
            GameEnd::Checkmate,
            GameEnd::Stalemate,
            GameEnd::InsufficientMaterial,
            GameEnd::FiftyMoves,
            GameEnd::MoveLimit,
            GameEnd::Resignation,
        ]
        .into_iter()
        .find(|end| end.as_str() == text)
    }
}

/// How a finished game ended and who won.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameOutcome {
    /// Why it ended.
    pub end: GameEnd,
    /// The winning colour; `None`: a draw.
    pub winner: Option<Side>,
    /// PGN's result: `1-0`, `0-1` or `1/2-1/2`.
    pub result: String,
}

impl GameOutcome {
    /// An outcome with its PGN `result` derived from `winner`.
    pub fn new(end: GameEnd, winner: Option<Side>) -> Self {
        let result = match winner {
            Some(Side::White) => "1-0",
            Some(Side::Black) => "0-1",
            None => "1/2-1/2",
        };
        Self {
            end,
            winner,
            result: result.into(),
        }
    }
}

/// The reward model's verdict on one agent move. Axis scores run 0 to 10.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoveReward {
    /// How hard the move attacks the opponent's king and pieces.
    pub aggression: f64,
    /// How surprising and strong the move is.
    pub brilliance: f64,
    /// How sound the move's sacrifice is; 5 (neutral) for moves that give nothing up.
    pub soundness: f64,
    /// The scalar the agent learns from: the axes combined, in [0, 1].
    pub total: f64,
    /// Material the move puts en prise by static exchange, in centipawns (0 when none).
    pub material_offered: i32,
    /// The judge's reasons, in words.
    pub justification: String,
    /// `engine` or the LLM judge's model name.
    pub judge: String,
    /// The annotation a review shows beside the move, when it earns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<MoveMark>,
    /// Stockfish's figures for the move, when Stockfish judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineView>,
}

/// A move's annotation, as lichess's analysis shows it (PGN numeric annotation glyphs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveMark {
    /// `!!`: a sound sacrifice that is the engine's best move or nearly.
    Brilliant,
    /// `!`: a sound sacrifice.
    Good,
    /// `?!`
    Inaccuracy,
    /// `?`
    Mistake,
    /// `??`
    Blunder,
}

impl MoveMark {
    /// The mark as written after the move: `!!`, `!`, `?!`, `?` or `??`.
    pub fn symbol(self) -> &'static str {
        match self {
            MoveMark::Brilliant => "!!",
            MoveMark::Good => "!",
            MoveMark::Inaccuracy => "?!",
            MoveMark::Mistake => "?",
            MoveMark::Blunder => "??",
        }
    }

    /// PGN's numeric annotation glyph: `$3` is `!!`, `$1` `!`, `$6` `?!`, `$2` `?`, `$4` `??`.
    pub fn nag(self) -> u8 {
        match self {
            MoveMark::Brilliant => 3,
            MoveMark::Good => 1,
            MoveMark::Inaccuracy => 6,
            MoveMark::Mistake => 2,
            MoveMark::Blunder => 4,
        }
    }
}

/// The value of a mate in 0, in centipawns; a mate in n is `MATE_CP - n` for the side that mates.
pub const MATE_CP: i32 = 30_000;

/// An evaluation in centipawns as people and PGN read it: `#3` or `#-2` for a mate (negative: the
/// other side mates), else pawns to `decimals` places, with a `+` on positive values when `signed`.
pub fn eval_text(cp: i32, decimals: usize, signed: bool) -> String {
    if cp.abs() > MATE_CP - 1_000 {
        let moves = MATE_CP - cp.abs();
        return if cp > 0 {
            format!("#{moves}")
        } else {
            format!("#-{moves}")
        };
    }
    let pawns = f64::from(cp) / 100.0;
    if signed {
        format!("{pawns:+.decimals$}")
    } else {
        format!("{pawns:.decimals$}")
    }
}

/// What the engine found about one move, in centipawns from the mover's side (mates near ±30000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineView {
    /// The position's value with the engine's best move.
    pub best_cp: i32,
    /// The value after the move played.
    pub played_cp: i32,
    /// The engine's best move in SAN, when it differs from the move played.
    pub better_move: Option<String>,
    /// The search depth the figures come from.
    pub depth: u32,
}

/// One move of a game, as played and (later) reviewed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoveRecord {
    /// 0 for the first move of the game.
    pub ply: u32,
    /// The move in UCI notation, e.g. `e2e4`.
    pub uci: String,
    /// The move in SAN with its check suffix, e.g. `Nf3+`, for the move list.
    pub san: String,
    /// The position after the move, as FEN.
    pub fen_after: String,
    /// Played by the agent, not the person.
    pub by_agent: bool,
    /// Filled when the game has been reviewed (agent moves only).
    pub reward: Option<MoveReward>,
    /// The person's rating of this agent move, 1 to 5; `None`: not rated.
    pub rating: Option<u8>,
}

/// A whole game as the board and the review need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameView {
    /// The game's id, as in `/api/chess/games/{id}` and the `game` topic.
    pub id: String,
    /// The colour the agent plays.
    pub agent_side: Side,
    /// The position the game started from, as FEN.
    pub start_fen: String,
    /// The current position, as FEN.
    pub fen: String,
    /// Every move so far, first first.
    pub moves: Vec<MoveRecord>,
    /// How it ended; `None` while it goes on.
    pub outcome: Option<GameOutcome>,
    /// The agent's policy version that played this game.
    pub policy_version: i64,
    /// Set when the game has been judged (and the agent has learned from it): the agent moves'
    /// `total` rewards summed, plus the result (win 1, draw 0, loss -1).
    pub game_return: Option<f64>,
    /// When the game was created: RFC 3339, UTC, seconds precision.
    pub created_at: String,
    /// Anyone may read it and watch it live (its owner said so).
    #[serde(default)]
    pub public: bool,
    /// The caller plays it; anyone else sees it as a spectator.
    #[serde(default)]
    pub yours: bool,
}

/// A game as the game list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameSummary {
    /// The game's id.
    pub id: String,
    /// The colour the agent plays.
    pub agent_side: Side,
    /// Moves played so far.
    pub plies: u32,
    /// How it ended; `None` while it goes on.
    pub outcome: Option<GameOutcome>,
    /// The agent's policy version that played it.
    pub policy_version: i64,
    /// The judged return (see [`GameView::game_return`]); `None` until reviewed.
    pub game_return: Option<f64>,
    /// When the game was created: RFC 3339, UTC, seconds precision.
    pub created_at: String,
}

/// `POST /api/chess/games`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewGame {
    /// The agent's colour; black (the person opens) when absent.
    pub agent_side: Option<Side>,
}

/// `POST /api/chess/games/{id}/moves` (the socket's `chess_move` carries the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlayMove {
    /// The person's move in UCI notation, e.g. `e2e4` or `e7e8q`.
    pub uci: String,
}

/// `POST /api/chess/games/{id}/ratings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateMove {
    /// The agent move rated, by its [`MoveRecord::ply`].
    pub ply: u32,
    /// 1 (poor) to 5 (brilliant).
    pub rating: u8,
}

/// One named feature weight of the agent's move evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureWeight {
    /// The feature, e.g. a material or king-attack term.
    pub name: String,
    /// Its weight in the move score; learning moves it.
    pub weight: f64,
}

/// `GET /api/chess/agent`: the current policy and how its versions have played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// The current policy version; every learning step bumps it.
    pub version: i64,
    /// The evaluator's feature weights.
    pub weights: Vec<FeatureWeight>,
    /// Search depth in plies, the move itself included.
    pub depth: u32,
    /// The softmax temperature moves are sampled at (positive; lower is greedier).
    pub temperature: f64,
    /// Games judged so far, and what the agent learned from: the judge's name and whether the
    /// people's ratings count.
    pub games_learned: i64,
    /// The reward judge: `engine` or the LLM judge's model name.
    pub judge: String,
    /// People's move ratings feed into the rewards.
    pub uses_ratings: bool,
    /// The latest recorded yardstick result for the current version (`lachesis chess rate
    /// --record`); `None` until one is recorded. Absent in answers from older servers.
    #[serde(default)]
    pub rating: Option<AgentRating>,
    /// The latest recorded yardstick result for version 0, the baseline the agent learns from;
    /// `None` until one is recorded.
    #[serde(default)]
    pub baseline_rating: Option<AgentRating>,
}

/// One measurement of a policy version by the yardstick: its Elo against a ladder of fixed
/// opponents anchored at Stockfish's `UCI_Elo` 1350, and how often it sacrificed in those games.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRating {
    /// The policy version rated.
    pub policy_version: i64,
    /// Elo by maximum likelihood; `None` when the games leave it open (every one lost or won).
    pub elo: Option<f64>,
    /// The 95% interval's lower end; `None`: open below (every game lost).
    pub elo_low: Option<f64>,
    /// The 95% interval's upper end; `None`: open above (every game won).
    pub elo_high: Option<f64>,
    /// Games the version played against the ladder.
    pub games: i64,
    /// Sacrifices (material put en prise) per move the version made in those games, 0 to 1.
    pub sacrifice_rate: f64,
    /// When it was measured (RFC 3339, UTC).
    pub measured_at: String,
}

impl AgentRating {
    /// `Elo 780 (95% 690–860)`, `Elo below 1012 (95%)` or `Elo above 1690 (95%)`.
    pub fn elo_text(&self) -> String {
        match (self.elo, self.elo_low, self.elo_high) {
            (Some(p), Some(l), Some(h)) => format!("Elo {p:.0} (95% {l:.0}–{h:.0})"),
            (_, None, Some(h)) => format!("Elo below {h:.0} (95%)"),
            (_, Some(l), None) => format!("Elo above {l:.0} (95%)"),
            _ => "Elo unknown".into(),
        }
    }
}

/// A move was played in a game (stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChessMoveEvent {
    /// The game's id.
    pub game: String,
    /// The move just played.
    pub record: MoveRecord,
    /// How the game ended, when this move ended it; `None`: it goes on.
    pub outcome: Option<GameOutcome>,
}

/// A game ended or was reviewed (state: reload it over HTTP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChessGameEvent {
    /// The game's id.
    pub game: String,
    /// Moves played.
    pub plies: u32,
    /// How it ended; `None` while it goes on.
    pub outcome: Option<GameOutcome>,
    /// The judge has scored its agent moves.
    pub reviewed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratings_read_as_elo_with_their_interval_and_old_answers_still_parse() {
        let mut r = AgentRating {
            policy_version: 5,
            elo: Some(779.6),
            elo_low: Some(690.2),
            elo_high: Some(860.5),
            games: 120,
            sacrifice_rate: 0.12,
            measured_at: "2026-12-02T10:00:00Z".into(),
        };
        assert_eq!(r.elo_text(), "Elo 780 (95% 690–860)");
        (r.elo, r.elo_low) = (None, None);
        assert_eq!(r.elo_text(), "Elo below 860 (95%)");
        (r.elo_low, r.elo_high) = (Some(1690.0), None);
        assert_eq!(r.elo_text(), "Elo above 1690 (95%)");
        // An answer from before ratings were recorded.
        let old = r#"{"version":3,"weights":[],"depth":2,"temperature":0.4,
            "games_learned":7,"judge":"engine","uses_ratings":true}"#;
        let info: AgentInfo = serde_json::from_str(old).unwrap();
        assert_eq!((info.rating, info.baseline_rating), (None, None));
    }

    #[test]
    fn evaluations_read_as_pawns_or_mates() {
        assert_eq!(eval_text(35, 2, false), "0.35");
        assert_eq!(eval_text(-120, 2, false), "-1.20");
        assert_eq!(eval_text(130, 1, true), "+1.3");
        assert_eq!(eval_text(0, 1, true), "+0.0");
        assert_eq!(eval_text(MATE_CP - 3, 2, false), "#3");
        assert_eq!(eval_text(-MATE_CP + 1, 1, true), "#-1");
        // Large but not mating evaluations stay in pawns.
        assert_eq!(eval_text(2_500, 2, false), "25.00");
    }

    #[test]
    fn marks_have_their_pgn_glyphs() {
        let all = [
            (MoveMark::Brilliant, "!!", 3),
            (MoveMark::Good, "!", 1),
            (MoveMark::Inaccuracy, "?!", 6),
            (MoveMark::Mistake, "?", 2),
            (MoveMark::Blunder, "??", 4),
        ];
        for (mark, symbol, nag) in all {
            assert_eq!((mark.symbol(), mark.nag()), (symbol, nag));
        }
    }
}
