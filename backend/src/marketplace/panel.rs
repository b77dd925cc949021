//! One Pay-to-Play judging round: choose a panel of cards under the budget left, pay each through
//! the ledger, have every card score every answer, and turn the panel's scores into rewards.
//!
//! Cards that need a model run only where one is given; the rubric cards always can. Each card's
//! usefulness (its agreement with the panel) is recorded with its evaluations, which is what the
//! bandit learns from on the next round.

use lachesis_shared::cats::CatScenario;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::JudgeBackend;
use sqlx::{PgPool, Row};

use super::selection::{CardArm, UcbPolicy};
use super::verdict::parse_judge_score;
use crate::envs::cat_caretaker::rubric::score_answer;
use crate::ledger::{AccountId, Ledger, LedgerError, Settlement, Transfer};

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
    /// The cards paid and heard, by slug.
    pub cards: Vec<String>,
    pub paid: MicroUsdc,
    /// The ledger transactions of the payments.
    pub payments: Vec<i64>,
    /// Per answer: the panel's mean score.
    pub panel_scores: Vec<f64>,
    /// Per answer: the panel score minus the cost term.
    pub rewards: Vec<f64>,
    /// Verdicts that could not be read (those judges were left out for that answer).
    pub unreadable: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum PanelError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("stored card does not parse: {0}")]
    BadCard(String),
    #[error("recording an evaluation: {0}")]
    Record(String),
}

struct Card {
    id: i64,
    slug: String,
    price: i64,
    account: AccountId,
    judge: JudgeBackend,
}

/// The listed cards that can judge here (rubric cards), with what the bandit knows of each.
async fn runnable_cards(db: &PgPool) -> Result<(Vec<Card>, Vec<CardArm>), PanelError> {
    let rows = sqlx::query(
        "SELECT c.id, c.slug, c.price, c.account_id, c.judge, count(e.id) AS pulls,
                coalesce(sum(1 - abs(e.score - e.consensus)), 0) AS value_sum
         FROM agent_cards c LEFT JOIN card_evaluations e ON e.card_id = c.id
         WHERE c.listed AND c.judge ->> 'kind' = 'rubric'
         GROUP BY c.id ORDER BY c.id",
    )
    .fetch_all(db)
    .await?;
    let mut cards = Vec::new();
    let mut arms = Vec::new();
    for row in rows {
        let judge: serde_json::Value = row.try_get("judge")?;
        let judge: JudgeBackend =
            serde_json::from_value(judge).map_err(|e| PanelError::BadCard(e.to_string()))?;
        let card = Card {
            id: row.try_get("id")?,
            slug: row.try_get("slug")?,
            price: row.try_get("price")?,
            account: AccountId(row.try_get("account_id")?),
            judge,
        };
        let pulls: i64 = row.try_get("pulls")?;
        arms.push(CardArm {
            slug: card.slug.clone(),
            price: card.price,
            pulls: u32::try_from(pulls).unwrap_or(u32::MAX),
            value_sum: row.try_get("value_sum")?,
        });
        cards.push(card);
    }
    Ok((cards, arms))
}

/// A rubric card's verdict text. A specialist reads needs of its own category closely; others it
/// only sorts roughly into bad, middling and good, pulled towards the middle.
fn rubric_verdict(judge: &JudgeBackend, answer: &str, scenario: &CatScenario) -> String {
    let mut verdict = score_answer(answer, scenario);
    if let JudgeBackend::Rubric { lens: Some(lens) } = judge
        && *lens != scenario.category
    {
        let rough = (verdict.score * 2.0).round() / 2.0;
        verdict.score = 0.5 + (rough - 0.5) * 0.5;
    }
    verdict.to_judge_text()
}

/// Runs one round for a group of answers to one cat task, paying from `budget`. `key` makes the
/// payments idempotent: running the same round again pays nothing twice.
pub async fn judge_round(
    ledger: &Ledger,
    budget: AccountId,
    key: &str,
    scenario: &CatScenario,
    answers: &[String],
    config: &PanelConfig,
) -> Result<RoundOutcome, PanelError> {
    let db = ledger.pool();
    let (cards, arms) = runnable_cards(db).await?;
    let available = ledger.balance(budget).await?.available;
    // A round run again under its key hears the panel it paid the first time.
    let paid_before: Vec<i64> = sqlx::query_scalar(
        "SELECT e.account_id FROM ledger_transactions t JOIN ledger_entries e ON e.tx_id = t.id
         WHERE left(t.idempotency_key, length($1) + 1) = $1 || '/' AND e.amount > 0",
    )
    .bind(key)
    .fetch_all(db)
    .await?;
    let chosen = if paid_before.is_empty() {
        UcbPolicy::default().select(&arms, config.panel, available.0)
    } else {
        (0..cards.len())
            .filter(|&i| paid_before.contains(&cards[i].account.0))
            .collect()
    };
    if chosen.is_empty() {
        let cheapest = cards.iter().map(|c| c.price).min();
        let reason = match cheapest {
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
    let mut payments = Vec::new();
    let mut paid = 0;
    let mut replayed = true;
    for index in chosen {
        let card = &cards[index];
        let payment_key = format!("{key}/{}", card.slug);
        let transfer = Transfer {
            key: &payment_key,
            payer: budget,
            payee: card.account,
            amount: MicroUsdc(card.price),
            memo: "judge card",
        };
        match ledger.pay(&transfer, &Settlement::Simulated).await {
            Ok(posted) => {
                replayed &= posted.replayed;
                payments.push(posted.tx_id);
                paid += card.price;
                panel.push((card, posted.tx_id));
            }
            Err(LedgerError::InsufficientFunds { .. }) => {}
            Err(other) => return Err(other.into()),
        }
    }
    if panel.is_empty() {
        return Ok(RoundOutcome::Skipped {
            reason: format!("budget spent while paying: {available} USDC was left"),
        });
    }
    // scores[card][answer], None where the verdict was unreadable.
    let mut unreadable = 0;
    let scores: Vec<Vec<Option<f64>>> = panel
        .iter()
        .map(|(card, _)| {
            answers
                .iter()
                .map(|answer| {
                    let text = rubric_verdict(&card.judge, answer, scenario);
                    let score = parse_judge_score(&text).ok();
                    unreadable += usize::from(score.is_none());
                    score
                })
                .collect()
        })
        .collect();
    let panel_scores: Vec<f64> = (0..answers.len())
        .map(|i| {
            let heard: Vec<f64> = scores.iter().filter_map(|by_card| by_card[i]).collect();
            if heard.is_empty() {
                0.0
            } else {
                heard.iter().sum::<f64>() / heard.len() as f64
            }
        })
        .collect();
    let cost_usdc = paid as f64 / MicroUsdc::PER_USDC as f64;
    let rewards = panel_scores
        .iter()
        .map(|score| score - config.cost_weight * cost_usdc)
        .collect();
    // The price of a card's round is spread over its evaluations, the remainder on the first. A
    // replayed round was recorded the first time.
    for ((card, payment), by_answer) in panel.iter().zip(&scores).filter(|_| !replayed) {
        let n = by_answer.iter().flatten().count().max(1) as i64;
        let mut first = true;
        for (score, consensus) in by_answer.iter().zip(&panel_scores) {
            let Some(score) = score else { continue };
            let share = card.price / n + if first { card.price % n } else { 0 };
            first = false;
            super::cards::record_evaluation(
                db,
                card.id,
                &config.run,
                *score,
                Some(*consensus),
                MicroUsdc(share),
                Some(*payment),
            )
            .await
            .map_err(|e| PanelError::Record(e.to_string()))?;
        }
    }
    Ok(RoundOutcome::Judged(PanelResult {
        cards: panel.iter().map(|(c, _)| c.slug.clone()).collect(),
        paid: MicroUsdc(paid),
        payments,
        panel_scores,
        rewards,
        unreadable,
    }))
}
