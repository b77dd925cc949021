//! The arena's wire types: contenders, battles dealt to a voter, votes, and the leaderboard.
//!
//! A battle shows one prompt and two anonymous answers, "A" and "B". Who answered is revealed
//! once the vote is cast (or the battle is voided because an answer gave its author away).

use serde::{Deserialize, Serialize};

/// The arenas a battle can be drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArenaKind {
    /// Two caretakers answer the same cat (the cat caretaker's tasks).
    Catbot,
    /// Two solvers answer the same arithmetic problem (the arithmetic environment's problems).
    Arithmetic,
    /// Two planners place the same scene's objects (the spatial environment's tasks).
    Spatial,
    /// Two players choose a move in the same position (the chess player environment's positions).
    Chess,
}

impl ArenaKind {
    /// Every arena, in the order pages list them.
    pub const ALL: [ArenaKind; 4] = [
        ArenaKind::Catbot,
        ArenaKind::Arithmetic,
        ArenaKind::Spatial,
        ArenaKind::Chess,
    ];

    /// The name in URLs and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ArenaKind::Catbot => "catbot",
            ArenaKind::Arithmetic => "arithmetic",
            ArenaKind::Spatial => "spatial",
            ArenaKind::Chess => "chess",
        }
    }

    /// Parses [`ArenaKind::as_str`]'s spelling.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "catbot" => Some(ArenaKind::Catbot),
            "arithmetic" => Some(ArenaKind::Arithmetic),
            "spatial" => Some(ArenaKind::Spatial),
            "chess" => Some(ArenaKind::Chess),
            _ => None,
        }
    }
}

/// What answers for a contender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContenderPolicy {
    /// The server's embedded model, sampled at `temperature`, with an optional system prompt that
    /// comes before the arena's own instructions.
    Embedded {
        /// Sampling temperature, 0 (greedy) to 2.
        temperature: f32,
        /// Extra instructions for this contender.
        #[serde(default)]
        system: Option<String>,
        /// A LoRA adapter the server serves under this name, instead of the base weights: a
        /// training run's current weights when its trainer hot-loads them under that name
        /// (`lachesis train run --sync vllm-lora --lora-name NAME`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adapter: Option<String>,
    },
    /// An OpenAI-compatible chat endpoint chosen by the server's admin. Its key, if any, comes from
    /// the server's `LACHESIS_ARENA_API_KEY`, never from the request.
    Endpoint {
        /// The server's base URL (`…/v1` is appended when missing).
        base_url: String,
        /// The model name to ask for.
        model: String,
    },
}

impl ContenderPolicy {
    /// What answers, in a few words: `embedded`, `adapter NAME` or `endpoint`.
    pub fn label(&self) -> String {
        match self {
            ContenderPolicy::Embedded {
                adapter: Some(name),
                ..
            } => format!("adapter {name}"),
            ContenderPolicy::Embedded { .. } => "embedded".into(),
            ContenderPolicy::Endpoint { .. } => "endpoint".into(),
        }
    }
}

/// An admin's request to enter a contender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewContender {
    /// Unique, 1 to 80 characters: shown on the leaderboard.
    pub name: String,
    /// How it answers.
    pub policy: ContenderPolicy,
    /// Words that would give the contender away in an answer (its name always does); an answer
    /// containing one, as a whole word, voids its battle.
    #[serde(default)]
    pub reveals: Vec<String>,
}

/// A contender as anyone may see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContenderView {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// `embedded` or `endpoint`.
    pub kind: String,
    /// Counted votes it has taken part in.
    pub votes: i64,
}

/// A request for a new battle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewBattle {
    /// The arena to draw from.
    pub arena: ArenaKind,
}

/// Where a battle stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BattleState {
    /// The contenders are still answering.
    Answering,
    /// Both answers are in: the voter may vote.
    Ready,
    /// The vote is cast; identities are revealed.
    Voted,
    /// An answer gave its author away (or a contender failed): no vote is taken.
    Void,
}

/// A voter's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoteChoice {
    /// A is better.
    A,
    /// B is better.
    B,
    /// Equally good.
    Tie,
    /// Both are bad.
    BothBad,
}

impl VoteChoice {
    /// The name in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            VoteChoice::A => "a",
            VoteChoice::B => "b",
            VoteChoice::Tie => "tie",
            VoteChoice::BothBad => "both_bad",
        }
    }

    /// Parses [`VoteChoice::as_str`]'s spelling.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "a" => Some(VoteChoice::A),
            "b" => Some(VoteChoice::B),
            "tie" => Some(VoteChoice::Tie),
            "both_bad" => Some(VoteChoice::BothBad),
            _ => None,
        }
    }

    /// The `winner` field of Chatbot Arena's published battles.
    pub fn chatbot_arena_winner(self) -> &'static str {
        match self {
            VoteChoice::A => "model_a",
            VoteChoice::B => "model_b",
            VoteChoice::Tie => "tie",
            VoteChoice::BothBad => "tie (bothbad)",
        }
    }
}

/// A battle as its voter (or, once it is over, anyone) sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BattleView {
    /// Its id.
    pub id: i64,
    /// The arena it was drawn from.
    pub arena: ArenaKind,
    /// Where it stands.
    pub state: BattleState,
    /// What both contenders answered, in words (for the catbot arena: what the cat does).
    pub prompt: String,
    /// A's answer, once both are in.
    pub answer_a: Option<String>,
    /// B's answer, once both are in.
    pub answer_b: Option<String>,
    /// Who A is: only once the battle is voted or void.
    pub contender_a: Option<String>,
    /// Who B is: only once the battle is voted or void.
    pub contender_b: Option<String>,
    /// The vote, once cast.
    pub vote: Option<VoteChoice>,
    /// Why the vote does not count toward the ratings, when it does not.
    pub excluded: Option<String>,
    /// Why the battle was voided.
    pub void_reason: Option<String>,
    /// The environment's own judge of each answer (A, B): the cat's rubric, the true result. Shown
    /// only once the battle is over, so it cannot sway the vote.
    #[serde(default)]
    pub judged: Option<[String; 2]>,
}

/// A vote on a battle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewVote {
    /// The verdict.
    pub choice: VoteChoice,
    /// Why, in the voter's words (at most 1,000 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// An anonymous visitor's voting token (per the host's setting); sent back as `X-Arena-Visitor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisitorToken {
    /// The secret; shown once.
    pub token: String,
}

/// One leaderboard line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardEntry {
    /// Best plausible rank (1 is first).
    pub rank_best: usize,
    /// Worst plausible rank; equal to `rank_best` only where the intervals separate it.
    pub rank_worst: usize,
    /// The contender's name.
    pub contender: String,
    /// Rating on the Elo-like scale (1000 is average; 400 points is 10:1 odds).
    pub rating: f64,
    /// The rating's bootstrap interval, lower end.
    pub lower: f64,
    /// The rating's bootstrap interval, upper end.
    pub upper: f64,
    /// Counted votes it took part in.
    pub votes: usize,
    /// Too few votes to be ranked: its rank spans the board until it has more.
    pub provisional: bool,
}

/// The arena's leaderboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardView {
    /// The arena.
    pub arena: ArenaKind,
    /// Highest rating first. Every contender that ever received a counted vote is listed.
    pub rows: Vec<LeaderboardEntry>,
    /// Votes counted in the ratings.
    pub counted_votes: usize,
    /// Votes cast but excluded by the anomaly filters (published, not counted).
    pub excluded_votes: usize,
    /// Whether answer length was a covariate.
    pub style_control: bool,
    /// With style control: log-odds per unit of normalised length difference.
    pub style_coefficient: Option<f64>,
    /// Confidence of the intervals (0.95).
    pub confidence: f64,
    /// Names in the order of `win_rates`' rows and columns.
    pub contenders: Vec<String>,
    /// `win_rates[i][j]`: the share of i's counted votes against j that i won (ties half).
    pub win_rates: Vec<Vec<Option<f64>>>,
}

/// Live: a vote was cast in an arena (on the arena's topic; open to every viewer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArenaVoteEvent {
    /// The arena.
    pub arena: ArenaKind,
    /// The battle voted on.
    pub battle: i64,
    /// The revealed contenders, A then B.
    pub contenders: [String; 2],
    /// The verdict.
    pub choice: VoteChoice,
    /// Whether it counts toward the ratings.
    pub counted: bool,
}

/// Live: both answers of a battle as they are written (on the battle's topic, public like its
/// page). Each event carries both texts so far, so a reader that misses some loses nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BattleTextEvent {
    /// The battle.
    pub battle: i64,
    /// A's and B's text so far (a contender behind an endpoint appears whole when it is done).
    pub answers: [String; 2],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for choice in [
            VoteChoice::A,
            VoteChoice::B,
            VoteChoice::Tie,
            VoteChoice::BothBad,
        ] {
            assert_eq!(VoteChoice::parse(choice.as_str()), Some(choice));
            let json = serde_json::to_value(choice).unwrap();
            assert_eq!(json, serde_json::json!(choice.as_str()));
        }
        assert_eq!(ArenaKind::parse("catbot"), Some(ArenaKind::Catbot));
        assert_eq!(ArenaKind::parse("Catbot"), None);
        assert_eq!(VoteChoice::parse("model_a"), None);
    }

    #[test]
    fn policies_are_tagged() {
        let p: ContenderPolicy =
            serde_json::from_str(r#"{"kind":"embedded","temperature":0.7}"#).unwrap();
        assert_eq!(
            p,
            ContenderPolicy::Embedded {
                temperature: 0.7,
                system: None,
                adapter: None
            }
        );
        assert!(serde_json::from_str::<ContenderPolicy>(r#"{"kind":"shell"}"#).is_err());
    }
}
