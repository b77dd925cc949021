//! A price on offering material that holds the self-play learner to a sacrifice rate.

/// The aggression the learner is held to. After each version's games, every likely move that
/// offers material has a price added to its return in that version's update: the full `price`
/// had the version never sacrificed, less as its rate nears `rate`, nothing at it, a charge above
/// it. Which sacrifices the agent learns to prefer is still the returns' to say (the price is the
/// same for every move that offers material, so the sound ones keep their lead).
///
/// The price follows the last version's rate alone. The weights already add up every update; a
/// price that also added up the shortfalls overshot (over seeds 1-4 the final rate came to
/// 3.4-5.8 times version 0's, and the sound share fell on three).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SacrificeTarget {
    /// Sacrifices per agent move.
    pub rate: f64,
    /// In return units: a sound sacrifice earns 3, an unsound one costs 0.5 and what it gives up.
    pub price: f64,
}

/// Twice the 0.074 sacrifices a move that version 0 averages over 160 games a seed (0.069-0.082
/// over six seeds), and a little more.
pub const DEFAULT_SACRIFICE_TARGET: f64 = 0.2;
/// Over seeds 1-13 with the default target, the final version's rate came to at least twice
/// version 0's, its sound share rose and it scored 45% or more over the last ten learning games
/// on eight seeds (the three together on six without the price); a price of 1.5 with a target of
/// 0.22 raised the rate further and lost more games (three of four seeds below 45%).
pub const DEFAULT_SACRIFICE_PRICE: f64 = 1.0;

impl Default for SacrificeTarget {
    fn default() -> Self {
        Self {
            rate: DEFAULT_SACRIFICE_TARGET,
            price: DEFAULT_SACRIFICE_PRICE,
        }
    }
}

impl SacrificeTarget {
    /// What offering material adds to a move's return after a version that sacrificed `rate`
    /// per move.
    pub fn price_after(&self, rate: f64) -> f64 {
        if self.rate > 0.0 {
            self.price * (self.rate - rate) / self.rate
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_price_pays_for_a_shortfall_and_charges_for_an_excess() {
        let target = SacrificeTarget {
            rate: 0.2,
            price: 1.5,
        };
        let price_after = |rate: f64| (target.price_after(rate) * 1e9).round() / 1e9;
        // Never sacrificing earns the whole price, half the target half of it.
        assert_eq!(price_after(0.0), 1.5);
        assert_eq!(price_after(0.1), 0.75);
        assert_eq!(price_after(0.2), 0.0);
        // Sacrificing twice the target costs what never sacrificing earns.
        assert_eq!(price_after(0.4), -1.5);
        // A target of nothing prices nothing (and divides by nothing).
        let none = SacrificeTarget {
            rate: 0.0,
            price: 1.5,
        };
        assert_eq!(none.price_after(0.1), 0.0);
    }
}
