//! The live hub end to end: real servers on port 0, a fresh database each, WebSocket clients.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lachesis::live::Hub;
use lachesis::live::hub::STREAM_CAPACITY;
use lachesis_shared::live::{
    ClientMsg, LiveErrorCode, LiveEvent, PROTOCOL_VERSION, ServerMsg, Topic,
};
use lachesis_shared::runs::{GroupSummary, TrainerPoint};
use lachesis_tests::{config_for, fresh_database};
use sqlx::PgPool;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const WAIT: Duration = Duration::from_secs(20);

/// A server of our own (not `TestApp`): the tests look at its hub.
struct Instance {
    addr: std::net::SocketAddr,
    hub: Hub,
    db: PgPool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Instance {
    async fn start(database_url: &str) -> Self {
        Self::start_with(config_for(database_url)).await
    }

    async fn start_with(config: lachesis::config::ServeConfig) -> Self {
        let server = lachesis::app::Server::build(&config)
            .await
            .expect("build the server");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let addr = server.local_addr();
        let hub = server.state.live.clone();
        let db = server.state.db.clone();
        let done = tokio::spawn(server.run_until(async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            hub,
            db,
            stop: Some(tx),
            done: Some(done),
        }
    }

    fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    async fn client(&self) -> Client {
        Client::connect(&self.ws_url()).await
    }

    /// Publishes on this instance's database, as the trajectory API does.
    async fn publish(&self, topic: &Topic, event: &LiveEvent) {
        lachesis::live::publish(&self.db, topic, event)
            .await
            .expect("publish");
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(done) = self.done.take() {
            tokio::time::timeout(WAIT, done)
                .await
                .expect("the server stops")
                .expect("the server task")
                .expect("the server ran");
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    /// Connects and checks the welcome frame.
    async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("upgrade");
        Self::welcomed(ws).await
    }

    async fn welcomed(ws: WebSocketStream<MaybeTlsStream<TcpStream>>) -> Self {
        let mut client = Self { ws };
        match client.recv().await {
            ServerMsg::Welcome {
                version,
                heartbeat_ms,
                user,
            } => {
                assert_eq!(version, PROTOCOL_VERSION);
                assert_eq!(heartbeat_ms, 15_000);
                assert_eq!(user, None);
            }
            other => panic!("expected a welcome first, got {other:?}"),
        }
        client
    }

    async fn send(&mut self, msg: &ClientMsg) {
        self.send_raw(Message::text(serde_json::to_string(msg).unwrap()))
            .await;
    }

    async fn send_raw(&mut self, msg: Message) {
        self.ws.send(msg).await.expect("send a frame");
    }

    /// The next protocol frame (WebSocket pings are skipped).
    async fn recv(&mut self) -> ServerMsg {
        self.try_recv(WAIT)
            .await
            .expect("a frame before the deadline")
    }

    async fn try_recv(&mut self, wait: Duration) -> Option<ServerMsg> {
        loop {
            let frame = tokio::time::timeout(wait, self.ws.next()).await.ok()?;
            match frame.expect("the connection is open").expect("a frame") {
                Message::Text(text) => {
                    return Some(serde_json::from_str(&text).expect("a server frame"));
                }
                Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    async fn subscribe(&mut self, topic: &Topic) {
        self.send(&ClientMsg::Subscribe {
            topic: topic.clone(),
        })
        .await;
        assert_eq!(
            self.recv().await,
            ServerMsg::Subscribed {
                topic: topic.clone()
            }
        );
    }

    async fn expect_error(&mut self, code: LiveErrorCode) {
        match self.recv().await {
            ServerMsg::Error { code: got, .. } => assert_eq!(got, code),
            other => panic!("expected an error frame ({code:?}), got {other:?}"),
        }
    }

    async fn ping_pongs(&mut self, nonce: u64) {
        self.send(&ClientMsg::Ping { nonce }).await;
        assert_eq!(self.recv().await, ServerMsg::Pong { nonce });
    }
}

fn run_topic(run: &str) -> Topic {
    Topic::Run { run: run.into() }
}

fn trainer(step: i64) -> LiveEvent {
    LiveEvent::Trainer(TrainerPoint {
        at_ms: 1_700_000_000_000 + step,
        step,
        values: BTreeMap::from([("loss".to_string(), 1.0 / (step as f64 + 1.0))]),
    })
}

/// A group of `sequences` scores, so tests can choose how many bytes an event weighs.
fn group(id: i64, sequences: usize) -> LiveEvent {
    LiveEvent::Group(GroupSummary {
        id,
        run: "r".into(),
        env_id: Some(1),
        at_ms: 1_700_000_000_000,
        weight_version: Some(3),
        scores: (0..sequences).map(|i| i as f64 / 7.0).collect(),
        advantages: None,
        tokens: 1000,
    })
}

fn event_of(msg: &ServerMsg) -> Option<&LiveEvent> {
    match msg {
        ServerMsg::Event { event, .. } => Some(event),
        _ => None,
    }
}

fn step_of(msg: &ServerMsg) -> Option<i64> {
    match event_of(msg)? {
        LiveEvent::Trainer(point) => Some(point.step),
        LiveEvent::Group(group) => Some(group.id),
        LiveEvent::Status(status) => Some(status.step),
        LiveEvent::ChessMove(_)
        | LiveEvent::ChessGame(_)
        | LiveEvent::Market(_)
        | LiveEvent::ToolEpisode(_)
        | LiveEvent::ProteinEpisode(_)
        | LiveEvent::ArenaVote(_)
        | LiveEvent::BattleText(_) => None,
        // Scene events have no step; these tests publish none.
        LiveEvent::Scene(_) => None,
    }
}

#[tokio::test]
async fn a_subscriber_receives_what_is_published_and_committed_on_the_database() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    let topic = run_topic("r1");
    client.subscribe(&topic).await;

    app.publish(&topic, &trainer(1)).await;
    assert_eq!(
        client.recv().await,
        ServerMsg::Event {
            topic: topic.clone(),
            event: trainer(1)
        }
    );

    // Inside a transaction an event goes out only if the transaction commits.
    let mut tx = app.db.begin().await.unwrap();
    lachesis::live::publish(&mut *tx, &topic, &trainer(2))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = app.db.begin().await.unwrap();
    lachesis::live::publish(&mut *tx, &topic, &trainer(3))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(step_of(&client.recv().await), Some(3));
    app.stop().await;
}

#[tokio::test]
async fn bad_frames_get_error_frames_and_the_connection_keeps_working() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    for text in [
        "not json",
        r#"{"type":"shout","topic":null}"#,
        r#"{"type":"subscribe"}"#,
        r#"{"type":"subscribe","topic":{"kind":"planet","name":"mars"}}"#,
        r#"{"type":"ping","nonce":-1}"#,
        "",
        "[]",
    ] {
        client.send_raw(Message::text(text)).await;
        client.expect_error(LiveErrorCode::Malformed).await;
    }
    client
        .send_raw(Message::binary(vec![0u8, 159, 146, 150]))
        .await;
    client.expect_error(LiveErrorCode::Unsupported).await;

    client.ping_pongs(42).await;
    let topic = run_topic("still-works");
    client.subscribe(&topic).await;
    app.publish(&topic, &trainer(7)).await;
    assert_eq!(step_of(&client.recv().await), Some(7));
}

#[tokio::test]
async fn a_frame_over_the_limit_is_refused_and_the_connection_closed() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    client.send_raw(Message::text("x".repeat(65 * 1024))).await;
    client.expect_error(LiveErrorCode::Unsupported).await;
    // Then the server closes: with code 1009, or with a TCP reset when the rest of the oversized
    // frame is still unread on its side (the kernel's answer to closing with unread input).
    let end = tokio::time::timeout(WAIT, client.ws.next())
        .await
        .expect("the connection ends");
    match end {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 1009),
        None | Some(Err(_)) => {}
        other => panic!("expected the connection to close, got {other:?}"),
    }
    // The server is fine.
    app.client().await.ping_pongs(1).await;
}

#[tokio::test]
async fn subscriptions_per_connection_are_limited() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    for i in 0..64 {
        client.subscribe(&run_topic(&format!("r{i}"))).await;
    }
    client.subscribe(&run_topic("r0")).await;
    client
        .send(&ClientMsg::Subscribe {
            topic: run_topic("one-too-many"),
        })
        .await;
    client
        .expect_error(LiveErrorCode::TooManySubscriptions)
        .await;
    client
        .send(&ClientMsg::Unsubscribe {
            topic: run_topic("r0"),
        })
        .await;
    assert_eq!(
        client.recv().await,
        ServerMsg::Unsubscribed {
            topic: run_topic("r0")
        }
    );
    client.subscribe(&run_topic("one-too-many")).await;
}

#[tokio::test]
async fn unsubscribing_stops_delivery() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    let (a, b) = (run_topic("a"), run_topic("b"));
    client.subscribe(&a).await;
    client.subscribe(&b).await;
    app.publish(&a, &trainer(1)).await;
    assert_eq!(step_of(&client.recv().await), Some(1));

    client
        .send(&ClientMsg::Unsubscribe { topic: a.clone() })
        .await;
    assert_eq!(
        client.recv().await,
        ServerMsg::Unsubscribed { topic: a.clone() }
    );
    app.publish(&a, &trainer(2)).await;
    app.publish(&b, &trainer(3)).await;
    let next = client.recv().await;
    assert_eq!(
        next,
        ServerMsg::Event {
            topic: b,
            event: trainer(3)
        },
        "nothing of the unsubscribed topic arrives"
    );
}

#[tokio::test]
async fn a_group_reaches_the_subscribers_of_its_environment_too() {
    let app = Instance::start(&fresh_database().await).await;
    let env_topic = Topic::Env {
        run: "r".into(),
        env_id: 1,
    };
    let mut env_client = app.client().await;
    env_client.subscribe(&env_topic).await;
    app.publish(&run_topic("r"), &trainer(1)).await;
    app.publish(&run_topic("r"), &group(5, 4)).await;
    assert_eq!(
        env_client.recv().await,
        ServerMsg::Event {
            topic: env_topic,
            event: group(5, 4)
        },
        "only groups reach an environment's topic"
    );
}

/// A client whose socket receives into a 4 KiB buffer, so the server's writes stall early.
async fn slow_client(url: &str) -> Client {
    let request = url.into_client_request().unwrap();
    let host = request.uri().authority().unwrap().to_string();
    let addr = tokio::net::lookup_host(host).await.unwrap().next().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream))
        .await
        .expect("upgrade");
    Client::welcomed(ws).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_told_what_it_lost_while_a_fast_one_gets_everything() {
    let app = Instance::start(&fresh_database().await).await;
    let topic = run_topic("busy");
    let mut slow = slow_client(&app.ws_url()).await;
    slow.subscribe(&topic).await;
    let mut fast = app.client().await;
    fast.subscribe(&topic).await;

    // About 2.5 KB per event: enough to fill the socket buffers, then the outbox, many times.
    // Published in bursts of `chunk` (one transaction each, so they arrive together) and the next
    // burst waits for the fast client: a burst fits its queue, so it must get every event.
    let (total, chunk) = (3000i64, 100i64);
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0usize);
    let reader = tokio::spawn(async move {
        let mut ids = Vec::new();
        while ids.len() < total as usize {
            let msg = fast.recv().await;
            ids.push(step_of(&msg).unwrap_or_else(|| panic!("the fast client lags: {msg:?}")));
            progress_tx.send_replace(ids.len());
        }
        ids
    });
    for start in (0..total).step_by(chunk as usize) {
        let mut tx = app.db.begin().await.unwrap();
        for id in start..start + chunk {
            lachesis::live::publish(&mut *tx, &topic, &group(id, 120))
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        let until = (start + chunk) as usize;
        tokio::time::timeout(WAIT, progress.wait_for(|&n| n >= until))
            .await
            .expect("the fast client keeps up")
            .expect("the fast client is reading");
    }
    let fast_ids = reader.await.unwrap();
    assert_eq!(fast_ids, (0..total).collect::<Vec<_>>());

    let stats = app.hub.stats();
    assert!(
        stats.max_stream_queued <= STREAM_CAPACITY,
        "the slow client's queue is bounded: {stats:?}"
    );
    assert!(stats.dropped > 0, "the slow client lost events: {stats:?}");

    // Now the slow client reads: it gets what the socket held, a notice of what was dropped, and
    // at most a queue's worth after the last notice. Nothing is both missing and unannounced.
    let (mut ids, mut dropped, mut after_last_notice, mut notices) = (Vec::new(), 0, 0, 0);
    while ids.last() != Some(&(total - 1)) {
        match slow.recv().await {
            ServerMsg::Lagged {
                topic: t,
                dropped: n,
            } => {
                assert_eq!(t, topic);
                assert!(n > 0);
                dropped += n;
                notices += 1;
                after_last_notice = 0;
            }
            msg => {
                ids.push(step_of(&msg).unwrap_or_else(|| panic!("unexpected {msg:?}")));
                after_last_notice += 1;
            }
        }
    }
    assert!(notices >= 1);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order, no repeats");
    assert_eq!(ids.len() as u64 + dropped, total as u64);
    assert_eq!(dropped, stats.dropped);
    assert!(
        after_last_notice <= STREAM_CAPACITY,
        "{after_last_notice} events after the last notice"
    );
    eprintln!(
        "slow client: {} events ({after_last_notice} after the last notice), {dropped} dropped in {notices} notice(s)",
        ids.len()
    );
    slow.ping_pongs(9).await;
}

#[tokio::test]
async fn two_instances_on_one_database_deliver_the_same_stream_once() {
    let database_url = fresh_database().await;
    let a = Instance::start(&database_url).await;
    let b = Instance::start(&database_url).await;
    let topic = run_topic("shared");
    let mut on_a = a.client().await;
    let mut on_b = b.client().await;
    on_a.subscribe(&topic).await;
    on_b.subscribe(&topic).await;

    for step in 0..20 {
        a.publish(&topic, &trainer(step)).await;
    }
    let mut seen_a = Vec::new();
    let mut seen_b = Vec::new();
    for _ in 0..20 {
        seen_a.push(on_a.recv().await);
        seen_b.push(on_b.recv().await);
    }
    assert_eq!(seen_a, seen_b);
    assert_eq!(
        seen_b.iter().filter_map(step_of).collect::<Vec<_>>(),
        (0..20).collect::<Vec<_>>()
    );
    // Published through B now: the next frame on each side is that event, not a repeat.
    b.publish(&topic, &trainer(100)).await;
    assert_eq!(step_of(&on_a.recv().await), Some(100));
    assert_eq!(step_of(&on_b.recv().await), Some(100));
}

#[tokio::test]
async fn cross_site_upgrades_are_refused() {
    let app = Instance::start(&fresh_database().await).await;
    let mut request = app.ws_url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!("expected 403, got {:?}", other.map(|(_, r)| r.status())),
    }

    let mut request = app.ws_url().into_client_request().unwrap();
    let own = format!("http://{}", app.addr);
    request.headers_mut().insert("origin", own.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("a same-origin page may connect");
    Client::welcomed(ws).await.ping_pongs(3).await;
}

#[tokio::test]
async fn a_bridge_that_loses_its_database_connection_listens_again_and_says_so() {
    let app = Instance::start(&fresh_database().await).await;
    let topic = run_topic("r");
    let mut client = app.client().await;
    client.subscribe(&topic).await;

    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(killed, vec![true], "one listening connection");

    assert_eq!(
        client.recv().await,
        ServerMsg::Lagged {
            topic: topic.clone(),
            dropped: 0
        },
        "subscribers are told they may have missed events"
    );
    app.publish(&topic, &trainer(1)).await;
    assert_eq!(step_of(&client.recv().await), Some(1));
}

#[tokio::test]
async fn shutdown_closes_live_connections() {
    let app = Instance::start(&fresh_database().await).await;
    let mut client = app.client().await;
    client.subscribe(&run_topic("r")).await;
    app.stop().await;
    match tokio::time::timeout(WAIT, client.ws.next()).await.unwrap() {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 1001),
        other => panic!("expected a going-away close, got {other:?}"),
    }
}

#[tokio::test]
async fn with_accounts_on_an_anonymous_visitor_cannot_watch_a_private_run() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = Instance::start_with(config).await;
    let mut client = app.client().await;
    client
        .send(&ClientMsg::Subscribe {
            topic: run_topic("private"),
        })
        .await;
    client.expect_error(LiveErrorCode::NotFound).await;
    app.publish(&run_topic("private"), &trainer(1)).await;
    client.ping_pongs(5).await;
    assert_eq!(client.try_recv(Duration::from_millis(300)).await, None);
    // The marketplace feed is public.
    client.subscribe(&Topic::Marketplace).await;
}

#[tokio::test]
async fn a_group_posted_to_the_api_reaches_the_run_and_its_environment() {
    let app = Instance::start(&fresh_database().await).await;
    let http = lachesis_tests::client();
    let base = format!("http://{}", app.addr);
    let post = |path: &str, body: serde_json::Value| {
        let request = http.post(format!("{base}{path}")).json(&body);
        async move {
            let resp = request.send().await.expect("POST");
            assert!(resp.status().is_success(), "{}", resp.status());
            resp.json::<serde_json::Value>().await.unwrap_or_default()
        }
    };
    post("/runs/exp/register", lachesis_tests::registration(8)).await;
    // Environments may register once the trainer has asked for its first batch.
    http.get(format!("{base}/runs/exp/batch"))
        .send()
        .await
        .expect("GET /batch");
    let env = post(
        "/runs/exp/register-env",
        lachesis_tests::env_registration("arith", 4),
    )
    .await;
    let env_id = env["env_id"].as_i64().expect("an env id");
    let run = run_topic("exp");
    let env_topic = Topic::Env {
        run: "exp".into(),
        env_id,
    };
    let mut watcher = app.client().await;
    watcher.subscribe(&run).await;
    watcher.subscribe(&env_topic).await;

    post(
        "/runs/exp/scored_data",
        lachesis_tests::group(11, 4, Some(env_id)),
    )
    .await;
    let mut topics = Vec::new();
    let mut delivered = Vec::new();
    for _ in 0..2 {
        match watcher.recv().await {
            ServerMsg::Event {
                topic,
                event: LiveEvent::Group(group),
            } => {
                assert_eq!(group.run, "exp");
                assert_eq!(group.env_id, Some(env_id));
                assert_eq!(group.scores, vec![0.0, 0.25, 0.5, 0.75]);
                assert_eq!(group.tokens, 16);
                topics.push(topic);
                delivered.push(group);
            }
            other => panic!("expected the group, got {other:?}"),
        }
    }
    assert_eq!(topics, vec![run, env_topic]);
    // The event carries the stored group's id and arrival time, as the dashboards' history does.
    let history: serde_json::Value = http
        .get(format!("{base}/api/runs/exp/metrics"))
        .send()
        .await
        .expect("GET metrics")
        .json()
        .await
        .expect("metrics JSON");
    let stored: lachesis_shared::runs::GroupSummary =
        serde_json::from_value(history["groups"][0].clone()).expect("a stored group");
    assert_eq!(delivered[0], stored);
    assert!(stored.id > 0 && stored.at_ms > 1_700_000_000_000);
}
