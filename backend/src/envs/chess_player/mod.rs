//! `chess_player`: the language model plays DeepSacrifice's side. Each item is a position reached
//! by the search agents from the opening (seeded), shown with its FEN, the moves so far in SAN and
//! the side to move; the model answers with one move in SAN or UCI.
//!
//! Reward, per sequence:
//! - the engine judge's combined score of the move, in [0, 1] (`lachesis_chess::judge`): attack
//!   and sound sacrifices score high, a move that throws material away for nothing low;
//! - −1 for an answer with no legal move (unparseable, illegal, ambiguous or cut off), with the
//!   reason appended to the conversation as the environment's reply, so a reader (or a multi-turn
//!   trainer) sees what was wrong.

use super::registry::{EnvDescriptor, ServerNeeds};
use std::sync::Mutex;

use lachesis_chess::agent::PolicyParams;
use lachesis_chess::judge::{self, JUDGE_DEPTH};
use lachesis_chess::player::{MoveParseError, parse_move};
use lachesis_chess::selfplay;
use lachesis_chess::shakmaty::{Chess, Color, Position};
use lachesis_inference::ChatMessage;
use lachesis_shared::chess::Side;
use lachesis_shared::chess::rules::{self, fen_of};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item, ScoredSequence};
use crate::policy::{Finish, Policy, PolicyRequest};

pub const NAME: &str = "chess_player";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "DeepSacrifice positions: the model names a move (SAN or UCI); the engine \
                  judge scores attack and sound sacrifices in [0, 1]; -1 for no legal move.",
    needs: ServerNeeds::Nothing,
    build: Some(|o| Ok(Box::new(ChessPlayerEnv::new(o)?))),
    hosted: None,
};

pub const EVAL_SEED: u64 = 0x0c4e_5500;
/// The score of an answer that names no legal move.
pub const ILLEGAL_PENALTY: f64 = -1.0;

const SYSTEM_PROMPT: &str = "You are an attacking chess player who loves sound sacrifices. You are \
given a position. Answer with your move alone on one line as `Move: <move>`, in SAN (like Nf3 or \
exd5) or UCI (like g1f3).";

/// One position to move in; also the environment's `Item`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PositionItem {
    pub fen: String,
    /// The moves from the start, in SAN.
    pub history: Vec<String>,
}

/// Worked exchanges shown before the position: a 135M model copies the `Move:` form from them
/// far more often than it follows the instruction alone (as with `arithmetic`'s examples).
const EXAMPLES: [(&[&str], &str); 2] = [(&[], "Move: e4"), (&["e4", "e5"], "Move: Nf3")];

impl PositionItem {
    /// The position after `history` (SAN from the start); `None` if a move is not legal.
    fn from_history(history: &[&str]) -> Option<(PositionItem, Chess)> {
        let mut pos = Chess::default();
        for san in history {
            let m = rules::parse_san(&pos, san)?;
            pos.play_unchecked(m);
        }
        let item = PositionItem {
            fen: fen_of(&pos),
            history: history.iter().map(|s| s.to_string()).collect(),
        };
        Some((item, pos))
    }

    /// The conversation asking for a move in this position, after the worked examples.
    pub fn messages(&self, pos: &Chess) -> Vec<ChatMessage> {
        let mut messages = vec![ChatMessage::new("system", SYSTEM_PROMPT)];
        for (history, answer) in EXAMPLES {
            if let Some((example, example_pos)) = PositionItem::from_history(history) {
                messages.push(ChatMessage::new("user", example.question(&example_pos)));
                messages.push(ChatMessage::new("assistant", answer));
            }
        }
        messages.push(ChatMessage::new("user", self.question(pos)));
        messages
    }

    /// The position as the model reads it: its FEN, the moves so far, the side and legal moves.
    pub fn question(&self, pos: &Chess) -> String {
        let side = if pos.turn() == Color::White {
            "White"
        } else {
            "Black"
        };
        let moves = if self.history.is_empty() {
            "none".to_string()
        } else {
            self.history
                .chunks(2)
                .enumerate()
                .map(|(i, pair)| format!("{}. {}", i + 1, pair.join(" ")))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let legal: Vec<String> = rules::legal_moves(pos).into_iter().map(|m| m.san).collect();
        format!(
            "Position (FEN): {}\nMoves so far: {moves}\nYou play {side}. Legal moves: {}.",
            self.fen,
            legal.join(", ")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Plies the search agents play from the start before the model takes over.
    pub min_plies: usize,
    pub max_plies: usize,
    pub eval_size: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            min_plies: 4,
            max_plies: 30,
            eval_size: 16,
        }
    }
}

/// What one answer earned, and the message explaining a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub score: f64,
    pub uci: Option<String>,
    pub feedback: Option<String>,
}

/// Scores one answer in one position (see the module's documentation).
pub fn score_answer(pos: &Chess, answer: &str, finish: Finish) -> Judged {
    // A cut-off answer still counts if a complete `Move:` line came before the cut.
    let answer = match finish {
        Finish::Stop => answer,
        Finish::Length => match answer.rsplit_once('\n') {
            Some((complete, _)) if has_move_line(complete) => complete,
            _ => return refused("the answer was cut off before it named a move".into()),
        },
    };
    match parse_move(pos, answer) {
        Ok(m) => Judged {
            score: judge::engine_verdict(pos, m, JUDGE_DEPTH).total,
            uci: Some(rules::uci_of(m)),
            feedback: None,
        },
        Err(e @ (MoveParseError::Empty | MoveParseError::NoMove)) => refused(e.to_string()),
        Err(e) => refused(format!("{e}; answer with one legal move")),
    }
}

fn has_move_line(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim_start().to_ascii_lowercase().starts_with("move:"))
}

fn refused(feedback: String) -> Judged {
    Judged {
        score: ILLEGAL_PENALTY,
        uci: None,
        feedback: Some(feedback),
    }
}

pub struct ChessPlayerEnv {
    config: EnvConfig,
    settings: Settings,
    rng: Mutex<StdRng>,
    eval_set: Vec<PositionItem>,
}

impl ChessPlayerEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let settings: Settings = super::parse_settings(NAME, options)?;
        if settings.min_plies > settings.max_plies || settings.max_plies > 200 {
            return Err(EnvError::InvalidOption(
                "min_plies must not exceed max_plies, which is at most 200".into(),
            ));
        }
        let config = EnvConfig::from_options(
            options,
            EnvConfig {
                group_size: 8,
                max_tokens: 64,
                ..EnvConfig::default()
            },
        )?;
        let eval_set = super::fixed_set(EVAL_SEED, settings.eval_size, |rng| {
            draw_position(rng, &settings)
        });
        Ok(Self {
            config,
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            settings,
            eval_set,
        })
    }

    fn request(
        &self,
        item: &PositionItem,
        pos: &Chess,
        n: usize,
        temperature: f32,
    ) -> PolicyRequest {
        PolicyRequest {
            tools: Vec::new(),
            messages: item.messages(pos),
            n,
            max_tokens: self.config.max_tokens,
            temperature,
            top_p: self.config.top_p,
            // The answer is one line: generation ends there instead of rambling into a cut-off.
            stop: vec!["\n".into()],
        }
    }
}

impl Env for ChessPlayerEnv {
    const NAME: &str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        let position = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            draw_position(&mut rng, &self.settings)
        };
        super::some_item(&position)
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let position: PositionItem = super::parse_item(item)?;
        let pos =
            rules::parse_fen(&position.fen).map_err(|e| EnvError::InvalidItem(e.to_string()))?;
        let request = self.request(
            &position,
            &pos,
            self.config.group_size,
            self.config.temperature,
        );
        let prompt = request.messages.clone();
        let rollouts = policy.complete(request).await?;
        let answers: Vec<(String, Finish)> = rollouts
            .iter()
            .map(|r| (r.completion.clone(), r.finish))
            .collect();
        // The judge searches: off the async workers.
        let judged = tokio::task::spawn_blocking(move || {
            answers
                .iter()
                .map(|(text, finish)| score_answer(&pos, text, *finish))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| EnvError::Other(format!("judging: {e}")))?;
        let sequences = rollouts
            .into_iter()
            .zip(judged)
            .map(|(rollout, judged)| {
                let mut sequence = ScoredSequence::answered(&prompt, rollout, judged.score);
                if let Some(feedback) = judged.feedback {
                    let feedback = format!("Environment: {feedback}");
                    sequence.messages.push(ChatMessage::new("user", feedback));
                }
                sequence
            })
            .collect();
        Ok(Collected::group(sequences, &self.config, policy))
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let (mut legal, mut score_sum) = (0usize, 0.0);
        let mut samples = Vec::new();
        for (id, item) in self.eval_set.iter().enumerate() {
            let pos = rules::parse_fen(&item.fen).map_err(|e| EnvError::Other(e.to_string()))?;
            let mut rollouts = policy.complete(self.request(item, &pos, 1, 0.0)).await?;
            let Some(rollout) = rollouts.pop() else {
                return Err(EnvError::Other("the policy returned no rollout".into()));
            };
            let (text, finish) = (rollout.completion.clone(), rollout.finish);
            let judge_pos = pos.clone();
            let judged =
                tokio::task::spawn_blocking(move || score_answer(&judge_pos, &text, finish))
                    .await
                    .map_err(|e| EnvError::Other(format!("judging: {e}")))?;
            legal += usize::from(judged.uci.is_some());
            score_sum += judged.score;
            samples.push(
                json!({"id": id, "fen": item.fen, "response": rollout.completion,
                "move": judged.uci, "feedback": judged.feedback, "score": judged.score}),
            );
        }
        let n = self.eval_set.len().max(1) as f64;
        let metrics = crate::envs::metrics(&[
            ("eval/legal_rate", legal as f64 / n),
            ("eval/mean_score", score_sum / n),
            ("eval/n", self.eval_set.len() as f64),
        ]);
        Ok(EvalOutcome { metrics, samples })
    }
}

/// A position from a game of the version-0 agent against itself, some plies in, not over.
/// The position drawn for `seed` with the default settings (an arena's battles use these), and
/// its board.
pub fn position_for(seed: u64) -> (PositionItem, Chess) {
    let item = draw_position(&mut StdRng::seed_from_u64(seed), &Settings::default());
    let pos = rules::parse_fen(&item.fen).unwrap_or_default();
    (item, pos)
}

fn draw_position(rng: &mut StdRng, settings: &Settings) -> PositionItem {
    let baseline = PolicyParams::default();
    loop {
        let plies = rng.random_range(settings.min_plies..=settings.max_plies);
        let game = selfplay::play_game(&baseline, &baseline, Side::White, plies, false, rng);
        let mut pos = Chess::default();
        let mut history = Vec::new();
        for uci in &game.ucis {
            let Ok(m) = rules::parse_uci(&pos, uci) else {
                break;
            };
            history.push(rules::san_of(&pos, m));
            pos.play_unchecked(m);
        }
        if rules::outcome_of(&pos, history.len()).is_none() {
            return PositionItem {
                fen: fen_of(&pos),
                history,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_scored_by_the_judge_or_refused_with_a_reason() {
        let pos = rules::parse_fen(rules::START_FEN).unwrap();
        let good = score_answer(&pos, "I open in the centre.\nMove: e4", Finish::Stop);
        assert_eq!(good.uci.as_deref(), Some("e2e4"));
        assert!((0.0..=1.0).contains(&good.score) && good.feedback.is_none());
        let illegal = score_answer(&pos, "Move: Qh5", Finish::Stop);
        assert_eq!(illegal.score, ILLEGAL_PENALTY);
        assert!(illegal.feedback.unwrap().contains("Qh5 is not legal"));
        let cut = score_answer(&pos, "Move: e4", Finish::Length);
        assert_eq!(cut.score, ILLEGAL_PENALTY);
        // The move line was complete before the cut: it counts.
        let complete = score_answer(&pos, "Move: d4 \nand then I will pl", Finish::Length);
        assert_eq!(complete.uci.as_deref(), Some("d2d4"));
        let none = score_answer(&pos, "hmm", Finish::Stop);
        assert!(none.feedback.unwrap().contains("no move found"));
    }

    #[tokio::test]
    async fn positions_are_seeded_playable_and_their_prompts_list_the_legal_moves() {
        let options = EnvOptions {
            seed: 3,
            ..EnvOptions::default()
        };
        let (a, b) = (
            ChessPlayerEnv::new(&options).unwrap(),
            ChessPlayerEnv::new(&options).unwrap(),
        );
        for _ in 0..5 {
            let item = a.next_item().await.unwrap().unwrap();
            assert_eq!(Some(item.clone()), b.next_item().await.unwrap());
            let position: PositionItem = serde_json::from_value(item).unwrap();
            let pos = rules::parse_fen(&position.fen).unwrap();
            assert!(rules::outcome_of(&pos, position.history.len()).is_none());
            assert!((4..=30).contains(&position.history.len()));
            let messages = position.messages(&pos);
            assert_eq!(
                messages.len(),
                2 + 2 * EXAMPLES.len(),
                "every example replays"
            );
            let prompt = &messages.last().unwrap().content;
            assert!(prompt.contains(&position.fen));
            for m in rules::legal_moves(&pos) {
                assert!(prompt.contains(&m.san), "{} missing from {prompt}", m.san);
            }
        }
        assert!(
            ChessPlayerEnv::new(&EnvOptions {
                settings: serde_json::from_value(json!({"min_plies": 9, "max_plies": 2})).unwrap(),
                ..EnvOptions::default()
            })
            .is_err()
        );
    }
}
