//! The catbot arena over HTTP with the embedded model answering: a battle from deal to leaderboard
//! and export, and each integrity rule's documented outcome — a vote before the answers are in, a
//! double vote, someone else's vote, a vote too fast to be read, a long same-side run, a burst from
//! one voter and from one address, and an answer that gives its contender away.

use std::time::{Duration, Instant};

use lachesis::arena::settings::ArenaSettings;
use lachesis_shared::arena::{BattleState, BattleView, LeaderboardView, VoteChoice};
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "arena-admin-token";

async fn arena_app(settings: ArenaSettings) -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.api_token = Some(ADMIN.into());
    config.model = Some(lachesis_tests::model_path());
    config.arena = settings;
    TestApp::spawn_with(config).await
}

async fn add_contender(app: &TestApp, body: Value) {
    let (status, created) = app
        .call(
            Caller::Token(ADMIN),
            Method::POST,
            "/api/arena/contenders",
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
}

/// A request as an anonymous visitor holding `token`.
async fn as_visitor(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = app
        .client
        .request(method, app.url(path))
        .header("x-arena-visitor", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    let text = response.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn new_visitor(app: &TestApp) -> String {
    let (status, body) = app
        .call(Caller::Nobody, Method::POST, "/api/arena/visitors", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["token"].as_str().expect("a token").to_string()
}

fn battle(value: Value) -> BattleView {
    serde_json::from_value(value).expect("a battle")
}

async fn deal(app: &TestApp, visitor: &str) -> BattleView {
    let (status, body) = as_visitor(
        app,
        visitor,
        Method::POST,
        "/api/arena/battles",
        Some(json!({"arena": "catbot"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    battle(body)
}

/// Polls until the contenders have answered (or the battle was voided).
async fn answered(app: &TestApp, id: i64) -> BattleView {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let b = battle(app.get(&format!("/api/arena/battles/{id}")).await);
        if b.state != BattleState::Answering {
            return b;
        }
        assert!(
            Instant::now() < deadline,
            "battle {id} never finished answering"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn vote(app: &TestApp, visitor: &str, id: i64, choice: &str) -> (StatusCode, Value) {
    as_visitor(
        app,
        visitor,
        Method::POST,
        &format!("/api/arena/battles/{id}/vote"),
        Some(json!({"choice": choice, "reason": "kinder to the cat"})),
    )
    .await
}

/// Deals, waits for the answers, waits out the minimum reading time, votes.
async fn play(app: &TestApp, visitor: &str, choice: &str, read_for: Duration) -> BattleView {
    let dealt = deal(app, visitor).await;
    let ready = answered(app, dealt.id).await;
    assert_eq!(ready.state, BattleState::Ready, "{ready:?}");
    tokio::time::sleep(read_for).await;
    let (status, body) = vote(app, visitor, dealt.id, choice).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    battle(body)
}

async fn board(app: &TestApp) -> LeaderboardView {
    serde_json::from_value(app.get("/api/arena/leaderboard?arena=catbot").await).unwrap()
}

#[tokio::test]
async fn a_catbot_battle_goes_from_deal_to_leaderboard_and_every_integrity_rule_holds() {
    let settings = ArenaSettings {
        min_vote: Duration::from_millis(1500),
        same_side_run: 3,
        max_answer_tokens: 48,
        ..ArenaSettings::default()
    };
    let app = arena_app(settings).await;
    let owner = sign_up(&app, "/api/auth/setup", "tabby", "cat-lovers").await;

    // Only the admin enters contenders; a duplicate name is refused.
    let entry = json!({"name": "Whiskerbot Alpha",
        "policy": {"kind": "embedded", "temperature": 0.0}});
    let (status, _) = app
        .call(
            Caller::Session(&owner),
            Method::POST,
            "/api/arena/contenders",
            Some(entry.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    add_contender(&app, entry.clone()).await;
    let (status, _) = app
        .call(
            Caller::Token(ADMIN),
            Method::POST,
            "/api/arena/contenders",
            Some(entry),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    add_contender(
        &app,
        json!({"name": "Whiskerbot Beta", "policy": {"kind": "embedded", "temperature": 0.8,
            "system": "Answer in one short sentence."}}),
    )
    .await;

    // No voter, no battle; a team's API token is a program, not a voter.
    let (status, _) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/arena/battles",
            Some(json!({"arena": "catbot"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let program = app
        .new_token(&owner, "cat-lovers", json!({"name": "bot"}))
        .await;
    let (status, _) = app
        .call(
            Caller::Token(&program),
            Method::POST,
            "/api/arena/battles",
            Some(json!({"arena": "catbot"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A signed-in person is a voter of their own.
    let (status, body) = app
        .call(
            Caller::Session(&owner),
            Method::POST,
            "/api/arena/battles",
            Some(json!({"arena": "catbot"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let visitor = new_visitor(&app).await;
    let dealt = deal(&app, &visitor).await;
    assert_eq!(dealt.state, BattleState::Answering);
    assert!(dealt.prompt.contains("The cat"), "{}", dealt.prompt);
    assert_eq!(
        (dealt.contender_a.clone(), dealt.answer_a.clone()),
        (None, None)
    );
    // A vote before both answers are in is refused and changes nothing.
    let (status, body) = vote(&app, &visitor, dealt.id, "a").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("still answering"), "{body}");

    let ready = answered(&app, dealt.id).await;
    assert_eq!(ready.state, BattleState::Ready, "{ready:?}");
    assert!(ready.answer_a.is_some() && ready.answer_b.is_some());
    assert_eq!(ready.contender_a, None, "anonymous until the vote");
    // Someone else may not vote on this battle.
    let stranger = new_visitor(&app).await;
    let (status, _) = vote(&app, &stranger, dealt.id, "b").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    tokio::time::sleep(Duration::from_millis(1600)).await;
    // A reason over 1,000 characters is refused and leaves the battle open to a proper vote.
    let (status, body) = as_visitor(
        &app,
        &visitor,
        Method::POST,
        &format!("/api/arena/battles/{}/vote", dealt.id),
        Some(json!({"choice": "a", "reason": "purr ".repeat(201)})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let still: BattleView =
        serde_json::from_value(app.get(&format!("/api/arena/battles/{}", dealt.id)).await).unwrap();
    assert_eq!((still.state, still.vote), (BattleState::Ready, None));
    let (status, body) = vote(&app, &visitor, dealt.id, "a").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let voted = battle(body);
    assert_eq!(voted.state, BattleState::Voted);
    assert_eq!(voted.vote, Some(VoteChoice::A));
    assert_eq!(voted.excluded, None);
    // The cat's own verdict on each answer comes with the reveal, never before.
    assert_eq!(ready.judged, None);
    let judged = voted.judged.clone().expect("judged once voted");
    assert!(
        judged.iter().all(|j| j.starts_with("the cat ")),
        "{judged:?}"
    );
    let mut names = [voted.contender_a.unwrap(), voted.contender_b.unwrap()];
    names.sort();
    assert_eq!(names, ["Whiskerbot Alpha", "Whiskerbot Beta"]);
    // A second vote on the same battle is refused.
    let (status, body) = vote(&app, &visitor, dealt.id, "b").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("already"), "{body}");

    let after_one = board(&app).await;
    assert_eq!((after_one.counted_votes, after_one.excluded_votes), (1, 0));
    assert_eq!(after_one.rows.len(), 2);
    assert!(after_one.rows[0].rating > after_one.rows[1].rating);

    // Voting within the minimum reading time: recorded, published, not counted.
    let fast = play(&app, &visitor, "tie", Duration::ZERO).await;
    assert!(
        fast.excluded
            .as_deref()
            .unwrap_or("")
            .starts_with("too fast"),
        "{fast:?}"
    );
    // The run length is three: the tie above broke the earlier run, so two more A votes count and
    // the third A in a row does not.
    let reading = Duration::from_millis(1600);
    assert_eq!(play(&app, &visitor, "a", reading).await.excluded, None);
    assert_eq!(play(&app, &visitor, "a", reading).await.excluded, None);
    let third = play(&app, &visitor, "a", reading).await;
    assert!(
        third
            .excluded
            .as_deref()
            .unwrap_or("")
            .starts_with("same side"),
        "{third:?}"
    );
    let later = board(&app).await;
    assert_eq!((later.counted_votes, later.excluded_votes), (3, 2));

    // Everything is published, the excluded votes flagged.
    let export = app.get_text("/api/arena/battles.jsonl?arena=catbot").await;
    let lines: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{export}");
    assert_eq!(lines[0]["battle"], dealt.id);
    assert_eq!(lines[0]["winner"], "model_a");
    assert_eq!(lines[0]["excluded"], Value::Null);
    assert_eq!(lines[1]["winner"], "tie");
    assert!(
        lines[1]["excluded"]
            .as_str()
            .unwrap()
            .starts_with("too fast")
    );
    let flagged = lines.iter().filter(|l| !l["excluded"].is_null()).count();
    assert_eq!(flagged, 2);

    // The same contenders in the arithmetic arena: its own board, its own judge.
    let (status, body) = as_visitor(
        &app,
        &visitor,
        Method::POST,
        "/api/arena/battles",
        Some(json!({"arena": "arithmetic"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sum = battle(body);
    assert!(sum.prompt.starts_with("What is "), "{}", sum.prompt);
    assert_eq!(answered(&app, sum.id).await.state, BattleState::Ready);
    tokio::time::sleep(reading).await;
    let (status, body) = vote(&app, &visitor, sum.id, "b").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let judged = battle(body).judged.expect("judged once voted");
    for verdict in &judged {
        assert!(
            ["correct", "wrong", "no final answer"]
                .iter()
                .any(|p| verdict.starts_with(p)),
            "{judged:?}"
        );
    }
    let sums: LeaderboardView =
        serde_json::from_value(app.get("/api/arena/leaderboard?arena=arithmetic").await).unwrap();
    assert_eq!(sums.counted_votes, 1);
    assert_eq!(
        board(&app).await.counted_votes,
        3,
        "the catbot board is its own"
    );
}

#[tokio::test]
async fn bursts_are_limited_per_voter_and_per_address() {
    let settings = ArenaSettings {
        votes: lachesis::hosting::rate::Rate {
            per_minute: 3,
            burst: 3,
            remember: 100,
        },
        address_votes: lachesis::hosting::rate::Rate {
            per_minute: 5,
            burst: 5,
            remember: 100,
        },
        concurrent_battles: 1,
        max_answer_tokens: 32,
        ..ArenaSettings::default()
    };
    let app = arena_app(settings).await;
    let first = new_visitor(&app).await;
    let second = new_visitor(&app).await;
    // Votes on a battle that does not exist still count against the allowance.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(vote(&app, &first, 999_999, "a").await.0);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    // Another voter at the same address has two left of the address's five.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let (status, body) = vote(&app, &second, 999_999, "a").await;
        statuses.push((status, body.to_string().contains("this address")));
    }
    assert_eq!(
        statuses,
        [
            (StatusCode::NOT_FOUND, false),
            (StatusCode::NOT_FOUND, false),
            (StatusCode::TOO_MANY_REQUESTS, true)
        ]
    );
    let response = app
        .client
        .post(app.url("/api/arena/battles/1/vote"))
        .header("x-arena-visitor", &second)
        .json(&json!({"choice": "a"}))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("retry-after"));
    // A forged visitor token is nobody.
    let (status, _) = vote(&app, "not-a-token", 1, "a").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // One battle answered at a time, server-wide: a second voter waits for the first's answers.
    for name in ["Calico", "Siamese"] {
        add_contender(
            &app,
            json!({"name": name, "policy": {"kind": "embedded", "temperature": 0.0}}),
        )
        .await;
    }
    let dealt = deal(&app, &first).await;
    let (status, body) = as_visitor(
        &app,
        &second,
        Method::POST,
        "/api/arena/battles",
        Some(json!({"arena": "catbot"})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    answered(&app, dealt.id).await;
    deal(&app, &second).await;
}

/// One address asking for voting tokens in a loop gets its hourly allowance and then 429s, and
/// the refused requests store no visitor.
#[tokio::test]
async fn a_flood_of_visitor_tokens_from_one_address_is_cut_off() {
    let settings = ArenaSettings {
        visitors: lachesis::hosting::rate::Rate {
            per_minute: 1,
            burst: 3,
            remember: 100,
        },
        ..ArenaSettings::default()
    };
    let app = arena_app(settings).await;
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let (status, _) = app
            .call(Caller::Nobody, Method::POST, "/api/arena/visitors", None)
            .await;
        statuses.push(status);
    }
    let granted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(granted, 3, "{statuses:?}");
    assert!(
        statuses[3..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let db = lachesis::db::connect(&app.database_url, 1).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM arena_visitors")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(stored, 3);
}

#[tokio::test]
async fn an_answer_that_gives_a_contender_away_voids_the_battle() {
    let app = arena_app(ArenaSettings {
        max_answer_tokens: 48,
        ..ArenaSettings::default()
    })
    .await;
    add_contender(
        &app,
        json!({"name": "Plain", "policy": {"kind": "embedded", "temperature": 0.0}}),
    )
    .await;
    // Words any English answer about a cat uses: declared as this contender's giveaways, they
    // make every answer "reveal" it.
    add_contender(
        &app,
        json!({"name": "Tattletale", "policy": {"kind": "embedded", "temperature": 0.0},
            "reveals": ["the", "a", "you", "your", "cat", "to", "and", "is", "i", "it"]}),
    )
    .await;
    let visitor = new_visitor(&app).await;
    let dealt = deal(&app, &visitor).await;
    let done = answered(&app, dealt.id).await;
    assert_eq!(done.state, BattleState::Void, "{done:?}");
    assert!(
        done.void_reason
            .as_deref()
            .unwrap()
            .contains("gives a contender away"),
        "{done:?}"
    );
    assert!(done.contender_a.is_some(), "a void battle reveals its pair");
    let (status, body) = vote(&app, &visitor, dealt.id, "a").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("voided"), "{body}");
    let lines = app.get_text("/api/arena/battles.jsonl").await;
    let line: Value = serde_json::from_str(lines.trim()).unwrap();
    assert_eq!(line["void"], true);
    assert_eq!(line["winner"], Value::Null);
    assert_eq!(board(&app).await.counted_votes, 0);
}
