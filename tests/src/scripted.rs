//! A policy that answers from a script, for tests of environments whose mechanics (payments,
//! judging, the feed) must not depend on what a 135M model happens to say.

use std::sync::Mutex;

use futures::FutureExt;
use futures::future::BoxFuture;
use lachesis::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout, rollout_from_ids};

/// Answers the `i`-th completion of every request with `answers[i % len]`; the test swaps the
/// answers between episodes. Every request is kept for inspection.
#[derive(Default)]
pub struct ScriptedPolicy {
    pub answers: Mutex<Vec<String>>,
    pub requests: Mutex<Vec<PolicyRequest>>,
    /// When set, answers requests it returns `Some` for (e.g. by their system prompt).
    #[allow(clippy::type_complexity)]
    pub responder: Option<Box<dyn Fn(&PolicyRequest) -> Option<String> + Send + Sync>>,
}

impl ScriptedPolicy {
    pub fn new(answers: &[&str]) -> Self {
        let policy = Self::default();
        policy.set(answers.iter().map(|a| a.to_string()).collect());
        policy
    }

    /// Answers the requests `responder` picks with its text, the rest from the script.
    pub fn with_responder(
        mut self,
        responder: impl Fn(&PolicyRequest) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.responder = Some(Box::new(responder));
        self
    }

    pub fn set(&self, answers: Vec<String>) {
        *self.answers.lock().unwrap() = answers;
    }
}

impl Policy for ScriptedPolicy {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let answers = match self.responder.as_ref().and_then(|r| r(&request)) {
            Some(text) => vec![text],
            None => self.answers.lock().unwrap().clone(),
        };
        let rollouts = (0..request.n)
            .map(|i| {
                let text = answers
                    .get(i % answers.len().max(1))
                    .cloned()
                    .unwrap_or_default();
                let ids: Vec<u32> = text.bytes().map(u32::from).collect();
                rollout_from_ids(&[1, 2, 3], &ids, &vec![-0.5; ids.len()], text, Finish::Stop)
            })
            .collect();
        self.requests.lock().unwrap().push(request);
        futures::future::ready(Ok(rollouts)).boxed()
    }
}
