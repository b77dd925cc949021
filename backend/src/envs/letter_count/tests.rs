use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::envs::Env;
use crate::envs::integer_answer::parse_answer;
use crate::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout};

fn env_with(settings: serde_json::Value) -> Result<LetterCountEnv, EnvError> {
    LetterCountEnv::new(&EnvOptions {
        seed: 11,
        group_size: Some(4),
        settings: settings.as_object().cloned().unwrap_or_default(),
        ..EnvOptions::default()
    })
}

fn env() -> LetterCountEnv {
    env_with(json!({})).expect("valid options")
}

fn rollout(text: &str, finish: Finish) -> Rollout {
    Rollout {
        completion: text.into(),
        finish,
        ..crate::envs::test_rollout(&[1], &[2])
    }
}

/// Answers every question with the same text.
struct Fixed(&'static str);

impl Policy for Fixed {
    fn name(&self) -> String {
        "fixed".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let answers = (0..request.n)
            .map(|_| rollout(self.0, Finish::Stop))
            .collect();
        futures::future::ready(Ok(answers)).boxed()
    }
}

#[test]
fn counts_ignore_case_and_include_zero() {
    assert_eq!(Puzzle::new("banana", 'a').count(), 3);
    assert_eq!(Puzzle::new("mississippi", 's').count(), 4);
    assert_eq!(Puzzle::new("Banana", 'b').count(), 1);
    assert_eq!(Puzzle::new("rhythm", 'e').count(), 0);
    assert_eq!(Puzzle::new("rhythm", 'e').expected(), Some(0));
}

#[test]
fn the_worked_examples_answer_themselves_and_are_never_asked() {
    let messages = Puzzle::new("kayak", 'k').messages(2);
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(
        messages[5].content,
        "How many times does the letter 'k' appear in the word \"kayak\"?"
    );
    assert_eq!(
        messages[2].content,
        "s t r a w b e r r y\nThe letter 'r' is at positions 3, 8, 9.\nAnswer: 3"
    );
    assert_eq!(parse_answer(&messages[4].content), Ok(0));
    for (word, _) in EXAMPLES {
        assert!(!words::WORDS.contains(&word), "{word} is in the list");
    }
}

#[tokio::test]
async fn items_are_seeded_and_never_from_the_evaluation_set() {
    let (first, second) = (env(), env());
    let mut absent = 0;
    for _ in 0..400 {
        let item = first.next_item().await.unwrap().unwrap();
        assert_eq!(Some(item.clone()), second.next_item().await.unwrap());
        let puzzle: Puzzle = serde_json::from_value(item).unwrap();
        assert!(!first.eval_set().contains(&puzzle));
        assert!(words::WORDS.contains(&puzzle.word.as_str()));
        assert!(puzzle.letter.is_ascii_lowercase());
        absent += usize::from(!puzzle.word.contains(puzzle.letter));
    }
    // absent_share is 0.2: about 80 of 400.
    assert!((50..=110).contains(&absent), "{absent} absent letters");
}

#[tokio::test]
async fn random_words_keep_to_their_lengths() {
    let env = env_with(json!({"words": "random", "min_length": 5, "max_length": 7})).unwrap();
    for _ in 0..200 {
        let item = env.next_item().await.unwrap().unwrap();
        let puzzle: Puzzle = serde_json::from_value(item).unwrap();
        assert!((5..=7).contains(&puzzle.word.len()), "{}", puzzle.word);
        assert!(puzzle.word.bytes().all(|b| b.is_ascii_lowercase()));
    }
}

#[test]
fn rewards_follow_the_documented_rule() {
    let env = env();
    let puzzle = Puzzle::new("banana", 'a');
    assert_eq!(
        env.score(&puzzle, &rollout("b a n a n a\nAnswer: 3", Finish::Stop)),
        1.0
    );
    assert_eq!(env.score(&puzzle, &rollout("Answer: 2", Finish::Stop)), 0.1);
    assert_eq!(env.score(&puzzle, &rollout("three", Finish::Stop)), 0.0);
    assert_eq!(
        env.score(&puzzle, &rollout("Answer: 2\nAnswer: 3", Finish::Stop)),
        0.0
    );
    assert_eq!(
        env.score(&puzzle, &rollout("Answer: 3", Finish::Length)),
        0.0
    );
}

#[test]
fn shared_and_own_settings_are_both_read() {
    let env = env_with(json!({"format_bonus": 0.25, "eval_size": 5, "examples": 0})).unwrap();
    let puzzle = Puzzle::new("banana", 'a');
    assert_eq!(
        env.score(&puzzle, &rollout("Answer: 2", Finish::Stop)),
        0.25
    );
    assert_eq!(env.eval_set().len(), 5);
    assert_eq!(env.task().messages(&puzzle).len(), 2);
}

#[tokio::test]
async fn evaluation_scores_each_held_out_puzzle_once() {
    let env = env();
    let outcome = env.evaluate(&Fixed("Answer: 1")).await.expect("evaluates");
    let n = env.eval_set().len();
    let once = env
        .eval_set()
        .iter()
        .filter(|p| p.word.matches(p.letter).count() == 1)
        .count();
    assert!(once > 0 && once < n, "the set mixes counts");
    let correct = once as f64 / n as f64;
    assert_eq!(outcome.metrics["eval/n"], 32.0);
    assert_eq!(outcome.metrics["eval/percent_correct"], correct);
    assert_eq!(outcome.metrics["eval/format_rate"], 1.0);
    let mean = (once as f64 + 0.1 * (n - once) as f64) / n as f64;
    assert!((outcome.metrics["eval/mean_score"] - mean).abs() < 1e-12);
    assert_eq!(outcome.samples.len(), n);
}

#[test]
fn bad_settings_are_refused() {
    for settings in [
        json!({"min_length": 0}),
        json!({"min_length": 8, "max_length": 4}),
        json!({"max_length": 65}),
        json!({"absent_share": 1.5}),
        json!({"examples": 3}),
        json!({"words": "klingon"}),
        json!({"word_list": "english"}),
    ] {
        assert!(
            matches!(env_with(settings.clone()), Err(EnvError::InvalidOption(_))),
            "{settings}"
        );
    }
}

#[tokio::test]
async fn malformed_items_are_refused_before_the_policy_is_asked() {
    let env = env();
    let long = "a".repeat(65);
    for item in [
        json!({"word": "", "letter": "a"}),
        json!({"word": long, "letter": "a"}),
        json!({"word": "banana"}),
        json!({"word": "banana", "letter": "ab"}),
        json!({"word": "banana", "letter": "a", "extra": 1}),
    ] {
        assert!(
            matches!(
                env.collect(item.clone(), &Fixed("Answer: 3")).await,
                Err(EnvError::InvalidItem(_))
            ),
            "{item}"
        );
    }
}
