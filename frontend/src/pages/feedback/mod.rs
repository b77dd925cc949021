//! Feedback queues (in the style of Label Studio or Argilla): a team's members judge items — rank
//! a group's answers, rate one answer from 1 to 5, or say which of two answers is better — and
//! the host reads how far they agree and exports the judgements as JSONL.
//!
//! - [`queues::QueuesPage`] at `/feedback`: the caller's teams' queues, and a form to open one.
//! - [`workspace::QueuePage`] at `/feedback/:id`: the annotator's workspace, one item at a time,
//!   then the agreement figures and the exports.
//!
//! The pure logic below (labels, the ranking check, number formatting) is tested natively.

mod controls;
mod queues;
mod workspace;

pub use queues::QueuesPage;
pub use workspace::QueuePage;

use lachesis_shared::feedback::FeedbackKind;

/// The kinds in the order the form offers them.
const KINDS: [FeedbackKind; 3] = [
    FeedbackKind::Rank,
    FeedbackKind::Rate,
    FeedbackKind::Compare,
];

/// The task in a word or two.
fn kind_label(kind: FeedbackKind) -> &'static str {
    match kind {
        FeedbackKind::Rank => "Rank answers",
        FeedbackKind::Rate => "Rate an answer",
        FeedbackKind::Compare => "Compare two answers",
    }
}

/// What the annotator is asked to do, in a sentence.
fn kind_help(kind: FeedbackKind) -> &'static str {
    match kind {
        FeedbackKind::Rank => "Give each answer a rank: 1 is the best; every rank once.",
        FeedbackKind::Rate => "Rate the answer from 1 (bad) to 5 (excellent).",
        FeedbackKind::Compare => "Say which answer is better, or that they are equally good.",
    }
}

/// The answer indices, best first, when `ranks` (the rank chosen for each answer, 1 the best)
/// gives every rank from 1 to the number of answers exactly once; `None` otherwise.
fn rank_order(ranks: &[Option<usize>]) -> Option<Vec<usize>> {
    let n = ranks.len();
    let mut order = vec![None::<usize>; n];
    for (answer, rank) in ranks.iter().enumerate() {
        let slot = order.get_mut(rank.filter(|&r| r >= 1)? - 1)?;
        if slot.replace(answer).is_some() {
            return None;
        }
    }
    order.into_iter().collect()
}

/// Krippendorff's alpha as shown, or why there is none yet.
fn alpha_text(alpha: Option<f64>) -> String {
    match alpha {
        Some(alpha) => format!("Krippendorff's α = {alpha:.3}"),
        None => "Krippendorff's α: not defined yet (it needs items judged by at least two \
                 people, and some variation)"
            .to_owned(),
    }
}

/// A share in whole percent; a dash when undefined.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "—".to_owned(), |s| format!("{:.0}%", s * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranking_must_be_a_permutation() {
        assert_eq!(
            rank_order(&[Some(3), Some(1), Some(2)]),
            Some(vec![1, 2, 0])
        );
        assert_eq!(
            rank_order(&[Some(3), Some(2), Some(1)]),
            Some(vec![2, 1, 0])
        );
        assert_eq!(rank_order(&[Some(1), Some(2)]), Some(vec![0, 1]));
        assert_eq!(rank_order(&[Some(1), Some(1)]), None);
        assert_eq!(rank_order(&[Some(1), None]), None);
        assert_eq!(rank_order(&[Some(0), Some(1)]), None);
        assert_eq!(rank_order(&[Some(1), Some(3)]), None);
    }

    #[test]
    fn numbers_are_rounded_for_reading() {
        assert_eq!(alpha_text(Some(0.81234)), "Krippendorff's α = 0.812");
        assert!(alpha_text(None).contains("not defined"));
        assert_eq!(percent(Some(0.666)), "67%");
        assert_eq!(percent(None), "—");
    }

    #[test]
    fn the_form_offers_every_kind() {
        for kind in KINDS {
            assert_eq!(FeedbackKind::parse(kind.as_str()), Some(kind));
            assert!(!kind_label(kind).is_empty() && !kind_help(kind).is_empty());
        }
    }
}
