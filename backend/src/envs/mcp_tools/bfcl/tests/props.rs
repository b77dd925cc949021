//! The checker returns a verdict, never panics, whatever the docs, answers and calls hold: the
//! model writes the calls, and the data come from a file we do not control.

use std::collections::BTreeMap;

use lachesis_shared::tools::ToolCall;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::super::{Category, ExpectedCall, FunctionDoc, check};

const NAMES: [&str; 3] = ["f", "math.g", "h"];
const PARAMS: [&str; 3] = ["a", "b", "c"];
/// BFCL's type names, JSON Schema's, and ones neither knows.
const TYPES: [&str; 10] = [
    "string", "integer", "float", "boolean", "array", "tuple", "dict", "any", "object", "weird",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e20f64..1e20).prop_map(Value::from),
        prop::sample::select(vec!["", "a", "A b", "x,y", "'q'", "é"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(PARAMS.to_vec()), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.into(), v)).collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(prop::sample::select(PARAMS.to_vec()), json_value(), 0..4)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A parameter schema: a type (sometimes none), and for lists an item type (sometimes none).
fn param_schema() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(TYPES.to_vec())),
        prop::option::of(prop::sample::select(TYPES.to_vec())),
    )
        .prop_map(|(ty, item)| {
            let mut schema = Map::new();
            if let Some(ty) = ty {
                schema.insert("type".into(), json!(ty));
            }
            if let Some(item) = item {
                schema.insert("items".into(), json!({ "type": item }));
            }
            Value::Object(schema)
        })
}

fn function_doc() -> impl Strategy<Value = FunctionDoc> {
    (
        prop::sample::select(NAMES.to_vec()),
        prop::collection::btree_map(prop::sample::select(PARAMS.to_vec()), param_schema(), 0..4),
        prop::collection::vec(prop::sample::select(PARAMS.to_vec()), 0..3),
        any::<bool>(),
    )
        .prop_map(|(name, properties, required, well_formed)| FunctionDoc {
            name: name.into(),
            description: String::new(),
            parameters: if well_formed {
                json!({"type": "dict", "properties": properties, "required": required})
            } else {
                json!({"properties": "nope", "required": 3})
            },
        })
}

fn expected_call() -> impl Strategy<Value = ExpectedCall> {
    (
        prop::sample::select(NAMES.to_vec()),
        prop::collection::btree_map(
            prop::sample::select(PARAMS.to_vec()),
            prop::collection::vec(json_value(), 0..3),
            0..4,
        ),
    )
        .prop_map(|(name, allowed)| ExpectedCall {
            name: name.into(),
            allowed: allowed
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<BTreeMap<_, _>>(),
        })
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    (prop::sample::select(NAMES.to_vec()), arguments()).prop_map(|(name, arguments)| ToolCall {
        name: name.into(),
        arguments,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn checker_never_panics(
        functions in prop::collection::vec(function_doc(), 0..3),
        expected in prop::collection::vec(expected_call(), 0..3),
        calls in prop::collection::vec(tool_call(), 0..4),
    ) {
        for category in Category::ALL {
            // Any verdict will do; reaching it is the property.
            let _ = check(category, &functions, &expected, &calls);
        }
    }

    /// Calls built from the answer's own first values always pass a well-formed single call.
    #[test]
    fn first_values_pass_simple(value in -1000i64..1000, text in "[a-z ]{0,8}") {
        let doc = FunctionDoc {
            name: "f".into(),
            description: String::new(),
            parameters: json!({"type": "dict", "properties": {
                "n": {"type": "integer"}, "s": {"type": "string"}, "x": {"type": "float"}},
                "required": ["n"]}),
        };
        let expected = ExpectedCall {
            name: "f".into(),
            allowed: BTreeMap::from([
                ("n".to_string(), vec![json!(value)]),
                ("s".to_string(), vec![json!(""), json!(text.clone())]),
                ("x".to_string(), vec![json!(value as f64)]),
            ]),
        };
        let call = ToolCall {
            name: "f".into(),
            arguments: Map::from_iter([
                ("n".to_string(), json!(value)),
                ("s".to_string(), json!(text.to_uppercase())),
                // An integer for a float, as Python allows.
                ("x".to_string(), json!(value)),
            ]),
        };
        prop_assert_eq!(check(Category::SimplePython, &[doc], &[expected], &[call]), Ok(()));
    }
}
