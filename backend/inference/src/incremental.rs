//! Text of a growing list of tokens, as a stream shows it, without decoding the list from its
//! start at every new token: only the tokens since the last settled point are decoded, with a few
//! before them as context (a decoder may treat the first token of a list differently, such as
//! dropping its leading space). A point is settled once the text before it ends on a whole
//! character.

use crate::{EngineError, ModelTokenizer};

/// Tokens before the unsettled ones decoded with them, so they read as they do mid-answer.
const CONTEXT: usize = 4;

/// The decoded text of the tokens pushed so far.
#[derive(Debug, Default, Clone)]
pub struct IncrementalText {
    tokens: Vec<u32>,
    /// Tokens whose text is in `settled_text` and will not change.
    settled: usize,
    settled_text: String,
}

impl IncrementalText {
    pub fn push(&mut self, token: u32) {
        self.tokens.push(token);
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The text of every token pushed, `skip_last` of them left out (an end-of-sequence token).
    pub fn text(
        &mut self,
        tokenizer: &ModelTokenizer,
        skip_last: bool,
    ) -> Result<String, EngineError> {
        let end = self.tokens.len() - usize::from(skip_last && !self.tokens.is_empty());
        if end < self.settled {
            return tokenizer.decode(&self.tokens[..end]);
        }
        let from = self.settled.saturating_sub(CONTEXT);
        let with_new = tokenizer.decode(&self.tokens[from..end])?;
        let context = tokenizer.decode(&self.tokens[from..self.settled])?;
        let Some(new) = with_new.strip_prefix(context.as_str()) else {
            // The context reads differently with what follows: decode it all, as a last resort.
            return tokenizer.decode(&self.tokens[..end]);
        };
        let text = format!("{}{new}", self.settled_text);
        if !text.ends_with(char::REPLACEMENT_CHARACTER) {
            self.settled = end;
            self.settled_text.clone_from(&text);
        }
        Ok(text)
    }
}
