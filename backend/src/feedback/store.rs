//! The SQL of feedback queues, items and judgements.

use std::time::Duration;

use lachesis_shared::feedback::{FeedbackKind, ItemToJudge, Judgement, NewItem, QueueView};
use sqlx::PgPool;

#[derive(Debug, thiserror::Error)]
pub enum FeedbackStoreError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A stored row holds a value this build does not read.
    #[error("stored feedback row: {0}")]
    Unreadable(String),
}

/// A queue with the team it belongs to.
#[derive(Debug, Clone)]
pub struct StoredQueue {
    pub team_id: Option<i64>,
    pub view: QueueView,
}

fn kind_of(name: &str) -> Result<FeedbackKind, FeedbackStoreError> {
    FeedbackKind::parse(name)
        .ok_or_else(|| FeedbackStoreError::Unreadable(format!("kind {name:?}")))
}

pub async fn insert_queue(
    db: &PgPool,
    team: Option<i64>,
    name: &str,
    kind: FeedbackKind,
    guidelines: &str,
    overlap: i32,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO feedback_queues (team_id, name, kind, guidelines, overlap)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
        team,
        name,
        kind.as_str(),
        guidelines,
        overlap
    )
    .fetch_one(db)
    .await
}

/// Whose queues to list.
#[derive(Debug, Clone, Copy)]
pub enum QueueScope {
    All,
    /// One team's.
    Team(i64),
    /// The teams a user belongs to.
    MemberOf(i64),
}

/// Queue `id` (any queue when `None`) within `scope`.
pub async fn queues(
    db: &PgPool,
    id: Option<i64>,
    scope: QueueScope,
) -> Result<Vec<StoredQueue>, FeedbackStoreError> {
    let (team, member) = match scope {
        QueueScope::All => (None, None),
        QueueScope::Team(team) => (Some(team), None),
        QueueScope::MemberOf(user) => (None, Some(user)),
    };
    let rows = sqlx::query!(
        r#"SELECT q.id, q.team_id, q.name, q.kind, q.guidelines, q.overlap,
                  (SELECT count(*) FROM feedback_items i WHERE i.queue_id = q.id) AS "items!",
                  (SELECT coalesce(sum(i.judged), 0) FROM feedback_items i
                   WHERE i.queue_id = q.id)::bigint AS "judgements!",
                  (SELECT count(*) FROM feedback_items i
                   WHERE i.queue_id = q.id AND i.judged >= q.overlap) AS "complete!"
           FROM feedback_queues q
           WHERE ($1::bigint IS NULL OR q.id = $1)
             AND ($2::bigint IS NULL OR q.team_id = $2)
             AND ($3::bigint IS NULL
                  OR q.team_id IN (SELECT team_id FROM memberships WHERE user_id = $3))
           ORDER BY q.id"#,
        id,
        team,
        member
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(StoredQueue {
                team_id: r.team_id,
                view: QueueView {
                    id: r.id,
                    name: r.name,
                    kind: kind_of(&r.kind)?,
                    guidelines: r.guidelines,
                    overlap: r.overlap as u32,
                    items: r.items,
                    judgements: r.judgements,
                    complete_items: r.complete,
                },
            })
        })
        .collect()
}

/// Adds `items` to queue `queue`, all or none, and gives their ids in order; `None` (nothing
/// added) when the queue would then hold more than `cap` items. The count is kept on the queue's
/// row, whose lock orders concurrent additions, so two requests cannot both slip under the cap.
/// With `closes_in`, the items take no judgement once that long has passed.
pub async fn insert_items(
    db: &PgPool,
    queue: i64,
    items: &[NewItem],
    cap: i64,
    round: Option<&RoundTerms<'_>>,
) -> Result<Option<Vec<i64>>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let counted: Option<i32> = sqlx::query_scalar(
        "UPDATE feedback_queues SET items = items + $2 WHERE id = $1 AND items + $2 <= $3 \
         RETURNING items",
    )
    .bind(queue)
    .bind(items.len() as i32)
    .bind(cap)
    .fetch_optional(&mut *tx)
    .await?;
    if counted.is_none() {
        return Ok(None);
    }
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO feedback_items
               (queue_id, prompt, answers, source, closes_at, pay_from, pay_each, pay_key)
             VALUES ($1, $2, $3, $4, now() + $5::float8 * interval '1 second', $6, $7, $8)
             RETURNING id",
        )
        .bind(queue)
        .bind(&item.prompt)
        .bind(&item.answers)
        .bind(item.source.as_deref())
        .bind(round.map(|r| r.closes_in.as_secs_f64()))
        .bind(round.map(|r| r.pay.pay_from))
        .bind(round.map(|r| r.pay.pay_each))
        .bind(round.map(|r| r.pay.pay_key.as_str()))
        .fetch_one(&mut *tx)
        .await?;
        ids.push(id);
    }
    tx.commit().await?;
    Ok(Some(ids))
}

/// What a people's round adds with its item: the round's deadline, after which the item takes no
/// verdict, and what the round owes for each verdict, so that the item can be settled without it.
#[derive(Debug, Clone, Copy)]
pub struct RoundTerms<'a> {
    pub closes_in: Duration,
    pub pay: &'a PayTerms,
}

/// What a people's round owes for each verdict on its item.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PayTerms {
    /// The ledger account that pays (the run's budget).
    pub pay_from: i64,
    /// Micro-USDC per verdict.
    pub pay_each: i64,
    /// A verdict is paid under `<pay_key>/verdict/<judgement id>`.
    pub pay_key: String,
}

/// The longest `pay_key`: a verdict's key, with `/verdict/` and a judgement id, must fit the
/// ledger's 200 characters.
pub const PAY_KEY_CHARS: usize = 170;

/// An item whose round never settled it, with what the round owed for each verdict.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UnsettledItem {
    pub id: i64,
    #[sqlx(flatten)]
    pub pay: PayTerms,
}

/// Up to `limit` items with payment terms whose deadline passed more than `grace` ago and that
/// nobody settled: their round died, and no run replayed it in time.
pub async fn unsettled_items(
    db: &PgPool,
    grace: Duration,
    limit: i64,
) -> Result<Vec<UnsettledItem>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, pay_from, pay_each, pay_key FROM feedback_items
         WHERE pay_from IS NOT NULL AND settled_at IS NULL
           AND closes_at < now() - $1::float8 * interval '1 second'
         ORDER BY closes_at LIMIT $2",
    )
    .bind(grace.as_secs_f64())
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Marks `item`'s verdicts as all paid.
pub async fn mark_settled(db: &PgPool, item: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE feedback_items SET settled_at = now() WHERE id = $1 AND settled_at IS NULL",
    )
    .bind(item)
    .execute(db)
    .await?;
    Ok(())
}

/// The next item of `queue` for `annotator`: one still short of its overlap that they have not
/// judged, the least judged first (so every item gets its first look before any gets its
/// second), with their progress.
pub async fn next_item(
    db: &PgPool,
    queue: &QueueView,
    annotator: i64,
) -> Result<Option<ItemToJudge>, sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM feedback_judgements j JOIN feedback_items i ON i.id = j.item_id
              WHERE i.queue_id = $1 AND j.annotator = $2) AS "done!",
             (SELECT count(*) FROM feedback_items i
              WHERE i.queue_id = $1 AND i.judged < $3 AND NOT i.closed
                AND (i.closes_at IS NULL OR i.closes_at > now())
                AND NOT EXISTS (SELECT 1 FROM feedback_judgements j
                                WHERE j.item_id = i.id AND j.annotator = $2)) AS "left!""#,
        queue.id,
        annotator,
        queue.overlap as i32
    )
    .fetch_one(db)
    .await?;
    let row = sqlx::query!(
        r#"SELECT i.id, i.prompt, i.answers,
                (extract(epoch FROM i.closes_at - now()) * 1000)::bigint AS closes_in_ms
         FROM feedback_items i
         WHERE i.queue_id = $1 AND i.judged < $3 AND NOT i.closed
           AND (i.closes_at IS NULL OR i.closes_at > now())
           AND NOT EXISTS (SELECT 1 FROM feedback_judgements j
                           WHERE j.item_id = i.id AND j.annotator = $2)
         ORDER BY i.judged, i.id LIMIT 1"#,
        queue.id,
        annotator,
        queue.overlap as i32
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| ItemToJudge {
        item: r.id,
        queue: queue.id,
        kind: queue.kind,
        guidelines: queue.guidelines.clone(),
        prompt: r.prompt,
        answers: r.answers,
        done: counts.done,
        left: counts.left,
        closes_in_ms: r.closes_in_ms,
    }))
}

/// An item with its queue's id and rules, for checking a judgement.
pub struct ItemRules {
    pub queue: i64,
    pub answers: usize,
}

pub async fn item_rules(db: &PgPool, item: i64) -> Result<Option<ItemRules>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT queue_id, cardinality(answers) AS "answers!" FROM feedback_items WHERE id = $1"#,
        item
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| ItemRules {
        queue: r.queue_id,
        answers: r.answers as usize,
    }))
}

/// What became of a judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Stored,
    AlreadyJudged,
    /// The item has all the judgements its queue's overlap asks for.
    Complete,
    /// The round that asked for it ended (see [`close_item`]).
    Closed,
    NotFound,
}

/// Stores `annotator`'s judgement of `item` if the item still wants one: the item row is locked,
/// so two people judging the last open slot at once cannot both take it.
pub async fn judge(
    db: &PgPool,
    item: i64,
    annotator: i64,
    judgement: &Judgement,
) -> Result<Judged, sqlx::Error> {
    let value = serde_json::to_value(judgement).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut tx = db.begin().await?;
    let Some(row) = sqlx::query!(
        r#"SELECT i.judged, i.closed OR coalesce(i.closes_at <= now(), false) AS "closed!", q.overlap
         FROM feedback_items i
         JOIN feedback_queues q ON q.id = i.queue_id WHERE i.id = $1 FOR UPDATE OF i"#,
        item
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(Judged::NotFound);
    };
    if row.closed {
        return Ok(Judged::Closed);
    }
    let inserted = sqlx::query!(
        "INSERT INTO feedback_judgements (item_id, annotator, judgement) VALUES ($1, $2, $3)
         ON CONFLICT (item_id, annotator) DO NOTHING",
        item,
        annotator,
        value
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Ok(Judged::AlreadyJudged);
    }
    if row.judged >= row.overlap {
        return Ok(Judged::Complete);
    }
    sqlx::query!(
        "UPDATE feedback_items SET judged = judged + 1 WHERE id = $1",
        item
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Judged::Stored)
}

/// One judgement: who gave it, on which item, what it said (agreement needs no more).
#[derive(Debug, Clone)]
pub struct JudgementRow {
    pub item: i64,
    pub annotator: String,
    pub judgement: Judgement,
}

/// A judgement with its item's texts, for the exports.
#[derive(Debug, Clone)]
pub struct ExportRow {
    /// The judgement's own id: exports page by it.
    pub id: i64,
    pub prompt: String,
    pub answers: Vec<String>,
    pub judged: JudgementRow,
}

fn judgement_of(value: serde_json::Value) -> Result<Judgement, FeedbackStoreError> {
    serde_json::from_value(value).map_err(|e| FeedbackStoreError::Unreadable(e.to_string()))
}

/// Every judgement of a queue without the items' texts, by item then by when it was given: a
/// queue's judgements are bounded by its item cap times its overlap, each a few bytes here.
pub async fn judgements(db: &PgPool, queue: i64) -> Result<Vec<JudgementRow>, FeedbackStoreError> {
    let rows: Vec<(i64, String, serde_json::Value)> = sqlx::query_as(
        "SELECT i.id, u.username, j.judgement
         FROM feedback_judgements j
         JOIN feedback_items i ON i.id = j.item_id
         JOIN users u ON u.id = j.annotator
         WHERE i.queue_id = $1 ORDER BY i.id, j.id",
    )
    .bind(queue)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|(item, annotator, judgement)| {
            Ok(JudgementRow {
                item,
                annotator,
                judgement: judgement_of(judgement)?,
            })
        })
        .collect()
}

/// Up to `limit` judgements of a queue after judgement `after`, with their items' texts, in the
/// order they were given: an export streams these pages, never the whole queue at once.
pub async fn export_page(
    db: &PgPool,
    queue: i64,
    after: i64,
    limit: i64,
) -> Result<Vec<ExportRow>, FeedbackStoreError> {
    type Row = (i64, i64, String, Vec<String>, String, serde_json::Value);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT j.id, i.id, i.prompt, i.answers, u.username, j.judgement
         FROM feedback_judgements j
         JOIN feedback_items i ON i.id = j.item_id
         JOIN users u ON u.id = j.annotator
         WHERE i.queue_id = $1 AND j.id > $2 ORDER BY j.id LIMIT $3",
    )
    .bind(queue)
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|(id, item, prompt, answers, annotator, judgement)| {
            Ok(ExportRow {
                id,
                prompt,
                answers,
                judged: JudgementRow {
                    item,
                    annotator,
                    judgement: judgement_of(judgement)?,
                },
            })
        })
        .collect()
}

/// The items of queue `queue` whose source is `source` and that nobody settled, oldest first.
pub async fn unsettled_items_from(
    db: &PgPool,
    queue: i64,
    source: &str,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT id FROM feedback_items
         WHERE queue_id = $1 AND source = $2 AND settled_at IS NULL ORDER BY id",
    )
    .bind(queue)
    .bind(source)
    .fetch_all(db)
    .await
}

/// Judgements item `item` has so far (`None`: no such item).
pub async fn judged_count(db: &PgPool, item: i64) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar("SELECT judged FROM feedback_items WHERE id = $1")
        .bind(item)
        .fetch_optional(db)
        .await
}

/// One judgement of a closed item: its id, who gave it, what it said.
#[derive(Debug, Clone)]
pub struct ClosedJudgement {
    pub id: i64,
    pub annotator: i64,
    pub judgement: Judgement,
}

/// Closes `item` to further judgements and gives the ones it received, oldest first. The item's
/// row is locked by the update, and [`judge`] locks it too, so every judgement is either stored
/// before this reads or refused as `Closed`.
pub async fn close_item(
    db: &PgPool,
    item: i64,
) -> Result<Vec<ClosedJudgement>, FeedbackStoreError> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE feedback_items SET closed = true WHERE id = $1")
        .bind(item)
        .execute(&mut *tx)
        .await?;
    let rows: Vec<(i64, i64, serde_json::Value)> = sqlx::query_as(
        "SELECT id, annotator, judgement FROM feedback_judgements WHERE item_id = $1 ORDER BY id",
    )
    .bind(item)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.into_iter()
        .map(|(id, annotator, value)| {
            Ok(ClosedJudgement {
                id,
                annotator,
                judgement: judgement_of(value)?,
            })
        })
        .collect()
}
