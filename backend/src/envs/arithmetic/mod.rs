//! `arithmetic`: a verifiable environment of seeded integer problems (`a + b`, `a - b`, `a * b`).
//!
//! Operands are small by default (sums of numbers up to 20, the times tables up to 10) so that a
//! 135M-parameter model gets some right and some wrong: a group whose answers all score the same
//! teaches GRPO nothing and is dropped by the runner.
//!
//! Reward, per sequence:
//! - 1.0 when the final answer (see [`parse_answer`]) equals the true result;
//! - `format_bonus` (default 0.1) when a single integer answer was given in the asked-for form but
//!   it is wrong: a small signal that lets a tiny model learn the format before the arithmetic;
//! - 0.0 otherwise, and for completions cut off at `max_tokens` (their answer was not final).

pub mod baseline;

use lachesis_inference::ChatMessage;
use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::integer_answer::{self, IntegerAnswerEnv, IntegerQuestion, IntegerTask, Scoring};
pub use super::integer_answer::{ParseError, parse_answer, render_answer};
use super::registry::{EnvDescriptor, ServerNeeds};
use super::{EnvError, EnvOptions};

pub const NAME: &str = "arithmetic";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "Seeded integer problems (+, -, x) with a verifiable answer; reward 1 when \
                  exact, a small bonus for a well-formed wrong answer.",
    needs: ServerNeeds::Nothing,
    build: Some(|o| Ok(Box::new(ArithmeticEnv::new(o)?))),
    hosted: None,
};

const SYSTEM_PROMPT: &str = "You solve arithmetic problems. Work briefly, then write the final \
     answer alone on the last line, in the form `Answer: <integer>`.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    #[serde(rename = "+")]
    Add,
    #[serde(rename = "-")]
    Sub,
    #[serde(rename = "*")]
    Mul,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
        }
    }
}

/// Worked examples shown before the question (see [`Problem::messages`]); operands outside the
/// default ranges, so they never coincide with a drawn or evaluation problem.
const EXAMPLES: [Problem; 3] = [
    Problem {
        a: 23,
        op: Op::Add,
        b: 19,
    },
    Problem {
        a: 12,
        op: Op::Mul,
        b: 11,
    },
    Problem {
        a: 31,
        op: Op::Sub,
        b: 45,
    },
];

/// One problem; also the environment's `Item` (`{"a": 3, "op": "+", "b": 4}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Problem {
    pub a: i64,
    pub op: Op,
    pub b: i64,
}

impl Problem {
    /// The true result; `None` on overflow (possible only for items not made by this module).
    pub fn answer(&self) -> Option<i64> {
        match self.op {
            Op::Add => self.a.checked_add(self.b),
            Op::Sub => self.a.checked_sub(self.b),
            Op::Mul => self.a.checked_mul(self.b),
        }
    }

    pub fn question(&self) -> String {
        format!("What is {} {} {}?", self.a, self.op.symbol(), self.b)
    }

    /// The conversation asking this problem, after `examples` solved ones (at most
    /// [`EXAMPLES`]'s length). A 135M model rarely follows the `Answer:` instruction from the
    /// system prompt alone; two worked exchanges make it write the asked-for form often enough
    /// that groups differ in reward.
    pub fn messages(&self, examples: usize) -> Vec<ChatMessage> {
        let mut messages = vec![ChatMessage::new("system", SYSTEM_PROMPT)];
        for example in EXAMPLES.iter().take(examples) {
            messages.push(ChatMessage::new("user", example.question()));
            messages.push(ChatMessage::new("assistant", example.worked_answer()));
        }
        messages.push(ChatMessage::new("user", self.question()));
        messages
    }

    /// A short worked solution ending in the rendered final answer.
    fn worked_answer(&self) -> String {
        let result = self.answer().unwrap_or_default();
        format!(
            "{} {} {} = {result}\n{}",
            self.a,
            self.op.symbol(),
            self.b,
            render_answer(result)
        )
    }

    /// Reads a problem back from the text of [`Problem::question`] (the baseline policy's "eyes").
    pub fn from_question(text: &str) -> Option<Problem> {
        let start = text.rfind("What is ")? + "What is ".len();
        let expression = &text[start..];
        let expression = &expression[..expression.find('?')?];
        let mut parts = expression.split_whitespace();
        let a = parts.next()?.parse().ok()?;
        let op = match parts.next()? {
            "+" => Op::Add,
            "-" => Op::Sub,
            "*" => Op::Mul,
            _ => return None,
        };
        let b = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(Problem { a, op, b })
    }

    pub fn random(rng: &mut StdRng, max_operand: i64, max_factor: i64) -> Problem {
        let op = [Op::Add, Op::Sub, Op::Mul][rng.random_range(0..3)];
        let max = if op == Op::Mul {
            max_factor
        } else {
            max_operand
        };
        Problem {
            a: rng.random_range(0..=max),
            op,
            b: rng.random_range(0..=max),
        }
    }
}

impl IntegerQuestion for Problem {
    fn question(&self) -> String {
        Problem::question(self)
    }

    fn expected(&self) -> Option<i64> {
        self.answer()
    }
}

/// Settings read from `EnvOptions::settings`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub max_operand: i64,
    pub max_factor: i64,
    /// Worked examples before each question (0 to 3).
    pub examples: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_operand: 20,
            max_factor: 10,
            examples: 2,
        }
    }
}

/// The arithmetic task: problems drawn within the settings' ranges, asked after worked examples.
pub struct Arithmetic {
    settings: Settings,
}

impl IntegerTask for Arithmetic {
    const NAME: &str = NAME;
    const EVAL_SEED: u64 = 0x00c0_ffee;
    type Question = Problem;

    fn draw(&self, rng: &mut StdRng) -> Problem {
        Problem::random(rng, self.settings.max_operand, self.settings.max_factor)
    }

    fn messages(&self, problem: &Problem) -> Vec<ChatMessage> {
        problem.messages(self.settings.examples)
    }
}

pub type ArithmeticEnv = IntegerAnswerEnv<Arithmetic>;

impl ArithmeticEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let (scoring, settings): (Scoring, Settings) = integer_answer::settings(NAME, options)?;
        if !(0..=1_000_000).contains(&settings.max_operand)
            || !(0..=1_000_000).contains(&settings.max_factor)
        {
            return Err(EnvError::InvalidOption(
                "max_operand and max_factor must be between 0 and 1000000".into(),
            ));
        }
        if settings.examples > EXAMPLES.len() {
            return Err(EnvError::InvalidOption(format!(
                "examples must be at most {}",
                EXAMPLES.len()
            )));
        }
        IntegerAnswerEnv::with_task(Arithmetic { settings }, scoring, options)
    }
}

#[cfg(test)]
mod tests {
    use super::baseline::BaselinePolicy;
    use super::*;
    use crate::envs::Env;
    use crate::policy::{Finish, Rollout};
    use serde_json::json;

    fn env() -> ArithmeticEnv {
        ArithmeticEnv::new(&EnvOptions {
            seed: 7,
            group_size: Some(4),
            ..EnvOptions::default()
        })
        .expect("valid options")
    }

    #[test]
    fn questions_read_back_into_their_problems() {
        for problem in env().eval_set() {
            assert_eq!(Problem::from_question(&problem.question()), Some(*problem));
        }
        assert_eq!(Problem::from_question("What is 3 ^ 4?"), None);
        assert_eq!(Problem::from_question("What is 3 + 4 + 5?"), None);
    }

    #[tokio::test]
    async fn items_are_seeded_and_never_from_the_evaluation_set() {
        let (first, second) = (env(), env());
        for _ in 0..50 {
            let a = first.next_item().await.unwrap().unwrap();
            assert_eq!(Some(a.clone()), second.next_item().await.unwrap());
            let problem: Problem = serde_json::from_value(a).unwrap();
            assert!(!first.eval_set().contains(&problem));
        }
    }

    #[test]
    fn rewards_follow_the_documented_rule() {
        let env = env();
        let problem = Problem {
            a: 6,
            op: Op::Mul,
            b: 7,
        };
        let rollout = |text: &str, finish| Rollout {
            completion: text.into(),
            finish,
            ..crate::envs::test_rollout(&[1], &[2])
        };
        assert_eq!(
            env.score(&problem, &rollout("Answer: 42", Finish::Stop)),
            1.0
        );
        assert_eq!(
            env.score(&problem, &rollout("Answer: 41", Finish::Stop)),
            0.1
        );
        assert_eq!(env.score(&problem, &rollout("42", Finish::Stop)), 0.0);
        assert_eq!(
            env.score(&problem, &rollout("Answer: 42", Finish::Length)),
            0.0
        );
    }

    #[tokio::test]
    async fn a_perfect_baseline_scores_every_evaluation_problem() {
        let env = env();
        let policy = BaselinePolicy::new(1.0, 1, None);
        let outcome = env.evaluate(&policy).await.expect("evaluates");
        assert_eq!(outcome.metrics["eval/percent_correct"], 1.0);
        assert_eq!(outcome.metrics["eval/n"], 32.0);
        assert_eq!(outcome.samples.len(), 32);
        assert_eq!(outcome.samples[0]["correct"], true);
    }

    #[test]
    fn unknown_settings_are_refused() {
        let options = EnvOptions {
            settings: serde_json::Map::from_iter([("max_opernd".into(), json!(3))]),
            ..EnvOptions::default()
        };
        assert!(matches!(
            ArithmeticEnv::new(&options),
            Err(EnvError::InvalidOption(_))
        ));
    }

    #[test]
    fn worked_examples_precede_the_question_and_parse_back() {
        let problem = Problem {
            a: 3,
            op: Op::Mul,
            b: 4,
        };
        let messages = problem.messages(2);
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        assert_eq!(messages[5].content, "What is 3 * 4?");
        for (example, answer) in EXAMPLES.iter().zip([&messages[2], &messages[4]]) {
            assert_eq!(parse_answer(&answer.content).ok(), example.answer());
        }
        assert_eq!(problem.messages(0).len(), 2);
        let too_many = EnvOptions {
            settings: serde_json::Map::from_iter([("examples".into(), json!(4))]),
            ..EnvOptions::default()
        };
        assert!(matches!(
            ArithmeticEnv::new(&too_many),
            Err(EnvError::InvalidOption(_))
        ));
    }
}
