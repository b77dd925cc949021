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
        /// The category it specializes in; `None`: a generalist that reads every answer alike.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lens: Option<crate::cats::CareCategory>,
    },
    /// The embedded model with this system prompt.
    Embedded {
        /// Instructions given to the model before the task and answer.
        system_prompt: String,
    },
    /// An OpenAI-compatible endpoint. The platform's cards may name a server environment variable
    /// holding the key (`api_key_env`, the operator's setting); a team's card carries the key its
    /// team supplied (`NewCard::api_key`, sealed, never shown) and must be on a public https host.
    Openai {
        /// The endpoint's root, e.g. `https://api.openai.com/v1`.
        base_url: String,
        /// The model name the endpoint serves.
        model: String,
        /// Instructions given to the model before the task and answer.
        system_prompt: String,
        /// The server environment variable holding the key (platform cards only); `None`: no key
        /// from the environment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api_key_env: Option<String>,
    },
    /// People: a group's answers go to the team's rank queue, and each verdict given before the
    /// round's deadline is paid the card's price, into the annotator's own ledger account.
    Human {
        /// The feedback queue (of the card's team, ranking answers) its verdicts come from.
        queue: i64,
    },
}

impl JudgeBackend {
    /// The serde tag: `rubric`, `embedded`, `openai` or `human`.
    pub fn kind(&self) -> &'static str {
        match self {
            JudgeBackend::Rubric { .. } => "rubric",
            JudgeBackend::Embedded { .. } => "embedded",
            JudgeBackend::Openai { .. } => "openai",
            JudgeBackend::Human { .. } => "human",
        }
    }
}

/// Live statistics of a card, over all its evaluations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CardStats {
    /// Answers the card has scored.
    pub evaluations: i64,
    /// Its average score (0..1); `None` before its first evaluation.
    pub mean_score: Option<f64>,
    /// 1 - mean |score - panel consensus| over evaluations with a consensus.
    pub agreement: Option<f64>,
    /// Mean signed gap between its scores and the consensus (positive: lenient).
    pub bias: Option<f64>,
    /// What one unit of agreement costs: spent / sum of agreement.
    /// `None` while it has earned no agreement.
    pub cost_per_useful: Option<MicroUsdc>,
    /// Everything it was paid, over all evaluations.
    pub earned: MicroUsdc,
}

/// A card as the marketplace lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCard {
    /// The card's unique key in URLs and payments: 2-48 characters of `a-z`, `0-9` and `-`.
    pub slug: String,
    /// The name shown to people.
    pub name: String,
    /// What the judge is good at, in words.
    pub description: String,
    /// Lowercase care categories it claims to judge well, e.g. `health`.
    pub specialties: Vec<String>,
    /// What one evaluation costs the agent's budget.
    pub price: MicroUsdc,
    /// The owning team's name; `None` for the platform's cards.
    pub owner_team: Option<String>,
    /// The owner's wallet (`0x` and 40 hex digits) payments settle to on chain; `None`: payments
    /// stay in the ledger.
    pub owner_wallet: Option<String>,
    /// The judge that does the scoring.
    pub judge: JudgeBackend,
    /// The card's team supplied an endpoint key (the key itself is never shown).
    #[serde(default)]
    pub has_api_key: bool,
    /// Offered to agents; an unlisted card keeps its history but is not chosen.
    pub listed: bool,
    /// How it has judged so far.
    pub stats: CardStats,
}

/// What a card is listed with, whoever lists it: a team through the API ([`NewCard`]), the
/// operator in the config file, or the platform's own table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardListing {
    /// The card's unique key: 2-48 characters of `a-z`, `0-9` and `-`, not starting with `-`.
    pub slug: String,
    /// The name shown to people.
    pub name: String,
    /// What the judge is good at, in words; empty when absent.
    #[serde(default)]
    pub description: String,
    /// Lowercase care categories it claims to judge well.
    pub specialties: Vec<String>,
    /// What one evaluation costs: more than 0 and at most 100 USDC.
    pub price: MicroUsdc,
    /// The judge that does the scoring.
    pub judge: JudgeBackend,
}

/// The keys of [`CardListing`], which [`CardListing::split_from`] hands to it.
const LISTING_KEYS: [&str; 6] = [
    "slug",
    "name",
    "description",
    "specialties",
    "price",
    "judge",
];

impl CardListing {
    /// Reads one map (a JSON object, a TOML table) as a listing and `R`: the listing's keys go to
    /// the listing, the others to `R`. Both refuse keys they do not know, so a misspelt key is an
    /// error (serde's `flatten` would pass it over in silence).
    pub fn split_from<'de, D, R>(deserializer: D) -> Result<(CardListing, R), D::Error>
    where
        D: serde::Deserializer<'de>,
        R: serde::de::DeserializeOwned,
    {
        use serde::de::Error;
        let mut rest = serde_json::Map::deserialize(deserializer)?;
        let listing: serde_json::Map<String, serde_json::Value> = LISTING_KEYS
            .iter()
            .filter_map(|key| rest.remove_entry(*key))
            .collect();
        // The rest first: a misspelt listing key lands there and is named as unknown.
        let rest = R::deserialize(serde_json::Value::Object(rest)).map_err(D::Error::custom)?;
        let listing = CardListing::deserialize(serde_json::Value::Object(listing))
            .map_err(D::Error::custom)?;
        Ok((listing, rest))
    }
}

/// `POST /api/marketplace/cards`: a listing and the team behind it, in one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct NewCard {
    /// What is listed.
    #[serde(flatten)]
    pub listing: CardListing,
    /// Who owns it.
    #[serde(flatten)]
    pub owner: CardOwner,
}

impl<'de> Deserialize<'de> for NewCard {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (listing, owner) = CardListing::split_from(deserializer)?;
        Ok(NewCard { listing, owner })
    }
}

/// The part of [`NewCard`] that is the team's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardOwner {
    /// The team that owns it; the caller must be one of its owners.
    pub team: String,
    /// The wallet (`0x` and 40 hex digits) its payments settle to on chain; `None`: ledger only.
    #[serde(default)]
    pub owner_wallet: Option<String>,
    /// The key an `openai` judge's endpoint needs, sealed at rest and never returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `PATCH /api/marketplace/cards/{slug}`: reprice, unlist or relist.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateCard {
    /// The new price per evaluation; `None`: unchanged.
    #[serde(default)]
    pub price: Option<MicroUsdc>,
    /// List (`true`) or unlist (`false`) the card; `None`: unchanged.
    #[serde(default)]
    pub listed: Option<bool>,
}

/// A card paid (or, in evaluation mode, heard unpaid) in one Pay-to-Play round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaidCard {
    /// The card heard.
    pub slug: String,
    /// Its price at the time of the round.
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
    LlmFallback {
        /// Why the model's answer was refused.
        reason: String,
    },
    /// Evaluation mode: every runnable card, unpaid.
    Everyone,
    /// The run's human card: people ranked the answers before the deadline.
    Human,
    /// The run's human card gave no verdict (none in time, or it could not be asked); the bandit's
    /// panel judged instead.
    HumanFallback {
        /// Why the people's verdicts were not used.
        reason: String,
    },
}

/// One Pay-to-Play episode that was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundEvent {
    /// The run whose agent played the round.
    pub run: String,
    /// The episode's key (also the prefix of its payments' idempotency keys).
    pub episode: String,
    /// RFC 3339, UTC.
    pub at: String,
    /// The task as the agent saw it (the behaviors observed).
    pub task: String,
    /// The hidden need's category.
    pub category: crate::cats::CareCategory,
    /// How the panel was chosen.
    pub choice: PanelChoice,
    /// The panel: the cards that judged the answers.
    pub cards: Vec<PaidCard>,
    /// The round's total cost to the budget (0 in evaluation mode).
    pub paid: MicroUsdc,
    /// What the run's budget has left after this round.
    pub budget_left: MicroUsdc,
    /// Per answer: the panel's mean score, then the reward after the cost term.
    pub panel_scores: Vec<f64>,
    /// Per answer: the reward the trainer gets, the panel score less the cost term.
    pub rewards: Vec<f64>,
    /// The answers judged, in order (shortened for the feed).
    pub answers: Vec<String>,
    /// The version of the weights that wrote the answers, when the policy reports one: it rises
    /// as a trainer syncs new weights into the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_version: Option<i64>,
}

/// One Pay-to-Play episode skipped before anything was paid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedEvent {
    /// The run whose agent would have played.
    pub run: String,
    /// The episode's key.
    pub episode: String,
    /// RFC 3339, UTC.
    pub at: String,
    /// Why nothing was paid, e.g. the budget cannot afford the cheapest card.
    pub reason: String,
    /// What the run's budget has left.
    pub budget_left: MicroUsdc,
}

/// The marketplace's live feed (topic `marketplace`; `GET /api/marketplace/feed` for history).
/// Tagged `event`, not `kind`: inside [`crate::live::LiveEvent`] the `kind` key is taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum MarketEvent {
    /// A round was judged and paid.
    Round(Box<RoundEvent>),
    /// A round was skipped before paying.
    Skipped(SkippedEvent),
}

impl MarketEvent {
    /// The run the event belongs to.
    pub fn run(&self) -> &str {
        match self {
            MarketEvent::Round(round) => &round.run,
            MarketEvent::Skipped(skipped) => &skipped.run,
        }
    }

    /// When it happened: RFC 3339, UTC.
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
    /// When the transaction was recorded: RFC 3339, UTC.
    pub at: String,
    /// What the budget could still spend right after it.
    pub available: MicroUsdc,
}

/// An agent's budget for a run, as `GET /api/marketplace/budgets` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    /// The run the budget pays for.
    pub run: String,
    /// The ledger account (`budget/<run>/<agent>`).
    pub account: String,
    /// Everything credited to it: deposits and refunds.
    pub funded: MicroUsdc,
    /// Everything debited from it: payments to cards.
    pub spent: MicroUsdc,
    /// What it can still spend: balance less open holds.
    pub available: MicroUsdc,
    /// Oldest first.
    pub points: Vec<BudgetPoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARD: &str = r#"{"slug": "vet-2", "name": "Vet", "specialties": ["health"],
        "price": 5000, "judge": {"kind": "rubric", "lens": "Health"}, "team": "clinic",
        "owner_wallet": "0x00000000000000000000000000000000000000aa"}"#;

    #[test]
    fn a_new_card_reads_its_listing_and_its_owner_from_one_object() {
        let card: NewCard = serde_json::from_str(CARD).unwrap();
        assert_eq!(card.listing.slug, "vet-2");
        assert_eq!(card.listing.description, "");
        assert_eq!(card.listing.price, MicroUsdc(5000));
        assert_eq!(
            card.listing.judge,
            JudgeBackend::Rubric {
                lens: Some(crate::cats::CareCategory::Health)
            }
        );
        assert_eq!(card.owner.team, "clinic");
        assert_eq!(card.owner.api_key, None);
        let again: NewCard = serde_json::from_value(serde_json::to_value(&card).unwrap()).unwrap();
        assert_eq!(again.listing, card.listing);
        assert_eq!(again.owner.owner_wallet, card.owner.owner_wallet);
    }

    #[test]
    fn a_misspelt_key_on_either_side_is_refused() {
        for (right, wrong) in [
            ("\"specialties\"", "\"specialities\""),
            ("\"team\"", "\"teem\""),
        ] {
            let text = CARD.replace(right, wrong);
            let err = serde_json::from_str::<NewCard>(&text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(&wrong[1..wrong.len() - 1]), "{err}");
        }
    }
}
