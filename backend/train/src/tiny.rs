//! A tiny llama and a character tokenizer for it: small enough to learn a toy task by GRPO in
//! seconds on two cores, and the same architecture, names and code paths as a real model.

use lachesis_inference::ModelTokenizer;
use tokenizers::Tokenizer;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::models::bpe::BPE;

use crate::TrainError;
use crate::config::LlamaConfig;

/// The tokenizer's end-of-sequence token.
pub const EOS: &str = "<eos>";

/// Prompts end here; the answer follows.
pub const ANSWER_MARK: char = '=';

/// Digits, the answer mark, then EOS: 12 tokens.
pub fn vocabulary() -> Vec<String> {
    let mut tokens: Vec<String> = ('0'..='9').map(String::from).collect();
    tokens.push(ANSWER_MARK.to_string());
    tokens.push(EOS.to_owned());
    tokens
}

/// Two layers, hidden 32, four query heads sharing two key/value heads (so grouped-query
/// attention is exercised), a 12-token vocabulary.
pub fn tiny_config() -> LlamaConfig {
    LlamaConfig {
        vocab_size: vocabulary().len(),
        hidden_size: 32,
        intermediate_size: 64,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        max_position_embeddings: 32,
        tie_word_embeddings: false,
    }
}

/// One token per character (a BPE without merges), no spaces added when decoding, and a chat
/// template that writes the user's text followed by the answer mark.
pub fn tiny_tokenizer() -> Result<ModelTokenizer, TrainError> {
    let vocab: tokenizers::models::bpe::Vocab = vocabulary()
        .into_iter()
        .enumerate()
        .map(|(id, token)| (token, id as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, Vec::new())
        .build()
        .map_err(|e| TrainError::Config(format!("building the tiny tokenizer: {e}")))?;
    let mut inner = Tokenizer::new(bpe);
    inner.with_decoder(Some(Fuse::new()));
    inner.add_special_tokens(&[tokenizers::AddedToken::from(EOS, true)]);
    // The answer follows the prompt's last character directly, so a prompt digit's own
    // position predicts the answer (the residual stream carries it; no attention is needed).
    let template = "{% for message in messages %}{{ message['content'] }}{% endfor %}".to_owned();
    ModelTokenizer::new(inner, Some(template), EOS)
        .map_err(|e| TrainError::Config(format!("the tiny tokenizer: {e}")))
}

#[cfg(test)]
mod tests {
    use lachesis_inference::ChatMessage;

    use super::*;

    #[test]
    fn the_tiny_tokenizer_reads_one_token_per_character_and_renders_its_template() {
        let t = tiny_tokenizer().unwrap();
        assert_eq!(t.vocab_size(), 12);
        assert_eq!(t.encode("37=").unwrap(), [3, 7, 10]);
        assert_eq!(t.decode(&[4, 2]).unwrap(), "42");
        assert_eq!(t.eos_token_id(), 11);
        let prompt = t
            .apply_chat_template(&[ChatMessage::new("user", "5")], true)
            .unwrap();
        assert_eq!(prompt, "5");
        tiny_config().validate().unwrap();
    }
}
