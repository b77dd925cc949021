//! The rubric judge: scores a caretaker's answer against the need behind the cat's behaviors with
//! no LLM at all, and writes its verdict in the same `\boxed{}` form an LLM judge uses, so every
//! judge's output goes through one parser.

use lachesis_shared::cats::CatScenario;

/// What the rubric found in an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RubricVerdict {
    /// 0..1.
    pub score: f64,
    /// The remedies the answer mentions.
    pub matched: Vec<String>,
}

impl RubricVerdict {
    /// The verdict as a judge's answer: a justification, then `\boxed{score}`.
    pub fn to_judge_text(&self) -> String {
        let why = if self.matched.is_empty() {
            "mentions none of what this need calls for".to_string()
        } else {
            format!("mentions {}", self.matched.join(", "))
        };
        format!("The answer {why}. \\boxed{{{:.3}}}", self.score)
    }
}

/// Answers longer than this lose a fifth of their score: a caretaker acts, it does not lecture.
const RAMBLING_CHARS: usize = 1_200;

/// Full marks for naming three of the need's remedies (or all of them, when it has fewer).
pub fn score_answer(answer: &str, scenario: &CatScenario) -> RubricVerdict {
    let lower = answer.to_lowercase();
    let matched: Vec<String> = scenario
        .remedy
        .iter()
        .filter(|remedy| lower.contains(remedy.as_str()))
        .cloned()
        .collect();
    let wanted = scenario.remedy.len().clamp(1, 3);
    let mut score = (matched.len() as f64 / wanted as f64).min(1.0);
    if answer.chars().count() > RAMBLING_CHARS {
        score *= 0.8;
    }
    RubricVerdict { score, matched }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::data::CatData;
    use super::super::verdict::parse_judge_score;
    use super::*;

    fn water() -> CatScenario {
        CatData::builtin()
            .unwrap()
            .scenarios
            .iter()
            .find(|s| s.scenario.contains("fresh drinking water"))
            .cloned()
            .expect("the fresh water scenario")
    }

    #[test]
    fn answers_that_name_the_remedies_score_higher() {
        let scenario = water();
        let good = format!("I'll {} right away.", scenario.remedy[..3].join(" and "));
        let partial = format!("Maybe {}?", scenario.remedy[0]);
        let off = "Let's play with a feather toy.";
        let (good, partial, off) = (
            score_answer(&good, &scenario),
            score_answer(&partial, &scenario),
            score_answer(off, &scenario),
        );
        assert_eq!(good.score, 1.0);
        assert!((partial.score - 1.0 / 3.0).abs() < 1e-9, "{partial:?}");
        assert_eq!(off.score, 0.0);
        assert!(off.matched.is_empty());
        let rambling = format!("{} {}", scenario.remedy[..3].join(" "), "blah ".repeat(300));
        assert!((score_answer(&rambling, &scenario).score - 0.8).abs() < 1e-9);
    }

    proptest! {
        #[test]
        fn the_verdict_reads_back_through_the_judge_parser(answer in ".{0,400}") {
            let verdict = score_answer(&answer, &water());
            prop_assert!((0.0..=1.0).contains(&verdict.score));
            let read = parse_judge_score(&verdict.to_judge_text()).expect("a readable verdict");
            prop_assert!((read - verdict.score).abs() < 1e-3);
        }
    }
}
