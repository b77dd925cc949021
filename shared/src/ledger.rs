//! Money on the wire: USDC in integer micro-units, ledger accounts and their balances.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An amount of USDC in micro-units (USDC has 6 decimals: 1 USDC = 1,000,000). Never a float.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct MicroUsdc(pub i64);

impl MicroUsdc {
    /// Micro-units in one USDC.
    pub const PER_USDC: i64 = 1_000_000;

    /// `whole` USDC in micro-units; `None` when it overflows `i64`.
    pub fn from_usdc(whole: i64) -> Option<Self> {
        whole.checked_mul(Self::PER_USDC).map(Self)
    }

    /// Parses a decimal USDC amount such as `12`, `0.25` or `1.000001` exactly (at most 6 decimals).
    /// `None` for anything else: exponents, more decimals, overflow.
    pub fn parse_usdc(text: &str) -> Option<Self> {
        let text = text.trim();
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && frac.is_empty()
            || frac.len() > 6
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let frac: i64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<6}").parse().ok()?
        };
        let micros = whole.checked_mul(Self::PER_USDC)?.checked_add(frac)?;
        Some(Self(if negative { -micros } else { micros }))
    }
}

impl fmt::Display for MicroUsdc {
    /// `1.250000 USDC`-style, exact: `12.5` USDC prints as `12.500000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let per = Self::PER_USDC as u64;
        write!(f, "{sign}{}.{:06}", abs / per, abs % per)
    }
}

/// What an account is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountKind {
    /// An agent's budget for one run: it pays for judges.
    Budget,
    /// The owner of an agent card: paid per evaluation.
    CardOwner,
    /// The platform's own accounts (fees).
    Platform,
    /// Where money enters and leaves the ledger (deposits, withdrawals); the only account that
    /// may go below zero.
    External,
    /// A person paid for their judgements (a human judge card's verdicts); one per user.
    Annotator,
}

impl AccountKind {
    /// The snake_case name, as stored in `ledger_accounts.kind` and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            AccountKind::Budget => "budget",
            AccountKind::CardOwner => "card_owner",
            AccountKind::Platform => "platform",
            AccountKind::External => "external",
            AccountKind::Annotator => "annotator",
        }
    }

    /// The inverse of [`AccountKind::as_str`]; `None` for an unknown name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "budget" => AccountKind::Budget,
            "card_owner" => AccountKind::CardOwner,
            "platform" => AccountKind::Platform,
            "external" => AccountKind::External,
            "annotator" => AccountKind::Annotator,
            _ => return None,
        })
    }
}

/// An account's money: `available = balance - held`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountBalance {
    /// The account's unique name, e.g. `budget/{run}/agent` or `card/{slug}`.
    pub name: String,
    /// What the account is for.
    pub kind: AccountKind,
    /// Everything in the account, holds included.
    pub balance: MicroUsdc,
    /// Reserved by open holds (a payment started, not yet captured or released).
    pub held: MicroUsdc,
    /// What can still be spent: `balance - held`.
    pub available: MicroUsdc,
}

/// One leg of a transaction, as an account's statement shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementLine {
    /// The ledger transaction this leg belongs to.
    pub tx_id: i64,
    /// `fund`, `payment` or `refund`.
    pub kind: String,
    /// Free text the transfer was recorded with, e.g. `deposit` or `refund`.
    pub memo: String,
    /// Positive: money in.
    pub amount: MicroUsdc,
    /// The other account of the transaction.
    pub counterparty: String,
    /// The transfer's hash when it settled on chain.
    pub chain_tx: Option<String>,
    /// RFC 3339, UTC.
    pub at: String,
}

/// One finding of `lachesis ledger reconcile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileFinding {
    /// Which invariant: `balanced_transactions`, `balances_match_entries`, ...
    pub check: String,
    /// What is wrong, in words, naming the rows involved.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usdc_amounts_parse_and_print_exactly() {
        assert_eq!(MicroUsdc::parse_usdc("12"), Some(MicroUsdc(12_000_000)));
        assert_eq!(MicroUsdc::parse_usdc("0.25"), Some(MicroUsdc(250_000)));
        assert_eq!(MicroUsdc::parse_usdc(".000001"), Some(MicroUsdc(1)));
        assert_eq!(MicroUsdc::parse_usdc("-1.5"), Some(MicroUsdc(-1_500_000)));
        assert_eq!(MicroUsdc::parse_usdc("1.0000001"), None);
        assert_eq!(MicroUsdc::parse_usdc("1e3"), None);
        assert_eq!(MicroUsdc::parse_usdc("."), None);
        assert_eq!(MicroUsdc::parse_usdc("99999999999999999"), None);
        assert_eq!(MicroUsdc(12_500_000).to_string(), "12.500000");
        assert_eq!(MicroUsdc(-1).to_string(), "-0.000001");
        for text in ["0.000001", "3.141592", "-7.000000", "123456.789012"] {
            let parsed = MicroUsdc::parse_usdc(text).unwrap();
            assert_eq!(MicroUsdc::parse_usdc(&parsed.to_string()), Some(parsed));
        }
    }
}
