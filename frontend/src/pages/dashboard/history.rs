//! What the dashboard knows about one run: the HTTP history extended by live events.
//!
//! Live events and history reloads can arrive in any order (an event may overtake the answer to
//! the request made just before it), so everything is merged by key instead of appended blindly:
//! a group by its id, a status point by its time, a trainer point by its step.

use std::collections::BTreeMap;

use lachesis_shared::runs::{GroupSummary, RunMetrics, RunStatusPoint, RunSummary, TrainerPoint};

/// How many points of each kind a chart keeps; older ones fall off the left edge.
pub const KEEP: usize = 5_000;

/// Merges `incoming` into `items` (sorted by `key`), the incoming value winning on equal keys,
/// and keeps the last `cap`.
pub fn merge_by_key<T, K: Ord>(
    items: &mut Vec<T>,
    incoming: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
    cap: usize,
) {
    for item in incoming {
        // The usual case, a newer point, is a push; anything else takes the slow path.
        match items.last() {
            Some(last) if key(last) >= key(&item) => {
                let mut by_key: BTreeMap<K, T> = std::mem::take(items)
                    .into_iter()
                    .map(|t| (key(&t), t))
                    .collect();
                by_key.insert(key(&item), item);
                *items = by_key.into_values().collect();
            }
            _ => items.push(item),
        }
    }
    if items.len() > cap {
        items.drain(..items.len() - cap);
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunHistory {
    pub summary: Option<RunSummary>,
    pub groups: Vec<GroupSummary>,
    pub status: Vec<RunStatusPoint>,
    pub trainer: Vec<TrainerPoint>,
}

impl RunHistory {
    /// Takes in a history answer, keeping live points it does not have yet.
    pub fn absorb(&mut self, metrics: RunMetrics) {
        merge_by_key(&mut self.groups, metrics.groups, |g| g.id, KEEP);
        merge_by_key(&mut self.status, metrics.status, |p| p.at_ms, KEEP);
        merge_by_key(&mut self.trainer, metrics.trainer, |p| p.step, KEEP);
    }

    pub fn push_group(&mut self, group: GroupSummary) {
        let new = !self.groups.iter().rev().any(|g| g.id == group.id);
        if new && let Some(summary) = &mut self.summary {
            summary.groups += 1;
            summary.last_group_at_ms = Some(group.at_ms.max(summary.last_group_at_ms.unwrap_or(0)));
        }
        merge_by_key(&mut self.groups, [group], |g| g.id, KEEP);
    }

    pub fn push_status(&mut self, point: RunStatusPoint) {
        if let Some(summary) = &mut self.summary {
            summary.current_step = point.step;
            summary.queue_size = point.queue_size;
        }
        merge_by_key(&mut self.status, [point], |p| p.at_ms, KEEP);
    }

    pub fn push_trainer(&mut self, point: TrainerPoint) {
        merge_by_key(&mut self.trainer, [point], |p| p.step, KEEP);
    }

    /// Time zero of the x axes: when the run was created, or its first known point.
    pub fn origin_ms(&self) -> i64 {
        if let Some(summary) = &self.summary {
            return summary.created_at_ms;
        }
        let first_group = self.groups.first().map(|g| g.at_ms);
        let first_status = self.status.first().map(|p| p.at_ms);
        first_group
            .into_iter()
            .chain(first_status)
            .min()
            .unwrap_or(0)
    }

    /// The name of an environment of this run (its id when the run does not list it).
    pub fn env_name(&self, env_id: Option<i64>) -> String {
        let Some(id) = env_id else {
            return "no env".to_owned();
        };
        self.summary
            .as_ref()
            .and_then(|s| s.envs.iter().find(|e| e.env_id == id))
            .map_or_else(|| format!("env {id}"), |e| e.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(id: i64) -> GroupSummary {
        GroupSummary {
            id,
            run: "r".into(),
            env_id: None,
            at_ms: id * 1_000,
            weight_version: None,
            scores: vec![1.0],
            advantages: None,
            tokens: 4,
        }
    }

    #[test]
    fn merging_dedupes_sorts_and_caps() {
        let mut items = vec![1, 3, 5];
        merge_by_key(&mut items, [6, 2, 3], |v| *v, 10);
        assert_eq!(items, vec![1, 2, 3, 5, 6]);
        merge_by_key(&mut items, [7, 8], |v| *v, 4);
        assert_eq!(items, vec![5, 6, 7, 8]);
    }

    #[test]
    fn a_live_group_that_overtook_the_history_is_kept_once() {
        let mut history = RunHistory::default();
        history.push_group(group(3));
        history.absorb(RunMetrics {
            groups: vec![group(1), group(2), group(3)],
            ..RunMetrics::default()
        });
        history.push_group(group(3));
        history.push_group(group(4));
        let ids: Vec<i64> = history.groups.iter().map(|g| g.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        assert_eq!(history.origin_ms(), 1_000);
    }

    #[test]
    fn status_events_update_the_summary_figures() {
        let mut history = RunHistory {
            summary: Some(RunSummary {
                id: "r".into(),
                team: None,
                public: false,
                created_at_ms: 42,
                current_step: 0,
                queue_size: 0,
                groups: 0,
                last_group_at_ms: None,
                envs: vec![],
            }),
            ..RunHistory::default()
        };
        history.push_status(RunStatusPoint {
            at_ms: 100,
            step: 3,
            queue_size: 9,
        });
        history.push_group(group(1));
        history.push_group(group(1));
        let summary = history.summary.as_ref().unwrap();
        assert_eq!(
            (summary.current_step, summary.queue_size, summary.groups),
            (3, 9, 1)
        );
        assert_eq!(history.origin_ms(), 42);
        assert_eq!(history.env_name(Some(7)), "env 7");
    }
}
