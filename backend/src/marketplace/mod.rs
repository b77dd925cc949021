//! The judge marketplace: agent cards that score answers for a price, how an agent chooses among
//! them, and how their judges are run. The cards judge caretakers, so a verdict is read by the cat
//! caretaker's judging protocol (`envs::cat_caretaker::verdict`).

pub mod abandoned;
pub mod cards;
pub mod feed;
pub mod human;
pub mod judges;
pub mod operator;
pub mod outbound;
pub mod panel;
pub mod probation;
pub mod routes;
pub mod sealed;
pub mod selection;
