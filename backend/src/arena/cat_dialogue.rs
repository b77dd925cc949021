//! Catbot battles played as dialogues: each contender cares for the same cat over several turns,
//! the cat reacting between them, until the caretaker gives its final answer, the cat settles,
//! or the turns run out. The cat is the rule-based one the caretaker environment simulates, or
//! the embedded model playing the cat, which ends each reaction with its own verdict: a purr or
//! a hiss.
//!
//! A dialogue is shown, stored and judged as a transcript, one turn a line: `Caretaker: ...` and
//! `The cat: ...`.

use lachesis_inference::{ChatMessage, Engine};
use lachesis_shared::cats::{CatTask, CatTurn};

use super::answer::{AnswerError, Speaker};
use super::settings::ArenaCat;
use crate::envs::cat_caretaker::data::CatData;
use crate::envs::cat_caretaker::dialogue::{
    addresses_need, caretaker_messages, cat_reply, describe_cat_turn, is_final, opening,
    rubric_verdict,
};
use crate::policy::{EmbeddedPolicy, Policy, PolicyRequest};

const CARETAKER: &str = "Caretaker: ";
const CAT: &str = "The cat: ";

/// How a model cat's verdict is marked at the end of its line.
const PURRED: &str = " [purr]";
const HISSED: &str = " [hiss]";

/// Tokens the model cat may use for one reaction.
const CAT_TOKENS: usize = 48;

/// One catbot battle's dialogue: the cat, its player, and how many caretaker turns it allows.
#[derive(Debug, Clone)]
pub struct CatDialogue {
    pub task: CatTask,
    pub turns: usize,
    pub cat: ArenaCat,
}

/// The dialogue a battle of `arena` plays: only catbot battles allowing more than one turn are
/// dialogues.
pub fn for_battle(
    arena: lachesis_shared::arena::ArenaKind,
    seed: u64,
    turns: usize,
    cat: ArenaCat,
) -> Result<Option<CatDialogue>, AnswerError> {
    if arena != lachesis_shared::arena::ArenaKind::Catbot || turns <= 1 {
        return Ok(None);
    }
    let data = CatData::builtin().map_err(|e| AnswerError::Data(e.to_string()))?;
    Ok(Some(CatDialogue {
        task: data.task(seed),
        turns,
        cat,
    }))
}

/// How the cat reacted to a caretaker turn.
struct Reaction {
    turn: CatTurn,
    /// What the transcript shows.
    line: String,
    settled: bool,
}

/// Plays `dialogue` with `speaker` as the caretaker; `on_text` gets the transcript so far.
pub async fn play(
    speaker: &Speaker<'_>,
    dialogue: &CatDialogue,
    cat_engine: Option<&Engine>,
    on_text: &(dyn Fn(String) + Sync),
) -> Result<String, AnswerError> {
    let data = CatData::builtin().map_err(|e| AnswerError::Data(e.to_string()))?;
    let mut turns = vec![opening(&dialogue.task)];
    let mut transcript: Vec<String> = Vec::new();
    for turn in 1..=dialogue.turns {
        let before = transcript.join("\n");
        let show = |text: String| {
            let line = format!("{CARETAKER}{}", one_line(&text));
            on_text(if before.is_empty() {
                line
            } else {
                format!("{before}\n{line}")
            });
        };
        let said = speaker
            .reply(&caretaker_messages(data, &turns), &show)
            .await?;
        let said = one_line(&said);
        transcript.push(format!("{CARETAKER}{said}"));
        turns.push(CatTurn::Caretaker { text: said.clone() });
        if is_final(&said) || turn == dialogue.turns {
            break;
        }
        let reaction = match dialogue.cat {
            ArenaCat::Rules => rule_cat(data, &dialogue.task, &turns),
            ArenaCat::Model => {
                let engine = cat_engine.ok_or(AnswerError::NoModel)?;
                model_cat(engine, &dialogue.task, &said).await?
            }
        };
        transcript.push(reaction.line);
        on_text(transcript.join("\n"));
        turns.push(reaction.turn);
        if reaction.settled {
            break;
        }
    }
    Ok(transcript.join("\n"))
}

fn rule_cat(data: &CatData, task: &CatTask, turns: &[CatTurn]) -> Reaction {
    let turn = cat_reply(task, turns);
    let (line, settled) = match &turn {
        CatTurn::Cat { behaviors, sound } => {
            let settled = turns.last().is_some_and(|t| match t {
                CatTurn::Caretaker { text } => addresses_need(task, text),
                CatTurn::Cat { .. } => false,
            });
            let described = describe_cat_turn(data, behaviors, sound.as_deref());
            // A cat with behaviors, as the rule cat always has, is described as "The cat: ...".
            let line = if described.starts_with(CAT) {
                described
            } else {
                format!("{CAT}{described}")
            };
            (line, settled)
        }
        CatTurn::Caretaker { .. } => (format!("{CAT}(nothing)"), false),
    };
    Reaction {
        turn,
        line,
        settled,
    }
}

/// The embedded model as the cat: told its hidden need, it answers the caretaker in behaviors
/// and sounds and ends with its verdict.
async fn model_cat(engine: &Engine, task: &CatTask, said: &str) -> Result<Reaction, AnswerError> {
    let system = format!(
        "You are a cat. You cannot talk: describe in one sentence what you do and the sound you \
         make. Your hidden need: {} If what the caretaker just did meets that need, end with the \
         word PURR; otherwise end with the word HISS.",
        task.scenario.scenario.trim()
    );
    let request = PolicyRequest {
        tools: Vec::new(),
        messages: vec![
            ChatMessage::new("system", system),
            ChatMessage::new("user", format!("The caretaker: {said}")),
        ],
        n: 1,
        max_tokens: CAT_TOKENS,
        temperature: 0.0,
        top_p: 1.0,
        stop: vec!["\n\n".into()],
    };
    let text = EmbeddedPolicy::new(engine.clone())
        .complete(request)
        .await
        .map_err(|e| AnswerError::Failed(format!("the model cat: {e}")))?
        .pop()
        .map(|r| one_line(&r.completion))
        .unwrap_or_default();
    let verdict = cat_verdict(&text);
    // The verdict is marked, so a judge can tell it from a rule cat's hiss among its sounds.
    let mark = match verdict {
        Some(true) => PURRED,
        Some(false) => HISSED,
        None => "",
    };
    Ok(Reaction {
        turn: CatTurn::Cat {
            behaviors: Vec::new(),
            sound: None,
        },
        line: format!("{CAT}{text}{mark}"),
        settled: verdict == Some(true),
    })
}

/// A model cat's verdict: `Some(true)` for a purr, `Some(false)` for a hiss, whichever it
/// named last; `None` when it named neither.
pub fn cat_verdict(text: &str) -> Option<bool> {
    let lower = text.to_lowercase();
    match (lower.rfind("purr"), lower.rfind("hiss")) {
        (Some(p), Some(h)) => Some(p > h),
        (Some(_), None) => Some(true),
        (None, Some(_)) => Some(false),
        (None, None) => None,
    }
}

/// Whether `answer` is a dialogue's transcript rather than a single answer.
pub fn is_transcript(answer: &str) -> bool {
    answer.starts_with(CARETAKER)
}

/// The rubric's verdict on a transcript (the remedies the caretaker named over its turns, less a
/// tenth a turn beyond the first), and how the cat ended, in a line.
pub fn judge(task: &CatTask, transcript: &str) -> String {
    let mut turns = vec![opening(task)];
    let mut last_cat = None;
    for line in transcript.lines() {
        if let Some(text) = line.strip_prefix(CARETAKER) {
            turns.push(CatTurn::Caretaker { text: text.into() });
        } else if let Some(text) = line.strip_prefix(CAT) {
            last_cat = Some(text);
        }
    }
    let said = turns.len() - 1;
    let verdict = rubric_verdict(task, &turns);
    let named = if verdict.matched.is_empty() {
        "no remedy named".to_string()
    } else {
        format!("named {}", verdict.matched.join(", "))
    };
    let reaction = if verdict.score >= 0.5 {
        "purrs"
    } else {
        "hisses"
    };
    let own = match last_cat {
        Some(line) if line.ends_with(PURRED) => "; the cat's own last word: a purr",
        Some(line) if line.ends_with(HISSED) => "; the cat's own last word: a hiss",
        _ => "",
    };
    format!(
        "the cat {reaction}: score {:.2} over {said} turn{}, {named}{own}",
        verdict.score,
        if said == 1 { "" } else { "s" }
    )
}

/// Text on one line, so a transcript keeps one turn a line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_of_purr_and_hiss_is_the_cats_verdict() {
        assert_eq!(cat_verdict("It rubs your leg. PURR"), Some(true));
        assert_eq!(cat_verdict("A purr at first, then a HISS."), Some(false));
        assert_eq!(cat_verdict("Hiss... then purrs."), Some(true));
        assert_eq!(cat_verdict("It stares."), None);
    }

    #[test]
    fn a_transcript_is_judged_over_its_caretaker_turns() {
        let task = CatData::builtin().unwrap().task(3);
        let remedy = task.scenario.remedy.join(", ");
        let one = judge(&task, &format!("{CARETAKER}Final: {remedy}"));
        assert!(
            one.starts_with("the cat purrs: score 1.00 over 1 turn,"),
            "{one}"
        );
        let two = judge(
            &task,
            &format!(
                "{CARETAKER}I sing.\n{CAT}It hisses. HISS{HISSED}\n{CARETAKER}Final: {remedy}"
            ),
        );
        assert!(
            two.starts_with("the cat purrs: score 0.90 over 2 turns,"),
            "{two}"
        );
        assert!(two.ends_with("the cat's own last word: a hiss"), "{two}");
        let none = judge(&task, &format!("{CARETAKER}I sing to the moon."));
        assert!(none.starts_with("the cat hisses"), "{none}");
        assert!(none.contains("no remedy named"), "{none}");
        // A rule cat's hissing sound is not a verdict.
        let sound = judge(
            &task,
            &format!("{CARETAKER}I sing.\n{CAT}Hiding; you hear a hiss.\n{CARETAKER}Final: no"),
        );
        assert!(!sound.contains("last word"), "{sound}");
        assert!(is_transcript(&format!("{CARETAKER}I pet her.")));
        assert!(!is_transcript("I pet her."));
    }
}
