//! The dashboard's chart data: the watched run split by environment, each overlaid run as one
//! dashed line. Pure, so the choices of colour, label and grouping are unit-tested.

use std::collections::BTreeMap;

use lachesis_shared::runs::GroupSummary;

use super::history::RunHistory;
use crate::charts::series::{
    Series, color, rate_points, reward_by_env, status_points, tokens_by_env, trainer_by_key,
};

/// The window over which groups per second are counted.
pub const RATE_WINDOW_MS: i64 = 30_000;

/// Every chart's lines, recomputed when any followed run changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChartSet {
    pub reward: Vec<Series>,
    pub tokens: Vec<Series>,
    pub rate: Vec<Series>,
    pub queue: Vec<Series>,
    pub step: Vec<Series>,
    /// One chart per trainer metric name.
    pub trainer: Vec<(String, Vec<Series>)>,
}

fn line(label: String, color: &'static str, dashed: bool, points: Vec<(f64, f64)>) -> Series {
    Series {
        label,
        color,
        dashed,
        points,
        band: Vec::new(),
    }
}

/// Every group of a run as one series, for an overlaid run (its environments merged).
fn merged_reward(groups: &[GroupSummary], origin: i64) -> Vec<(f64, f64)> {
    groups
        .iter()
        .filter_map(|g| g.mean_score().map(|m| ((g.at_ms - origin) as f64, m)))
        .collect()
}

pub fn build(runs: &BTreeMap<String, RunHistory>, main: &str, overlays: &[String]) -> ChartSet {
    let mut set = ChartSet::default();
    let mut trainer: Vec<(String, Vec<Series>)> = Vec::new();
    let mut add_trainer =
        |key: String, series: Series| match trainer.iter_mut().find(|t| t.0 == key) {
            Some((_, list)) => list.push(series),
            None => trainer.push((key, vec![series])),
        };

    let mut next_color = 0;
    if let Some(h) = runs.get(main) {
        let origin = h.origin_ms();
        let envs = reward_by_env(&h.groups, origin);
        let tokens = tokens_by_env(&h.groups, origin);
        // One colour per environment, the same on the reward and token charts.
        for (i, (env, points)) in envs.into_iter().enumerate() {
            let c = color(i);
            set.reward.push(Series {
                label: h.env_name(env),
                color: c,
                dashed: false,
                points: points.iter().map(|p| (p.x, p.mean)).collect(),
                band: points.iter().map(|p| (p.x, p.min, p.max)).collect(),
            });
            if let Some(t) = tokens.get(&env) {
                set.tokens.push(line(h.env_name(env), c, false, t.clone()));
            }
            next_color = i + 1;
        }
        let c = color(0);
        set.rate.push(line(
            main.to_owned(),
            c,
            false,
            rate_points(&h.groups, origin, RATE_WINDOW_MS),
        ));
        let (queue, step) = status_points(&h.status, origin);
        set.queue.push(line(main.to_owned(), c, false, queue));
        set.step.push(line(main.to_owned(), c, false, step));
        for (key, points) in trainer_by_key(&h.trainer) {
            add_trainer(key, line(main.to_owned(), c, false, points));
        }
    }

    for (i, run) in overlays.iter().filter(|r| r.as_str() != main).enumerate() {
        let Some(h) = runs.get(run) else { continue };
        let origin = h.origin_ms();
        // Distinct from the main run's environment colours, and dashed.
        let c = color(next_color.max(1) + i);
        let dashed = |points| line(run.clone(), c, true, points);
        set.reward.push(dashed(merged_reward(&h.groups, origin)));
        set.tokens.push(dashed(
            h.groups
                .iter()
                .map(|g| ((g.at_ms - origin) as f64, g.tokens as f64))
                .collect(),
        ));
        set.rate
            .push(dashed(rate_points(&h.groups, origin, RATE_WINDOW_MS)));
        let (queue, step) = status_points(&h.status, origin);
        set.queue.push(dashed(queue));
        set.step.push(dashed(step));
        for (key, points) in trainer_by_key(&h.trainer) {
            add_trainer(key, dashed(points));
        }
    }
    set.trainer = trainer;
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::runs::{EnvSummary, RunSummary, TrainerPoint};

    fn group(id: i64, env: i64, at_ms: i64) -> GroupSummary {
        GroupSummary {
            id,
            run: "r".into(),
            env_id: Some(env),
            at_ms,
            weight_version: None,
            scores: vec![0.0, 1.0],
            advantages: None,
            tokens: 8,
        }
    }

    fn history(created: i64, groups: Vec<GroupSummary>) -> RunHistory {
        RunHistory {
            summary: Some(RunSummary {
                id: "r".into(),
                team: None,
                public: false,
                created_at_ms: created,
                current_step: 0,
                queue_size: 0,
                groups: groups.len() as i64,
                last_group_at_ms: None,
                envs: vec![EnvSummary {
                    env_id: 0,
                    name: "arithmetic".into(),
                    group_size: 2,
                    weight: 1.0,
                    connected: true,
                }],
            }),
            groups,
            status: vec![],
            trainer: vec![TrainerPoint {
                at_ms: 0,
                step: 1,
                values: [("loss".to_owned(), 0.5)].into(),
            }],
        }
    }

    #[test]
    fn the_main_run_splits_by_env_and_overlays_are_dashed() {
        let mut runs = BTreeMap::new();
        runs.insert(
            "a".to_owned(),
            history(
                0,
                vec![group(1, 0, 1_000), group(2, 1, 2_000), group(3, 0, 3_000)],
            ),
        );
        runs.insert("b".to_owned(), history(10_000, vec![group(4, 0, 11_000)]));
        let set = build(
            &runs,
            "a",
            &["b".to_owned(), "a".to_owned(), "gone".to_owned()],
        );

        let labels: Vec<&str> = set.reward.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["arithmetic", "env 1", "b"]);
        assert_eq!(set.reward[0].points.len(), 2);
        assert_eq!(
            set.reward[0].band,
            vec![(1_000.0, 0.0, 1.0), (3_000.0, 0.0, 1.0)]
        );
        // The overlay is aligned on its own start and drawn dashed in a colour of its own.
        assert_eq!(set.reward[2].points, vec![(1_000.0, 0.5)]);
        assert!(set.reward[2].dashed && !set.reward[0].dashed);
        assert!(
            set.reward[2].color != set.reward[0].color
                && set.reward[2].color != set.reward[1].color
        );
        assert_eq!(set.rate.len(), 2);
        assert_eq!(set.trainer.len(), 1);
        assert_eq!(set.trainer[0].0, "loss");
        assert_eq!(set.trainer[0].1.len(), 2);
    }
}
