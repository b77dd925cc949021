//! atroposlib's own inference clients (`VLLMServer`, `OpenAIServer` from the PyPI package)
//! generating through the embedded model's `/generate` and `/v1` endpoints.

use std::time::Duration;

use lachesis_inference::{ChatMessage, ModelTokenizer};
use lachesis_tests::python::{TempFile, run_python, tail};
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use serde_json::Value;

fn gguf_tokenizer() -> ModelTokenizer {
    ModelTokenizer::from_gguf_file(&model_path()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn atroposlib_generates_through_generate_and_v1() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    let app = TestApp::spawn_with(config).await;
    let tokenizer = gguf_tokenizer();
    let tokenizer_dir =
        std::env::temp_dir().join(format!("lachesis-tokenizer-{}", std::process::id()));
    tokenizer.save_hf_dir(&tokenizer_dir).unwrap();
    let out = TempFile::new("atropos-inference");

    let output = run_python(
        "atropos_inference.py",
        &[&app.base, tokenizer_dir.to_str().unwrap(), out.path()],
        Duration::from_secs(600),
    )
    .await;
    let _ = std::fs::remove_dir_all(&tokenizer_dir);
    assert!(
        output.status.success(),
        "atropos_inference.py failed:\n{}",
        tail(&output.stderr, 4000)
    );
    let result: Value = serde_json::from_slice(&std::fs::read(&out.0).unwrap()).unwrap();

    // Hugging Face's tokenizer, loaded from our export, tokenizes and templates exactly as we do.
    let question = [ChatMessage::new("user", "What is 2+2?")];
    let ours = tokenizer.apply_chat_template(&question, true).unwrap();
    assert_eq!(result["hf_prompt"], ours.as_str());
    for (text, ids) in result["hf_encodings"].as_object().unwrap() {
        let theirs: Vec<u32> = serde_json::from_value(ids.clone()).unwrap();
        assert_eq!(theirs, tokenizer.encode(text).unwrap(), "{text:?}");
    }
    assert_eq!(
        serde_json::from_value::<Vec<u32>>(result["prompt_ids"].clone()).unwrap(),
        tokenizer.encode(&ours).unwrap()
    );

    // /generate: two greedy answers, token ids with one logprob each, Atropos's finish reasons.
    let outputs: Vec<Vec<u32>> = serde_json::from_value(result["output_ids"].clone()).unwrap();
    let logprobs: Vec<Vec<f64>> =
        serde_json::from_value(result["output_logprobs"].clone()).unwrap();
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0], outputs[1], "greedy answers agree");
    for (ids, lps) in outputs.iter().zip(&logprobs) {
        assert!(!ids.is_empty() && ids.len() <= 12);
        assert_eq!(ids.len(), lps.len());
        assert!(lps.iter().all(|lp| *lp <= 0.0));
    }
    for reason in result["finish_reasons"].as_array().unwrap() {
        assert!(reason == "stop" || reason == "length", "{reason}");
    }
    let decoded = tokenizer.decode(&outputs[0]).unwrap();

    // /v1 chat and text completions through both atroposlib server classes.
    let vllm_chat: Vec<String> = serde_json::from_value(result["vllm_chat"].clone()).unwrap();
    let openai_chat: Vec<String> = serde_json::from_value(result["openai_chat"].clone()).unwrap();
    assert_eq!(vllm_chat.len(), 2);
    assert!(vllm_chat[0].contains('4'), "{vllm_chat:?}");
    assert_eq!(openai_chat[0], vllm_chat[0]);
    assert!(
        vllm_chat[0].starts_with(decoded.trim_end_matches("<|im_end|>"))
            || decoded.starts_with(&vllm_chat[0])
    );
    let completion: Vec<String> = serde_json::from_value(result["completion"].clone()).unwrap();
    assert!(
        vllm_chat[0].starts_with(&completion[0]),
        "{completion:?} vs {vllm_chat:?}"
    );
}
