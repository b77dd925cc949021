//! Cross-instance delivery through Postgres `LISTEN`/`NOTIFY`.
//!
//! Publishing is a `pg_notify` on the caller's executor, so an event published inside a
//! transaction goes out only if it commits (a group the trajectory API rolled back is never
//! shown). Every instance, the publishing one included, delivers to its own subscribers only when
//! the notification comes back from Postgres: all instances then see the same events in the same
//! order (Postgres delivers notifications in commit order), and nothing is delivered twice.
//!
//! Payload size: `NOTIFY` refuses payloads of 8000 bytes and more. An event that would not fit is
//! trimmed by a fixed rule rather than failing the caller's transaction:
//! 1. a group loses its `advantages` (they can be reloaded with the group over HTTP);
//! 2. if it still does not fit (a group of hundreds of sequences, a trainer report with hundreds of
//!    values), the event is replaced by an "omitted" notice, and subscribers get
//!    `Lagged { dropped: 1 }` so they reload over HTTP. Cutting scores or values instead would
//!    make the dashboards draw a wrong mean without anyone knowing.
//!
//! If even the notice does not fit (a topic name of kilobytes) nothing is sent and a warning logged.
//!
//! A lost connection (Postgres restarted, the listener's backend terminated) loses whatever was
//! notified until the bridge listens again. The bridge then fails, the supervisor starts it again
//! after a pause (`crate::supervisor`, task `live-bridge`), and once it listens on a new
//! connection every subscriber of every topic is sent `Lagged { dropped: 0 }` so it reloads over
//! HTTP: after the new `LISTEN`, so nothing published after that reload can be missed.

use anyhow::bail;
use lachesis_shared::live::{LiveEvent, Topic};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Hub;

/// An environment's live feed on one topic, published through the bridge, so viewers on every
/// instance of the database's servers see the events.
pub struct BridgeFeed {
    db: PgPool,
    topic: Topic,
}

impl BridgeFeed {
    pub fn new(db: PgPool, topic: Topic) -> Self {
        Self { db, topic }
    }
}

impl crate::envs::in_process::LiveFeed for BridgeFeed {
    fn publish(&self, event: LiveEvent) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = publish(&self.db, &self.topic, &event).await {
                tracing::debug!(error = %e, topic = ?self.topic, "live event not published");
            }
        })
    }
}

/// The notification channel every instance listens on.
pub const CHANNEL: &str = "lachesis_live";

/// The largest payload `NOTIFY` accepts (it must be shorter than 8000 bytes).
pub const MAX_PAYLOAD_BYTES: usize = 7999;

/// What goes through Postgres: the topic, and the event unless it was too large to carry.
#[derive(Serialize)]
struct OutEnvelope<'a> {
    topic: &'a Topic,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a LiveEvent>,
    /// For an omitted group: its environment, whose topic is told too.
    #[serde(skip_serializing_if = "Option::is_none")]
    omitted_env: Option<i64>,
}

#[derive(Deserialize)]
struct InEnvelope {
    topic: Topic,
    #[serde(default)]
    event: Option<LiveEvent>,
    #[serde(default)]
    omitted_env: Option<i64>,
}

/// Publishes `event` on `topic` to the subscribers of every instance. Inside a transaction it goes
/// out on commit. Only a database error fails it; an oversized event is trimmed (see above).
pub async fn publish<'e>(
    db: impl sqlx::PgExecutor<'e>,
    topic: &Topic,
    event: &LiveEvent,
) -> Result<(), sqlx::Error> {
    let Some(payload) = payload(topic, event) else {
        tracing::warn!(
            ?topic,
            "live event not published: its topic alone exceeds NOTIFY's limit"
        );
        return Ok(());
    };
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(db)
        .await?;
    Ok(())
}

/// The notification payload for an event, trimmed to fit; `None` if nothing fits. Public for
/// callers that fold the `pg_notify` into a statement of their own (the ingest path).
pub fn payload(topic: &Topic, event: &LiveEvent) -> Option<String> {
    let full = envelope(topic, Some(event), None);
    if full.len() <= MAX_PAYLOAD_BYTES {
        return Some(full);
    }
    if let LiveEvent::Group(group) = event
        && group.advantages.is_some()
    {
        let mut lighter = group.clone();
        lighter.advantages = None;
        let trimmed = envelope(topic, Some(&LiveEvent::Group(lighter)), None);
        if trimmed.len() <= MAX_PAYLOAD_BYTES {
            return Some(trimmed);
        }
    }
    let omitted_env = match event {
        LiveEvent::Group(group) => group.env_id,
        _ => None,
    };
    tracing::debug!(
        ?topic,
        bytes = full.len(),
        "live event too large for NOTIFY: omitted"
    );
    let notice = envelope(topic, None, omitted_env);
    (notice.len() <= MAX_PAYLOAD_BYTES).then_some(notice)
}

fn envelope(topic: &Topic, event: Option<&LiveEvent>, omitted_env: Option<i64>) -> String {
    let envelope = OutEnvelope {
        topic,
        event,
        omitted_env,
    };
    // Strings, integers, floats and string-keyed maps: serde_json always encodes them.
    serde_json::to_string(&envelope).unwrap_or_default()
}

/// The listening half: one task per server that hands notifications to the local hub.
pub struct Bridge {
    db: PgPool,
    listener: PgListener,
    hub: Hub,
}

impl Bridge {
    /// Starts listening now, so that events published once the server is built are delivered.
    pub async fn listen(db: &PgPool, hub: Hub) -> Result<Self, sqlx::Error> {
        Ok(Self {
            db: db.clone(),
            listener: connect(db).await?,
            hub,
        })
    }

    /// Delivers notifications until the hub shuts down or the pool is closed, supervised: after a
    /// lost connection it listens again (on a new one) and tells every subscriber to reload.
    pub fn spawn(
        self,
        tasks: &crate::supervisor::Supervisor,
        shutdown: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let (db, hub) = (self.db.clone(), self.hub.clone());
        // The first attempt uses the listener `Server::build` opened; later ones open their own.
        let mut listening = Some(self);
        tasks.spawn("live-bridge", shutdown, move || {
            let listening = listening.take();
            let (db, hub) = (db.clone(), hub.clone());
            async move {
                let bridge = match listening {
                    Some(bridge) => bridge,
                    None => {
                        let bridge = Bridge::listen(&db, hub.clone()).await?;
                        tracing::warn!(
                            "live bridge listening again; subscribers are told to reload"
                        );
                        hub.lag_everyone();
                        bridge
                    }
                };
                bridge.run().await
            }
        })
    }

    /// `Ok` when the hub stops or the pool closes; an error when the connection is lost.
    async fn run(mut self) -> anyhow::Result<()> {
        let hub = self.hub.clone();
        let stopped = hub.stopped();
        tokio::pin!(stopped);
        loop {
            let next = tokio::select! {
                () = &mut stopped => break,
                next = self.listener.try_recv() => next,
            };
            match next {
                Ok(Some(notification)) => self.dispatch(notification.payload()),
                // sqlx's way of saying the connection dropped (it would listen again by itself,
                // silently: `connect` turns that off so the loss is counted and told).
                Ok(None) => bail!("the live bridge lost its database connection"),
                Err(sqlx::Error::PoolClosed) => break,
                Err(e) => bail!("the live bridge's database connection failed: {e}"),
            }
        }
        tracing::debug!("live bridge stopped");
        Ok(())
    }

    fn dispatch(&self, payload: &str) {
        match serde_json::from_str::<InEnvelope>(payload) {
            Ok(InEnvelope {
                topic,
                event: Some(event),
                ..
            }) => self.hub.deliver(&topic, &event),
            Ok(InEnvelope {
                topic,
                event: None,
                omitted_env,
            }) => self.hub.lag_topic(&topic, omitted_env),
            // Anyone with database access can NOTIFY this channel; a stray payload is not ours.
            Err(e) => tracing::warn!(error = %e, "ignoring a malformed live notification"),
        }
    }
}

async fn connect(db: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(db).await?;
    // A dropped connection ends `run` instead of being replaced inside `try_recv`.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use lachesis_shared::runs::{GroupSummary, TrainerPoint};

    use super::*;

    fn group(sequences: usize, advantages: bool) -> LiveEvent {
        LiveEvent::Group(GroupSummary {
            id: 1,
            run: "r".into(),
            env_id: Some(2),
            at_ms: 0,
            weight_version: None,
            scores: vec![0.123_456_789_012_345_67; sequences],
            advantages: advantages.then(|| vec![-0.987_654_321_098_765_4; sequences]),
            tokens: 10,
        })
    }

    fn topic() -> Topic {
        Topic::Run { run: "r".into() }
    }

    fn decode(payload: &str) -> InEnvelope {
        serde_json::from_str(payload).expect("our own envelope")
    }

    #[test]
    fn a_small_event_travels_whole() {
        let event = group(16, true);
        let got = decode(&payload(&topic(), &event).unwrap());
        assert_eq!(got.topic, topic());
        assert_eq!(got.event, Some(event));
    }

    #[test]
    fn an_oversized_group_loses_its_advantages_first() {
        let event = group(300, true);
        let sent = payload(&topic(), &event).unwrap();
        assert!(sent.len() <= MAX_PAYLOAD_BYTES);
        let LiveEvent::Group(expected) = group(300, false) else {
            unreachable!()
        };
        assert_eq!(decode(&sent).event, Some(LiveEvent::Group(expected)));
    }

    #[test]
    fn an_event_that_still_does_not_fit_becomes_an_omitted_notice() {
        let sent = payload(&topic(), &group(1000, true)).unwrap();
        let got = decode(&sent);
        assert_eq!((got.event, got.omitted_env), (None, Some(2)));

        let values = (0..1000).map(|i| (format!("metric_{i}"), 1.5)).collect();
        let trainer = LiveEvent::Trainer(TrainerPoint {
            at_ms: 0,
            step: 1,
            values,
        });
        let got = decode(&payload(&topic(), &trainer).unwrap());
        assert_eq!((got.event, got.omitted_env), (None, None));
    }

    #[test]
    fn a_topic_too_long_for_any_notice_sends_nothing() {
        let topic = Topic::Run {
            run: "x".repeat(MAX_PAYLOAD_BYTES),
        };
        assert_eq!(payload(&topic, &group(1, false)), None);
    }
}
