//! What the arena's visitors can watch besides battles: chess games their players opened to
//! spectators, and training runs their teams made public.

use lachesis_shared::chess::GameSummary;
use lachesis_shared::runs::RunSummary;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use crate::api;
use crate::pages::chess::api as chess_api;

#[component]
pub fn Watch() -> impl IntoView {
    let games = RwSignal::new(Vec::<GameSummary>::new());
    let runs = RwSignal::new(Vec::<RunSummary>::new());
    // Either list failing to load leaves its section out; battles do not depend on them.
    spawn_local(async move {
        if let Ok(list) = chess_api::public_games().await {
            games.try_set(list);
        }
    });
    spawn_local(async move {
        if let Ok(list) = api::runs().await {
            runs.try_set(list.into_iter().filter(|r| r.public).collect());
        }
    });
    let game_item = |g: GameSummary| {
        let state = match &g.outcome {
            Some(outcome) => format!("over, {}", outcome.result),
            None => "live".to_owned(),
        };
        view! {
            <li data-testid="public-game">
                <A href=format!("/chess/{}", g.id)>{format!("Game #{}", g.id)}</A>
                {format!(
                    " — a person against DeepSacrifice v{}, {} plies, {state}",
                    g.policy_version, g.plies
                )}
            </li>
        }
    };
    let run_item = |r: RunSummary| {
        view! {
            <li data-testid="public-run">
                <A href=format!("/runs/{}", r.id)>{r.id.clone()}</A>
                {format!(" — step {}, {} groups", r.current_step, r.groups)}
            </li>
        }
    };
    view! {
        <section class="card arena-watch" data-testid="arena-watch">
            <h2>"Watch"</h2>
            {move || {
                let list = games.get();
                (!list.is_empty()).then(|| view! {
                    <h3>"Chess games open to spectators"</h3>
                    <ul>{list.into_iter().map(game_item).collect_view()}</ul>
                })
            }}
            {move || {
                let list = runs.get();
                (!list.is_empty()).then(|| view! {
                    <h3>"Public training runs"</h3>
                    <ul>{list.into_iter().map(run_item).collect_view()}</ul>
                })
            }}
            {move || (games.with(Vec::is_empty) && runs.with(Vec::is_empty)).then(|| view! {
                <p class="muted">"No public chess game or training run right now."</p>
            })}
        </section>
    }
}
