//! What keeps the votes honest, as pure rules: an answer that names its author voids the battle,
//! and the anomaly filters mark (never delete) votes that should not count.

use std::time::Duration;

use lachesis_shared::arena::VoteChoice;

/// The words that give a contender away: its name and its declared reveals, lower-cased and
/// trimmed, empty ones dropped.
pub fn reveal_terms(name: &str, reveals: &[String]) -> Vec<String> {
    let mut terms: Vec<String> = std::iter::once(name)
        .chain(reveals.iter().map(String::as_str))
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The first term that occurs in `answer` as a whole word (or phrase), ignoring case: a term
/// inside a longer word ("cat" in "catalogue") does not count.
pub fn revealed_term<'t>(answer: &str, terms: &'t [String]) -> Option<&'t str> {
    let text = answer.to_lowercase();
    terms.iter().map(String::as_str).find(|term| {
        text.match_indices(term).any(|(at, found)| {
            let before = text[..at].chars().next_back();
            let after = text[at + found.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    })
}

/// Why a battle is voided, if either answer reveals either contender. Both contenders' terms are
/// checked against both answers: an answer naming its rival gives the pairing away just as well.
pub fn void_reason(answers: [&str; 2], contenders: [(&str, &[String]); 2]) -> Option<String> {
    for (side, answer) in ["A", "B"].into_iter().zip(answers) {
        for (name, reveals) in contenders {
            let terms = reveal_terms(name, reveals);
            if let Some(term) = revealed_term(answer, &terms) {
                return Some(format!(
                    "answer {side} gives a contender away (it says {term:?})"
                ));
            }
        }
    }
    None
}

/// The anomaly filters' settings.
#[derive(Debug, Clone, Copy)]
pub struct Filters {
    pub min_vote: Duration,
    pub same_side_run: usize,
}

/// Why a vote is recorded but not counted, or `None` when it counts. `earlier` are the voter's
/// previous choices, most recent first (as many as the run length needs).
pub fn exclusion(
    filters: &Filters,
    taken: Duration,
    choice: VoteChoice,
    earlier: &[VoteChoice],
) -> Option<String> {
    if taken < filters.min_vote {
        return Some(format!(
            "too fast: cast {:.1} s after the answers were complete (minimum {:.1} s)",
            taken.as_secs_f64(),
            filters.min_vote.as_secs_f64()
        ));
    }
    let run = filters.same_side_run;
    if matches!(choice, VoteChoice::A | VoteChoice::B)
        && run > 1
        && earlier.len() >= run - 1
        && earlier[..run - 1].iter().all(|&c| c == choice)
    {
        return Some(format!(
            "same side: the voter's last {run} votes all chose {}",
            choice.as_str().to_uppercase()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn whole_words_reveal_parts_of_words_do_not() {
        let terms = reveal_terms("Whisker-Bot", &strings(&["SmolLM", " ", "tabby"]));
        assert_eq!(terms, strings(&["smollm", "tabby", "whisker-bot"]));
        assert_eq!(
            revealed_term("Hello, I am Whisker-Bot!", &terms),
            Some("whisker-bot")
        );
        assert_eq!(revealed_term("built on SMOLLM.", &terms), Some("smollm"));
        assert_eq!(revealed_term("a tabbycat and smollm2", &terms), None);
        assert_eq!(revealed_term("", &terms), None);
    }

    #[test]
    fn a_battle_is_void_when_either_answer_names_either_contender() {
        let none: Vec<String> = Vec::new();
        let reveals = strings(&["purrfect"]);
        let pair = [("alpha", none.as_slice()), ("beta", reveals.as_slice())];
        assert_eq!(void_reason(["feed the cat", "give water"], pair), None);
        let why = void_reason(["feed the cat", "Alpha says: brush her"], pair).unwrap();
        assert!(why.starts_with("answer B"), "{why}");
        assert!(why.contains("\"alpha\""), "{why}");
        assert!(void_reason(["Purrfect care: a vet visit", "x"], pair).is_some());
    }

    #[test]
    fn fast_votes_and_long_same_side_runs_are_excluded() {
        let filters = Filters {
            min_vote: Duration::from_secs(2),
            same_side_run: 3,
        };
        let slow = Duration::from_secs(5);
        assert!(
            exclusion(&filters, Duration::from_millis(500), VoteChoice::Tie, &[])
                .unwrap()
                .starts_with("too fast")
        );
        assert_eq!(
            exclusion(&filters, slow, VoteChoice::A, &[VoteChoice::A]),
            None
        );
        let run = [VoteChoice::A, VoteChoice::A, VoteChoice::B];
        assert!(
            exclusion(&filters, slow, VoteChoice::A, &run)
                .unwrap()
                .starts_with("same side")
        );
        assert_eq!(exclusion(&filters, slow, VoteChoice::B, &run), None);
        // Ties break no rule: a voter may find many pairs equal.
        let ties = [VoteChoice::Tie; 5];
        assert_eq!(exclusion(&filters, slow, VoteChoice::Tie, &ties), None);
    }

    proptest! {
        #[test]
        fn reveal_checks_never_panic(answer in "\\PC{0,80}", name in "\\PC{0,12}") {
            let terms = reveal_terms(&name, &[]);
            let _ = revealed_term(&answer, &terms);
        }
    }
}
