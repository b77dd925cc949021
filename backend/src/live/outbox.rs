//! One connection's outbox: the frames waiting to be written to its socket, bounded.
//!
//! It holds at most [`STREAM_CAPACITY`] stream events, one slot per topic for state events
//! (overwritten, so a slow client gets the latest status, not every one) and [`CONTROL_CAPACITY`]
//! replies (the receive side waits for room, so a client that floods pings without reading is
//! simply not read further). When the stream queue is full the oldest event is dropped and
//! counted; a [`ServerMsg::Lagged`] notice takes the dropped event's place in the order, so it
//! reaches the client before any later event of that topic.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::Utf8Bytes;
use lachesis_shared::live::{ServerMsg, Topic};
use serde::Serialize;
use tokio::sync::Notify;

/// Stream events a connection may have waiting before the oldest are dropped.
pub const STREAM_CAPACITY: usize = 256;
/// Replies (subscribed, pong, error) waiting to be sent; the receive side pauses beyond this.
pub const CONTROL_CAPACITY: usize = 32;

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
    pub(super) fn new(stream_capacity: usize) -> Self {
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
    pub(super) fn push_event(&self, topic: &Arc<Topic>, frame: &Utf8Bytes, is_state: bool) -> u64 {
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
    pub(super) fn mark_lagged(&self, topic: &Arc<Topic>, dropped: u64) {
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

    pub(super) fn purge(&self, topic: &Topic) {
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

    /// Frames waiting in all (stream, state, replies, notices), and stream events alone.
    pub(super) fn depths(&self) -> (usize, usize) {
        let q = self.lock();
        (q.len(), q.stream.len())
    }

    /// Frames waiting (stream, state, replies and notices).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
