//! Following a run: its history over HTTP, then its live events, into a shared map of runs.
//!
//! The watched run and every overlaid run are followed the same way; each follower subscribes
//! while its component is mounted, so removing an overlay unsubscribes it.

use std::collections::BTreeMap;

use lachesis_shared::live::{LiveEvent, Topic};
use leptos::prelude::*;
use leptos::task::spawn_local;

use super::history::RunHistory;
use crate::api;
use crate::live::{Notice, use_topic};

/// How many groups of history a chart starts from.
pub const HISTORY_LIMIT: usize = 2_000;

pub type Runs = RwSignal<BTreeMap<String, RunHistory>>;

/// Loads (or reloads) `run`'s summary and history into `runs`; failures go to `error`.
pub fn load(run: String, runs: Runs, error: RwSignal<Option<String>>) {
    spawn_local(async move {
        // Both requests in flight at once: a reload is one round trip, not two.
        let (summary, metrics) =
            futures::future::join(api::run(&run), api::metrics(&run, HISTORY_LIMIT)).await;
        match (summary, metrics) {
            (Ok(summary), Ok(metrics)) => {
                error.set(None);
                runs.update(|m| {
                    let h = m.entry(run).or_default();
                    h.summary = Some(summary);
                    h.absorb(metrics);
                });
            }
            (Err(e), _) | (_, Err(e)) => error.set(Some(e.to_string())),
        }
    });
}

/// Keeps `run` in `runs` current while the calling component is mounted; `also` hears every
/// notice after it has been applied (the dashboard updates its table from it).
pub fn follow(
    run: String,
    runs: Runs,
    error: RwSignal<Option<String>>,
    also: impl Fn(&Notice) + 'static,
) {
    let topic = Topic::Run { run: run.clone() };
    load(run.clone(), runs, error);
    use_topic(topic, move |notice| {
        match &notice {
            Notice::Event(event) => runs.update(|m| {
                let h = m.entry(run.clone()).or_default();
                match event {
                    LiveEvent::Group(g) => h.push_group(g.clone()),
                    LiveEvent::Status(p) => h.push_status(*p),
                    LiveEvent::Trainer(t) => h.push_trainer(t.clone()),
                    // Chess events are published on game topics, never on a run's.
                    LiveEvent::ChessMove(_) | LiveEvent::ChessGame(_) => {}
                    // The marketplace feed and tool and protein episodes have their own topics.
                    LiveEvent::Market(_)
                    | LiveEvent::ToolEpisode(_)
                    | LiveEvent::ProteinEpisode(_)
                    | LiveEvent::ArenaVote(_)
                    | LiveEvent::BattleText(_) => {}
                    // Scenes have their own topic; a run's topic never carries them.
                    LiveEvent::Scene(_) => {}
                }
            }),
            Notice::Resync => load(run.clone(), runs, error),
            Notice::Lost => {}
        }
        also(&notice);
    });
}

/// An overlaid run: nothing on screen, it only keeps its entry in `runs` current and removes it
/// when the overlay is dropped.
#[component]
pub fn OverlayFeed(run: String, runs: Runs, error: RwSignal<Option<String>>) -> impl IntoView {
    follow(run.clone(), runs, error, |_| {});
    on_cleanup(move || {
        runs.update(|m| {
            m.remove(&run);
        })
    });
}
