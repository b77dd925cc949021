//! Stockfish over UCI: a pool of engine processes, each search bounded by depth or nodes and by a
//! wall-clock deadline, with a process that dies or stops answering replaced and the search run
//! again on the replacement.
//!
//! Scores are from the side to move, as UCI gives them; mates become centipawns just short of
//! [`MATE_CP`] so they order with ordinary evaluations (a quicker mate scores higher).

use std::path::{Path, PathBuf};
use std::time::Duration;

mod engine;
mod pool;

pub use pool::EnginePool;

/// Where Debian's `stockfish` package installs the engine (not on root's default PATH).
pub const DEBIAN_PATH: &str = "/usr/games/stockfish";
/// Mates become centipawns just short of this (shared with the wire types and the browser).
pub use lachesis_shared::chess::MATE_CP;

/// The engine binary: `$LACHESIS_STOCKFISH`, else Debian's path or `stockfish` on PATH, if any.
pub fn locate() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LACHESIS_STOCKFISH") {
        return Some(PathBuf::from(path));
    }
    if Path::new(DEBIAN_PATH).is_file() {
        return Some(PathBuf::from(DEBIAN_PATH));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("stockfish"))
            .find(|candidate| candidate.is_file())
    })
}

/// How hard one search looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchLimit {
    Depth(u32),
    Nodes(u64),
    /// Milliseconds per search, as an opponent on a clock plays.
    MoveTime(u64),
}

/// A weakened engine, for an opponent of known strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strength {
    /// `Skill Level` 0–20 (20 is full strength); uncalibrated.
    Skill(u8),
    /// `UCI_LimitStrength` at this `UCI_Elo`: Stockfish's own calibration (1350–2850 in 15.1).
    Elo(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub path: PathBuf,
    pub limit: SearchLimit,
    /// A search still running after this is stopped; one that does not stop is killed.
    pub deadline: Duration,
    /// Engine processes in the pool, each with one search thread.
    pub processes: usize,
    pub hash_mb: u32,
    /// A weakened opponent; `None` plays its best.
    pub strength: Option<Strength>,
}

impl EngineConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            limit: SearchLimit::Depth(12),
            deadline: Duration::from_secs(10),
            processes: 2,
            hash_mb: 16,
            strength: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start the engine {path}: {reason}")]
    Spawn { path: String, reason: String },
    #[error("the engine process exited")]
    Died,
    #[error("the engine did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the engine answered something unreadable: {0}")]
    Protocol(String),
}

/// A score from the side to move's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    Centipawns(i32),
    /// Mate in this many moves: positive when the side to move mates, negative when it is mated.
    Mate(i32),
}

impl Score {
    pub fn centipawns(self) -> i32 {
        match self {
            Score::Centipawns(cp) => cp,
            Score::Mate(n) if n > 0 => MATE_CP - n,
            Score::Mate(n) => -MATE_CP - n,
        }
    }
}

/// What one search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The best move in UCI notation; `None` when the side to move has no legal move.
    pub best: Option<String>,
    pub score: Score,
    pub depth: u32,
    pub nodes: u64,
}
