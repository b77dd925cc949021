//! `GET /ws`: one WebSocket per browser tab, speaking `lachesis_shared::live`.
//!
//! Each connection runs two tasks: the receive side (this handler's task) parses client frames,
//! checks permissions and queues replies in the connection's outbox; the send side drains the
//! outbox to the socket and sends heartbeat pings. A slow reader therefore never blocks the
//! receive side or the hub: its outbox drops and coalesces instead (see `hub.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use lachesis_shared::live::{ClientMsg, LiveErrorCode, PROTOCOL_VERSION, ServerMsg};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::hub::{Connection, MAX_SUBSCRIPTIONS};
use super::outbox::{CloseReason, Next, Outbox, encode};
use crate::app::AppState;
use crate::auth::Viewer;
use crate::hosting::error::HostingError;
use crate::hosting::scope::Reach;

/// How often the server pings, and how often clients are asked to ping.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// A connection that sent nothing (not even a pong) for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(45);
/// The largest frame a client may send; longer ones close the connection (code 1009).
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// Frames written to the socket before one flush: bursts cost one syscall, not one per frame.
const MAX_BATCH: usize = 64;
/// How long a closing connection may take to flush its last replies.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

const GOING_AWAY: CloseReason = CloseReason {
    code: 1001,
    reason: "server shutting down",
};
const IDLE: CloseReason = CloseReason {
    code: 1000,
    reason: "idle",
};
const TOO_BIG: CloseReason = CloseReason {
    code: 1009,
    reason: "frame too large",
};

pub async fn handler(
    _same_origin: SameOrigin,
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    viewer: Viewer,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let slot = match state.ws_slots.claim(peer.ip()) {
        Ok(slot) => slot,
        Err(limit) => return HostingError::TooManyConnections(limit).into_response(),
    };
    let credentials = Credentials::of(&headers);
    ws.max_frame_size(MAX_FRAME_BYTES)
        .max_message_size(MAX_FRAME_BYTES)
        // Clients send small frames; tungstenite's default 128 KiB per connection is for bulk
        // transfer. Writes are batched by the send side and flushed explicitly.
        .read_buffer_size(4 * 1024)
        .write_buffer_size(16 * 1024)
        .on_upgrade(move |socket| async move {
            serve(socket, state, viewer, credentials).await;
            drop(slot);
        })
}

/// The headers a socket authenticated with, kept to authenticate it again while it is open:
/// a token revoked, a session ended or a member removed stops its deliveries within
/// [`RECHECK`] (plus the few seconds a token stays cached on other instances).
#[derive(Clone)]
struct Credentials(HeaderMap);

impl Credentials {
    fn of(headers: &HeaderMap) -> Self {
        let mut kept = HeaderMap::new();
        for name in [header::AUTHORIZATION, header::COOKIE] {
            for value in headers.get_all(&name) {
                kept.append(name.clone(), value.clone());
            }
        }
        Self(kept)
    }
}

/// How often an open socket's credentials and subscriptions are checked again.
pub const RECHECK: Duration = Duration::from_secs(2);

const REVOKED: CloseReason = CloseReason {
    code: 1008,
    reason: "credentials revoked",
};

/// Authenticates the socket again and drops the topics its caller may no longer read. `Err` when
/// the credentials themselves are gone (the socket is then closed).
async fn recheck(
    state: &AppState,
    credentials: &Credentials,
    viewer: &mut Viewer,
    conn: &mut Connection,
) -> Result<(), CloseReason> {
    let fresh = match crate::auth::identify(&credentials.0, state).await {
        Ok(fresh) => fresh,
        Err(crate::app::AppError::Database(e)) => {
            // A database hiccup is not a revocation: keep going, check again next time.
            tracing::warn!(error = %e, "cannot recheck a live socket's credentials");
            return Ok(());
        }
        Err(_) => return Err(REVOKED),
    };
    if fresh == Viewer::Anonymous && *viewer != Viewer::Anonymous {
        return Err(REVOKED);
    }
    *viewer = fresh;
    for topic in conn.topics() {
        if let Ok(false) = viewer.can_read_topic(state, &topic).await {
            conn.unsubscribe(&topic);
            let notice = error(
                LiveErrorCode::NotFound,
                format!("{topic:?} is no longer readable with these credentials"),
            );
            if conn.outbox().push_control(encode(&notice)).await.is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Refuses cross-site upgrades: browsers send cookies with WebSocket handshakes and do not apply
/// CORS to them, so a page elsewhere could otherwise read a signed-in user's topics
/// (cross-site WebSocket hijacking). A request without `Origin` is not from a browser page and
/// passes; one with an `Origin` must name the host it was sent to (`Host`, or `X-Forwarded-Host`
/// behind a proxy: page scripts cannot set either).
pub struct SameOrigin;

impl<S: Send + Sync> FromRequestParts<S> for SameOrigin {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if same_origin(&parts.headers) {
            Ok(SameOrigin)
        } else {
            Err((
                StatusCode::FORBIDDEN,
                "cross-site WebSocket upgrades are refused",
            ))
        }
    }
}

fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    // "null" (sandboxed frames, file: pages) and anything unparsable are refused.
    let Some((scheme, rest)) = origin.to_str().ok().and_then(|o| o.split_once("://")) else {
        return false;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => ":80",
        "https" | "wss" => ":443",
        _ => return false,
    };
    let normalize = |authority: &str| {
        let authority = authority.trim().to_ascii_lowercase();
        match authority.strip_suffix(default_port) {
            Some(bare) => bare.to_string(),
            None => authority,
        }
    };
    let origin = normalize(rest.split('/').next().unwrap_or_default());
    let forwarded = headers
        .get("x-forwarded-host")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    [host, forwarded]
        .into_iter()
        .flatten()
        .any(|candidate| normalize(candidate) == origin)
}

async fn serve(socket: WebSocket, state: AppState, mut viewer: Viewer, credentials: Credentials) {
    let mut conn = state.live.connect();
    let outbox = conn.outbox().clone();
    let welcome = ServerMsg::Welcome {
        version: PROTOCOL_VERSION,
        heartbeat_ms: HEARTBEAT.as_millis() as u64,
        user: viewer.username().map(str::to_owned),
    };
    if outbox.push_control(encode(&welcome)).await.is_err() {
        return;
    }
    let (sink, mut stream) = socket.split();
    let mut sender = tokio::spawn(send_side(sink, outbox.clone()));
    let reason = receive_side(
        &mut stream,
        &mut conn,
        &state,
        (&mut viewer, &credentials),
        &mut sender,
    )
    .await;
    // Closing the outbox (the first close wins) lets the send side flush the replies already
    // queued and say goodbye; dropping the connection unsubscribes everything.
    outbox.close(reason);
    drop(conn);
    // A finished handle is not polled again (the receive side may have taken its result).
    if !sender.is_finished()
        && tokio::time::timeout(CLOSE_GRACE, &mut sender)
            .await
            .is_err()
    {
        // A send side stuck writing to a peer that stopped reading is ended here.
        sender.abort();
    }
}

/// Reads client frames until the client leaves, falls silent, breaks the rules for frames, the
/// send side fails, or the server shuts down. Returns the close reason to send, if any.
async fn receive_side(
    stream: &mut SplitStream<WebSocket>,
    conn: &mut Connection,
    state: &AppState,
    (viewer, credentials): (&mut Viewer, &Credentials),
    sender: &mut JoinHandle<()>,
) -> Option<CloseReason> {
    let stopped = state.live.stopped();
    tokio::pin!(stopped);
    let mut deadline = Instant::now() + IDLE_TIMEOUT;
    // Only sockets that authenticated as someone can lose that; an open server has nothing to
    // recheck.
    let mut rechecks = tokio::time::interval_at(Instant::now() + RECHECK, RECHECK);
    rechecks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let authenticated = state.auth.enabled && !matches!(viewer, Viewer::Anonymous);
    // One chess move in flight per connection: the next waits for the answer to the last.
    let moving = Arc::new(MoveQueue::default());
    loop {
        let frame = tokio::select! {
            () = &mut stopped => return Some(GOING_AWAY),
            _ = &mut *sender => return None,
            _ = rechecks.tick(), if authenticated => {
                if let Err(reason) = recheck(state, credentials, viewer, conn).await {
                    return Some(reason);
                }
                continue;
            }
            frame = tokio::time::timeout_at(deadline, stream.next()) => frame,
        };
        let message = match frame {
            Err(_elapsed) => return Some(IDLE),
            Ok(None) => return None,
            Ok(Some(Err(e))) => {
                if is_capacity_error(e) {
                    let refusal = error(
                        LiveErrorCode::Unsupported,
                        format!("frames are limited to {} KiB", MAX_FRAME_BYTES / 1024),
                    );
                    conn.outbox().close_with(Some(encode(&refusal)), TOO_BIG);
                }
                return None;
            }
            Ok(Some(Ok(message))) => message,
        };
        deadline = Instant::now() + IDLE_TIMEOUT;
        let handled = match message {
            Message::Text(text) => on_text(&text, conn, state, viewer, &moving).await,
            Message::Binary(_) => {
                let refusal = error(
                    LiveErrorCode::Unsupported,
                    "binary frames are not part of the protocol; send JSON text".into(),
                );
                conn.outbox().push_control(encode(&refusal)).await
            }
            // Tungstenite answers pings itself; pongs only prove the client is alive.
            Message::Ping(_) | Message::Pong(_) => Ok(()),
            Message::Close(_) => return None,
        };
        if handled.is_err() {
            // The outbox is closed: the send side has given up on this socket.
            return None;
        }
    }
}

/// The chess moves a socket has in hand: one being played and at most one waiting behind it.
///
/// The agent's answer is published before its search task has finished, so a quick player's next
/// move can arrive while the last is still closing; it waits its turn instead of being refused.
/// Anything beyond that is refused, so one socket never holds more than two move tasks.
#[derive(Default)]
struct MoveQueue {
    in_hand: std::sync::atomic::AtomicU8,
    turn: tokio::sync::Mutex<()>,
}

impl MoveQueue {
    const DEPTH: u8 = 2;

    /// Takes a place, or `false` when the queue is full.
    fn enter(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.in_hand
            .fetch_update(SeqCst, SeqCst, |n| (n < Self::DEPTH).then_some(n + 1))
            .is_ok()
    }

    fn leave(&self) {
        self.in_hand
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn is_capacity_error(e: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error as WsError;
    e.into_inner()
        .downcast_ref::<WsError>()
        .is_some_and(|e| matches!(e, WsError::Capacity(_)))
}

/// Handles one text frame; `Err` when the connection is closing.
async fn on_text(
    text: &str,
    conn: &mut Connection,
    state: &AppState,
    viewer: &Viewer,
    moving: &Arc<MoveQueue>,
) -> Result<(), super::outbox::Closed> {
    let outbox = conn.outbox().clone();
    let reply = match serde_json::from_str::<ClientMsg>(text) {
        Err(e) => error(
            LiveErrorCode::Malformed,
            format!("not a client message: {e}"),
        ),
        Ok(ClientMsg::Ping { nonce }) => ServerMsg::Pong { nonce },
        Ok(ClientMsg::ChessMove { .. })
            if let Err(e) = crate::hosting::scope::check_change(viewer, Reach::Outside) =>
        {
            error(LiveErrorCode::Rejected, e.to_string())
        }
        Ok(ClientMsg::ChessMove { .. }) if !moving.enter() => error(
            LiveErrorCode::Rejected,
            "a move is already waiting behind the last: wait for the answer".into(),
        ),
        Ok(ClientMsg::ChessMove { game, uci }) => {
            // The agent's search takes a while: answer from a task so this socket keeps reading.
            let (state, viewer, moving) = (state.clone(), viewer.clone(), moving.clone());
            tokio::spawn(async move {
                let refusal = {
                    let _turn = moving.turn.lock().await;
                    crate::chess::routes::socket_move(&state, &viewer, &game, &uci).await
                };
                moving.leave();
                if let Some(refusal) = refusal {
                    let _ = outbox.push_control(encode(&refusal)).await;
                }
            });
            return Ok(());
        }
        Ok(ClientMsg::Unsubscribe { topic }) => {
            conn.unsubscribe(&topic);
            ServerMsg::Unsubscribed { topic }
        }
        Ok(ClientMsg::Subscribe { topic }) if conn.is_subscribed(&topic) => {
            ServerMsg::Subscribed { topic }
        }
        Ok(ClientMsg::Subscribe { .. }) if conn.subscription_count() >= MAX_SUBSCRIPTIONS => error(
            LiveErrorCode::TooManySubscriptions,
            format!("at most {MAX_SUBSCRIPTIONS} subscriptions per connection"),
        ),
        Ok(ClientMsg::Subscribe { topic }) => match viewer.can_read_topic(state, &topic).await {
            Ok(true) => {
                // The reply is queued before the subscription starts, so it precedes every event.
                let subscribed = encode(&ServerMsg::Subscribed {
                    topic: topic.clone(),
                });
                outbox.push_control(subscribed).await?;
                // The count was checked above and nothing else subscribes on this connection.
                let _ = conn.subscribe(topic);
                return Ok(());
            }
            // Unknown and forbidden topics get the same answer, so names cannot be probed.
            Ok(false) => not_found(),
            Err(e) => {
                tracing::error!(error = %e, "cannot check a live subscription");
                not_found()
            }
        },
    };
    outbox.push_control(encode(&reply)).await
}

fn not_found() -> ServerMsg {
    error(LiveErrorCode::NotFound, "no such topic".into())
}

fn error(code: LiveErrorCode, message: String) -> ServerMsg {
    ServerMsg::Error { code, message }
}

/// Drains the outbox to the socket and pings every [`HEARTBEAT`]; ends on close or a write error.
async fn send_side(mut sink: SplitSink<WebSocket, Message>, outbox: Arc<Outbox>) {
    let mut heartbeat = tokio::time::interval_at(Instant::now() + HEARTBEAT, HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let closing = loop {
        let next = tokio::select! {
            next = outbox.next() => next,
            _ = heartbeat.tick() => {
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    break None;
                }
                continue;
            }
        };
        match write_batch(&mut sink, &outbox, next).await {
            Ok(None) => {}
            Ok(Some(reason)) => break Some(reason),
            Err(()) => break None,
        }
    };
    if let Some(reason) = closing {
        let frame = reason.map(|r| CloseFrame {
            code: r.code,
            reason: Utf8Bytes::from_static(r.reason),
        });
        // The peer may be gone already; nothing more to do either way.
        let _ = sink.send(Message::Close(frame)).await;
    }
    // Stop queueing for a socket nobody writes to; the receive side notices and ends.
    outbox.close(None);
}

/// Writes `first` and whatever else is waiting (up to [`MAX_BATCH`]), then flushes. Returns the
/// close to send if the outbox closed, `Err` if the socket failed.
async fn write_batch(
    sink: &mut SplitSink<WebSocket, Message>,
    outbox: &Outbox,
    first: Next,
) -> Result<Option<Option<CloseReason>>, ()> {
    let mut next = Some(first);
    let mut written = 0;
    while let Some(item) = next.take() {
        match item {
            Next::Frame(frame) => {
                sink.feed(Message::Text(frame)).await.map_err(|_| ())?;
                written += 1;
            }
            Next::Close(reason) => {
                sink.flush().await.map_err(|_| ())?;
                return Ok(Some(reason));
            }
        }
        if written < MAX_BATCH {
            next = outbox.try_next();
        }
    }
    sink.flush().await.map_err(|_| ())?;
    Ok(None)
}
