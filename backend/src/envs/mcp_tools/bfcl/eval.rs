//! Asking a policy BFCL's questions and scoring its calls.

use std::path::Path;

use futures::StreamExt;
use lachesis_shared::tools::parse_assistant_turn;
use serde::Serialize;

use super::{BfclError, Category, Question, check, load, tool_spec};
use crate::policy::{Policy, PolicyRequest};

/// Questions asked at once: remote servers batch them; the embedded engine queues them.
const CONCURRENCY: usize = 8;

/// A parallel answer in BFCL has at most a handful of calls; the parse limit sits well above so
/// that it never decides a verdict (a turn with more calls is wrong on count anyway).
const MAX_CALLS: usize = 64;

/// One category's score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryScore {
    pub category: Category,
    pub total: usize,
    pub correct: usize,
    /// Answers whose `<tool_call>` blocks did not parse (counted wrong).
    pub unparsed: usize,
}

impl CategoryScore {
    /// The fraction answered correctly (0 for an empty category).
    pub fn accuracy(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.correct as f64 / self.total as f64
        }
    }
}

/// What the policy answered to one question, and why it is wrong if it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionOutcome {
    pub id: String,
    pub category: Category,
    pub completion: String,
    /// Whether the completion's `<tool_call>` blocks failed to parse.
    pub unparsed: bool,
    /// `None` when correct; else the parse error or the checker's mismatch, in words.
    pub failure: Option<String>,
}

/// Scores per category, in [`Category::ALL`]'s order, and each question's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BfclReport {
    pub categories: Vec<CategoryScore>,
    pub outcomes: Vec<QuestionOutcome>,
}

impl BfclReport {
    /// The score of `category`, if it was evaluated.
    pub fn score(&self, category: Category) -> Option<&CategoryScore> {
        self.categories.iter().find(|s| s.category == category)
    }
}

/// Asks `policy` each question of the four categories in `dir` once, greedily (temperature 0),
/// with the question's functions as tools, and checks the calls it makes. With
/// `per_category_limit`, only the first that many questions of each category are asked.
pub async fn evaluate(
    policy: &dyn Policy,
    dir: &Path,
    per_category_limit: Option<usize>,
    max_tokens: usize,
) -> Result<BfclReport, BfclError> {
    let mut questions = Vec::new();
    for category in Category::ALL {
        let mut loaded = load(dir, category)?;
        if let Some(limit) = per_category_limit {
            loaded.truncate(limit);
        }
        questions.extend(loaded);
    }
    // The futures are made up front: a stream mapping over borrowed questions would make the
    // caller's future not `Send` (a known limit of closures over higher-ranked lifetimes).
    let asks: Vec<_> = questions
        .iter()
        .map(|question| ask(policy, question, max_tokens))
        .collect();
    let outcomes: Vec<QuestionOutcome> = futures::stream::iter(asks)
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let categories = Category::ALL
        .iter()
        .map(|&category| {
            let mine = outcomes.iter().filter(|o| o.category == category);
            CategoryScore {
                category,
                total: mine.clone().count(),
                correct: mine.clone().filter(|o| o.failure.is_none()).count(),
                unparsed: mine.clone().filter(|o| o.unparsed).count(),
            }
        })
        .collect();
    Ok(BfclReport {
        categories,
        outcomes,
    })
}

/// One question, one greedy completion, one verdict. A policy failure ends the evaluation: a
/// score over the questions that happened to get through would mislead.
async fn ask(
    policy: &dyn Policy,
    question: &Question,
    max_tokens: usize,
) -> Result<QuestionOutcome, BfclError> {
    let request = PolicyRequest {
        messages: question.messages.clone(),
        n: 1,
        max_tokens,
        temperature: 0.0,
        top_p: 1.0,
        stop: Vec::new(),
        tools: question.functions.iter().map(tool_spec).collect(),
    };
    let completion = policy
        .complete(request)
        .await?
        .into_iter()
        .next()
        .map(|rollout| rollout.completion)
        .unwrap_or_default();
    let parsed = parse_assistant_turn(&completion, MAX_CALLS);
    let failure = match &parsed {
        Err(e) => Some(format!("unparsed: {e}")),
        Ok(turn) => check(
            question.category,
            &question.functions,
            &question.expected,
            &turn.calls,
        )
        .err()
        .map(|m| m.to_string()),
    };
    Ok(QuestionOutcome {
        id: question.id.clone(),
        category: question.category,
        completion,
        unparsed: parsed.is_err(),
        failure,
    })
}

/// The fewest tokens an answer gets: four parallel calls in `<tool_call>` blocks take ~250, and a
/// budget cut short would be scored as the model's mistake.
pub const MIN_MAX_TOKENS: usize = 512;

/// `eval/bfcl_<category>` accuracies over the first `per_category` questions of each category, for
/// an environment's evaluation; the data directory is [`super::data_dir`].
pub async fn metrics(
    policy: &dyn Policy,
    per_category: usize,
    max_tokens: usize,
) -> Result<std::collections::BTreeMap<String, f64>, BfclError> {
    let report = evaluate(
        policy,
        &super::data_dir(),
        Some(per_category),
        max_tokens.max(MIN_MAX_TOKENS),
    )
    .await?;
    Ok(report
        .categories
        .iter()
        .map(|s| (format!("eval/bfcl_{}", s.category), s.accuracy()))
        .collect())
}
