//! The caretaker page's pure parts: looking behaviors up, counting turns, building moves.

use lachesis_shared::cats::{CatBehavior, CatMove, CatSession, CatTurn};

/// What a behavior means, by its name (exact, else ignoring case); `None` for a name the list
/// does not have.
pub fn describe<'a>(behaviors: &'a [CatBehavior], name: &str) -> Option<&'a str> {
    behaviors
        .iter()
        .find(|b| b.behavior == name)
        .or_else(|| {
            behaviors
                .iter()
                .find(|b| b.behavior.eq_ignore_ascii_case(name))
        })
        .map(|b| b.description.as_str())
}

/// Caretaker turns so far (the judge decides after `max_turns` of them).
pub fn caretaker_turns(session: &CatSession) -> usize {
    session
        .turns
        .iter()
        .filter(|t| matches!(t, CatTurn::Caretaker { .. }))
        .count()
}

/// The caretaker's move, or `None` when there is nothing to say.
pub fn caretaker_move(text: &str, finish: bool) -> Option<CatMove> {
    let text = text.trim();
    (!text.is_empty()).then(|| CatMove {
        turn: CatTurn::Caretaker {
            text: text.to_owned(),
        },
        finish,
    })
}

/// The cat's move, or `None` when it neither does nor says anything. Behaviors keep the order
/// of the list they were picked from.
pub fn cat_move(picked: &[String], all: &[CatBehavior], sound: &str) -> Option<CatMove> {
    let behaviors: Vec<String> = all
        .iter()
        .filter(|b| picked.contains(&b.behavior))
        .map(|b| b.behavior.clone())
        .collect();
    let sound = sound.trim();
    let sound = (!sound.is_empty()).then(|| sound.to_owned());
    (!behaviors.is_empty() || sound.is_some()).then_some(CatMove {
        turn: CatTurn::Cat { behaviors, sound },
        finish: false,
    })
}

/// A 0..1 score as a whole percentage.
pub fn percent(score: f64) -> String {
    format!("{:.0} %", (score.clamp(0.0, 1.0) * 100.0))
}

#[cfg(test)]
mod tests {
    use lachesis_shared::cats::CatRole;

    use super::*;

    fn behavior(name: &str) -> CatBehavior {
        CatBehavior {
            behavior: name.into(),
            description: format!("{name} means something"),
        }
    }

    #[test]
    fn behaviors_are_described_by_name() {
        let all = [behavior("Purring"), behavior("Hissing")];
        assert_eq!(describe(&all, "Hissing"), Some("Hissing means something"));
        assert_eq!(describe(&all, "purring"), Some("Purring means something"));
        assert_eq!(describe(&all, "Barking"), None);
    }

    #[test]
    fn moves_need_something_to_say_or_do() {
        assert!(caretaker_move("  ", false).is_none());
        let m = caretaker_move(" Fresh water ", true).expect("a move");
        assert!(m.finish);
        assert_eq!(
            m.turn,
            CatTurn::Caretaker {
                text: "Fresh water".into()
            }
        );
        let all = [behavior("a"), behavior("b"), behavior("c")];
        assert!(cat_move(&[], &all, " ").is_none());
        let m = cat_move(&["c".into(), "a".into()], &all, "").expect("a move");
        assert_eq!(
            m.turn,
            CatTurn::Cat {
                behaviors: vec!["a".into(), "c".into()],
                sound: None
            }
        );
        let m = cat_move(&[], &all, "Mrrp").expect("a sound alone is a move");
        assert_eq!(
            m.turn,
            CatTurn::Cat {
                behaviors: vec![],
                sound: Some("Mrrp".into())
            }
        );
    }

    #[test]
    fn turns_and_scores() {
        let session = CatSession {
            id: "s".into(),
            role: CatRole::Caretaker,
            turns: vec![
                CatTurn::Cat {
                    behaviors: vec!["a".into()],
                    sound: None,
                },
                CatTurn::Caretaker { text: "hi".into() },
            ],
            max_turns: 3,
            scenario: None,
            verdict: None,
        };
        assert_eq!(caretaker_turns(&session), 1);
        assert_eq!(percent(0.756), "76 %");
        assert_eq!(percent(1.2), "100 %");
    }
}
