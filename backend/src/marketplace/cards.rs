//! Agent cards: the platform's own, listed at start; teams' cards, checked before they are
//! stored; statistics. The SQL is in [`store`].

pub mod store;

pub use self::store::record_evaluation;

use lachesis_shared::cats::CareCategory;
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_shared::marketplace::{AgentCard, JudgeBackend, NewCard, UpdateCard};
use sqlx::{PgConnection, PgPool};

use super::outbound::check_team_url;
use crate::app::AppError;
use crate::ledger::Ledger;
use crate::ledger::queries::create_card_owner_account;

/// One of the platform's cards.
struct BuiltinCard {
    slug: &'static str,
    name: &'static str,
    description: &'static str,
    specialties: &'static [&'static str],
    price: i64,
    judge: fn() -> JudgeBackend,
}

const JUDGE_PROMPT: &str = "You judge a caretaker's reply to a cat. Read the behaviors the cat \
    showed, decide what the cat needs, and judge whether the reply meets that need with concrete \
    actions. Think briefly, then end with \\boxed{score}, a number from 0 to 1.";

/// Six specialties, prices from 0.001 to 0.02 USDC. The rubric cards need no LLM; the two model
/// cards judge with the embedded model.
const BUILTIN: &[BuiltinCard] = &[
    BuiltinCard {
        slug: "panel-chair",
        name: "Panel Chair",
        description: "Reads every need closely against the full care rubric. The most reliable \
                      card, and the dearest rubric.",
        specialties: &["nutrition", "health", "comfort", "safety", "enrichment"],
        price: 12_000,
        judge: || JudgeBackend::Rubric { lens: None },
    },
    BuiltinCard {
        slug: "feline-vet",
        name: "Feline Vet",
        description: "Health first: grooming, dental care, check-ups, illness. Rough on anything \
                      else.",
        specialties: &["health"],
        price: 6_000,
        judge: || JudgeBackend::Rubric {
            lens: Some(CareCategory::Health),
        },
    },
    BuiltinCard {
        slug: "nutritionist",
        name: "Cat Nutritionist",
        description: "Food, water, treats and special diets.",
        specialties: &["nutrition"],
        price: 4_000,
        judge: || JudgeBackend::Rubric {
            lens: Some(CareCategory::Nutrition),
        },
    },
    BuiltinCard {
        slug: "safety-inspector",
        name: "Safety Inspector",
        description: "Hazards, toxic plants, escapes, a secure territory.",
        specialties: &["safety"],
        price: 3_000,
        judge: || JudgeBackend::Rubric {
            lens: Some(CareCategory::Safety),
        },
    },
    BuiltinCard {
        slug: "play-therapist",
        name: "Play Therapist",
        description: "Play, stimulation, scratching, company; comfort as a second subject.",
        specialties: &["enrichment", "comfort"],
        price: 2_000,
        judge: || JudgeBackend::Rubric {
            lens: Some(CareCategory::Enrichment),
        },
    },
    BuiltinCard {
        slug: "llm-generalist",
        name: "LLM Generalist",
        description: "The embedded language model, asked for a score with a short reason.",
        specialties: &["clarity", "reasoning"],
        price: 1_000,
        judge: || JudgeBackend::Embedded {
            system_prompt: JUDGE_PROMPT.to_string(),
        },
    },
    BuiltinCard {
        slug: "llm-rigorous",
        name: "LLM Rigorous Reviewer",
        description: "The embedded model with strict standards: concrete, safe, complete actions \
                      only.",
        specialties: &["reasoning", "safety"],
        price: 20_000,
        judge: || JudgeBackend::Embedded {
            system_prompt: format!(
                "{JUDGE_PROMPT} Be strict: vague or unsafe advice scores below 0.3."
            ),
        },
    },
];

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
    for card in BUILTIN {
        let account = platform_card_account(&ledger, card.slug).await?;
        let judge = serde_json::to_value((card.judge)())?;
        store::insert_builtin(
            db,
            store::PlatformCardRow {
                slug: card.slug,
                name: card.name,
                description: card.description,
                specialties: card.specialties,
                price: card.price,
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

/// Checks a card's name, description, specialties and judge; the judge as stored.
pub(super) fn validate_listing(
    name: &str,
    description: &str,
    specialties: &[String],
    judge: &JudgeBackend,
) -> Result<serde_json::Value, AppError> {
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
    validate(&card.slug, Some(card.price), card.owner_wallet.as_deref())?;
    let judge = validate_listing(
        &card.name,
        &card.description,
        &card.specialties,
        &card.judge,
    )?;
    let wallet = card.owner_wallet.as_deref().map(str::to_ascii_lowercase);
    // The card and its account are created together or not at all, so this inserts the account
    // in the transaction itself (`Ledger::account` would reuse an existing one of that name).
    let mut tx = db.begin().await?;
    lock_team_listing(&mut tx, team, listing_limit).await?;
    let account = create_card_owner_account(
        &mut tx,
        &format!("card/{}", card.slug),
        team,
        wallet.as_deref(),
    )
    .await?
    .ok_or_else(|| AppError::Conflict(format!("a card {:?} exists", card.slug)))?;
    let inserted = store::insert_team_card(
        &mut tx,
        store::TeamCardRow {
            slug: &card.slug,
            name: card.name.trim(),
            description: &card.description,
            specialties: &card.specialties,
            price: card.price.0,
            team,
            wallet: wallet.as_deref(),
            account: account.0,
            judge,
            sealed_key,
        },
    )
    .await?;
    if !inserted {
        return Err(AppError::Conflict(format!("a card {:?} exists", card.slug)));
    }
    tx.commit().await?;
    Ok(find(db, &card.slug).await?.2)
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
        assert!(BUILTIN.len() >= 6);
        let mut prices: Vec<i64> = BUILTIN.iter().map(|c| c.price).collect();
        prices.sort_unstable();
        prices.dedup();
        assert_eq!(prices.len(), BUILTIN.len(), "every card has its own price");
        let mut specialties: Vec<&str> = BUILTIN
            .iter()
            .flat_map(|c| c.specialties.iter().copied())
            .collect();
        specialties.sort_unstable();
        specialties.dedup();
        assert!(specialties.len() >= 6, "{specialties:?}");
        for card in BUILTIN {
            validate(card.slug, Some(MicroUsdc(card.price)), None).unwrap();
        }
    }
}
