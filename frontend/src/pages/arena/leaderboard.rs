//! `/arena/leaderboard`: the ratings, open to anyone, refreshed live with every vote: rank ranges,
//! bootstrap intervals, vote counts, the win-rate matrix, the newest battles and the JSONL export.

use lachesis_shared::arena::{
    ArenaKind, ArenaVoteEvent, BattleView, ContenderView, LeaderboardEntry, LeaderboardView,
};
use lachesis_shared::live::{LiveEvent, Topic};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::{arena_tabs, choice_label, current_arena, interval, percent, rank_range};
use crate::api;
use crate::live::{Notice, use_topic};
use crate::table::DataTable;

/// How many live votes the "recent votes" list keeps.
const RECENT_VOTES: usize = 10;
/// How many finished battles are listed.
const BATTLES: usize = 50;

/// Everything the page shows from HTTP, loaded together.
#[derive(Clone, Copy)]
struct Data {
    board: RwSignal<Option<LeaderboardView>>,
    battles: RwSignal<Vec<BattleView>>,
    contenders: RwSignal<Vec<ContenderView>>,
    error: RwSignal<Option<String>>,
    style_control: RwSignal<bool>,
    arena: ArenaKind,
    /// A load is running; `again`: another was asked for meanwhile.
    loading: StoredValue<bool>,
    again: StoredValue<bool>,
}

impl Data {
    /// Reloads everything; while a load runs, asks for one more afterwards instead, so a burst of
    /// votes costs two loads, not one per vote.
    fn load(self) {
        if self.loading.try_get_value() != Some(false) {
            self.again.try_set_value(true);
            return;
        }
        self.loading.set_value(true);
        spawn_local(async move {
            loop {
                let Some(style) = self.style_control.try_get_untracked() else {
                    return;
                };
                let (board, battles, contenders) = futures::join!(
                    api::arena_leaderboard(self.arena, style),
                    api::arena_battles(self.arena, BATTLES),
                    api::arena_contenders(),
                );
                let mut error = None;
                match board {
                    // An answer for the other setting (toggled meanwhile) is not shown.
                    Ok(board) if self.style_control.try_get_untracked() == Some(style) => {
                        self.board.try_set(Some(board));
                    }
                    Ok(_) => {}
                    Err(e) => error = Some(e.to_string()),
                }
                match battles {
                    Ok(list) => {
                        self.battles.try_set(list);
                    }
                    Err(e) => error = error.or(Some(e.to_string())),
                }
                match contenders {
                    Ok(list) => {
                        self.contenders.try_set(list);
                    }
                    Err(e) => error = error.or(Some(e.to_string())),
                }
                self.error.try_set(error);
                match self.again.try_get_value() {
                    Some(true) => self.again.set_value(false),
                    Some(false) => break,
                    // The page is gone.
                    None => return,
                }
            }
            self.loading.try_set_value(false);
        });
    }
}

#[component]
pub fn LeaderboardPage() -> impl IntoView {
    let arena = current_arena();
    let data = Data {
        arena,
        board: RwSignal::new(None),
        battles: RwSignal::new(Vec::new()),
        contenders: RwSignal::new(Vec::new()),
        error: RwSignal::new(None),
        style_control: RwSignal::new(false),
        loading: StoredValue::new(false),
        again: StoredValue::new(false),
    };
    let subscribed = RwSignal::new(false);
    let recent = RwSignal::new(Vec::<ArenaVoteEvent>::new());
    data.load();
    use_topic(Topic::Arena { arena }, move |notice| match notice {
        Notice::Event(LiveEvent::ArenaVote(event)) if event.arena == arena => {
            recent.update(|r| {
                r.insert(0, event);
                r.truncate(RECENT_VOTES);
            });
            data.load();
        }
        Notice::Event(_) => {}
        Notice::Resync => {
            subscribed.set(true);
            data.load();
        }
        Notice::Lost => subscribed.set(false),
    });

    let counted = move || {
        data.board
            .with(|b| b.as_ref().map(|b| b.counted_votes.to_string()))
    };
    let toggle = move |_| {
        data.style_control.update(|s| *s = !*s);
        data.load();
    };

    view! {
        <div
            class="arena-page"
            data-testid="leaderboard"
            data-subscribed=move || subscribed.get().to_string()
            data-counted=counted
        >
            <div class="page-head">
                <h1>"Arena leaderboard"</h1>
                <nav class="inline arena-tabs">{arena_tabs("/arena/leaderboard", arena)}</nav>
                <div class="inline">
                    <span class="muted">
                        {move || if subscribed.get() { "Live" } else { "Connecting to the live feed…" }}
                    </span>
                    <A href=format!("/arena?arena={}", arena.as_str())>"Vote"</A>
                    <a href=api::arena_export_url(arena) download=format!("arena-{}.jsonl", arena.as_str()) data-testid="arena-export">
                        "Download the votes (JSONL)"
                    </a>
                </div>
            </div>
            <p class="muted">
                "Caretakers answer the same cat; voters pick the better answer without knowing who "
                "wrote it. Ratings are Bradley–Terry strengths on an Elo-like scale (1000 is average, "
                "400 points is 10:1 odds), with bootstrap intervals; a rank range means the "
                "intervals do not separate the neighbours."
            </p>
            {move || data.error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <label class="check">
                <input
                    type="checkbox"
                    data-testid="style-control"
                    prop:checked=move || data.style_control.get()
                    on:change=toggle
                />
                "Style control (answer length as a covariate)"
            </label>
            {move || data.board.get().map(board_view)}
            <section class="card">
                <h2>"Recent votes"</h2>
                {move || {
                    let list = recent.get();
                    if list.is_empty() {
                        view! { <p class="muted">"Votes cast while this page is open appear here."</p> }
                            .into_any()
                    } else {
                        view! { <ul class="plain">{list.into_iter().map(vote_line).collect_view()}</ul> }
                            .into_any()
                    }
                }}
            </section>
            <section class="card">
                <h2>"Recent battles"</h2>
                <DataTable rows=move || data.battles.get().into_iter().map(battle_row).collect_view()>
                    <th>"Battle"</th>
                    <th>"A"</th>
                    <th>"B"</th>
                    <th>"Verdict"</th>
                </DataTable>
            </section>
            <section class="card">
                <h2>"Contenders"</h2>
                <ul class="plain">
                    {move || data.contenders.get().into_iter().map(|c| view! {
                        <li data-testid="arena-contender">
                            <strong>{c.name}</strong>
                            <span class="badge">{c.kind}</span>
                            <span class="muted">{format!("{} counted votes", c.votes)}</span>
                        </li>
                    }).collect_view()}
                </ul>
            </section>
        </div>
    }
}

fn board_view(board: LeaderboardView) -> impl IntoView {
    let confidence = format!("{:.0}% interval", board.confidence * 100.0);
    let counts = format!(
        "{} counted votes, {} excluded by the anomaly filters",
        board.counted_votes, board.excluded_votes
    );
    let style = board.style_coefficient.map(|c| {
        view! { <span class="muted">{format!(" · length coefficient {c:.3}")}</span> }
    });
    let rows = if board.rows.is_empty() {
        view! { <tr><td colspan="5" class="muted">"No votes yet."</td></tr> }.into_any()
    } else {
        board
            .rows
            .into_iter()
            .map(entry_row)
            .collect_view()
            .into_any()
    };
    let names = board.contenders;
    let matrix = (!names.is_empty()).then(|| {
        let header = names
            .iter()
            .map(|n| view! { <th class="num">{n.clone()}</th> })
            .collect_view();
        let lines = names
            .iter()
            .zip(board.win_rates)
            .map(|(name, rates)| {
                view! {
                    <tr>
                        <th>{name.clone()}</th>
                        {rates.into_iter().map(|r| view! { <td class="num">{percent(r)}</td> }).collect_view()}
                    </tr>
                }
            })
            .collect_view();
        view! {
            <section class="card">
                <h2>"Win rates"</h2>
                <p class="muted">"How often the row's contender beat the column's (ties count half)."</p>
                <DataTable rows=lines class="arena-matrix" testid="win-rates">
                    <th></th>
                    {header}
                </DataTable>
            </section>
        }
    });
    view! {
        <section class="card">
            <p data-testid="arena-counts">{counts} {style}</p>
            <DataTable rows class="arena-board" testid="leaderboard-table">
                <th class="num">"Rank"</th>
                <th>"Contender"</th>
                <th class="num">"Rating"</th>
                <th class="num">{confidence}</th>
                <th class="num">"Votes"</th>
            </DataTable>
        </section>
        {matrix}
    }
}

fn entry_row(e: LeaderboardEntry) -> impl IntoView {
    let name = e.contender.clone();
    view! {
        <tr data-testid="leaderboard-row" data-contender=name data-votes=e.votes.to_string()>
            <td class="num">{rank_range(e.rank_best, e.rank_worst)}</td>
            <td>
                {e.contender}
                {e.provisional.then(|| view! {
                    <span class="badge" title="too few votes to be ranked yet">"provisional"</span>
                })}
            </td>
            <td class="num">{format!("{}", e.rating.round())}</td>
            <td class="num">{interval(e.lower, e.upper)}</td>
            <td class="num">{e.votes}</td>
        </tr>
    }
}

fn vote_line(e: ArenaVoteEvent) -> impl IntoView {
    let [a, b] = e.contenders;
    view! {
        <li data-testid="arena-recent-vote" data-counted=e.counted.to_string()>
            <A href=format!("/arena/battles/{}", e.battle)>{format!("#{}", e.battle)}</A>
            <span>{format!("{a} vs {b}: {}", choice_label(e.choice))}</span>
            {(!e.counted).then(|| view! { <span class="badge warn">"not counted"</span> })}
        </li>
    }
}

fn battle_row(b: BattleView) -> impl IntoView {
    let verdict = match (b.vote, &b.void_reason) {
        (Some(choice), _) => choice_label(choice).to_owned(),
        (None, Some(reason)) => format!("void: {reason}"),
        (None, None) => "—".to_owned(),
    };
    view! {
        <tr data-testid="arena-battle-row">
            <td><A href=format!("/arena/battles/{}", b.id)>{format!("#{}", b.id)}</A></td>
            <td>{b.contender_a.unwrap_or_default()}</td>
            <td>{b.contender_b.unwrap_or_default()}</td>
            <td>
                {verdict}
                {b.excluded.map(|r| view! { <span class="badge warn" title=r>"not counted"</span> })}
            </td>
        </tr>
    }
}
