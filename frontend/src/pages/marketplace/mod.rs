//! `/marketplace`: the judge marketplace at work. The cards with their live statistics, each
//! run's judging budget (with its history), the Pay-to-Play feed as rounds are judged or skipped,
//! and the ledger statement of a chosen run's budget.
//!
//! History comes over HTTP; the `marketplace` topic then brings every round and skip as it
//! happens. An event goes straight into the feed and its run's budget; the cards' statistics and
//! the budgets' own figures are then refetched, at most twice a second, so they follow the rounds
//! without a request per event.

mod api;
mod budgets;
mod cards;
mod feed;
mod labels;
mod model;

use std::time::Duration;

use lachesis_shared::ledger::StatementLine;
use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::marketplace::{AgentCard, BudgetView, MarketEvent};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::live::{Notice, use_topic};

/// How long after a live event the statistics are refetched (events in between share it).
const REFRESH_DELAY: Duration = Duration::from_millis(500);

/// Something loaded over HTTP, with the last error loading it.
pub struct Loaded<T: Send + Sync + 'static> {
    pub data: RwSignal<Option<T>>,
    pub error: RwSignal<Option<String>>,
}

impl<T: Send + Sync + 'static> Clone for Loaded<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Loaded<T> {}

impl<T: Send + Sync + 'static> Loaded<T> {
    fn new() -> Self {
        Self {
            data: RwSignal::new(None),
            error: RwSignal::new(None),
        }
    }

    /// Stores an answer: the data (clearing the error), or the error (keeping the last data).
    fn answer(&self, answer: crate::api::ApiResult<T>) {
        match answer {
            Ok(data) => {
                self.error.set(None);
                self.data.set(Some(data));
            }
            Err(e) => self.error.set(Some(e.to_string())),
        }
    }

    /// The error as a paragraph, when there is one.
    fn error_view(&self) -> impl IntoView + use<T> {
        let error = self.error;
        move || {
            error
                .get()
                .map(|e| view! { <p class="error" role="alert">{e}</p> })
        }
    }
}

fn load_cards(cards: Loaded<Vec<AgentCard>>) {
    spawn_local(async move { cards.answer(api::cards().await) });
}

fn load_budgets(budgets: Loaded<Vec<BudgetView>>) {
    spawn_local(async move { budgets.answer(api::budgets().await) });
}

/// Loads `run`'s statement, unless another run has been picked by the time it arrives.
fn load_ledger(
    run: String,
    selected: RwSignal<Option<String>>,
    ledger: Loaded<Vec<StatementLine>>,
) {
    spawn_local(async move {
        let answer = api::ledger(&run).await;
        if selected.try_get_untracked().flatten().as_deref() == Some(run.as_str()) {
            ledger.answer(answer);
        }
    });
}

/// Loads the feed's history and merges it with what arrived live meanwhile.
fn load_feed(feed: RwSignal<Vec<MarketEvent>>, error: RwSignal<Option<String>>) {
    spawn_local(async move {
        match api::feed(model::FEED_CAP).await {
            Ok(history) => {
                error.set(None);
                feed.update(|f| model::merge_feed(f, history, model::FEED_CAP));
            }
            Err(e) => error.set(Some(e.to_string())),
        }
    });
}

#[component]
pub fn MarketplacePage() -> impl IntoView {
    let cards = Loaded::<Vec<AgentCard>>::new();
    let budgets = Loaded::<Vec<BudgetView>>::new();
    let ledger = Loaded::<Vec<StatementLine>>::new();
    let feed = RwSignal::new(Vec::<MarketEvent>::new());
    let feed_error = RwSignal::new(None::<String>);
    let selected = RwSignal::new(None::<String>);
    let subscribed = RwSignal::new(false);
    // The refetch waiting to run after live events, if any.
    let pending = StoredValue::new(None::<TimeoutHandle>);

    let reload_all = move || {
        load_cards(cards);
        load_budgets(budgets);
        load_feed(feed, feed_error);
        if let Some(run) = selected.get_untracked() {
            load_ledger(run, selected, ledger);
        }
    };
    reload_all();

    // The statistics follow the rounds: one refetch for all the events of half a second. Not
    // pushed back by each new event, so a steady stream of rounds still refreshes them.
    let refresh_soon = move || {
        if pending.with_value(Option::is_some) {
            return;
        }
        let handle = set_timeout_with_handle(
            move || {
                // The page may be gone by now (the timer is cleared on unmount, but not twice).
                let Some(run) = selected.try_get_untracked() else {
                    return;
                };
                pending.set_value(None);
                load_cards(cards);
                load_budgets(budgets);
                if let Some(run) = run {
                    load_ledger(run, selected, ledger);
                }
            },
            REFRESH_DELAY,
        );
        pending.set_value(handle.ok());
    };
    on_cleanup(move || {
        if let Some(handle) = pending.try_get_value().flatten() {
            handle.clear();
        }
    });

    use_topic(Topic::Marketplace, move |notice| match notice {
        Notice::Event(LiveEvent::Market(event)) => {
            budgets.data.update(|b| {
                if let Some(b) = b {
                    model::apply_to_budgets(b, &event);
                }
            });
            feed.update(|f| model::merge_feed(f, vec![event], model::FEED_CAP));
            refresh_soon();
        }
        Notice::Event(_) => {}
        Notice::Resync => {
            subscribed.set(true);
            reload_all();
        }
        Notice::Lost => subscribed.set(false),
    });

    // Choosing a run shows its budget's statement.
    Effect::new(move |_| {
        if let Some(run) = selected.get() {
            ledger.data.set(None);
            ledger.error.set(None);
            load_ledger(run, selected, ledger);
        }
    });

    view! {
        <div
            class="marketplace"
            data-testid="marketplace"
            data-subscribed=move || subscribed.get().to_string()
        >
            <div class="page-head">
                <h1>"Judge marketplace"</h1>
                <span class="muted">
                    {move || {
                        if subscribed.get() { "Live" } else { "Connecting to the live feed…" }
                    }}
                </span>
            </div>
            <cards::CardsTable cards />
            <div class="market-columns">
                <div>
                    <budgets::Budgets budgets selected />
                    <budgets::RunLedger selected ledger />
                </div>
                <feed::Feed feed error=feed_error />
            </div>
        </div>
    }
}
