//! The battles-file parser on well-formed, malformed and arbitrary input, and the `arena fit`
//! command's table and end-to-end run.

use std::io::Cursor;

use proptest::prelude::*;

use super::battles_file::{BattlesFileError, ParseOptions, parse_battles};
use super::bootstrap::{Interval, Leaderboard, LeaderboardRow};
use super::cli::{FitArgs, fit_file, rank_label, render_table, report};
use super::ratings::{Outcome, Vote};

fn parse(text: &str) -> Result<super::battles_file::ParsedBattles, BattlesFileError> {
    parse_battles(Cursor::new(text), &ParseOptions::default())
}

fn parse_with(
    text: &str,
    options: ParseOptions,
) -> Result<super::battles_file::ParsedBattles, BattlesFileError> {
    parse_battles(Cursor::new(text), &options)
}

#[test]
fn reads_the_chatbot_arena_format() {
    let text = concat!(
        r#"{"model_a": "gpt-4", "model_b": "claude", "winner": "model_a", "judge": "x", "turn": 1}"#,
        "\n\n",
        r#"{"model_a": "claude", "model_b": "llama", "winner": "model_b", "conversation_a": [{"role": "user"}]}"#,
        "\r\n",
        r#"{"model_a": "llama", "model_b": "gpt-4", "winner": "tie", "len_a": 120, "len_b": 80.5}"#,
        "\n   \n",
        r#"{"model_a": "gpt-4", "model_b": "llama", "winner": "tie (bothbad)", "len_a": null}"#,
    );
    let p = parse(text).unwrap();
    assert_eq!(p.names, ["gpt-4", "claude", "llama"]);
    assert_eq!(
        p.votes,
        [
            Vote::new(0, 1, Outcome::AWins),
            Vote::new(1, 2, Outcome::BWins),
            Vote {
                a_len: Some(120.0),
                b_len: Some(80.5),
                ..Vote::new(2, 0, Outcome::Tie)
            },
            Vote::new(0, 2, Outcome::BothBad),
        ]
    );
    assert_eq!(p.lines, [1, 3, 4, 6]);
}

#[test]
fn void_lines_are_always_skipped_and_excluded_on_request() {
    let text = concat!(
        r#"{"model_a": "a", "model_b": "b", "winner": "model_a", "void": true}"#,
        "\n",
        r#"{"model_a": "a", "model_b": "b", "winner": "model_b", "void": false, "excluded": null}"#,
        "\n",
        r#"{"model_a": "b", "model_b": "c", "winner": "tie", "excluded": "same voter twice"}"#,
        "\n",
        // Void lines are skipped before they are checked: a voided line may be incomplete.
        r#"{"void": true}"#,
    );
    let all = parse(text).unwrap();
    assert_eq!(
        (all.votes.len(), all.skipped_void, all.skipped_excluded),
        (2, 2, 0)
    );
    assert_eq!(all.names, ["a", "b", "c"]);
    let options = ParseOptions {
        skip_excluded: true,
        ..ParseOptions::default()
    };
    let kept = parse_with(text, options).unwrap();
    assert_eq!(
        (kept.votes.len(), kept.skipped_void, kept.skipped_excluded),
        (1, 2, 1)
    );
    assert_eq!(kept.names, ["a", "b"]);
    assert_eq!(kept.lines, [2]);
}

/// Whether an error is the expected kind.
type Check = fn(&BattlesFileError) -> bool;

#[test]
fn errors_name_the_line() {
    let ok = r#"{"model_a": "a", "model_b": "b", "winner": "model_a"}"#;
    let cases: Vec<(&str, Check)> = vec![
        ("not json", |e| {
            matches!(e, BattlesFileError::NotJson { .. })
        }),
        (r#"["a", "b", "model_a"]"#, |e| {
            matches!(e, BattlesFileError::NotJson { .. })
        }),
        (r#"{"model_a": "a", "winner": "model_a"#, |e| {
            matches!(e, BattlesFileError::NotJson { .. })
        }),
        (r#"{"model_a": "a", "winner": "model_a"}"#, |e| {
            matches!(
                e,
                BattlesFileError::MissingField {
                    field: "model_b",
                    ..
                }
            )
        }),
        (r#"{"model_a": "a", "model_b": "b"}"#, |e| {
            matches!(
                e,
                BattlesFileError::MissingField {
                    field: "winner",
                    ..
                }
            )
        }),
        (r#"{"model_a": "a", "model_b": 3, "winner": "tie"}"#, |e| {
            matches!(
                e,
                BattlesFileError::WrongType {
                    field: "model_b",
                    ..
                }
            )
        }),
        (
            r#"{"model_a": "a", "model_b": "b", "winner": "both"}"#,
            |e| matches!(e, BattlesFileError::UnknownWinner { winner, .. } if winner == "both"),
        ),
        (
            r#"{"model_a": "a", "model_b": "a", "winner": "tie"}"#,
            |e| matches!(e, BattlesFileError::SameModel { model, .. } if model == "a"),
        ),
        (r#"{"model_a": "", "model_b": "a", "winner": "tie"}"#, |e| {
            matches!(
                e,
                BattlesFileError::InvalidName {
                    field: "model_a",
                    ..
                }
            )
        }),
        (
            r#"{"model_a": "a\nb", "model_b": "a", "winner": "tie"}"#,
            |e| {
                matches!(
                    e,
                    BattlesFileError::InvalidName {
                        field: "model_a",
                        ..
                    }
                )
            },
        ),
        (
            r#"{"model_a": "a", "model_b": "b", "winner": "tie", "len_a": -1}"#,
            |e| matches!(e, BattlesFileError::InvalidLength { field: "len_a", .. }),
        ),
        (
            r#"{"model_a": "a", "model_b": "b", "winner": "tie", "len_b": "5"}"#,
            |e| matches!(e, BattlesFileError::WrongType { field: "len_b", .. }),
        ),
    ];
    for (bad, expected) in cases {
        let text = format!("{ok}\n\n{bad}\n{ok}\n");
        let e = parse(&text).unwrap_err();
        assert!(expected(&e), "{bad}: {e:?}");
        assert_eq!(e.line(), Some(3), "{bad}: {e}");
        assert!(e.to_string().starts_with("line 3: "), "{e}");
    }
    let bytes = [ok.as_bytes(), b"\n\xff\xfe\n"].concat();
    let e = parse_battles(Cursor::new(bytes), &ParseOptions::default()).unwrap_err();
    assert!(matches!(e, BattlesFileError::NotUtf8 { line: 2 }), "{e:?}");
}

#[test]
fn limits_are_enforced() {
    let long = "m".repeat(201);
    let text = format!(r#"{{"model_a": "{long}", "model_b": "b", "winner": "tie"}}"#);
    let e = parse(&text).unwrap_err();
    assert!(
        matches!(e, BattlesFileError::InvalidName { line: 1, .. }),
        "{e:?}"
    );
    let just = "é".repeat(200);
    let text = format!(r#"{{"model_a": "{just}", "model_b": "b", "winner": "tie"}}"#);
    assert_eq!(
        parse(&text).unwrap().names[0],
        just,
        "200 characters, 400 bytes: fine"
    );

    let line = r#"{"model_a": "a", "model_b": "b", "winner": "model_a"}"#.to_owned() + "\n";
    let text = line.repeat(3);
    let exact = ParseOptions {
        max_bytes: text.len() as u64,
        ..ParseOptions::default()
    };
    assert_eq!(parse_with(&text, exact).unwrap().votes.len(), 3);
    let short = ParseOptions {
        max_bytes: text.len() as u64 - 1,
        ..ParseOptions::default()
    };
    assert!(matches!(
        parse_with(&text, short),
        Err(BattlesFileError::TooLarge { .. })
    ));

    let three = r#"{"model_a": "a", "model_b": "b", "winner": "tie"}
{"model_a": "a", "model_b": "c", "winner": "tie"}"#;
    let two_models = ParseOptions {
        max_models: 2,
        ..ParseOptions::default()
    };
    let e = parse_with(three, two_models).unwrap_err();
    assert!(
        matches!(
            e,
            BattlesFileError::TooManyModels {
                line: 2,
                max_models: 2
            }
        ),
        "{e:?}"
    );
}

#[test]
fn style_control_requires_lengths_and_empty_files_are_refused() {
    let text = concat!(
        r#"{"model_a": "a", "model_b": "b", "winner": "tie", "len_a": 1, "len_b": 2}"#,
        "\n",
        r#"{"model_a": "a", "model_b": "b", "winner": "tie", "len_a": 1}"#,
    );
    assert!(parse(text).is_ok());
    let styled = ParseOptions {
        require_lengths: true,
        ..ParseOptions::default()
    };
    let e = parse_with(text, styled).unwrap_err();
    assert!(
        matches!(e, BattlesFileError::MissingLength { line: 2 }),
        "{e:?}"
    );

    for empty in ["", "\n\n  \n", "{\"void\": true}\n"] {
        assert!(
            matches!(parse(empty), Err(BattlesFileError::NoBattles)),
            "{empty:?}"
        );
    }
}

fn row(
    contender: usize,
    rating: f64,
    lower: f64,
    upper: f64,
    ranks: (usize, usize),
) -> LeaderboardRow {
    LeaderboardRow {
        contender,
        rating,
        interval: Interval { lower, upper },
        rank_best: ranks.0,
        rank_worst: ranks.1,
        votes: 100 * (contender + 1),
    }
}

#[test]
fn the_table_shows_rank_ranges_and_one_decimal() {
    let board = Leaderboard {
        rows: vec![
            row(1, 1123.456, 1100.04, 1150.0, (1, 1)),
            row(0, 990.0, 970.0, 1010.0, (2, 3)),
            row(2, 886.54, 860.0, 995.0, (2, 3)),
        ],
        style_coefficient: None,
        style_interval: None,
        win_rates: vec![],
    };
    let names = [
        "alpha".to_owned(),
        "a-much-longer-name".to_owned(),
        "γ".to_owned(),
    ];
    let table = render_table(&names, &board);
    let expected = "\
Rank  Model               Rating      95% interval  Votes
1     a-much-longer-name  1123.5  [1100.0, 1150.0]    200
2-3   alpha                990.0   [970.0, 1010.0]    100
2-3   γ                    886.5    [860.0, 995.0]    300
";
    assert_eq!(table, expected);
    assert_eq!(rank_label(4, 4), "4");
    assert_eq!(rank_label(2, 7), "2-7");
}

#[test]
fn fit_file_rates_a_file_end_to_end() {
    // a beats b 3 times in 4, b beats c 3 times in 4: a > b > c, with a tie thrown in.
    let mut text = String::new();
    for (x, y, w) in [
        ("a", "b", "model_a"),
        ("b", "a", "model_b"),
        ("a", "b", "model_a"),
        ("a", "b", "model_b"),
        ("b", "c", "model_a"),
        ("c", "b", "model_b"),
        ("b", "c", "model_a"),
        ("b", "c", "model_b"),
        ("a", "c", "tie"),
    ] {
        text.push_str(&format!(
            "{{\"model_a\": \"{x}\", \"model_b\": \"{y}\", \"winner\": \"{w}\"}}\n"
        ));
    }
    let path =
        std::env::temp_dir().join(format!("lachesis-arena-fit-{}.jsonl", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let args = FitArgs {
        battles: path.clone(),
        rounds: 50,
        seed: 3,
        style_control: false,
        json: true,
        skip_excluded: false,
        max_bytes: 1 << 20,
    };
    let fitted = fit_file(&args);
    let styled = fit_file(&FitArgs {
        style_control: true,
        ..args.clone()
    });
    let missing = fit_file(&FitArgs {
        battles: path.with_extension("absent"),
        ..args.clone()
    });
    let _ = std::fs::remove_file(&path);
    let fitted = fitted.unwrap();
    let r = report(&fitted);
    let order: Vec<&str> = r.rows.iter().map(|row| row.model.as_str()).collect();
    assert_eq!(order, ["a", "b", "c"]);
    assert_eq!((r.battles, r.models, r.rounds), (9, 3, 50));
    assert!(
        r.rows
            .iter()
            .all(|row| row.lower <= row.rating && row.rating <= row.upper)
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["rows"][0]["model"], "a");
    let e = format!("{:#}", styled.unwrap_err());
    assert!(e.contains("line 1") && e.contains("len_a"), "{e}");
    assert!(missing.is_err());
}

/// Lines built from pieces of the format, so that the generator reaches past the JSON check.
fn arbitrary_line() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("\"a\"".to_owned()),
        Just("\"b\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("null".to_owned()),
        Just("7".to_owned()),
        "\"[a-c\\\\n]{0,3}\"",
    ];
    let winner = prop_oneof![
        Just("\"model_a\""),
        Just("\"model_b\""),
        Just("\"tie\""),
        Just("\"tie (bothbad)\""),
        Just("\"x\""),
        Just("[]"),
    ];
    let len = prop_oneof![
        Just("1"),
        Just("-2"),
        Just("1e999"),
        Just("null"),
        Just("\"3\"")
    ];
    let structured = (name.clone(), name, winner, len, any::<bool>()).prop_map(
        |(a, b, w, l, void)| {
            format!(
                "{{\"model_a\": {a}, \"model_b\": {b}, \"winner\": {w}, \"len_a\": {l}, \"void\": {void}}}"
            )
        },
    );
    prop_oneof![structured, ".{0,40}", Just(String::new())]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_battles(Cursor::new(bytes), &ParseOptions::default());
    }

    #[test]
    fn arbitrary_lines_parse_or_name_a_line(
        lines in prop::collection::vec(arbitrary_line(), 0..12),
        skip_excluded in any::<bool>(),
        require_lengths in any::<bool>(),
    ) {
        let text = lines.join("\n");
        let options = ParseOptions { skip_excluded, require_lengths, ..ParseOptions::default() };
        match parse_battles(Cursor::new(text), &options) {
            Ok(p) => {
                prop_assert_eq!(p.votes.len(), p.lines.len());
                for v in &p.votes {
                    prop_assert!(v.a < p.names.len() && v.b < p.names.len() && v.a != v.b);
                }
            }
            Err(BattlesFileError::NoBattles) => {}
            Err(e) => prop_assert!(
                e.line().is_some_and(|l| l >= 1 && l <= lines.len()),
                "{:?}", e
            ),
        }
    }
}
