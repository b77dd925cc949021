//! The marketplace page's state changes, kept free of Leptos so they are tested natively:
//! merging the live feed with its history, moving a budget on a live event, and the line of a
//! budget's history.

use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{BudgetPoint, BudgetView, MarketEvent};

/// How many feed entries the page keeps (newest first).
pub const FEED_CAP: usize = 100;

/// What identifies a feed entry: the same episode may be skipped once and judged later.
fn key(event: &MarketEvent) -> (bool, &str, &str) {
    match event {
        MarketEvent::Round(round) => (true, &round.run, &round.episode),
        MarketEvent::Skipped(skipped) => (false, &skipped.run, &skipped.episode),
    }
}

/// A feed entry's key for keyed rendering.
pub fn entry_key(event: &MarketEvent) -> String {
    let (round, run, episode) = key(event);
    format!(
        "{}/{run}/{episode}",
        if round { "round" } else { "skipped" }
    )
}

/// Adds `incoming` to `feed` (newest first), skipping entries already there, then keeps the
/// newest `cap`. Times are RFC 3339 in UTC from one server, so they sort as text; entries with
/// equal times keep their order, live ones (given first) ahead of history.
pub fn merge_feed(feed: &mut Vec<MarketEvent>, incoming: Vec<MarketEvent>, cap: usize) {
    for event in incoming {
        if !feed.iter().any(|e| key(e) == key(&event)) {
            feed.push(event);
        }
    }
    feed.sort_by(|a, b| b.at().cmp(a.at()));
    feed.truncate(cap);
}

/// What a live event changes in the budgets: the run's budget now has `budget_left` available
/// (and has spent what the round paid). Returns false when the event cannot be placed on exactly
/// one budget (a run not listed yet, or several agents' budgets for one run): the refetch that
/// follows every event brings those.
pub fn apply_to_budgets(budgets: &mut [BudgetView], event: &MarketEvent) -> bool {
    let run = event.run();
    let mut matching = budgets.iter_mut().filter(|b| b.run == run);
    let (Some(budget), None) = (matching.next(), matching.next()) else {
        return false;
    };
    let (left, paid) = match event {
        MarketEvent::Round(round) => (round.budget_left, round.paid),
        MarketEvent::Skipped(skipped) => (skipped.budget_left, MicroUsdc(0)),
    };
    budget.available = left;
    budget.spent = MicroUsdc(budget.spent.0 + paid.0);
    let moved = budget.points.last().is_none_or(|p| p.available != left);
    if moved {
        budget.points.push(BudgetPoint {
            at: event.at().to_owned(),
            available: left,
        });
    }
    true
}

/// A budget's history as a small line: an SVG path over `width` x `height` (x by order, y by
/// amount, the largest at the top). Empty when there is nothing to draw.
pub fn sparkline(points: &[BudgetPoint], width: f64, height: f64) -> String {
    use crate::charts::scale::{Scale, extent, line_path};
    let values = points.iter().map(|p| p.available.0 as f64);
    let Some((lo, hi)) = extent(values.clone()) else {
        return String::new();
    };
    let y = Scale::new((lo.min(0.0), hi), (height - 1.0, 1.0));
    // A lone point is a flat line across, so it is still seen.
    if let [only] = points {
        let level = y.map(only.available.0 as f64);
        return line_path([(1.0, level), (width - 1.0, level)]);
    }
    let last = (points.len() - 1) as f64;
    let x = Scale::new((0.0, last), (1.0, width - 1.0));
    line_path(values.enumerate().map(|(i, v)| (x.map(i as f64), y.map(v))))
}

#[cfg(test)]
mod tests {
    use lachesis_shared::cats::CareCategory;
    use lachesis_shared::marketplace::{PanelChoice, RoundEvent, SkippedEvent};

    use super::*;

    fn round(run: &str, episode: &str, at: &str, paid: i64, left: i64) -> MarketEvent {
        MarketEvent::Round(Box::new(RoundEvent {
            run: run.into(),
            episode: episode.into(),
            at: at.into(),
            task: "purring".into(),
            category: CareCategory::Comfort,
            choice: PanelChoice::Bandit,
            cards: vec![],
            paid: MicroUsdc(paid),
            budget_left: MicroUsdc(left),
            panel_scores: vec![0.5],
            rewards: vec![0.4],
            answers: vec!["a".into()],
            weight_version: None,
        }))
    }

    fn skipped(run: &str, episode: &str, at: &str, left: i64) -> MarketEvent {
        MarketEvent::Skipped(SkippedEvent {
            run: run.into(),
            episode: episode.into(),
            at: at.into(),
            reason: "budget exhausted".into(),
            budget_left: MicroUsdc(left),
        })
    }

    fn budget(run: &str, available: i64) -> BudgetView {
        BudgetView {
            run: run.into(),
            account: format!("budget/{run}/agent"),
            funded: MicroUsdc(10_000_000),
            spent: MicroUsdc(10_000_000 - available),
            available: MicroUsdc(available),
            points: vec![BudgetPoint {
                at: "2026-12-01T10:00:00Z".into(),
                available: MicroUsdc(available),
            }],
        }
    }

    #[test]
    fn the_feed_merges_without_duplicates_newest_first_and_capped() {
        let mut feed = vec![round("r", "e2", "2026-12-01T10:00:02Z", 1, 1)];
        merge_feed(
            &mut feed,
            vec![
                round("r", "e3", "2026-12-01T10:00:03Z", 1, 1),
                round("r", "e2", "2026-12-01T10:00:02Z", 1, 1),
                skipped("r", "e2", "2026-12-01T10:00:01Z", 1),
            ],
            10,
        );
        let episodes: Vec<_> = feed
            .iter()
            .map(|e| (matches!(e, MarketEvent::Round(_)), e.at()))
            .collect();
        assert_eq!(
            episodes,
            [
                (true, "2026-12-01T10:00:03Z"),
                (true, "2026-12-01T10:00:02Z"),
                (false, "2026-12-01T10:00:01Z"),
            ]
        );
        merge_feed(&mut feed, vec![], 2);
        assert_eq!(feed.len(), 2);
    }

    #[test]
    fn a_round_moves_its_runs_budget_and_adds_a_point() {
        let mut budgets = vec![budget("a", 5_000_000), budget("b", 7_000_000)];
        let event = round("a", "e1", "2026-12-01T10:00:05Z", 250_000, 4_750_000);
        assert!(apply_to_budgets(&mut budgets, &event));
        assert_eq!(budgets[0].available, MicroUsdc(4_750_000));
        assert_eq!(budgets[0].spent, MicroUsdc(5_250_000));
        assert_eq!(budgets[0].points.len(), 2);
        assert_eq!(budgets[1], budget("b", 7_000_000));
        // A skip that changes nothing adds no point.
        assert!(apply_to_budgets(
            &mut budgets,
            &skipped("a", "e2", "2026-12-01T10:00:06Z", 4_750_000)
        ));
        assert_eq!(budgets[0].points.len(), 2);
        // An unknown run, or two budgets for one run: the caller reloads.
        assert!(!apply_to_budgets(&mut budgets, &skipped("c", "e", "t", 0)));
        budgets.push(budget("a", 1));
        assert!(!apply_to_budgets(&mut budgets, &skipped("a", "e3", "t", 0)));
    }

    #[test]
    fn sparklines_draw_every_point_and_a_lone_one_as_a_level() {
        let point = |v| BudgetPoint {
            at: String::new(),
            available: MicroUsdc(v),
        };
        assert_eq!(sparkline(&[], 100.0, 20.0), "");
        let path = sparkline(&[point(10), point(5), point(0)], 100.0, 20.0);
        assert_eq!(path.matches(['M', 'L']).count(), 3);
        assert!(path.starts_with("M1.0,1.0"));
        assert!(path.ends_with("L99.0,19.0"));
        assert_eq!(sparkline(&[point(3)], 100.0, 20.0).matches('L').count(), 1);
    }
}
