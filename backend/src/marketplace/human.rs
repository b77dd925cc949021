//! A human judge card's round: the group's answers go to the card's rank queue as one item,
//! people rank them until the round's deadline (or until the queue's overlap is reached), the item
//! closes, and each verdict is paid the card's price from the run's budget into its annotator's
//! account, through the settler. An answer's score is its mean place: 1 for first, 0 for last.
//!
//! A verdict is only counted once it is paid, and an item closes before its verdicts are read, so
//! every verdict a round used was paid and no verdict arrives after the round that would not be.
//! A round replayed after its process died first closes and pays what the dead attempt left in
//! the queue, so nobody ranks for nothing.

use std::time::Duration;

use lachesis_shared::feedback::{FeedbackKind, Judgement, NewItem};
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{JudgeBackend, PaidCard, PanelChoice};
use tokio::sync::watch;
use tokio::time::Instant;

use super::cards::store::{Evaluation, listed_card};
use super::panel::{Card, PanelConfig, PanelError, PanelResult, Round};
use crate::feedback::store::{
    self as queue_store, ClosedJudgement, PayTerms, QueueScope, RoundTerms,
};
use crate::ledger::{AccountId, Ledger, LedgerError, Transfer};
use crate::settlement::{Paid, SettleError, Settler};

/// How often a waiting round looks for new verdicts.
const POLL: Duration = Duration::from_millis(500);
/// The longest prompt or answer a queue item holds, in characters (as the queue's own route).
const ITEM_TEXT_CHARS: usize = 20_000;

/// How a human round is run.
#[derive(Debug, Clone, Copy)]
pub struct HumanRules {
    /// How long people have to rank a group.
    pub deadline: Duration,
    /// Items a queue may hold (the server's `--feedback-queue-items`).
    pub queue_items: i64,
}

/// What a human round came to.
#[derive(Debug, Clone, PartialEq)]
pub enum HumanOutcome {
    /// People ranked the answers; their verdicts were paid.
    Judged(PanelResult),
    /// No verdict can be or was used; the reason says why, and a fallback judges.
    NoVerdict(String),
}

/// The listed card `slug` when it is a human card, with its queue's id.
async fn human_card(ledger: &Ledger, slug: &str) -> Result<Option<(Card, i64)>, PanelError> {
    let Some(row) = listed_card(ledger.pool(), slug).await? else {
        return Ok(None);
    };
    let card = Card::listed(row, None)?;
    Ok(match card.judge {
        JudgeBackend::Human { queue } => Some((card, queue)),
        _ => None,
    })
}

/// Asks people to rank `round.answers` under the human card `slug`, within `rules`; once
/// `closing` turns `true` the item closes early and the verdicts given by then are used.
#[allow(clippy::too_many_arguments)]
pub async fn hear_people(
    ledger: &Ledger,
    settler: &Settler,
    slug: &str,
    round: &Round<'_>,
    prompt: &str,
    rules: HumanRules,
    config: &PanelConfig,
    mut closing: watch::Receiver<bool>,
) -> Result<HumanOutcome, PanelError> {
    let no_verdict = |reason: String| Ok(HumanOutcome::NoVerdict(reason));
    let db = ledger.pool();
    let Some((card, queue_id)) = human_card(ledger, slug).await? else {
        return no_verdict(format!("no listed human card {slug:?}"));
    };
    if settler.on_chain() {
        return no_verdict("on chain, annotators have no wallet to be paid at".into());
    }
    let queue = queue_store::queues(db, Some(queue_id), QueueScope::All)
        .await
        .map_err(|e| PanelError::Record(e.to_string()))?
        .pop();
    let Some(queue) = queue.filter(|q| q.team_id == card.owner_team) else {
        return no_verdict(format!("the card's queue {queue_id} is gone"));
    };
    if queue.view.kind != FeedbackKind::Rank {
        return no_verdict(format!("queue {queue_id} does not rank answers"));
    }
    let source = clip_to(&format!("{} {}", config.run, round.key), 200);
    let pay = pay_terms(&card, round);
    settle_earlier_items(ledger, settler, &pay, queue_id, &source).await?;
    if *closing.borrow() {
        return no_verdict("the run is stopping".into());
    }
    let answers = round.answers.len();
    if !(2..=16).contains(&answers) {
        return no_verdict(format!("a group of {answers} answers cannot be ranked"));
    }
    // Every verdict the overlap asks for must be payable before anyone is asked.
    let overlap = i64::from(queue.view.overlap);
    let available = ledger.balance(round.budget).await?.available;
    if available.0 < card.price.saturating_mul(overlap) {
        return no_verdict(format!(
            "the budget ({available} USDC) cannot pay {overlap} verdicts at {} USDC",
            MicroUsdc(card.price)
        ));
    }
    if pay.pay_key.chars().count() > queue_store::PAY_KEY_CHARS {
        return no_verdict("the round's key is too long to pay verdicts under".into());
    }
    let item = NewItem {
        prompt: clip(prompt),
        answers: round.answers.iter().map(|a| clip(a)).collect(),
        source: Some(source),
    };
    // The item takes verdicts until the round's deadline, and carries what each is owed, even if
    // this process dies waiting: the server then settles it (see `abandoned`).
    let terms = RoundTerms {
        closes_in: rules.deadline,
        pay: &pay,
    };
    let Some(ids) =
        queue_store::insert_items(db, queue_id, &[item], rules.queue_items, Some(&terms)).await?
    else {
        return no_verdict(format!("queue {queue_id} is full"));
    };
    let item = ids[0];

    let until = Instant::now() + rules.deadline;
    loop {
        let judged = queue_store::judged_count(db, item).await?.unwrap_or(0);
        if i64::from(judged) >= overlap || Instant::now() >= until {
            break;
        }
        let pause = POLL.min(until.saturating_duration_since(Instant::now()));
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            // Closing (or a dropped sender): the verdicts given so far are all there will be.
            _ = closing.wait_for(|close| *close) => break,
        }
    }
    let verdicts = queue_store::close_item(db, item)
        .await
        .map_err(|e| PanelError::Record(e.to_string()))?;

    let mut places = vec![0.0; answers];
    let mut paid = Vec::new();
    for verdict in verdicts {
        let Judgement::Rank { order } = &verdict.judgement else {
            continue;
        };
        if order.len() != answers {
            continue;
        }
        match pay_verdict(ledger, settler, &pay, &verdict).await {
            Ok(payment) => paid.push(PaidCard {
                slug: card.slug.clone(),
                price: MicroUsdc(card.price),
                tx_id: Some(payment.tx_id),
                chain_tx: payment.chain_tx,
                explorer_url: payment.explorer_url,
            }),
            // Another round spent the budget meanwhile: an unpaid verdict is not used.
            Err(e) if e.is_insufficient_funds() => {
                tracing::warn!(item, verdict = verdict.id, "a verdict could not be paid");
                continue;
            }
            Err(other) => return Err(other.into()),
        }
        for (place, &answer) in order.iter().enumerate() {
            places[answer] += 1.0 - place as f64 / (answers - 1) as f64;
        }
    }
    queue_store::mark_settled(db, item).await?;
    if paid.is_empty() {
        return no_verdict(format!(
            "no verdict within {} s",
            rules.deadline.as_secs_f64()
        ));
    }
    let panel_scores: Vec<f64> = places.iter().map(|p| p / paid.len() as f64).collect();
    let total: i64 = paid.iter().map(|c| c.price.0).sum();
    let cost_usdc = total as f64 / MicroUsdc::PER_USDC as f64;
    // The card's statistics count one evaluation per answer, its price spread over them.
    for (i, score) in panel_scores.iter().enumerate() {
        let evaluation = Evaluation {
            card_id: card.id(),
            run: &config.run,
            score: Some(*score),
            consensus: None,
            price: Evaluation::price_share(total, answers, i),
            paid_tx: paid[0].tx_id,
            answer: i as i32,
        };
        super::cards::record_evaluation(db, &evaluation)
            .await
            .map_err(|e| PanelError::Record(e.to_string()))?;
    }
    Ok(HumanOutcome::Judged(PanelResult {
        cards: paid,
        choice: PanelChoice::Human,
        paid: MicroUsdc(total),
        rewards: panel_scores
            .iter()
            .map(|score| score - config.cost_weight * cost_usdc)
            .collect(),
        panel_scores,
        unreadable: 0,
    }))
}

/// What `round` owes for each verdict under `card`: the card's price from the round's budget,
/// under a key naming the round and the card.
fn pay_terms(card: &Card, round: &Round<'_>) -> PayTerms {
    PayTerms {
        pay_from: round.budget.0,
        pay_each: card.price,
        pay_key: format!("{}/{}", round.key, card.slug),
    }
}

/// Pays `verdict` on `terms` into its annotator's account, once per verdict whoever asks.
async fn pay_verdict(
    ledger: &Ledger,
    settler: &Settler,
    terms: &PayTerms,
    verdict: &ClosedJudgement,
) -> Result<Paid, SettleError> {
    let key = format!("{}/verdict/{}", terms.pay_key, verdict.id);
    let transfer = Transfer {
        key: &key,
        payer: AccountId(terms.pay_from),
        payee: ledger.annotator_account(verdict.annotator).await?,
        amount: MicroUsdc(terms.pay_each),
        memo: "human verdict",
    };
    settler.pay(ledger, &transfer).await
}

/// Closes `item` and pays on `terms` every rank verdict on it that is not paid yet, then marks it
/// settled. A verdict the payer cannot afford stays unpaid (and is logged): nobody will try again,
/// as its round would not have.
pub(super) async fn settle_item(
    ledger: &Ledger,
    settler: &Settler,
    terms: &PayTerms,
    item: i64,
) -> Result<(), PanelError> {
    let db = ledger.pool();
    let verdicts = queue_store::close_item(db, item)
        .await
        .map_err(|e| PanelError::Record(e.to_string()))?;
    for verdict in verdicts {
        if !matches!(verdict.judgement, Judgement::Rank { .. }) {
            continue;
        }
        match pay_verdict(ledger, settler, terms, &verdict).await {
            Ok(_) => {}
            // Paid already, at the price the card had then.
            Err(SettleError::Ledger(LedgerError::IdempotencyConflict(_))) => {}
            Err(e) if e.is_insufficient_funds() => {
                tracing::warn!(item, verdict = verdict.id, "a verdict is left unpaid");
            }
            Err(other) => return Err(other.into()),
        }
    }
    queue_store::mark_settled(db, item).await?;
    Ok(())
}

/// An earlier attempt at this round, in a process that died (a crash, `kill -9`), left its item
/// behind: still open, where people would go on ranking it for nothing, or closed with verdicts
/// it never paid. Each such item nobody settled yet (an earlier replay, the server's sweep) is
/// settled under the keys that attempt used, so a verdict it paid is not paid again. The verdicts
/// are not used: they rank answers this attempt does not have (its answers are sampled again).
async fn settle_earlier_items(
    ledger: &Ledger,
    settler: &Settler,
    pay: &PayTerms,
    queue: i64,
    source: &str,
) -> Result<(), PanelError> {
    for item in queue_store::unsettled_items_from(ledger.pool(), queue, source)
        .await
        .map_err(|e| PanelError::Record(e.to_string()))?
    {
        settle_item(ledger, settler, pay, item).await?;
    }
    Ok(())
}

fn clip(text: &str) -> String {
    clip_to(text, ITEM_TEXT_CHARS)
}

fn clip_to(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}
