//! The model's tokenizer and chat template, from a GGUF file's metadata or a Hugging Face
//! tokenizer directory (`tokenizer.json` plus `tokenizer_config.json`).
//!
//! Environments need the exact token ids the policy saw (Atropos trains on `tokens`, `masks` and
//! `inference_logprobs`), so everything that turns chat messages into ids lives here, shared by the
//! embedded engine and by the clients of remote OpenAI and vLLM servers.

use std::path::Path;

use candle_core::quantized::gguf_file;
use serde::{Deserialize, Serialize};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

use crate::EngineError;

/// One chat message, as OpenAI's API and Hugging Face chat templates spell it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A tokenizer with the special tokens and chat template of its model.
#[derive(Clone)]
pub struct ModelTokenizer {
    inner: Tokenizer,
    chat_template: Option<String>,
    bos_token: Option<String>,
    eos_token: String,
    eos_token_id: u32,
}

/// GGUF token types (llama.cpp's `llama_token_type`): 3 is a control token, 4 user-defined.
const GGUF_TOKEN_CONTROL: i32 = 3;
const GGUF_TOKEN_USER_DEFINED: i32 = 4;

impl ModelTokenizer {
    /// Reads only the metadata of the GGUF file at `path` (not its weights).
    pub fn from_gguf_file(path: &Path) -> Result<Self, EngineError> {
        let mut file = std::fs::File::open(path)
            .map_err(|e| EngineError::Model(format!("opening {}: {e}", path.display())))?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| {
            EngineError::Model(format!("{} is not a GGUF file: {e}", path.display()))
        })?;
        Self::from_gguf(&content)
    }

    /// Rebuilds the byte-level BPE tokenizer stored in a GGUF file's metadata.
    pub fn from_gguf(content: &gguf_file::Content) -> Result<Self, EngineError> {
        let meta = &content.metadata;
        let get = |key: &str| {
            meta.get(key)
                .ok_or_else(|| EngineError::Model(format!("GGUF metadata lacks {key}")))
        };
        let model_kind = get("tokenizer.ggml.model")?
            .to_string()
            .map_err(model_err)?;
        if model_kind != "gpt2" {
            return Err(EngineError::Model(format!(
                "tokenizer model {model_kind:?} is not supported (byte-level BPE, \"gpt2\", is)"
            )));
        }
        let tokens: Vec<String> = get("tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(model_err)?
            .iter()
            .map(|v| v.to_string().cloned().map_err(model_err))
            .collect::<Result<_, _>>()?;
        let merges: Vec<(String, String)> = get("tokenizer.ggml.merges")?
            .to_vec()
            .map_err(model_err)?
            .iter()
            .map(|v| {
                let merge = v.to_string().map_err(model_err)?;
                merge
                    .split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .ok_or_else(|| EngineError::Model(format!("malformed merge {merge:?}")))
            })
            .collect::<Result<_, _>>()?;
        let token_types: Vec<i32> = match meta.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(model_err)?
                .iter()
                .map(|t| t.to_i32().map_err(model_err))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let token_id = |key: &str| -> Result<Option<u32>, EngineError> {
            meta.get(key)
                .map(|v| v.to_u32().map_err(model_err))
                .transpose()
        };
        let eos_token_id = token_id("tokenizer.ggml.eos_token_id")?
            .ok_or_else(|| EngineError::Model("GGUF metadata lacks an EOS token".into()))?;
        let bos_token_id = token_id("tokenizer.ggml.bos_token_id")?;
        let pre = meta
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok().cloned())
            .unwrap_or_default();

        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.clone(), id as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| EngineError::Model(format!("building the BPE model: {e}")))?;
        let mut inner = Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        // llama.cpp's "smollm" (and the Qwen/DeepSeek families) split digits one by one before the
        // GPT-2 regex; without it numbers tokenize differently from the model's training.
        if matches!(
            pre.as_str(),
            "smollm" | "qwen2" | "deepseek-llm" | "starcoder"
        ) {
            inner.with_pre_tokenizer(Some(Sequence::new(vec![
                Digits::new(true).into(),
                byte_level.into(),
            ])));
        } else {
            inner.with_pre_tokenizer(Some(byte_level));
        }
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(token_types.iter())
            .filter(|(_, kind)| matches!(**kind, GGUF_TOKEN_CONTROL | GGUF_TOKEN_USER_DEFINED))
            .map(|(token, _)| AddedToken::from(token.clone(), true))
            .collect();
        inner.add_special_tokens(&specials);

        let chat_template = meta
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok().cloned());
        let name_of = |id: u32| tokens.get(id as usize).cloned();
        Ok(Self {
            inner,
            chat_template,
            bos_token: bos_token_id.and_then(name_of),
            eos_token: name_of(eos_token_id)
                .ok_or_else(|| EngineError::Model("EOS token id out of range".into()))?,
            eos_token_id,
        })
    }

    /// A tokenizer built in code (a toy model's), with its chat template and end-of-sequence
    /// token, which must be in the vocabulary.
    pub fn new(
        inner: Tokenizer,
        chat_template: Option<String>,
        eos_token: &str,
    ) -> Result<Self, EngineError> {
        let eos_token_id = inner
            .token_to_id(eos_token)
            .ok_or_else(|| EngineError::Model(format!("EOS token {eos_token:?} not in vocab")))?;
        Ok(Self {
            inner,
            chat_template,
            bos_token: None,
            eos_token: eos_token.to_owned(),
            eos_token_id,
        })
    }

    /// Loads `tokenizer.json` and, when present, `tokenizer_config.json` (chat template, BOS, EOS)
    /// from a Hugging Face model directory.
    pub fn from_hf_dir(dir: &Path) -> Result<Self, EngineError> {
        let inner = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| EngineError::Model(format!("reading tokenizer.json: {e}")))?;
        let config: HfTokenizerConfig = match std::fs::read(dir.join("tokenizer_config.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| EngineError::Model(format!("reading tokenizer_config.json: {e}")))?,
            Err(_) => HfTokenizerConfig::default(),
        };
        let eos_token = config
            .eos_token
            .map(SpecialToken::into_content)
            .unwrap_or_else(|| "</s>".to_owned());
        let eos_token_id = inner
            .token_to_id(&eos_token)
            .ok_or_else(|| EngineError::Model(format!("EOS token {eos_token:?} not in vocab")))?;
        Ok(Self {
            inner,
            chat_template: config.chat_template,
            bos_token: config.bos_token.map(SpecialToken::into_content),
            eos_token,
            eos_token_id,
        })
    }

    /// Writes `tokenizer.json` and `tokenizer_config.json`, so Hugging Face tooling (for example
    /// atroposlib's `AutoTokenizer.from_pretrained(dir)`) tokenizes exactly as this model does.
    pub fn save_hf_dir(&self, dir: &Path) -> Result<(), EngineError> {
        std::fs::create_dir_all(dir).map_err(|e| EngineError::Io(e.to_string()))?;
        self.inner
            .save(dir.join("tokenizer.json"), false)
            .map_err(|e| EngineError::Io(format!("writing tokenizer.json: {e}")))?;
        let config = serde_json::json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "pad_token": self.eos_token,
            "add_bos_token": false,
            "chat_template": self.chat_template,
            "model_max_length": 8192,
        });
        std::fs::write(
            dir.join("tokenizer_config.json"),
            serde_json::to_vec_pretty(&config).expect("a JSON value serialises"),
        )
        .map_err(|e| EngineError::Io(e.to_string()))
    }

    /// Token ids of `text`; special tokens written in the text (`<|im_start|>`) map to their ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        self.inner
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    /// The text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    /// One token's vocabulary string (byte-level form), as vLLM keys logprob dictionaries.
    pub fn token_string(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn eos_token_id(&self) -> u32 {
        self.eos_token_id
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Renders chat messages with the model's own template (Jinja, as Hugging Face does).
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, EngineError> {
        let template = self.chat_template.as_deref().unwrap_or(CHATML_TEMPLATE);
        let mut env = minijinja::Environment::new();
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template("chat", template)
            .map_err(|e| EngineError::Template(e.to_string()))?;
        env.get_template("chat")
            .and_then(|t| {
                t.render(minijinja::context! {
                    messages => messages,
                    add_generation_prompt => add_generation_prompt,
                    bos_token => self.bos_token.clone().unwrap_or_default(),
                    eos_token => self.eos_token.clone(),
                })
            })
            .map_err(|e| EngineError::Template(e.to_string()))
    }
}

/// Used when a model ships no template: ChatML, the format SmolLM2 and many others were tuned on.
const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn model_err(e: candle_core::Error) -> EngineError {
    EngineError::Model(e.to_string())
}

#[derive(Default, Deserialize)]
struct HfTokenizerConfig {
    chat_template: Option<String>,
    bos_token: Option<SpecialToken>,
    eos_token: Option<SpecialToken>,
}

/// `tokenizer_config.json` spells a special token as a string or as `{"content": ...}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SpecialToken {
    Plain(String),
    Added { content: String },
}

impl SpecialToken {
    fn into_content(self) -> String {
        match self {
            SpecialToken::Plain(s) | SpecialToken::Added { content: s } => s,
        }
    }
}
