//! The Elo yardstick: `lachesis chess rate` and the ratings it stores.

use lachesis_tests::{TestApp, config_for, fresh_database};

/// `lachesis chess rate` (the real binary) with a tiny schedule and `--record` stores the agent's
/// rating in a fresh database, and `GET /api/chess/agent` answers it; flags over their limits
/// are refused before anything is played, and Postgres refuses a rating that breaks its checks.
#[tokio::test]
async fn the_yardstick_records_a_rating_that_the_agent_answer_carries() {
    let rate = |flags: &[&str]| {
        let mut command = tokio::process::Command::new(lachesis_tests::lachesis_bin());
        command
            .args(["chess", "rate"])
            .args(flags)
            .env_remove("DATABASE_URL")
            .stdin(std::process::Stdio::null());
        command
    };
    let refused = rate(&["--games", "201"]).output().await.unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--games 201 is more than --max-games 200"),
        "{stderr}"
    );

    let database = fresh_database().await;
    let tiny = [
        "--games",
        "1",
        "--calibration-games",
        "1",
        "--movetime-ms",
        "5",
        "--seed",
        "3",
        "--record",
    ];
    let output = rate(&tiny)
        .env("DATABASE_URL", &database)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rungs = lachesis_chess::rating::ladder().len();

    let app = TestApp::spawn_with(config_for(&database)).await;
    let info: lachesis_shared::chess::AgentInfo =
        serde_json::from_value(app.get("/api/chess/agent").await).expect("an AgentInfo");
    let rating = info.rating.clone().expect("the recorded rating");
    assert_eq!((info.version, rating.policy_version), (0, 0));
    // Version 0 is the current version: both fields are the same row.
    assert_eq!(info.baseline_rating, info.rating);
    assert_eq!(rating.games, rungs as i64, "one game against each rung");
    assert!((0.0..=1.0).contains(&rating.sacrifice_rate), "{rating:?}");
    // What the command printed is what was stored.
    let printed = lachesis_chess::rating::EloEstimate {
        point: rating.elo,
        low: rating.elo_low,
        high: rating.elo_high,
    };
    let line = format!(
        "Elo of policy version 0: {} over {rungs} games; sacrifice rate {:.3}",
        printed.shown(),
        rating.sacrifice_rate
    );
    assert!(stdout.contains(&line), "{line} in\n{stdout}");
    assert!(stdout.contains("recorded as rating"), "{stdout}");
    for rung in 1..rungs {
        assert!(stdout.contains(&format!("rung {rung}: ")), "{stdout}");
    }

    // A policy file is recorded only as the stored version it claims to be.
    let file = std::env::temp_dir().join(format!("lachesis-policy-{}.json", std::process::id()));
    let unstored = lachesis_chess::agent::PolicyParams {
        version: 7,
        ..Default::default()
    };
    std::fs::write(&file, serde_json::to_string(&unstored).unwrap()).unwrap();
    let refused = rate(&["--policy", &file.display().to_string(), "--record"])
        .env("DATABASE_URL", &database)
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("the policy file's version 7 is not the stored version 7"),
        "{stderr}"
    );

    // The table's checks hold whatever writes to it.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .unwrap();
    let good = lachesis::chess::ratings::NewRating {
        policy_version: 0,
        elo: Some(800.0),
        elo_low: Some(700.0),
        elo_high: Some(900.0),
        games: 10,
        calibration_games: 0,
        sacrifice_rate: 0.1,
    };
    for bad in [
        lachesis::chess::ratings::NewRating {
            elo_low: Some(850.0),
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            elo_low: None,
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            sacrifice_rate: 1.5,
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            elo: Some(f64::NAN),
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            policy_version: 7,
            ..good.clone()
        },
    ] {
        let refused = lachesis::chess::ratings::insert(&mut conn, &bad).await;
        assert!(refused.is_err(), "{bad:?} was stored");
    }
    lachesis::chess::ratings::insert(&mut conn, &good)
        .await
        .unwrap();
    let latest: lachesis_shared::chess::AgentInfo =
        serde_json::from_value(app.get("/api/chess/agent").await).unwrap();
    assert_eq!(
        latest.rating.map(|r| r.elo_text()),
        Some("Elo 800 (95% 700–900)".to_owned()),
        "the newest row wins"
    );
}
