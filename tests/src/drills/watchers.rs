//! WebSocket watchers subscribed to the drill's run through the proxy, as dashboards in browsers.
//! Each connection is a session: from its `subscribed` frame until it closes, it records the
//! groups it was shown and the `lagged` notices it got. A watcher whose connection ends (its
//! instance was killed or stopped) connects again, through the proxy, to another instance.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// How often a watcher pings (the server closes sockets silent for three heartbeats).
const PING_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Session {
    pub watcher: usize,
    pub subscribed_at: Instant,
    /// Group ids (the `groups` table's) shown, and how many were shown more than once.
    pub groups: HashSet<i64>,
    pub repeated: u64,
    pub events: u64,
    /// When each `lagged` notice arrived, and what it said was dropped (0: unknown).
    pub lags: Vec<(Instant, u64)>,
    /// Set when the connection ended before the drill closed it, with why.
    pub cut_off: Option<String>,
}

pub struct Watchers {
    sessions: Arc<Mutex<Vec<Session>>>,
    /// Connection attempts that failed before a subscription was confirmed.
    failed_connects: Arc<Mutex<u64>>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Watchers {
    /// Starts `count` watchers and waits until each has its first subscription confirmed.
    pub async fn start(ws_url: &str, run: &str, count: usize) -> anyhow::Result<Self> {
        let (stop, stopped) = watch::channel(false);
        let sessions: Arc<Mutex<Vec<Session>>> = Arc::default();
        let failed_connects: Arc<Mutex<u64>> = Arc::default();
        let tasks = (0..count)
            .map(|watcher| {
                tokio::spawn(watch_loop(
                    watcher,
                    ws_url.to_string(),
                    Topic::Run { run: run.into() },
                    sessions.clone(),
                    failed_connects.clone(),
                    stopped.clone(),
                ))
            })
            .collect();
        let watchers = Self {
            sessions,
            failed_connects,
            stop,
            tasks,
        };
        let began = Instant::now();
        while watchers.sessions().len() < count {
            anyhow::ensure!(
                began.elapsed() < Duration::from_secs(30),
                "watchers could not subscribe through the proxy"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(watchers)
    }

    pub fn sessions(&self) -> Vec<Session> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn failed_connects(&self) -> u64 {
        *self
            .failed_connects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Closes every connection; the sessions stay for the checks.
    pub async fn stop(&mut self) -> Vec<Session> {
        let _ = self.stop.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        self.sessions()
    }
}

fn lock(sessions: &Mutex<Vec<Session>>) -> std::sync::MutexGuard<'_, Vec<Session>> {
    sessions.lock().unwrap_or_else(|p| p.into_inner())
}

async fn watch_loop(
    watcher: usize,
    url: String,
    topic: Topic,
    sessions: Arc<Mutex<Vec<Session>>>,
    failed_connects: Arc<Mutex<u64>>,
    mut stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        match subscribe(&url, &topic).await {
            Ok(ws) => {
                let index = {
                    let mut all = lock(&sessions);
                    all.push(Session {
                        watcher,
                        subscribed_at: Instant::now(),
                        groups: HashSet::new(),
                        repeated: 0,
                        events: 0,
                        lags: Vec::new(),
                        cut_off: None,
                    });
                    all.len() - 1
                };
                follow(ws, index, &sessions, &mut stopped).await;
            }
            Err(_) => {
                *failed_connects.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects, waits for the welcome, subscribes and waits for the confirmation.
async fn subscribe(url: &str, topic: &Topic) -> anyhow::Result<Socket> {
    let connect = tokio_tungstenite::connect_async(url);
    let (mut ws, _) = tokio::time::timeout(Duration::from_secs(5), connect).await??;
    let subscribe = ClientMsg::Subscribe {
        topic: topic.clone(),
    };
    ws.send(Message::text(serde_json::to_string(&subscribe)?))
        .await?;
    let confirmed = async {
        while let Some(frame) = ws.next().await {
            if let Message::Text(text) = frame?
                && let Ok(ServerMsg::Subscribed { topic: t }) = serde_json::from_str(&text)
                && t == *topic
            {
                return Ok(());
            }
        }
        anyhow::bail!("closed before the subscription was confirmed")
    };
    tokio::time::timeout(Duration::from_secs(5), confirmed).await??;
    Ok(ws)
}

/// Reads one session until the connection ends or the drill stops the watchers.
async fn follow(
    mut ws: Socket,
    index: usize,
    sessions: &Mutex<Vec<Session>>,
    stopped: &mut watch::Receiver<bool>,
) {
    let mut ping = tokio::time::interval(PING_EVERY);
    let mut nonce = 0;
    loop {
        let frame = tokio::select! {
            // A stop (or the drill gone): the only change this channel ever makes.
            _ = stopped.changed() => {
                let _ = ws.close(None).await;
                return;
            }
            _ = ping.tick() => {
                nonce += 1;
                let msg = serde_json::to_string(&ClientMsg::Ping { nonce }).unwrap_or_default();
                if let Err(e) = ws.send(Message::text(msg)).await {
                    lock(sessions)[index].cut_off = Some(format!("ping failed: {e}"));
                    return;
                }
                continue;
            }
            frame = ws.next() => frame,
        };
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(close))) => {
                lock(sessions)[index].cut_off = Some(format!("closed by the server: {close:?}"));
                return;
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                lock(sessions)[index].cut_off = Some(e.to_string());
                return;
            }
            None => {
                lock(sessions)[index].cut_off = Some("connection ended".into());
                return;
            }
        };
        let mut all = lock(sessions);
        let session = &mut all[index];
        match serde_json::from_str::<ServerMsg>(&text) {
            Ok(ServerMsg::Event {
                event: LiveEvent::Group(group),
                ..
            }) => {
                session.events += 1;
                if !session.groups.insert(group.id) {
                    session.repeated += 1;
                }
            }
            Ok(ServerMsg::Event { .. }) => session.events += 1,
            Ok(ServerMsg::Lagged { dropped, .. }) => session.lags.push((Instant::now(), dropped)),
            _ => {}
        }
    }
}
