//! The judge marketplace: agent cards that score answers for a price, how an agent chooses among
//! them, and how a judge's verdict is read.

pub mod cards;
pub mod feed;
pub mod judges;
pub mod operator;
pub mod outbound;
pub mod panel;
pub mod probation;
pub mod routes;
pub mod sealed;
pub mod selection;
pub mod verdict;
