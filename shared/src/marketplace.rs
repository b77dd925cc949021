//! The judge marketplace on the wire: agent cards, their judges and their live statistics.

use serde::{Deserialize, Serialize};

use crate::ledger::MicroUsdc;

/// The judge behind a card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JudgeBackend {
    /// The built-in rubric (no LLM). With a `lens`, a specialist: it reads answers to needs of its
    /// own category closely and others only roughly.
    Rubric {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lens: Option<crate::cats::CareCategory>,
    },
    /// The embedded model with this system prompt.
    Embedded { system_prompt: String },
    /// An OpenAI-compatible endpoint. The platform's cards may name a server environment variable
    /// holding the key (`api_key_env`, the operator's setting); a team's card carries the key its
    /// team supplied (`NewCard::api_key`, sealed, never shown) and must be on a public https host.
    Openai {
        base_url: String,
        model: String,
        system_prompt: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api_key_env: Option<String>,
    },
}

impl JudgeBackend {
    pub fn kind(&self) -> &'static str {
        match self {
            JudgeBackend::Rubric { .. } => "rubric",
            JudgeBackend::Embedded { .. } => "embedded",
            JudgeBackend::Openai { .. } => "openai",
        }
    }
}

/// Live statistics of a card, over all its evaluations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CardStats {
    pub evaluations: i64,
    pub mean_score: Option<f64>,
    /// 1 - mean |score - panel consensus| over evaluations with a consensus.
    pub agreement: Option<f64>,
    /// Mean signed gap between its scores and the consensus (positive: lenient).
    pub bias: Option<f64>,
    /// What one unit of agreement costs: spent / sum of agreement.
    pub cost_per_useful: Option<MicroUsdc>,
    pub earned: MicroUsdc,
}

/// A card as the marketplace lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCard {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub specialties: Vec<String>,
    pub price: MicroUsdc,
    /// The owning team's name; `None` for the platform's cards.
    pub owner_team: Option<String>,
    pub owner_wallet: Option<String>,
    pub judge: JudgeBackend,
    /// The card's team supplied an endpoint key (the key itself is never shown).
    #[serde(default)]
    pub has_api_key: bool,
    pub listed: bool,
    pub stats: CardStats,
}

/// `POST /api/marketplace/cards`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCard {
    pub slug: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub specialties: Vec<String>,
    pub price: MicroUsdc,
    /// The team that owns it; the caller must be one of its owners.
    pub team: String,
    #[serde(default)]
    pub owner_wallet: Option<String>,
    pub judge: JudgeBackend,
    /// The key an `openai` judge's endpoint needs, sealed at rest and never returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `PATCH /api/marketplace/cards/{slug}`: reprice, unlist or relist.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateCard {
    #[serde(default)]
    pub price: Option<MicroUsdc>,
    #[serde(default)]
    pub listed: Option<bool>,
}

/// A card paid (or, in evaluation mode, heard unpaid) in one Pay-to-Play round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaidCard {
    pub slug: String,
    pub price: MicroUsdc,
    /// The ledger transaction of the payment; `None` in evaluation mode.
    pub tx_id: Option<i64>,
    /// The on-chain transfer's hash when the payment settled on chain.
    pub chain_tx: Option<String>,
    /// The transfer on the chain's block explorer (Base, Base Sepolia); `None` on a local chain.
    pub explorer_url: Option<String>,
}

/// How the panel of a round was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PanelChoice {
    /// The cost-aware bandit over the cards' history.
    Bandit,
    /// The policy model chose, and its answer parsed.
    Llm,
    /// The policy model was asked but its answer was refused; the bandit chose instead.
    LlmFallback { reason: String },
    /// Evaluation mode: every runnable card, unpaid.
    Everyone,
}

/// One Pay-to-Play episode that was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundEvent {
    pub run: String,
    /// The episode's key (also the prefix of its payments' idempotency keys).
    pub episode: String,
    /// RFC 3339, UTC.
    pub at: String,
    /// The task as the agent saw it (the behaviors observed).
    pub task: String,
    pub category: crate::cats::CareCategory,
    pub choice: PanelChoice,
    pub cards: Vec<PaidCard>,
    pub paid: MicroUsdc,
    /// What the run's budget has left after this round.
    pub budget_left: MicroUsdc,
    /// Per answer: the panel's mean score, then the reward after the cost term.
    pub panel_scores: Vec<f64>,
    pub rewards: Vec<f64>,
    /// The answers judged, in order (shortened for the feed).
    pub answers: Vec<String>,
}

/// One Pay-to-Play episode skipped before anything was paid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedEvent {
    pub run: String,
    pub episode: String,
    pub at: String,
    pub reason: String,
    pub budget_left: MicroUsdc,
}

/// The marketplace's live feed (topic `marketplace`; `GET /api/marketplace/feed` for history).
/// Tagged `event`, not `kind`: inside [`crate::live::LiveEvent`] the `kind` key is taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum MarketEvent {
    Round(Box<RoundEvent>),
    Skipped(SkippedEvent),
}

impl MarketEvent {
    pub fn run(&self) -> &str {
        match self {
            MarketEvent::Round(round) => &round.run,
            MarketEvent::Skipped(skipped) => &skipped.run,
        }
    }

    pub fn at(&self) -> &str {
        match self {
            MarketEvent::Round(round) => &round.at,
            MarketEvent::Skipped(skipped) => &skipped.at,
        }
    }
}

/// A point of a budget's history: what was available after a ledger transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetPoint {
    pub at: String,
    pub available: MicroUsdc,
}

/// An agent's budget for a run, as `GET /api/marketplace/budgets` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    pub run: String,
    /// The ledger account (`budget/<run>/<agent>`).
    pub account: String,
    pub funded: MicroUsdc,
    pub spent: MicroUsdc,
    pub available: MicroUsdc,
    /// Oldest first.
    pub points: Vec<BudgetPoint>,
}
