//! The Pay-to-Play feed, newest first: each judged round with its panel, payments and rewards,
//! and each skipped episode with why.

use lachesis_shared::marketplace::{MarketEvent, PaidCard, RoundEvent, SkippedEvent};
use leptos::prelude::*;

use super::labels::{TxLabel, choice_label, tx_label, usdc};
use super::model::entry_key;
use crate::format;

/// How many scores and rewards a round lists before shortening.
const SCORES_SHOWN: usize = 8;

/// The local wall-clock time of a server time (the full time is in the title).
pub fn local_clock(at: &str) -> String {
    let ms = js_sys::Date::parse(at);
    if ms.is_finite() {
        format::local_time(ms as i64)
    } else {
        at.to_owned()
    }
}

fn paid_card(card: PaidCard) -> impl IntoView {
    let tx = match tx_label(&card) {
        TxLabel::Link(text, url) => view! {
            <a class="tx" href=url target="_blank" rel="noopener noreferrer">{text}</a>
        }
        .into_any(),
        TxLabel::Text(text) => view! { <code class="tx">{text}</code> }.into_any(),
        TxLabel::Unpaid => view! { <span class="tx muted">"unpaid"</span> }.into_any(),
    };
    view! {
        <li class="paid-card" data-slug=card.slug.clone()>
            <span>{card.slug.clone()}</span>
            " "
            <span class="num">{usdc(card.price)}</span>
            " "
            {tx}
        </li>
    }
}

fn round(round: RoundEvent) -> impl IntoView {
    let (choice, choice_class) = choice_label(&round.choice);
    let cards = round.cards.into_iter().map(paid_card).collect_view();
    view! {
        <li class="feed-round" data-run=round.run.clone() data-episode=round.episode.clone()>
            <div class="feed-head">
                <time title=round.at.clone()>{local_clock(&round.at)}</time>
                <span class="feed-run">{round.run.clone()}</span>
                <span class="badge">{round.category.as_str()}</span>
                <span class=format!("badge {choice_class}")>{choice}</span>
                {round.weight_version.map(|v| view! {
                    <span class="badge" data-testid="feed-weights" title="The weights that answered">
                        {format!("weights v{v}")}
                    </span>
                })}
            </div>
            <div class="feed-task" title=round.answers.join("\n\n")>{round.task.clone()}</div>
            <ul class="paid-cards">{cards}</ul>
            <dl class="feed-figures">
                <div>
                    <dt>"Paid"</dt>
                    <dd class="feed-paid">{usdc(round.paid)}</dd>
                </div>
                <div>
                    <dt>"Budget left"</dt>
                    <dd class="feed-left">{usdc(round.budget_left)}</dd>
                </div>
                <div>
                    <dt>"Panel scores"</dt>
                    <dd class="feed-scores">{format::numbers(&round.panel_scores, SCORES_SHOWN)}</dd>
                </div>
                <div>
                    <dt>"Rewards"</dt>
                    <dd class="feed-rewards">{format::numbers(&round.rewards, SCORES_SHOWN)}</dd>
                </div>
            </dl>
        </li>
    }
}

fn skipped(skipped: SkippedEvent) -> impl IntoView {
    view! {
        <li class="feed-skipped" data-run=skipped.run.clone() data-episode=skipped.episode.clone()>
            <div class="feed-head">
                <time title=skipped.at.clone()>{local_clock(&skipped.at)}</time>
                <span class="feed-run">{skipped.run.clone()}</span>
                <span class="badge">"skipped"</span>
            </div>
            <p class="skip-reason">{skipped.reason.clone()}</p>
            <div class="muted">{format!("Budget left: {} USDC", usdc(skipped.budget_left))}</div>
        </li>
    }
}

fn entry(event: MarketEvent) -> AnyView {
    match event {
        MarketEvent::Round(r) => round(*r).into_any(),
        MarketEvent::Skipped(s) => skipped(s).into_any(),
    }
}

#[component]
pub fn Feed(feed: RwSignal<Vec<MarketEvent>>, error: RwSignal<Option<String>>) -> impl IntoView {
    let empty = move || {
        feed.with(Vec::is_empty)
            .then(|| view! { <li class="muted">"No rounds yet."</li> })
    };
    view! {
        <section class="card market-feed-card">
            <h2>"Live feed"</h2>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <ol id="market-feed" class="market-feed" aria-live="polite">
                {empty}
                // Keyed: a new round adds one entry instead of redrawing the hundred.
                <For each=move || feed.get() key=entry_key let:event>
                    {entry(event)}
                </For>
            </ol>
        </section>
    }
}
