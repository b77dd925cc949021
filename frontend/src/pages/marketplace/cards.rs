//! The cards on offer with their statistics over every evaluation so far.

use lachesis_shared::marketplace::AgentCard;
use leptos::prelude::*;

use crate::table::DataTable;

use super::Loaded;
use super::labels::{judge_label, signed_stat, stat, usdc};

fn row(card: AgentCard) -> impl IntoView {
    let stats = &card.stats;
    let cost = stats.cost_per_useful.map_or_else(|| "—".to_owned(), usdc);
    let owner = card
        .owner_team
        .clone()
        .unwrap_or_else(|| "platform".to_owned());
    let specialties = card
        .specialties
        .iter()
        .map(|s| view! { <span class="badge">{s.clone()}</span> })
        .collect_view();
    let unlisted = (!card.listed).then(|| view! { <span class="badge">"unlisted"</span> });
    view! {
        <tr class="card-row" data-slug=card.slug.clone() data-evaluations=stats.evaluations>
            <td>
                <span class="card-name" title=card.description.clone()>{card.name.clone()}</span>
                {unlisted}
                <div class="muted small">{format!("{} · {owner}", card.slug)}</div>
            </td>
            <td class="num card-price">{usdc(card.price)}</td>
            <td class="specialties">{specialties}</td>
            <td>{judge_label(&card.judge)}</td>
            <td class="num card-evaluations">{stats.evaluations}</td>
            <td class="num card-mean">{stat(stats.mean_score)}</td>
            <td class="num card-agreement">{stat(stats.agreement)}</td>
            <td class="num card-bias">{signed_stat(stats.bias)}</td>
            <td class="num card-cost">{cost}</td>
            <td class="num card-earned">{usdc(stats.earned)}</td>
        </tr>
    }
}

#[component]
pub fn CardsTable(cards: Loaded<Vec<AgentCard>>) -> impl IntoView {
    let rows = move || match cards.data.get() {
        None => view! { <tr><td colspan="10" class="muted">"Loading…"</td></tr> }.into_any(),
        Some(list) if list.is_empty() => {
            view! { <tr><td colspan="10" class="muted">"No cards listed."</td></tr> }.into_any()
        }
        Some(list) => list.into_iter().map(row).collect_view().into_any(),
    };
    view! {
        <section class="card" id="market-cards">
            <h2>"Agent cards"</h2>
            {cards.error_view()}
            <DataTable rows>
                <th>"Card"</th>
                <th class="num">"Price (USDC)"</th>
                <th>"Specialties"</th>
                <th>"Judge"</th>
                <th class="num">"Evaluations"</th>
                <th class="num">"Mean score"</th>
                <th class="num" title="1 - mean distance to the panel's consensus">"Agreement"</th>
                <th class="num" title="Mean gap to the consensus (positive: lenient)">"Bias"</th>
                <th class="num" title="USDC paid per unit of agreement">"Cost / useful signal"</th>
                <th class="num">"Earned (USDC)"</th>
            </DataTable>
        </section>
    }
}
