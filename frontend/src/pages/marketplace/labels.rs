//! Short texts for amounts, transactions, panel choices, judges and statistics (pure, tested
//! natively).

use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::{JudgeBackend, PaidCard, PanelChoice};

/// An amount without the noise of six decimals: `0.25`, `12.00`, `0.001`, `-1.50`.
pub fn usdc(amount: MicroUsdc) -> String {
    let full = amount.to_string();
    let Some((whole, frac)) = full.split_once('.') else {
        return full;
    };
    let trimmed = frac.trim_end_matches('0');
    let frac = if trimmed.len() < 2 {
        &frac[..2]
    } else {
        trimmed
    };
    format!("{whole}.{frac}")
}

/// A ledger amount with its direction: `+5.00` in, `-0.25` out.
pub fn signed_usdc(amount: MicroUsdc) -> String {
    if amount.0 > 0 {
        format!("+{}", usdc(amount))
    } else {
        usdc(amount)
    }
}

/// A chain transaction hash short enough for a table cell: `0x1234…cdef`.
pub fn short_hash(hash: &str) -> String {
    if hash.chars().count() <= 14 {
        return hash.to_owned();
    }
    let head: String = hash.chars().take(6).collect();
    let tail: String = hash
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}…{tail}")
}

/// How a paid card's payment is shown: a link when the chain has an explorer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxLabel {
    /// Text and address of the explorer page.
    Link(String, String),
    /// A settled transfer on a chain without explorer, or a ledger transaction.
    Text(String),
    /// Evaluation mode: heard, not paid.
    Unpaid,
}

pub fn tx_label(card: &PaidCard) -> TxLabel {
    let hash = card.chain_tx.as_deref().map(short_hash);
    match (&card.explorer_url, hash, card.tx_id) {
        (Some(url), hash, _) => TxLabel::Link(hash.unwrap_or_else(|| "tx".into()), url.clone()),
        (None, Some(hash), _) => TxLabel::Text(hash),
        (None, None, Some(id)) => TxLabel::Text(format!("ledger #{id}")),
        (None, None, None) => TxLabel::Unpaid,
    }
}

/// The panel choice in a few words, and the class it is shown with.
pub fn choice_label(choice: &PanelChoice) -> (String, &'static str) {
    match choice {
        PanelChoice::Bandit => ("bandit".into(), "choice-bandit"),
        PanelChoice::Llm => ("llm".into(), "choice-llm"),
        PanelChoice::LlmFallback { reason } => {
            (format!("llm fallback: {reason}"), "choice-fallback")
        }
        PanelChoice::Everyone => ("everyone (unpaid evaluation)".into(), "choice-everyone"),
        PanelChoice::Human => ("people (human card)".into(), "choice-human"),
        PanelChoice::HumanFallback { reason } => (
            format!("bandit, as people gave no verdict: {reason}"),
            "choice-fallback",
        ),
    }
}

/// The judge behind a card: `rubric`, `rubric (Health lens)`, `embedded`, `openai (model)`.
pub fn judge_label(judge: &JudgeBackend) -> String {
    match judge {
        JudgeBackend::Rubric { lens: Some(lens) } => format!("rubric ({} lens)", lens.as_str()),
        JudgeBackend::Openai { model, .. } => format!("openai ({model})"),
        JudgeBackend::Human { queue } => format!("people (queue {queue})"),
        other => other.kind().to_owned(),
    }
}

/// A statistic to two decimals, or a dash when there is none yet.
pub fn stat(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| format!("{v:.2}"))
}

/// A signed statistic (the bias): `+0.05`, `-0.10`.
pub fn signed_stat(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| format!("{v:+.2}"))
}

#[cfg(test)]
mod tests {
    use lachesis_shared::cats::CareCategory;

    use super::*;

    #[test]
    fn amounts_drop_needless_decimals() {
        assert_eq!(usdc(MicroUsdc(250_000)), "0.25");
        assert_eq!(usdc(MicroUsdc(12_000_000)), "12.00");
        assert_eq!(usdc(MicroUsdc(1_000)), "0.001");
        assert_eq!(usdc(MicroUsdc(-1_500_000)), "-1.50");
        assert_eq!(usdc(MicroUsdc(1)), "0.000001");
        assert_eq!(signed_usdc(MicroUsdc(5_000_000)), "+5.00");
        assert_eq!(signed_usdc(MicroUsdc(-250_000)), "-0.25");
        assert_eq!(signed_usdc(MicroUsdc(0)), "0.00");
    }

    #[test]
    fn payments_link_to_the_explorer_or_name_their_transaction() {
        let card = |id: Option<i64>, chain: Option<&str>, url: Option<&str>| PaidCard {
            slug: "feline-vet".into(),
            price: MicroUsdc(1),
            tx_id: id,
            chain_tx: chain.map(Into::into),
            explorer_url: url.map(Into::into),
        };
        let hash = "0x0123456789abcdef0123456789abcdef";
        assert_eq!(
            tx_label(&card(Some(1), Some(hash), Some("https://x/tx"))),
            TxLabel::Link("0x0123…cdef".into(), "https://x/tx".into())
        );
        assert_eq!(
            tx_label(&card(Some(1), Some(hash), None)),
            TxLabel::Text("0x0123…cdef".into())
        );
        assert_eq!(
            tx_label(&card(Some(7), None, None)),
            TxLabel::Text("ledger #7".into())
        );
        assert_eq!(tx_label(&card(None, None, None)), TxLabel::Unpaid);
        assert_eq!(short_hash("0xabc"), "0xabc");
    }

    #[test]
    fn labels_for_choices_judges_and_stats() {
        let fallback = PanelChoice::LlmFallback {
            reason: "unparsable".into(),
        };
        assert_eq!(choice_label(&fallback).0, "llm fallback: unparsable");
        assert_eq!(
            judge_label(&JudgeBackend::Rubric {
                lens: Some(CareCategory::Health)
            }),
            "rubric (Health lens)"
        );
        assert_eq!(stat(None), "—");
        assert_eq!(stat(Some(0.456)), "0.46");
        assert_eq!(signed_stat(Some(0.05)), "+0.05");
    }
}
