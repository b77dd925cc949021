//! Each run's judging budget with a small line of what it had available over time, and the
//! ledger statement of the run picked among them.

use lachesis_shared::ledger::StatementLine;
use lachesis_shared::marketplace::BudgetView;
use leptos::prelude::*;

use crate::table::DataTable;

use super::Loaded;
use super::feed::local_clock;
use super::labels::{short_hash, signed_usdc, usdc};
use super::model::sparkline;

const SPARK_WIDTH: f64 = 160.0;
const SPARK_HEIGHT: f64 = 36.0;

fn budget(b: BudgetView, selected: RwSignal<Option<String>>) -> impl IntoView {
    let run = b.run.clone();
    let is_selected = {
        let run = run.clone();
        move || selected.with(|s| s.as_deref() == Some(run.as_str()))
    };
    let pick = {
        let run = run.clone();
        move |_| selected.set(Some(run.clone()))
    };
    let path = sparkline(&b.points, SPARK_WIDTH, SPARK_HEIGHT);
    let title = format!(
        "{}: available after each of its {} ledger transactions",
        b.account,
        b.points.len()
    );
    let label = title.clone();
    view! {
        <li>
            <button
                type="button"
                class="budget"
                class:selected=is_selected
                data-run=run
                data-available=b.available.0
                title="Show this run's ledger"
                on:click=pick
            >
                <span class="budget-run">{b.run.clone()}</span>
                <span class="budget-figures">
                    <span>"Funded "<b class="budget-funded">{usdc(b.funded)}</b></span>
                    <span>"Spent "<b class="budget-spent">{usdc(b.spent)}</b></span>
                    <span>"Available "<b class="budget-available">{usdc(b.available)}</b></span>
                </span>
                <svg
                    class="sparkline"
                    viewBox=format!("0 0 {SPARK_WIDTH} {SPARK_HEIGHT}")
                    preserveAspectRatio="none"
                    role="img"
                    aria-label=label
                    data-points=b.points.len()
                >
                    <title>{title}</title>
                    <path d=path />
                </svg>
            </button>
        </li>
    }
}

#[component]
pub fn Budgets(
    budgets: Loaded<Vec<BudgetView>>,
    selected: RwSignal<Option<String>>,
) -> impl IntoView {
    let list = move || match budgets.data.get() {
        None => view! { <li class="muted">"Loading…"</li> }.into_any(),
        Some(list) if list.is_empty() => {
            view! { <li class="muted">"No run has a judging budget yet."</li> }.into_any()
        }
        Some(list) => list
            .into_iter()
            .map(|b| budget(b, selected))
            .collect_view()
            .into_any(),
    };
    view! {
        <section class="card" id="market-budgets">
            <h2>"Budgets (USDC)"</h2>
            {budgets.error_view()}
            <ul class="budgets">{list}</ul>
        </section>
    }
}

fn line(l: StatementLine) -> impl IntoView {
    let direction = if l.amount.0 >= 0 { "in" } else { "out" };
    let chain = l
        .chain_tx
        .as_deref()
        .map_or_else(|| "—".to_owned(), short_hash);
    view! {
        <tr class="ledger-line" data-tx=l.tx_id data-kind=l.kind.clone()>
            <td><time title=l.at.clone()>{local_clock(&l.at)}</time></td>
            <td>{l.kind.clone()}</td>
            <td>{l.memo.clone()}</td>
            <td class=format!("num amount {direction}")>{signed_usdc(l.amount)}</td>
            <td><code>{l.counterparty.clone()}</code></td>
            <td title=l.chain_tx.clone().unwrap_or_default()><code>{chain}</code></td>
        </tr>
    }
}

#[component]
pub fn RunLedger(
    selected: RwSignal<Option<String>>,
    ledger: Loaded<Vec<StatementLine>>,
) -> impl IntoView {
    let body = move || {
        let run = selected.get()?;
        let rows = move || match ledger.data.get() {
            None => view! { <tr><td colspan="6" class="muted">"Loading…"</td></tr> }.into_any(),
            Some(lines) if lines.is_empty() => {
                view! { <tr><td colspan="6" class="muted">"No transactions."</td></tr> }.into_any()
            }
            Some(lines) => lines.into_iter().map(line).collect_view().into_any(),
        };
        Some(view! {
            <section class="card" id="run-ledger" data-run=run.clone()>
                <div class="page-head">
                    <h2>{format!("Ledger of {run}")}</h2>
                    <button type="button" class="link" on:click=move |_| selected.set(None)>
                        "Close"
                    </button>
                </div>
                {ledger.error_view()}
                <DataTable rows>
                    <th>"Time"</th>
                    <th>"Kind"</th>
                    <th>"Memo"</th>
                    <th class="num">"Amount (USDC)"</th>
                    <th>"Counterparty"</th>
                    <th>"Chain tx"</th>
                </DataTable>
            </section>
        })
    };
    view! {
        {body}
        {move || {
            selected.with(Option::is_none).then(|| {
                view! { <p class="muted small">"Pick a budget to see its run's ledger."</p> }
            })
        }}
    }
}
