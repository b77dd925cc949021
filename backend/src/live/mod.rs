//! The live hub: browsers subscribe to topics over one WebSocket (`GET /ws`) and the server pushes
//! what happens on them (scored groups, run status, trainer metrics).
//!
//! - [`hub`]: this instance's subscriptions and each connection's bounded outbox.
//! - [`bridge`]: publishing through Postgres `NOTIFY` and the listener that feeds the hub, so every
//!   instance behind a load balancer delivers the same events.
//! - [`socket`]: the WebSocket endpoint.
//!
//! Publishers call [`publish`] (inside their transaction when they have one) on a run's topic;
//! nothing calls [`Hub::deliver`] but the bridge.

pub mod bridge;
pub mod hub;
pub mod outbox;
pub mod socket;

pub use bridge::{Bridge, publish};
pub use hub::{Hub, HubStats};
