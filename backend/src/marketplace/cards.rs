//! Agent cards: the platform's own, listed at start; teams' cards, checked before they are
//! stored; statistics. The SQL is in [`store`].

pub mod store;

pub use self::store::record_evaluation;

use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_shared::marketplace::{AgentCard, CardListing, JudgeBackend, NewCard, UpdateCard};
use sqlx::{PgConnection, PgPool};

use super::outbound::check_team_url;
use crate::app::AppError;
use crate::ledger::Ledger;
use crate::ledger::queries::create_card_owner_account;

/// The ledger account a platform card (the built-in ones and the operator's) is paid into.
pub(super) async fn platform_card_account(
    ledger: &Ledger,
    slug: &str,
) -> Result<crate::ledger::AccountId, crate::ledger::LedgerError> {
    ledger
        .account(&format!("card/{slug}"), AccountKind::CardOwner, None, None)
        .await
}

/// Lists the platform's cards that are missing (idempotent; prices set later by an admin stay).
pub async fn seed(db: &PgPool) -> anyhow::Result<()> {
    let ledger = Ledger::new(db.clone());
    for card in super::operator::builtin_cards()? {
        let account = platform_card_account(&ledger, &card.listing.slug).await?;
        let judge = serde_json::to_value(&card.listing.judge)?;
        store::insert_builtin(
            db,
            store::CardRow {
                listing: &card.listing,
                account: account.0,
                judge,
            },
        )
        .await?;
    }
    Ok(())
}

/// Every card (unlisted ones only with `include_unlisted`), cheapest first.
pub async fn list(db: &PgPool, include_unlisted: bool) -> Result<Vec<AgentCard>, AppError> {
    Ok(store::list(db, include_unlisted).await?)
}

/// One card with its id and owning team.
pub async fn find(db: &PgPool, slug: &str) -> Result<(i64, Option<i64>, AgentCard), AppError> {
    let found = store::find(db, slug)
        .await?
        .ok_or(AppError::NotFound("card"))?;
    Ok((found.id, found.owner_team, found.card))
}

/// Checks what Postgres would refuse anyway, to answer with a readable reason.
pub(super) fn validate(
    slug: &str,
    price: Option<MicroUsdc>,
    wallet: Option<&str>,
) -> Result<(), AppError> {
    let slug_ok = (2..=48).contains(&slug.len())
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-');
    if !slug_ok {
        return Err(AppError::Invalid(
            "a card's slug is 2-48 characters of a-z, 0-9 and '-'".into(),
        ));
    }
    if let Some(price) = price
        && (price.0 <= 0 || price.0 > 100_000_000)
    {
        return Err(AppError::Invalid(
            "a price is more than 0 and at most 100 USDC (100000000 micro-USDC)".into(),
        ));
    }
    if let Some(wallet) = wallet {
        let hex = wallet.strip_prefix("0x").unwrap_or("");
        if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AppError::Invalid("a wallet is 0x and 40 hex digits".into()));
        }
    }
    Ok(())
}

/// Checks a card's listing, its slug and price included; the judge as stored.
pub(super) fn validate_listing(listing: &CardListing) -> Result<serde_json::Value, AppError> {
    validate(&listing.slug, Some(listing.price), None)?;
    let CardListing {
        name,
        description,
        specialties,
        judge,
        ..
    } = listing;
    if name.trim().is_empty() || name.len() > 80 || description.len() > 1000 {
        return Err(AppError::Invalid(
            "a name is 1-80 characters, a description at most 1000".into(),
        ));
    }
    if specialties.is_empty()
        || specialties.len() > 8
        || specialties.iter().any(|s| s.is_empty() || s.len() > 40)
    {
        return Err(AppError::Invalid(
            "a card has 1 to 8 specialties of 1-40 characters".into(),
        ));
    }
    let judge = serde_json::to_value(judge).map_err(|e| AppError::Internal(e.to_string()))?;
    if judge.to_string().len() > 16 * 1024 {
        return Err(AppError::Invalid(
            "a judge's configuration is at most 16 KiB".into(),
        ));
    }
    Ok(judge)
}

/// What a team's card may not do that the operator's may: name a server environment variable
/// as its key, or point its endpoint anywhere but a public https host.
pub async fn check_team_judge(judge: &JudgeBackend) -> Result<(), AppError> {
    if let JudgeBackend::Openai {
        base_url,
        api_key_env,
        ..
    } = judge
    {
        if api_key_env.is_some() {
            return Err(AppError::Forbidden(
                "a team card cannot name a server environment variable: send the endpoint's \
                 key as api_key",
            ));
        }
        check_team_url(base_url)
            .await
            .map_err(|e| AppError::Invalid(e.to_string()))?;
    }
    Ok(())
}

/// A human card's queue must be one of its own team's that ranks answers: a team cannot send its
/// groups to, or pay, another team's annotators.
pub async fn check_human_queue(
    db: &PgPool,
    team: i64,
    judge: &JudgeBackend,
) -> Result<(), AppError> {
    let JudgeBackend::Human { queue } = judge else {
        return Ok(());
    };
    let found = crate::feedback::store::queues(
        db,
        Some(*queue),
        crate::feedback::store::QueueScope::Team(team),
    )
    .await?
    .pop();
    match found {
        None => Err(AppError::Invalid(format!(
            "queue {queue} is not one of the team's"
        ))),
        Some(q) if q.view.kind != lachesis_shared::feedback::FeedbackKind::Rank => {
            Err(AppError::Invalid(format!(
                "queue {queue} does not rank answers: a human card needs one that does"
            )))
        }
        Some(_) => Ok(()),
    }
}

/// Lists a team's new card, paid into a new card_owner account. `sealed_key` is the team's
/// endpoint key as [`super::sealed`] sealed it. A team has at most `listing_limit` listed cards.
pub async fn create(
    db: &PgPool,
    team: i64,
    card: &NewCard,
    sealed_key: Option<Vec<u8>>,
    listing_limit: i64,
) -> Result<AgentCard, AppError> {
    let listing = &card.listing;
    let judge = validate_listing(listing)?;
    validate(&listing.slug, None, card.owner.owner_wallet.as_deref())?;
    let wallet = card
        .owner
        .owner_wallet
        .as_deref()
        .map(str::to_ascii_lowercase);
    // The card and its account are created together or not at all, so this inserts the account
    // in the transaction itself (`Ledger::account` would reuse an existing one of that name).
    let mut tx = db.begin().await?;
    lock_team_listing(&mut tx, team, listing_limit).await?;
    let account = create_card_owner_account(
        &mut tx,
        &format!("card/{}", listing.slug),
        team,
        wallet.as_deref(),
    )
    .await?
    .ok_or_else(|| AppError::Conflict(format!("a card {:?} exists", listing.slug)))?;
    let inserted = store::insert_team_card(
        &mut tx,
        store::TeamCardRow {
            card: store::CardRow {
                listing,
                account: account.0,
                judge,
            },
            team,
            wallet: wallet.as_deref(),
            sealed_key,
        },
    )
    .await?;
    if !inserted {
        return Err(AppError::Conflict(format!(
            "a card {:?} exists",
            listing.slug
        )));
    }
    tx.commit().await?;
    Ok(find(db, &listing.slug).await?.2)
}

/// Holds the team's row until the transaction ends (two listings at once are counted one after
/// the other) and refuses one more listed card past `limit`.
async fn lock_team_listing(conn: &mut PgConnection, team: i64, limit: i64) -> Result<(), AppError> {
    if store::lock_team_listing(conn, team).await? >= limit {
        return Err(AppError::Conflict(format!(
            "a team lists at most {limit} cards at once: unlist one first"
        )));
    }
    Ok(())
}

/// Reprices or (un)lists a card; relisting a team's card counts against its listing limit.
pub async fn update(
    db: &PgPool,
    slug: &str,
    change: &UpdateCard,
    listing_limit: i64,
) -> Result<AgentCard, AppError> {
    validate(slug, change.price, None)?;
    let mut tx = db.begin().await?;
    if let Some((Some(team), false)) = store::listing(&mut tx, slug).await?
        && change.listed == Some(true)
    {
        lock_team_listing(&mut tx, team, listing_limit).await?;
    }
    store::update(&mut tx, slug, change.price, change.listed).await?;
    tx.commit().await?;
    Ok(find(db, slug).await?.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_cards_span_specialties_and_prices() {
        let cards = super::super::operator::builtin_cards().unwrap();
        assert!(cards.len() >= 6);
        let mut prices: Vec<i64> = cards.iter().map(|c| c.listing.price.0).collect();
        prices.sort_unstable();
        prices.dedup();
        assert_eq!(prices.len(), cards.len(), "every card has its own price");
        let mut specialties: Vec<&str> = cards
            .iter()
            .flat_map(|c| c.listing.specialties.iter().map(String::as_str))
            .collect();
        specialties.sort_unstable();
        specialties.dedup();
        assert!(specialties.len() >= 6, "{specialties:?}");
        for card in &cards {
            validate_listing(&card.listing).unwrap();
        }
        let generalist = cards.iter().find(|c| c.listing.slug == "llm-generalist");
        assert_eq!(
            generalist.map(|c| &c.listing.judge),
            Some(&JudgeBackend::Embedded {
                system_prompt: "You judge a caretaker's reply to a cat. Read the behaviors the \
                                cat showed, decide what the cat needs, and judge whether the \
                                reply meets that need with concrete actions. Think briefly, then \
                                end with \\boxed{score}, a number from 0 to 1."
                    .into()
            })
        );
    }
}
