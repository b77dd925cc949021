//! The cat caretaker data, compiled in from `data/cats/` (Atropos's behaviors and scenarios, MIT;
//! the categories, expected behaviors and remedies in `tasks.json` are this project's).

use std::sync::OnceLock;

use lachesis_shared::cats::{CareCategory, CatBehavior, CatScenario, CatTask};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

const BEHAVIORS_JSON: &str = include_str!("../../../../data/cats/cat_behaviors.json");
const TASKS_JSON: &str = include_str!("../../../../data/cats/tasks.json");

/// Why a data file was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CatDataError {
    #[error("not valid JSON of the expected shape: {0}")]
    Json(String),
    #[error("scenario {0} names the unknown behavior {1:?}")]
    UnknownBehavior(u32, String),
    #[error("scenario {0} has no behaviors or no remedies")]
    Incomplete(u32),
    #[error("scenario ids must run 1, 2, 3, ... (found {found} at position {position})")]
    BadId { position: usize, found: u32 },
    #[error("no scenarios")]
    Empty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TasksFile {
    categories: Vec<CareCategory>,
    scenarios: Vec<CatScenario>,
}

/// Behaviors and scenarios, checked against each other.
#[derive(Debug, Clone)]
pub struct CatData {
    pub behaviors: Vec<CatBehavior>,
    pub scenarios: Vec<CatScenario>,
}

impl CatData {
    pub fn parse(behaviors_json: &str, tasks_json: &str) -> Result<Self, CatDataError> {
        let behaviors: Vec<CatBehavior> =
            serde_json::from_str(behaviors_json).map_err(|e| CatDataError::Json(e.to_string()))?;
        let tasks: TasksFile =
            serde_json::from_str(tasks_json).map_err(|e| CatDataError::Json(e.to_string()))?;
        if tasks.scenarios.is_empty() || tasks.categories.is_empty() {
            return Err(CatDataError::Empty);
        }
        for (position, scenario) in tasks.scenarios.iter().enumerate() {
            if scenario.id as usize != position + 1 {
                return Err(CatDataError::BadId {
                    position,
                    found: scenario.id,
                });
            }
            if scenario.behaviors.is_empty() || scenario.remedy.is_empty() {
                return Err(CatDataError::Incomplete(scenario.id));
            }
            if let Some(unknown) = scenario
                .behaviors
                .iter()
                .find(|name| !behaviors.iter().any(|b| &b.behavior == *name))
            {
                return Err(CatDataError::UnknownBehavior(scenario.id, unknown.clone()));
            }
        }
        Ok(Self {
            behaviors,
            scenarios: tasks.scenarios,
        })
    }

    /// The compiled-in data (checked by this crate's tests, so it always parses).
    pub fn builtin() -> Result<&'static CatData, CatDataError> {
        static DATA: OnceLock<Result<CatData, CatDataError>> = OnceLock::new();
        DATA.get_or_init(|| CatData::parse(BEHAVIORS_JSON, TASKS_JSON))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn behavior(&self, name: &str) -> Option<&CatBehavior> {
        self.behaviors.iter().find(|b| b.behavior == name)
    }

    /// The task for a seed: a scenario, two or three of its behaviors in random order and, one
    /// time in three, an unrelated behavior mixed in (cats are not tidy signallers).
    pub fn task(&self, seed: u64) -> CatTask {
        let mut rng = StdRng::seed_from_u64(seed);
        let scenario = self.scenarios[rng.random_range(0..self.scenarios.len())].clone();
        let mut names: Vec<&String> = scenario.behaviors.iter().collect();
        names.shuffle(&mut rng);
        names.truncate(rng.random_range(2..=3).min(names.len()));
        let mut observed: Vec<CatBehavior> = names
            .iter()
            .filter_map(|name| self.behavior(name).cloned())
            .collect();
        if rng.random_range(0..3) == 0 {
            let unrelated: Vec<&CatBehavior> = self
                .behaviors
                .iter()
                .filter(|b| !scenario.behaviors.contains(&b.behavior))
                .collect();
            if !unrelated.is_empty() {
                let extra = unrelated[rng.random_range(0..unrelated.len())].clone();
                let at = rng.random_range(0..=observed.len());
                observed.insert(at, extra);
            }
        }
        CatTask { scenario, observed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_data_is_complete_and_consistent() {
        let data = CatData::builtin().expect("the shipped data parses");
        assert_eq!(data.behaviors.len(), 35);
        assert_eq!(data.scenarios.len(), 61);
        for category in CareCategory::ALL {
            let n = data
                .scenarios
                .iter()
                .filter(|s| s.category == category)
                .count();
            assert!(n >= 5, "{category:?} has {n} scenarios");
        }
        // The scenario texts are Atropos's, unchanged.
        let original: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../../../data/cats/cat_scenarios.json")).unwrap();
        for (ours, theirs) in data.scenarios.iter().zip(&original) {
            assert_eq!(Some(ours.scenario.as_str()), theirs["scenario"].as_str());
        }
    }

    #[test]
    fn tasks_show_their_needs_behaviors() {
        let data = CatData::builtin().unwrap();
        let mut with_unrelated = 0;
        for seed in 0..300 {
            let task = data.task(seed);
            assert_eq!(task, data.task(seed), "a seed gives one task");
            let related = task
                .observed
                .iter()
                .filter(|b| task.scenario.behaviors.contains(&b.behavior))
                .count();
            assert!(related >= 2.min(task.scenario.behaviors.len()));
            with_unrelated += usize::from(related < task.observed.len());
        }
        assert!(
            (50..150).contains(&with_unrelated),
            "{with_unrelated} of 300 with a distractor"
        );
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let behaviors = r#"[{"behavior": "Purring", "description": "content"}]"#;
        let task = |id: u32, behavior: &str| {
            format!(
                r#"{{"categories": ["Health"], "scenarios": [{{"id": {id}, "scenario": "s",
                "category": "Health", "behaviors": ["{behavior}"], "remedy": ["vet"]}}]}}"#
            )
        };
        assert!(CatData::parse(behaviors, &task(1, "Purring")).is_ok());
        assert_eq!(
            CatData::parse(behaviors, &task(1, "Barking")).unwrap_err(),
            CatDataError::UnknownBehavior(1, "Barking".into())
        );
        assert!(matches!(
            CatData::parse(behaviors, &task(2, "Purring")),
            Err(CatDataError::BadId { .. })
        ));
        assert!(matches!(
            CatData::parse("{", &task(1, "Purring")),
            Err(CatDataError::Json(_))
        ));
        assert!(matches!(
            CatData::parse(
                behaviors,
                &task(1, "Purring").replace("Health\"]", "Hunger\"]")
            ),
            Err(CatDataError::Json(_))
        ));
    }
}
