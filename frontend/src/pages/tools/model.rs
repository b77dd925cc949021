//! The tools page's state: the latest episodes, each built up from its live steps.

use lachesis_shared::tools::{ToolEpisodeEvent, ToolEpisodeStep, ToolSpec};

/// Episodes kept on the page, newest first.
pub const EPISODES_SHOWN: usize = 6;

/// One episode as seen so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EpisodeView {
    pub id: u64,
    pub task: String,
    pub template: String,
    /// (server, tool) offered.
    pub tools: Vec<(String, ToolSpec)>,
    /// Calls and malformed turns, in order.
    pub steps: Vec<ToolEpisodeStep>,
    /// The `Finished` step, once the episode ended.
    pub finished: Option<ToolEpisodeStep>,
}

/// Applies one live step: a `Started` opens an episode at the top; other steps extend theirs
/// (steps of an episode that started before the page opened are dropped).
pub fn apply(episodes: &mut Vec<EpisodeView>, event: ToolEpisodeEvent) {
    let ToolEpisodeEvent { episode, step } = event;
    if let ToolEpisodeStep::Started { task, template, .. } = step {
        episodes.retain(|e| e.id != episode);
        episodes.insert(
            0,
            EpisodeView {
                id: episode,
                task,
                template,
                ..EpisodeView::default()
            },
        );
        episodes.truncate(EPISODES_SHOWN);
        return;
    }
    let Some(view) = episodes.iter_mut().find(|e| e.id == episode) else {
        return;
    };
    match step {
        ToolEpisodeStep::Offered { tool, server } => view.tools.push((server, tool)),
        finished @ ToolEpisodeStep::Finished { .. } => view.finished = Some(finished),
        other => view.steps.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(episode: u64, step: ToolEpisodeStep) -> ToolEpisodeEvent {
        ToolEpisodeEvent { episode, step }
    }

    fn started(task: &str) -> ToolEpisodeStep {
        ToolEpisodeStep::Started {
            task: task.into(),
            template: "sum".into(),
            tools: 1,
        }
    }

    #[test]
    fn steps_build_their_episode_and_new_episodes_go_on_top() {
        let mut episodes = Vec::new();
        apply(&mut episodes, event(1, started("add 2 and 3")));
        apply(
            &mut episodes,
            event(
                1,
                ToolEpisodeStep::Malformed {
                    error: "bad".into(),
                },
            ),
        );
        apply(&mut episodes, event(2, started("write a file")));
        apply(
            &mut episodes,
            event(
                1,
                ToolEpisodeStep::Finished {
                    answer: Some("5".into()),
                    solved: true,
                    score: 0.75,
                    check: "the answer is 5".into(),
                    server_failure: None,
                },
            ),
        );
        // A step of an episode never started here is dropped.
        apply(
            &mut episodes,
            event(9, ToolEpisodeStep::Malformed { error: "x".into() }),
        );
        assert_eq!(episodes.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(episodes[1].steps.len(), 1);
        assert!(matches!(
            episodes[1].finished,
            Some(ToolEpisodeStep::Finished { solved: true, .. })
        ));
        for id in 10..20 {
            apply(&mut episodes, event(id, started("more")));
        }
        assert_eq!(episodes.len(), EPISODES_SHOWN);
        assert_eq!(episodes[0].id, 19);
    }
}
