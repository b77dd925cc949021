//! Test fixtures: a real (if tiny) byte-level BPE tokenizer and answers shaped like the servers'.

use std::sync::{Arc, OnceLock};

use lachesis_inference::ModelTokenizer;

pub const IM_START: u32 = 256;
pub const IM_END: u32 = 257;

/// GPT-2's byte-to-character table: printable bytes map to themselves, the rest to U+0100 onwards,
/// so every byte is one visible vocabulary entry.
fn byte_char(byte: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return char::from(byte);
    }
    let rank = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(256 + rank).unwrap_or('?')
}

/// A byte-level BPE tokenizer without merges: token id = byte value, plus ChatML's `<|im_start|>`
/// (256) and `<|im_end|>` (257, the EOS). It goes through `ModelTokenizer::from_hf_dir`, the same
/// path a served model's tokenizer takes, and uses the built-in ChatML template.
pub fn byte_tokenizer() -> Arc<ModelTokenizer> {
    static TOKENIZER: OnceLock<Arc<ModelTokenizer>> = OnceLock::new();
    TOKENIZER
        .get_or_init(|| {
            let mut vocab = serde_json::Map::new();
            for byte in 0..=255u8 {
                vocab.insert(byte_char(byte).to_string(), byte.into());
            }
            vocab.insert("<|im_start|>".into(), IM_START.into());
            vocab.insert("<|im_end|>".into(), IM_END.into());
            let special = |id: u32, content: &str| {
                serde_json::json!({"id": id, "content": content, "single_word": false,
                    "lstrip": false, "rstrip": false, "normalized": false, "special": true})
            };
            let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
                "trim_offsets": true, "use_regex": true});
            let tokenizer = serde_json::json!({
                "version": "1.0",
                "truncation": null,
                "padding": null,
                "added_tokens": [special(IM_START, "<|im_start|>"), special(IM_END, "<|im_end|>")],
                "normalizer": null,
                "pre_tokenizer": byte_level,
                "post_processor": null,
                "decoder": byte_level,
                "model": {"type": "BPE", "dropout": null, "unk_token": null,
                    "continuing_subword_prefix": null, "end_of_word_suffix": null,
                    "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                    "vocab": vocab, "merges": []}
            });
            let dir = std::env::temp_dir()
                .join(format!("lachesis-policy-tokenizer-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string())
                .expect("tokenizer.json written");
            std::fs::write(
                dir.join("tokenizer_config.json"),
                r#"{"eos_token": "<|im_end|>"}"#,
            )
            .expect("tokenizer_config.json written");
            let loaded = ModelTokenizer::from_hf_dir(&dir).expect("the tokenizer loads");
            let _ = std::fs::remove_dir_all(&dir);
            Arc::new(loaded)
        })
        .clone()
}

/// vLLM `/generate` (`vllm_api_server.py`) for `n=2, logprobs=0`, ids from SmolLM2's vocabulary.
pub const VLLM_SAMPLE: &str = r#"{
    "text": ["Paris.", "It is Paris"],
    "prompt": "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n",
    "finish_reasons": ["stop", "length"],
    "logprobs": [
        [[{"20614": -0.0123}], [{"30": -0.51}], [{"2": -0.002}]],
        [[{"1583": -1.25}], [{"314": -0.75}], [{"20614": -0.125}]]
    ],
    "prompt_token_ids": [1, 4093, 198, 2],
    "token_ids": [[20614, 30, 2], [1583, 314, 20614]]
}"#;

/// OpenAI `/v1/completions` with `logprobs: 1`, as vLLM's OpenAI server answers it.
pub const COMPLETION_SAMPLE: &str = r#"{
    "id": "cmpl-8f2c", "object": "text_completion", "created": 1718000000, "model": "smollm2",
    "choices": [
        {"index": 1, "text": " Lyon", "finish_reason": "length",
         "logprobs": {"text_offset": [0, 2], "token_logprobs": [-2.5, -0.25], "tokens": [" L", "yon"],
                      "top_logprobs": [{" L": -2.5, " P": -0.1}, {"yon": -0.25}]}},
        {"index": 0, "text": " Paris", "finish_reason": "stop",
         "logprobs": {"text_offset": [0], "token_logprobs": [-0.05], "tokens": [" Paris"],
                      "top_logprobs": [{" Paris": -0.05}]}}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
}"#;

/// OpenAI `/v1/chat/completions` with `logprobs: true`, shaped as OpenAI documents it.
pub const CHAT_SAMPLE: &str = r#"{
    "id": "chatcmpl-123", "object": "chat.completion", "created": 1702685778, "model": "gpt-4o-mini",
    "system_fingerprint": null,
    "choices": [{
        "index": 0,
        "message": {"role": "assistant", "content": "Hello there", "refusal": null},
        "logprobs": {"content": [
            {"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111],
             "top_logprobs": [{"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111]},
                              {"token": "Hi", "logprob": -1.3190403, "bytes": [72, 105]}]},
            {"token": " there", "logprob": -0.02, "bytes": [32, 116, 104, 101, 114, 101], "top_logprobs": []}
        ], "refusal": null},
        "finish_reason": "stop"
    }],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
}"#;

/// Asserts that `parse` refuses every one of `bodies` as a malformed answer.
pub fn assert_malformed<T>(parse: fn(&[u8]) -> Result<T, super::PolicyError>, bodies: &[&str]) {
    for body in bodies {
        assert!(
            matches!(
                parse(body.as_bytes()),
                Err(super::PolicyError::MalformedResponse(_))
            ),
            "{body}"
        );
    }
}

#[test]
fn the_byte_tokenizer_maps_bytes_to_their_own_ids() {
    let tokenizer = byte_tokenizer();
    assert_eq!(
        tokenizer.encode("hi é").expect("encodes"),
        [104, 105, 32, 195, 169]
    );
    assert_eq!(tokenizer.encode("<|im_end|>").expect("encodes"), [IM_END]);
    assert_eq!(tokenizer.eos_token_id(), IM_END);
    assert_eq!(
        tokenizer
            .decode(&[104, 105, 32, 195, 169])
            .expect("decodes"),
        "hi é"
    );
}
