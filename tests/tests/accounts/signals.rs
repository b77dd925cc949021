//! The human signals gathered outside the queues — chess move ratings, spatial demonstrations,
//! caretaker sessions — export in the queue's ratings format, page by page, each person's own.

use lachesis::envs::spatial::generate::generate;
use lachesis::envs::spatial::solve::solve;
use lachesis_tests::{Caller, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Session, auth_app, sign_up};

async fn post(app: &TestApp, who: &Session, path: &str, body: Value) -> Value {
    let (status, answer) = app
        .call(Caller::Session(who), Method::POST, path, Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    answer
}

/// One page of `source`: its lines and the next page's cursor.
async fn page(
    app: &TestApp,
    who: Option<&Session>,
    source: &str,
    query: &str,
) -> (StatusCode, Vec<Value>, Option<String>) {
    let mut request = app
        .client
        .get(app.url(&format!("/api/feedback/signals/{source}.jsonl{query}")));
    if let Some((cookie, _)) = who {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let next = response
        .headers()
        .get("x-next-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = response.text().await.unwrap();
    let lines = if status == StatusCode::OK {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        Vec::new()
    };
    (status, lines, next)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chess_ratings_demonstrations_and_caretaker_sessions_export_as_ratings() {
    let app = auth_app().await;
    let ann = sign_up(&app, "/api/auth/setup", "ann", "labelers").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "bobs").await;

    // Two chess games where the agent opens; ann resigns each and rates the agent's first move.
    for rating in [2, 5] {
        let game = post(
            &app,
            &ann,
            "/api/chess/games",
            json!({"agent_side": "white"}),
        )
        .await;
        let id = game["id"].as_str().unwrap().to_string();
        post(
            &app,
            &ann,
            &format!("/api/chess/games/{id}/resign"),
            json!({}),
        )
        .await;
        let body = json!({"ply": 0, "rating": rating});
        post(&app, &ann, &format!("/api/chess/games/{id}/ratings"), body).await;
    }
    // A solved Padres task.
    let solution = solve(&generate(17, 2));
    let body = json!({"seed": 17, "difficulty": 2, "actions": solution.actions});
    let attempt = post(&app, &ann, "/api/spatial/attempts", body).await;
    // A caretaker session played to its verdict.
    let session = post(
        &app,
        &ann,
        "/api/cats/sessions",
        json!({"role": "caretaker", "seed": 7}),
    )
    .await;
    let turns = format!(
        "/api/cats/sessions/{}/turns",
        session["id"].as_str().unwrap()
    );
    let body = json!({"turn": {"speaker": "caretaker", "text": "I fill her water bowl."},
        "finish": true});
    let finished = post(&app, &ann, &turns, body).await;

    // Chess: the agent's opening move from the starting position, rated as ann rated it; one
    // line a page when asked, the cursor leading to the next.
    let (status, first, next) = page(&app, Some(&ann), "chess-move-ratings", "?limit=1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first.len(), 1);
    assert!(
        first[0]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("rnbqkbnr/pppppppp/8/8/8/8/")
    );
    assert_eq!(
        (first[0]["score"].clone(), first[0]["annotator"].clone()),
        (json!(2), json!("ann"))
    );
    assert!(first[0]["answer"].as_str().is_some_and(|a| !a.is_empty()));
    let next = next.expect("a second page");
    let (_, second, _) = page(
        &app,
        Some(&ann),
        "chess-move-ratings",
        &format!("?limit=1&after={next}"),
    )
    .await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["score"], 5);
    let (_, all, more) = page(&app, Some(&ann), "chess-move-ratings", "").await;
    assert_eq!((all.len(), more), (2, None));

    // Spatial: the task's text as the prompt, the actions as the answer, the checker's score.
    let (_, demos, _) = page(&app, Some(&ann), "spatial-demonstrations", "").await;
    assert_eq!(demos.len(), 1);
    assert_eq!(
        demos[0]["prompt"],
        lachesis_shared::spatial::describe_task(&generate(17, 2))
    );
    let score = demos[0]["score"].as_f64().unwrap();
    let checked = attempt["verdict"]["score"].as_f64().unwrap();
    assert!((score - checked).abs() < 1e-6, "{score} vs {checked}");

    // Cats: the cat's opening as the prompt, the caretaker's turns (and the cat's replies between
    // them) as the answer, the verdict's score.
    let (_, sessions, _) = page(&app, Some(&ann), "cat-sessions", "").await;
    assert_eq!(sessions.len(), 1);
    assert!(
        sessions[0]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("The cat: ")
    );
    assert_eq!(sessions[0]["answer"], "Caretaker: I fill her water bowl.");
    assert_eq!(sessions[0]["score"], finished["verdict"]["score"]);

    // Bob has none of ann's; nobody signed in has nothing; bad requests change nothing.
    for source in [
        "chess-move-ratings",
        "spatial-demonstrations",
        "cat-sessions",
    ] {
        let (status, lines, _) = page(&app, Some(&bob), source, "").await;
        assert_eq!((status, lines.len()), (StatusCode::OK, 0), "{source}");
        let (status, _, _) = page(&app, None, source, "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{source}");
    }
    for (source, query, expected) in [
        (
            "chess-move-ratings",
            "?after=nonsense",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "cat-sessions",
            "?limit=1001",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("cat-sessions", "?limit=0", StatusCode::UNPROCESSABLE_ENTITY),
        ("passwords", "", StatusCode::NOT_FOUND),
    ] {
        let (status, _, _) = page(&app, Some(&ann), source, query).await;
        assert_eq!(status, expected, "{source}{query}");
    }
}
