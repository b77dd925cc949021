//! The SQL of the arena: contenders, visitors, battles and votes.

use lachesis_shared::arena::{ArenaKind, BattleState, ContenderPolicy, VoteChoice};
use sqlx::PgPool;

/// Why an arena row could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ArenaStoreError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A stored row holds a value this build does not know (a policy, a state, a choice).
    #[error("stored arena row: {0}")]
    Unreadable(String),
}

/// A contender as stored.
#[derive(Debug, Clone)]
pub struct StoredContender {
    pub id: i64,
    pub name: String,
    pub policy: ContenderPolicy,
    pub reveals: Vec<String>,
    /// Counted votes it took part in.
    pub votes: i64,
}

pub async fn insert_contender(
    db: &PgPool,
    name: &str,
    policy: &ContenderPolicy,
    reveals: &[String],
) -> Result<i64, sqlx::Error> {
    let policy = serde_json::to_value(policy).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query_scalar!(
        "INSERT INTO arena_contenders (name, policy, reveals) VALUES ($1, $2, $3) RETURNING id",
        name,
        policy,
        reveals
    )
    .fetch_one(db)
    .await
}

/// Every contender, oldest first, with its counted votes.
pub async fn contenders(db: &PgPool) -> Result<Vec<StoredContender>, ArenaStoreError> {
    let rows = sqlx::query!(
        r#"SELECT c.id, c.name, c.policy, c.reveals,
                  (SELECT count(*) FROM arena_battles b JOIN arena_votes v ON v.battle_id = b.id
                   WHERE v.excluded IS NULL AND (b.contender_a = c.id OR b.contender_b = c.id))
                  AS "votes!"
           FROM arena_contenders c ORDER BY c.id"#
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(StoredContender {
                id: r.id,
                name: r.name,
                policy: serde_json::from_value(r.policy)
                    .map_err(|e| ArenaStoreError::Unreadable(format!("contender {}: {e}", r.id)))?,
                reveals: r.reveals,
                votes: r.votes,
            })
        })
        .collect()
}

pub async fn insert_visitor(
    db: &PgPool,
    token_hash: &[u8],
    address: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO arena_visitors (token_hash, address) VALUES ($1, $2) RETURNING id",
        token_hash,
        address
    )
    .fetch_one(db)
    .await
}

pub async fn visitor(db: &PgPool, token_hash: &[u8]) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM arena_visitors WHERE token_hash = $1",
        token_hash
    )
    .fetch_optional(db)
    .await
}

/// Battles dealt to `voter` in the last `within_s` seconds whose answers are still being
/// written (older ones were lost to a restart and hold nobody up).
pub async fn answering_battles(
    db: &PgPool,
    voter: &str,
    within_s: f64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM arena_battles
           WHERE voter = $1 AND state = 'answering'
             AND created_at > now() - make_interval(secs => $2)"#,
        voter,
        within_s
    )
    .fetch_one(db)
    .await
}

/// What a new battle is made of.
pub struct NewBattleRow<'a> {
    pub arena: ArenaKind,
    pub seed: i64,
    pub prompt: &'a str,
    pub contenders: [i64; 2],
    pub voter: &'a str,
    pub address: &'a str,
}

pub async fn insert_battle(db: &PgPool, b: &NewBattleRow<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO arena_battles (arena, seed, prompt, contender_a, contender_b, voter, address)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        b.arena.as_str(),
        b.seed,
        b.prompt,
        b.contenders[0],
        b.contenders[1],
        b.voter,
        b.address
    )
    .fetch_one(db)
    .await
}

/// Stores both answers and opens the battle to its vote, or voids it with `void_reason`.
pub async fn finish_battle(
    db: &PgPool,
    id: i64,
    answers: [Option<&str>; 2],
    judged: [Option<&str>; 2],
    void_reason: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE arena_battles
         SET answer_a = $2, answer_b = $3, judged_a = $4, judged_b = $5, void_reason = $6,
             ready_at = now(),
             state = CASE WHEN $6::text IS NULL THEN 'ready' ELSE 'void' END
         WHERE id = $1 AND state = 'answering'",
        id,
        answers[0],
        answers[1],
        judged[0],
        judged[1],
        void_reason
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A battle with its contenders' names and its vote.
#[derive(Debug, Clone)]
pub struct StoredBattle {
    pub id: i64,
    pub arena: ArenaKind,
    pub seed: u64,
    pub state: BattleState,
    pub prompt: String,
    pub answers: [Option<String>; 2],
    /// The environment's judge of each answer, as written with the answers.
    pub judged: [Option<String>; 2],
    pub contenders: [String; 2],
    pub void_reason: Option<String>,
    pub voter: String,
    pub vote: Option<VoteChoice>,
    pub excluded: Option<String>,
}

fn state_of(name: &str) -> Result<BattleState, ArenaStoreError> {
    Ok(match name {
        "answering" => BattleState::Answering,
        "ready" => BattleState::Ready,
        "voted" => BattleState::Voted,
        "void" => BattleState::Void,
        other => {
            return Err(ArenaStoreError::Unreadable(format!(
                "battle state {other:?}"
            )));
        }
    })
}

pub async fn battle(db: &PgPool, id: i64) -> Result<Option<StoredBattle>, ArenaStoreError> {
    Ok(battles(db, Some(id), None, 1).await?.pop())
}

/// The newest finished (voted or void) battles of an arena, newest first.
pub async fn recent_battles(
    db: &PgPool,
    arena: ArenaKind,
    limit: i64,
) -> Result<Vec<StoredBattle>, ArenaStoreError> {
    battles(db, None, Some(arena), limit).await
}

/// Battle `id` in any state, or an arena's finished battles, newest first.
async fn battles(
    db: &PgPool,
    id: Option<i64>,
    finished_in: Option<ArenaKind>,
    limit: i64,
) -> Result<Vec<StoredBattle>, ArenaStoreError> {
    let rows = sqlx::query!(
        r#"SELECT b.id, b.arena, b.seed, b.state, b.prompt, b.answer_a, b.answer_b, b.void_reason,
                  b.judged_a, b.judged_b, b.voter, ca.name AS name_a, cb.name AS name_b,
                  v.choice AS "choice?", v.excluded AS "excluded?"
           FROM arena_battles b
           JOIN arena_contenders ca ON ca.id = b.contender_a
           JOIN arena_contenders cb ON cb.id = b.contender_b
           LEFT JOIN arena_votes v ON v.battle_id = b.id
           WHERE ($1::bigint IS NULL OR b.id = $1)
             AND ($2::text IS NULL OR (b.arena = $2 AND b.state IN ('voted', 'void')))
           ORDER BY b.id DESC LIMIT $3"#,
        id,
        finished_in.map(ArenaKind::as_str),
        limit
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(StoredBattle {
                id: r.id,
                arena: ArenaKind::parse(&r.arena)
                    .ok_or_else(|| ArenaStoreError::Unreadable(format!("arena {:?}", r.arena)))?,
                seed: r.seed as u64,
                state: state_of(&r.state)?,
                prompt: r.prompt,
                answers: [r.answer_a, r.answer_b],
                judged: [r.judged_a, r.judged_b],
                contenders: [r.name_a, r.name_b],
                void_reason: r.void_reason,
                voter: r.voter,
                vote: r
                    .choice
                    .map(|c| {
                        VoteChoice::parse(&c)
                            .ok_or_else(|| ArenaStoreError::Unreadable(format!("vote {c:?}")))
                    })
                    .transpose()?,
                excluded: r.excluded,
            })
        })
        .collect()
}

/// What happened to a vote.
#[derive(Debug, Clone, PartialEq)]
pub enum CastOutcome {
    Cast { excluded: Option<String> },
    NotFound,
    NotYours,
    StillAnswering,
    AlreadyVoted,
    Void,
}

/// A vote as cast.
#[derive(Debug, Clone, Copy)]
pub struct Ballot<'a> {
    pub battle: i64,
    pub voter: &'a str,
    pub address: &'a str,
    pub choice: VoteChoice,
    pub reason: Option<&'a str>,
}

/// What a vote's announcement is made from: the battle's arena and contenders, and whether the
/// vote counts.
#[derive(Debug, Clone)]
pub struct CastVote {
    pub arena: ArenaKind,
    /// The contenders' names, A then B.
    pub contenders: [String; 2],
    pub counted: bool,
}

/// Closes battle `id` with `voter`'s vote, in one transaction: the battle row is locked, checked
/// (theirs, answers complete, not voted, not void), moved to `voted`, and the vote inserted with
/// what `exclude` says of it (given the seconds since the answers were complete and the voter's
/// earlier choices, most recent first). `announce` gives the live notification's channel and
/// payload, sent by the same statement, so it goes out exactly when the vote is committed.
pub async fn cast_vote(
    db: &PgPool,
    ballot: &Ballot<'_>,
    history: i64,
    exclude: impl FnOnce(f64, &[VoteChoice]) -> Option<String>,
    announce: impl FnOnce(CastVote) -> Option<(&'static str, String)>,
) -> Result<CastOutcome, ArenaStoreError> {
    let Ballot {
        battle: id,
        voter,
        address,
        choice,
        reason,
    } = *ballot;
    let mut tx = db.begin().await?;
    // The voter's earlier choices come with the locked row: one round trip for both.
    let Some(battle) = sqlx::query!(
        r#"SELECT state, voter, arena,
                  (SELECT c.name FROM arena_contenders c WHERE c.id = contender_a) AS "name_a!",
                  (SELECT c.name FROM arena_contenders c WHERE c.id = contender_b) AS "name_b!",
                  EXTRACT(EPOCH FROM (now() - ready_at))::float8 AS "taken?",
                  ARRAY(SELECT v.choice FROM arena_votes v WHERE v.voter = $2
                        ORDER BY v.id DESC LIMIT $3) AS "earlier!"
           FROM arena_battles WHERE id = $1 FOR UPDATE"#,
        id,
        voter,
        history
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(CastOutcome::NotFound);
    };
    if battle.voter != voter {
        return Ok(CastOutcome::NotYours);
    }
    match state_of(&battle.state)? {
        BattleState::Answering => return Ok(CastOutcome::StillAnswering),
        BattleState::Voted => return Ok(CastOutcome::AlreadyVoted),
        BattleState::Void => return Ok(CastOutcome::Void),
        BattleState::Ready => {}
    }
    let earlier = battle
        .earlier
        .iter()
        .map(|c| {
            VoteChoice::parse(c).ok_or_else(|| ArenaStoreError::Unreadable(format!("vote {c:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let taken = battle.taken.unwrap_or(0.0).max(0.0);
    let excluded = exclude(taken, &earlier);
    let arena = ArenaKind::parse(&battle.arena)
        .ok_or_else(|| ArenaStoreError::Unreadable(format!("arena {:?}", battle.arena)))?;
    let notice = announce(CastVote {
        arena,
        contenders: [battle.name_a, battle.name_b],
        counted: excluded.is_none(),
    });
    let (channel, payload) = match &notice {
        Some((channel, payload)) => (Some(*channel), Some(payload.as_str())),
        None => (None, None),
    };
    // Two statements: the vote's trigger checks that its battle is already closed, which a
    // statement running beside the update (one snapshot) would not see.
    sqlx::query!("UPDATE arena_battles SET state = 'voted' WHERE id = $1", id)
        .execute(&mut *tx)
        .await?;
    sqlx::query!(
        r#"WITH cast_vote AS (
               INSERT INTO arena_votes
                   (battle_id, voter, address, choice, reason, excluded, seconds_taken)
               VALUES ($1, $2, $3, $4, $5, $6, $7))
           SELECT pg_notify($8, $9) WHERE $8::text IS NOT NULL"#,
        id,
        voter,
        address,
        choice.as_str(),
        reason,
        excluded.as_deref(),
        taken,
        channel,
        payload
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(CastOutcome::Cast { excluded })
}

/// One vote for the ratings: contender ids, the choice, the answers' lengths in characters.
#[derive(Debug, Clone, Copy)]
pub struct VoteRow {
    pub id: i64,
    pub contenders: [i64; 2],
    pub choice: VoteChoice,
    pub lengths: [f64; 2],
    pub counted: bool,
}

/// Every vote of an arena, oldest first, counted or not.
pub async fn votes(db: &PgPool, arena: ArenaKind) -> Result<Vec<VoteRow>, ArenaStoreError> {
    let rows = sqlx::query!(
        r#"SELECT v.id, b.contender_a, b.contender_b, v.choice, v.excluded IS NULL AS "counted!",
                  char_length(coalesce(b.answer_a, ''))::float8 AS "len_a!",
                  char_length(coalesce(b.answer_b, ''))::float8 AS "len_b!"
           FROM arena_votes v JOIN arena_battles b ON b.id = v.battle_id
           WHERE b.arena = $1 ORDER BY v.id"#,
        arena.as_str()
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(VoteRow {
                id: r.id,
                contenders: [r.contender_a, r.contender_b],
                choice: VoteChoice::parse(&r.choice)
                    .ok_or_else(|| ArenaStoreError::Unreadable(format!("vote {:?}", r.choice)))?,
                lengths: [r.len_a, r.len_b],
                counted: r.counted,
            })
        })
        .collect()
}

/// The newest vote id of an arena (0 when none): the leaderboard cache's key.
pub async fn last_vote(db: &PgPool, arena: ArenaKind) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(max(v.id), 0) AS "id!" FROM arena_votes v
           JOIN arena_battles b ON b.id = v.battle_id WHERE b.arena = $1"#,
        arena.as_str()
    )
    .fetch_one(db)
    .await
}

/// One line of the public export.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportRow {
    pub battle: i64,
    pub arena: String,
    pub model_a: String,
    pub model_b: String,
    /// Chatbot Arena's `winner`; `None` for a void battle.
    pub winner: Option<String>,
    pub excluded: Option<String>,
    pub void: bool,
    pub void_reason: Option<String>,
    pub prompt: String,
    pub answer_a: Option<String>,
    pub answer_b: Option<String>,
    pub len_a: Option<i32>,
    pub len_b: Option<i32>,
    pub reason: Option<String>,
    pub tstamp: f64,
}

/// Every finished battle of an arena, oldest first, `limit` at a time after battle `after`.
pub async fn export_page(
    db: &PgPool,
    arena: ArenaKind,
    after: i64,
    limit: i64,
) -> Result<Vec<ExportRow>, ArenaStoreError> {
    let rows = sqlx::query!(
        r#"SELECT b.id, b.arena, ca.name AS model_a, cb.name AS model_b, b.state, b.void_reason,
                  b.prompt, b.answer_a, b.answer_b,
                  char_length(b.answer_a) AS len_a, char_length(b.answer_b) AS len_b,
                  v.choice AS "choice?", v.excluded AS "excluded?", v.reason AS "reason?",
                  EXTRACT(EPOCH FROM coalesce(v.cast_at, b.ready_at, b.created_at))::float8
                  AS "tstamp!"
           FROM arena_battles b
           JOIN arena_contenders ca ON ca.id = b.contender_a
           JOIN arena_contenders cb ON cb.id = b.contender_b
           LEFT JOIN arena_votes v ON v.battle_id = b.id
           WHERE b.arena = $1 AND b.state IN ('voted', 'void') AND b.id > $2
           ORDER BY b.id LIMIT $3"#,
        arena.as_str(),
        after,
        limit
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            let winner = match r.choice.as_deref() {
                Some(c) => Some(
                    VoteChoice::parse(c)
                        .ok_or_else(|| ArenaStoreError::Unreadable(format!("vote {c:?}")))?
                        .chatbot_arena_winner()
                        .to_string(),
                ),
                None => None,
            };
            Ok(ExportRow {
                battle: r.id,
                arena: r.arena,
                model_a: r.model_a,
                model_b: r.model_b,
                winner,
                excluded: r.excluded,
                void: r.state == "void",
                void_reason: r.void_reason,
                prompt: r.prompt,
                answer_a: r.answer_a,
                answer_b: r.answer_b,
                len_a: r.len_a,
                len_b: r.len_b,
                reason: r.reason,
                tstamp: r.tstamp,
            })
        })
        .collect()
}

/// Benchmark set-up: `count` battles dealt to `voter`, answered a minute ago and open to its vote,
/// each between two of `contenders` picked by `seed`. Returns their ids.
pub async fn seed_ready_battles(
    db: &PgPool,
    arena: ArenaKind,
    contenders: &[i64],
    voter: &str,
    count: usize,
    seed: u64,
) -> Result<Vec<i64>, sqlx::Error> {
    let n = contenders.len() as i64;
    sqlx::query_scalar!(
        r#"INSERT INTO arena_battles (arena, seed, prompt, contender_a, contender_b, answer_a,
                                      answer_b, state, voter, address, ready_at)
           SELECT $1, $2 + k, 'a seeded prompt',
                  ($3::bigint[])[1 + ((($2 + k) * 7) % $4)],
                  ($3::bigint[])[1 + ((($2 + k) * 7 + 1 + (($2 + k) % ($4 - 1))) % $4)],
                  'answer one', 'answer two', 'ready', $5, '127.0.0.1', now() - interval '1 minute'
           FROM generate_series(1, $6::bigint) AS k
           RETURNING id"#,
        arena.as_str(),
        seed as i64,
        contenders,
        n,
        voter,
        count as i64
    )
    .fetch_all(db)
    .await
}
