//! One Stockfish process: UCI over its pipes, read by a thread so every wait has a deadline.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{Analysis, EngineConfig, EngineError, Score, SearchLimit, Strength};

/// How long a new process may take to say `uciok` and `readyok`.
const STARTUP: Duration = Duration::from_secs(30);

/// One engine process, read by a thread that forwards its output line by line.
pub(super) struct Engine {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Engine {
    pub(super) fn spawn(config: &EngineConfig) -> Result<Self, EngineError> {
        let spawn_error = |reason: String| EngineError::Spawn {
            path: config.path.display().to_string(),
            reason,
        };
        let mut child = Command::new(&config.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spawn_error(e.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(spawn_error("no pipes".into()));
        };
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut engine = Engine {
            child,
            stdin,
            lines,
        };
        // Loading the network takes a while on a busy machine, whatever the search deadline.
        let start = Instant::now() + STARTUP.max(config.deadline);
        engine.send("uci")?;
        engine.wait_for(|l| l == "uciok", start)?;
        engine.send(&format!("setoption name Hash value {}", config.hash_mb))?;
        engine.send("setoption name Threads value 1")?;
        match config.strength {
            Some(Strength::Skill(level)) => {
                engine.send(&format!(
                    "setoption name Skill Level value {}",
                    level.min(20)
                ))?;
            }
            Some(Strength::Elo(elo)) => {
                engine.send("setoption name UCI_LimitStrength value true")?;
                engine.send(&format!("setoption name UCI_Elo value {elo}"))?;
            }
            None => {}
        }
        engine.send("isready")?;
        engine.wait_for(|l| l == "readyok", start)?;
        Ok(engine)
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, command: &str) -> Result<(), EngineError> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|_| EngineError::Died)
    }

    fn next_line(&self, until: Instant) -> Result<String, EngineError> {
        let left = until.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(EngineError::Timeout(left)),
            Err(RecvTimeoutError::Disconnected) => Err(EngineError::Died),
        }
    }

    fn wait_for(&self, done: impl Fn(&str) -> bool, until: Instant) -> Result<(), EngineError> {
        loop {
            if done(self.next_line(until)?.trim()) {
                return Ok(());
            }
        }
    }

    /// Searches `fen` (optionally only `only_move`) within the limit and the deadline.
    pub(super) fn search(
        &mut self,
        fen: &str,
        only_move: Option<&str>,
        config: &EngineConfig,
    ) -> Result<Analysis, EngineError> {
        let moves: Vec<String> = only_move.map(str::to_string).into_iter().collect();
        let (analysis, _) = self.search_lines(fen, &moves, config)?;
        Ok(analysis)
    }

    /// Searches `fen`, restricted to `moves` when there are any, with one line per move: the
    /// best line's analysis and each searched move's score.
    pub(super) fn search_lines(
        &mut self,
        fen: &str,
        moves: &[String],
        config: &EngineConfig,
    ) -> Result<(Analysis, Vec<(String, Score)>), EngineError> {
        let lines = moves.len().max(1);
        if lines > 1 {
            self.send(&format!("setoption name MultiPV value {lines}"))?;
        }
        let found = self.run_search(fen, moves, config);
        if lines > 1 && !matches!(found, Err(EngineError::Died)) {
            self.send("setoption name MultiPV value 1")?;
        }
        found
    }

    fn run_search(
        &mut self,
        fen: &str,
        moves: &[String],
        config: &EngineConfig,
    ) -> Result<(Analysis, Vec<(String, Score)>), EngineError> {
        // Every search starts from an empty hash, so a position is judged the same whatever
        // the engine searched before it: a move's verdict does not depend on which other
        // moves were judged first.
        self.send("ucinewgame")?;
        self.send("isready")?;
        self.wait_for(|l| l == "readyok", Instant::now() + config.deadline)?;
        self.send(&format!("position fen {fen}"))?;
        let limit = match config.limit {
            SearchLimit::Depth(d) => format!("depth {d}"),
            SearchLimit::Nodes(n) => format!("nodes {n}"),
            SearchLimit::MoveTime(ms) => format!("movetime {ms}"),
        };
        if moves.is_empty() {
            self.send(&format!("go {limit}"))?;
        } else {
            self.send(&format!("go {limit} searchmoves {}", moves.join(" ")))?;
        }
        let deadline = Instant::now() + config.deadline;
        let mut last: Option<(Score, u32, u64)> = None;
        let mut per_move: Vec<(String, Score)> = Vec::new();
        let mut stopped = false;
        loop {
            let line = match self.next_line(if stopped {
                deadline + Duration::from_secs(1)
            } else {
                deadline
            }) {
                Ok(line) => line,
                Err(EngineError::Timeout(_)) if !stopped => {
                    // Ask for the best so far; a process that ignores this is replaced.
                    self.send("stop")?;
                    stopped = true;
                    continue;
                }
                Err(EngineError::Timeout(_)) => return Err(EngineError::Timeout(config.deadline)),
                Err(e) => return Err(e),
            };
            if let Some(rest) = line.strip_prefix("bestmove") {
                let best = rest
                    .split_whitespace()
                    .next()
                    .filter(|m| *m != "(none)")
                    .map(str::to_string);
                let (score, depth, nodes) = match last {
                    Some(found) => found,
                    // No legal move: mated (in check) or stalemate; the caller knows which.
                    None if best.is_none() => (Score::Centipawns(0), 0, 0),
                    None => return Err(EngineError::Protocol("bestmove before any score".into())),
                };
                let analysis = Analysis {
                    best,
                    score,
                    depth,
                    nodes,
                };
                return Ok((analysis, per_move));
            }
            if let Some((m, score)) = parse_line_move(&line)? {
                match per_move.iter_mut().find(|(known, _)| *known == m) {
                    Some(entry) => entry.1 = score,
                    None => per_move.push((m, score)),
                }
            }
            if let Some(info) = parse_info(&line)? {
                last = Some(info);
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The score, depth and nodes of a principal-variation `info` line; `None` for other lines
/// (strings, currmove, lower and upper bounds, secondary lines).
fn parse_info(line: &str) -> Result<Option<(Score, u32, u64)>, EngineError> {
    let mut words = line.split_whitespace();
    if words.next() != Some("info") {
        return Ok(None);
    }
    let words: Vec<&str> = words.collect();
    let value_after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
    };
    if words.contains(&"lowerbound") || words.contains(&"upperbound") || words.contains(&"string") {
        return Ok(None);
    }
    if value_after("multipv").is_some_and(|pv| *pv != "1") {
        return Ok(None);
    }
    let Some(kind_index) = words.iter().position(|w| *w == "score") else {
        return Ok(None);
    };
    let unreadable = || EngineError::Protocol(line.chars().take(200).collect());
    let kind = words.get(kind_index + 1).ok_or_else(unreadable)?;
    let value: i32 = words
        .get(kind_index + 2)
        .and_then(|v| v.parse().ok())
        .ok_or_else(unreadable)?;
    let score = match *kind {
        "cp" => Score::Centipawns(value),
        "mate" => Score::Mate(value),
        _ => return Err(unreadable()),
    };
    let depth = value_after("depth")
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let nodes = value_after("nodes")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok(Some((score, depth, nodes)))
}

/// The first move and score of any exact `info ... multipv N ... score ... pv MOVE` line.
fn parse_line_move(line: &str) -> Result<Option<(String, Score)>, EngineError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.first() != Some(&"info")
        || words.contains(&"lowerbound")
        || words.contains(&"upperbound")
        || words.contains(&"string")
    {
        return Ok(None);
    }
    let (Some(score_at), Some(pv_at)) = (
        words.iter().position(|w| *w == "score"),
        words.iter().position(|w| *w == "pv"),
    ) else {
        return Ok(None);
    };
    let unreadable = || EngineError::Protocol(line.chars().take(200).collect());
    let value: i32 = words
        .get(score_at + 2)
        .and_then(|v| v.parse().ok())
        .ok_or_else(unreadable)?;
    let score = match words.get(score_at + 1) {
        Some(&"cp") => Score::Centipawns(value),
        Some(&"mate") => Score::Mate(value),
        _ => return Err(unreadable()),
    };
    let first = words.get(pv_at + 1).ok_or_else(unreadable)?;
    Ok(Some((first.to_string(), score)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stockfish::MATE_CP;

    #[test]
    fn info_lines_give_scores_and_skip_bounds_and_secondary_lines() {
        let line = "info depth 12 seldepth 16 multipv 1 score cp -35 nodes 52011 nps 1 pv e7e5";
        assert_eq!(
            parse_info(line).unwrap(),
            Some((Score::Centipawns(-35), 12, 52011))
        );
        let mate = "info depth 10 seldepth 2 multipv 1 score mate 1 nodes 434 pv h5f7";
        assert_eq!(parse_info(mate).unwrap(), Some((Score::Mate(1), 10, 434)));
        assert_eq!(
            parse_info("info depth 9 score cp 20 lowerbound nodes 1").unwrap(),
            None
        );
        assert_eq!(
            parse_info("info depth 9 multipv 2 score cp 20 nodes 1").unwrap(),
            None
        );
        assert_eq!(parse_info("info string NNUE enabled").unwrap(), None);
        assert_eq!(parse_info("id name Stockfish 15.1").unwrap(), None);
        assert!(parse_info("info depth 3 score cp").is_err());
        assert!(parse_info("info depth 3 score wdl 1 2 3").is_err());
    }

    #[test]
    fn mates_order_with_centipawns() {
        assert_eq!(Score::Mate(1).centipawns(), MATE_CP - 1);
        assert_eq!(Score::Mate(-2).centipawns(), -MATE_CP + 2);
        assert!(Score::Mate(1).centipawns() > Score::Mate(3).centipawns());
        assert!(Score::Mate(3).centipawns() > Score::Centipawns(2_000).centipawns());
        assert!(Score::Mate(-1).centipawns() < Score::Mate(-4).centipawns());
    }
}
