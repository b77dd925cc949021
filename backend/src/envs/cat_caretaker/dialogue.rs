//! The caretaker dialogue: the cat speaks only through behaviors and sounds, the caretaker says
//! and does things, and after the last caretaker turn a judge gives its verdict.
//!
//! The platform's cat is simulated from the data, so it behaves the same with or without a model:
//! while the caretaker has not addressed its need it shows another of that need's behaviors (or,
//! having shown them all, the first again, louder); once a caretaker turn names a remedy it
//! settles (purring, slow blinking). The caretaker's prompt is rendered here for the model.

use lachesis_inference::ChatMessage;
use lachesis_shared::cats::{CatTask, CatTurn, CatVerdict};

use super::data::CatData;
use super::rubric::score_answer;

/// Behaviors of a content cat, from the data's list.
const SETTLED: [&str; 3] = ["Purring", "Slow Blinking", "Kneading"];

pub const CARETAKER_PROMPT: &str = "You are caring for a cat. The cat cannot talk: you only see \
what it does and hear its sounds. Work out what it needs and say, in one or two sentences, what \
you do for it. When you are sure, start your answer with `Final:`.";

/// What a need sounds like when it is not being met.
fn sound_for(task: &CatTask, unmet_turns: usize) -> Option<String> {
    use lachesis_shared::cats::CareCategory::*;
    let base = match task.scenario.category {
        Nutrition => "a short, insistent meow",
        Health => "a low, strained meow",
        Comfort => "a plaintive meow",
        Safety => "a hiss",
        Enrichment => "a chirp",
    };
    Some(if unmet_turns >= 2 {
        format!("{base}, louder now")
    } else {
        base.to_string()
    })
}

/// The cat's opening turn: the behaviors the task says were observed.
pub fn opening(task: &CatTask) -> CatTurn {
    CatTurn::Cat {
        behaviors: task.observed.iter().map(|b| b.behavior.clone()).collect(),
        sound: sound_for(task, 0),
    }
}

/// Whether a caretaker's words name one of the need's remedies.
pub fn addresses_need(task: &CatTask, text: &str) -> bool {
    !score_answer(text, &task.scenario).matched.is_empty()
}

/// How many turns the caretaker has taken.
pub fn caretaker_turns(turns: &[CatTurn]) -> usize {
    turns
        .iter()
        .filter(|t| matches!(t, CatTurn::Caretaker { .. }))
        .count()
}

/// The simulated cat's answer to the dialogue so far (which ends with a caretaker turn).
pub fn cat_reply(task: &CatTask, turns: &[CatTurn]) -> CatTurn {
    let last_caretaker = turns.iter().rev().find_map(|t| match t {
        CatTurn::Caretaker { text } => Some(text.as_str()),
        CatTurn::Cat { .. } => None,
    });
    if last_caretaker.is_some_and(|text| addresses_need(task, text)) {
        return CatTurn::Cat {
            behaviors: SETTLED.iter().take(2).map(|s| s.to_string()).collect(),
            sound: Some("a soft purr".into()),
        };
    }
    let shown: Vec<&str> = turns
        .iter()
        .filter_map(|t| match t {
            CatTurn::Cat { behaviors, .. } => Some(behaviors.iter().map(String::as_str)),
            CatTurn::Caretaker { .. } => None,
        })
        .flatten()
        .collect();
    let unmet = caretaker_turns(turns);
    let next = task
        .scenario
        .behaviors
        .iter()
        .find(|b| !shown.contains(&b.as_str()))
        .or_else(|| task.scenario.behaviors.first())
        .cloned();
    CatTurn::Cat {
        behaviors: next.into_iter().collect(),
        sound: sound_for(task, unmet),
    }
}

/// A cat turn as the caretaker reads it: each behavior with what it looks like.
pub fn describe_cat_turn(data: &CatData, behaviors: &[String], sound: Option<&str>) -> String {
    let mut parts: Vec<String> = behaviors
        .iter()
        .map(|name| match data.behavior(name) {
            Some(b) => format!("{} ({})", b.behavior, b.description),
            None => name.clone(),
        })
        .collect();
    if let Some(sound) = sound.filter(|s| !s.trim().is_empty()) {
        parts.push(format!("you hear {}", sound.trim()));
    }
    if parts.is_empty() {
        "The cat does nothing new.".to_string()
    } else {
        format!("The cat: {}.", parts.join("; "))
    }
}

/// The caretaker's view of the dialogue as chat messages, ready for the next caretaker turn.
pub fn caretaker_messages(data: &CatData, turns: &[CatTurn]) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::new("system", CARETAKER_PROMPT)];
    for turn in turns {
        messages.push(match turn {
            CatTurn::Cat { behaviors, sound } => {
                ChatMessage::new("user", describe_cat_turn(data, behaviors, sound.as_deref()))
            }
            CatTurn::Caretaker { text } => ChatMessage::new("assistant", text.clone()),
        });
    }
    messages
}

/// Whether a caretaker turn is its final answer.
pub fn is_final(text: &str) -> bool {
    text.trim_start().to_ascii_lowercase().starts_with("final:")
}

/// The rubric's verdict on a dialogue: the remedies named over all the caretaker's turns, less a
/// tenth for every turn beyond the first it needed (a caretaker who guesses at length does worse
/// than one who reads the cat at once).
pub fn rubric_verdict(task: &CatTask, turns: &[CatTurn]) -> CatVerdict {
    let said: Vec<&str> = turns
        .iter()
        .filter_map(|t| match t {
            CatTurn::Caretaker { text } => Some(text.as_str()),
            CatTurn::Cat { .. } => None,
        })
        .collect();
    let verdict = score_answer(&said.join("\n"), &task.scenario);
    let extra_turns = said.len().saturating_sub(1) as f64;
    let score = (verdict.score * (1.0 - 0.1 * extra_turns)).clamp(0.0, 1.0);
    let adjusted = super::rubric::RubricVerdict {
        score,
        matched: verdict.matched.clone(),
    };
    CatVerdict {
        score,
        matched: verdict.matched,
        text: adjusted.to_judge_text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> CatTask {
        CatData::builtin().unwrap().task(3)
    }

    #[test]
    fn the_cat_escalates_until_its_need_is_met_then_settles() {
        let task = task();
        let mut turns = vec![opening(&task)];
        turns.push(CatTurn::Caretaker {
            text: "I sing it a song.".into(),
        });
        let CatTurn::Cat { behaviors, sound } = cat_reply(&task, &turns) else {
            panic!("the cat answers as a cat")
        };
        assert!(
            behaviors
                .iter()
                .all(|b| task.scenario.behaviors.contains(b))
        );
        assert!(sound.is_some());
        turns.push(CatTurn::Caretaker {
            text: format!("Final: I {}.", task.scenario.remedy[0]),
        });
        let CatTurn::Cat { behaviors, .. } = cat_reply(&task, &turns) else {
            panic!("the cat answers as a cat")
        };
        assert!(behaviors.contains(&"Purring".to_string()), "{behaviors:?}");
        // Every behavior the simulated cat shows is one the data knows.
        let data = CatData::builtin().unwrap();
        for b in SETTLED {
            assert!(data.behavior(b).is_some(), "{b}");
        }
    }

    #[test]
    fn the_verdict_rewards_remedies_and_charges_for_extra_turns() {
        let task = task();
        let remedy = task.scenario.remedy.join(", ");
        let quick = vec![
            opening(&task),
            CatTurn::Caretaker {
                text: format!("Final: {remedy}"),
            },
        ];
        let slow = vec![
            opening(&task),
            CatTurn::Caretaker {
                text: "Hmm.".into(),
            },
            opening(&task),
            CatTurn::Caretaker {
                text: format!("Final: {remedy}"),
            },
        ];
        let quick = rubric_verdict(&task, &quick);
        let slow = rubric_verdict(&task, &slow);
        assert_eq!(quick.score, 1.0);
        assert!((slow.score - 0.9).abs() < 1e-12, "{}", slow.score);
        assert_eq!(
            super::super::verdict::parse_judge_score(&slow.text).unwrap(),
            (slow.score * 1000.0).round() / 1000.0
        );
        let none = rubric_verdict(
            &task,
            &[CatTurn::Caretaker {
                text: "Sing.".into(),
            }],
        );
        assert_eq!(none.score, 0.0);
    }

    #[test]
    fn the_caretaker_reads_behaviors_with_their_descriptions() {
        let data = CatData::builtin().unwrap();
        let text = describe_cat_turn(data, &["Purring".into()], Some("a meow"));
        assert!(text.starts_with("The cat: Purring ("), "{text}");
        assert!(text.ends_with("you hear a meow."), "{text}");
        assert!(is_final("  final: water"));
        assert!(!is_final("I think it is final: water"));
    }
}
