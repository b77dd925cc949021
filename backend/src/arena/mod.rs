//! The arena: contenders (models, prompts, agents) compared head to head by voters, rated on a
//! Chatbot-Arena-style leaderboard.
//!
//! - [`ratings`]: Bradley–Terry strengths by maximum likelihood, ties as half wins, optional style
//!   control (answer length as a covariate).
//! - [`bootstrap`]: confidence intervals, rank ranges, the leaderboard, win rates, vote counts, and
//!   the choice of the next pair to put to a voter.
//! - [`routes`], [`battles`], [`voter`], [`board`], [`store`]: the arena served over HTTP — battles
//!   dealt to a voter, answered in the background, voted on once, fitted into the leaderboard.
//! - [`integrity`]: voided battles (an answer gives its author away) and the anomaly filters.

pub mod answer;
pub mod battles;
pub mod battles_file;
pub mod bench;
pub mod board;
pub mod bootstrap;
pub mod cat_dialogue;
pub mod cli;
pub mod endpoint;
pub mod ingest_bench;
pub mod integrity;
pub mod ratings;
pub mod routes;
pub mod settings;
pub mod store;
pub mod voter;

use std::net::IpAddr;
use std::sync::Arc;

use crate::hosting::rate::RateTable;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests_battles_file;
#[cfg(test)]
mod tests_bootstrap;
#[cfg(test)]
mod tests_ratings;

/// The arena's settings and its per-caller accounting, shared by every request.
#[derive(Debug)]
pub struct ArenaState {
    pub settings: settings::ArenaSettings,
    pub vote_rates: RateTable<String>,
    pub address_vote_rates: RateTable<IpAddr>,
    pub battle_rates: RateTable<String>,
    pub address_battle_rates: RateTable<IpAddr>,
    pub visitor_rates: RateTable<IpAddr>,
    pub boards: board::BoardCache,
    /// Permits for battles being answered (`settings.concurrent_battles`).
    pub answering: Arc<tokio::sync::Semaphore>,
}

impl Default for ArenaState {
    fn default() -> Self {
        Self::new(settings::ArenaSettings::default())
    }
}

impl ArenaState {
    pub fn new(settings: settings::ArenaSettings) -> Self {
        Self {
            answering: Arc::new(tokio::sync::Semaphore::new(settings.concurrent_battles)),
            settings,
            vote_rates: RateTable::default(),
            address_vote_rates: RateTable::default(),
            battle_rates: RateTable::default(),
            address_battle_rates: RateTable::default(),
            visitor_rates: RateTable::default(),
            boards: board::BoardCache::default(),
        }
    }

    pub fn filters(&self) -> integrity::Filters {
        integrity::Filters {
            min_vote: self.settings.min_vote,
            same_side_run: self.settings.same_side_run,
        }
    }
}
