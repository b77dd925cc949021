//! Pay-to-Play's settings and what they may be.

use lachesis_shared::ledger::MicroUsdc;
use serde::Deserialize;

use crate::envs::EnvError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    Bandit,
    Llm,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The run the budget and the evaluations belong to.
    pub run: String,
    /// The budget the run's agent is funded with once, in USDC (e.g. "2.5").
    pub budget_usdc: String,
    /// Cards per panel, at most.
    pub panel: usize,
    /// λ: reward lost per USDC spent on the panel.
    pub cost_weight: f64,
    pub selection: Selection,
    pub eval_size: usize,
    /// On chain: the wallet the budget pays from (its key must be one the server holds).
    pub agent_wallet: Option<String>,
    /// A human judge card: every group goes to its queue for people to rank, and their ranks are
    /// the rewards; the bandit's panel judges a group nobody ranked in time.
    pub human_card: Option<String>,
    /// How long people have to rank a group, in seconds (1 to 540, under the runner's episode
    /// timeout).
    pub human_deadline_secs: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            run: "pay-to-play".into(),
            budget_usdc: "1".into(),
            panel: 2,
            cost_weight: 1.0,
            selection: Selection::Bandit,
            eval_size: 8,
            agent_wallet: None,
            human_card: None,
            human_deadline_secs: 300,
        }
    }
}

impl Settings {
    /// The budget, when every setting is in range.
    pub(super) fn check(&self) -> Result<MicroUsdc, EnvError> {
        let budget = MicroUsdc::parse_usdc(&self.budget_usdc)
            .filter(|b| b.0 > 0)
            .ok_or_else(|| {
                EnvError::InvalidOption(format!(
                    "budget_usdc {:?} is not a positive USDC amount",
                    self.budget_usdc
                ))
            })?;
        if !(1..=540).contains(&self.human_deadline_secs) {
            return Err(EnvError::InvalidOption(
                "human_deadline_secs must be 1..=540".into(),
            ));
        }
        if !(1..=8).contains(&self.panel) || !self.cost_weight.is_finite() {
            return Err(EnvError::InvalidOption(
                "panel must be 1..=8 and cost_weight finite".into(),
            ));
        }
        // The run's name goes into ledger account names.
        if self.run.is_empty()
            || !self
                .run
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
        {
            return Err(EnvError::InvalidOption(
                "run must be letters, digits and _.:- only".into(),
            ));
        }
        Ok(budget)
    }
}
