use super::*;
use crate::policy::{PolicyError, Rollout};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;

/// Answers every prompt with the same texts, in turn.
struct ScriptedPolicy(Vec<String>);

impl Policy for ScriptedPolicy {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let rollouts = (0..request.n)
            .map(|i| Rollout {
                completion: self.0[i % self.0.len()].clone(),
                ..crate::envs::test_rollout(&[1], &[2])
            })
            .collect();
        futures::future::ready(Ok(rollouts)).boxed()
    }
}

#[derive(Default)]
struct Collecting(Mutex<Vec<Episode>>);

impl SceneSink for Collecting {
    fn episode(&self, episode: Episode) {
        self.0.lock().unwrap().push(episode);
    }
}

fn env(group_size: usize) -> SpatialEnv {
    SpatialEnv::new(&EnvOptions {
        seed: 11,
        group_size: Some(group_size),
        ..EnvOptions::default()
    })
    .expect("valid options")
}

#[tokio::test]
async fn a_group_rewards_the_solution_over_nonsense_and_shows_every_attempt() {
    let task = generate::generate(21, 2);
    let solution = render_actions(&solve::solve(&task).actions);
    let policy = ScriptedPolicy(vec![solution, "I am not sure.".into()]);
    let sink = Arc::new(Collecting::default());
    let env = env(2).with_sink(sink.clone());
    let collected = env
        .collect(json!({"seed": 21, "difficulty": 2}), &policy)
        .await
        .expect("collects");
    let scores = collected.group.expect("a group").scores();
    assert!(scores[0] >= 0.95, "{scores:?}");
    assert_eq!(scores[1], 0.0);
    let shown = sink.0.lock().unwrap();
    assert_eq!(shown.len(), 2);
    assert!(
        shown[0].recording.frames.len() >= 2,
        "the episode was recorded"
    );
    assert!(
        shown[1]
            .attempt
            .starts_with("unreadable answer: no JSON found"),
        "{}",
        shown[1].attempt
    );
    assert!(
        shown[1]
            .verdict
            .goals
            .iter()
            .all(|g| g.credit == 0.0 && !g.satisfied),
        "an unreadable answer earns nothing on any goal"
    );
    assert_eq!(shown[0].task, task);
}

#[tokio::test]
async fn items_are_seeded_and_bad_items_are_refused() {
    let (a, b) = (env(2), env(2));
    for _ in 0..20 {
        let item = a.next_item().await.unwrap().unwrap();
        assert_eq!(Some(item.clone()), b.next_item().await.unwrap());
        let task_ref: TaskRef = serde_json::from_value(item).unwrap();
        assert!(task_ref.seed < EVAL_SEED && [1, 2].contains(&task_ref.difficulty));
    }
    let policy = ScriptedPolicy(vec!["[]".into()]);
    for bad in [
        json!({"seed": 1, "difficulty": 9}),
        json!({"seed": "x"}),
        json!(null),
    ] {
        assert!(matches!(
            a.collect(bad, &policy).await,
            Err(EnvError::InvalidItem(_))
        ));
    }
}

#[tokio::test]
async fn evaluation_runs_fixed_tasks_and_reports_per_difficulty() {
    let env = SpatialEnv::new(&EnvOptions {
        settings: serde_json::Map::from_iter([("eval_per_difficulty".into(), json!(2))]),
        ..EnvOptions::default()
    })
    .unwrap();
    let tasks = env.eval_set();
    assert_eq!(tasks.len(), 8);
    assert_eq!(tasks, env.eval_set(), "the same tasks every time");
    let outcome = env
        .evaluate(&ScriptedPolicy(vec!["{}".into()]))
        .await
        .unwrap();
    assert_eq!(outcome.metrics["eval/n"], 8.0);
    assert_eq!(outcome.metrics["eval/parse_rate"], 0.0);
    assert_eq!(outcome.metrics["eval/mean_score"], 0.0);
    assert!(outcome.metrics.contains_key("eval/difficulty_4_mean_score"));
    assert!(
        outcome.samples[0]["error"]
            .as_str()
            .unwrap()
            .contains("action 1")
    );
}

#[test]
fn the_prompt_carries_a_worked_example_that_parses_back() {
    let task = generate::generate(4, 1);
    let messages = messages(&task, 1);
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let example = generate::generate(EXAMPLE_SEED, 1);
    let actions = parse_actions(&messages[2].content, &example).expect("the example parses");
    let settled = physics::simulate(&example.objects, &actions, 0);
    assert!(score(&example, settled.recording.frames.last().unwrap()).score >= 0.95);
    assert!(messages[3].content.contains(&task.movable[0]));
}

#[test]
fn unknown_settings_and_difficulties_are_refused() {
    for settings in [
        json!({"difficulty": 2}),
        json!({"difficulties": [0]}),
        json!({"difficulties": []}),
    ] {
        let options = EnvOptions {
            settings: settings.as_object().unwrap().clone(),
            ..EnvOptions::default()
        };
        assert!(
            matches!(SpatialEnv::new(&options), Err(EnvError::InvalidOption(_))),
            "{settings}"
        );
    }
}
