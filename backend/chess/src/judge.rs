//! The reward model: each agent move gets three scores from 0 to 10 (aggression, brilliance,
//! soundness of any sacrifice) and a one-line justification, from the engine judge or an LLM.
//!
//! The engine judge weighs the material a move offers (static exchange) against what the search
//! says it costs compared with the best move, and counts the attack it adds. An LLM judge answers
//! in JSON, parsed strictly by [`parse_verdict`]; every way its answer can be wrong is a
//! [`VerdictError`] the caller can show, and the engine judge stands in.

use lachesis_shared::chess::rules::{fen_of, san_of};
use lachesis_shared::chess::{EngineView, MoveReward};
use serde::Deserialize;
use shakmaty::{Chess, Move};

use crate::features::{self, MoveFeatures};
use crate::oracle::shown_eval;
use crate::search::{self, MATE, SearchStats};
use crate::shakmaty;

/// Search depth of the engine judge: one ply deeper than the agent, so it sees past its horizon.
pub const JUDGE_DEPTH: u32 = 3;
pub const ENGINE_JUDGE: &str = "engine";

/// The facts the engine establishes about a move, for either judge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoveFacts {
    pub features: MoveFeatures,
    /// Centipawns the move gives up against the best move, by search (≥ 0).
    pub loss: i32,
    /// The search's value of the move, in centipawns, for the mover.
    pub value: i32,
}

pub fn facts(pos: &Chess, m: Move, depth: u32) -> MoveFacts {
    let mut stats = SearchStats::default();
    let scored = search::score_moves(pos, depth, &mut stats);
    let best = scored.iter().map(|(_, v)| *v).max().unwrap_or(0);
    let value = scored
        .iter()
        .find(|(candidate, _)| *candidate == m)
        .map_or(best, |(_, v)| *v);
    MoveFacts {
        features: features::extract(pos, m, value, best),
        loss: (best - value).max(0),
        value,
    }
}

/// The three axes combined into the scalar the agent learns from, in [0, 1].
pub fn combine(aggression: f64, brilliance: f64, soundness: f64) -> f64 {
    ((0.45 * aggression + 0.25 * brilliance + 0.3 * soundness) / 10.0).clamp(0.0, 1.0)
}

/// The engine judge's verdict on `m` in `pos`.
pub fn engine_verdict(pos: &Chess, m: Move, depth: u32) -> MoveReward {
    let facts = facts(pos, m, depth);
    let f = facts.features;
    let offered = f.offered_centipawns();
    let aggression = aggression_of(&f);
    let soundness = if offered > 0 {
        10.0 * (1.0 - f64::from(facts.loss) / f64::from(offered)).clamp(0.0, 1.0)
    } else {
        5.0
    };
    let mates = facts.value > MATE / 2;
    let brilliance = if mates {
        10.0
    } else if offered > 0 {
        soundness * (f64::from(offered) / 300.0).min(1.0)
    } else if facts.loss == 0 && (f.check > 0.0 || f.capture > 0.0) {
        3.0
    } else {
        1.0
    };
    MoveReward {
        aggression: round1(aggression),
        brilliance: round1(brilliance),
        soundness: round1(soundness),
        total: combine(aggression, brilliance, soundness),
        material_offered: offered,
        justification: justify(pos, m, &facts, mates),
        judge: ENGINE_JUDGE.into(),
        mark: None,
        engine: None,
    }
}

/// Judged aggression from what a move does: checks, captures, pressure on the king, material
/// offered and ground taken.
pub fn aggression_of(f: &MoveFeatures) -> f64 {
    (1.0 + 3.0 * f.check
        + 1.5 * f.capture
        + 2.0 * f.king_attack.clamp(0.0, 1.5)
        + 1.5 * f.lines_to_king.clamp(0.0, 1.0)
        + f.sacrifice.min(3.0)
        + 0.5 * f.advance.clamp(0.0, 1.0))
    .clamp(0.0, 10.0)
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn justify(pos: &Chess, m: Move, facts: &MoveFacts, mates: bool) -> String {
    let san = san_of(pos, m);
    let f = &facts.features;
    let pawns = |cp: i32| f64::from(cp) / 100.0;
    let offered = f.offered_centipawns();
    if mates {
        return format!("{san} forces mate.");
    }
    let mut threat = Vec::new();
    if f.check > 0.0 {
        threat.push("gives check");
    }
    if f.king_attack > 0.0 || f.lines_to_king > 0.0 {
        threat.push("adds pressure on the king");
    }
    let threat = if threat.is_empty() {
        "makes no direct threat".to_string()
    } else {
        threat.join(" and ")
    };
    if offered > 0 {
        let verdict = if facts.loss * 2 <= offered {
            "the search finds the attack pays for it: sound"
        } else {
            "the search finds no compensation: unsound"
        };
        format!(
            "{san} offers {:.1} pawns and {threat}; it is {:.1} pawns worse than the best move, so {verdict}.",
            pawns(offered),
            pawns(facts.loss)
        )
    } else if facts.loss == 0 {
        format!("{san} {threat} and is as good as the best move found.")
    } else {
        format!(
            "{san} {threat}; it is {:.1} pawns worse than the best move found.",
            pawns(facts.loss)
        )
    }
}

/// The prompt an LLM judge answers; the engine's facts are given so a small model judges the
/// chess rather than guessing the material count.
pub fn verdict_prompt(
    pos: &Chess,
    m: Move,
    facts: &MoveFacts,
    engine: Option<&EngineView>,
) -> (String, String) {
    let system = "You judge chess moves played by an attacking agent. Score the move on three \
separate axes from 0 to 10: aggression (how hard it attacks), brilliance (how strong and \
surprising it is), soundness (whether any material it gives up is justified; 5 if it gives up \
nothing). Answer with one JSON object and nothing else: \
{\"aggression\": <0-10>, \"brilliance\": <0-10>, \"soundness\": <0-10>, \"justification\": \"<one sentence>\"}"
        .to_string();
    let f = &facts.features;
    let mut user = format!(
        "Position (FEN) before the move: {}\nMove: {}\nEngine facts: material offered {:.1} pawns; \
gives check: {}; captures: {}; pawns worse than the best move: {:.1}.",
        fen_of(pos),
        san_of(pos, m),
        f.sacrifice,
        if f.check > 0.0 { "yes" } else { "no" },
        if f.capture > 0.0 { "yes" } else { "no" },
        f64::from(facts.loss) / 100.0,
    );
    if let Some(engine) = engine {
        let best = engine
            .better_move
            .as_deref()
            .map_or("this move".to_string(), |b| {
                format!("{b} ({})", shown_eval(engine.best_cp))
            });
        user.push_str(&format!(
            "\nStockfish at depth {}: after this move the mover stands {}; its best move is {best}.",
            engine.depth,
            shown_eval(engine.played_cp),
        ));
    }
    (system, user)
}

/// An LLM judge's answer, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub aggression: f64,
    pub brilliance: f64,
    pub soundness: f64,
    pub justification: String,
}

impl Verdict {
    /// The LLM's scores as a reward; the annotation and the engine's figures stay those of the
    /// engine judge (`engine`), which the LLM was shown.
    pub fn into_reward(self, engine: &MoveReward, judge: &str) -> MoveReward {
        MoveReward {
            total: combine(self.aggression, self.brilliance, self.soundness),
            aggression: self.aggression,
            brilliance: self.brilliance,
            soundness: self.soundness,
            material_offered: engine.material_offered,
            justification: self.justification,
            judge: judge.into(),
            mark: engine.mark,
            engine: engine.engine.clone(),
        }
    }
}

/// Everything wrong an LLM judge's answer can be.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerdictError {
    #[error("the answer holds no JSON object")]
    NoObject,
    #[error("the JSON object is malformed or has the wrong fields: {0}")]
    Malformed(String),
    #[error("{field} is {value}, outside 0 to 10")]
    OutOfRange { field: &'static str, value: f64 },
    #[error("the justification is empty")]
    EmptyJustification,
}

/// The most characters of justification kept; longer ones are cut at a word.
const MAX_JUSTIFICATION: usize = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerdict {
    aggression: f64,
    brilliance: f64,
    soundness: f64,
    justification: String,
}

/// Reads the verdict from a model's answer: the first balanced `{...}` in the text (models wrap
/// JSON in prose or code fences), with exactly the four fields, numbers in range.
pub fn parse_verdict(text: &str) -> Result<Verdict, VerdictError> {
    let object = first_object(text).ok_or(VerdictError::NoObject)?;
    let raw: RawVerdict =
        serde_json::from_str(object).map_err(|e| VerdictError::Malformed(e.to_string()))?;
    for (field, value) in [
        ("aggression", raw.aggression),
        ("brilliance", raw.brilliance),
        ("soundness", raw.soundness),
    ] {
        if !(0.0..=10.0).contains(&value) {
            return Err(VerdictError::OutOfRange { field, value });
        }
    }
    let justification = raw
        .justification
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if justification.is_empty() {
        return Err(VerdictError::EmptyJustification);
    }
    Ok(Verdict {
        aggression: raw.aggression,
        brilliance: raw.brilliance,
        soundness: raw.soundness,
        justification: truncate_words(&justification, MAX_JUSTIFICATION),
    })
}

fn truncate_words(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(space) => format!("{}…", &cut[..space]),
        None => format!("{cut}…"),
    }
}

/// The first balanced JSON object in `text`, minding strings and escapes.
fn first_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text[start..].char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
