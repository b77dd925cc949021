//! What an item and a judgement must be to enter a queue.

use std::collections::BTreeSet;

use lachesis_shared::feedback::{FeedbackKind, Judgement, NewItem};

use super::MAX_TEXT_CHARS;

/// Checks an item against its queue's task.
pub(super) fn check_item(kind: FeedbackKind, item: &NewItem) -> Result<(), String> {
    let (low, high) = match kind {
        FeedbackKind::Rank => (2, 16),
        FeedbackKind::Rate => (1, 1),
        FeedbackKind::Compare => (2, 2),
    };
    if !(low..=high).contains(&item.answers.len()) {
        return Err(format!(
            "a {} item has {low}{} answers, not {}",
            kind.as_str(),
            if high > low {
                format!(" to {high}")
            } else {
                String::new()
            },
            item.answers.len()
        ));
    }
    let too_long = std::iter::once(&item.prompt)
        .chain(&item.answers)
        .any(|t| t.chars().count() > MAX_TEXT_CHARS);
    if too_long {
        return Err(format!(
            "a prompt or answer is at most {MAX_TEXT_CHARS} characters"
        ));
    }
    if item
        .source
        .as_ref()
        .is_some_and(|s| s.chars().count() > 200)
    {
        return Err("a source is at most 200 characters".into());
    }
    Ok(())
}

/// Checks a judgement against the item's kind and answers.
pub(super) fn check_judgement(
    kind: FeedbackKind,
    answers: usize,
    judgement: &Judgement,
) -> Result<(), String> {
    match (kind, judgement) {
        (FeedbackKind::Rate, Judgement::Rate { score }) if (1..=5).contains(score) => Ok(()),
        (FeedbackKind::Rate, Judgement::Rate { score }) => {
            Err(format!("a score is 1 to 5, not {score}"))
        }
        (FeedbackKind::Compare, Judgement::Compare { .. }) => Ok(()),
        (FeedbackKind::Rank, Judgement::Rank { order }) => {
            let seen: BTreeSet<usize> = order.iter().copied().collect();
            if order.len() == answers && seen.len() == answers && seen.iter().all(|&a| a < answers)
            {
                Ok(())
            } else {
                Err(format!(
                    "the order must list each of the {answers} answers once (0 to {})",
                    answers - 1
                ))
            }
        }
        (kind, _) => Err(format!("this is a {} queue", kind.as_str())),
    }
}
