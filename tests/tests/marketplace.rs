//! The judge marketplace over HTTP with accounts on: the platform's cards are listed to anyone with
//! their live statistics; a team lists its own card; only that team's owners reprice or unlist it;
//! bad listings are typed errors that change nothing.

use lachesis::marketplace::cards::store::Evaluation;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::AgentCard;
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn new_card(slug: &str, team: &str, price: i64) -> Value {
    json!({
        "slug": slug,
        "name": "Whisker Whisperer",
        "description": "Reads the tail and the ears.",
        "specialties": ["comfort"],
        "price": price,
        "team": team,
        "owner_wallet": "0x00000000000000000000000000000000000000AB",
        "judge": {"kind": "rubric", "lens": "Comfort"},
    })
}

async fn card(app: &TestApp, slug: &str) -> AgentCard {
    let (status, body) = app
        .call(
            Caller::Nobody,
            Method::GET,
            &format!("/api/marketplace/cards/{slug}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).expect("an AgentCard")
}

#[tokio::test]
async fn cards_are_public_and_only_their_owners_change_them() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;

    // Anyone sees the platform's seven cards, cheapest first, each at its own price, seven
    // specialties between them.
    let (status, listed) = app
        .call(Caller::Nobody, Method::GET, "/api/marketplace/cards", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let cards: Vec<AgentCard> = serde_json::from_value(listed).unwrap();
    let listing: Vec<(&str, i64)> = cards.iter().map(|c| (c.slug.as_str(), c.price.0)).collect();
    assert_eq!(
        listing,
        [
            ("llm-generalist", 1_000),
            ("play-therapist", 2_000),
            ("safety-inspector", 3_000),
            ("nutritionist", 4_000),
            ("feline-vet", 6_000),
            ("panel-chair", 12_000),
            ("llm-rigorous", 20_000),
        ]
    );
    let mut prices: Vec<i64> = cards.iter().map(|c| c.price.0).collect();
    prices.dedup();
    assert_eq!(
        prices.len(),
        cards.len(),
        "listed cheapest first, no two at one price"
    );
    let mut specialties: Vec<&String> = cards.iter().flat_map(|c| &c.specialties).collect();
    specialties.sort();
    specialties.dedup();
    assert_eq!(
        specialties,
        [
            "clarity",
            "comfort",
            "enrichment",
            "health",
            "nutrition",
            "reasoning",
            "safety"
        ],
    );
    assert!(
        cards
            .iter()
            .all(|c| c.owner_team.is_none() && c.stats.evaluations == 0)
    );

    let ada = sign_up(&app, "/api/auth/setup", "ada", "cats-inc").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "dogs-inc").await;

    // Listing needs a signed-in owner of the team named.
    let body = new_card("whisker", "cats-inc", 2_500);
    let (status, _) = app
        .call(
            Caller::Nobody,
            Method::POST,
            "/api/marketplace/cards",
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .call(
            Caller::Session(&bob),
            Method::POST,
            "/api/marketplace/cards",
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "bob is not in cats-inc");
    let (status, created) = app
        .call(
            Caller::Session(&ada),
            Method::POST,
            "/api/marketplace/cards",
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let created: AgentCard = serde_json::from_value(created).unwrap();
    assert_eq!(created.owner_team.as_deref(), Some("cats-inc"));
    assert_eq!(
        created.owner_wallet.as_deref(),
        Some("0x00000000000000000000000000000000000000ab")
    );
    assert_eq!(created.price, MicroUsdc(2_500));
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::POST,
            "/api/marketplace/cards",
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Bad listings are typed errors.
    for (field, value) in [
        ("price", json!(0)),
        ("price", json!(100_000_001)),
        ("slug", json!("Bad Slug")),
        ("owner_wallet", json!("0x12")),
        ("specialties", json!([])),
    ] {
        let mut bad = new_card("another", "cats-inc", 1_000);
        bad[field] = value;
        let (status, body) = app
            .call(
                Caller::Session(&ada),
                Method::POST,
                "/api/marketplace/cards",
                Some(bad),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {body}");
        assert!(body["detail"].is_string(), "{body}");
    }
    let mut unknown_judge = new_card("another", "cats-inc", 1_000);
    unknown_judge["judge"] = json!({"kind": "oracle"});
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::POST,
            "/api/marketplace/cards",
            Some(unknown_judge),
        )
        .await;
    assert!(status.is_client_error());
    let (status, _) = app
        .call(
            Caller::Nobody,
            Method::GET,
            "/api/marketplace/cards/another",
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "nothing was listed by the bad requests"
    );

    // Only the owning team reprices; the platform's cards only the admin.
    let patch = "/api/marketplace/cards/whisker";
    let (status, _) = app
        .call(
            Caller::Session(&bob),
            Method::PATCH,
            patch,
            Some(json!({"price": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app
        .call(
            Caller::Nobody,
            Method::PATCH,
            patch,
            Some(json!({"price": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::PATCH,
            patch,
            Some(json!({"price": -5})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        card(&app, "whisker").await.price,
        MicroUsdc(2_500),
        "unchanged by refusals"
    );
    let (status, body) = app
        .call(
            Caller::Session(&ada),
            Method::PATCH,
            patch,
            Some(json!({"price": 1_750, "listed": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // An unlisted card (its judge's configuration with it) is its owners' alone to read.
    let (status, repriced) = app
        .call(Caller::Session(&ada), Method::GET, patch, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{repriced}");
    let repriced: AgentCard = serde_json::from_value(repriced).unwrap();
    assert_eq!((repriced.price, repriced.listed), (MicroUsdc(1_750), false));
    for stranger in [Caller::Nobody, Caller::Session(&bob)] {
        let (status, _) = app.call(stranger, Method::GET, patch, None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "an unlisted card to a stranger"
        );
    }
    let (_, listed) = app
        .call(Caller::Nobody, Method::GET, "/api/marketplace/cards", None)
        .await;
    assert!(
        !listed
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["slug"] == "whisker"),
        "unlisted"
    );
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::PATCH,
            "/api/marketplace/cards/panel-chair",
            Some(json!({"price": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Statistics follow the evaluations recorded.
    let db = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let (id,): (i64,) = sqlx::query_as("SELECT id FROM agent_cards WHERE slug = 'nutritionist'")
        .fetch_one(&db)
        .await
        .unwrap();
    for (score, consensus) in [(0.9, 0.7), (0.4, 0.6), (1.0, 1.0)] {
        lachesis::marketplace::cards::record_evaluation(
            &db,
            &unpaid(id, Some(score), Some(consensus)),
        )
        .await
        .unwrap();
    }
    let stats = card(&app, "nutritionist").await.stats;
    assert_eq!(stats.evaluations, 3);
    assert!((stats.mean_score.unwrap() - 2.3 / 3.0).abs() < 1e-9);
    // |0.2| + |0.2| + 0 over 3: agreement 1 - 0.4 / 3; bias (0.2 - 0.2 + 0) / 3 = 0.
    assert!(
        (stats.agreement.unwrap() - (1.0 - 0.4 / 3.0)).abs() < 1e-9,
        "{stats:?}"
    );
    assert!(stats.bias.unwrap().abs() < 1e-9);
    assert_eq!(stats.earned, MicroUsdc(12_000));
    // 12,000 micro-USDC for 0.8 + 0.8 + 1.0 = 2.6 units of agreement.
    assert_eq!(stats.cost_per_useful, Some(MicroUsdc(4_615)));
    // A paid verdict that could not be read counts as an evaluation worth no agreement.
    lachesis::marketplace::cards::record_evaluation(&db, &unpaid(id, None, Some(0.5)))
        .await
        .unwrap();
    let stats = card(&app, "nutritionist").await.stats;
    assert_eq!(stats.evaluations, 4);
    assert!(
        (stats.mean_score.unwrap() - 2.3 / 3.0).abs() < 1e-9,
        "{stats:?}"
    );
    assert!(
        (stats.agreement.unwrap() - 2.6 / 4.0).abs() < 1e-9,
        "{stats:?}"
    );
    // 16,000 micro-USDC for the same 2.6 units of agreement.
    assert_eq!(stats.cost_per_useful, Some(MicroUsdc(6_154)));
    // The team's card account is the team's to see, with its statement; nobody else's.
    let ledger = lachesis::ledger::Ledger::new(db.clone());
    let budget = ledger
        .account(
            "budget/run-1/agent",
            lachesis_shared::ledger::AccountKind::Budget,
            None,
            None,
        )
        .await
        .unwrap();
    ledger
        .fund("fund/run-1", budget, MicroUsdc(10_000))
        .await
        .unwrap();
    let whisker = ledger.find("card/whisker").await.unwrap();
    let transfer = lachesis::ledger::Transfer {
        key: "pay-whisker",
        payer: budget,
        payee: whisker,
        amount: MicroUsdc(1_750),
        memo: "judge card",
    };
    ledger
        .pay(&transfer, &lachesis::ledger::Settlement::Simulated)
        .await
        .unwrap();
    let (status, ada_accounts) = app
        .call(
            Caller::Session(&ada),
            Method::GET,
            "/api/ledger/accounts",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ada_accounts.as_array().unwrap().len(), 1, "{ada_accounts}");
    assert_eq!(ada_accounts[0]["name"], "card/whisker");
    assert_eq!(ada_accounts[0]["available"], 1_750);
    let (status, bob_accounts) = app
        .call(
            Caller::Session(&bob),
            Method::GET,
            "/api/ledger/accounts",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bob_accounts, json!([]));
    let (status, _) = app
        .call(Caller::Nobody, Method::GET, "/api/ledger/accounts", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let statement = "/api/ledger/statement?account=card/whisker";
    let (status, _) = app
        .call(Caller::Session(&bob), Method::GET, statement, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::GET,
            "/api/ledger/statement?account=budget/run-1/agent",
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an unowned budget is not ada's"
    );
    let (status, lines) = app
        .call(Caller::Session(&ada), Method::GET, statement, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{lines}");
    assert_eq!(lines.as_array().unwrap().len(), 1);
    assert_eq!(lines[0]["amount"], 1_750);
    assert_eq!(lines[0]["counterparty"], "budget/run-1/agent");
    assert_eq!(lines[0]["kind"], "payment");

    let out_of_range =
        lachesis::marketplace::cards::record_evaluation(&db, &unpaid(id, Some(1.5), None)).await;
    assert!(
        out_of_range.is_err(),
        "Postgres refuses a score outside 0..1"
    );
}

/// The operator's `[[judge_cards]]`: the one place a card may name a server variable as its
/// endpoint's key. The key goes to the operator's endpoint; the variable's name is shown to the
/// admin only; a restart with a changed file updates the card; a team's slug is never taken over.
#[tokio::test]
async fn operator_cards_from_the_config_file_carry_a_server_key_to_their_endpoint() {
    use lachesis_tests::listener::Listener;
    let completion = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Fine. \\boxed{0.75}"},"finish_reason":"stop"}]}"#;
    let listener = Listener::start(std::sync::Arc::new(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{completion}",
            completion.len()
        )
        .into_bytes(),
    ))
    .await;
    // PATH stands for the operator's key variable: set in every test process, and its value is
    // what must reach the endpoint. The cards come from a real config file.
    let port = listener.port;
    let file = move |slug: &str, price: i64| {
        let text = format!(
            r#"
            [[judge_cards]]
            slug = "{slug}"
            name = "Operator Judge"
            specialties = ["reasoning"]
            price = {price}
            [judge_cards.judge]
            kind = "openai"
            base_url = "http://127.0.0.1:{port}/v1"
            model = "m"
            system_prompt = "judge"
            api_key_env = "PATH"
            "#
        );
        let path = std::env::temp_dir().join(format!("lachesis-cards-{slug}-{price}-{port}.toml"));
        std::fs::write(&path, text).unwrap();
        let file = lachesis::config::FileConfig::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file.judge_cards.unwrap()
    };
    let url = fresh_database().await;
    let config = |slug: &str, price: i64| {
        let mut config = config_for(&url);
        config.auth = true;
        config.api_token = Some("operator-admin".into());
        config.judge_cards = file(slug, price);
        config
    };
    let app = TestApp::spawn_with(config("operator-judge", 7_000)).await;
    let cards: Vec<AgentCard> =
        serde_json::from_value(app.get("/api/marketplace/cards").await).unwrap();
    let card = cards
        .iter()
        .find(|c| c.slug == "operator-judge")
        .expect("listed");
    assert_eq!(card.price, MicroUsdc(7_000));
    assert_eq!(card.owner_team, None, "a platform card");
    assert!(card.has_api_key);
    assert!(
        !serde_json::to_string(card).unwrap().contains("PATH"),
        "the variable's name is the operator's business: {card:?}"
    );
    let admin_view: AgentCard = app
        .client
        .get(app.url("/api/marketplace/cards/operator-judge"))
        .bearer_auth("operator-admin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let scenario = lachesis::envs::cat_caretaker::data::CatData::builtin()
        .unwrap()
        .scenarios[0]
        .clone();
    let task = lachesis_shared::cats::CatTask {
        observed: Vec::new(),
        scenario,
    };
    let verdict = lachesis::marketplace::judges::Judges::new(None)
        .verdict(&admin_view.judge, &task, "Fresh water and a vet visit.")
        .await
        .unwrap();
    assert!(verdict.contains("boxed{0.75}"), "{verdict}");
    let sent = String::from_utf8_lossy(&listener.received.lock().unwrap()).to_lowercase();
    let path = std::env::var("PATH").unwrap().to_lowercase();
    assert!(
        sent.contains(&format!("authorization: bearer {path}")),
        "the operator's key reached the operator's endpoint: {sent}"
    );
    let owner = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let (status, body) = app
        .call(
            Caller::Session(&owner),
            Method::POST,
            "/api/marketplace/cards",
            Some(new_card("team-held", "lab", 1_000)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    drop(app);

    // The file is the source of truth: a restart with another price reprices the card.
    let app = TestApp::spawn_with(config("operator-judge", 9_000)).await;
    let card: AgentCard =
        serde_json::from_value(app.get("/api/marketplace/cards/operator-judge").await).unwrap();
    assert_eq!(card.price, MicroUsdc(9_000));
    drop(app);

    // The operator's file cannot take over a team's card, and says so at start.
    let refused = lachesis::app::Server::build(&config("team-held", 9_000))
        .await
        .err()
        .expect("refused");
    assert!(
        refused.to_string().contains("a team's card has that slug"),
        "{refused}"
    );
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    let team_card: (Option<i64>, i64) =
        sqlx::query_as("SELECT owner_team, price FROM agent_cards WHERE slug = 'team-held'")
            .fetch_one(&db)
            .await
            .unwrap();
    assert!(team_card.0.is_some());
    assert_eq!(team_card.1, 1_000, "the team's card is unchanged");
}

/// An evaluation of card `id` under `run-1` at 0.004 USDC, bought with no payment.
fn unpaid(id: i64, score: Option<f64>, consensus: Option<f64>) -> Evaluation<'static> {
    Evaluation {
        card_id: id,
        run: "run-1",
        score,
        consensus,
        price: MicroUsdc(4_000),
        paid_tx: None,
        answer: 0,
    }
}
