//! One item in the workspace: the progress, the prompt, the answers and the controls of the
//! queue's kind (five score buttons, A / B / equal, or a rank per answer).

use std::time::Duration;

use lachesis_shared::feedback::{FeedbackKind, ItemToJudge, Judgement, PairChoice};
use leptos::prelude::*;

use crate::format::time_left;

use super::rank_order;
use super::workspace::Desk;

/// What each score means, for the buttons' titles.
const SCORES: [&str; 5] = ["bad", "poor", "fair", "good", "excellent"];

#[component]
pub(super) fn ItemView(item: ItemToJudge, desk: Desk, ready: Signal<bool>) -> impl IntoView {
    let total = item.done + item.left;
    let progress = view! {
        <div
            class="feedback-progress"
            data-testid="feedback-progress"
            data-done=item.done.to_string()
            data-left=item.left.to_string()
        >
            <progress max=total.to_string() value=item.done.to_string()></progress>
            <span>{format!("done {}, left {}", item.done, item.left)}</span>
        </div>
    };
    let prompt = view! {
        <section class="card">
            <h2>"Prompt"</h2>
            <p class="feedback-text" data-testid="feedback-prompt">{item.prompt}</p>
        </section>
    };
    let controls = match item.kind {
        FeedbackKind::Rate => rate_view(item.answers, desk, ready).into_any(),
        FeedbackKind::Compare => compare_view(item.answers, desk, ready).into_any(),
        FeedbackKind::Rank => view! { <RankView answers=item.answers desk ready /> }.into_any(),
    };
    let deadline = item
        .closes_in_ms
        .map(|closes_in_ms| view! { <Deadline closes_in_ms /> });
    view! { {progress} {deadline} {prompt} {controls} }
}

/// How long the item still takes verdicts (a people's round asked for it and ends then), counted
/// down each second from the browser's clock: the server sends a duration, not an instant, so a
/// browser whose clock is off still counts right. A verdict sent after the end is refused and the
/// next item loads.
#[component]
fn Deadline(closes_in_ms: i64) -> impl IntoView {
    let ends_at_ms = js_sys::Date::now() + closes_in_ms as f64;
    let left_ms = RwSignal::new(closes_in_ms.max(0));
    let tick = move || {
        left_ms.set((ends_at_ms - js_sys::Date::now()).max(0.0) as i64);
    };
    if let Ok(handle) = set_interval_with_handle(tick, Duration::from_secs(1)) {
        on_cleanup(move || handle.clear());
    }
    let text = move || match left_ms.get() {
        0 => "The round that asked for this item has ended: it takes no more verdicts.".to_owned(),
        ms => format!("Takes verdicts for another {}", time_left(ms)),
    };
    view! {
        <p
            class="feedback-deadline muted"
            role="timer"
            data-testid="feedback-deadline"
            data-ended=move || (left_ms.get() == 0).to_string()
        >
            {text}
        </p>
    }
}

/// One answer's text, for the browser test in answer order.
fn answer_text(text: String) -> impl IntoView {
    view! { <p class="feedback-text" data-testid="feedback-answer">{text}</p> }
}

fn rate_view(answers: Vec<String>, desk: Desk, ready: Signal<bool>) -> impl IntoView {
    let answer = answers.into_iter().next().unwrap_or_default();
    let buttons = (1..=5u8)
        .map(|score| {
            view! {
                <button
                    type="button"
                    class="feedback-score"
                    data-testid=format!("rate-{score}")
                    title=SCORES[usize::from(score) - 1]
                    disabled=move || !ready.get()
                    on:click=move |_| desk.judge(Judgement::Rate { score })
                >
                    {score}
                </button>
            }
        })
        .collect_view();
    view! {
        <section class="card">
            <h2>"Answer"</h2>
            {answer_text(answer)}
        </section>
        <section class="card feedback-controls">
            <div class="inline">
                <span class="muted">"1 bad"</span>
                {buttons}
                <span class="muted">"5 excellent"</span>
            </div>
        </section>
    }
}

fn compare_view(answers: Vec<String>, desk: Desk, ready: Signal<bool>) -> impl IntoView {
    let mut answers = answers.into_iter();
    let side = |label: &'static str, text: Option<String>| {
        view! {
            <section class="card feedback-answer">
                <h3>{label}</h3>
                {answer_text(text.unwrap_or_default())}
            </section>
        }
    };
    let a = side("A", answers.next());
    let b = side("B", answers.next());
    let button = move |choice: PairChoice, testid: &'static str, label: &'static str| {
        view! {
            <button
                type="button"
                data-testid=testid
                disabled=move || !ready.get()
                on:click=move |_| desk.judge(Judgement::Compare { choice })
            >
                {label}
            </button>
        }
    };
    view! {
        <div class="feedback-pair">{a} {b}</div>
        <section class="card feedback-controls">
            <div class="inline">
                {button(PairChoice::A, "compare-a", "A is better")}
                {button(PairChoice::B, "compare-b", "B is better")}
                {button(PairChoice::Tie, "compare-tie", "Equal")}
            </div>
        </section>
    }
}

/// Each answer with a rank to choose; submitting needs every rank from 1 to n exactly once.
#[component]
fn RankView(answers: Vec<String>, desk: Desk, ready: Signal<bool>) -> impl IntoView {
    let n = answers.len();
    let ranks = RwSignal::new(vec![None::<usize>; n]);
    let order = Memo::new(move |_| ranks.with(|r| rank_order(r)));
    let complete = move || ranks.with(|r| r.iter().all(Option::is_some));
    let cards = answers
        .into_iter()
        .enumerate()
        .map(|(index, text)| {
            let options = (1..=n)
                .map(|rank| view! { <option value=rank.to_string()>{rank}</option> })
                .collect_view();
            view! {
                <section class="card feedback-answer">
                    <div class="feedback-rank-head">
                        <h3>{format!("Answer {}", index + 1)}</h3>
                        <label>
                            "Rank "
                            <select
                                data-testid="rank-select"
                                on:change=move |ev| {
                                    let rank = event_target_value(&ev).parse::<usize>().ok();
                                    ranks.update(|r| r[index] = rank);
                                }
                            >
                                <option value="" selected>"—"</option>
                                {options}
                            </select>
                        </label>
                    </div>
                    {answer_text(text)}
                </section>
            }
        })
        .collect_view();
    let submit = move |_| {
        if let Some(order) = order.get_untracked() {
            desk.judge(Judgement::Rank { order });
        }
    };
    view! {
        <div class="feedback-ranked">{cards}</div>
        <section class="card feedback-controls">
            <div class="inline">
                <button
                    type="button"
                    class="primary"
                    data-testid="rank-submit"
                    disabled=move || !ready.get() || order.with(Option::is_none)
                    on:click=submit
                >
                    "Submit the ranking"
                </button>
                <span class="muted">
                    {move || {
                        if complete() && order.with(Option::is_none) {
                            format!("Each rank from 1 to {n} once, please.")
                        } else {
                            "Rank 1 is the best.".to_owned()
                        }
                    }}
                </span>
            </div>
        </section>
    }
}
