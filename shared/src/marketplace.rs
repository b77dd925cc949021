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
    /// An OpenAI-compatible endpoint; the key, if any, is read from the named environment variable.
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
