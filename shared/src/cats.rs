//! The cat caretaker's world: behaviors a cat shows, the needs (scenarios) behind them, and a task
//! that pairs one need with the behaviors observed.

use serde::{Deserialize, Serialize};

/// The five kinds of need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CareCategory {
    /// Food, water, feeding schedule.
    Nutrition,
    /// Grooming, dental care, veterinary care.
    Health,
    /// Sleeping spots, temperature, litter.
    Comfort,
    /// A secure home, identification, territory.
    Safety,
    /// Space, play, climbing, toys.
    Enrichment,
}

impl CareCategory {
    /// Every category, in declaration order.
    pub const ALL: [CareCategory; 5] = [
        CareCategory::Nutrition,
        CareCategory::Health,
        CareCategory::Comfort,
        CareCategory::Safety,
        CareCategory::Enrichment,
    ];

    /// The name as the data set and the wire spell it (capitalized, e.g. `Nutrition`).
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
    /// Its name, as scenarios and cat turns refer to it.
    pub behavior: String,
    /// What it looks like and what it may signal, in words.
    pub description: String,
}

/// A need of the cat, with the behaviors it shows and what a good caretaker's answer mentions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatScenario {
    /// The scenario's number in the data set.
    pub id: u32,
    /// The need, described in words.
    pub scenario: String,
    /// The kind of need.
    pub category: CareCategory,
    /// Names of the behaviors it shows (see [`CatBehavior::behavior`]).
    pub behaviors: Vec<String>,
    /// Lowercase keywords or short phrases, matched as substrings of the caretaker's answer.
    pub remedy: Vec<String>,
}

/// One episode's hidden need and the behaviors the caretaker gets to observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatTask {
    /// The need the caretaker must find.
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
    /// The part the person plays.
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
        /// The behaviors shown, by name.
        behaviors: Vec<String>,
        /// A sound the cat makes, in free text; `None`: silent.
        #[serde(default)]
        sound: Option<String>,
    },
    /// The caretaker says or does something.
    Caretaker {
        /// What the caretaker says or does, in free text.
        text: String,
    },
}

/// `POST /api/cats/sessions/{id}/turns`: the person's move, in the role they play.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatMove {
    /// The turn, spoken as the person's role: a cat turn from the cat, a caretaker turn from the
    /// caretaker.
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
    /// The session's id, as in `/api/cats/sessions/{id}`.
    pub id: String,
    /// The part the person plays.
    pub role: CatRole,
    /// The dialogue so far, oldest first: both speakers' turns.
    pub turns: Vec<CatTurn>,
    /// Caretaker turns allowed before the judge decides.
    pub max_turns: usize,
    /// The hidden need: shown to a person playing the cat from the start, and to a caretaker
    /// only once the session is finished.
    pub scenario: Option<CatScenario>,
    /// The judge's verdict; `None` until the session is finished.
    pub verdict: Option<CatVerdict>,
}
