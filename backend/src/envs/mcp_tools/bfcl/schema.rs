//! BFCL's function docs as the tools a model is offered. BFCL writes parameter types the Python
//! way (`dict`, `float`, `tuple`, `any`); models trained on OpenAI-style tools expect JSON Schema,
//! so the types are translated and everything else (descriptions, enums, defaults) kept. Names
//! stay as BFCL spells them, dots included: the checker compares calls against those names.

use lachesis_shared::tools::ToolSpec;
use serde_json::{Map, Value};

use super::FunctionDoc;

/// The tool a model is offered for `doc`.
pub fn tool_spec(doc: &FunctionDoc) -> ToolSpec {
    let mut parameters = json_schema(&doc.parameters);
    // Tool formats want an object schema at the top even when BFCL leaves out the type.
    if let Value::Object(map) = &mut parameters {
        map.entry("type").or_insert_with(|| Value::from("object"));
    }
    ToolSpec {
        name: doc.name.clone(),
        description: Some(doc.description.clone()).filter(|d| !d.is_empty()),
        parameters,
    }
}

/// A BFCL schema with its type names translated, recursively through properties and items.
pub fn json_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "type" => match value.as_str() {
                // Anything goes: JSON Schema says so by giving no type.
                Some("any") => continue,
                Some(name) => Value::from(json_type(name)),
                None => value.clone(),
            },
            "properties" => match value {
                Value::Object(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, schema)| (name.clone(), json_schema(schema)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" => json_schema(value),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

/// JSON Schema's name for a BFCL type; names already JSON Schema's pass through.
fn json_type(name: &str) -> &str {
    match name {
        "dict" => "object",
        "float" => "number",
        "tuple" => "array",
        other => other,
    }
}
