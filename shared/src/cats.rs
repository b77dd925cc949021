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

/// Who a person plays in a caretaker session; the model (or the simulated cat) plays the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatRole {
    /// The person cares for a cat the platform simulates from the data.
    Caretaker,
    /// The person is the cat (behaviors and sounds only); the model is the caretaker.
    Cat,
}

/// `POST /api/cats/sessions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCatSession {
    pub role: CatRole,
    /// Picks the task; random when absent.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One turn of a caretaker dialogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "speaker", rename_all = "snake_case")]
pub enum CatTurn {
    /// The cat shows behaviors (names from `GET /api/cats/behaviors`) and maybe makes a sound.
    Cat {
        behaviors: Vec<String>,
        #[serde(default)]
        sound: Option<String>,
    },
    /// The caretaker says or does something.
    Caretaker { text: String },
}

/// `POST /api/cats/sessions/{id}/turns`: the person's move, in the role they play.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatMove {
    pub turn: CatTurn,
    /// The caretaker's last word: after this turn the judge gives its verdict.
    #[serde(default)]
    pub finish: bool,
}

/// The judge's verdict on a finished session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatVerdict {
    /// 0..1.
    pub score: f64,
    /// The remedies the caretaker's turns mentioned.
    pub matched: Vec<String>,
    /// The judge's own text (ends with `\boxed{score}`).
    pub text: String,
}

/// A caretaker session as the browser shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatSession {
    pub id: String,
    pub role: CatRole,
    pub turns: Vec<CatTurn>,
    /// Caretaker turns allowed before the judge decides.
    pub max_turns: usize,
    /// The hidden need: shown to a person playing the cat from the start, and to a caretaker
    /// only once the session is finished.
    pub scenario: Option<CatScenario>,
    pub verdict: Option<CatVerdict>,
}
