//! Reading a model's actions. Model output is untrusted: every string gives typed actions or a
//! typed error whose message tells the model what to fix, never a panic.
//!
//! The asked-for form is a JSON list of actions:
//! `[{"action": "move", "object": "red_cube", "x": 1.0, "z": -0.5}, ...]`. Tolerated: prose or a
//! Markdown fence around the JSON, one action object without the list, `{"actions": [...]}`,
//! `action_type`/`type` for `action`, `object_id`/`id` for `object`, the original Padres environment's `move_object`
//! and `target_position: [x, y, z]`, `position`/`to` as `[x, z]` or `[x, y, z]`, numbers written as
//! strings, and `yaw`/`degrees`/`angle` for a rotation's `yaw_deg`.

use lachesis_shared::spatial::{ARENA_HALF_SIZE, Action, Task};
use serde_json::{Map, Value};

/// An attempt may carry at most this many actions.
pub const MAX_ACTIONS: usize = 8;
/// The highest release height accepted for a move (m).
pub const MAX_RELEASE_HEIGHT: f32 = 5.0;
/// At most this many `[`/`{` positions are tried as the start of the JSON.
const MAX_STARTS: usize = 16;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    #[error(
        "no JSON found: answer with a JSON list of actions, e.g. \
         [{{\"action\": \"move\", \"object\": \"red_cube\", \"x\": 1.0, \"z\": 0.5}}]"
    )]
    NoJson,
    #[error("the JSON is malformed: {0}")]
    InvalidJson(String),
    #[error("the list of actions is empty")]
    Empty,
    #[error("{count} actions: at most {MAX_ACTIONS} are allowed")]
    TooMany { count: usize },
    #[error("action {index}: expected an object like {{\"action\": \"move\", ...}}, found {found}")]
    NotAnObject { index: usize, found: String },
    #[error("action {index}: missing \"action\" (one of move, rotate, push)")]
    MissingKind { index: usize },
    #[error("action {index}: unknown action {kind:?}; use move, rotate or push")]
    UnknownKind { index: usize, kind: String },
    #[error("action {index} ({kind}): missing {field:?}")]
    MissingField {
        index: usize,
        kind: &'static str,
        field: &'static str,
    },
    #[error("action {index}: {field:?} must be a finite number, found {found}")]
    NotANumber {
        index: usize,
        field: &'static str,
        found: String,
    },
    #[error("action {index}: no object {object:?}; the objects are {known}")]
    UnknownObject {
        index: usize,
        object: String,
        known: String,
    },
    #[error("action {index}: {object} may not be moved; you may move {movable}")]
    NotMovable {
        index: usize,
        object: String,
        movable: String,
    },
    #[error(
        "action {index}: x = {x}, z = {z} is outside the arena (|x| and |z| at most {ARENA_HALF_SIZE})"
    )]
    OutOfArena { index: usize, x: f32, z: f32 },
    #[error("action {index}: y = {y} is higher than {MAX_RELEASE_HEIGHT} m")]
    TooHigh { index: usize, y: f32 },
}

/// The actions in `text`, checked against `task` (objects exist, may move, stay in the arena).
pub fn parse_actions(text: &str, task: &Task) -> Result<Vec<Action>, ActionError> {
    let value = first_json(text)?;
    let list = match value {
        Value::Array(items) => items,
        Value::Object(mut map) => match map.remove("actions") {
            Some(Value::Array(items)) => items,
            Some(other) => vec![other],
            None => vec![Value::Object(map)],
        },
        other => {
            return Err(ActionError::NotAnObject {
                index: 1,
                found: quote(&other),
            });
        }
    };
    if list.is_empty() {
        return Err(ActionError::Empty);
    }
    if list.len() > MAX_ACTIONS {
        return Err(ActionError::TooMany { count: list.len() });
    }
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let action = read_action(i + 1, item)?;
            check(i + 1, &action, task)?;
            Ok(action)
        })
        .collect()
}

/// How actions are written for the model to imitate; [`parse_actions`] reads it back.
pub fn render_actions(actions: &[Action]) -> String {
    serde_json::to_string(actions).unwrap_or_default()
}

fn quote(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 40 {
        let cut = (0..=40)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The first complete JSON array or object in the text, after any prose or fence.
fn first_json(text: &str) -> Result<Value, ActionError> {
    let mut last_error = None;
    let starts = text
        .char_indices()
        .filter(|(_, c)| *c == '[' || *c == '{')
        .take(MAX_STARTS);
    for (at, _) in starts {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => return Ok(value),
            Some(Err(e)) if last_error.is_none() => last_error = Some(e.to_string()),
            _ => {}
        }
    }
    Err(last_error.map_or(ActionError::NoJson, ActionError::InvalidJson))
}

fn field<'a>(map: &'a Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| map.get(*n).filter(|v| !v.is_null()))
}

fn number(index: usize, name: &'static str, value: &Value) -> Result<f32, ActionError> {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed.map(|v| v as f32) {
        Some(v) if v.is_finite() => Ok(v),
        _ => Err(ActionError::NotANumber {
            index,
            field: name,
            found: quote(value),
        }),
    }
}

fn numbers(index: usize, name: &'static str, value: &Value) -> Result<Vec<f32>, ActionError> {
    match value {
        Value::Array(items) if (2..=3).contains(&items.len()) => {
            items.iter().map(|v| number(index, name, v)).collect()
        }
        _ => Err(ActionError::NotANumber {
            index,
            field: name,
            found: quote(value),
        }),
    }
}

fn read_action(index: usize, item: &Value) -> Result<Action, ActionError> {
    let Value::Object(map) = item else {
        return Err(ActionError::NotAnObject {
            index,
            found: quote(item),
        });
    };
    let kind =
        field(map, &["action", "action_type", "type"]).ok_or(ActionError::MissingKind { index })?;
    let kind_text = kind
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let kind: &'static str = match kind_text.as_str() {
        "move" | "move_object" | "place" | "move_to" => "move",
        "rotate" | "rotate_object" | "turn" => "rotate",
        "push" | "push_object" => "push",
        _ => {
            return Err(ActionError::UnknownKind {
                index,
                kind: quote(kind).trim_matches('"').to_string(),
            });
        }
    };
    let missing = |field: &'static str| ActionError::MissingField { index, kind, field };
    let object = field(map, &["object", "object_id", "id"])
        .and_then(Value::as_str)
        .ok_or_else(|| missing("object"))?
        .trim()
        .to_string();
    Ok(match kind {
        "move" => {
            let (x, z, y) = if let Some(list) = field(map, &["target_position", "position", "to"]) {
                let v = numbers(index, "position", list)?;
                match v[..] {
                    [x, z] => (x, z, None),
                    [x, y, z] => (x, z, Some(y)),
                    _ => unreachable!("numbers returns 2 or 3 values"),
                }
            } else {
                let x = number(index, "x", field(map, &["x"]).ok_or_else(|| missing("x"))?)?;
                let z = number(index, "z", field(map, &["z"]).ok_or_else(|| missing("z"))?)?;
                let y = field(map, &["y"])
                    .map(|v| number(index, "y", v))
                    .transpose()?;
                (x, z, y)
            };
            Action::Move { object, x, z, y }
        }
        "rotate" => {
            let yaw = field(map, &["yaw_deg", "yaw", "degrees", "angle"])
                .ok_or_else(|| missing("yaw_deg"))?;
            Action::Rotate {
                object,
                yaw_deg: number(index, "yaw_deg", yaw)?,
            }
        }
        _ => {
            let direction = numbers(
                index,
                "direction",
                field(map, &["direction"]).ok_or_else(|| missing("direction"))?,
            )?;
            let direction = match direction[..] {
                [dx, dz] | [dx, _, dz] => [dx, dz],
                _ => unreachable!("numbers returns 2 or 3 values"),
            };
            let speed = field(map, &["speed", "strength", "force"])
                .map(|v| number(index, "speed", v))
                .transpose()?
                .unwrap_or(1.0);
            Action::Push {
                object,
                direction,
                speed,
            }
        }
    })
}

/// Checks actions that arrive already typed (from the browser) as model actions are checked.
pub fn check_actions(actions: &[Action], task: &Task) -> Result<(), ActionError> {
    if actions.is_empty() {
        return Err(ActionError::Empty);
    }
    if actions.len() > MAX_ACTIONS {
        return Err(ActionError::TooMany {
            count: actions.len(),
        });
    }
    for (i, action) in actions.iter().enumerate() {
        let finite = match action {
            Action::Move { x, z, y, .. } => {
                x.is_finite() && z.is_finite() && y.is_none_or(f32::is_finite)
            }
            Action::Rotate { yaw_deg, .. } => yaw_deg.is_finite(),
            Action::Push {
                direction, speed, ..
            } => direction.iter().all(|v| v.is_finite()) && speed.is_finite(),
        };
        if !finite {
            return Err(ActionError::NotANumber {
                index: i + 1,
                field: "number",
                found: "a value that is not finite".into(),
            });
        }
        check(i + 1, action, task)?;
    }
    Ok(())
}

fn check(index: usize, action: &Action, task: &Task) -> Result<(), ActionError> {
    let object = action.object();
    if task.object(object).is_none() {
        let known: Vec<&str> = task.objects.iter().map(|o| o.id.as_str()).collect();
        return Err(ActionError::UnknownObject {
            index,
            object: object.chars().take(40).collect(),
            known: known.join(", "),
        });
    }
    if !task.is_movable(object) {
        return Err(ActionError::NotMovable {
            index,
            object: object.to_string(),
            movable: task.movable.join(", "),
        });
    }
    if let Action::Move { x, z, y, .. } = *action {
        if x.abs() > ARENA_HALF_SIZE || z.abs() > ARENA_HALF_SIZE {
            return Err(ActionError::OutOfArena { index, x, z });
        }
        if let Some(y) = y.filter(|y| *y > MAX_RELEASE_HEIGHT) {
            return Err(ActionError::TooHigh { index, y });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
