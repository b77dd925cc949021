//! The live client: one WebSocket per tab to `/ws`, shared by every page through context.
//!
//! Pages subscribe to topics with [`use_topic`]; subscriptions are counted per topic so two
//! components watching the same run share one server subscription, and the server is told to
//! unsubscribe only when the last one unmounts.
//!
//! The socket heals itself: it pings every `heartbeat_ms` (from `Welcome`) and treats silence as
//! a dead connection, reconnects with capped, jittered exponential backoff, and resubscribes
//! every active topic. Because events sent while it was away are gone, listeners get
//! [`Notice::Resync`] each time the server confirms their topic (and when it reports `Lagged`):
//! that is their cue to reload history over HTTP. Reloading after the confirmation, not before,
//! is what leaves no gap: from then on every event arrives over the socket. [`Notice::Lost`]
//! says the socket went away and events may be missing until the next `Resync`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};
use std::time::Duration;

use lachesis_shared::live::{ClientMsg, LiveErrorCode, LiveEvent, ServerMsg, Topic};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

/// What the connection indicator shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// The first connection attempt has not succeeded yet.
    Connecting,
    /// Welcomed by the server.
    Live,
    /// The socket closed; a new attempt is scheduled.
    Reconnecting,
}

/// What a topic's listener hears.
#[derive(Debug, Clone)]
pub enum Notice {
    Event(LiveEvent),
    /// The topic is subscribed (again), or the server dropped events (`Lagged`): reload from
    /// HTTP; every later event will arrive.
    Resync,
    /// The socket closed: nothing arrives until the next `Resync`.
    Lost,
}

/// The longest wait between reconnection attempts.
const MAX_BACKOFF_MS: f64 = 15_000.0;
const BASE_BACKOFF_MS: f64 = 500.0;

/// Delay before reconnection attempt `attempt` (1-based): doubling from 0.5 s, capped at 15 s,
/// then scaled by `jitter` in [0, 1) to between 50 % and 100 % so that tabs that lost the same
/// server do not all come back in the same instant.
pub fn backoff_ms(attempt: u32, jitter: f64) -> f64 {
    let exp = BASE_BACKOFF_MS * 2f64.powi(attempt.saturating_sub(1).min(16) as i32);
    exp.min(MAX_BACKOFF_MS) * (0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// The socket URL for a page served at `protocol`//`host`.
pub fn socket_url(protocol: &str, host: &str) -> String {
    let scheme = if protocol == "https:" { "wss" } else { "ws" };
    format!("{scheme}://{host}/ws")
}

type Listener = Rc<dyn Fn(Notice)>;
/// Hears the server's error frames, which belong to no topic (a refused chess move).
type ErrorListener = Rc<dyn Fn(LiveErrorCode, &str)>;

/// A socket and the callbacks that must live as long as it does.
struct Socket {
    ws: WebSocket,
    _on_open: Closure<dyn FnMut()>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut(CloseEvent)>,
}

impl Socket {
    fn send(&self, msg: &ClientMsg) {
        if self.ws.ready_state() == WebSocket::OPEN
            && let Ok(text) = serde_json::to_string(msg)
        {
            let _ = self.ws.send_with_str(&text);
        }
    }

    fn close(self) {
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        let _ = self.ws.close();
    }
}

#[derive(Default)]
struct Inner {
    socket: Option<Socket>,
    /// Which socket callbacks belong to: callbacks of an older socket are ignored.
    generation: u64,
    topics: BTreeMap<Topic, usize>,
    listeners: Vec<(u64, Topic, Listener)>,
    error_listeners: Vec<(u64, ErrorListener)>,
    next_listener: u64,
    /// Failed attempts since the last welcome.
    attempt: u32,
    welcomed_once: bool,
    /// Topics the server has confirmed on the current socket.
    confirmed: BTreeSet<Topic>,
    heartbeat: Option<IntervalHandle>,
    heartbeat_ms: f64,
    last_heard_ms: f64,
    nonce: u64,
    retry: Option<TimeoutHandle>,
}

struct Hub {
    state: RwSignal<LinkState>,
    inner: RefCell<Inner>,
    me: Weak<Hub>,
}

impl Hub {
    fn connect(&self) {
        let url = {
            let location = window().location();
            socket_url(
                &location.protocol().unwrap_or_default(),
                &location.host().unwrap_or_default(),
            )
        };
        let Ok(ws) = WebSocket::new(&url) else {
            self.schedule_reconnect();
            return;
        };
        let generation = {
            let mut inner = self.inner.borrow_mut();
            inner.generation += 1;
            inner.generation
        };

        let hub = self.me.clone();
        let on_open = Closure::<dyn FnMut()>::new(move || {
            if let Some(hub) = hub.upgrade() {
                hub.opened(generation);
            }
        });
        let hub = self.me.clone();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            if let (Some(hub), Some(text)) = (hub.upgrade(), event.data().as_string()) {
                hub.received(generation, &text);
            }
        });
        let hub = self.me.clone();
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |_: CloseEvent| {
            if let Some(hub) = hub.upgrade() {
                hub.closed(generation);
            }
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        self.inner.borrow_mut().socket = Some(Socket {
            ws,
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
        });
    }

    fn opened(&self, generation: u64) {
        let mut inner = self.inner.borrow_mut();
        if inner.generation != generation {
            return;
        }
        inner.last_heard_ms = js_sys::Date::now();
        if let Some(socket) = &inner.socket {
            for topic in inner.topics.keys() {
                socket.send(&ClientMsg::Subscribe {
                    topic: topic.clone(),
                });
            }
        }
    }

    fn received(&self, generation: u64, text: &str) {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.generation != generation {
                return;
            }
            inner.last_heard_ms = js_sys::Date::now();
        }
        // A frame we cannot read is skipped: newer servers may send kinds we do not know yet.
        let Ok(msg) = serde_json::from_str::<ServerMsg>(text) else {
            return;
        };
        match msg {
            ServerMsg::Welcome { heartbeat_ms, .. } => {
                {
                    let mut inner = self.inner.borrow_mut();
                    inner.attempt = 0;
                    inner.welcomed_once = true;
                    inner.heartbeat_ms = heartbeat_ms.max(1_000) as f64;
                }
                self.start_heartbeat();
                self.state.set(LinkState::Live);
            }
            ServerMsg::Subscribed { topic } => {
                let wanted = {
                    let mut inner = self.inner.borrow_mut();
                    let wanted = inner.topics.contains_key(&topic);
                    if wanted {
                        inner.confirmed.insert(topic.clone());
                    }
                    wanted
                };
                if wanted {
                    self.notify(&topic, Notice::Resync);
                }
            }
            ServerMsg::Event { topic, event } => self.notify(&topic, Notice::Event(event)),
            ServerMsg::Lagged { topic, .. } => self.notify(&topic, Notice::Resync),
            ServerMsg::Error { code, message } => {
                let listeners: Vec<ErrorListener> = (self.inner.borrow().error_listeners.iter())
                    .map(|(_, l)| l.clone())
                    .collect();
                for listener in listeners {
                    listener(code, &message);
                }
            }
            ServerMsg::Unsubscribed { .. } | ServerMsg::Pong { .. } => {}
        }
    }

    fn closed(&self, generation: u64) {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.generation != generation {
                return;
            }
            if let Some(socket) = inner.socket.take() {
                socket.close();
            }
        }
        self.lost();
        self.schedule_reconnect();
    }

    /// Forgets the confirmations of a socket that is gone and tells every listener.
    fn lost(&self) {
        let topics = std::mem::take(&mut self.inner.borrow_mut().confirmed);
        for topic in topics {
            self.notify(&topic, Notice::Lost);
        }
    }

    fn schedule_reconnect(&self) {
        self.stop_heartbeat();
        let delay = {
            let mut inner = self.inner.borrow_mut();
            inner.attempt += 1;
            if let Some(retry) = inner.retry.take() {
                retry.clear();
            }
            backoff_ms(inner.attempt, js_sys::Math::random())
        };
        self.show_retrying();
        let hub = self.me.clone();
        let handle = set_timeout_with_handle(
            move || {
                if let Some(hub) = hub.upgrade() {
                    hub.inner.borrow_mut().retry = None;
                    hub.connect();
                }
            },
            Duration::from_millis(delay as u64),
        );
        self.inner.borrow_mut().retry = handle.ok();
    }

    /// "reconnecting" once a connection has worked; before that the badge keeps "connecting".
    fn show_retrying(&self) {
        if self.inner.borrow().welcomed_once {
            self.state.set(LinkState::Reconnecting);
        }
    }

    fn start_heartbeat(&self) {
        self.stop_heartbeat();
        let every = self.inner.borrow().heartbeat_ms;
        let hub = self.me.clone();
        let handle = set_interval_with_handle(
            move || {
                if let Some(hub) = hub.upgrade() {
                    hub.beat();
                }
            },
            Duration::from_millis(every as u64),
        );
        self.inner.borrow_mut().heartbeat = handle.ok();
    }

    fn stop_heartbeat(&self) {
        if let Some(handle) = self.inner.borrow_mut().heartbeat.take() {
            handle.clear();
        }
    }

    /// One heartbeat: ping, or give up on a socket that stopped answering (a pong, or anything
    /// else, must have arrived within two and a half beats).
    fn beat(&self) {
        let dead = {
            let mut inner = self.inner.borrow_mut();
            let silent = js_sys::Date::now() - inner.last_heard_ms;
            if silent > inner.heartbeat_ms * 2.5 {
                true
            } else {
                inner.nonce += 1;
                let nonce = inner.nonce;
                if let Some(socket) = &inner.socket {
                    socket.send(&ClientMsg::Ping { nonce });
                }
                false
            }
        };
        if dead {
            let generation = self.inner.borrow().generation;
            self.closed(generation);
        }
    }

    fn notify(&self, topic: &Topic, notice: Notice) {
        // Clone the listeners out first: a listener may subscribe or unsubscribe.
        let listeners: Vec<Listener> = self
            .inner
            .borrow()
            .listeners
            .iter()
            .filter(|(_, t, _)| t == topic)
            .map(|(_, _, l)| l.clone())
            .collect();
        for listener in listeners {
            listener(notice.clone());
        }
    }

    fn send(&self, msg: ClientMsg) {
        if let Some(socket) = &self.inner.borrow().socket {
            socket.send(&msg);
        }
    }
}

/// The app's handle on the live hub: cheap to copy, provided as context by [`provide_live`].
#[derive(Clone, Copy)]
pub struct Live {
    hub: StoredValue<Rc<Hub>, LocalStorage>,
    pub state: ReadSignal<LinkState>,
}

impl Live {
    /// Adds a listener for `topic`; the server subscription starts with the first listener.
    pub fn subscribe(&self, topic: Topic, listener: impl Fn(Notice) + 'static) -> u64 {
        let Some(hub) = self.hub.try_get_value() else {
            return 0;
        };
        let listener: Listener = Rc::new(listener);
        let (id, first, confirmed) = {
            let mut inner = hub.inner.borrow_mut();
            inner.next_listener += 1;
            let id = inner.next_listener;
            inner.listeners.push((id, topic.clone(), listener.clone()));
            let count = inner.topics.entry(topic.clone()).or_insert(0);
            *count += 1;
            (id, *count == 1, inner.confirmed.contains(&topic))
        };
        if first {
            hub.send(ClientMsg::Subscribe { topic });
        } else if confirmed {
            // The server will not confirm a topic twice: this listener joins a live stream.
            listener(Notice::Resync);
        }
        id
    }

    /// Removes a listener; the last one of a topic unsubscribes on the server.
    pub fn unsubscribe(&self, id: u64) {
        let Some(hub) = self.hub.try_get_value() else {
            return;
        };
        let last = {
            let mut inner = hub.inner.borrow_mut();
            let Some(at) = inner.listeners.iter().position(|(i, _, _)| *i == id) else {
                return;
            };
            let (_, topic, _) = inner.listeners.remove(at);
            let count = inner.topics.get_mut(&topic).map(|c| {
                *c -= 1;
                *c
            });
            if count == Some(0) {
                inner.topics.remove(&topic);
                inner.confirmed.remove(&topic);
                Some(topic)
            } else {
                None
            }
        };
        if let Some(topic) = last {
            hub.send(ClientMsg::Unsubscribe { topic });
        }
    }

    /// Sends an action frame (a chess move). False when the socket is not open, so the caller
    /// can fall back to HTTP instead of waiting for an answer that will not come.
    pub fn send(&self, msg: ClientMsg) -> bool {
        let Some(hub) = self.hub.try_get_value() else {
            return false;
        };
        let open = (hub.inner.borrow().socket.as_ref())
            .is_some_and(|s| s.ws.ready_state() == WebSocket::OPEN);
        if open {
            hub.send(msg);
        }
        open
    }

    /// Opens a fresh socket now: after sign-in or sign-out the server must see the new cookie.
    pub fn restart(&self) {
        let Some(hub) = self.hub.try_get_value() else {
            return;
        };
        {
            let mut inner = hub.inner.borrow_mut();
            inner.generation += 1;
            if let Some(socket) = inner.socket.take() {
                socket.close();
            }
            if let Some(retry) = inner.retry.take() {
                retry.clear();
            }
            inner.attempt = 0;
        }
        hub.stop_heartbeat();
        hub.lost();
        hub.show_retrying();
        hub.connect();
    }
}

/// Opens the tab's socket and provides [`Live`] to every component below.
pub fn provide_live() -> Live {
    let state = RwSignal::new(LinkState::Connecting);
    let hub = Rc::new_cyclic(|me| Hub {
        state,
        inner: RefCell::new(Inner::default()),
        me: me.clone(),
    });
    hub.connect();
    let live = Live {
        hub: StoredValue::new_local(hub),
        state: state.read_only(),
    };
    provide_context(live);
    live
}

/// Listens to `topic` while the calling component is mounted.
pub fn use_topic(topic: Topic, listener: impl Fn(Notice) + 'static) {
    let live = expect_context::<Live>();
    let id = live.subscribe(topic, listener);
    on_cleanup(move || live.unsubscribe(id));
}

/// Hears the server's error frames while the calling component is mounted.
pub fn use_live_errors(listener: impl Fn(LiveErrorCode, &str) + 'static) {
    let live = expect_context::<Live>();
    let Some(hub) = live.hub.try_get_value() else {
        return;
    };
    let id = {
        let mut inner = hub.inner.borrow_mut();
        inner.next_listener += 1;
        let id = inner.next_listener;
        inner.error_listeners.push((id, Rc::new(listener)));
        id
    };
    on_cleanup(move || {
        if let Some(hub) = live.hub.try_get_value() {
            hub.inner
                .borrow_mut()
                .error_listeners
                .retain(|(i, _)| *i != id);
        }
    });
}

/// The small "live / reconnecting" badge in the navigation bar.
#[component]
pub fn LiveIndicator() -> impl IntoView {
    let live = expect_context::<Live>();
    let label = move || match live.state.get() {
        LinkState::Connecting => "connecting",
        LinkState::Live => "live",
        LinkState::Reconnecting => "reconnecting",
    };
    let class = move || match live.state.get() {
        LinkState::Live => "live-status ok",
        _ => "live-status waiting",
    };
    view! {
        <span class=class data-testid="live-status" title="Live updates over WebSocket">
            {label}
        </span>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_stays_under_the_cap() {
        assert_eq!(backoff_ms(1, 1.0), 500.0);
        assert_eq!(backoff_ms(2, 1.0), 1_000.0);
        assert_eq!(backoff_ms(3, 1.0), 2_000.0);
        assert_eq!(backoff_ms(10, 1.0), MAX_BACKOFF_MS);
        assert_eq!(backoff_ms(u32::MAX, 1.0), MAX_BACKOFF_MS);
        // Jitter spreads each delay over its upper half.
        assert_eq!(backoff_ms(2, 0.0), 500.0);
        assert!(backoff_ms(2, 0.5) > 500.0 && backoff_ms(2, 0.5) < 1_000.0);
    }

    #[test]
    fn socket_url_follows_the_page_scheme() {
        assert_eq!(
            socket_url("http:", "localhost:8000"),
            "ws://localhost:8000/ws"
        );
        assert_eq!(socket_url("https:", "example.org"), "wss://example.org/ws");
    }
}
