//! The spatial tables: live scenes' latest snapshots and people's demonstrations.

use lachesis_shared::spatial::{Action, ObjectPose, SceneSnapshot, Task, Verdict};
use sqlx::PgPool;

pub struct NewDemonstration<'a> {
    pub task: &'a Task,
    pub actions: &'a [Action],
    pub final_poses: &'a [ObjectPose],
    pub verdict: &'a Verdict,
    pub rested: bool,
    pub user_id: Option<i64>,
}

fn json(value: &impl serde::Serialize) -> Result<serde_json::Value, sqlx::Error> {
    serde_json::to_value(value).map_err(|e| sqlx::Error::Encode(Box::new(e)))
}

pub async fn insert_demonstration(
    db: &PgPool,
    d: &NewDemonstration<'_>,
) -> Result<i64, sqlx::Error> {
    let seed = i64::try_from(d.task.seed).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query_scalar(
        "INSERT INTO spatial_demonstrations \
             (task_id, seed, difficulty, actions, final_poses, score, verdict, rested, user_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(&d.task.id)
    .bind(seed)
    .bind(i16::from(d.task.difficulty))
    .bind(json(&d.actions)?)
    .bind(json(&d.final_poses)?)
    .bind(d.verdict.score)
    .bind(json(d.verdict)?)
    .bind(d.rested)
    .bind(d.user_id)
    .fetch_one(db)
    .await
}

/// One JSON object per line, oldest first: the task's id, seed and difficulty, the actions, the
/// final poses and the verdict, who and when.
pub async fn demonstrations_jsonl(
    db: &PgPool,
    only_user: Option<i64>,
) -> Result<String, sqlx::Error> {
    let lines: Vec<String> = sqlx::query_scalar(
        "SELECT json_build_object( \
             'id', d.id, 'task_id', d.task_id, 'seed', d.seed, 'difficulty', d.difficulty, \
             'actions', d.actions, 'final_poses', d.final_poses, 'score', d.score, \
             'verdict', d.verdict, 'rested', d.rested, 'user', u.username, \
             'created_at', d.created_at)::text \
         FROM spatial_demonstrations d LEFT JOIN users u ON u.id = d.user_id \
         WHERE $1::bigint IS NULL OR d.user_id = $1 ORDER BY d.id",
    )
    .bind(only_user)
    .fetch_all(db)
    .await?;
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

pub async fn save_scene(
    db: &PgPool,
    scene: &str,
    snapshot: &SceneSnapshot,
) -> Result<(), sqlx::Error> {
    let seq = i64::try_from(snapshot.seq).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(
        "INSERT INTO spatial_scenes (scene, seq, snapshot) VALUES ($1, $2, $3) \
         ON CONFLICT (scene) DO UPDATE SET seq = EXCLUDED.seq, snapshot = EXCLUDED.snapshot, \
             updated_at = now()",
    )
    .bind(scene)
    .bind(seq)
    .bind(json(snapshot)?)
    .execute(db)
    .await?;
    Ok(())
}

pub async fn load_scene(db: &PgPool, scene: &str) -> Result<Option<SceneSnapshot>, sqlx::Error> {
    let row: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT snapshot FROM spatial_scenes WHERE scene = $1")
            .bind(scene)
            .fetch_optional(db)
            .await?;
    // A row this code did not write (or an older shape) reads as no scene.
    Ok(row.and_then(|v| serde_json::from_value(v).ok()))
}

/// A demonstration as the signal exports read it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DemonstrationRow {
    pub id: i64,
    pub seed: i64,
    pub difficulty: i16,
    pub actions: serde_json::Value,
    pub score: f32,
    pub username: Option<String>,
}

/// Up to `limit` demonstrations after id `after`, oldest first: `user`'s own, or everyone's when
/// `None`.
pub async fn demonstrations_after(
    db: &PgPool,
    user: Option<i64>,
    after: i64,
    limit: i64,
) -> Result<Vec<DemonstrationRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT d.id, d.seed, d.difficulty, d.actions, d.score, u.username \
         FROM spatial_demonstrations d LEFT JOIN users u ON u.id = d.user_id \
         WHERE ($1::bigint IS NULL OR d.user_id = $1) AND d.id > $2 ORDER BY d.id LIMIT $3",
    )
    .bind(user)
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await
}
