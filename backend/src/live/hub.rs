//! The local half of the live hub: which connection of this instance is subscribed to what, and
//! each connection's outbox.
//!
//! Events reach the hub only through [`Hub::deliver`], which the bridge calls when Postgres hands it
//! a notification (see `bridge.rs`): the hub never delivers what this instance publishes directly,
//! so every instance delivers the same stream.
//!
//! Fan-out cost: an event is serialized once per target topic and the bytes are shared by every
//! outbox (`Utf8Bytes` clones are a reference count), so a publish to 1000 subscribers is 1000
//! queue pushes, not 1000 serializations.
//!
//! Slow consumers are the outbox's business (`outbox.rs`): bounded queues, coalesced state, and
//! `Lagged` notices for what was dropped.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use lachesis_shared::live::{LiveEvent, Topic};
use serde::Serialize;
use tokio::sync::watch;

pub use super::outbox::{
    CONTROL_CAPACITY, CloseReason, Closed, Next, Outbox, STREAM_CAPACITY, encode,
};

/// Topics one connection may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// The registry of this instance's live connections. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    registry: RwLock<Registry>,
    next_id: AtomicU64,
    dropped: AtomicU64,
    stop: watch::Sender<bool>,
    /// Bumped whenever a topic gains its first subscriber or loses its last, for whatever runs
    /// only while somebody watches (the showcases).
    watched: watch::Sender<()>,
}

#[derive(Default)]
struct Registry {
    topics: HashMap<Topic, HashMap<u64, Arc<Outbox>>>,
    connections: HashMap<u64, Arc<Outbox>>,
}

/// Figures for metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HubStats {
    pub connections: usize,
    pub subscriptions: usize,
    /// Frames waiting in all outboxes together.
    pub queued: usize,
    /// Stream events waiting in the fullest outbox (never above [`STREAM_CAPACITY`]).
    pub max_stream_queued: usize,
    /// Stream events dropped for slow consumers since the hub started.
    pub dropped: u64,
}

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}

impl Hub {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                registry: RwLock::new(Registry::default()),
                next_id: AtomicU64::new(1),
                dropped: AtomicU64::new(0),
                stop: watch::channel(false).0,
                watched: watch::channel(()).0,
            }),
        }
    }

    /// Registers a connection; it receives nothing until it subscribes.
    pub fn connect(&self) -> Connection {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let outbox = Arc::new(Outbox::new(STREAM_CAPACITY));
        self.registry_mut().connections.insert(id, outbox.clone());
        Connection {
            id,
            hub: self.clone(),
            outbox,
            topics: HashSet::new(),
        }
    }

    /// Hands `event` to this instance's subscribers of `topic`. A group published on a run's topic
    /// also goes to the topic of its environment, so publishers send one notification per group.
    pub fn deliver(&self, topic: &Topic, event: &LiveEvent) {
        let derived = match (topic, event) {
            (Topic::Run { run }, LiveEvent::Group(group)) => {
                group.env_id.map(|env_id| Topic::Env {
                    run: run.clone(),
                    env_id,
                })
            }
            _ => None,
        };
        for target in std::iter::once(topic).chain(derived.as_ref()) {
            self.deliver_one(target, event);
        }
    }

    fn deliver_one(&self, topic: &Topic, event: &LiveEvent) {
        let registry = self.registry();
        let Some(subscribers) = registry.topics.get(topic) else {
            return;
        };
        let frame = encode(&EventFrame { topic, event });
        let shared_topic = Arc::new(topic.clone());
        let is_state = event.is_state();
        let mut dropped = 0;
        for outbox in subscribers.values() {
            dropped += outbox.push_event(&shared_topic, &frame, is_state);
        }
        if dropped > 0 {
            self.inner.dropped.fetch_add(dropped, Ordering::Relaxed);
        }
    }

    /// Tells every subscriber that events may have been missed (the bridge lost its database
    /// connection for a while): a `Lagged` notice with `dropped: 0`, meaning "unknown", on each
    /// subscribed topic, after what is already queued.
    pub fn lag_everyone(&self) {
        let registry = self.registry();
        for (topic, subscribers) in &registry.topics {
            let shared_topic = Arc::new(topic.clone());
            for outbox in subscribers.values() {
                outbox.mark_lagged(&shared_topic, 0);
            }
        }
    }

    /// An event of `topic` was too large to carry through Postgres: its subscribers (and, for a
    /// group on a run topic, those of the group's environment) are told one event was dropped.
    pub fn lag_topic(&self, topic: &Topic, env_id: Option<i64>) {
        let derived = match (topic, env_id) {
            (Topic::Run { run }, Some(env_id)) => Some(Topic::Env {
                run: run.clone(),
                env_id,
            }),
            _ => None,
        };
        let registry = self.registry();
        for target in std::iter::once(topic).chain(derived.as_ref()) {
            let Some(subscribers) = registry.topics.get(target) else {
                continue;
            };
            let shared_topic = Arc::new(target.clone());
            for outbox in subscribers.values() {
                outbox.mark_lagged(&shared_topic, 1);
            }
        }
    }

    /// Whether a connection of this instance is subscribed to `topic`.
    pub fn is_watched(&self, topic: &Topic) -> bool {
        self.registry().topics.contains_key(topic)
    }

    /// Changes when a topic gains its first subscriber or loses its last; ask
    /// [`Hub::is_watched`] which.
    pub fn watched_changed(&self) -> watch::Receiver<()> {
        self.inner.watched.subscribe()
    }

    /// Closes every connection (their sockets get a close frame) and stops the bridge.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
    }

    /// Resolves once [`Hub::shutdown`] has been called (at once if it already was).
    pub async fn stopped(&self) {
        let mut rx = self.inner.stop.subscribe();
        // The sender lives in `inner`, which `self` keeps alive: this cannot fail.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    pub fn stats(&self) -> HubStats {
        let registry = self.registry();
        let mut stats = HubStats {
            connections: registry.connections.len(),
            subscriptions: registry.topics.values().map(HashMap::len).sum(),
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            ..HubStats::default()
        };
        for outbox in registry.connections.values() {
            let (queued, stream) = outbox.depths();
            stats.queued += queued;
            stats.max_stream_queued = stats.max_stream_queued.max(stream);
        }
        stats
    }

    // A panic while holding the registry cannot leave it inconsistent in a way that matters more
    // than losing the hub, so a poisoned lock is used as is.
    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.inner
            .registry
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// One socket's membership in the hub. Dropping it unsubscribes everything and closes the outbox.
pub struct Connection {
    id: u64,
    hub: Hub,
    outbox: Arc<Outbox>,
    topics: HashSet<Topic>,
}

/// The connection already has [`MAX_SUBSCRIPTIONS`] topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManySubscriptions;

impl Connection {
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    pub fn is_subscribed(&self, topic: &Topic) -> bool {
        self.topics.contains(topic)
    }

    pub fn subscription_count(&self) -> usize {
        self.topics.len()
    }

    /// The topics delivered to this connection now.
    pub fn topics(&self) -> Vec<Topic> {
        self.topics.iter().cloned().collect()
    }

    /// Starts delivery of `topic`. Subscribing twice is harmless.
    pub fn subscribe(&mut self, topic: Topic) -> Result<(), TooManySubscriptions> {
        if self.topics.contains(&topic) {
            return Ok(());
        }
        if self.topics.len() >= MAX_SUBSCRIPTIONS {
            return Err(TooManySubscriptions);
        }
        let first = {
            let mut registry = self.hub.registry_mut();
            let subscribers = registry.topics.entry(topic.clone()).or_default();
            subscribers.insert(self.id, self.outbox.clone());
            subscribers.len() == 1
        };
        if first {
            self.hub.inner.watched.send_replace(());
        }
        self.topics.insert(topic);
        Ok(())
    }

    /// Stops delivery of `topic` and discards what of it is still queued, so nothing of the topic
    /// follows a reply sent after this.
    pub fn unsubscribe(&mut self, topic: &Topic) {
        if !self.topics.remove(topic) {
            return;
        }
        let last = {
            let mut registry = self.hub.registry_mut();
            match registry.topics.get_mut(topic) {
                Some(subscribers) => {
                    subscribers.remove(&self.id);
                    let last = subscribers.is_empty();
                    if last {
                        registry.topics.remove(topic);
                    }
                    last
                }
                None => false,
            }
        };
        if last {
            self.hub.inner.watched.send_replace(());
        }
        self.outbox.purge(topic);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut unwatched = false;
        {
            let mut registry = self.hub.registry_mut();
            for topic in &self.topics {
                if let Some(subscribers) = registry.topics.get_mut(topic) {
                    subscribers.remove(&self.id);
                    if subscribers.is_empty() {
                        registry.topics.remove(topic);
                        unwatched = true;
                    }
                }
            }
            registry.connections.remove(&self.id);
        }
        if unwatched {
            self.hub.inner.watched.send_replace(());
        }
        self.outbox.close(None);
    }
}

/// `ServerMsg::Event` serialized from borrowed parts, so delivery clones neither topic nor event.
/// A unit test checks that it matches `ServerMsg`'s own encoding.
#[derive(Serialize)]
#[serde(tag = "type", rename = "event")]
struct EventFrame<'a> {
    topic: &'a Topic,
    event: &'a LiveEvent,
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
