//! The checker against BFCL's own, on real questions; `evaluate` end to end with scripted
//! policies; loading errors; and a property test that no input makes the checker panic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use futures::future::BoxFuture;
use lachesis_shared::tools::{ToolCall, render_call};
use serde_json::{Value, json};

use super::*;
use crate::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout, rollout_from_ids};

mod candidates;
mod props;

use candidates::{candidates, first_values};

/// Questions sampled per category for the comparison with the reference.
const SAMPLE: usize = 50;

/// The unpacked data: `LACHESIS_BFCL_DIR`, else where `scripts/ensure-bfcl-data.sh` puts it.
fn data() -> PathBuf {
    let dir = std::env::var_os(DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(DEFAULT_DIR)
        });
    assert!(
        dir.join("BFCL_v4_simple_python.json").is_file(),
        "no BFCL data in {}: run scripts/ensure-bfcl-data.sh and set {DIR_VAR} to what it prints",
        dir.display()
    );
    dir
}

/// `SAMPLE` questions of `category`, spread evenly over the file (a fixed choice).
fn sample(dir: &Path, category: Category) -> Vec<Question> {
    let all = load(dir, category).expect("loading BFCL data");
    let step = (all.len() / SAMPLE).max(1);
    all.into_iter().step_by(step).take(SAMPLE).collect()
}

/// BFCL's decoded form of calls: `[{name: {param: value}}]`.
fn decoded(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|c| json!({ c.name.clone(): c.arguments }))
        .collect()
}

/// Runs BFCL's checker over `cases` (question, candidate) and returns its verdicts.
fn reference_verdicts(dir: &Path, cases: &[(&Question, &[ToolCall])]) -> Vec<Value> {
    // data/ sits in bfcl_eval/, which sits in the unpacked wheel.
    let wheel = dir.join("../..");
    let raw: Vec<Value> = cases
        .iter()
        .map(|(q, calls)| {
            let ground_truth: Vec<Value> = q
                .expected
                .iter()
                .map(|e| json!({ e.name.clone(): e.allowed }))
                .collect();
            json!({
                "category": q.category.name(),
                "functions": q.functions,
                "ground_truth": ground_truth,
                "output": decoded(calls),
            })
        })
        .collect();
    let scratch = std::env::temp_dir().join(format!("lachesis-bfcl-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let cases_path = scratch.join("cases.json");
    let driver = scratch.join("reference_checker.py");
    std::fs::write(&cases_path, serde_json::to_vec(&raw).expect("cases")).expect("writing cases");
    std::fs::write(&driver, include_str!("reference_checker.py")).expect("writing the driver");
    let output = Command::new("python3")
        .arg(&driver)
        .arg(&wheel)
        .arg(&cases_path)
        .output()
        .expect("running python3");
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        output.status.success(),
        "BFCL's checker failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the reference's verdicts")
}

#[test]
fn checker_agrees_with_bfcls_reference_checker() {
    let dir = data();
    let questions: Vec<Question> = Category::ALL
        .iter()
        .flat_map(|&category| sample(&dir, category))
        .collect();
    let cases: Vec<(&Question, String, Vec<ToolCall>)> = questions
        .iter()
        .flat_map(|q| candidates(q).into_iter().map(move |(l, c)| (q, l, c)))
        .collect();
    let refs: Vec<(&Question, &[ToolCall])> =
        cases.iter().map(|(q, _, c)| (*q, c.as_slice())).collect();
    let verdicts = reference_verdicts(&dir, &refs);
    assert_eq!(verdicts.len(), cases.len());
    let (mut valid, mut invalid) = (0, 0);
    let mut disagreements = Vec::new();
    let mut rejected_truths = Vec::new();
    for ((q, label, calls), verdict) in cases.iter().zip(&verdicts) {
        let Some(reference) = verdict["valid"].as_bool() else {
            panic!("BFCL's checker raised on {} ({label}): {verdict}", q.id);
        };
        if label == "truth" && !reference {
            rejected_truths.push(format!("{}: {verdict}", q.id));
        }
        let ours = check(q.category, &q.functions, &q.expected, calls);
        if ours.is_ok() != reference {
            disagreements.push(format!(
                "{} [{label}] {}: reference {verdict}, ours {ours:?}",
                q.id,
                decoded(calls)
            ));
        }
        if reference {
            valid += 1;
        } else {
            invalid += 1;
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} verdicts differ from BFCL's:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
    // Both verdicts must be well represented, or the comparison proves little.
    assert!(
        valid >= 4 * questions.len() && invalid >= 10 * questions.len(),
        "{valid} valid, {invalid} invalid"
    );
    // A few of BFCL's answers contradict its own docs (a required parameter the answer leaves
    // out); more would mean the candidates are built wrong.
    assert!(
        rejected_truths.len() * 50 <= questions.len(),
        "BFCL rejects the first values of too many of its answers:\n{}",
        rejected_truths.join("\n")
    );
    eprintln!(
        "{valid} valid, {invalid} invalid, {} questions; {rejected_truths:?}",
        questions.len()
    );
}

/// Answers each prompt with the calls registered for it.
struct Scripted(HashMap<String, String>);

fn prompt_key(messages: &[lachesis_inference::ChatMessage], tools: &[String]) -> String {
    json!([messages, tools]).to_string()
}

impl Policy for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let tools: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let text = self
            .0
            .get(&prompt_key(&request.messages, &tools))
            .cloned()
            .unwrap_or_default();
        let ids: Vec<u32> = text.bytes().map(u32::from).collect();
        let rollout = rollout_from_ids(&[1, 2], &ids, &vec![-0.1; ids.len()], text, Finish::Stop);
        Box::pin(async move { Ok(vec![rollout]) })
    }
}

fn scripted_truth(dir: &Path, limit: usize) -> Scripted {
    let mut answers = HashMap::new();
    for category in Category::ALL {
        for q in load(dir, category)
            .expect("loading")
            .into_iter()
            .take(limit)
        {
            let tools: Vec<String> = q.functions.iter().map(|f| f.name.clone()).collect();
            let text: Vec<String> = first_values(&q).iter().map(render_call).collect();
            let previous = answers.insert(prompt_key(&q.messages, &tools), text.join("\n"));
            assert!(previous.is_none(), "{}: two questions share a prompt", q.id);
        }
    }
    Scripted(answers)
}

#[tokio::test]
async fn evaluate_scores_the_right_answers_full_and_silence_zero() {
    let dir = data();
    let limit = 60;
    let report = evaluate(&scripted_truth(&dir, limit), &dir, Some(limit), 256)
        .await
        .expect("evaluating");
    assert_eq!(report.categories.len(), 4);
    for score in &report.categories {
        assert_eq!(score.total, limit, "{}", score.category);
        let wrong: Vec<_> = report
            .outcomes
            .iter()
            .filter(|o| o.failure.is_some())
            .collect();
        assert_eq!(score.correct, limit, "{}: {wrong:?}", score.category);
        assert_eq!(score.accuracy(), 1.0);
    }
    let silent = evaluate(&Scripted(HashMap::new()), &dir, Some(limit), 256)
        .await
        .expect("evaluating");
    for score in &silent.categories {
        assert_eq!((score.total, score.correct, score.unparsed), (limit, 0, 0));
        assert_eq!(score.accuracy(), 0.0);
    }
}

#[tokio::test]
async fn malformed_completions_count_as_wrong_and_unparsed() {
    let dir = data();
    let q = &load(&dir, Category::SimplePython).expect("loading")[0];
    let tools: Vec<String> = q.functions.iter().map(|f| f.name.clone()).collect();
    let answers = HashMap::from([(
        prompt_key(&q.messages, &tools),
        "<tool_call>\n{\"name\": oops}\n</tool_call>".to_string(),
    )]);
    let report = evaluate(&Scripted(answers), &dir, Some(1), 64)
        .await
        .expect("evaluating");
    let score = report.score(Category::SimplePython).expect("simple_python");
    assert_eq!((score.total, score.correct, score.unparsed), (1, 0, 1));
}

#[test]
fn every_question_loads_and_offers_json_schema_tools() {
    let dir = data();
    let sizes: Vec<usize> = Category::ALL
        .iter()
        .map(|&c| load(&dir, c).expect("loading").len())
        .collect();
    assert_eq!(sizes, [400, 200, 200, 200]);
    let q = load(&dir, Category::ParallelMultiple).expect("loading");
    let spec = tool_spec(&q[0].functions[0]);
    assert_eq!(spec.name, "math_toolkit.sum_of_multiples");
    assert_eq!(spec.parameters["type"], "object");
    assert_eq!(spec.parameters["properties"]["multiples"]["type"], "array");
    let schema = schema::json_schema(&json!({
        "type": "dict",
        "properties": {"x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "float"}},
                       "a": {"type": "any", "description": "d"}}
    }));
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {
            "x": {"type": "number"}, "t": {"type": "array", "items": {"type": "number"}},
            "a": {"description": "d"}}})
    );
}

#[test]
fn unreadable_data_are_typed_errors() {
    let scratch = std::env::temp_dir().join(format!("lachesis-bfcl-bad-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("possible_answer")).expect("scratch");
    assert!(matches!(
        load(&scratch, Category::Multiple),
        Err(BfclError::Read { .. })
    ));
    std::fs::write(scratch.join("BFCL_v4_multiple.json"), "{\"id\": 1}\n").expect("write");
    std::fs::write(
        scratch.join("possible_answer/BFCL_v4_multiple.json"),
        "{\"id\": \"a\", \"ground_truth\": []}\n",
    )
    .expect("write");
    assert!(matches!(
        load(&scratch, Category::Multiple),
        Err(BfclError::Malformed { line: 1, .. })
    ));
    std::fs::write(
        scratch.join("BFCL_v4_multiple.json"),
        "{\"id\": \"b\", \"question\": [], \"function\": []}\n",
    )
    .expect("write");
    assert!(matches!(
        load(&scratch, Category::Multiple),
        Err(BfclError::IdMismatch { .. })
    ));
    let _ = std::fs::remove_dir_all(&scratch);
}
