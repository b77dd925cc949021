//! Accounts on a publicly hosted server with open registration, played against the real server and
//! Postgres: sign-up floods, closed and invite-only registration, the first-run flow after the
//! owner exists, expired and unscoped tokens on the model's routes, the session cookie and idle
//! sessions, and overlong names.

mod hosted;

use futures::StreamExt;
use hosted::{Hosted, PASSWORD, Session, account};
use lachesis::auth::policy::{AccountArgs, RegistrationMode};
use lachesis_tests::registration;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn a_flood_of_sign_ups_from_one_address_creates_only_the_allowed_accounts() {
    let server = Hosted::open().await;
    server.first_owner().await;
    let attempts = futures::stream::iter(0..500)
        .map(|i| {
            let server = &server;
            async move {
                let response = server
                    .client
                    .post(format!("{}/api/auth/register", server.base))
                    .json(&account(&format!("bot{i}")))
                    .send()
                    .await
                    .unwrap();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
                (response.status(), retry_after)
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let created = attempts
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .count();
    let throttled: Vec<u64> = attempts
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .map(|(_, retry)| retry.expect("a 429 says when to retry"))
        .collect();
    assert_eq!(created, 10, "the default allows 10 accounts an hour");
    assert_eq!(throttled.len(), 490);
    assert!(throttled.iter().all(|s| (1..=3600).contains(s)));
    assert_eq!(server.users().await, 11, "the owner and ten bots");
    // Only the owner's and the ten allowed passwords were hashed, never two at once.
    assert_eq!(server.accounts.hashing.runs(), 11);
    assert!(server.accounts.hashing.most_at_once() <= 2);
}

#[tokio::test]
async fn the_sign_up_limit_is_a_flag() {
    let server = Hosted::start(AccountArgs {
        registrations_per_hour: Some(2),
        ..AccountArgs::default()
    })
    .await;
    let mut statuses = Vec::new();
    for name in ["one", "two", "three"] {
        let (status, _) = server
            .call(
                Method::POST,
                "/api/auth/register",
                None,
                None,
                Some(account(name)),
            )
            .await;
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

#[tokio::test]
async fn closed_registration_refuses_sign_up_but_not_the_first_owner() {
    let server = Hosted::start(AccountArgs {
        registration: Some(RegistrationMode::Closed),
        ..AccountArgs::default()
    })
    .await;
    let (_, state) = server
        .call(Method::GET, "/api/auth/state", None, None, None)
        .await;
    assert_eq!(state["registration"], "closed");
    server.first_owner().await;
    let (status, body) = server
        .call(
            Method::POST,
            "/api/auth/register",
            None,
            None,
            Some(account("mallory")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(server.users().await, 1);
    assert_eq!(
        server.accounts.hashing.runs(),
        1,
        "only the owner's password"
    );
}

#[tokio::test]
async fn invite_registration_needs_a_live_code_and_each_code_works_once() {
    let server = Hosted::start(AccountArgs {
        registration: Some(RegistrationMode::Invite),
        ..AccountArgs::default()
    })
    .await;
    let owner = server.first_owner().await;
    let (_, state) = server
        .call(Method::GET, "/api/auth/state", None, None, None)
        .await;
    assert_eq!(state["registration"], "invite");
    let register = |name: &str, invite: Option<&str>| {
        let mut body = account(name);
        if let Some(code) = invite {
            body["invite"] = json!(code);
        }
        server.call(Method::POST, "/api/auth/register", None, None, Some(body))
    };
    assert_eq!(register("bob", None).await.0, StatusCode::FORBIDDEN);
    let forged = format!("inv_{}", "0".repeat(64));
    assert_eq!(
        register("bob", Some(&forged)).await.0,
        StatusCode::FORBIDDEN
    );

    let (status, invite) = server
        .call(
            Method::POST,
            "/api/teams/lab/invites",
            Some(&owner),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{invite}");
    let code = invite["code"].as_str().unwrap().to_string();
    assert!(invite["expires_at_ms"].as_i64().unwrap() > 0);
    let (bob, me) = server
        .sign_up(
            "/api/auth/register",
            json!({"username": "bob", "password": PASSWORD, "invite": code}),
        )
        .await;
    assert_eq!(me["teams"], json!([{"team": "lab", "role": "member"}]));
    let (reused, body) = register("carol", Some(&code)).await;
    assert_eq!(reused, StatusCode::FORBIDDEN, "{body}");
    // A member is not an owner: no invites of their own.
    let (status, _) = server
        .call(
            Method::POST,
            "/api/teams/lab/invites",
            Some(&bob),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Two sign-ups racing for one code: Postgres lets exactly one claim it.
    let (_, invite) = server
        .call(
            Method::POST,
            "/api/teams/lab/invites",
            Some(&owner),
            None,
            None,
        )
        .await;
    let code = invite["code"].as_str().unwrap();
    let (dave, erin) = tokio::join!(register("dave", Some(code)), register("erin", Some(code)));
    let mut outcomes = [dave.0, erin.0];
    outcomes.sort();
    assert_eq!(outcomes, [StatusCode::OK, StatusCode::FORBIDDEN]);

    assert_eq!(server.users().await, 3, "ada, bob and one of dave and erin");
    let (used,): (i64,) = sqlx::query_as("SELECT count(*) FROM invites WHERE used_at IS NOT NULL")
        .fetch_one(&server.db)
        .await
        .unwrap();
    assert_eq!(used, 2);
}

#[tokio::test]
async fn setup_after_the_owner_exists_answers_409_without_hashing() {
    let server = Hosted::open().await;
    server.first_owner().await;
    assert_eq!(server.accounts.hashing.runs(), 1);
    for i in 0..20 {
        let (status, _) = server
            .call(
                Method::POST,
                "/api/auth/setup",
                None,
                None,
                Some(json!({"username": format!("eve{i}"), "password": PASSWORD, "team": "x"})),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT);
    }
    assert_eq!(
        server.accounts.hashing.runs(),
        1,
        "no argon2 run for a refusal"
    );
    assert_eq!(server.users().await, 1);
}

#[tokio::test]
async fn expired_tokens_authenticate_as_nobody() {
    let server = Hosted::open().await;
    let owner = server.first_owner().await;
    let (lasting, info) = server
        .new_token(&owner, json!({"name": "lasting", "run": "r1"}))
        .await;
    assert_eq!(info["expires_at_ms"], Value::Null);
    let (expiring, info) = server
        .new_token(
            &owner,
            json!({"name": "expiring", "run": "r1", "expires_in_days": 1}),
        )
        .await;
    let lifetime =
        info["expires_at_ms"].as_i64().unwrap() - info["created_at_ms"].as_i64().unwrap();
    assert!((lifetime - 86_400_000).abs() <= 1, "{info}");
    for days in [0, 366] {
        let (status, _) = server
            .call(
                Method::POST,
                "/api/teams/lab/tokens",
                Some(&owner),
                None,
                Some(json!({"name": "x", "expires_in_days": days})),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{days} days");
    }
    // The day passes (before the token's first use, so no cached lookup hides it).
    sqlx::query(
        "UPDATE api_tokens SET created_at = now() - interval '2 days',
                               expires_at = now() - interval '1 day'
         WHERE name = 'expiring'",
    )
    .execute(&server.db)
    .await
    .unwrap();
    for (token, expected) in [
        (&expiring, StatusCode::UNAUTHORIZED),
        (&lasting, StatusCode::OK),
    ] {
        let (status, body) = server
            .call(
                Method::POST,
                "/register",
                None,
                Some(token),
                Some(registration(2)),
            )
            .await;
        assert_eq!(status, expected, "{body}");
    }
}

#[tokio::test]
async fn the_model_needs_a_token_with_the_inference_scope() {
    let server = Hosted::open().await;
    let owner = server.first_owner().await;
    let (plain, info) = server.new_token(&owner, json!({"name": "trainer"})).await;
    assert_eq!(info["inference"], false);
    let (scoped, info) = server
        .new_token(&owner, json!({"name": "sampler", "inference": true}))
        .await;
    assert_eq!(info["inference"], true);
    let models = "/v1/models";
    let (status, body) = server
        .call(Method::GET, models, None, Some(&plain), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.to_string().contains("inference scope"), "{body}");
    let (status, _) = server.call(Method::GET, models, None, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Past authentication: no model is loaded here, so the route itself answers 503.
    let (status, body) = server
        .call(Method::GET, models, None, Some(&scoped), None)
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    // A free account is no compute grant: a session alone does not reach the model.
    let (status, body) = server
        .call(Method::GET, models, Some(&owner), None, None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

#[tokio::test]
async fn the_session_cookie_is_host_prefixed_and_idle_sessions_end() {
    let server = Hosted::start(AccountArgs {
        session_idle_hours: Some(1),
        ..AccountArgs::default()
    })
    .await;
    let response = server
        .client
        .post(format!("{}/api/auth/setup", server.base))
        .json(&json!({"username": "ada", "password": PASSWORD, "team": "lab"}))
        .send()
        .await
        .unwrap();
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        set_cookie.starts_with("__Host-lachesis_session="),
        "{set_cookie}"
    );
    for attribute in ["Secure", "Path=/;", "HttpOnly", "SameSite=Strict"] {
        assert!(
            set_cookie.contains(attribute),
            "{set_cookie} lacks {attribute}"
        );
    }
    assert!(
        !set_cookie.to_lowercase().contains("domain="),
        "{set_cookie}"
    );
    let me: Value = response.json().await.unwrap();
    let session = Session {
        cookie: set_cookie.split(';').next().unwrap().to_string(),
        csrf: me["csrf_token"].as_str().unwrap().to_string(),
    };
    let me = || server.call(Method::GET, "/api/me", Some(&session), None, None);
    assert_eq!(me().await.0, StatusCode::OK);
    // The old cookie name is not read.
    let secret = session.cookie.split_once('=').unwrap().1;
    let renamed = Session {
        cookie: format!("lachesis_session={secret}"),
        csrf: session.csrf.clone(),
    };
    let (status, _) = server
        .call(Method::GET, "/api/me", Some(&renamed), None, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Used half an hour ago: still good, and the use is recorded (once, not on every request).
    let set_last_seen = |ago: &'static str| {
        sqlx::query("UPDATE sessions SET last_seen_at = now() - $1::interval")
            .bind(ago)
            .execute(&server.db)
    };
    let last_seen = || async {
        let (fresh, at): (bool, f64) = sqlx::query_as(
            "SELECT last_seen_at > now() - interval '1 minute',
                    extract(epoch FROM last_seen_at)::float8 FROM sessions",
        )
        .fetch_one(&server.db)
        .await
        .unwrap();
        (fresh, at)
    };
    set_last_seen("30 minutes").await.unwrap();
    assert_eq!(me().await.0, StatusCode::OK);
    let (fresh, refreshed_at) = last_seen().await;
    assert!(fresh, "a use refreshes last_seen_at");
    assert_eq!(me().await.0, StatusCode::OK);
    assert_eq!(
        last_seen().await.1,
        refreshed_at,
        "refreshed at most once a minute"
    );

    // Unused for longer than the idle timeout: refused, and the row is gone.
    set_last_seen("2 hours").await.unwrap();
    assert_eq!(me().await.0, StatusCode::UNAUTHORIZED);
    let (sessions,): (i64,) = sqlx::query_as("SELECT count(*) FROM sessions")
        .fetch_one(&server.db)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
}

#[tokio::test]
async fn names_are_length_capped_where_they_enter() {
    let server = Hosted::open().await;
    let owner = server.first_owner().await;
    let long = "a".repeat(65);
    let huge = "a".repeat(1 << 20);
    for username in [&long, &huge] {
        let (status, _) = server
            .call(
                Method::POST,
                "/api/auth/register",
                None,
                None,
                Some(account(username)),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    }
    let bodies = [
        (
            "/api/auth/register",
            json!({"username": "bob", "password": PASSWORD, "team": long}),
        ),
        ("/api/teams", json!({"name": long})),
        ("/api/teams/lab/tokens", json!({"name": "t".repeat(101)})),
        ("/api/teams/lab/tokens", json!({"name": "two\nlines"})),
        (
            "/api/teams/lab/members",
            json!({"username": long, "role": "viewer"}),
        ),
    ];
    for (path, body) in bodies {
        let (status, answer) = server
            .call(Method::POST, path, Some(&owner), None, Some(body))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {answer}");
    }
    let (status, _) = server
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            None,
            Some(json!({"username": huge, "password": PASSWORD})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(server.users().await, 1);
    assert_eq!(
        server.accounts.hashing.runs(),
        1,
        "nothing was hashed for them"
    );
}

#[tokio::test]
async fn one_person_owns_at_most_the_flagged_number_of_teams_even_when_racing() {
    let server = Hosted::start(AccountArgs {
        teams_per_user: Some(3),
        ..AccountArgs::default()
    })
    .await;
    // The owner's first team ("lab") counts; ten creations race for the two places left.
    let owner = server.first_owner().await;
    let attempts = futures::future::join_all((0..10).map(|i| {
        server.call(
            Method::POST,
            "/api/teams",
            Some(&owner),
            None,
            Some(json!({"name": format!("side{i}")})),
        )
    }))
    .await;
    let made = attempts
        .iter()
        .filter(|(status, _)| *status == StatusCode::OK)
        .count();
    assert_eq!(made, 2, "{attempts:?}");
    for (status, body) in attempts.iter().filter(|(s, _)| *s != StatusCode::OK) {
        assert_eq!(*status, StatusCode::CONFLICT, "{body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|m| m.contains("at most 3 teams")),
            "{body}"
        );
    }
    let (teams,): (i64,) = sqlx::query_as("SELECT count(*) FROM teams")
        .fetch_one(&server.db)
        .await
        .unwrap();
    assert_eq!(teams, 3, "refused creations left no team behind");
}
