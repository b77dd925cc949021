//! Property tests: every parser of server answers, fed arbitrary JSON, arbitrary bytes and
//! mutations of real-shaped answers, returns a typed result and never panics; what it accepts is
//! internally consistent, and rollouts built from it have aligned vectors.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

use super::openai::{OpenAiChoice, parse_chat, parse_completions};
use super::openai_policy::rollout_from_choice;
use super::testing::{CHAT_SAMPLE, COMPLETION_SAMPLE, VLLM_SAMPLE, byte_tokenizer};
use super::vllm::{GenerateAnswer, parse_generate, rollouts_from_answer};
use super::{PolicyError, Rollout};

/// Field names the parsers look for, so random objects often reach deep into them.
const KEYS: &[&str] = &[
    "text",
    "finish_reasons",
    "logprobs",
    "token_ids",
    "prompt_token_ids",
    "choices",
    "message",
    "content",
    "token",
    "logprob",
    "bytes",
    "top_logprobs",
    "tokens",
    "token_logprobs",
    "index",
    "finish_reason",
    "0",
    "17",
    "-1",
    "x",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-3i64..300).prop_map(Value::from),
        any::<f64>().prop_filter_map("JSON numbers are finite", |f| {
            serde_json::Number::from_f64(f).map(Value::Number)
        }),
        prop_oneof![
            Just("stop".to_owned()),
            Just("length".to_owned()),
            (0u32..300).prop_map(|n| n.to_string()),
            "[a-z0-9 ]{0,6}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                )
            }),
        ]
    })
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every node's path, the root included.
fn paths(value: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(prefix.clone());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                prefix.push(Seg::Index(i));
                paths(item, prefix, out);
                prefix.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                prefix.push(Seg::Key(k.clone()));
                paths(item, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'v>(value: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |node, seg| match seg {
        Seg::Key(k) => node.get_mut(k.as_str()),
        Seg::Index(i) => node.get_mut(*i),
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(Value),
    Remove,
}

fn mutation() -> impl Strategy<Value = (Index, Mutation)> {
    let kind = prop_oneof![json().prop_map(Mutation::Replace), Just(Mutation::Remove),];
    (any::<Index>(), kind)
}

fn mutate(value: &mut Value, (at, mutation): &(Index, Mutation)) {
    let mut all = Vec::new();
    paths(value, &mut Vec::new(), &mut all);
    let path = at.get(&all).clone();
    match mutation {
        Mutation::Replace(new) => {
            if let Some(node) = node_mut(value, &path) {
                *node = new.clone();
            }
        }
        Mutation::Remove => {
            let Some((last, parent)) = path.split_last() else {
                return;
            };
            match (node_mut(value, parent), last) {
                (Some(Value::Object(map)), Seg::Key(k)) => {
                    map.remove(k);
                }
                (Some(Value::Array(items)), Seg::Index(i)) if *i < items.len() => {
                    items.remove(*i);
                }
                _ => {}
            }
        }
    }
}

fn mutated(sample: &str, mutations: &[(Index, Mutation)]) -> Vec<u8> {
    let mut value: Value = serde_json::from_str(sample).expect("the samples are JSON");
    for m in mutations {
        mutate(&mut value, m);
    }
    serde_json::to_vec(&value).expect("a JSON value serialises")
}

fn aligned(rollout: &Rollout) -> bool {
    rollout.tokens.len() == rollout.masks.len()
        && rollout.tokens.len() == rollout.inference_logprobs.len()
}

/// What any accepted `/generate` answer must satisfy, and rollouts from it.
fn check_generate(result: Result<GenerateAnswer, PolicyError>) -> Result<(), TestCaseError> {
    let Ok(answer) = result else { return Ok(()) };
    for choice in &answer.choices {
        prop_assert_eq!(choice.token_ids.len(), choice.logprobs.len());
        prop_assert!(choice.logprobs.iter().all(|lp| lp.is_finite()));
    }
    let prompt = answer
        .prompt_token_ids
        .clone()
        .unwrap_or_else(|| vec![1, 2]);
    let n = answer.choices.len();
    let rollouts = rollouts_from_answer(&prompt, answer, n).map_err(|e| {
        TestCaseError::fail(format!(
            "a parsed answer with its own prompt and count fails: {e}"
        ))
    })?;
    prop_assert!(rollouts.iter().all(aligned));
    Ok(())
}

/// What any accepted OpenAI answer must satisfy, and rollouts from it.
fn check_openai(result: Result<Vec<OpenAiChoice>, PolicyError>) -> Result<(), TestCaseError> {
    let Ok(choices) = result else { return Ok(()) };
    let tokenizer = byte_tokenizer();
    for choice in choices {
        if let Some(lp) = &choice.logprobs {
            prop_assert_eq!(lp.tokens.len(), lp.logprobs.len());
            prop_assert_eq!(lp.tokens.len(), lp.top.len());
            prop_assert_eq!(lp.tokens.len(), lp.bytes.len());
            prop_assert!(lp.logprobs.iter().all(|x| x.is_finite()));
        }
        let rollout = rollout_from_choice(&tokenizer, &[256, 1], choice)
            .map_err(|e| TestCaseError::fail(format!("byte-level encoding never fails: {e}")))?;
        prop_assert!(aligned(&rollout));
    }
    Ok(())
}

proptest! {
    #[test]
    fn arbitrary_json_never_panics_a_parser(value in json()) {
        let body = serde_json::to_vec(&value).expect("a JSON value serialises");
        check_generate(parse_generate(&body))?;
        check_openai(parse_completions(&body))?;
        check_openai(parse_chat(&body))?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_parser(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_generate(&body);
        let _ = parse_completions(&body);
        let _ = parse_chat(&body);
    }

    #[test]
    fn mutated_vllm_answers_parse_or_fail_cleanly(m in prop::collection::vec(mutation(), 1..4)) {
        check_generate(parse_generate(&mutated(VLLM_SAMPLE, &m)))?;
    }

    #[test]
    fn mutated_completions_parse_or_fail_cleanly(m in prop::collection::vec(mutation(), 1..4)) {
        check_openai(parse_completions(&mutated(COMPLETION_SAMPLE, &m)))?;
    }

    #[test]
    fn mutated_chat_answers_parse_or_fail_cleanly(m in prop::collection::vec(mutation(), 1..4)) {
        check_openai(parse_chat(&mutated(CHAT_SAMPLE, &m)))?;
    }

    #[test]
    fn well_formed_vllm_answers_round_trip(
        choices in prop::collection::vec(
            (prop::collection::vec((any::<u32>(), -50.0f64..=0.0), 0..12), any::<bool>(), ".{0,8}"),
            0..5,
        ),
        prompt in prop::collection::vec(any::<u32>(), 1..16),
    ) {
        let body = serde_json::json!({
            "text": choices.iter().map(|(_, _, text)| text.clone()).collect::<Vec<_>>(),
            "finish_reasons": choices.iter()
                .map(|(_, stop, _)| if *stop { "stop" } else { "length" })
                .collect::<Vec<_>>(),
            "logprobs": choices.iter().map(|(tokens, _, _)| {
                tokens.iter().map(|(id, lp)| serde_json::json!([{ id.to_string(): lp }])).collect::<Vec<_>>()
            }).collect::<Vec<_>>(),
            "token_ids": choices.iter()
                .map(|(tokens, _, _)| tokens.iter().map(|(id, _)| *id).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            "prompt_token_ids": prompt,
        });
        let answer = parse_generate(&serde_json::to_vec(&body).expect("serialises"))
            .map_err(|e| TestCaseError::fail(format!("a well-formed answer is refused: {e}")))?;
        prop_assert_eq!(answer.choices.len(), choices.len());
        for (parsed, (tokens, stop, text)) in answer.choices.iter().zip(&choices) {
            prop_assert_eq!(&parsed.text, text);
            prop_assert_eq!(parsed.finish == super::Finish::Stop, *stop);
            let ids: Vec<u32> = tokens.iter().map(|(id, _)| *id).collect();
            prop_assert_eq!(&parsed.token_ids, &ids);
            for (got, (_, want)) in parsed.logprobs.iter().zip(tokens) {
                prop_assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0));
            }
        }
        let n = choices.len();
        let rollouts = rollouts_from_answer(&prompt, answer, n)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (rollout, (tokens, _, _)) in rollouts.iter().zip(&choices) {
            prop_assert!(aligned(rollout));
            prop_assert_eq!(rollout.tokens.len(), prompt.len() + tokens.len());
            prop_assert!(rollout.masks[..prompt.len()].iter().all(|&m| m == -100));
        }
    }
}
