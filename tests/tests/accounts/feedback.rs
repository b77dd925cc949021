//! The feedback queue over HTTP: a team opens queues, fills them, and its members judge the items
//! with the overlap respected and no item given to a person twice; agreement is computed from
//! what they said, and the exports carry it in the shapes trainers read. Outsiders see nothing.

use lachesis_shared::feedback::{AgreementReport, ItemToJudge, QueueView};
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn add_member(app: &TestApp, owner: &(String, String), user: &str, role: &str) {
    let (status, body) = app
        .call(
            Caller::Session(owner),
            Method::POST,
            "/api/teams/labelers/members",
            Some(json!({"username": user, "role": role})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn next(app: &TestApp, who: &(String, String), queue: i64) -> Option<ItemToJudge> {
    let (status, body) = app
        .call(
            Caller::Session(who),
            Method::GET,
            &format!("/api/feedback/queues/{queue}/next"),
            None,
        )
        .await;
    match status {
        StatusCode::OK => Some(serde_json::from_value(body).unwrap()),
        StatusCode::NO_CONTENT => None,
        other => panic!("next: {other} {body}"),
    }
}

async fn judge(app: &TestApp, who: &(String, String), item: i64, judgement: Value) -> StatusCode {
    app.call(
        Caller::Session(who),
        Method::POST,
        &format!("/api/feedback/items/{item}/judgements"),
        Some(json!({ "judgement": judgement })),
    )
    .await
    .0
}

/// The queues `who` sees.
async fn queues(app: &TestApp, who: &(String, String)) -> Vec<QueueView> {
    let (status, body) = app
        .call(
            Caller::Session(who),
            Method::GET,
            "/api/feedback/queues",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).unwrap()
}

/// An export of `queue` (`pairs` or `ratings`), read by `who`, one JSON value a line.
async fn export(app: &TestApp, who: &(String, String), queue: i64, which: &str) -> Vec<Value> {
    app.client
        .get(app.url(&format!("/api/feedback/queues/{queue}/{which}.jsonl")))
        .header("cookie", &who.0)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn open_queue(app: &TestApp, owner: &(String, String), body: Value) -> QueueView {
    let (status, created) = app
        .call(
            Caller::Session(owner),
            Method::POST,
            "/api/feedback/queues",
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    serde_json::from_value(created).unwrap()
}

#[tokio::test]
async fn members_work_through_a_queue_with_overlap_and_their_agreement_is_measured() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let ann = sign_up(&app, "/api/auth/setup", "ann", "labelers").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "bobs").await;
    let cy = sign_up(&app, "/api/auth/register", "cy", "cys").await;
    let eve = sign_up(&app, "/api/auth/register", "eve", "eves").await;
    add_member(&app, &ann, "bob", "viewer").await;
    add_member(&app, &ann, "cy", "member").await;

    let rate = open_queue(
        &app,
        &ann,
        json!({"team": "labelers", "name": "helpfulness", "kind": "rate",
            "guidelines": "5: solves the task; 1: useless.", "overlap": 2}),
    )
    .await;
    // Items must fit the task: a rating item has one answer.
    let (status, body) = app
        .call(
            Caller::Session(&ann),
            Method::POST,
            &format!("/api/feedback/queues/{}/items", rate.id),
            Some(json!({"items": [{"prompt": "p", "answers": ["a", "b"]}]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let items: Vec<Value> = (0..3)
        .map(
            |k| json!({"prompt": format!("What is {k} + {k}?"), "answers": [format!("{}", 2 * k)]}),
        )
        .collect();
    let (status, body) = app
        .call(
            Caller::Session(&cy),
            Method::POST,
            &format!("/api/feedback/queues/{}/items", rate.id),
            Some(json!({ "items": items })),
        )
        .await;
    assert_eq!((status, body["added"].as_u64()), (StatusCode::OK, Some(3)));
    // A viewer judges but does not fill; an outsider does not even see the queue.
    let (status, _) = app
        .call(
            Caller::Session(&bob),
            Method::POST,
            &format!("/api/feedback/queues/{}/items", rate.id),
            Some(json!({"items": [{"prompt": "p", "answers": ["a"]}]})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app
        .call(
            Caller::Session(&eve),
            Method::GET,
            &format!("/api/feedback/queues/{}/next", rate.id),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = app
        .call(
            Caller::Session(&eve),
            Method::GET,
            "/api/feedback/queues",
            None,
        )
        .await;
    assert_eq!(listed, json!([]));

    // Ann, Bob and Cy each take items until none is left for them: with an overlap of 2 and
    // three items, six judgements in all, nobody judging one item twice.
    let scores = [
        ("ann", &ann, [5, 4, 1]),
        ("bob", &bob, [5, 3, 2]),
        ("cy", &cy, [4, 4, 1]),
    ];
    let mut given = 0;
    let mut seen: Vec<(&str, i64)> = Vec::new();
    loop {
        let mut progressed = false;
        for (name, who, wanted) in &scores {
            let Some(item) = next(&app, who, rate.id).await else {
                continue;
            };
            assert!(
                !seen.contains(&(name, item.item)),
                "{name} got item {} twice",
                item.item
            );
            // "What is K + K?": K picks this person's score for the item.
            let score = wanted[item.prompt[8..9].parse::<usize>().unwrap()];
            assert_eq!(
                judge(
                    &app,
                    who,
                    item.item,
                    json!({"kind": "rate", "score": score})
                )
                .await,
                StatusCode::OK
            );
            // The same item again is refused.
            assert_eq!(
                judge(&app, who, item.item, json!({"kind": "rate", "score": 1})).await,
                StatusCode::CONFLICT
            );
            seen.push((name, item.item));
            given += 1;
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    assert_eq!(given, 6, "{seen:?}");
    let view = queues(&app, &ann).await;
    assert_eq!((view[0].judgements, view[0].complete_items), (6, 3));
    // An outsider's judgement finds no item (it is not theirs to see).
    let first = seen[0].1;
    assert_eq!(
        judge(&app, &eve, first, json!({"kind": "rate", "score": 3})).await,
        StatusCode::NOT_FOUND
    );

    let (_, report) = app
        .call(
            Caller::Session(&bob),
            Method::GET,
            &format!("/api/feedback/queues/{}/agreement", rate.id),
            None,
        )
        .await;
    let report: AgreementReport = serde_json::from_value(report).unwrap();
    assert_eq!(report.items.len(), 3);
    assert!(report.alpha.is_some(), "{report:?}");
    let judged: usize = report.annotators.iter().map(|a| a.judgements).sum();
    assert_eq!(judged, 6);
    let lines = export(&app, &ann, rate.id, "ratings").await;
    assert_eq!(lines.len(), 6);
    assert!(
        lines
            .iter()
            .all(|l| (1..=5).contains(&l["score"].as_u64().unwrap()))
    );

    // A comparison queue: two members agree on one pair and split on the other.
    let compare = open_queue(
        &app,
        &ann,
        json!({"team": "labelers", "name": "pairs", "kind": "compare",
            "guidelines": "Prefer the correct, shorter answer.", "overlap": 2}),
    )
    .await;
    let (status, _) = app
        .call(
            Caller::Session(&ann),
            Method::POST,
            &format!("/api/feedback/queues/{}/items", compare.id),
            Some(json!({"items": [
                {"prompt": "2+2?", "answers": ["4", "5"]},
                {"prompt": "3+3?", "answers": ["six", "6"]}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    for (who, choices) in [(&ann, ["a", "b"]), (&cy, ["a", "a"])] {
        for choice in choices {
            let item = next(&app, who, compare.id).await.expect("an item");
            assert_eq!(item.answers.len(), 2);
            // Added through the route: it takes verdicts until it is closed.
            assert_eq!(item.closes_in_ms, None);
            let bad = judge(&app, who, item.item, json!({"kind": "rate", "score": 3})).await;
            assert_eq!(bad, StatusCode::UNPROCESSABLE_ENTITY);
            let status = judge(
                &app,
                who,
                item.item,
                json!({"kind": "compare", "choice": choice}),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
        }
        assert!(next(&app, who, compare.id).await.is_none());
    }
    let (_, report) = app
        .call(
            Caller::Session(&ann),
            Method::GET,
            &format!("/api/feedback/queues/{}/agreement", compare.id),
            None,
        )
        .await;
    let report: AgreementReport = serde_json::from_value(report).unwrap();
    assert_eq!(report.kappas.len(), 1);
    assert_eq!(report.kappas[0].shared, 2);
    let agreements: Vec<f64> = report.items.iter().map(|i| i.agreement).collect();
    assert_eq!(agreements, [1.0, 0.0]);
    // Three judgements chose A, one B, so there is variation; one pair agrees, one does not.
    // By hand: values {0,0} and {1,0}: n = 4, D_o = (0 + 2·1/1)/4 = 0.5; counts 0:3, 1:1,
    // D_e = 2·3·1/(4·3) = 0.5; alpha = 1 - 0.5/0.5 = 0.
    assert!(report.alpha.unwrap().abs() < 1e-12, "{report:?}");
    let pairs = export(&app, &ann, compare.id, "pairs").await;
    assert_eq!(pairs.len(), 4);
    assert!(pairs.contains(&json!({"prompt": "2+2?", "chosen": "4", "rejected": "5"})));
    assert!(pairs.contains(&json!({"prompt": "3+3?", "chosen": "6", "rejected": "six"})));
}

/// A queue holds at most `--feedback-queue-items` items (an addition that would pass it adds
/// nothing), and an export streams every judgement however many pages they fill.
#[tokio::test]
async fn a_queue_is_capped_and_its_exports_page_through_every_judgement() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.hosting.feedback_queue_items = 60;
    let app = TestApp::spawn_with(config).await;
    let ann = sign_up(&app, "/api/auth/setup", "ann", "labelers").await;
    let rate = open_queue(
        &app,
        &ann,
        json!({"team": "labelers", "name": "bulk", "kind": "rate",
            "guidelines": "5: right; 1: wrong.", "overlap": 1}),
    )
    .await;
    let path = format!("/api/feedback/queues/{}/items", rate.id);
    let add = |from: usize, count: usize| {
        let items: Vec<Value> = (from..from + count)
            .map(|k| json!({"prompt": format!("item {k}"), "answers": [format!("answer {k}")]}))
            .collect();
        let (app, ann, path) = (&app, &ann, &path);
        async move {
            app.call(
                Caller::Session(ann),
                Method::POST,
                path,
                Some(json!({ "items": items })),
            )
            .await
        }
    };
    assert_eq!(add(0, 50).await.0, StatusCode::OK);
    let (status, body) = add(50, 11).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.to_string().contains("--feedback-queue-items"),
        "{body}"
    );
    assert_eq!(add(50, 10).await.0, StatusCode::OK, "exactly up to the cap");
    let view = queues(&app, &ann).await;
    assert_eq!(view[0].items, 60, "the refused addition added nothing");
    assert_eq!(add(60, 1).await.0, StatusCode::CONFLICT);

    // Every item judged once: 60 judgements, more than one page of the export.
    let mut judged = 0;
    while let Some(item) = next(&app, &ann, rate.id).await {
        let score = 1 + (item.item % 5);
        assert_eq!(
            judge(
                &app,
                &ann,
                item.item,
                json!({"kind": "rate", "score": score})
            )
            .await,
            StatusCode::OK
        );
        judged += 1;
    }
    assert_eq!(judged, 60);
    let lines = export(&app, &ann, rate.id, "ratings").await;
    assert_eq!(lines.len(), 60);
    let items: std::collections::BTreeSet<i64> =
        lines.iter().map(|l| l["item"].as_i64().unwrap()).collect();
    assert_eq!(
        items.len(),
        60,
        "each judgement once, none lost between pages"
    );
    for line in &lines {
        let item = line["item"].as_i64().unwrap();
        assert_eq!(line["score"], 1 + (item % 5));
    }
}
