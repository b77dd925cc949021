//! When a team's card may be chosen and paid. The bandit tries every untried card first, so
//! without a probation a team could list many dear cards and have each one paid at least once
//! from every budget. New team cards are therefore tried one at a time (at most one untried card
//! per round), only while they are cheap, and a card whose verdicts turn out unreadable or far from
//! its panels' stops being chosen. The platform's own cards are not on probation.

/// The probation's terms; every one has a `lachesis serve` flag.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbationRules {
    /// Evaluations a team card gives before its quality is judged (and its price is free).
    pub evaluations: i64,
    /// Highest price (micro-USDC) at which a team card still on probation is chosen.
    pub price_cap: i64,
    /// Lowest mean agreement with the panel a team card keeps after probation.
    pub min_agreement: f64,
    /// Highest share of unreadable verdicts a team card keeps after probation.
    pub max_unreadable: f64,
}

impl Default for ProbationRules {
    fn default() -> Self {
        Self {
            evaluations: 6,
            price_cap: 20_000,
            min_agreement: 0.5,
            max_unreadable: 0.5,
        }
    }
}

/// What a team card has shown so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeamCardRecord {
    pub price: i64,
    /// Evaluations given, readable or not.
    pub evaluations: i64,
    pub unreadable: i64,
    /// Mean agreement with the panel, unreadable verdicts counting as none.
    pub agreement: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// May be chosen like any card.
    Admitted,
    /// Never judged yet: at most one such card per round.
    Untried,
    /// Not chosen: too dear for probation, or failed it.
    Excluded,
}

impl ProbationRules {
    pub fn standing(&self, card: &TeamCardRecord) -> Standing {
        if card.evaluations < self.evaluations {
            return if card.price > self.price_cap {
                Standing::Excluded
            } else if card.evaluations == 0 {
                Standing::Untried
            } else {
                Standing::Admitted
            };
        }
        let unreadable = card.unreadable as f64 / card.evaluations as f64;
        let agreement = card.agreement.unwrap_or(0.0);
        if unreadable > self.max_unreadable || agreement < self.min_agreement {
            Standing::Excluded
        } else {
            Standing::Admitted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(price: i64, evaluations: i64, unreadable: i64, agreement: f64) -> TeamCardRecord {
        TeamCardRecord {
            price,
            evaluations,
            unreadable,
            agreement: (evaluations > 0).then_some(agreement),
        }
    }

    #[test]
    fn dear_new_cards_wait_and_cheap_ones_are_tried() {
        let rules = ProbationRules::default();
        assert_eq!(
            rules.standing(&card(100_000_000, 0, 0, 0.0)),
            Standing::Excluded
        );
        assert_eq!(
            rules.standing(&card(rules.price_cap, 0, 0, 0.0)),
            Standing::Untried
        );
        assert_eq!(rules.standing(&card(5_000, 2, 2, 0.0)), Standing::Admitted);
        // Repricing upwards during probation takes the card out again.
        assert_eq!(
            rules.standing(&card(rules.price_cap + 1, 2, 0, 0.9)),
            Standing::Excluded
        );
    }

    #[test]
    fn after_probation_unreadable_or_disagreeing_cards_stop_being_chosen() {
        let rules = ProbationRules::default();
        let n = rules.evaluations;
        assert_eq!(rules.standing(&card(5_000, n, n, 0.0)), Standing::Excluded);
        assert_eq!(rules.standing(&card(5_000, n, 0, 0.2)), Standing::Excluded);
        assert_eq!(rules.standing(&card(5_000, n, 0, 0.9)), Standing::Admitted);
        // A proven card may then be priced as its owners like.
        assert_eq!(
            rules.standing(&card(90_000_000, n, 0, 0.9)),
            Standing::Admitted
        );
    }
}
