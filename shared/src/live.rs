//! The live hub's protocol: one WebSocket per browser tab (`GET /ws`), text frames of JSON.
//!
//! The client subscribes to topics; the server pushes events on them. Both directions are closed
//! enums, parsed once and dispatched with `match`. A frame that does not parse gets
//! [`ServerMsg::Error`] and the connection stays open.
//!
//! Delivery: events of one topic arrive in order. State topics (a run's status) are coalesced: a
//! slow client gets the latest value, not every one. Stream events (scored groups, trainer metrics)
//! wait in a bounded queue per connection; when it is full the oldest are dropped and the client
//! is told how many with [`ServerMsg::Lagged`], so it can reload what it missed over HTTP.

use serde::{Deserialize, Serialize};

use crate::chess::{ChessGameEvent, ChessMoveEvent};
use crate::runs::{GroupSummary, RunStatusPoint, TrainerPoint};

/// Bumped on any incompatible change; the server states its version in [`ServerMsg::Welcome`].
pub const PROTOCOL_VERSION: u32 = 1;

/// What a client can subscribe to. Issues that add scenes, games and the marketplace add the
/// events they publish to [`LiveEvent`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Topic {
    /// Everything about one run: its groups, status and trainer metrics.
    Run {
        /// The run's name.
        run: String,
    },
    /// One environment of a run: only its groups.
    Env {
        /// The run's name.
        run: String,
        /// The environment's id within the run.
        env_id: i64,
    },
    /// A spatial scene.
    Scene {
        /// The scene's id.
        scene: String,
    },
    /// A chess game.
    Game {
        /// The game's id.
        game: String,
    },
    /// The judge marketplace's feed.
    Marketplace,
    /// The MCP tools environment's episodes, call by call.
    Tools,
    /// The protein binder design environment's episodes, stage by stage.
    Protein,
    /// An arena's votes, as they are cast (public, like the arena's pages).
    Arena {
        /// The arena.
        arena: crate::arena::ArenaKind,
    },
    /// One battle's answers while they are written (public, like the battle's page).
    Battle {
        /// The battle's id.
        battle: i64,
    },
}

impl Topic {
    /// The run whose permissions govern this topic, if any.
    pub fn run(&self) -> Option<&str> {
        match self {
            Topic::Run { run } | Topic::Env { run, .. } => Some(run),
            _ => None,
        }
    }
}

/// Browser → server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Start receiving `topic`'s events; answered with [`ServerMsg::Subscribed`] or an error.
    Subscribe {
        /// What to follow.
        topic: Topic,
    },
    /// Stop receiving `topic`'s events; answered with [`ServerMsg::Unsubscribed`].
    Unsubscribe {
        /// What to stop following.
        topic: Topic,
    },
    /// Application-level heartbeat: browsers cannot see WebSocket ping frames, so the client
    /// pings and treats a missing pong as a dead connection.
    Ping {
        /// Any number; the server echoes it in [`ServerMsg::Pong`].
        nonce: u64,
    },
    /// A move in a chess game the client plays; the server validates it and answers on the
    /// game's topic (or with an error frame).
    ChessMove {
        /// The game's id.
        game: String,
        /// The move in UCI notation, e.g. `e2e4` or `e7e8q`.
        uci: String,
    },
}

/// Server → browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// The first frame on every connection.
    Welcome {
        /// The server's [`PROTOCOL_VERSION`].
        version: u32,
        /// How often the client should ping; the server closes connections silent for 3x this.
        heartbeat_ms: u64,
        /// The signed-in user's name; `None` for anonymous visitors and token clients.
        user: Option<String>,
    },
    /// The subscription is active: events of `topic` follow.
    Subscribed {
        /// The topic as the client asked for it.
        topic: Topic,
    },
    /// The subscription ended; no more events of `topic` come.
    Unsubscribed {
        /// The topic as the client named it.
        topic: Topic,
    },
    /// Something happened on a subscribed topic.
    Event {
        /// Which subscription it belongs to.
        topic: Topic,
        /// What happened.
        event: LiveEvent,
    },
    /// `dropped` events of `topic` were discarded because this client read too slowly (or an
    /// event was too large to relay). `dropped: 0` means an unknown number: the server lost its
    /// database connection for a while. Either way, reload the topic's history over HTTP.
    Lagged {
        /// The topic that lost events.
        topic: Topic,
        /// How many were discarded; 0: unknown.
        dropped: u64,
    },
    /// The answer to [`ClientMsg::Ping`].
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// A frame or subscription was refused; the connection stays open.
    Error {
        /// The kind of refusal, for the client to act on.
        code: LiveErrorCode,
        /// Details for a person or a log.
        message: String,
    },
}

/// Why the server refused a frame or a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveErrorCode {
    /// Not JSON, or not a `ClientMsg`.
    Malformed,
    /// A binary frame or a frame over the size limit.
    Unsupported,
    /// The topic does not exist or the client may not read it (deliberately the same answer).
    NotFound,
    /// Too many subscriptions on this connection.
    TooManySubscriptions,
    /// An action (a chess move) the rules or the game's state refuse.
    Rejected,
}

/// What happened on a topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LiveEvent {
    /// A scored group was stored (stream).
    Group(GroupSummary),
    /// The run's step and queue depth (state: coalesced).
    Status(RunStatusPoint),
    /// A trainer reported metrics for a step (stream).
    Trainer(TrainerPoint),
    /// A move was played in a chess game (stream).
    ChessMove(Box<ChessMoveEvent>),
    /// A chess game ended or was reviewed (state).
    ChessGame(ChessGameEvent),
    /// A Pay-to-Play round was judged or skipped (stream, on the marketplace topic).
    Market(crate::marketplace::MarketEvent),
    /// A step of a tool-calling episode (stream, on the tools topic).
    ToolEpisode(crate::tools::ToolEpisodeEvent),
    /// A step of a binder design episode (stream, on the protein topic).
    ProteinEpisode(Box<crate::protein::ProteinEpisodeEvent>),
    /// A vote was cast (stream, on the arena's topic).
    ArenaVote(crate::arena::ArenaVoteEvent),
    /// A battle's answers so far (state, on the battle's topic).
    BattleText(crate::arena::BattleTextEvent),
    /// A spatial scene changed (state: a snapshot or a delta; a reader that misses one sees a
    /// sequence gap and reloads the snapshot over HTTP).
    #[cfg(feature = "spatial")]
    Scene(Box<crate::spatial::SceneEvent>),
}

impl LiveEvent {
    /// State events replace an undelivered predecessor on the same topic instead of queueing.
    pub fn is_state(&self) -> bool {
        match self {
            LiveEvent::Status(_) | LiveEvent::ChessGame(_) | LiveEvent::BattleText(_) => true,
            #[cfg(feature = "spatial")]
            LiveEvent::Scene(_) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_a_stable_tagged_shape() {
        let subscribe: ClientMsg =
            serde_json::from_str(r#"{"type":"subscribe","topic":{"kind":"run","run":"r1"}}"#)
                .unwrap();
        assert_eq!(
            subscribe,
            ClientMsg::Subscribe {
                topic: Topic::Run { run: "r1".into() }
            }
        );
        let lagged = serde_json::to_value(ServerMsg::Lagged {
            topic: Topic::Marketplace,
            dropped: 3,
        })
        .unwrap();
        assert_eq!(
            lagged,
            serde_json::json!({"type": "lagged", "topic": {"kind": "marketplace"}, "dropped": 3})
        );
        assert!(serde_json::from_str::<ClientMsg>(r#"{"type":"subscribe"}"#).is_err());
        // Every event survives the trip, marketplace events (themselves tagged) included.
        let skipped = ServerMsg::Event {
            topic: Topic::Marketplace,
            event: LiveEvent::Market(crate::marketplace::MarketEvent::Skipped(
                crate::marketplace::SkippedEvent {
                    run: "r".into(),
                    episode: "r/episode/1".into(),
                    at: "2026-12-01T00:00:00.000Z".into(),
                    reason: "budget spent".into(),
                    budget_left: crate::ledger::MicroUsdc(5),
                },
            )),
        };
        let text = serde_json::to_string(&skipped).unwrap();
        assert_eq!(
            serde_json::from_str::<ServerMsg>(&text).unwrap(),
            skipped,
            "{text}"
        );
        assert!(serde_json::from_str::<ClientMsg>(r#"{"type":"shout","topic":null}"#).is_err());
    }
}
