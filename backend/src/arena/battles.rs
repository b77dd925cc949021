//! Dealing a battle: the pair, the prompt, and both answers written in the background.

use std::sync::Mutex;
use std::time::Instant;

use lachesis_shared::arena::{ArenaKind, BattleTextEvent, ContenderPolicy};
use lachesis_shared::live::{LiveEvent, Topic};

use super::answer::{self, ArenaPrompt};
use super::cat_dialogue;
use super::store::{self, NewBattleRow, StoredBattle, StoredContender};
use super::voter::Voter;
use super::{board, integrity};
use crate::app::{AppError, AppState};

/// Battles one voter may have answering at once: the next waits for these to finish.
pub const MAX_ANSWERING_PER_VOTER: i64 = 2;

/// Deals `voter` a new battle in `arena` and starts both contenders answering; the battle comes
/// back in state `answering`.
pub async fn deal(
    state: &AppState,
    voter: &Voter,
    arena: ArenaKind,
) -> Result<StoredBattle, AppError> {
    let settings = &state.arena.settings;
    let now = Instant::now();
    let limited = |what| {
        move |l: crate::hosting::rate::Limited| AppError::RateLimited {
            what,
            retry_after_s: l.retry_after_secs,
        }
    };
    state
        .arena
        .battle_rates
        .charge(&voter.key, 1, &settings.battles, now)
        .map_err(limited("battles"))?;
    state
        .arena
        .address_battle_rates
        .charge(&voter.address, 1, &settings.address_battles, now)
        .map_err(limited("battles from this address"))?;
    let within_s = settings.answer_timeout.as_secs_f64() + 30.0;
    if store::answering_battles(&state.db, &voter.key, within_s).await? >= MAX_ANSWERING_PER_VOTER {
        return Err(AppError::Busy {
            what: "your battles still being answered",
            retry_after_s: 5,
        });
    }
    let permit = state
        .arena
        .answering
        .clone()
        .try_acquire_owned()
        .map_err(|_| AppError::Busy {
            what: "the arena (every contender is answering someone)",
            retry_after_s: 10,
        })?;
    let contenders = store::contenders(&state.db).await?;
    let latest = state.arena.boards.latest(arena);
    let (pair, seed) = {
        let mut rng = rand::rng();
        let pair = board::deal(&contenders, latest.as_deref(), &mut rng);
        (pair, rand::random::<u64>() & (i64::MAX as u64))
    };
    let Some(pair) = pair else {
        return Err(AppError::Conflict(
            "the arena needs at least two contenders; the server's admin enters them".into(),
        ));
    };
    let mut prompt = answer::prompt(arena, seed).map_err(|e| AppError::Internal(e.to_string()))?;
    prompt.dialogue = cat_dialogue::for_battle(arena, seed, settings.cat_turns, settings.cat)
        .map_err(|e| AppError::Internal(e.to_string()))?;
    let id = store::insert_battle(
        &state.db,
        &NewBattleRow {
            arena,
            seed: seed as i64,
            prompt: &prompt.text,
            contenders: pair,
            voter: &voter.key,
            address: &voter.address.to_string(),
        },
    )
    .await?;
    let picked = |id: i64| contenders.iter().find(|c| c.id == id).cloned();
    let (Some(a), Some(b)) = (picked(pair[0]), picked(pair[1])) else {
        unreachable!("the pair was dealt from these contenders")
    };
    let writer = state.clone();
    tokio::spawn(async move { write_answers(&writer, id, &prompt, [a, b], permit).await });
    store::battle(&state.db, id)
        .await?
        .ok_or(AppError::NotFound("battle"))
}

/// Both answers, side by side; then the battle is opened to its vote, or voided when an answer
/// gives a contender away or a contender fails.
async fn write_answers(
    state: &AppState,
    id: i64,
    prompt: &ArenaPrompt,
    contenders: [StoredContender; 2],
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let settings = &state.arena.settings;
    let live = LiveAnswers::new(state.live.clone(), id);
    let ask = |c: &'_ StoredContender, side: usize| {
        let policy = c.policy.clone();
        // An adapter contender answers with whatever the trainer loaded under its name last.
        let engine = match &policy {
            ContenderPolicy::Embedded {
                adapter: Some(name),
                ..
            } => state.weights.adapter(name),
            _ => state.engine.clone(),
        };
        let live = &live;
        let cat_engine = state.engine.clone();
        async move {
            let speaker = answer::Speaker {
                policy: &policy,
                engine: engine.as_ref(),
                max_tokens: settings.max_answer_tokens,
                timeout: settings.answer_timeout,
            };
            answer::answer(&speaker, prompt, cat_engine.as_ref(), &|text| {
                live.update(side, text)
            })
            .await
        }
    };
    let (a, b) = tokio::join!(ask(&contenders[0], 0), ask(&contenders[1], 1));
    // The model's work is done: the next battle may start before this one is stored.
    drop(permit);
    let (answers, void) = match (a, b) {
        (Ok(a), Ok(b)) => {
            let void = integrity::void_reason(
                [&a, &b],
                [
                    (
                        contenders[0].name.as_str(),
                        contenders[0].reveals.as_slice(),
                    ),
                    (
                        contenders[1].name.as_str(),
                        contenders[1].reveals.as_slice(),
                    ),
                ],
            );
            ([Some(a), Some(b)], void)
        }
        (a, b) => {
            let why = [("A", &a), ("B", &b)]
                .iter()
                .find_map(|(side, r)| r.as_ref().err().map(|e| format!("contender {side}: {e}")))
                .unwrap_or_default();
            tracing::warn!(battle = id, %why, "an arena contender failed");
            (
                [a.ok(), b.ok()],
                Some(format!("a contender could not answer ({why})")),
            )
        }
    };
    // Judged once, off the async threads: a spatial plan runs the physics, a chess move a search.
    let (arena, seed) = (prompt.arena, prompt.seed);
    let to_judge = answers.clone();
    let judged = tokio::task::spawn_blocking(move || {
        to_judge.map(|answer| answer.map(|text| answer::judge(arena, seed, &text)))
    })
    .await
    .unwrap_or_default();
    let stored = store::finish_battle(
        &state.db,
        id,
        [answers[0].as_deref(), answers[1].as_deref()],
        [judged[0].as_deref(), judged[1].as_deref()],
        void.as_deref(),
    )
    .await;
    if let Err(e) = stored {
        tracing::warn!(battle = id, error = %e, "an arena battle's answers were not stored");
    }
}

/// Both answers of one battle as they are written, sent to the pages watching it. Events go to
/// this instance's hub only: they are as many as the answers' tokens, too many for the database's
/// notification channel, and the page polls for the finished battle on any instance.
struct LiveAnswers {
    hub: crate::live::Hub,
    topic: Topic,
    battle: i64,
    texts: Mutex<[String; 2]>,
}

impl LiveAnswers {
    fn new(hub: crate::live::Hub, battle: i64) -> Self {
        Self {
            hub,
            topic: Topic::Battle { battle },
            battle,
            texts: Mutex::default(),
        }
    }

    fn update(&self, side: usize, text: String) {
        let answers = {
            let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
            if texts[side] == text {
                return;
            }
            texts[side] = text;
            texts.clone()
        };
        if self.hub.is_watched(&self.topic) {
            let event = LiveEvent::BattleText(BattleTextEvent {
                battle: self.battle,
                answers,
            });
            self.hub.deliver(&self.topic, &event);
        }
    }
}
