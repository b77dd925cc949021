//! What the multi-turn tool episodes (`mcp_tools`, `protein_binder`) have in common: their steps
//! shown live as they happen, the policy asked for one turn at a time with the turns joined into
//! one training row, and the finished episodes gathered into a group.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lachesis_inference::ChatMessage;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::tools::ToolSpec;

use super::in_process::LiveFeed;
use super::{Collected, EnvConfig, EnvError, ScoredSequence};
use crate::policy::{Policy, PolicyRequest, Rollout, join_turns};

/// A step of an episode, as its viewers are sent it.
pub trait EpisodeStep {
    /// The live event that carries this step of episode number `episode`.
    fn into_event(self, episode: u64) -> LiveEvent;
}

/// Where an episode's steps are shown as they happen, if anywhere.
pub struct Observer<'a> {
    pub feed: Option<&'a dyn LiveFeed>,
    pub episode: u64,
}

impl Observer<'_> {
    /// Shown nowhere.
    pub const NONE: Observer<'static> = Observer {
        feed: None,
        episode: 0,
    };

    pub(crate) async fn emit(&self, step: impl EpisodeStep) {
        if let Some(feed) = self.feed {
            feed.publish(step.into_event(self.episode)).await;
        }
    }
}

/// Where an environment shows its episodes, numbering them in the order they start.
#[derive(Default)]
pub struct EpisodeFeed {
    feed: Option<Arc<dyn LiveFeed>>,
    started: AtomicU64,
}

impl EpisodeFeed {
    /// Shows the episodes on `feed` from now on.
    pub fn show_on(&mut self, feed: Arc<dyn LiveFeed>) {
        self.feed = Some(feed);
    }

    /// The observer of the next episode.
    pub fn next(&self) -> Observer<'_> {
        Observer {
            feed: self.feed.as_deref(),
            episode: self.started.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// The policy's next turn of the dialogue `messages`, with `tools` on offer and the rest of
/// `request`'s sampling.
pub async fn next_turn(
    policy: &dyn Policy,
    request: &PolicyRequest,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
) -> Result<Rollout, EnvError> {
    let turn_request = PolicyRequest {
        messages: messages.to_vec(),
        n: 1,
        tools: tools.to_vec(),
        ..request.clone()
    };
    policy
        .complete(turn_request)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| EnvError::Other("the policy returned no rollout".into()))
}

/// Adds a turn to a dialogue: its text as the assistant's message, and its rollout joined onto
/// the dialogue's when the turns join (see `join_turns`), else in its place. Returns the text.
pub fn record_turn(
    messages: &mut Vec<ChatMessage>,
    dialogue: &mut Option<Rollout>,
    turn: Rollout,
) -> String {
    let text = turn.completion.clone();
    let joined = match dialogue.as_ref() {
        Some(earlier) => join_turns(earlier, &turn).unwrap_or(turn),
        None => turn,
    };
    *dialogue = Some(joined);
    messages.push(ChatMessage::new("assistant", text.clone()));
    text
}

/// A finished episode as a training dialogue.
pub trait Dialogue {
    /// Its messages, its turns joined into one rollout (none when the policy never answered) and
    /// its score.
    fn into_dialogue(self) -> (Vec<ChatMessage>, Option<Rollout>, f64);
}

impl Collected {
    /// One group of multi-turn dialogues; a dialogue in which the policy never answered is left
    /// out.
    pub fn dialogues<D: Dialogue>(
        dialogues: impl IntoIterator<Item = Result<D, EnvError>>,
        config: &EnvConfig,
        policy: &dyn Policy,
    ) -> Result<Self, EnvError> {
        let mut sequences = Vec::new();
        for dialogue in dialogues {
            let (messages, rollout, score) = dialogue?.into_dialogue();
            if let Some(rollout) = rollout {
                sequences.push(ScoredSequence {
                    messages,
                    rollout,
                    score,
                    overrides: None,
                });
            }
        }
        Ok(Self::group(sequences, config, policy))
    }
}
