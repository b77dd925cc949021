//! `/arena`: deal a battle, read both answers, vote; then see who was who.

use lachesis_shared::arena::{BattleState, BattleView, NewVote, VoteChoice};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::{
    arena_blurb, arena_tabs, battle_body, battle_outcome, current_arena, follow_answers,
    poll_battle, state_name, stop_polling, streamed_for,
};
use crate::api;
use crate::app::Session;
use crate::button::ActionButton;

/// The longest reason a vote may carry (the server's limit).
const REASON_MAX: usize = 1000;

#[component]
pub fn ArenaPage() -> impl IntoView {
    let session = expect_context::<Session>();
    let arena = current_arena();
    let battle = RwSignal::new(None::<BattleView>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let timer = StoredValue::new(None::<TimeoutHandle>);
    let streamed = RwSignal::new(None);
    on_cleanup(move || stop_polling(timer));

    let deal = move |_| {
        stop_polling(timer);
        busy.set(true);
        error.set(None);
        reason.set(String::new());
        // Nobody signed in: the battle is dealt to this browser's visitor token.
        let need_token = session
            .me
            .with_untracked(|me| me.as_ref().and_then(|m| m.user.as_ref()).is_none());
        spawn_local(async move {
            match api::arena_new_battle(arena, need_token).await {
                Ok(view) => {
                    let (id, answering) = (view.id, view.state == BattleState::Answering);
                    battle.set(Some(view));
                    if answering {
                        poll_battle(id, battle, error, timer);
                    }
                }
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(false);
        });
    };

    let cast = move |choice: VoteChoice| {
        let Some(id) = battle.with_untracked(|b| b.as_ref().map(|b| b.id)) else {
            return;
        };
        let text = reason
            .get_untracked()
            .trim()
            .chars()
            .take(REASON_MAX)
            .collect::<String>();
        let vote = NewVote {
            choice,
            reason: (!text.is_empty()).then_some(text),
        };
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::arena_vote(id, &vote).await {
                Ok(view) => battle.set(Some(view)),
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(false);
        });
    };

    let state = move || battle.with(|b| b.as_ref().map_or("none", |b| state_name(b.state)));
    let can_vote = move || {
        !busy.get() && battle.with(|b| b.as_ref().is_some_and(|b| b.state == BattleState::Ready))
    };
    let vote_button = move |choice: VoteChoice, testid: &'static str, label: &'static str| {
        view! {
            <button
                type="button"
                data-testid=testid
                disabled=move || !can_vote()
                on:click=move |_| cast(choice)
            >
                {label}
            </button>
        }
    };
    let over = move || {
        battle.with(|b| {
            b.as_ref()
                .is_some_and(|b| matches!(b.state, BattleState::Voted | BattleState::Void))
        })
    };
    // A memo, so that polling does not rebuild the form (and take the focus from the reason).
    let voting = Memo::new(move |_| battle.with(Option::is_some) && !over());

    view! {
        <div class="arena-page" data-testid="arena" data-state=state>
            <div class="page-head">
                <h1>"Arena"</h1>
                <div class="inline">
                    <A href=format!("/arena/leaderboard?arena={}", arena.as_str())>"Leaderboard"</A>
                    {move || battle.with(|b| b.as_ref().map(|b| {
                        let href = format!("/arena/battles/{}", b.id);
                        view! { <A href=href>{format!("Battle #{}", b.id)}</A> }
                    }))}
                    <ActionButton
                        testid="arena-new"
                        busy
                        primary=move || !voting.get()
                        on_click=deal
                    >
                        "New battle"
                    </ActionButton>
                </div>
            </div>
            <nav class="inline arena-tabs">{arena_tabs("/arena", arena)}</nav>
            <p class="muted">
                {arena_blurb(arena)}
                " You do not know who wrote which answer until you have voted: judge the answers \
                 alone."
            </p>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            {move || match battle.get() {
                None => view! {
                    <p class="card muted">"Press “New battle” to be dealt a prompt and two answers."</p>
                }
                .into_any(),
                Some(b) => {
                    let so_far = streamed_for(&b, streamed);
                    view! { {battle_body(&b, so_far)} {battle_outcome(&b)} }.into_any()
                }
            }}
            {follow_answers(battle, streamed)}
            {move || voting.get().then(|| view! {
                <section class="card arena-vote">
                    <div class="inline">
                        {vote_button(VoteChoice::A, "vote-a", "A is better")}
                        {vote_button(VoteChoice::B, "vote-b", "B is better")}
                        {vote_button(VoteChoice::Tie, "vote-tie", "Tie")}
                        {vote_button(VoteChoice::BothBad, "vote-both-bad", "Both are bad")}
                    </div>
                    <textarea
                        data-testid="arena-reason"
                        rows="2"
                        maxlength=REASON_MAX.to_string()
                        placeholder="Why? (optional)"
                        bind:value=reason
                    ></textarea>
                </section>
            })}
            <super::watch::Watch />
        </div>
    }
}
