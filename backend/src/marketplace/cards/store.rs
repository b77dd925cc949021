//! The SQL of agent cards (`agent_cards`) and their evaluations (`card_evaluations`); the cards'
//! ledger accounts are the ledger's ([`crate::ledger::queries`]).

use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{AgentCard, CardListing, CardStats, JudgeBackend};
use sqlx::{PgConnection, PgPool};

/// A card's listing as stored: its fields, the ledger account it is paid into and its judge as
/// JSON (checked by the caller). Names are stored trimmed.
pub struct CardRow<'a> {
    pub listing: &'a CardListing,
    pub account: i64,
    pub judge: serde_json::Value,
}

/// Lists a built-in card unless a card of that slug exists (prices set later by an admin stay).
pub async fn insert_builtin(db: &PgPool, card: CardRow<'_>) -> Result<(), sqlx::Error> {
    write_platform_card(db, card, true, false).await?;
    Ok(())
}

/// Lists an operator's card or brings the platform card of that slug up to date; `false` when a
/// team's card holds the slug (then nothing is written).
pub async fn upsert_operator_card(
    db: &PgPool,
    card: CardRow<'_>,
    listed: bool,
) -> Result<bool, sqlx::Error> {
    write_platform_card(db, card, listed, true).await
}

/// Inserts a platform card; a card of that slug is brought up to date only with `replace` and
/// only when it is the platform's (no team owns it). `true` when a row was written.
async fn write_platform_card(
    db: &PgPool,
    card: CardRow<'_>,
    listed: bool,
    replace: bool,
) -> Result<bool, sqlx::Error> {
    let listing = card.listing;
    let written = sqlx::query!(
        "INSERT INTO agent_cards (slug, name, description, specialties, price, account_id,
                                  judge, listed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (slug) DO UPDATE
             SET name = excluded.name, description = excluded.description,
                 specialties = excluded.specialties, price = excluded.price,
                 judge = excluded.judge, listed = excluded.listed
             WHERE $9 AND agent_cards.owner_team IS NULL",
        listing.slug,
        listing.name.trim(),
        listing.description,
        listing.specialties.as_slice(),
        listing.price.0,
        card.account,
        card.judge,
        listed,
        replace
    )
    .execute(db)
    .await?;
    Ok(written.rows_affected() > 0)
}

/// A card with its id and owning team.
pub struct StoredCard {
    pub id: i64,
    pub owner_team: Option<i64>,
    pub card: AgentCard,
}

/// A card's row with its evaluations' totals, as [`cards`] selects it.
struct CardRecord {
    id: i64,
    slug: String,
    name: String,
    description: String,
    specialties: Vec<String>,
    price: i64,
    team: Option<String>,
    owner_team: Option<i64>,
    owner_wallet: Option<String>,
    judge: serde_json::Value,
    listed: bool,
    has_key: bool,
    evaluations: i64,
    mean_score: Option<f64>,
    agreement: Option<f64>,
    bias: Option<f64>,
    spent: i64,
    useful: Option<f64>,
}

/// A stored judge that does not parse is a decode error.
impl TryFrom<CardRecord> for StoredCard {
    type Error = sqlx::Error;

    fn try_from(row: CardRecord) -> Result<Self, sqlx::Error> {
        let judge: JudgeBackend = serde_json::from_value(row.judge)
            .map_err(|e| sqlx::Error::Decode(format!("stored judge does not parse: {e}").into()))?;
        let cost_per_useful = row
            .useful
            .filter(|u| *u > 0.0)
            .map(|u| MicroUsdc((row.spent as f64 / u).round() as i64));
        let card = AgentCard {
            slug: row.slug,
            name: row.name,
            description: row.description,
            specialties: row.specialties,
            price: MicroUsdc(row.price),
            owner_team: row.team,
            owner_wallet: row.owner_wallet,
            judge,
            has_api_key: row.has_key,
            listed: row.listed,
            stats: CardStats {
                evaluations: row.evaluations,
                mean_score: row.mean_score,
                agreement: row.agreement,
                bias: row.bias,
                cost_per_useful,
                earned: MicroUsdc(row.spent),
            },
        };
        Ok(StoredCard {
            id: row.id,
            owner_team: row.owner_team,
            card,
        })
    }
}

/// The card `slug` when given, else every card (unlisted ones only with `include_unlisted`);
/// cheapest first.
async fn cards(
    db: &PgPool,
    slug: Option<&str>,
    include_unlisted: bool,
) -> Result<Vec<StoredCard>, sqlx::Error> {
    // The aggregates' nullability is not inferred: a count and a coalesce are never NULL, and
    // the team's name is NULL for the platform's cards (the LEFT JOIN).
    let rows = sqlx::query_as!(
        CardRecord,
        r#"SELECT c.id, c.slug, c.name, c.description, c.specialties, c.price,
                  t.name AS "team?", c.owner_team, c.owner_wallet, c.judge, c.listed,
                  c.judge_key IS NOT NULL AS "has_key!",
                  count(e.id) AS "evaluations!", avg(e.score) AS mean_score,
                  avg(CASE WHEN e.score IS NULL THEN 0 ELSE 1 - abs(e.score - e.consensus) END)
                      AS agreement,
                  avg(e.score - e.consensus) AS bias,
                  coalesce(sum(e.price), 0)::BIGINT AS "spent!",
                  sum(CASE WHEN e.score IS NULL THEN 0 ELSE 1 - abs(e.score - e.consensus) END)
                      AS useful
           FROM agent_cards c
           LEFT JOIN teams t ON t.id = c.owner_team
           LEFT JOIN card_evaluations e ON e.card_id = c.id
           WHERE CASE WHEN $1::TEXT IS NULL THEN c.listed OR $2 ELSE c.slug = $1 END
           GROUP BY c.id, t.name ORDER BY c.price, c.slug"#,
        slug,
        include_unlisted
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(StoredCard::try_from).collect()
}

/// Every card (unlisted ones only with `include_unlisted`), cheapest first.
pub async fn list(db: &PgPool, include_unlisted: bool) -> Result<Vec<AgentCard>, sqlx::Error> {
    let cards = cards(db, None, include_unlisted).await?;
    Ok(cards.into_iter().map(|stored| stored.card).collect())
}

/// The card `slug`, if there is one.
pub async fn find(db: &PgPool, slug: &str) -> Result<Option<StoredCard>, sqlx::Error> {
    Ok(cards(db, Some(slug), true).await?.into_iter().next())
}

/// A team's new card as stored.
pub struct TeamCardRow<'a> {
    pub card: CardRow<'a>,
    pub team: i64,
    /// Lowercase.
    pub wallet: Option<&'a str>,
    pub sealed_key: Option<Vec<u8>>,
}

/// Inserts a team's card; `false` when a card of that slug exists.
pub async fn insert_team_card(
    conn: &mut PgConnection,
    card: TeamCardRow<'_>,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(
        "INSERT INTO agent_cards (slug, name, description, specialties, price, owner_team,
                                  owner_wallet, account_id, judge, judge_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (slug) DO NOTHING",
    )
    .bind(&card.card.listing.slug)
    .bind(card.card.listing.name.trim())
    .bind(&card.card.listing.description)
    .bind(&card.card.listing.specialties)
    .bind(card.card.listing.price.0)
    .bind(card.team)
    .bind(card.wallet)
    .bind(card.card.account)
    .bind(card.card.judge)
    .bind(card.sealed_key)
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() > 0)
}

/// Holds the team's row until the transaction ends (two listings at once are counted one after
/// the other) and counts its listed cards then.
pub async fn lock_team_listing(conn: &mut PgConnection, team: i64) -> Result<i64, sqlx::Error> {
    sqlx::query("SELECT id FROM teams WHERE id = $1 FOR UPDATE")
        .bind(team)
        .execute(&mut *conn)
        .await?;
    sqlx::query_scalar("SELECT count(*) FROM agent_cards WHERE owner_team = $1 AND listed")
        .bind(team)
        .fetch_one(&mut *conn)
        .await
}

/// The card's owning team and whether it is listed; `None` when there is no such card.
pub async fn listing(
    conn: &mut PgConnection,
    slug: &str,
) -> Result<Option<(Option<i64>, bool)>, sqlx::Error> {
    sqlx::query_as("SELECT owner_team, listed FROM agent_cards WHERE slug = $1")
        .bind(slug)
        .fetch_optional(conn)
        .await
}

/// Sets the card's price and listing where given.
pub async fn update(
    conn: &mut PgConnection,
    slug: &str,
    price: Option<MicroUsdc>,
    listed: Option<bool>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE agent_cards SET price = coalesce($2, price), listed = coalesce($3, listed),
                updated_at = now()
         WHERE slug = $1",
    )
    .bind(slug)
    .bind(price.map(|p| p.0))
    .bind(listed)
    .execute(conn)
    .await?;
    Ok(())
}

/// One judge's score of one answer of a round.
pub struct Evaluation<'a> {
    pub card_id: i64,
    pub run: &'a str,
    /// `None` when its verdict could not be read.
    pub score: Option<f64>,
    /// The panel's mean, once known.
    pub consensus: Option<f64>,
    /// The share of the card's price this answer carries.
    pub price: MicroUsdc,
    /// The payment the evaluation was bought with.
    pub paid_tx: Option<i64>,
    /// The answer's place in its round.
    pub answer: i32,
}

impl Evaluation<'_> {
    /// The share of `price` answer `answer` of `answers` carries: equal shares, the remainder on
    /// the first, so the shares add up to the price.
    pub fn price_share(price: i64, answers: usize, answer: usize) -> MicroUsdc {
        let n = answers.max(1) as i64;
        MicroUsdc(price / n + if answer == 0 { price % n } else { 0 })
    }
}

/// Records an evaluation, once per payment and answer: recording a paid evaluation again (a
/// replayed round) keeps the first.
pub async fn record_evaluation(db: &PgPool, e: &Evaluation<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO card_evaluations (card_id, run, score, consensus, price, paid_tx, answer)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (paid_tx, answer) DO NOTHING",
    )
    .bind(e.card_id)
    .bind(e.run)
    .bind(e.score)
    .bind(e.consensus)
    .bind(e.price.0)
    .bind(e.paid_tx)
    .bind(e.answer)
    .execute(db)
    .await?;
    Ok(())
}

/// A listed card with what the bandit knows of it: its evaluations (`pulls`), how many were
/// unreadable, its mean agreement with the panel and the sum of it (`value_sum`).
pub struct ListedCard {
    pub id: i64,
    pub slug: String,
    pub name: String,
    pub specialties: Vec<String>,
    pub price: i64,
    pub account_id: i64,
    /// The judge as stored; the caller parses it.
    pub judge: serde_json::Value,
    pub owner_team: Option<i64>,
    pub judge_key: Option<Vec<u8>>,
    pub pulls: i64,
    pub unreadable: i64,
    pub agreement: Option<f64>,
    pub value_sum: f64,
}

/// Every listed card with its record, by id.
pub async fn listed_cards(db: &PgPool) -> Result<Vec<ListedCard>, sqlx::Error> {
    listed_cards_named(db, None).await
}

/// The listed card `slug`, with its record.
pub async fn listed_card(db: &PgPool, slug: &str) -> Result<Option<ListedCard>, sqlx::Error> {
    Ok(listed_cards_named(db, Some(slug)).await?.pop())
}

/// Every listed card, or only the one named `slug`.
async fn listed_cards_named(
    db: &PgPool,
    slug: Option<&str>,
) -> Result<Vec<ListedCard>, sqlx::Error> {
    // A count and a coalesce are never NULL; inference cannot tell.
    sqlx::query_as!(
        ListedCard,
        r#"SELECT c.id, c.slug, c.name, c.specialties, c.price, c.account_id, c.judge,
                  c.owner_team, c.judge_key, count(e.id) AS "pulls!",
                  count(e.id) FILTER (WHERE e.score IS NULL) AS "unreadable!",
                  avg(CASE WHEN e.score IS NULL THEN 0 ELSE 1 - abs(e.score - e.consensus) END)
                      AS agreement,
                  coalesce(sum(1 - abs(e.score - e.consensus)), 0) AS "value_sum!"
           FROM agent_cards c LEFT JOIN card_evaluations e ON e.card_id = c.id
           WHERE c.listed AND ($1::text IS NULL OR c.slug = $1)
           GROUP BY c.id ORDER BY c.id"#,
        slug
    )
    .fetch_all(db)
    .await
}
