//! The feedback queue's wire types: queues of items people judge (rank a group's answers, rate an
//! answer 1–5, compare a pair), the judgements, and how far the judges agree.

use serde::{Deserialize, Serialize};

/// What a queue asks of its annotators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackKind {
    /// Order an item's answers, best first (2 to 16 answers).
    Rank,
    /// Rate an item's one answer from 1 (bad) to 5 (excellent).
    Rate,
    /// Say which of an item's two answers is better, or that they are equal.
    Compare,
}

impl FeedbackKind {
    /// The name in URLs and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            FeedbackKind::Rank => "rank",
            FeedbackKind::Rate => "rate",
            FeedbackKind::Compare => "compare",
        }
    }

    /// Parses [`FeedbackKind::as_str`]'s spelling.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "rank" => Some(FeedbackKind::Rank),
            "rate" => Some(FeedbackKind::Rate),
            "compare" => Some(FeedbackKind::Compare),
            _ => None,
        }
    }
}

/// A request to open a queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewQueue {
    /// Unique, 1 to 80 characters.
    pub name: String,
    /// The task.
    pub kind: FeedbackKind,
    /// What annotators should look for, in the host's words (at most 20,000 characters).
    pub guidelines: String,
    /// How many different people judge each item (1 to 20).
    pub overlap: u32,
}

/// A queue as its team sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// The task.
    pub kind: FeedbackKind,
    /// The guidelines.
    pub guidelines: String,
    /// Judges per item.
    pub overlap: u32,
    /// Items in the queue.
    pub items: i64,
    /// Judgements given.
    pub judgements: i64,
    /// Items with all their judgements.
    pub complete_items: i64,
}

/// One item to judge: a prompt and its answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewItem {
    /// What the answers answer (at most 20,000 characters).
    pub prompt: String,
    /// The answers (each at most 20,000 characters): 2 to 16 to rank, 1 to rate, 2 to compare.
    pub answers: Vec<String>,
    /// Where it came from (a run and group, an environment), shown to the host only.
    #[serde(default)]
    pub source: Option<String>,
}

/// Items to add to a queue (at most 500 at a time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewItems {
    /// The items.
    pub items: Vec<NewItem>,
}

/// The next item for the caller to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemToJudge {
    /// The item's id.
    pub item: i64,
    /// The queue's id.
    pub queue: i64,
    /// The task.
    pub kind: FeedbackKind,
    /// The queue's guidelines.
    pub guidelines: String,
    /// The prompt.
    pub prompt: String,
    /// The answers, in the order the judgement refers to.
    pub answers: Vec<String>,
    /// Items the caller has judged in this queue.
    pub done: i64,
    /// Items left for the caller, this one included.
    pub left: i64,
    /// Milliseconds the item still takes verdicts for, counted when it was served: an item a
    /// people's round asked for closes at the round's deadline. `None`: until it is closed.
    #[serde(default)]
    pub closes_in_ms: Option<i64>,
}

/// A judgement of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Judgement {
    /// Answer indices, best first: a permutation of `0..answers`.
    Rank {
        /// The order.
        order: Vec<usize>,
    },
    /// A score from 1 to 5.
    Rate {
        /// The score.
        score: u8,
    },
    /// `a` (the first answer), `b` (the second) or `tie`.
    Compare {
        /// The verdict.
        choice: PairChoice,
    },
}

/// A verdict between two answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairChoice {
    /// The first answer is better.
    A,
    /// The second answer is better.
    B,
    /// Equally good.
    Tie,
}

/// A judgement as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJudgement {
    /// The verdict.
    pub judgement: Judgement,
}

/// How far the annotators agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgreementReport {
    /// The queue.
    pub queue: i64,
    /// Krippendorff's alpha over every item judged at least twice (interval metric for ratings and
    /// ranks, nominal for comparisons); `None` with fewer than two such items' worth of pairs or
    /// no variation at all.
    pub alpha: Option<f64>,
    /// Cohen's kappa per pair of annotators who judged the same items (comparison queues).
    pub kappas: Vec<PairKappa>,
    /// Per item judged at least twice: the share of agreeing pairs of judgements.
    pub items: Vec<ItemAgreement>,
    /// Per annotator: how often they agree with the others on the items they share.
    pub annotators: Vec<AnnotatorAgreement>,
}

/// Cohen's kappa of two annotators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairKappa {
    /// One annotator.
    pub first: String,
    /// The other.
    pub second: String,
    /// Items both judged.
    pub shared: usize,
    /// `None` when undefined (every judgement the same category).
    pub kappa: Option<f64>,
}

/// Agreement on one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemAgreement {
    /// The item.
    pub item: i64,
    /// Judgements of it.
    pub judgements: usize,
    /// Share of agreeing pairs (for ratings: 1 minus the mean distance over the scale).
    pub agreement: f64,
}

/// Agreement of one annotator with the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnotatorAgreement {
    /// The annotator.
    pub annotator: String,
    /// Judgements given.
    pub judgements: usize,
    /// Mean agreement with the others' judgements of the same items; `None` if none shared.
    pub agreement: Option<f64>,
}

/// What the signed-in person has been paid for their verdicts (human judge cards).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Earnings {
    /// Their annotator account's balance.
    pub balance: crate::ledger::MicroUsdc,
    /// Verdicts paid.
    pub payments: i64,
}
