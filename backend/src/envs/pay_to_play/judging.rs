//! One episode's judging once its answers exist: pay the panel (or the people who ranked the
//! answers), hear it, record the evaluations, put the round on the feed and make the group. It
//! owns everything it needs, so it runs on a task of its own (see [`super::rounds`]) and finishes
//! whoever still waits for it.

use lachesis_inference::ChatMessage;
use lachesis_shared::cats::CatTask;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{MarketEvent, PanelChoice, RoundEvent, SkippedEvent};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::{Marketplace, other, prompts};
use crate::envs::{Collected, EnvError, ScoredGroup, ScoredSequence};
use crate::ledger::AccountId;
use crate::marketplace::feed;
use crate::marketplace::human::{HumanOutcome, HumanRules, hear_people};
use crate::marketplace::panel::{
    Market, PanelConfig, PanelResult, Round, RoundOutcome, judge_round,
};
use crate::policy::Rollout;

/// How much of each answer the feed keeps.
const FEED_ANSWER_CHARS: usize = 280;

/// One episode's judging, with everything it needs.
pub(super) struct Judging {
    pub market: Marketplace,
    pub panel: PanelConfig,
    /// The episode's key: its payments' keys start with it, and the feed holds it once.
    pub key: String,
    pub budget: AccountId,
    /// What the budget had when the episode began (the answers' prompt shows it).
    pub available: MicroUsdc,
    pub task: CatTask,
    pub rollouts: Vec<Rollout>,
    /// The group's generation parameters, as the trainer is told them.
    pub params: Map<String, Value>,
    /// The policy's weights when the answers were written.
    pub weight_version: Option<i64>,
}

impl Judging {
    fn answers(&self) -> Vec<String> {
        self.rollouts.iter().map(|r| r.completion.clone()).collect()
    }

    /// The round as the marketplace pays and hears it.
    fn round<'a>(&'a self, answers: &'a [String]) -> Round<'a> {
        Round {
            key: &self.key,
            budget: self.budget,
            task: &self.task,
            answers,
        }
    }

    /// People rank the answers under the human card `slug`; the bandit's panel judges a group
    /// nobody ranked in time. A round asked to close pays the verdicts already given and, with
    /// none, is skipped: a stopping run pays no panel anew.
    pub async fn people(
        self,
        slug: String,
        rules: HumanRules,
        closing: watch::Receiver<bool>,
    ) -> Result<Collected, EnvError> {
        let answers = self.answers();
        let round = self.round(&answers);
        let prompt = prompts::task_text(&self.task);
        let market = &self.market;
        let heard = hear_people(
            &market.ledger,
            &market.settler,
            &slug,
            &round,
            &prompt,
            rules,
            &self.panel,
            closing.clone(),
        )
        .await
        .map_err(other)?;
        let reason = match heard {
            HumanOutcome::Judged(result) => return self.publish(result).await,
            HumanOutcome::NoVerdict(reason) => reason,
        };
        if *closing.borrow() {
            return self
                .skip(format!("the run stopped before people ranked it: {reason}"))
                .await;
        }
        let (cards, replayed) = market.payable(&self.key).await?;
        let chosen = if replayed.is_empty() {
            cards.bandit_pick(self.panel.panel, self.available.0)
        } else {
            replayed
        };
        self.panel(cards, chosen, PanelChoice::HumanFallback { reason })
            .await
    }

    /// Pays the `chosen` cards of `market` and hears them.
    pub async fn panel(
        self,
        market: Market,
        chosen: Vec<usize>,
        choice: PanelChoice,
    ) -> Result<Collected, EnvError> {
        let answers = self.answers();
        let round = self.round(&answers);
        let outcome = judge_round(
            &self.market.ledger,
            &self.market.settler,
            &self.market.judges,
            &market,
            &round,
            chosen,
            choice,
            &self.panel,
        )
        .await
        .map_err(other)?;
        match outcome {
            RoundOutcome::Skipped { reason } => self.skip(reason).await,
            RoundOutcome::Judged(result) => self.publish(result).await,
        }
    }

    /// Puts the skip and its reason on the feed; no group.
    async fn skip(self, reason: String) -> Result<Collected, EnvError> {
        let ledger = &self.market.ledger;
        let db = ledger.pool();
        let budget_left = ledger.balance(self.budget).await.map_err(other)?.available;
        let event = MarketEvent::Skipped(SkippedEvent {
            run: self.panel.run.clone(),
            episode: self.key,
            at: feed::now(db).await.map_err(other)?,
            reason,
            budget_left,
        });
        feed::record(db, &event).await.map_err(other)?;
        Ok(Collected::default())
    }

    /// Puts a judged round on the feed and makes its group.
    async fn publish(self, result: PanelResult) -> Result<Collected, EnvError> {
        let ledger = &self.market.ledger;
        let db = ledger.pool();
        let budget_left = ledger.balance(self.budget).await.map_err(other)?.available;
        let event = MarketEvent::Round(Box::new(RoundEvent {
            run: self.panel.run.clone(),
            episode: self.key.clone(),
            at: feed::now(db).await.map_err(other)?,
            task: prompts::task_text(&self.task),
            category: self.task.scenario.category,
            choice: result.choice.clone(),
            cards: result.cards.clone(),
            paid: result.paid,
            budget_left,
            panel_scores: result.panel_scores.clone(),
            rewards: result.rewards.clone(),
            answers: self
                .rollouts
                .iter()
                .map(|r| r.completion.chars().take(FEED_ANSWER_CHARS).collect())
                .collect(),
            weight_version: self.weight_version,
        }));
        feed::record(db, &event).await.map_err(other)?;
        Ok(Collected {
            group: Some(self.group(&result)),
            backlog: Vec::new(),
        })
    }

    fn group(self, result: &PanelResult) -> ScoredGroup {
        let prompt: Vec<ChatMessage> = prompts::answer_messages(&self.task, self.available);
        let panel = result.slugs().join(", ");
        let sequences = self
            .rollouts
            .into_iter()
            .zip(&result.rewards)
            .zip(&result.panel_scores)
            .map(|((rollout, &reward), &score)| {
                let mut sequence = ScoredSequence::answered(&prompt, rollout, reward);
                let heard = format!(
                    "Judges ({panel}, {} USDC): panel score {score:.3}",
                    result.paid
                );
                sequence.messages.push(ChatMessage::new("user", heard));
                sequence
            })
            .collect();
        ScoredGroup {
            sequences,
            generation_params: self.params,
            group_overrides: None,
        }
    }
}
