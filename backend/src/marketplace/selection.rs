//! Choosing which judge cards to pay for an episode.
//!
//! Two policies: a cost-aware UCB bandit over each card's history (the value of its evaluations per
//! dollar, with an optimism bonus for cards tried little), and an LLM asked for strict JSON, whose
//! answer is parsed here with typed errors so the caller can fall back to the bandit.

use serde::Deserialize;

/// What the bandit knows about one card.
#[derive(Debug, Clone, PartialEq)]
pub struct CardArm {
    pub slug: String,
    /// Price per evaluation, micro-USDC (> 0).
    pub price: i64,
    /// Evaluations seen so far.
    pub pulls: u32,
    /// Sum of the usefulness (0..1) of those evaluations.
    pub value_sum: f64,
}

impl CardArm {
    pub fn new(slug: &str, price: i64) -> Self {
        Self {
            slug: slug.to_string(),
            price,
            pulls: 0,
            value_sum: 0.0,
        }
    }

    pub fn mean_value(&self) -> f64 {
        if self.pulls == 0 {
            0.0
        } else {
            self.value_sum / f64::from(self.pulls)
        }
    }

    pub fn record(&mut self, usefulness: f64) {
        self.pulls += 1;
        self.value_sum += usefulness.clamp(0.0, 1.0);
    }
}

/// UCB1 on value per dollar: a card's index is its optimistic mean usefulness over its price.
#[derive(Debug, Clone, Copy)]
pub struct UcbPolicy {
    /// Weight of the optimism bonus (1.0 is UCB1's; smaller explores less).
    pub exploration: f64,
}

impl Default for UcbPolicy {
    fn default() -> Self {
        Self { exploration: 0.5 }
    }
}

impl UcbPolicy {
    /// Up to `panel` distinct cards, best index first, whose total price fits `budget`
    /// (micro-USDC). Untried cards come first (cheapest first), so every card is tried once.
    pub fn select(&self, arms: &[CardArm], panel: usize, budget: i64) -> Vec<usize> {
        let total: u32 = arms.iter().map(|a| a.pulls).sum();
        let log_total = f64::from(total.max(1)).ln();
        let index = |arm: &CardArm| -> f64 {
            if arm.pulls == 0 {
                // Infinite optimism, ties broken towards cheaper cards.
                return f64::MAX / (arm.price.max(1) as f64);
            }
            let bonus = self.exploration * (2.0 * log_total / f64::from(arm.pulls)).sqrt();
            ((arm.mean_value() + bonus).min(1.0)) / (arm.price.max(1) as f64)
        };
        let mut order: Vec<usize> = (0..arms.len()).collect();
        order.sort_by(|&a, &b| index(&arms[b]).total_cmp(&index(&arms[a])).then(a.cmp(&b)));
        let mut chosen = Vec::new();
        let mut spent = 0;
        for i in order {
            if chosen.len() == panel {
                break;
            }
            if spent + arms[i].price <= budget {
                spent += arms[i].price;
                chosen.push(i);
            }
        }
        chosen
    }
}

/// Why an LLM's card selection was not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectionError {
    /// No JSON object in the answer.
    NoJson,
    /// A JSON object that is not `{"selected_agent_cards": [...], "reasoning": "..."}`.
    BadJson(String),
    UnknownCard(String),
    Duplicate(String),
    Empty,
    TooMany {
        chosen: usize,
        max: usize,
    },
    OverBudget {
        cost: i64,
        budget: i64,
    },
}

impl std::fmt::Display for SelectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectionError::NoJson => write!(f, "no JSON object in the answer"),
            SelectionError::BadJson(e) => write!(f, "not a card selection: {e}"),
            SelectionError::UnknownCard(card) => write!(f, "no card {card:?}"),
            SelectionError::Duplicate(card) => write!(f, "card {card:?} chosen twice"),
            SelectionError::Empty => write!(f, "no card chosen"),
            SelectionError::TooMany { chosen, max } => {
                write!(f, "{chosen} cards chosen, at most {max} allowed")
            }
            SelectionError::OverBudget { cost, budget } => {
                write!(
                    f,
                    "the cards cost {cost} micro-USDC, the budget left is {budget}"
                )
            }
        }
    }
}

impl std::error::Error for SelectionError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSelection {
    selected_agent_cards: Vec<String>,
    #[serde(default)]
    reasoning: String,
}

/// A usable selection: indexes into the arms, and the model's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmSelection {
    pub cards: Vec<usize>,
    pub reasoning: String,
}

/// Reads `{"selected_agent_cards": ["slug", ...], "reasoning": "..."}` from a model's answer
/// (prose or a code fence around the object are tolerated; the first object that parses counts).
pub fn parse_llm_selection(
    answer: &str,
    arms: &[CardArm],
    max: usize,
    budget: i64,
) -> Result<LlmSelection, SelectionError> {
    let mut last_error = None;
    let mut raw = None;
    for (start, _) in answer.match_indices('{') {
        let mut stream =
            serde_json::Deserializer::from_str(&answer[start..]).into_iter::<RawSelection>();
        match stream.next() {
            Some(Ok(parsed)) => {
                raw = Some(parsed);
                break;
            }
            Some(Err(e)) => last_error = Some(e.to_string()),
            None => {}
        }
    }
    let raw = match (raw, last_error) {
        (Some(raw), _) => raw,
        (None, Some(error)) => return Err(SelectionError::BadJson(error)),
        (None, None) => return Err(SelectionError::NoJson),
    };
    if raw.selected_agent_cards.is_empty() {
        return Err(SelectionError::Empty);
    }
    if raw.selected_agent_cards.len() > max {
        return Err(SelectionError::TooMany {
            chosen: raw.selected_agent_cards.len(),
            max,
        });
    }
    let mut cards = Vec::new();
    for slug in &raw.selected_agent_cards {
        let slug = slug.trim();
        let index = arms
            .iter()
            .position(|arm| arm.slug == slug)
            .ok_or_else(|| SelectionError::UnknownCard(slug.chars().take(64).collect()))?;
        if cards.contains(&index) {
            return Err(SelectionError::Duplicate(slug.to_string()));
        }
        cards.push(index);
    }
    let cost: i64 = cards.iter().map(|&i| arms[i].price).sum();
    if cost > budget {
        return Err(SelectionError::OverBudget { cost, budget });
    }
    Ok(LlmSelection {
        cards,
        reasoning: raw.reasoning.chars().take(500).collect(),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn arms() -> Vec<CardArm> {
        vec![
            CardArm::new("vet", 8_000),
            CardArm::new("nutrition", 4_000),
            CardArm::new("cheap", 1_000),
        ]
    }

    #[test]
    fn every_card_is_tried_then_value_per_dollar_wins() {
        let mut arms = arms();
        assert_eq!(
            UcbPolicy::default().select(&arms, 1, 100_000),
            vec![2],
            "untried, cheapest first"
        );
        for (arm, value) in arms.iter_mut().zip([0.9, 0.8, 0.05]) {
            for _ in 0..5_000 {
                arm.record(value);
            }
        }
        // Well tried, so the optimism bonus is small: nutrition (0.8 / 4000) beats vet
        // (0.9 / 8000), which beats cheap (0.05 / 1000).
        assert_eq!(UcbPolicy::default().select(&arms, 2, 100_000), vec![1, 0]);
        // A budget of 9000 fits nutrition, then not vet, then cheap.
        assert_eq!(UcbPolicy::default().select(&arms, 2, 9_000), vec![1, 2]);
        assert!(UcbPolicy::default().select(&arms, 2, 500).is_empty());
    }

    /// A few hundred simulated episodes: each card's evaluations are useful with its true (hidden)
    /// quality; the bandit's value per dollar reaches 90% of an oracle that knows the qualities.
    #[test]
    fn the_bandit_approaches_the_oracles_value_per_dollar() {
        let truth = [
            (0.95, 20_000),
            (0.9, 8_000),
            (0.7, 4_000),
            (0.5, 3_000),
            (0.2, 1_000),
            (0.6, 10_000),
        ];
        for seed in 0..5 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut arms: Vec<CardArm> = truth
                .iter()
                .enumerate()
                .map(|(i, &(_, price))| CardArm::new(&format!("card{i}"), price))
                .collect();
            let (mut value, mut cost) = (0.0, 0i64);
            let episodes = 400;
            for episode in 0..episodes {
                let chosen = UcbPolicy::default().select(&arms, 2, i64::MAX);
                for &i in &chosen {
                    let useful = if rng.random::<f64>() < truth[i].0 {
                        1.0
                    } else {
                        0.0
                    };
                    arms[i].record(useful);
                    if episode >= episodes / 2 {
                        value += truth[i].0;
                        cost += truth[i].1;
                    }
                }
            }
            // The oracle's best pair by value per dollar.
            let mut oracle: f64 = 0.0;
            for a in 0..truth.len() {
                for b in a + 1..truth.len() {
                    oracle =
                        oracle.max((truth[a].0 + truth[b].0) / (truth[a].1 + truth[b].1) as f64);
                }
            }
            let ratio = (value / cost as f64) / oracle;
            assert!(
                ratio >= 0.9,
                "seed {seed}: {ratio:.3} of the oracle's value per dollar"
            );
        }
    }

    #[test]
    fn llm_selections_are_strict() {
        let arms = arms();
        let ok = parse_llm_selection(
            "Sure!\n```json\n{\"selected_agent_cards\": [\"vet\", \"cheap\"], \"reasoning\": \"health question\"}\n```",
            &arms,
            2,
            100_000,
        );
        assert_eq!(
            ok,
            Ok(LlmSelection {
                cards: vec![0, 2],
                reasoning: "health question".into()
            })
        );
        let err = |text: &str| parse_llm_selection(text, &arms, 2, 10_000).unwrap_err();
        assert_eq!(err("I pick the vet"), SelectionError::NoJson);
        assert!(matches!(
            err("{\"cards\": [\"vet\"]}"),
            SelectionError::BadJson(_)
        ));
        assert_eq!(err("{\"selected_agent_cards\": []}"), SelectionError::Empty);
        assert_eq!(
            err("{\"selected_agent_cards\": [\"judge\"]}"),
            SelectionError::UnknownCard("judge".into())
        );
        assert_eq!(
            err("{\"selected_agent_cards\": [\"vet\", \"vet\"]}"),
            SelectionError::Duplicate("vet".into())
        );
        assert_eq!(
            err("{\"selected_agent_cards\": [\"vet\", \"cheap\", \"nutrition\"]}"),
            SelectionError::TooMany { chosen: 3, max: 2 }
        );
        assert_eq!(
            err("{\"selected_agent_cards\": [\"vet\", \"nutrition\"]}"),
            SelectionError::OverBudget {
                cost: 12_000,
                budget: 10_000
            }
        );
    }

    proptest! {
        #[test]
        fn selection_parsing_never_panics(text in ".{0,300}") {
            if let Ok(selection) = parse_llm_selection(&text, &arms(), 2, 10_000) {
                prop_assert!(!selection.cards.is_empty() && selection.cards.len() <= 2);
            }
        }

        #[test]
        fn the_bandit_never_exceeds_budget_or_panel(
            pulls in proptest::collection::vec((0u32..50, 0.0f64..1.0), 3),
            panel in 0usize..4,
            budget in 0i64..20_000,
        ) {
            let mut arms = arms();
            for (arm, (n, v)) in arms.iter_mut().zip(pulls) {
                for _ in 0..n { arm.record(v); }
            }
            let chosen = UcbPolicy::default().select(&arms, panel, budget);
            prop_assert!(chosen.len() <= panel);
            prop_assert!(chosen.iter().map(|&i| arms[i].price).sum::<i64>() <= budget);
            let mut unique = chosen.clone();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(unique.len(), chosen.len());
        }
    }
}
