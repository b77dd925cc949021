//! The local half of the live hub: which connection of this instance is subscribed to what, and
//! each connection's outbox.
//!
//! Events reach the hub only through [`Hub::deliver`], which the bridge calls when Postgres hands it
//! a notification (see `bridge.rs`): the hub never delivers what this instance publishes directly,
//! so every instance delivers the same stream.
//!
//! Fan-out cost: an event is serialized once per target topic and the bytes are shared by every
//! outbox ([`Utf8Bytes`] clones are a reference count), so a publish to 1000 subscribers is 1000
//! queue pushes, not 1000 serializations.
//!
//! Slow consumers: an outbox holds at most [`STREAM_CAPACITY`] stream events, one slot per topic
//! for state events (overwritten, so a slow client gets the latest status, not every one) and
//! [`CONTROL_CAPACITY`] replies (the receive side waits for room, so a client that floods pings
//! without reading is simply not read further). When the stream queue is full the oldest event is
//! dropped and counted; a [`ServerMsg::Lagged`] notice takes the dropped event's place in the
//! order, so it reaches the client before any later event of that topic.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use axum::extract::ws::Utf8Bytes;
use lachesis_shared::live::{LiveEvent, ServerMsg, Topic};
use serde::Serialize;
use tokio::sync::{Notify, watch};

/// Stream events a connection may have waiting before the oldest are dropped.
pub const STREAM_CAPACITY: usize = 256;
/// Replies (subscribed, pong, error) waiting to be sent; the receive side pauses beyond this.
pub const CONTROL_CAPACITY: usize = 32;
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
            let queues = outbox.lock();
            stats.queued += queues.len();
            stats.max_stream_queued = stats.max_stream_queued.max(queues.stream.len());
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

    /// Starts delivery of `topic`. Subscribing twice is harmless.
    pub fn subscribe(&mut self, topic: Topic) -> Result<(), TooManySubscriptions> {
        if self.topics.contains(&topic) {
            return Ok(());
        }
        if self.topics.len() >= MAX_SUBSCRIPTIONS {
            return Err(TooManySubscriptions);
        }
        self.hub
            .registry_mut()
            .topics
            .entry(topic.clone())
            .or_default()
            .insert(self.id, self.outbox.clone());
        self.topics.insert(topic);
        Ok(())
    }

    /// Stops delivery of `topic` and discards what of it is still queued, so nothing of the topic
    /// follows a reply sent after this.
    pub fn unsubscribe(&mut self, topic: &Topic) {
        if !self.topics.remove(topic) {
            return;
        }
        {
            let mut registry = self.hub.registry_mut();
            if let Some(subscribers) = registry.topics.get_mut(topic) {
                subscribers.remove(&self.id);
                if subscribers.is_empty() {
                    registry.topics.remove(topic);
                }
            }
        }
        self.outbox.purge(topic);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        {
            let mut registry = self.hub.registry_mut();
            for topic in &self.topics {
                if let Some(subscribers) = registry.topics.get_mut(topic) {
                    subscribers.remove(&self.id);
                    if subscribers.is_empty() {
                        registry.topics.remove(topic);
                    }
                }
            }
            registry.connections.remove(&self.id);
        }
        self.outbox.close(None);
    }
}

/// Why a connection is being closed: the WebSocket close code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseReason {
    pub code: u16,
    pub reason: &'static str,
}

/// What the send side does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Frame(Utf8Bytes),
    /// Send a close frame (with this reason, if any) and stop.
    Close(Option<CloseReason>),
}

/// The outbox was closed; nothing more is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// One connection's frames waiting to be written. Every entry carries a sequence number and the
/// send side always takes the smallest, so frames leave in the order they were queued, whichever
/// queue holds them.
pub struct Outbox {
    queues: Mutex<Queues>,
    /// Something to send, or closed.
    ready: Notify,
    /// Room in the control queue, or closed.
    space: Notify,
}

struct Queues {
    next_seq: u64,
    stream_capacity: usize,
    control: VecDeque<(u64, Utf8Bytes)>,
    stream: VecDeque<(u64, Arc<Topic>, Utf8Bytes)>,
    state: HashMap<Arc<Topic>, (u64, Utf8Bytes)>,
    /// Per topic: events dropped, and the sequence number of the first of them (the notice's place).
    lagged: HashMap<Arc<Topic>, (u64, u64)>,
    closed: Option<Option<CloseReason>>,
}

impl Queues {
    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn len(&self) -> usize {
        self.control.len() + self.stream.len() + self.state.len() + self.lagged.len()
    }
}

/// Which queue holds the frame to send next.
enum Source {
    Control,
    Stream,
    State(Arc<Topic>),
    Lagged(Arc<Topic>),
}

impl Outbox {
    fn new(stream_capacity: usize) -> Self {
        Self {
            queues: Mutex::new(Queues {
                next_seq: 0,
                stream_capacity,
                control: VecDeque::new(),
                stream: VecDeque::new(),
                state: HashMap::new(),
                lagged: HashMap::new(),
                closed: None,
            }),
            ready: Notify::new(),
            space: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an event frame; returns how many stream events were dropped to make room (0 or 1).
    fn push_event(&self, topic: &Arc<Topic>, frame: &Utf8Bytes, is_state: bool) -> u64 {
        let mut dropped = 0;
        {
            let mut q = self.lock();
            if q.closed.is_some() {
                return 0;
            }
            let seq = q.seq();
            if is_state {
                q.state.insert(topic.clone(), (seq, frame.clone()));
            } else {
                if q.stream.len() >= q.stream_capacity
                    && let Some((old_seq, old_topic, _)) = q.stream.pop_front()
                {
                    let entry = q.lagged.entry(old_topic).or_insert((0, old_seq));
                    entry.0 += 1;
                    dropped = 1;
                }
                q.stream.push_back((seq, topic.clone(), frame.clone()));
            }
        }
        self.ready.notify_one();
        dropped
    }

    /// Adds `dropped` to the topic's `Lagged` notice (0: an unknown number), which goes out
    /// after everything queued now unless an earlier drop already placed it.
    fn mark_lagged(&self, topic: &Arc<Topic>, dropped: u64) {
        {
            let mut q = self.lock();
            if q.closed.is_some() {
                return;
            }
            let seq = q.seq();
            q.lagged.entry(topic.clone()).or_insert((0, seq)).0 += dropped;
        }
        self.ready.notify_one();
    }

    /// Queues a reply, waiting while [`CONTROL_CAPACITY`] replies are already waiting.
    pub async fn push_control(&self, frame: Utf8Bytes) -> Result<(), Closed> {
        loop {
            {
                let mut q = self.lock();
                if q.closed.is_some() {
                    return Err(Closed);
                }
                if q.control.len() < CONTROL_CAPACITY {
                    let seq = q.seq();
                    q.control.push_back((seq, frame));
                    drop(q);
                    self.ready.notify_one();
                    return Ok(());
                }
            }
            // One waiter (the receive side); a notification sent before we wait is kept as a
            // permit, so none is missed.
            self.space.notified().await;
        }
    }

    /// Queues a reply and a close: the replies already queued and this one are sent, the stream
    /// events still waiting are not.
    pub fn close_with(&self, frame: Option<Utf8Bytes>, reason: CloseReason) {
        {
            let mut q = self.lock();
            if q.closed.is_some() {
                return;
            }
            if let Some(frame) = frame {
                let seq = q.seq();
                q.control.push_back((seq, frame));
            }
            q.closed = Some(Some(reason));
        }
        self.ready.notify_one();
        self.space.notify_one();
    }

    /// Stops accepting frames; the send side sends the queued replies, then a close frame.
    pub fn close(&self, reason: Option<CloseReason>) {
        {
            let mut q = self.lock();
            if q.closed.is_none() {
                q.closed = Some(reason);
            }
        }
        self.ready.notify_one();
        self.space.notify_one();
    }

    fn purge(&self, topic: &Topic) {
        let mut q = self.lock();
        q.stream.retain(|(_, t, _)| **t != *topic);
        q.state.remove(topic);
        q.lagged.remove(topic);
    }

    /// The next frame to send, if any is waiting.
    pub fn try_next(&self) -> Option<Next> {
        let mut q = self.lock();
        if let Some(reason) = q.closed {
            let frame = q.control.pop_front().map(|(_, frame)| frame);
            drop(q);
            self.space.notify_one();
            return Some(frame.map_or(Next::Close(reason), Next::Frame));
        }
        let mut best: Option<(u64, Source)> = None;
        let mut consider = |seq: u64, source: Source| {
            if best.as_ref().is_none_or(|(s, _)| seq < *s) {
                best = Some((seq, source));
            }
        };
        if let Some((seq, _)) = q.control.front() {
            consider(*seq, Source::Control);
        }
        if let Some((seq, _, _)) = q.stream.front() {
            consider(*seq, Source::Stream);
        }
        // At most one entry per subscribed topic: a scan is cheaper than keeping them sorted.
        for (topic, (seq, _)) in &q.state {
            consider(*seq, Source::State(topic.clone()));
        }
        for (topic, (_, seq)) in &q.lagged {
            consider(*seq, Source::Lagged(topic.clone()));
        }
        let frame = match best?.1 {
            Source::Control => {
                let frame = q.control.pop_front().map(|(_, frame)| frame);
                drop(q);
                self.space.notify_one();
                frame?
            }
            Source::Stream => q.stream.pop_front()?.2,
            Source::State(topic) => q.state.remove(&topic)?.1,
            Source::Lagged(topic) => {
                let (dropped, _) = q.lagged.remove(&topic)?;
                encode(&ServerMsg::Lagged {
                    topic: (*topic).clone(),
                    dropped,
                })
            }
        };
        Some(Next::Frame(frame))
    }

    /// Waits for the next frame to send.
    pub async fn next(&self) -> Next {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            // One waiter (the send side); `notify_one` keeps a permit if we are not waiting yet.
            self.ready.notified().await;
        }
    }

    /// Frames waiting (stream, state, replies and notices).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

/// Serializes a server frame. The protocol types hold only strings, integers, floats and maps with
/// string keys, which serde_json always encodes; the fallback exists so no input can panic.
pub fn encode<T: Serialize>(msg: &T) -> Utf8Bytes {
    match serde_json::to_string(msg) {
        Ok(text) => Utf8Bytes::from(text),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a live frame");
            Utf8Bytes::from_static(
                r#"{"type":"error","code":"unsupported","message":"internal encoding error"}"#,
            )
        }
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
