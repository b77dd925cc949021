use super::*;
use crate::envs::spatial::generate::generate;
use proptest::prelude::*;

fn task() -> Task {
    generate(3, 3)
}

fn movable() -> String {
    task().movable[0].clone()
}

#[test]
fn the_asked_for_form_parses() {
    let m = movable();
    let text = format!(
        r#"[{{"action": "move", "object": "{m}", "x": 1.5, "z": -0.5}},
            {{"action": "rotate", "object": "{m}", "yaw_deg": 30}},
            {{"action": "push", "object": "{m}", "direction": [1, 0], "speed": 2}}]"#
    );
    let actions = parse_actions(&text, &task()).expect("valid");
    assert_eq!(
        actions,
        vec![
            Action::Move {
                object: m.clone(),
                x: 1.5,
                z: -0.5,
                y: None
            },
            Action::Rotate {
                object: m.clone(),
                yaw_deg: 30.0
            },
            Action::Push {
                object: m,
                direction: [1.0, 0.0],
                speed: 2.0
            },
        ]
    );
}

#[test]
fn the_seeds_form_prose_and_fences_are_forgiven() {
    let m = movable();
    let text = format!(
        "Sure! Here is my move:\n```json\n{{\"action_type\": \"move_object\", \"object_id\": \"{m}\", \
         \"target_position\": [\"1.0\", 0.5, 2]}}\n```\nThat should do it."
    );
    let actions = parse_actions(&text, &task()).expect("tolerated");
    assert_eq!(
        actions,
        vec![Action::Move {
            object: m,
            x: 1.0,
            z: 2.0,
            y: Some(0.5)
        }]
    );
}

#[test]
fn errors_say_what_to_fix() {
    let t = task();
    let m = movable();
    let fixed = t
        .objects
        .iter()
        .find(|o| !t.is_movable(&o.id))
        .unwrap()
        .id
        .clone();
    let cases = [
        ("I would move it left.".to_string(), "no JSON found"),
        (
            "[{\"action\": \"move\", \"object\": ".to_string(),
            "malformed",
        ),
        ("[]".to_string(), "empty"),
        (
            format!("[{{\"action\": \"fly\", \"object\": \"{m}\"}}]"),
            "unknown action \"fly\"",
        ),
        (format!("[{{\"object\": \"{m}\"}}]"), "missing \"action\""),
        (
            format!("[{{\"action\": \"move\", \"object\": \"{m}\", \"x\": 1}}]"),
            "missing \"z\"",
        ),
        (
            format!("[{{\"action\": \"move\", \"object\": \"{m}\", \"x\": \"left\", \"z\": 1}}]"),
            "\"x\" must be a finite number",
        ),
        (
            "[{\"action\": \"move\", \"object\": \"ghost\", \"x\": 1, \"z\": 1}]".to_string(),
            "no object \"ghost\"",
        ),
        (
            format!("[{{\"action\": \"move\", \"object\": \"{fixed}\", \"x\": 1, \"z\": 1}}]"),
            "may not be moved",
        ),
        (
            format!("[{{\"action\": \"move\", \"object\": \"{m}\", \"x\": 9, \"z\": 1}}]"),
            "outside the arena",
        ),
        ("[1, 2]".to_string(), "expected an object"),
    ];
    for (text, wanted) in cases {
        let err = parse_actions(&text, &t).expect_err(&text).to_string();
        assert!(
            err.contains(wanted),
            "{text:?} -> {err:?}, wanted {wanted:?}"
        );
    }
    let many = format!(
        "[{}]",
        vec![format!("{{\"action\": \"rotate\", \"object\": \"{m}\", \"yaw\": 1}}"); 9].join(",")
    );
    assert_eq!(
        parse_actions(&many, &t),
        Err(ActionError::TooMany { count: 9 })
    );
}

fn arb_action(objects: Vec<String>) -> impl Strategy<Value = Action> {
    let object = proptest::sample::select(objects);
    let coord = -ARENA_HALF_SIZE..=ARENA_HALF_SIZE;
    prop_oneof![
        (
            object.clone(),
            coord.clone(),
            coord.clone(),
            proptest::option::of(0.0f32..5.0)
        )
            .prop_map(|(object, x, z, y)| Action::Move { object, x, z, y }),
        (object.clone(), -360.0f32..360.0)
            .prop_map(|(object, yaw_deg)| Action::Rotate { object, yaw_deg }),
        (object, -1.0f32..1.0, -1.0f32..1.0, 0.0f32..5.0).prop_map(|(object, dx, dz, speed)| {
            Action::Push {
                object,
                direction: [dx, dz],
                speed,
            }
        }),
    ]
}

proptest! {
    #[test]
    fn rendered_actions_parse_back_exactly(
        actions in proptest::collection::vec(arb_action(task().movable), 1..=MAX_ACTIONS),
        prose in "[a-zA-Z .,!]{0,40}",
    ) {
        let text = format!("{prose}\n```json\n{}\n```", render_actions(&actions));
        prop_assert_eq!(parse_actions(&text, &task()), Ok(actions));
    }

    #[test]
    fn any_text_gives_actions_or_a_typed_error_without_panicking(text in "\\PC{0,200}") {
        let _ = parse_actions(&text, &task());
    }

    #[test]
    fn json_like_noise_never_panics(text in "[\\[\\]{}\",:0-9a-z_ .eE+-]{0,120}") {
        if let Ok(actions) = parse_actions(&text, &task()) {
            prop_assert!(!actions.is_empty() && actions.len() <= MAX_ACTIONS);
            for action in &actions {
                prop_assert!(task().is_movable(action.object()));
            }
        }
    }
}
