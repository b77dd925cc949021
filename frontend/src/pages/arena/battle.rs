//! `/arena/battles/:id`: one battle, its answers, and (once voted or void) who was who and the
//! verdict. Anyone may read a battle, and watch its answers being written; who answered stays
//! hidden until it is voted or void.

use lachesis_shared::arena::{BattleState, BattleView};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::{
    battle_body, battle_outcome, follow_answers, poll_battle, state_name, stop_polling,
    streamed_for,
};
use crate::api;

#[component]
pub fn BattlePage() -> impl IntoView {
    let params = use_params_map();
    // Re-created for another battle, so polling follows the URL.
    move || {
        let id = params.with(|p| p.get("id").and_then(|id| id.parse::<i64>().ok()));
        match id {
            Some(id) => view! { <Battle id /> }.into_any(),
            None => view! { <p class="card error">"No such battle."</p> }.into_any(),
        }
    }
}

#[component]
fn Battle(id: i64) -> impl IntoView {
    let battle = RwSignal::new(None::<BattleView>);
    let error = RwSignal::new(None::<String>);
    let timer = StoredValue::new(None::<TimeoutHandle>);
    let streamed = RwSignal::new(None);
    on_cleanup(move || stop_polling(timer));

    spawn_local(async move {
        match api::arena_battle(id).await {
            Ok(view) => {
                let answering = view.state == BattleState::Answering;
                if battle.try_set(Some(view)).is_none() && answering {
                    poll_battle(id, battle, error, timer);
                }
            }
            Err(e) => {
                error.try_set(Some(e.to_string()));
            }
        }
    });

    let state = move || battle.with(|b| b.as_ref().map_or("loading", |b| state_name(b.state)));
    view! {
        <div class="arena-page" data-testid="battle" data-state=state>
            <div class="page-head">
                <h1>{format!("Battle #{id}")}</h1>
                <div class="inline">
                    <A href="/arena/leaderboard">"Leaderboard"</A>
                    <A href="/arena">"Vote in the arena"</A>
                </div>
            </div>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || match battle.get() {
                None => view! { <p class="muted">"Loading…"</p> }.into_any(),
                Some(b) => {
                    let open = b.state == BattleState::Ready;
                    let so_far = streamed_for(&b, streamed);
                    view! {
                        {battle_body(&b, so_far)}
                        {battle_outcome(&b)}
                        {open.then(|| view! {
                            <p class="muted">"Not voted yet: who answered stays hidden until then."</p>
                        })}
                    }
                    .into_any()
                }
            }}
            {follow_answers(battle, streamed)}
        </div>
    }
}
