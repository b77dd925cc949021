//! The cat caretaker's world: behaviors a cat shows, the needs (scenarios) behind them, and a task
//! that pairs one need with the behaviors observed.

use serde::{Deserialize, Serialize};

/// The five kinds of need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CareCategory {
    Nutrition,
    Health,
    Comfort,
    Safety,
    Enrichment,
}

impl CareCategory {
    pub const ALL: [CareCategory; 5] = [
        CareCategory::Nutrition,
        CareCategory::Health,
        CareCategory::Comfort,
        CareCategory::Safety,
        CareCategory::Enrichment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CareCategory::Nutrition => "Nutrition",
            CareCategory::Health => "Health",
            CareCategory::Comfort => "Comfort",
            CareCategory::Safety => "Safety",
            CareCategory::Enrichment => "Enrichment",
        }
    }
}

/// Something a cat does, and what it can mean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatBehavior {
    pub behavior: String,
    pub description: String,
}

/// A need of the cat, with the behaviors it shows and what a good caretaker's answer mentions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatScenario {
    pub id: u32,
    pub scenario: String,
    pub category: CareCategory,
    pub behaviors: Vec<String>,
    /// Lowercase keywords or short phrases, matched as substrings of the caretaker's answer.
    pub remedy: Vec<String>,
}

/// One episode's hidden need and the behaviors the caretaker gets to observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatTask {
    pub scenario: CatScenario,
    /// What the cat is seen doing, in the order shown (its need's behaviors, maybe one unrelated).
    pub observed: Vec<CatBehavior>,
}
