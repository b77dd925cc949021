//! `pay_to_play`: each episode the agent sees a cat task and its budget, a panel of judge cards is
//! chosen (by the cost-aware bandit over the cards' history, or by the model itself in strict JSON
//! with the bandit as fallback), paid through the ledger, and every card scores each of the
//! group's answers. The reward is the panel's mean score minus λ per USDC spent. A spent budget
//! skips the episode with its reason on the marketplace feed; evaluation hears every card unpaid.
//! Once the answers exist, the round runs to its end on a task of its own ([`rounds`]), whoever
//! stops waiting for it.
//!
//! The cost term lowers a group's rewards alike (one panel judges all its answers), so GRPO's
//! advantages do not see it: it matters to trainers that read absolute rewards, and to whoever
//! compares runs by reward net of spend.

pub mod bench;
mod judging;
pub mod prompts;
mod rounds;
mod settings;

pub use self::settings::{Selection, Settings};
use super::in_process::Hosted;
use super::registry::{EnvDescriptor, ServerNeeds};
use lachesis_shared::live::Topic;

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_shared::marketplace::PanelChoice;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use self::judging::Judging;
use self::rounds::Rounds;
use super::cat_caretaker::data::CatData;
use super::in_process::{SHOWCASE_PAUSE, Showcase};
use super::{
    Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item, SeedItem,
    generation_params, parse_settings, some_item,
};
use crate::ledger::{AccountId, Ledger};
use crate::marketplace::feed::budget_account;
use crate::marketplace::human::HumanRules;
use crate::marketplace::judges::Judges;
use crate::marketplace::panel::{Market, PanelConfig, evaluate_all};
use crate::marketplace::selection::parse_llm_selection;
use crate::policy::{Policy, PolicyRequest};
use crate::settlement::Settler;

pub const NAME: &str = "pay_to_play";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "The cat caretaker judged by a panel of paid agent cards: the agent picks \
                  judges under a USDC budget, pays them through the ledger and is scored by \
                  their consensus.",
    needs: ServerNeeds::Ledger,
    build: None,
    // Pays through the server's ledger and settler; its showcase keeps episodes coming while
    // no trainer is attached, so the marketplace page shows a run from the start.
    hosted: Some(|o, parts| {
        let env = PayToPlayEnv::new(o, parts.marketplace())?;
        Ok(Hosted::showcased(env, Topic::Marketplace))
    }),
};

const EVAL_SEED: u64 = 0x9a7_0000;
/// After a skipped episode the environment waits this long before the next, so a spent budget
/// does not spin the runner. The caller waits, not the round: a stopping runner's drain is not
/// held up by it.
const SKIP_PAUSE: Duration = Duration::from_secs(5);

/// What the environment pays and judges with.
#[derive(Clone)]
pub struct Marketplace {
    pub ledger: Ledger,
    pub settler: Settler,
    pub judges: Judges,
    /// Items a feedback queue may hold on this server: a human card's groups are added under it.
    pub queue_items: i64,
}

impl Marketplace {
    /// The listed cards this server's settler can pay, with those an earlier attempt at episode
    /// `key` paid already: a replay hears them again and pays them nothing.
    async fn payable(&self, key: &str) -> Result<(Market, Vec<usize>), EnvError> {
        let db = self.ledger.pool();
        let market = Market::load(db, &self.judges)
            .await
            .map_err(other)?
            .payable_by(&self.settler);
        let paid = market.paid_before(db, key).await.map_err(other)?;
        Ok((market, paid))
    }
}

pub struct PayToPlayEnv {
    config: EnvConfig,
    settings: Settings,
    budget: MicroUsdc,
    market: Marketplace,
    data: &'static CatData,
    rng: Mutex<StdRng>,
    account: tokio::sync::OnceCell<AccountId>,
    /// Rounds paying and judging now, which finish even when their caller stops waiting.
    rounds: Rounds,
}

impl PayToPlayEnv {
    pub fn new(options: &EnvOptions, market: Marketplace) -> Result<Self, EnvError> {
        let settings: Settings = parse_settings(NAME, options)?;
        let budget = settings.check()?;
        let (config, data) = crate::envs::cat_caretaker::env::caretaker_basics(options)?;
        Ok(Self {
            config,
            settings,
            budget,
            market,
            data,
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            account: tokio::sync::OnceCell::new(),
            rounds: Rounds::default(),
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The run's budget account, created and funded once (the funding's key makes it so).
    async fn budget_account(&self) -> Result<AccountId, EnvError> {
        self.account
            .get_or_try_init(|| async {
                let ledger = &self.market.ledger;
                let name = budget_account(&self.settings.run);
                // On chain the budget pays from the agent's wallet.
                let wallet = self
                    .settings
                    .agent_wallet
                    .clone()
                    .or_else(|| self.market.settler.default_payer_wallet());
                if self.market.settler.on_chain() && wallet.is_none() {
                    return Err(EnvError::InvalidOption(
                        "on chain, name the agent's wallet (settings.agent_wallet) or give the \
                         server exactly one agent key"
                            .into(),
                    ));
                }
                let account = ledger
                    .account(&name, AccountKind::Budget, None, wallet.as_deref())
                    .await
                    .map_err(other)?;
                ledger
                    .fund(&format!("fund/{}", self.settings.run), account, self.budget)
                    .await
                    .map_err(other)?;
                Ok(account)
            })
            .await
            .copied()
    }

    /// The panel for this episode and how it was chosen.
    async fn choose(
        &self,
        task: &lachesis_shared::cats::CatTask,
        market: &Market,
        available: MicroUsdc,
        policy: &dyn Policy,
    ) -> (Vec<usize>, PanelChoice) {
        let bandit = || market.bandit_pick(self.settings.panel, available.0);
        if self.settings.selection == Selection::Bandit {
            return (bandit(), PanelChoice::Bandit);
        }
        let request = PolicyRequest {
            tools: Vec::new(),
            messages: prompts::selection_messages(task, market, self.settings.panel, available),
            n: 1,
            max_tokens: 96,
            temperature: 0.3,
            top_p: 1.0,
            stop: Vec::new(),
        };
        let answer = match policy.complete(request).await {
            Ok(mut rollouts) => rollouts.pop().map(|r| r.completion).unwrap_or_default(),
            Err(e) => {
                let reason = format!("the model failed: {e}");
                return (bandit(), PanelChoice::LlmFallback { reason });
            }
        };
        match parse_llm_selection(&answer, &market.arms, self.settings.panel, available.0) {
            Ok(selection) => (selection.cards, PanelChoice::Llm),
            Err(e) => (
                bandit(),
                PanelChoice::LlmFallback {
                    reason: e.to_string(),
                },
            ),
        }
    }

    /// One episode: returns the group (None when skipped) after publishing it to the feed.
    pub async fn episode(&self, seed: u64, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let key = format!("{}/episode/{seed:016x}", self.settings.run);
        // A replay of an episode whose caller gave up on it waits for its round, still running,
        // instead of paying and judging it a second time.
        if let Some(running) = self.rounds.running(&key) {
            return paced(running.await).await;
        }
        let task = self.data.task(seed);
        let budget = self.budget_account().await?;
        let ledger = &self.market.ledger;
        let available = ledger.balance(budget).await.map_err(other)?.available;
        let judging = |rollouts| Judging {
            market: self.market.clone(),
            panel: PanelConfig {
                run: self.settings.run.clone(),
                panel: self.settings.panel,
                cost_weight: self.settings.cost_weight,
            },
            key: key.clone(),
            budget,
            available,
            task: task.clone(),
            rollouts,
            params: generation_params(&self.config, policy),
            weight_version: policy.weight_version(),
        };
        // People first, when the run has a human card; the bandit's panel when they give nothing.
        if let Some(slug) = self.settings.human_card.clone() {
            let judging = judging(self.answer(&task, available, policy).await?);
            let rules = HumanRules {
                deadline: Duration::from_secs(self.settings.human_deadline_secs),
                queue_items: self.market.queue_items,
            };
            let round = self.rounds.start(key.clone(), move |closing| {
                judging.people(slug, rules, closing)
            });
            return paced(round.await).await;
        }
        let (market, replayed) = self.market.payable(&key).await?;
        let (chosen, choice) = if !replayed.is_empty() {
            (replayed, PanelChoice::Bandit)
        } else if market.cheapest().is_none_or(|price| price > available.0) {
            (Vec::new(), PanelChoice::Bandit)
        } else {
            self.choose(&task, &market, available, policy).await
        };
        // A round that cannot pay anyone skips before any answer is generated.
        let rollouts = if chosen.is_empty() {
            Vec::new()
        } else {
            self.answer(&task, available, policy).await?
        };
        let judging = judging(rollouts);
        let round = self
            .rounds
            .start(key.clone(), move |_| judging.panel(market, chosen, choice));
        paced(round.await).await
    }

    /// The group's answers to `task`.
    async fn answer(
        &self,
        task: &lachesis_shared::cats::CatTask,
        available: MicroUsdc,
        policy: &dyn Policy,
    ) -> Result<Vec<crate::policy::Rollout>, EnvError> {
        let request = PolicyRequest {
            tools: Vec::new(),
            messages: prompts::answer_messages(task, available),
            n: self.config.group_size,
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            top_p: self.config.top_p,
            stop: vec!["\n\n".into()],
        };
        Ok(policy.complete(request).await?)
    }

    /// Evaluation mode: answers to a fixed set of tasks, each heard by every card, unpaid.
    async fn evaluate_set(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let market = Market::load(self.market.ledger.pool(), &self.market.judges)
            .await
            .map_err(other)?;
        let (mut total, mut samples) = (0.0, Vec::new());
        for i in 0..self.settings.eval_size {
            let task = self.data.task(EVAL_SEED + i as u64);
            let request = PolicyRequest {
                tools: Vec::new(),
                messages: prompts::answer_messages(&task, self.budget),
                n: 1,
                max_tokens: self.config.max_tokens,
                temperature: 0.0,
                top_p: 1.0,
                stop: vec!["\n\n".into()],
            };
            let answers: Vec<String> = policy
                .complete(request)
                .await?
                .into_iter()
                .map(|r| r.completion)
                .collect();
            let heard = evaluate_all(&self.market.judges, &market, &task, &answers).await;
            let score = heard.panel_scores.first().copied().unwrap_or(0.0);
            total += score;
            samples.push(json!({"id": i, "task": prompts::task_text(&task),
                "answer": answers.first(), "panel_score": score, "cards": heard.slugs(),
                "unreadable": heard.unreadable}));
        }
        let n = self.settings.eval_size.max(1) as f64;
        let metrics = crate::envs::metrics(&[
            ("eval/mean_panel_score", total / n),
            ("eval/cards", market.cards.len() as f64),
            ("eval/n", self.settings.eval_size as f64),
        ]);
        Ok(EvalOutcome { metrics, samples })
    }
}

/// A round's outcome, after the pause a skipped one asks for.
async fn paced(outcome: Result<Collected, EnvError>) -> Result<Collected, EnvError> {
    if matches!(&outcome, Ok(collected) if collected.group.is_none()) {
        tokio::time::sleep(SKIP_PAUSE).await;
    }
    outcome
}

fn other(e: impl std::fmt::Display) -> EnvError {
    EnvError::Other(e.to_string())
}

impl Env for PayToPlayEnv {
    const NAME: &str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn setup(&self) -> Result<(), EnvError> {
        self.budget_account().await.map(|_| ())
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        some_item(&SeedItem {
            seed: SeedItem::draw(&self.rng),
        })
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let SeedItem { seed } = SeedItem::parse(item)?;
        self.episode(seed, policy).await
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        self.evaluate_set(policy).await
    }

    async fn drain(&self) {
        let rounds = self.rounds.drain().await;
        if rounds > 0 {
            tracing::info!(rounds, "rounds running at the stop finished");
        }
    }
}

/// After a skipped episode (a spent budget) the showcase waits this long: a spent budget is shown
/// once a minute, not every few seconds.
const SPENT_PAUSE: Duration = Duration::from_secs(60);

/// Episodes run while no trainer asks for groups, so the marketplace page shows cards chosen,
/// payments made and the budget falling even before a trainer attaches; the runner sends groups
/// once one does.
impl Showcase for PayToPlayEnv {
    fn prepare(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(async { self.budget_account().await.map(|_| ()) })
    }

    fn show_one<'a>(&'a self, policy: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>> {
        Box::pin(async move {
            let seed = SeedItem::draw(&self.rng);
            let judged = self.episode(seed, policy).await?.group.is_some();
            Ok(if judged { SHOWCASE_PAUSE } else { SPENT_PAUSE })
        })
    }
}
