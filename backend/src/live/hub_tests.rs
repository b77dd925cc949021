use std::time::Duration;

use axum::extract::ws::Utf8Bytes;

use lachesis_shared::live::{LiveEvent, ServerMsg, Topic};
use lachesis_shared::runs::{GroupSummary, RunStatusPoint};

use super::*;

fn run(name: &str) -> Topic {
    Topic::Run { run: name.into() }
}

fn group(id: i64, env_id: Option<i64>) -> LiveEvent {
    LiveEvent::Group(GroupSummary {
        id,
        run: "r".into(),
        env_id,
        at_ms: 0,
        weight_version: None,
        scores: vec![1.0, 0.0],
        advantages: None,
        tokens: 8,
    })
}

fn status(step: i64) -> LiveEvent {
    LiveEvent::Status(RunStatusPoint {
        at_ms: 0,
        step,
        queue_size: 0,
    })
}

/// Everything the outbox would send now, decoded.
fn drain(outbox: &Outbox) -> Vec<ServerMsg> {
    let mut out = Vec::new();
    while let Some(next) = outbox.try_next() {
        match next {
            Next::Frame(frame) => out.push(serde_json::from_str(&frame).expect("a server frame")),
            Next::Close(_) => break,
        }
    }
    out
}

fn event(topic: Topic, event: LiveEvent) -> ServerMsg {
    ServerMsg::Event { topic, event }
}

fn group_ids(msgs: &[ServerMsg]) -> Vec<i64> {
    msgs.iter()
        .filter_map(|m| match m {
            ServerMsg::Event {
                event: LiveEvent::Group(g),
                ..
            } => Some(g.id),
            _ => None,
        })
        .collect()
}

#[test]
fn the_shared_event_frame_is_what_server_msg_encodes() {
    let topic = run("r");
    let ev = group(3, Some(1));
    let ours = encode(&EventFrame {
        topic: &topic,
        event: &ev,
    });
    let theirs = serde_json::to_string(&event(topic, ev)).unwrap();
    assert_eq!(ours.as_str(), theirs);
}

#[test]
fn subscribers_get_their_topics_in_order_and_nothing_else() {
    let hub = Hub::new();
    let mut a = hub.connect();
    let b = hub.connect();
    a.subscribe(run("r")).unwrap();
    hub.deliver(&run("r"), &group(1, None));
    hub.deliver(&run("other"), &group(2, None));
    hub.deliver(&run("r"), &group(3, None));
    assert_eq!(group_ids(&drain(a.outbox())), vec![1, 3]);
    assert!(drain(b.outbox()).is_empty());
}

#[test]
fn a_group_on_a_run_topic_also_reaches_its_environment_topic() {
    let hub = Hub::new();
    let mut env = hub.connect();
    let env_topic = Topic::Env {
        run: "r".into(),
        env_id: 4,
    };
    env.subscribe(env_topic.clone()).unwrap();
    hub.deliver(&run("r"), &group(1, Some(4)));
    hub.deliver(&run("r"), &group(2, Some(5)));
    hub.deliver(&run("r"), &status(1));
    assert_eq!(
        drain(env.outbox()),
        vec![event(env_topic, group(1, Some(4)))]
    );
}

#[test]
fn state_events_are_coalesced_to_the_latest() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("r")).unwrap();
    hub.deliver(&run("r"), &status(1));
    hub.deliver(&run("r"), &group(10, None));
    hub.deliver(&run("r"), &status(2));
    hub.deliver(&run("r"), &status(3));
    assert_eq!(
        drain(conn.outbox()),
        vec![event(run("r"), group(10, None)), event(run("r"), status(3))]
    );
}

#[test]
fn a_full_stream_queue_drops_the_oldest_and_says_how_many() {
    let hub = Hub::new();
    let mut slow = hub.connect();
    let mut fast = hub.connect();
    slow.subscribe(run("r")).unwrap();
    fast.subscribe(run("r")).unwrap();
    let total = STREAM_CAPACITY as i64 + 44;
    let mut fast_seen = Vec::new();
    for id in 0..total {
        hub.deliver(&run("r"), &group(id, None));
        fast_seen.extend(group_ids(&drain(fast.outbox())));
    }
    assert_eq!(fast_seen, (0..total).collect::<Vec<_>>());
    let stats = hub.stats();
    assert_eq!(stats.max_stream_queued, STREAM_CAPACITY);
    assert_eq!(stats.dropped, 44);

    let msgs = drain(slow.outbox());
    assert_eq!(
        msgs[0],
        ServerMsg::Lagged {
            topic: run("r"),
            dropped: 44
        }
    );
    assert_eq!(group_ids(&msgs[1..]), (44..total).collect::<Vec<_>>());
    assert_eq!(msgs.len(), 1 + STREAM_CAPACITY);
}

#[test]
fn lag_is_counted_per_topic_and_announced_before_that_topics_next_event() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("a")).unwrap();
    conn.subscribe(run("b")).unwrap();
    // a0 b1 a2 b3 ... : the first 4 dropped are a0, b1, a2, b3.
    for id in 0..STREAM_CAPACITY as i64 + 4 {
        let topic = if id % 2 == 0 { run("a") } else { run("b") };
        hub.deliver(&topic, &group(id, None));
    }
    let msgs = drain(conn.outbox());
    let lag_a = ServerMsg::Lagged {
        topic: run("a"),
        dropped: 2,
    };
    let lag_b = ServerMsg::Lagged {
        topic: run("b"),
        dropped: 2,
    };
    assert_eq!(msgs[..2], [lag_a, lag_b]);
    assert_eq!(
        group_ids(&msgs[2..]),
        (4..STREAM_CAPACITY as i64 + 4).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn replies_keep_their_place_before_later_notices() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    let subscribed = encode(&ServerMsg::Subscribed { topic: run("r") });
    conn.outbox().push_control(subscribed).await.unwrap();
    conn.subscribe(run("r")).unwrap();
    for id in 0..STREAM_CAPACITY as i64 + 1 {
        hub.deliver(&run("r"), &group(id, None));
    }
    let msgs = drain(conn.outbox());
    assert_eq!(msgs[0], ServerMsg::Subscribed { topic: run("r") });
    assert_eq!(
        msgs[1],
        ServerMsg::Lagged {
            topic: run("r"),
            dropped: 1
        }
    );
}

#[test]
fn unsubscribing_discards_what_is_queued_for_the_topic() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("a")).unwrap();
    conn.subscribe(run("b")).unwrap();
    for id in 0..STREAM_CAPACITY as i64 + 3 {
        hub.deliver(&run("a"), &group(id, None));
    }
    hub.deliver(&run("a"), &status(1));
    hub.deliver(&run("b"), &group(1000, None));
    conn.unsubscribe(&run("a"));
    hub.deliver(&run("a"), &group(2000, None));
    assert_eq!(
        drain(conn.outbox()),
        vec![event(run("b"), group(1000, None))]
    );
    assert_eq!(hub.stats().subscriptions, 1);
}

#[test]
fn a_connection_may_not_exceed_its_subscriptions() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    for i in 0..MAX_SUBSCRIPTIONS {
        conn.subscribe(run(&i.to_string())).unwrap();
    }
    conn.subscribe(run("0"))
        .expect("subscribing again is harmless");
    assert_eq!(conn.subscribe(run("one more")), Err(TooManySubscriptions));
    assert_eq!(conn.subscription_count(), MAX_SUBSCRIPTIONS);
}

#[test]
fn dropping_a_connection_leaves_nothing_behind() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("r")).unwrap();
    hub.deliver(&run("r"), &group(1, None));
    let outbox = conn.outbox().clone();
    drop(conn);
    assert_eq!(hub.stats(), HubStats::default());
    assert_eq!(outbox.try_next(), Some(Next::Close(None)));
}

#[tokio::test]
async fn a_close_sends_queued_replies_first_but_not_queued_events() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("r")).unwrap();
    hub.deliver(&run("r"), &group(1, None));
    let pong = encode(&ServerMsg::Pong { nonce: 7 });
    conn.outbox().push_control(pong.clone()).await.unwrap();
    let reason = CloseReason {
        code: 1009,
        reason: "too big",
    };
    conn.outbox().close_with(None, reason);
    assert_eq!(conn.outbox().try_next(), Some(Next::Frame(pong)));
    assert_eq!(conn.outbox().try_next(), Some(Next::Close(Some(reason))));
    assert_eq!(
        conn.outbox().push_control(Utf8Bytes::from("x")).await,
        Err(Closed)
    );
}

#[test]
fn a_lost_bridge_is_announced_as_an_unknown_lag_after_what_is_queued() {
    let hub = Hub::new();
    let mut conn = hub.connect();
    conn.subscribe(run("r")).unwrap();
    hub.deliver(&run("r"), &group(1, None));
    hub.lag_everyone();
    hub.deliver(&run("r"), &group(2, None));
    assert_eq!(
        drain(conn.outbox()),
        vec![
            event(run("r"), group(1, None)),
            ServerMsg::Lagged {
                topic: run("r"),
                dropped: 0
            },
            event(run("r"), group(2, None)),
        ]
    );
}

#[tokio::test]
async fn replies_wait_for_room_instead_of_piling_up() {
    let hub = Hub::new();
    let conn = hub.connect();
    let outbox = conn.outbox().clone();
    for nonce in 0..CONTROL_CAPACITY as u64 {
        outbox
            .push_control(encode(&ServerMsg::Pong { nonce }))
            .await
            .unwrap();
    }
    let one_more = outbox.push_control(encode(&ServerMsg::Pong { nonce: 99 }));
    tokio::pin!(one_more);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut one_more)
            .await
            .is_err(),
        "a full reply queue makes the receive side wait"
    );
    assert!(matches!(outbox.next().await, Next::Frame(_)));
    tokio::time::timeout(Duration::from_secs(5), one_more)
        .await
        .expect("room after one reply is sent")
        .unwrap();
    assert_eq!(outbox.len(), CONTROL_CAPACITY);
}

#[test]
fn a_topic_is_watched_from_its_first_subscriber_to_its_last_leaving() {
    let hub = Hub::new();
    let mut changed = hub.watched_changed();
    changed.mark_unchanged();
    let topic = Topic::Marketplace;
    assert!(!hub.is_watched(&topic));

    let mut first = hub.connect();
    first.subscribe(topic.clone()).unwrap();
    assert!(hub.is_watched(&topic));
    assert!(changed.has_changed().unwrap());
    changed.mark_unchanged();

    // A second watcher, and one of another topic, change nothing a showcase waits on.
    let mut second = hub.connect();
    second.subscribe(topic.clone()).unwrap();
    second.subscribe(run("other")).unwrap();
    second.unsubscribe(&run("other"));
    changed.mark_unchanged();
    first.unsubscribe(&topic);
    assert!(hub.is_watched(&topic));
    assert!(!changed.has_changed().unwrap());

    // The last one leaving by closing its socket (dropping the connection) is a change.
    drop(second);
    assert!(!hub.is_watched(&topic));
    assert!(changed.has_changed().unwrap());
}
