//! The arena: contenders (models, prompts, agents) compared head to head by voters, rated on a
//! Chatbot-Arena-style leaderboard.
//!
//! - [`ratings`]: Bradley–Terry strengths by maximum likelihood, ties as half wins, optional style
//!   control (answer length as a covariate).
//! - [`bootstrap`]: confidence intervals, rank ranges, the leaderboard, win rates, vote counts, and
//!   the choice of the next pair to put to a voter.

pub mod bootstrap;
pub mod ratings;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests_bootstrap;
#[cfg(test)]
mod tests_ratings;
