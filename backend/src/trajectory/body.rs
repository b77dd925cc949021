//! Request bodies of the trajectory API: size limit, gzip (atroposlib clients compress bodies of
//! 1 KiB and more), and JSON decoding into typed values with FastAPI-shaped 422 errors.

use std::io::Read;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_ENCODING;
use bytes::Bytes;
use lachesis_shared::atropos::ScoredData;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::canonical::{self, CheckedGroup};
use super::error::ApiError;
use crate::app::AppState;

/// A JSON body decoded into `T`, after gunzipping when the client said so.
pub struct AtroposJson<T>(pub T);

impl<T: DeserializeOwned + Validate> FromRequest<AppState> for AtroposJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let body = read_body(req, state.body_limit).await?;
        let value: T = decode_json(&body)?;
        value.validate()?;
        Ok(AtroposJson(value))
    }
}

/// A scored-data body checked on the fast path (see `canonical`): `CheckedGroup` for
/// `/scored_data`, `Vec<CheckedGroup>` for `/scored_data_list`.
pub struct Checked<T>(pub T);

/// What can be taken from a body on the fast path, with the typed form as its fallback.
pub trait FastPath: Sized {
    type Typed: DeserializeOwned + Validate;
    fn fast(body: &[u8]) -> Option<Self>;
    fn from_typed(typed: &Self::Typed) -> Self;
}

impl FastPath for CheckedGroup {
    type Typed = ScoredData;
    fn fast(body: &[u8]) -> Option<Self> {
        canonical::fast_group(body)
    }
    fn from_typed(typed: &ScoredData) -> Self {
        CheckedGroup::from(typed)
    }
}

impl FastPath for Vec<CheckedGroup> {
    type Typed = Vec<ScoredData>;
    fn fast(body: &[u8]) -> Option<Self> {
        canonical::fast_groups(body)
    }
    fn from_typed(typed: &Vec<ScoredData>) -> Self {
        typed.iter().map(CheckedGroup::from).collect()
    }
}

impl<T: FastPath> FromRequest<AppState> for Checked<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let body = read_body(req, state.body_limit).await?;
        if let Some(checked) = T::fast(&body) {
            return Ok(Checked(checked));
        }
        // The typed decode names what is wrong (or, should it accept, stores its encoding).
        let typed: T::Typed = decode_json(&body)?;
        typed.validate()?;
        Ok(Checked(T::from_typed(&typed)))
    }
}

/// The request body, size-limited, gunzipped when the client says it is gzip.
pub async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    let gzipped = req
        .headers()
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("gzip"));
    let raw = read_limited(req.into_body(), limit).await?;
    if gzipped && !raw.is_empty() {
        gunzip(&raw, limit)
    } else {
        Ok(raw)
    }
}

async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::BodyTooLarge { limit })
}

/// Decompresses one or more gzip members, refusing to inflate past `limit` bytes.
pub fn gunzip(compressed: &[u8], limit: usize) -> Result<Bytes, ApiError> {
    let mut out = Vec::with_capacity(compressed.len().saturating_mul(4).min(limit));
    let decoder = flate2::read::MultiGzDecoder::new(compressed);
    decoder
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| ApiError::InvalidGzip)?;
    if out.len() > limit {
        return Err(ApiError::BodyTooLarge { limit });
    }
    Ok(Bytes::from(out))
}

/// Decodes JSON into `T`; a failure names the first bad field the way pydantic would.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::field("missing", &[], "Field required"));
    }
    // The plain decoder is twice as fast as the path-tracking one, which runs only to explain a
    // failure.
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(from_serde_error)?;
    de.end().map_err(|err| {
        ApiError::field(
            "json_invalid",
            &[Value::from(err.column())],
            "JSON decode error: trailing characters",
        )
    })?;
    Ok(value)
}

fn from_serde_error(err: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = err.inner();
    if inner.is_syntax() || inner.is_eof() {
        let reason = strip_position(&inner.to_string());
        return ApiError::field(
            "json_invalid",
            &[Value::from(inner.column())],
            format!("JSON decode error: {reason}"),
        );
    }
    let mut loc: Vec<Value> = err
        .path()
        .iter()
        .filter_map(|segment| match segment {
            serde_path_to_error::Segment::Seq { index } => Some(Value::from(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Value::from(key.as_str())),
            serde_path_to_error::Segment::Enum { variant } => Some(Value::from(variant.as_str())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect();
    let text = strip_position(&inner.to_string());
    if let Some(field) = text
        .strip_prefix("missing field `")
        .and_then(|t| t.split('`').next())
    {
        loc.push(Value::from(field));
        return ApiError::field("missing", &loc, "Field required");
    }
    let (kind, msg) = if text.contains("expected i64") || text.contains("expected u") {
        ("int_type", "Input should be a valid integer".to_string())
    } else if text.contains("expected f64") {
        ("float_type", "Input should be a valid number".to_string())
    } else if text.contains("expected a sequence") {
        ("list_type", "Input should be a valid list".to_string())
    } else if text.contains("expected a string") {
        ("string_type", "Input should be a valid string".to_string())
    } else if text.contains("expected a map") || text.contains("expected struct") {
        (
            "dict_type",
            "Input should be a valid dictionary".to_string(),
        )
    } else {
        ("value_error", text.clone())
    };
    ApiError::field(kind, &loc, format!("{msg} ({text})"))
}

fn strip_position(text: &str) -> String {
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text.to_string(),
    }
}

/// Checks beyond types that atroposlib's pydantic models make (and a few sanity bounds of ours).
pub trait Validate {
    fn validate(&self) -> Result<(), ApiError> {
        Ok(())
    }
}

impl Validate for ScoredData {
    fn validate(&self) -> Result<(), ApiError> {
        validate_messages(self, &[])
    }
}

impl<T: Validate> Validate for Vec<T> {
    fn validate(&self) -> Result<(), ApiError> {
        for (i, item) in self.iter().enumerate() {
            item.validate().map_err(|err| match err {
                ApiError::InvalidBody(mut issues) => {
                    for issue in &mut issues {
                        issue.loc.insert(1, Value::from(i));
                    }
                    ApiError::InvalidBody(issues)
                }
                other => other,
            })?;
        }
        Ok(())
    }
}

fn validate_messages(group: &ScoredData, prefix: &[Value]) -> Result<(), ApiError> {
    let Some(messages) = &group.messages else {
        return Ok(());
    };
    let complete = messages
        .iter()
        .flatten()
        .all(|m| m.contains_key("role") && m.contains_key("content"));
    if complete {
        return Ok(());
    }
    let mut loc = prefix.to_vec();
    loc.push(Value::from("messages"));
    Err(ApiError::field(
        "value_error",
        &loc,
        "Value error, Message must have 'role' and 'content' fields",
    ))
}

impl Validate for lachesis_shared::atropos::Registration {
    fn validate(&self) -> Result<(), ApiError> {
        if self.batch_size < 1 {
            return Err(ApiError::field(
                "greater_than",
                &["batch_size".into()],
                "batch_size must be at least 1",
            ));
        }
        Ok(())
    }
}

impl Validate for lachesis_shared::atropos::RegisterEnv {
    fn validate(&self) -> Result<(), ApiError> {
        if self.group_size < 1 {
            return Err(ApiError::field(
                "greater_than",
                &["group_size".into()],
                "group_size must be at least 1",
            ));
        }
        if !self.weight.is_finite() {
            return Err(ApiError::field(
                "finite_number",
                &["weight".into()],
                "weight must be a finite number",
            ));
        }
        if self.min_batch_allocation.is_some_and(|m| !m.is_finite()) {
            return Err(ApiError::field(
                "finite_number",
                &["min_batch_allocation".into()],
                "min_batch_allocation must be a finite number",
            ));
        }
        Ok(())
    }
}

impl Validate for lachesis_shared::atropos::EnvIdentifier {}

impl Validate for lachesis_shared::runs::TrainerReport {
    fn validate(&self) -> Result<(), ApiError> {
        match self.values.iter().find(|(_, v)| !v.is_finite()) {
            Some((name, _)) => Err(ApiError::field(
                "finite_number",
                &[serde_json::json!("values"), serde_json::json!(name)],
                "metrics must be finite numbers",
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::atropos::Registration;

    fn issues(err: ApiError) -> Vec<lachesis_shared::error::FieldIssue> {
        match err {
            ApiError::InvalidBody(issues) => issues,
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_field_is_named() {
        let err = decode_json::<ScoredData>(br#"{"tokens": [[1]], "scores": [1.0]}"#).unwrap_err();
        let issue = &issues(err)[0];
        assert_eq!(issue.kind, "missing");
        assert_eq!(issue.loc, vec![Value::from("body"), Value::from("masks")]);
    }

    #[test]
    fn a_wrong_type_is_located() {
        let err =
            decode_json::<ScoredData>(br#"{"tokens": [[1, "x"]], "masks": [[1]], "scores": [1]}"#)
                .unwrap_err();
        let issue = &issues(err)[0];
        assert_eq!(issue.kind, "int_type");
        assert_eq!(
            issue.loc,
            vec![Value::from("body"), "tokens".into(), 0.into(), 1.into()]
        );
    }

    #[test]
    fn broken_json_is_json_invalid() {
        let err = decode_json::<Registration>(b"{\"wandb_group\": ").unwrap_err();
        assert_eq!(issues(err)[0].kind, "json_invalid");
        assert_eq!(
            issues(decode_json::<Registration>(b"").unwrap_err())[0].kind,
            "missing"
        );
    }

    #[test]
    fn gzip_round_trips_and_garbage_is_refused() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"{\"env_id\": 3}").unwrap();
        let packed = enc.finish().unwrap();
        assert_eq!(&gunzip(&packed, 1024).unwrap()[..], b"{\"env_id\": 3}");
        assert!(matches!(
            gunzip(b"not gzip at all", 1024),
            Err(ApiError::InvalidGzip)
        ));
        assert!(matches!(
            gunzip(&packed, 4),
            Err(ApiError::BodyTooLarge { .. })
        ));
    }

    #[test]
    fn messages_need_role_and_content() {
        let group: ScoredData = decode_json(
            br#"{"tokens": [[1]], "masks": [[1]], "scores": [1], "messages": [[{"role": "user"}]]}"#,
        )
        .unwrap();
        assert_eq!(issues(group.validate().unwrap_err())[0].kind, "value_error");
    }
}
