//! The SQL of the marketplace's feed (`market_events`).

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::marketplace::MarketEvent;
use sqlx::PgPool;
use sqlx::types::Json;

/// Stores the event and publishes it on commit; an episode already stored (a replay) is neither
/// stored nor published again. Returns whether it was new.
pub async fn record(db: &PgPool, event: &MarketEvent) -> Result<bool, sqlx::Error> {
    let episode = match event {
        MarketEvent::Round(round) => &round.episode,
        MarketEvent::Skipped(skipped) => &skipped.episode,
    };
    let json = serde_json::to_value(event).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut tx = db.begin().await?;
    let stored = sqlx::query(
        "INSERT INTO market_events (run, episode, event) VALUES ($1, $2, $3)
         ON CONFLICT (episode) DO NOTHING",
    )
    .bind(event.run())
    .bind(episode)
    .bind(json)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if stored {
        let live = LiveEvent::Market(event.clone());
        crate::live::bridge::publish(&mut *tx, &Topic::Marketplace, &live).await?;
    }
    tx.commit().await?;
    Ok(stored)
}

/// The newest `limit` events (of `run`, or of every run), newest first. An event stored in a
/// form that no longer reads is a decode error.
pub async fn recent(
    db: &PgPool,
    run: Option<&str>,
    limit: i64,
) -> Result<Vec<MarketEvent>, sqlx::Error> {
    let rows: Vec<Json<MarketEvent>> = sqlx::query_scalar(
        "SELECT event FROM market_events WHERE $1::TEXT IS NULL OR run = $1
         ORDER BY id DESC LIMIT $2",
    )
    .bind(run)
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|Json(event)| event).collect())
}

/// The database's clock as RFC 3339 (UTC, milliseconds), the form every `at` of the API takes.
pub async fn now(db: &PgPool) -> Result<String, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
    )
    .fetch_one(db)
    .await
}
