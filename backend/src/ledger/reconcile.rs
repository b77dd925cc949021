//! `lachesis ledger reconcile`: every invariant re-derived from the raw rows, independently of the
//! triggers that maintain them, so a broken trigger or a hand-edited row shows up here.

use lachesis_shared::ledger::ReconcileFinding;
use sqlx::PgPool;

/// Each check: its name, what it means, and a query returning one `detail` text per violation.
const CHECKS: &[(&str, &str, &str)] = &[
    (
        "balanced_transactions",
        "every transaction's entries sum to zero",
        "SELECT format('transaction %s sums to %s', tx_id, sum(amount)) AS detail
         FROM ledger_entries GROUP BY tx_id HAVING sum(amount) <> 0",
    ),
    (
        "transactions_have_entries",
        "every transaction moved money",
        "SELECT format('transaction %s (%s) has no entries', t.id, t.idempotency_key) AS detail
         FROM ledger_transactions t
         WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.tx_id = t.id)",
    ),
    (
        "ledger_sums_to_zero",
        "all entries together sum to zero",
        "SELECT format('all entries sum to %s', sum(amount)) AS detail
         FROM ledger_entries HAVING sum(amount) <> 0",
    ),
    (
        "balances_match_entries",
        "each account's balance is the sum of its entries",
        "SELECT format('%s: balance %s, entries sum to %s', a.name, a.balance,
                       coalesce(sum(e.amount), 0)) AS detail
         FROM ledger_accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
         GROUP BY a.id HAVING a.balance <> coalesce(sum(e.amount), 0)",
    ),
    (
        "held_matches_open_holds",
        "each account's held amount is the sum of its open holds",
        "SELECT format('%s: held %s, open holds sum to %s', a.name, a.held,
                       coalesce(sum(h.amount), 0)) AS detail
         FROM ledger_accounts a LEFT JOIN ledger_holds h ON h.payer = a.id AND h.state = 'held'
         GROUP BY a.id HAVING a.held <> coalesce(sum(h.amount), 0)",
    ),
    (
        "no_negative_available",
        "no account but the external one has less available than zero",
        "SELECT format('%s: balance %s, held %s', name, balance, held) AS detail
         FROM ledger_accounts WHERE kind <> 'external' AND (balance - held < 0 OR held < 0)",
    ),
    (
        "captures_match_holds",
        "each captured hold's payment moved exactly its amount from payer to payee",
        "SELECT format('hold %s: payment %s does not move %s from #%s to #%s', h.id, h.capture_tx,
                       h.amount, h.payer, h.payee) AS detail
         FROM ledger_holds h
         WHERE h.state = 'captured' AND NOT (
             EXISTS (SELECT 1 FROM ledger_entries e WHERE e.tx_id = h.capture_tx
                     AND e.account_id = h.payer AND e.amount = -h.amount)
             AND EXISTS (SELECT 1 FROM ledger_entries e WHERE e.tx_id = h.capture_tx
                         AND e.account_id = h.payee AND e.amount = h.amount)
             AND (SELECT count(*) FROM ledger_entries e WHERE e.tx_id = h.capture_tx) = 2)",
    ),
    (
        "refunds_reverse_payments",
        "each refund returns exactly what its payment moved",
        "SELECT format('refund %s does not reverse payment %s', r.id, r.refund_of) AS detail
         FROM ledger_transactions r
         WHERE r.kind = 'refund' AND EXISTS (
             SELECT account_id, amount FROM ledger_entries WHERE tx_id = r.refund_of
             EXCEPT SELECT account_id, -amount FROM ledger_entries WHERE tx_id = r.id)",
    ),
];

/// The outcome: which checks ran, how many rows they covered, and every violation found.
#[derive(Debug, Clone)]
pub struct ReconcileReport {
    pub checks: Vec<&'static str>,
    pub accounts: i64,
    pub transactions: i64,
    pub open_holds: i64,
    pub findings: Vec<ReconcileFinding>,
}

impl ReconcileReport {
    pub fn is_balanced(&self) -> bool {
        self.findings.is_empty()
    }
}

impl std::fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} accounts, {} transactions, {} open holds; {} checks",
            self.accounts,
            self.transactions,
            self.open_holds,
            self.checks.len()
        )?;
        for finding in &self.findings {
            writeln!(f, "VIOLATION {}: {}", finding.check, finding.detail)?;
        }
        if self.is_balanced() {
            write!(f, "ledger balanced: every invariant holds")
        } else {
            write!(f, "ledger NOT balanced: {} violations", self.findings.len())
        }
    }
}

/// Runs every check in one repeatable-read snapshot, so concurrent payments cannot make a
/// consistent ledger look inconsistent halfway through.
pub async fn reconcile(db: &PgPool) -> Result<ReconcileReport, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let mut findings = Vec::new();
    for (check, _, query) in CHECKS {
        // Each check selects one column, its finding's `detail`.
        let details: Vec<String> = sqlx::query_scalar(query).fetch_all(&mut *tx).await?;
        findings.extend(details.into_iter().map(|detail| ReconcileFinding {
            check: (*check).to_string(),
            detail,
        }));
    }
    let counts = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM ledger_accounts) AS "accounts!",
                  (SELECT count(*) FROM ledger_transactions) AS "transactions!",
                  (SELECT count(*) FROM ledger_holds WHERE state = 'held') AS "open_holds!""#
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(ReconcileReport {
        checks: CHECKS.iter().map(|(name, _, _)| *name).collect(),
        accounts: counts.accounts,
        transactions: counts.transactions,
        open_holds: counts.open_holds,
        findings,
    })
}

/// The checks with their meaning, for `--help`-style listings.
pub fn describe() -> impl Iterator<Item = (&'static str, &'static str)> {
    CHECKS.iter().map(|(name, meaning, _)| (*name, *meaning))
}
