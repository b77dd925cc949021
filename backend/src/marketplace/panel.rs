//! One Pay-to-Play judging round: the panel chosen for an episode is paid through the settler,
//! every card scores every answer, and the panel's scores become rewards.
//!
//! Cards that need a model run only where one is given; the rubric cards always can. Each card's
//! usefulness (its agreement with the panel) is recorded with its evaluations, which is what the
//! bandit learns from on the next round. Evaluation mode hears every runnable card, unpaid.

use std::collections::HashMap;

use lachesis_shared::cats::CatTask;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{JudgeBackend, PaidCard, PanelChoice};
use sqlx::PgPool;

use super::cards::store::{Evaluation, ListedCard};
use super::judges::Judges;
use super::probation::{Standing, TeamCardRecord};
use super::selection::{CardArm, UcbPolicy};
use crate::envs::cat_caretaker::verdict::parse_judge_score;
use crate::ledger::queries::{AccountWallet, account_wallets, paid_under_key};
use crate::ledger::{AccountId, Ledger, LedgerError, Transfer};
use crate::settlement::{SettleError, Settler};

/// How a round is run.
#[derive(Debug, Clone)]
pub struct PanelConfig {
    /// The run the evaluations are counted under.
    pub run: String,
    /// Cards per panel (at most).
    pub panel: usize,
    /// Reward lost per USDC the panel cost (λ); 0 leaves cost out of the reward.
    pub cost_weight: f64,
}

/// What a round came to.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundOutcome {
    /// Nothing was paid: the reason is shown on the dashboard.
    Skipped {
        reason: String,
    },
    Judged(PanelResult),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PanelResult {
    /// The cards heard, in panel order.
    pub cards: Vec<PaidCard>,
    pub choice: PanelChoice,
    pub paid: MicroUsdc,
    /// Per answer: the panel's mean score.
    pub panel_scores: Vec<f64>,
    /// Per answer: the panel score minus the cost term.
    pub rewards: Vec<f64>,
    /// Verdicts that could not be read (those judges were left out for that answer).
    pub unreadable: usize,
}

impl PanelResult {
    /// The cards heard, each once (a human card is paid once per verdict).
    pub fn slugs(&self) -> Vec<String> {
        let mut slugs: Vec<String> = self.cards.iter().map(|c| c.slug.clone()).collect();
        slugs.dedup();
        slugs
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PanelError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Settle(#[from] SettleError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("stored card does not parse: {0}")]
    BadCard(String),
    #[error("recording an evaluation: {0}")]
    Record(String),
}

/// A listed card as a round needs it.
#[derive(Debug, Clone)]
pub struct Card {
    id: i64,
    pub slug: String,
    pub name: String,
    pub specialties: Vec<String>,
    pub price: i64,
    account: AccountId,
    /// Where the card's owner is paid on chain.
    pub wallet: Option<String>,
    pub judge: JudgeBackend,
    /// The owning team (`None`: the platform's card).
    pub owner_team: Option<i64>,
    /// The team's endpoint key, sealed (see [`super::sealed`]).
    pub sealed_key: Option<Vec<u8>>,
}

impl Card {
    /// A listed card's row as a round uses it; `wallet`: its owner account's.
    pub(super) fn listed(row: ListedCard, wallet: Option<String>) -> Result<Card, PanelError> {
        let judge: JudgeBackend =
            serde_json::from_value(row.judge).map_err(|e| PanelError::BadCard(e.to_string()))?;
        Ok(Card {
            id: row.id,
            slug: row.slug,
            name: row.name,
            specialties: row.specialties,
            price: row.price,
            account: AccountId(row.account_id),
            wallet,
            judge,
            owner_team: row.owner_team,
            sealed_key: row.judge_key,
        })
    }

    /// Its id among the cards.
    pub(super) fn id(&self) -> i64 {
        self.id
    }
}

/// The cards that can judge here and what the bandit knows of each, index for index.
#[derive(Debug, Clone)]
pub struct Market {
    pub cards: Vec<Card>,
    pub arms: Vec<CardArm>,
}

impl Market {
    /// The listed cards that can judge here and may be chosen: teams' cards only as their
    /// probation allows (at most one untried team card per round, the longest listed first), and
    /// none of them for the platform's showcase.
    pub async fn load(db: &PgPool, judges: &Judges) -> Result<Market, PanelError> {
        let rows = super::cards::store::listed_cards(db).await?;
        // Each card's owner account (the ledger's) holds the wallet a chain settler pays.
        let accounts: Vec<AccountId> = rows.iter().map(|row| AccountId(row.account_id)).collect();
        let wallets: HashMap<AccountId, AccountWallet> = account_wallets(db, &accounts)
            .await?
            .into_iter()
            .map(|account| (account.id, account))
            .collect();
        let mut market = Market {
            cards: Vec::new(),
            arms: Vec::new(),
        };
        let mut untried_team_card = false;
        for row in rows {
            let account = AccountId(row.account_id);
            // A card whose account is gone is not listed (the foreign key keeps this from
            // happening).
            let Some(owner) = wallets.get(&account) else {
                continue;
            };
            let (pulls, value_sum) = (row.pulls, row.value_sum);
            let record = TeamCardRecord {
                price: row.price,
                evaluations: pulls,
                unreadable: row.unreadable,
                agreement: row.agreement,
            };
            let card = Card::listed(row, owner.wallet.clone())?;
            if !judges.can_run(&card.judge, card.sealed_key.is_some()) {
                continue;
            }
            if card.owner_team.is_some() {
                if judges.platform_only {
                    continue;
                }
                match judges.probation.standing(&record) {
                    Standing::Admitted => {}
                    Standing::Untried if !untried_team_card => untried_team_card = true,
                    Standing::Untried | Standing::Excluded => continue,
                }
            }
            market.arms.push(CardArm {
                slug: card.slug.clone(),
                price: card.price,
                pulls: u32::try_from(pulls).unwrap_or(u32::MAX),
                value_sum,
            });
            market.cards.push(card);
        }
        Ok(market)
    }

    /// Only the cards this settler can pay: on chain, those whose owner has a wallet.
    pub fn payable_by(self, settler: &Settler) -> Market {
        if !settler.on_chain() {
            return self;
        }
        let (cards, arms) = self
            .cards
            .into_iter()
            .zip(self.arms)
            .filter(|(card, _)| card.wallet.is_some())
            .unzip();
        Market { cards, arms }
    }

    pub fn cheapest(&self) -> Option<i64> {
        self.cards.iter().map(|c| c.price).min()
    }

    /// The bandit's panel for what the budget has left.
    pub fn bandit_pick(&self, panel: usize, available: i64) -> Vec<usize> {
        UcbPolicy::default().select(&self.arms, panel, available)
    }

    /// The cards a round paid under `key` before (a replay hears the same panel), in card order.
    pub async fn paid_before(&self, db: &PgPool, key: &str) -> Result<Vec<usize>, PanelError> {
        let accounts = paid_under_key(db, key).await?;
        Ok((0..self.cards.len())
            .filter(|&i| accounts.contains(&self.cards[i].account))
            .collect())
    }
}

/// One episode's round: whose budget pays, under which key, for which answers to which task.
pub struct Round<'a> {
    pub key: &'a str,
    pub budget: AccountId,
    pub task: &'a CatTask,
    pub answers: &'a [String],
}

/// Pays the chosen panel and hears it. `key` makes the payments idempotent: running the same
/// round again pays nothing twice and records nothing twice.
#[allow(clippy::too_many_arguments)]
pub async fn judge_round(
    ledger: &Ledger,
    settler: &Settler,
    judges: &Judges,
    market: &Market,
    round: &Round<'_>,
    chosen: Vec<usize>,
    choice: PanelChoice,
    config: &PanelConfig,
) -> Result<RoundOutcome, PanelError> {
    let available = ledger.balance(round.budget).await?.available;
    if chosen.is_empty() {
        let reason = match market.cheapest() {
            Some(price) => format!(
                "budget spent: {available} USDC left, the cheapest card costs {}",
                MicroUsdc(price)
            ),
            None => "no listed card can judge here".to_string(),
        };
        return Ok(RoundOutcome::Skipped { reason });
    }
    // Pay first: a card that cannot be paid (another round spent the money meanwhile) is dropped.
    let mut panel = Vec::new();
    for index in chosen {
        let card = &market.cards[index];
        let payment_key = format!("{}/{}", round.key, card.slug);
        let transfer = Transfer {
            key: &payment_key,
            payer: round.budget,
            payee: card.account,
            amount: MicroUsdc(card.price),
            memo: "judge card",
        };
        match settler.pay(ledger, &transfer).await {
            Ok(paid) => {
                panel.push((
                    card,
                    PaidCard {
                        slug: card.slug.clone(),
                        price: MicroUsdc(card.price),
                        tx_id: Some(paid.tx_id),
                        chain_tx: paid.chain_tx,
                        explorer_url: paid.explorer_url,
                    },
                ));
            }
            Err(e) if e.is_insufficient_funds() => {}
            Err(other) => return Err(other.into()),
        }
    }
    if panel.is_empty() {
        return Ok(RoundOutcome::Skipped {
            reason: format!("budget spent while paying: {available} USDC was left"),
        });
    }
    let cards: Vec<&Card> = panel.iter().map(|(card, _)| *card).collect();
    let heard = hear(judges, &cards, round.task, round.answers).await;
    let paid: i64 = cards.iter().map(|c| c.price).sum();
    let cost_usdc = paid as f64 / MicroUsdc::PER_USDC as f64;
    let rewards = heard
        .panel_scores
        .iter()
        .map(|score| score - config.cost_weight * cost_usdc)
        .collect();
    // A replayed round whose first attempt recorded records nothing again; one cut off between
    // paying and recording records now.
    for (i, (card, payment)) in panel.iter().enumerate() {
        record(ledger.pool(), card, payment.tx_id, &heard, i, &config.run).await?;
    }
    Ok(RoundOutcome::Judged(PanelResult {
        cards: panel.into_iter().map(|(_, paid)| paid).collect(),
        choice,
        paid: MicroUsdc(paid),
        panel_scores: heard.panel_scores,
        rewards,
        unreadable: heard.unreadable,
    }))
}

/// Evaluation mode: every runnable card scores every answer, nothing is paid or recorded.
pub async fn evaluate_all(
    judges: &Judges,
    market: &Market,
    task: &CatTask,
    answers: &[String],
) -> PanelResult {
    let cards: Vec<&Card> = market.cards.iter().collect();
    let heard = hear(judges, &cards, task, answers).await;
    PanelResult {
        cards: cards
            .iter()
            .map(|c| PaidCard {
                slug: c.slug.clone(),
                price: MicroUsdc(c.price),
                tx_id: None,
                chain_tx: None,
                explorer_url: None,
            })
            .collect(),
        choice: PanelChoice::Everyone,
        paid: MicroUsdc(0),
        rewards: heard.panel_scores.clone(),
        panel_scores: heard.panel_scores,
        unreadable: heard.unreadable,
    }
}

/// What a panel said: `scores[card][answer]` (None where unreadable) and the per-answer means.
struct Heard {
    scores: Vec<Vec<Option<f64>>>,
    panel_scores: Vec<f64>,
    unreadable: usize,
}

async fn hear(judges: &Judges, cards: &[&Card], task: &CatTask, answers: &[String]) -> Heard {
    let mut unreadable = 0;
    let mut scores = Vec::with_capacity(cards.len());
    for card in cards {
        let mut by_answer = Vec::with_capacity(answers.len());
        for answer in answers {
            let score = match judges.card_verdict(card, task, answer).await {
                Ok(text) => parse_judge_score(&text).ok(),
                Err(e) => {
                    tracing::warn!(card = %card.slug, error = %e, "judge gave no verdict");
                    None
                }
            };
            unreadable += usize::from(score.is_none());
            by_answer.push(score);
        }
        scores.push(by_answer);
    }
    let panel_scores = (0..answers.len())
        .map(|i| {
            let heard: Vec<f64> = scores.iter().filter_map(|by_card| by_card[i]).collect();
            if heard.is_empty() {
                0.0
            } else {
                heard.iter().sum::<f64>() / heard.len() as f64
            }
        })
        .collect();
    Heard {
        scores,
        panel_scores,
        unreadable,
    }
}

/// Records card `index`'s evaluations, one per answer. The price of its round is spread over them,
/// the remainder on the first, so a card's evaluations add up to what it was paid.
async fn record(
    db: &PgPool,
    card: &Card,
    payment: Option<i64>,
    heard: &Heard,
    index: usize,
    run: &str,
) -> Result<(), PanelError> {
    let by_answer = &heard.scores[index];
    // Unreadable verdicts are recorded too (without a score): they were paid for, and the bandit
    // must see them as worth nothing.
    for (i, (score, consensus)) in by_answer.iter().zip(&heard.panel_scores).enumerate() {
        let evaluation = Evaluation {
            card_id: card.id,
            run,
            score: *score,
            consensus: Some(*consensus),
            price: Evaluation::price_share(card.price, by_answer.len(), i),
            paid_tx: payment,
            answer: i as i32,
        };
        super::cards::record_evaluation(db, &evaluation)
            .await
            .map_err(|e| PanelError::Record(e.to_string()))?;
    }
    Ok(())
}
