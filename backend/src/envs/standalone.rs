//! What `lachesis env` lends an environment that needs more than a policy, outside any server:
//! the parts a server would lend, taken from the database it is given (`--database-url`).
//! Pay-to-Play pays the platform's cards through that database's ledger, settled in the ledger
//! alone (never on chain from here), and its rounds and scenes reach the viewers of every server
//! on that database through the live bridge.

use std::sync::Arc;

use anyhow::Context;
use lachesis_shared::live::Topic;
use sqlx::PgPool;
use tokio::sync::watch;

use super::in_process::{LiveFeed, LiveScene, ServerParts};
use super::pay_to_play::Marketplace;
use crate::ledger::Ledger;
use crate::live::bridge::BridgeFeed;
use crate::marketplace::judges::Judges;
use crate::policy::Policy;
use crate::settlement::Settler;

/// A database's ledger, marketplace and live bridge, with the policy that answers model cards.
pub struct DatabaseParts {
    db: PgPool,
    ledger: Ledger,
    policy: Arc<dyn Policy>,
    shutdown: watch::Receiver<bool>,
}

impl DatabaseParts {
    /// Connects, brings the schema up to date and seeds the platform's cards, as a server does at
    /// start (both are idempotent and take their own locks, so a server may share the database).
    pub async fn connect(
        database_url: &str,
        policy: Arc<dyn Policy>,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<Self> {
        let db = crate::db::connect(database_url, 4)
            .await
            .context("connecting to --database-url")?;
        crate::db::migrate(&db).await?;
        crate::marketplace::cards::seed(&db).await?;
        let ledger = Ledger::with_owner(db.clone()).await?;
        Ok(Self {
            db,
            ledger,
            policy,
            shutdown,
        })
    }
}

impl ServerParts for DatabaseParts {
    fn live_scene(&self) -> LiveScene {
        crate::spatial::live_scene(self.db.clone(), self.shutdown.clone())
    }

    fn marketplace(&self) -> Marketplace {
        Marketplace {
            ledger: self.ledger.clone(),
            settler: Settler::Simulated,
            // The policy answers the model cards; only the platform's cards are heard, as on a
            // server, so no team's card is paid by a process its owner never saw.
            judges: Judges::new(Some(self.policy.clone())).platform_cards_only(),
            queue_items: crate::feedback::DEFAULT_QUEUE_ITEMS,
        }
    }

    fn live_feed(&self, topic: Topic) -> Arc<dyn LiveFeed> {
        Arc::new(BridgeFeed::new(self.db.clone(), topic))
    }
}
