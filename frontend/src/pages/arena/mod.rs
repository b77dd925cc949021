//! The arena: Chatbot-Arena-style battles. A voter is dealt a battle (one prompt, two anonymous
//! answers "A" and "B"), votes, and only then learns who answered; the votes feed a Bradley–Terry
//! leaderboard with bootstrap intervals.
//!
//! - [`vote::ArenaPage`] at `/arena`: deal a battle, wait for both answers, vote.
//! - [`leaderboard::LeaderboardPage`] at `/arena/leaderboard`: the ratings, live with every vote.
//! - [`battle::BattlePage`] at `/arena/battles/:id`: one battle, answers and verdict.
//!
//! The pure formatting below is shared by the three and tested natively.

mod battle;
mod leaderboard;
mod vote;
mod watch;

use std::time::Duration;

pub use battle::BattlePage;
pub use leaderboard::LeaderboardPage;
pub use vote::ArenaPage;

use lachesis_shared::arena::{ArenaKind, BattleState, BattleView, VoteChoice};
use lachesis_shared::live::{LiveEvent, Topic};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api::{self, ApiError};
use crate::live::{Notice, use_topic};

/// Both answers of a battle as they are being written: the battle's id, then A's and B's text.
type Streamed = RwSignal<Option<(i64, [String; 2])>>;

/// Follows battle `id`'s answers on the live hub while it is mounted, keeping the latest texts in
/// `streamed` (each event carries both texts so far, so a missed one costs nothing).
#[component]
fn StreamedAnswers(id: i64, streamed: Streamed) -> impl IntoView {
    use_topic(Topic::Battle { battle: id }, move |notice| {
        if let Notice::Event(LiveEvent::BattleText(event)) = notice
            && event.battle == id
        {
            streamed.set(Some((id, event.answers)));
        }
    });
}

/// Mounts [`StreamedAnswers`] for `battle` while it is being answered, and only then: the memo
/// keeps polling from re-subscribing at every refresh.
fn follow_answers(battle: RwSignal<Option<BattleView>>, streamed: Streamed) -> impl IntoView {
    let answering = Memo::new(move |_| {
        battle.with(|b| {
            b.as_ref()
                .filter(|b| b.state == BattleState::Answering)
                .map(|b| b.id)
        })
    });
    move || {
        answering
            .get()
            .map(|id| view! { <StreamedAnswers id streamed /> })
    }
}

/// What has been written of `b`'s answers, while it is being answered.
fn streamed_for(b: &BattleView, streamed: Streamed) -> Option<[String; 2]> {
    if b.state != BattleState::Answering {
        return None;
    }
    streamed.with(|s| {
        s.as_ref()
            .filter(|(id, _)| *id == b.id)
            .map(|(_, texts)| texts.clone())
    })
}

/// The arena named by the page's `?arena=`: the catbot arena when absent or unknown.
fn current_arena() -> ArenaKind {
    leptos_router::hooks::use_query_map()
        .with_untracked(|q| q.get("arena").and_then(|name| ArenaKind::parse(&name)))
        .unwrap_or(ArenaKind::Catbot)
}

fn arena_label(arena: ArenaKind) -> &'static str {
    match arena {
        ArenaKind::Catbot => "Catbot",
        ArenaKind::Arithmetic => "Arithmetic",
        ArenaKind::Spatial => "Spatial",
        ArenaKind::Chess => "Chess",
    }
}

/// The heading over a battle's prompt.
fn prompt_heading(arena: ArenaKind) -> &'static str {
    match arena {
        ArenaKind::Catbot => "The cat",
        ArenaKind::Arithmetic => "The problem",
        ArenaKind::Spatial => "The scene",
        ArenaKind::Chess => "The position",
    }
}

/// What the arena's contenders are asked, in a sentence.
fn arena_blurb(arena: ArenaKind) -> &'static str {
    match arena {
        ArenaKind::Catbot => "Two caretakers answer the same cat.",
        ArenaKind::Arithmetic => "Two solvers answer the same arithmetic problem.",
        ArenaKind::Spatial => {
            "Two planners move the same scene's objects; the physics then settles them, and \
             after the vote you see how many goals each plan met."
        }
        ArenaKind::Chess => {
            "Two players choose a move in the same position; after the vote you see how the \
             engine judge scores each."
        }
    }
}

/// Links to `path` in each arena. Full page loads: a page subscribes to its arena's votes once.
fn arena_tabs(path: &'static str, current: ArenaKind) -> impl IntoView {
    ArenaKind::ALL
        .iter()
        .map(|&arena| {
            let href = format!("{path}?arena={}", arena.as_str());
            let class = if arena == current {
                "tab active"
            } else {
                "tab"
            };
            view! {
                <a href=href rel="external" class=class
                    data-testid=format!("arena-tab-{}", arena.as_str())>
                    {arena_label(arena)}
                </a>
            }
        })
        .collect_view()
}

/// How often a battle whose answers are still being written is asked again.
const POLL: Duration = Duration::from_millis(700);

/// The state's wire spelling, for `data-state`.
fn state_name(state: BattleState) -> &'static str {
    match state {
        BattleState::Answering => "answering",
        BattleState::Ready => "ready",
        BattleState::Voted => "voted",
        BattleState::Void => "void",
    }
}

/// The verdict as a person reads it.
fn choice_label(choice: VoteChoice) -> &'static str {
    match choice {
        VoteChoice::A => "A is better",
        VoteChoice::B => "B is better",
        VoteChoice::Tie => "Tie",
        VoteChoice::BothBad => "Both are bad",
    }
}

/// `3`, or `2–4` when the intervals do not separate the contender from its neighbours.
fn rank_range(best: usize, worst: usize) -> String {
    if best == worst {
        best.to_string()
    } else {
        format!("{best}–{worst}")
    }
}

/// A win rate in whole percent; blank where the pair never met.
fn percent(rate: Option<f64>) -> String {
    rate.map(|r| format!("{:.0}%", r * 100.0))
        .unwrap_or_default()
}

/// `1012 – 1088`: an interval in whole rating points.
fn interval(lower: f64, upper: f64) -> String {
    format!("{} – {}", lower.round(), upper.round())
}

/// Asks for battle `id` again every [`POLL`] while its answers are being written, putting each
/// answer in `battle`. Stops when the answers are in, when `battle` holds another battle (a new
/// one was dealt) or is gone (the page unmounted), or on an error other than a network one.
fn poll_battle(
    id: i64,
    battle: RwSignal<Option<BattleView>>,
    error: RwSignal<Option<String>>,
    timer: StoredValue<Option<TimeoutHandle>>,
) {
    let handle = set_timeout_with_handle(
        move || {
            spawn_local(async move {
                let answer = api::arena_battle(id).await;
                let current = battle.try_with_untracked(|b| b.as_ref().map(|b| b.id));
                if current != Some(Some(id)) {
                    return;
                }
                match answer {
                    Ok(view) => {
                        let answering = view.state == BattleState::Answering;
                        error.set(None);
                        battle.set(Some(view));
                        if answering {
                            poll_battle(id, battle, error, timer);
                        }
                    }
                    Err(e @ ApiError::Network(_)) => {
                        error.set(Some(e.to_string()));
                        poll_battle(id, battle, error, timer);
                    }
                    Err(e) => error.set(Some(e.to_string())),
                }
            });
        },
        POLL,
    );
    timer.try_set_value(handle.ok());
}

/// Stops [`poll_battle`]'s pending timer.
fn stop_polling(timer: StoredValue<Option<TimeoutHandle>>) {
    if let Some(handle) = timer.try_get_value().flatten() {
        handle.clear();
    }
}

/// The prompt and both answers side by side (as they are written, while they are), with who
/// answered once that is revealed.
fn battle_body(b: &BattleView, streamed: Option<[String; 2]>) -> impl IntoView + use<> {
    let answering = b.state == BattleState::Answering;
    let [so_far_a, so_far_b] = streamed.unwrap_or_default();
    let side =
        |label: &'static str, answer: Option<String>, so_far: String, who: Option<String>| {
            let answer_id = if label == "A" {
                "arena-answer-a"
            } else {
                "arena-answer-b"
            };
            let reveal_id = if label == "A" {
                "arena-reveal-a"
            } else {
                "arena-reveal-b"
            };
            let writing_id = if label == "A" {
                "arena-writing-a"
            } else {
                "arena-writing-b"
            };
            view! {
                <section class="card arena-answer">
                    <h3>
                        {label}
                        {who.map(|name| view! {
                            ": " <span class="arena-reveal" data-testid=reveal_id>{name}</span>
                        })}
                    </h3>
                    {match answer {
                        Some(text) if is_transcript(&text) => view! {
                            <div class="arena-text arena-dialogue" data-testid=answer_id>
                                {transcript_turns(&text)}
                            </div>
                        }
                        .into_any(),
                        Some(text) => view! {
                            <p class="arena-text" data-testid=answer_id>{text}</p>
                        }
                        .into_any(),
                        None if answering && !so_far.is_empty() => view! {
                            <p class="arena-text arena-writing" data-testid=writing_id>{so_far}</p>
                        }
                        .into_any(),
                        None if answering => view! {
                            <p class="muted" data-testid="arena-waiting">"Answering…"</p>
                        }
                        .into_any(),
                        None => view! { <p class="muted">"(no answer)"</p> }.into_any(),
                    }}
                </section>
            }
        };
    view! {
        <section class="card">
            <h2>{prompt_heading(b.arena)}</h2>
            {position_fen(&b.prompt)
                .filter(|_| b.arena == ArenaKind::Chess)
                .map(|fen| view! { <crate::pages::chess::PositionBoard fen /> })}
            <p class="arena-text" data-testid="arena-prompt">{b.prompt.clone()}</p>
            {answering.then(|| view! { <p class="muted">"The contenders are answering…"</p> })}
        </section>
        <div class="arena-pair">
            {side("A", b.answer_a.clone(), so_far_a, b.contender_a.clone())}
            {side("B", b.answer_b.clone(), so_far_b, b.contender_b.clone())}
        </div>
    }
}

/// Whether an answer is a catbot dialogue's transcript (its first line is the caretaker's).
fn is_transcript(text: &str) -> bool {
    text.starts_with(CARETAKER)
}

const CARETAKER: &str = "Caretaker: ";

/// A transcript's turns, one a line, the speaker in bold.
fn transcript_turns(text: &str) -> impl IntoView + use<> {
    text.lines()
        .map(|line| {
            let (who, said, class) = match line.strip_prefix(CARETAKER) {
                Some(said) => ("Caretaker", said, "turn caretaker"),
                None => (
                    "The cat",
                    line.strip_prefix("The cat: ").unwrap_or(line),
                    "turn cat",
                ),
            };
            view! { <p class=class><strong>{who} ": "</strong>{said.to_string()}</p> }
        })
        .collect_view()
}

/// The FEN a chess battle's prompt opens with (`Position (FEN): ...` on its first line).
fn position_fen(prompt: &str) -> Option<String> {
    prompt
        .lines()
        .next()?
        .strip_prefix("Position (FEN): ")
        .map(|fen| fen.trim().to_string())
}

/// The verdict, whether it counts, or why the battle was voided.
fn battle_outcome(b: &BattleView) -> impl IntoView + use<> {
    let vote = b.vote.map(|choice| {
        view! {
            <p data-testid="arena-vote">"Vote: " <strong>{choice_label(choice)}</strong></p>
        }
    });
    let excluded = b.excluded.clone().map(|reason| {
        view! {
            <p class="badge warn arena-excluded" data-testid="arena-excluded">
                "Recorded, not counted: " {reason}
            </p>
        }
    });
    let void = (b.state == BattleState::Void).then(|| {
        let reason = b
            .void_reason
            .clone()
            .unwrap_or_else(|| "no reason given".into());
        view! {
            <p class="error" data-testid="arena-void">"This battle was voided: " {reason}</p>
        }
    });
    let judged = b.judged.clone().map(|[a, b]| {
        view! {
            <p class="muted" data-testid="arena-judged">
                "The environment's own judge: A — " {a} "; B — " {b}
            </p>
        }
    });
    view! { {vote} {excluded} {void} {judged} }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chess_prompts_give_their_fen_and_dialogues_are_told_apart() {
        let prompt = "Position (FEN): 8/8/8/8/8/8/8/K6k w - - 0 1\nMoves so far: none";
        assert_eq!(
            position_fen(prompt).as_deref(),
            Some("8/8/8/8/8/8/8/K6k w - - 0 1")
        );
        assert_eq!(position_fen("What is 2 + 2?"), None);
        assert!(is_transcript("Caretaker: I feed her.\nThe cat: purrs"));
        assert!(!is_transcript("I feed her."));
    }

    #[test]
    fn ranks_are_ranges_only_when_uncertain() {
        assert_eq!(rank_range(1, 1), "1");
        assert_eq!(rank_range(2, 4), "2–4");
    }

    #[test]
    fn numbers_are_rounded_for_reading() {
        assert_eq!(percent(Some(0.626)), "63%");
        assert_eq!(percent(Some(1.0)), "100%");
        assert_eq!(percent(None), "");
        assert_eq!(interval(1011.6, 1088.2), "1012 – 1088");
    }

    #[test]
    fn states_use_the_wire_spelling() {
        for state in [
            BattleState::Answering,
            BattleState::Ready,
            BattleState::Voted,
            BattleState::Void,
        ] {
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, serde_json::json!(state_name(state)));
        }
    }
}
