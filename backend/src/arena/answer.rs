//! Prompts for each arena, and contenders answering them.

use std::time::Duration;

use lachesis_inference::ChatMessage;
use lachesis_shared::arena::{ArenaKind, ContenderPolicy};
use lachesis_shared::chess::rules;
use lachesis_shared::spatial::{Task, describe_task};

use super::cat_dialogue::{self, CatDialogue};
use super::endpoint;
use rand::SeedableRng;

use crate::envs::arithmetic::Problem;
use crate::envs::cat_caretaker::data::CatData;
use crate::envs::cat_caretaker::dialogue::{caretaker_messages, opening};
use crate::envs::cat_caretaker::rubric::score_answer;
use crate::envs::chess_player;
use crate::envs::integer_answer::parse_answer;
use crate::envs::spatial;
use crate::policy::{EmbeddedPolicy, Finish, PolicyRequest};

/// Largest answer kept, in characters (a contender ignoring its token limit cannot flood a page).
const MAX_ANSWER_CHARS: usize = 4_000;

/// What both contenders of a battle are asked.
#[derive(Debug, Clone)]
pub struct ArenaPrompt {
    /// Shown to the voter.
    pub text: String,
    /// Sent to each contender (a contender's own system prompt goes first).
    pub messages: Vec<ChatMessage>,
    /// A catbot battle played over several turns instead of one answer.
    pub dialogue: Option<CatDialogue>,
    /// The arena and seed it was drawn from, which its judge needs.
    pub arena: ArenaKind,
    pub seed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the arena's data do not load: {0}")]
    Data(String),
    #[error("no model is loaded for an embedded contender")]
    NoModel,
    #[error("no adapter named {0:?} is loaded")]
    NoAdapter(String),
    #[error("the contender failed: {0}")]
    Failed(String),
    #[error("the contender did not answer within {0:?}")]
    Timeout(Duration),
}

/// The prompt of arena `arena` for `seed`.
pub fn prompt(arena: ArenaKind, seed: u64) -> Result<ArenaPrompt, AnswerError> {
    match arena {
        ArenaKind::Catbot => {
            let data = CatData::builtin().map_err(|e| AnswerError::Data(e.to_string()))?;
            let task = data.task(seed);
            let messages = caretaker_messages(data, &[opening(&task)]);
            let text = messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            Ok(ArenaPrompt {
                text,
                messages,
                dialogue: None,
                arena,
                seed,
            })
        }
        ArenaKind::Arithmetic => {
            let problem = arithmetic_problem(seed);
            Ok(ArenaPrompt {
                text: problem.question(),
                messages: problem.messages(ARITHMETIC_EXAMPLES),
                dialogue: None,
                arena,
                seed,
            })
        }
        ArenaKind::Chess => {
            let (item, pos) = chess_player::position_for(seed);
            Ok(ArenaPrompt {
                text: item.question(&pos),
                messages: item.messages(&pos),
                dialogue: None,
                arena,
                seed,
            })
        }
        ArenaKind::Spatial => {
            let task = spatial_task(seed);
            Ok(ArenaPrompt {
                text: describe_task(&task),
                messages: spatial::messages(&task, SPATIAL_EXAMPLES),
                dialogue: None,
                arena,
                seed,
            })
        }
    }
}

/// Worked examples before a spatial arena's scene, as the environment shows them.
const SPATIAL_EXAMPLES: usize = 1;

/// A scene of one or two goals: small models can meet some of them, so votes tell contenders
/// apart.
fn spatial_task(seed: u64) -> Task {
    spatial::generate::generate(seed, 1 + (seed % 2) as u8)
}

/// Worked examples before an arithmetic arena's problem, as the environment shows them.
const ARITHMETIC_EXAMPLES: usize = 2;

fn arithmetic_problem(seed: u64) -> Problem {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    Problem::random(&mut rng, 100, 20)
}

/// The environment's own judge of one answer to the prompt of `seed`, in a line: the cat's rubric
/// (its score and the remedies named), or whether the arithmetic is right.
pub fn judge(arena: ArenaKind, seed: u64, answer: &str) -> String {
    match arena {
        ArenaKind::Catbot => match CatData::builtin() {
            Ok(data) if cat_dialogue::is_transcript(answer) => {
                cat_dialogue::judge(&data.task(seed), answer)
            }
            Ok(data) => {
                let task = data.task(seed);
                let verdict = score_answer(answer, &task.scenario);
                let reaction = if verdict.score >= 0.5 {
                    "purrs"
                } else {
                    "hisses"
                };
                if verdict.matched.is_empty() {
                    format!(
                        "the cat {reaction}: score {:.2}, no remedy named",
                        verdict.score
                    )
                } else {
                    format!(
                        "the cat {reaction}: score {:.2}, named {}",
                        verdict.score,
                        verdict.matched.join(", ")
                    )
                }
            }
            Err(e) => format!("no judge: {e}"),
        },
        ArenaKind::Arithmetic => {
            let problem = arithmetic_problem(seed);
            let truth = problem.answer().unwrap_or_default();
            match parse_answer(answer) {
                Ok(given) if given == truth => format!("correct: {truth}"),
                Ok(given) => format!("wrong: answered {given}, the result is {truth}"),
                Err(_) => format!("no final answer read; the result is {truth}"),
            }
        }
        ArenaKind::Chess => {
            let (_, pos) = chess_player::position_for(seed);
            let judged = chess_player::score_answer(&pos, answer, Finish::Stop);
            let san = |uci: &str| {
                rules::parse_uci(&pos, uci)
                    .map(|m| rules::san_of(&pos, m))
                    .unwrap_or_else(|_| uci.to_string())
            };
            match (judged.uci, judged.feedback) {
                (Some(uci), _) => format!(
                    "plays {}: the engine judge scores it {:.2} (attack and sound sacrifices \
                     score high)",
                    san(&uci),
                    judged.score
                ),
                (None, feedback) => format!(
                    "no legal move: {}",
                    feedback.unwrap_or_else(|| "none read".into())
                ),
            }
        }
        ArenaKind::Spatial => {
            let task = spatial_task(seed);
            let (verdict, _, shown) = spatial::judge(&task, answer);
            let met = verdict.goals.iter().filter(|g| g.satisfied).count();
            let goals = verdict.goals.len();
            if shown.starts_with("unreadable") {
                format!("the scene scores 0.00: {shown}")
            } else {
                format!(
                    "the scene scores {:.2}: {met} of {goals} goals met after the physics settled",
                    verdict.score
                )
            }
        }
    }
}

/// A contender ready to answer: its policy, the weights it answers with, and its bounds.
pub struct Speaker<'a> {
    pub policy: &'a ContenderPolicy,
    pub engine: Option<&'a lachesis_inference::Engine>,
    pub max_tokens: usize,
    pub timeout: Duration,
}

impl Speaker<'_> {
    /// One reply to `messages`, trimmed and bounded. Its text so far goes to `on_text` as it is
    /// written: an embedded contender's token by token, an endpoint's chunk by chunk when it
    /// streams.
    pub async fn reply(
        &self,
        messages: &[ChatMessage],
        on_text: &(dyn Fn(String) + Sync),
    ) -> Result<String, AnswerError> {
        let text = match self.policy {
            ContenderPolicy::Embedded {
                temperature,
                system,
                adapter,
            } => {
                let engine = self.engine.ok_or_else(|| match adapter {
                    Some(name) => AnswerError::NoAdapter(name.clone()),
                    None => AnswerError::NoModel,
                })?;
                let request = PolicyRequest {
                    tools: Vec::new(),
                    messages: with_system(messages, system.as_deref()),
                    n: 1,
                    max_tokens: self.max_tokens,
                    temperature: *temperature,
                    top_p: 1.0,
                    stop: vec![STOP.into()],
                };
                embedded_answer(engine, request, on_text).await?
            }
            ContenderPolicy::Endpoint { base_url, model } => {
                let (max_tokens, timeout) = (self.max_tokens, self.timeout);
                let shown = |text: String| on_text(bounded(&text));
                endpoint::answer(base_url, model, messages, max_tokens, timeout, &shown).await?
            }
        };
        let text = bounded(&text);
        on_text(text.clone());
        Ok(text)
    }
}

/// One contender's answer to `prompt` (a dialogue's transcript, for a catbot dialogue, with
/// `cat_engine` playing a model cat), within the speaker's timeout; its text so far goes to
/// `on_text`.
pub async fn answer(
    speaker: &Speaker<'_>,
    prompt: &ArenaPrompt,
    cat_engine: Option<&lachesis_inference::Engine>,
    on_text: &(dyn Fn(String) + Sync),
) -> Result<String, AnswerError> {
    let work = async {
        match &prompt.dialogue {
            None => speaker.reply(&prompt.messages, on_text).await,
            Some(dialogue) => cat_dialogue::play(speaker, dialogue, cat_engine, on_text).await,
        }
    };
    let text = tokio::time::timeout(speaker.timeout, work)
        .await
        .map_err(|_| AnswerError::Timeout(speaker.timeout))??;
    Ok(text.chars().take(MAX_TRANSCRIPT_CHARS).collect())
}

/// Largest dialogue transcript kept, in characters: every turn is bounded, and so is the whole.
const MAX_TRANSCRIPT_CHARS: usize = 4 * MAX_ANSWER_CHARS;

/// Where an arena answer ends: a blank line (the model starting a second reply).
const STOP: &str = "\n\n";

fn bounded(text: &str) -> String {
    text.trim().chars().take(MAX_ANSWER_CHARS).collect()
}

/// The embedded model's answer, its text so far reported after every token.
async fn embedded_answer(
    engine: &lachesis_inference::Engine,
    request: PolicyRequest,
    on_text: &(dyn Fn(String) + Sync),
) -> Result<String, AnswerError> {
    let model = EmbeddedPolicy::new(engine.clone());
    let (sink, mut streamed) = tokio::sync::mpsc::unbounded_channel();
    let generating = model.complete_streaming(request, sink);
    tokio::pin!(generating);
    let tokenizer = engine.tokenizer();
    let mut written = lachesis_inference::IncrementalText::default();
    let rollouts = loop {
        tokio::select! {
            biased;
            done = &mut generating => break done,
            Some(token) = streamed.recv() => {
                written.push(token.token);
                while let Ok(more) = streamed.try_recv() {
                    written.push(more.token);
                }
                if let Some(text) = text_so_far(tokenizer, &mut written) {
                    on_text(text);
                }
            }
        }
    };
    let rollouts = rollouts.map_err(|e| AnswerError::Failed(e.to_string()))?;
    Ok(rollouts
        .into_iter()
        .next()
        .map(|r| r.completion)
        .unwrap_or_default())
}

/// What a reader is shown of an unfinished answer: its tokens decoded, the end-of-sequence token
/// and anything from the stop string on left out, as the finished answer will be.
fn text_so_far(
    tokenizer: &lachesis_inference::ModelTokenizer,
    written: &mut lachesis_inference::IncrementalText,
) -> Option<String> {
    let ended = written.tokens().last() == Some(&tokenizer.eos_token_id());
    let mut text = written.text(tokenizer, ended).ok()?;
    if let Some(cut) = text.find(STOP) {
        text.truncate(cut);
    }
    Some(bounded(&text))
}

fn with_system(messages: &[ChatMessage], system: Option<&str>) -> Vec<ChatMessage> {
    let Some(extra) = system.map(str::trim).filter(|s| !s.is_empty()) else {
        return messages.to_vec();
    };
    let mut out = messages.to_vec();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{extra}\n\n{}", first.content);
        }
        _ => out.insert(0, ChatMessage::new("system", extra)),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catbot_prompts_describe_the_cat_and_vary_with_the_seed() {
        let a = prompt(ArenaKind::Catbot, 1).unwrap();
        assert_eq!(a.messages.first().unwrap().role, "system");
        assert_eq!(a.messages.last().unwrap().role, "user");
        assert!(!a.text.is_empty());
        let differ = (2..20).any(|s| prompt(ArenaKind::Catbot, s).unwrap().text != a.text);
        assert!(differ, "twenty seeds all gave one prompt");
    }

    #[test]
    fn arithmetic_prompts_ask_a_problem_the_judge_checks() {
        let prompt = prompt(ArenaKind::Arithmetic, 5).unwrap();
        assert!(prompt.text.starts_with("What is "), "{}", prompt.text);
        let problem = Problem::from_question(&prompt.text).unwrap();
        let truth = problem.answer().unwrap();
        assert_eq!(
            judge(ArenaKind::Arithmetic, 5, &format!("Answer: {truth}")),
            format!("correct: {truth}")
        );
        let wrong = judge(ArenaKind::Arithmetic, 5, &format!("Answer: {}", truth + 1));
        assert!(wrong.starts_with("wrong"), "{wrong}");
        assert!(judge(ArenaKind::Arithmetic, 5, "no idea").starts_with("no final answer"));
    }

    #[test]
    fn spatial_prompts_pose_a_scene_the_physics_judges() {
        // A scene the solver meets fully: its actions, as text, earn every goal.
        let seed = (0..50)
            .find(|&s| spatial::solve::solve(&spatial_task(s)).score >= 1.0)
            .expect("the solver meets every goal of some scene");
        let prompt = prompt(ArenaKind::Spatial, seed).unwrap();
        assert!(prompt.text.starts_with("Scene"), "{}", prompt.text);
        assert_eq!(prompt.messages.last().unwrap().content, prompt.text);
        let task = spatial_task(seed);
        let actions = spatial::solve::solve(&task).actions;
        let goals = task.goals.len();
        assert_eq!(
            judge(
                ArenaKind::Spatial,
                seed,
                &spatial::parse::render_actions(&actions)
            ),
            format!(
                "the scene scores 1.00: {goals} of {goals} goals met after the physics settled"
            )
        );
        let unread = judge(ArenaKind::Spatial, seed, "I would stack them neatly.");
        assert!(
            unread.starts_with("the scene scores 0.00: unreadable"),
            "{unread}"
        );
    }

    #[test]
    fn chess_prompts_pose_a_position_the_engine_judges() {
        let seed = 21;
        let prompt = prompt(ArenaKind::Chess, seed).unwrap();
        assert!(
            prompt.text.starts_with("Position (FEN): "),
            "{}",
            prompt.text
        );
        // The first legal move listed, answered as the examples answer, is read and judged.
        let legal = prompt
            .text
            .split("Legal moves: ")
            .nth(1)
            .and_then(|moves| moves.split([',', '.']).next())
            .expect("legal moves are listed")
            .trim()
            .to_string();
        let judged = judge(ArenaKind::Chess, seed, &format!("Move: {legal}"));
        assert!(judged.starts_with("plays "), "{judged}");
        assert!(judged.contains("the engine judge scores it"), "{judged}");
        let refused = judge(ArenaKind::Chess, seed, "Move: Ke9");
        assert!(refused.starts_with("no legal move: "), "{refused}");
        assert_eq!(
            prompt.text,
            super::prompt(ArenaKind::Chess, seed).unwrap().text
        );
    }

    #[test]
    fn the_cat_purrs_at_its_remedy_and_hisses_at_nonsense() {
        let data = CatData::builtin().unwrap();
        let task = data.task(3);
        let good = judge(ArenaKind::Catbot, 3, &task.scenario.remedy.join(", "));
        assert!(good.starts_with("the cat purrs"), "{good}");
        let bad = judge(ArenaKind::Catbot, 3, "I will sing to the moon.");
        assert!(bad.starts_with("the cat hisses"), "{bad}");
    }

    #[test]
    fn a_contender_system_prompt_goes_first() {
        let base = vec![
            ChatMessage::new("system", "care for cats"),
            ChatMessage::new("user", "meow"),
        ];
        let with = with_system(&base, Some("Be brief."));
        assert_eq!(with[0].content, "Be brief.\n\ncare for cats");
        assert_eq!(with_system(&base, Some("  ")), base);
        let bare = with_system(&base[1..], Some("Be brief."));
        assert_eq!(bare[0], ChatMessage::new("system", "Be brief."));
    }
}
