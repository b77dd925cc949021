//! DeepSacrifice chess: the wire types of games against the aggressive agent, and the rules
//! ([`rules`]) both the browser and the server run.

pub mod rules;

/// The move generator itself, for the server's search and features.
pub use shakmaty;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    White,
    Black,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::White => Side::Black,
            Side::Black => Side::White,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Side::White => "white",
            Side::Black => "black",
        }
    }

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
    Checkmate,
    Stalemate,
    InsufficientMaterial,
    FiftyMoves,
    /// [`rules::MAX_PLIES`] reached: scored as a draw.
    MoveLimit,
    Resignation,
}

impl GameEnd {
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameOutcome {
    pub end: GameEnd,
    pub winner: Option<Side>,
    /// PGN's result: `1-0`, `0-1` or `1/2-1/2`.
    pub result: String,
}

impl GameOutcome {
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
    pub aggression: f64,
    pub brilliance: f64,
    /// How sound the move's sacrifice is; 5 (neutral) for moves that give nothing up.
    pub soundness: f64,
    /// The scalar the agent learns from: the axes combined, in [0, 1].
    pub total: f64,
    /// Material the move puts en prise by static exchange, in centipawns (0 when none).
    pub material_offered: i32,
    pub justification: String,
    /// `engine` or the LLM judge's model name.
    pub judge: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoveRecord {
    /// 0 for the first move of the game.
    pub ply: u32,
    pub uci: String,
    pub san: String,
    pub fen_after: String,
    pub by_agent: bool,
    /// Filled when the game has been reviewed (agent moves only).
    pub reward: Option<MoveReward>,
    /// The person's rating of this agent move, 1 to 5.
    pub rating: Option<u8>,
}

/// A whole game as the board and the review need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameView {
    pub id: String,
    pub agent_side: Side,
    pub start_fen: String,
    pub fen: String,
    pub moves: Vec<MoveRecord>,
    pub outcome: Option<GameOutcome>,
    /// The agent's policy version that played this game.
    pub policy_version: i64,
    /// Set when the game has been judged (and the agent has learned from it).
    pub game_return: Option<f64>,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameSummary {
    pub id: String,
    pub agent_side: Side,
    pub plies: u32,
    pub outcome: Option<GameOutcome>,
    pub policy_version: i64,
    pub game_return: Option<f64>,
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
    pub uci: String,
}

/// `POST /api/chess/games/{id}/ratings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateMove {
    pub ply: u32,
    /// 1 (poor) to 5 (brilliant).
    pub rating: u8,
}

/// One named feature weight of the agent's move evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureWeight {
    pub name: String,
    pub weight: f64,
}

/// `GET /api/chess/agent`: the current policy and how its versions have played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub version: i64,
    pub weights: Vec<FeatureWeight>,
    pub depth: u32,
    pub temperature: f64,
    /// Games judged so far, and what the agent learned from: the judge's name and whether the
    /// people's ratings count.
    pub games_learned: i64,
    pub judge: String,
    pub uses_ratings: bool,
}

/// A move was played in a game (stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChessMoveEvent {
    pub game: String,
    pub record: MoveRecord,
    pub outcome: Option<GameOutcome>,
}

/// A game ended or was reviewed (state: reload it over HTTP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChessGameEvent {
    pub game: String,
    pub plies: u32,
    pub outcome: Option<GameOutcome>,
    pub reviewed: bool,
}
