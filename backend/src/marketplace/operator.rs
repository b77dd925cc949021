//! The operator's own judge cards, from the config file (`[[judge_cards]]`). Only here may an
//! `openai` judge name a server environment variable as its key (`api_key_env`) and point at any
//! host: the file is written by whoever runs the server, never by a user through the API. The
//! file is the source of truth: at every start its cards are listed or brought up to date.
//!
//! ```toml
//! [[judge_cards]]
//! slug = "frontier-judge"
//! name = "Frontier Judge"
//! specialties = ["reasoning", "safety"]
//! price = 15000                      # micro-USDC per verdict
//! [judge_cards.judge]
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! system_prompt = "You judge a caretaker's reply to a cat ..."
//! api_key_env = "OPENAI_API_KEY"
//! ```

use anyhow::{Context, bail};
use lachesis_shared::marketplace::{CardListing, JudgeBackend};
use serde::Deserialize;
use sqlx::PgPool;

use super::cards::{platform_card_account, store, validate_listing};
use crate::ledger::Ledger;

/// One `[[judge_cards]]` entry: a listing, and whether it is offered.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorCard {
    pub listing: CardListing,
    pub listed: bool,
}

impl<'de> Deserialize<'de> for OperatorCard {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Offer {
            #[serde(default = "listed_by_default")]
            listed: bool,
        }
        let (listing, offer) = CardListing::split_from::<_, Offer>(deserializer)?;
        Ok(OperatorCard {
            listing,
            listed: offer.listed,
        })
    }
}

fn listed_by_default() -> bool {
    true
}

/// The platform's own cards, written in the operator's format.
pub fn builtin_cards() -> anyhow::Result<Vec<OperatorCard>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        judge_cards: Vec<OperatorCard>,
    }
    let file: File = toml::from_str(include_str!("builtin_cards.toml"))
        .context("the built-in judge cards (builtin_cards.toml)")?;
    Ok(file.judge_cards)
}

/// Checks the cards as the API checks a team's (but for the judge's reach), so that a bad file
/// stops the server at start with the card named, rather than at the first round.
pub fn check(cards: &[OperatorCard]) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for card in cards {
        let slug = &card.listing.slug;
        validate_listing(&card.listing)
            .with_context(|| format!("judge card {slug:?} in the config file"))?;
        if !seen.insert(slug.as_str()) {
            bail!("judge card {slug:?} appears twice in the config file");
        }
    }
    Ok(())
}

/// Lists each card, or brings an existing platform card of that slug up to date. A slug that a
/// team's card holds is refused: the operator's file does not take over a team's card.
pub async fn apply(db: &PgPool, cards: &[OperatorCard]) -> anyhow::Result<()> {
    let ledger = Ledger::new(db.clone());
    for card in cards {
        let slug = &card.listing.slug;
        let account = platform_card_account(&ledger, slug).await?;
        let judge = serde_json::to_value(&card.listing.judge)?;
        let written = store::upsert_operator_card(
            db,
            store::CardRow {
                listing: &card.listing,
                account: account.0,
                judge,
            },
            card.listed,
        )
        .await?;
        if !written {
            bail!(
                "judge card {slug:?} in the config file: a team's card has that slug; choose another"
            );
        }
        if let JudgeBackend::Openai {
            api_key_env: Some(variable),
            ..
        } = &card.listing.judge
            && std::env::var_os(variable).is_none()
        {
            tracing::warn!(
                card = %slug, %variable,
                "the judge card's key variable is not set: its endpoint is called without a key"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::ledger::MicroUsdc;

    #[derive(Deserialize)]
    struct File {
        judge_cards: Vec<OperatorCard>,
    }

    fn parse(text: &str) -> Result<Vec<OperatorCard>, toml::de::Error> {
        toml::from_str::<File>(text).map(|f| f.judge_cards)
    }

    const CARD: &str = r#"
        [[judge_cards]]
        slug = "frontier-judge"
        name = "Frontier Judge"
        specialties = ["reasoning"]
        price = 15000
        [judge_cards.judge]
        kind = "openai"
        base_url = "https://api.example.com/v1"
        model = "m"
        system_prompt = "judge"
        api_key_env = "FRONTIER_KEY"
    "#;

    #[test]
    fn a_card_names_its_key_variable_and_is_listed_unless_told() {
        let cards = parse(CARD).unwrap();
        assert_eq!(cards.len(), 1);
        assert!(cards[0].listed);
        assert_eq!(cards[0].listing.price, MicroUsdc(15_000));
        assert!(matches!(
            &cards[0].listing.judge,
            JudgeBackend::Openai { api_key_env: Some(v), .. } if v == "FRONTIER_KEY"
        ));
        check(&cards).unwrap();
    }

    #[test]
    fn unknown_keys_bad_prices_and_twins_are_refused() {
        let inline_key = CARD.replace("price = 15000", "price = 15000\napi_key = \"sk-inline\"");
        assert!(parse(&inline_key).is_err());
        let misspelt = CARD.replace("specialties", "specialities");
        assert!(parse(&misspelt).is_err());
        let unlisted = CARD.replace("price = 15000", "price = 15000\nlisted = false");
        assert!(!parse(&unlisted).unwrap()[0].listed);
        let dear = parse(&CARD.replace("15000", "500000000")).unwrap();
        assert!(check(&dear).is_err());
        let nameless = parse(&CARD.replace("Frontier Judge", " ")).unwrap();
        assert!(check(&nameless).is_err());
        let twice = parse(&format!("{CARD}{CARD}")).unwrap();
        let err = check(&twice).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");
    }
}
