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
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::JudgeBackend;
use serde::Deserialize;
use sqlx::PgPool;

use super::cards::{platform_card_account, store, validate, validate_listing};
use crate::ledger::Ledger;

/// One `[[judge_cards]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorCard {
    pub slug: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub specialties: Vec<String>,
    pub price: MicroUsdc,
    #[serde(default = "listed_by_default")]
    pub listed: bool,
    pub judge: JudgeBackend,
}

fn listed_by_default() -> bool {
    true
}

/// Checks the cards as the API checks a team's (but for the judge's reach), so that a bad file
/// stops the server at start with the card named, rather than at the first round.
pub fn check(cards: &[OperatorCard]) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for card in cards {
        validate(&card.slug, Some(card.price), None)
            .and_then(|()| {
                validate_listing(
                    &card.name,
                    &card.description,
                    &card.specialties,
                    &card.judge,
                )
            })
            .with_context(|| format!("judge card {:?} in the config file", card.slug))?;
        if !seen.insert(card.slug.as_str()) {
            bail!(
                "judge card {:?} appears twice in the config file",
                card.slug
            );
        }
    }
    Ok(())
}

/// Lists each card, or brings an existing platform card of that slug up to date. A slug that a
/// team's card holds is refused: the operator's file does not take over a team's card.
pub async fn apply(db: &PgPool, cards: &[OperatorCard]) -> anyhow::Result<()> {
    let ledger = Ledger::new(db.clone());
    for card in cards {
        let account = platform_card_account(&ledger, &card.slug).await?;
        let judge = serde_json::to_value(&card.judge)?;
        let written = store::upsert_operator_card(
            db,
            store::PlatformCardRow {
                slug: &card.slug,
                name: card.name.trim(),
                description: &card.description,
                specialties: &card.specialties,
                price: card.price.0,
                account: account.0,
                judge,
            },
            card.listed,
        )
        .await?;
        if !written {
            bail!(
                "judge card {:?} in the config file: a team's card has that slug; choose another",
                card.slug
            );
        }
        if let JudgeBackend::Openai {
            api_key_env: Some(variable),
            ..
        } = &card.judge
            && std::env::var_os(variable).is_none()
        {
            tracing::warn!(
                card = %card.slug, %variable,
                "the judge card's key variable is not set: its endpoint is called without a key"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(cards[0].price, MicroUsdc(15_000));
        assert!(matches!(
            &cards[0].judge,
            JudgeBackend::Openai { api_key_env: Some(v), .. } if v == "FRONTIER_KEY"
        ));
        check(&cards).unwrap();
    }

    #[test]
    fn unknown_keys_bad_prices_and_twins_are_refused() {
        let inline_key = CARD.replace("price = 15000", "price = 15000\napi_key = \"sk-inline\"");
        assert!(parse(&inline_key).is_err());
        let dear = parse(&CARD.replace("15000", "500000000")).unwrap();
        assert!(check(&dear).is_err());
        let nameless = parse(&CARD.replace("Frontier Judge", " ")).unwrap();
        assert!(check(&nameless).is_err());
        let twice = parse(&format!("{CARD}{CARD}")).unwrap();
        let err = check(&twice).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");
    }
}
