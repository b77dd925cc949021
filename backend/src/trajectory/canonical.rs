//! Scored groups on the ingest path, checked without building them.
//!
//! A group is mostly long number arrays. Decoding them into vectors and encoding them again for
//! storage would cost more CPU than everything else a post does, so each field's JSON text is
//! borrowed as it came, checked against its Atropos type by a pass that allocates nothing, and
//! spliced into the canonical stored form (every field present, `null` when absent, in
//! `ScoredData`'s order). When a check fails, the caller decodes the body the slow way to name the
//! problem.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use numeric::Kind;

/// A JSON array whose elements all deserialize as `T`, each dropped once checked.
struct EachOf<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for EachOf<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for CountVisitor<T> {
            type Value = EachOf<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(EachOf(PhantomData))
            }
        }
        deserializer.deserialize_seq(CountVisitor(PhantomData))
    }
}

use super::stats::GroupStats;

type JsonObject = serde_json::Map<String, serde_json::Value>;

/// The body of `/scored_data`, each field borrowed from the request.
#[derive(Deserialize)]
pub struct RawGroup<'a> {
    #[serde(borrow)]
    tokens: &'a RawValue,
    #[serde(borrow)]
    masks: &'a RawValue,
    #[serde(borrow)]
    scores: &'a RawValue,
    #[serde(borrow, default)]
    advantages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ref_logprobs: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    generation_params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    inference_logprobs: Option<&'a RawValue>,
    #[serde(borrow, default)]
    overrides: Option<&'a RawValue>,
    #[serde(borrow, default)]
    group_overrides: Option<&'a RawValue>,
    #[serde(borrow, default)]
    images: Option<&'a RawValue>,
    #[serde(default)]
    env_id: Option<i64>,
    #[serde(borrow, default)]
    distill_token_ids: Option<&'a RawValue>,
    #[serde(borrow, default)]
    distill_logprobs: Option<&'a RawValue>,
    #[serde(default)]
    weight_version: Option<i64>,
}

/// A group that passed every check, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedGroup {
    pub n_seqs: usize,
    pub env_id: Option<i64>,
    pub weight_version: Option<i64>,
    /// The canonical JSON, as `/batch` serves it.
    pub json: Vec<u8>,
    /// What the dashboards keep of it.
    pub stats: GroupStats,
}

fn check<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Option<T> {
    serde_json::from_str(raw.get()).ok()
}

fn check_opt<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> bool {
    raw.is_none_or(|r| check::<Option<T>>(r).is_some())
}

fn messages_complete(raw: Option<&RawValue>) -> bool {
    let Some(raw) = raw else { return true };
    match check::<Option<Vec<Vec<JsonObject>>>>(raw) {
        Some(Some(lists)) => lists
            .iter()
            .flatten()
            .all(|m| m.contains_key("role") && m.contains_key("content")),
        Some(None) => true,
        None => false,
    }
}

impl RawGroup<'_> {
    /// Checks every field against atroposlib's `ScoredData` types; `None` when one does not match
    /// (the caller then reports the problem from a full decode).
    pub fn check(&self) -> Option<CheckedGroup> {
        let n_seqs = numeric::array(self.tokens.get(), 2, Kind::Int)?;
        numeric::array(self.masks.get(), 2, Kind::Int)?;
        numeric::array(self.scores.get(), 1, Kind::Float)?;
        let numbers = |raw: Option<&RawValue>, depth, kind| {
            raw.is_none_or(|r| r.get() == "null" || numeric::array(r.get(), depth, kind).is_some())
        };
        let typed = numbers(self.advantages, 2, Kind::Float)
            && numbers(self.ref_logprobs, 2, Kind::Float)
            && numbers(self.inference_logprobs, 2, Kind::Float)
            && check_opt::<JsonObject>(self.generation_params)
            && check_opt::<EachOf<JsonObject>>(self.overrides)
            && check_opt::<JsonObject>(self.group_overrides)
            && numbers(self.distill_token_ids, 3, Kind::Int)
            && numbers(self.distill_logprobs, 3, Kind::Float)
            && messages_complete(self.messages);
        typed.then(|| CheckedGroup {
            n_seqs,
            env_id: self.env_id,
            weight_version: self.weight_version,
            json: self.canonical_json(),
            stats: GroupStats::from_raw(self.tokens, self.scores, self.advantages),
        })
    }

    fn canonical_json(&self) -> Vec<u8> {
        let fields: [(&str, Option<&RawValue>); 13] = [
            ("tokens", Some(self.tokens)),
            ("masks", Some(self.masks)),
            ("scores", Some(self.scores)),
            ("advantages", self.advantages),
            ("ref_logprobs", self.ref_logprobs),
            ("messages", self.messages),
            ("generation_params", self.generation_params),
            ("inference_logprobs", self.inference_logprobs),
            ("overrides", self.overrides),
            ("group_overrides", self.group_overrides),
            ("images", self.images),
            ("distill_token_ids", self.distill_token_ids),
            ("distill_logprobs", self.distill_logprobs),
        ];
        let size: usize = fields
            .iter()
            .filter_map(|(_, r)| r.map(|r| r.get().len()))
            .sum();
        let mut out = Vec::with_capacity(size + 400);
        out.push(b'{');
        for (i, (name, raw)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(raw.map_or("null", |r| r.get()).as_bytes());
            // env_id sits between images and the distillation fields in ScoredData.
            if *name == "images" {
                out.extend_from_slice(b",\"env_id\":");
                push_opt_int(&mut out, self.env_id);
            }
        }
        out.extend_from_slice(b",\"weight_version\":");
        push_opt_int(&mut out, self.weight_version);
        out.push(b'}');
        out
    }
}

fn push_opt_int(out: &mut Vec<u8>, value: Option<i64>) {
    match value {
        Some(v) => out.extend_from_slice(v.to_string().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

/// The checked form of a group decoded the slow way.
impl From<&lachesis_shared::atropos::ScoredData> for CheckedGroup {
    fn from(group: &lachesis_shared::atropos::ScoredData) -> Self {
        CheckedGroup {
            n_seqs: group.group_size(),
            env_id: group.env_id,
            weight_version: group.weight_version,
            json: serde_json::to_vec(group).expect("plain JSON values always encode"),
            stats: GroupStats::from_typed(group),
        }
    }
}

/// Parses `/scored_data`'s body on the fast path; `None` means "decode it fully for the error".
pub fn fast_group(body: &[u8]) -> Option<CheckedGroup> {
    serde_json::from_slice::<RawGroup>(body).ok()?.check()
}

/// Parses `/scored_data_list`'s body on the fast path.
pub fn fast_groups(body: &[u8]) -> Option<Vec<CheckedGroup>> {
    serde_json::from_slice::<Vec<RawGroup>>(body)
        .ok()?
        .iter()
        .map(RawGroup::check)
        .collect()
}

/// A syntax-only checker for nested arrays of JSON numbers. Converting every float only to throw it
/// away was the largest cost of a post; the grammar decides validity just as well.
mod numeric {
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        /// Fits an i64, no fraction or exponent (as atroposlib's `int` fields from JSON).
        Int,
        /// Any JSON number a double holds without overflowing.
        Float,
    }

    /// The outer length of `text` when it is `depth` levels of arrays around numbers of `kind`.
    pub fn array(text: &str, depth: usize, kind: Kind) -> Option<usize> {
        let bytes = text.as_bytes();
        let mut pos = 0;
        let len = list(bytes, &mut pos, depth, kind)?;
        skip_ws(bytes, &mut pos);
        (pos == bytes.len()).then_some(len)
    }

    fn skip_ws(b: &[u8], pos: &mut usize) {
        while *pos < b.len() && matches!(b[*pos], b' ' | b'\t' | b'\n' | b'\r') {
            *pos += 1;
        }
    }

    fn list(b: &[u8], pos: &mut usize, depth: usize, kind: Kind) -> Option<usize> {
        skip_ws(b, pos);
        if b.get(*pos) != Some(&b'[') {
            return None;
        }
        *pos += 1;
        skip_ws(b, pos);
        if b.get(*pos) == Some(&b']') {
            *pos += 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            if depth > 1 {
                list(b, pos, depth - 1, kind)?;
            } else {
                skip_ws(b, pos);
                number(b, pos, kind)?;
            }
            n += 1;
            skip_ws(b, pos);
            match b.get(*pos) {
                Some(b',') => *pos += 1,
                Some(b']') => {
                    *pos += 1;
                    return Some(n);
                }
                _ => return None,
            }
        }
    }

    fn digits(b: &[u8], pos: &mut usize) -> usize {
        let start = *pos;
        while *pos < b.len() && b[*pos].is_ascii_digit() {
            *pos += 1;
        }
        *pos - start
    }

    fn number(b: &[u8], pos: &mut usize, kind: Kind) -> Option<()> {
        let start = *pos;
        if b.get(*pos) == Some(&b'-') {
            *pos += 1;
        }
        let int_start = *pos;
        let int_digits = digits(b, pos);
        if int_digits == 0 || (int_digits > 1 && b[int_start] == b'0') {
            return None;
        }
        if kind == Kind::Int {
            // Up to 18 digits always fit an i64; longer ones are checked exactly.
            return (int_digits <= 18
                || std::str::from_utf8(&b[start..*pos])
                    .ok()?
                    .parse::<i64>()
                    .is_ok())
            .then_some(());
        }
        if b.get(*pos) == Some(&b'.') {
            *pos += 1;
            if digits(b, pos) == 0 {
                return None;
            }
        }
        let mut has_exponent = false;
        if matches!(b.get(*pos), Some(b'e' | b'E')) {
            has_exponent = true;
            *pos += 1;
            if matches!(b.get(*pos), Some(b'+' | b'-')) {
                *pos += 1;
            }
            if digits(b, pos) == 0 {
                return None;
            }
        }
        // Only a large exponent or a very long integer part can overflow a double: decode those
        // (rare) numbers to find out, as the full decoder would.
        if has_exponent || int_digits > 300 {
            let value: f64 = std::str::from_utf8(&b[start..*pos]).ok()?.parse().ok()?;
            return value.is_finite().then_some(());
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::atropos::ScoredData;
    use proptest::prelude::*;

    fn typed_json(body: &str) -> serde_json::Value {
        let group: ScoredData = serde_json::from_str(body).unwrap();
        serde_json::to_value(group).unwrap()
    }

    #[test]
    fn the_canonical_form_equals_the_typed_encoding() {
        let body = r#"{"masks": [[-100, 5]], "tokens": [[1, 5]], "scores": [0.5], "env_id": 3,
            "messages": [[{"role": "user", "content": "hi", "reward": null}]], "unknown": 1,
            "inference_logprobs": [[1.0, -0.25]], "weight_version": 9, "images": null}"#;
        let checked = fast_group(body.as_bytes()).unwrap();
        assert_eq!(
            (checked.n_seqs, checked.env_id, checked.weight_version),
            (1, Some(3), Some(9))
        );
        let stored: serde_json::Value = serde_json::from_slice(&checked.json).unwrap();
        assert_eq!(stored, typed_json(body));
    }

    #[test]
    fn wrong_types_and_incomplete_messages_leave_the_fast_path() {
        for bad in [
            r#"{"tokens": [[1, "x"]], "masks": [[1, 1]], "scores": [1]}"#,
            r#"{"tokens": [[1]], "masks": [[1]], "scores": "high"}"#,
            r#"{"tokens": [[1]], "scores": [1]}"#,
            r#"{"tokens": [[1]], "masks": [[1]], "scores": [1], "advantages": [[true]]}"#,
            r#"{"tokens": [[1]], "masks": [[1]], "scores": [1], "messages": [[{"role": "u"}]]}"#,
            r#"{"tokens": [[1]], "masks": [[1]], "scores": [1], "overrides": [3]}"#,
        ] {
            assert!(
                fast_group(bad.as_bytes()).is_none(),
                "{bad} must be refused"
            );
            assert!(serde_json::from_str::<ScoredData>(bad).is_err() || bad.contains("role"));
        }
    }

    #[test]
    fn the_number_checker_follows_json_grammar() {
        for good in ["[]", "[1,-2, 0]", " [ [1e5, -0.5, 2E-3], [] ] "] {
            assert!(
                numeric::array(
                    good,
                    if good.contains("[[") || good.contains("[ [") {
                        2
                    } else {
                        1
                    },
                    Kind::Float
                )
                .is_some(),
                "{good}"
            );
        }
        for bad in [
            "[01]", "[1.]", "[.5]", "[1e]", "[-]", "[1,]", "[1 2]", "[\"1\"]", "[1e999]", "[true]",
            "[1]x",
        ] {
            assert!(numeric::array(bad, 1, Kind::Float).is_none(), "{bad}");
        }
        assert!(numeric::array("[1.0]", 1, Kind::Int).is_none());
        assert_eq!(
            numeric::array("[9223372036854775807, -9223372036854775808]", 1, Kind::Int),
            Some(2)
        );
        assert!(numeric::array("[9223372036854775808]", 1, Kind::Int).is_none());
    }

    proptest! {
        /// The number checker accepts exactly what the typed decoder accepts, on number-like text.
        #[test]
        fn number_checker_agrees_with_serde(text in "\\[(-?[0-9]{0,20}(\\.[0-9]{0,3})?([eE][+-]?(30)?[0-9]{1,2})?,?){0,4}\\]") {
            let fast = numeric::array(&text, 1, Kind::Float).is_some();
            let typed = serde_json::from_str::<Vec<f64>>(&text).is_ok();
            prop_assert_eq!(fast, typed, "{}", text);
            let fast = numeric::array(&text, 1, Kind::Int).is_some();
            let typed = serde_json::from_str::<Vec<i64>>(&text).is_ok();
            prop_assert_eq!(fast, typed, "{}", text);
        }

        /// Whatever the fast path accepts, the typed decoder accepts too, and both store the same.
        #[test]
        fn fast_and_typed_paths_agree(
            tokens in prop::collection::vec(prop::collection::vec(any::<i64>(), 0..6), 0..4),
            scores in prop::collection::vec(-1e6f64..1e6, 0..4),
            logprobs in prop::option::of(prop::collection::vec(prop::collection::vec(-50.0f64..0.0, 0..5), 0..3)),
            env_id in prop::option::of(any::<i64>()),
        ) {
            let body = serde_json::json!({
                "tokens": tokens, "masks": tokens, "scores": scores,
                "inference_logprobs": logprobs, "env_id": env_id,
            })
            .to_string();
            let checked = fast_group(body.as_bytes()).expect("a well-typed group");
            let stored: serde_json::Value = serde_json::from_slice(&checked.json).unwrap();
            prop_assert_eq!(stored, typed_json(&body));
            prop_assert_eq!(checked.n_seqs, tokens.len());
        }

        /// Arbitrary bytes never panic the fast path.
        #[test]
        fn arbitrary_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = fast_group(&body);
            let _ = fast_groups(&body);
        }
    }
}
