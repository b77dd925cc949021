//! `letter_count`: how many times does a letter appear in a word? The classic test of whether a
//! model can see the letters behind its tokens, with a verifiable answer, as in Atropos's letter
//! counting environment.
//!
//! Words come from a built-in English list or are random lowercase strings (`words: "random"`).
//! The letter is one of the word's (picked by position, so repeated letters come up more often)
//! or, for `absent_share` of the puzzles, one the word lacks: zero is an answer too.
//!
//! Reward, per sequence, as in `arithmetic` ([`integer_answer::score`]): 1.0 for the right count
//! in the form `Answer: <integer>`, `format_bonus` (default 0.1) for a wrong one in that form,
//! 0.0 otherwise and for completions cut off at `max_tokens`.

pub mod words;

use lachesis_inference::ChatMessage;
use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::integer_answer::{
    self, IntegerAnswerEnv, IntegerQuestion, IntegerTask, Scoring, render_answer,
};
use super::registry::{EnvDescriptor, ServerNeeds};
use super::{EnvError, EnvOptions};

pub const NAME: &str = "letter_count";

/// Its entry in the registry of built-in environments.
pub const DESCRIPTOR: EnvDescriptor = EnvDescriptor {
    name: NAME,
    description: "How many times does a letter appear in a word (English or random)? A \
                  verifiable count; reward 1 when exact, a small bonus for a well-formed wrong \
                  answer.",
    needs: ServerNeeds::Nothing,
    build: Some(|o| Ok(Box::new(LetterCountEnv::new(o)?))),
    hosted: None,
};

const SYSTEM_PROMPT: &str = "You count letters in words. Spell the word letter by letter, note \
     where the letter appears, then write the count alone on the last line, in the form \
     `Answer: <integer>`.";

/// Longest random word (`max_length`'s upper limit).
const MAX_LENGTH_LIMIT: usize = 64;

/// Worked examples shown before the question; neither word is in the list.
const EXAMPLES: [(&str, char); 2] = [("strawberry", 'r'), ("planet", 'x')];

/// One puzzle; also the environment's `Item` (`{"word": "banana", "letter": "a"}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Puzzle {
    pub word: String,
    pub letter: char,
}

impl Puzzle {
    pub fn new(word: &str, letter: char) -> Self {
        Self {
            word: word.to_string(),
            letter,
        }
    }

    /// Where the letter stands in the word, counted from 1, ignoring ASCII case.
    fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.word
            .chars()
            .enumerate()
            .filter(|(_, c)| c.eq_ignore_ascii_case(&self.letter))
            .map(|(i, _)| i + 1)
    }

    /// How many of the word's characters are the letter.
    pub fn count(&self) -> usize {
        self.positions().count()
    }

    /// The conversation asking this puzzle, after `examples` solved ones (at most
    /// [`EXAMPLES`]'s length).
    pub fn messages(&self, examples: usize) -> Vec<ChatMessage> {
        let mut messages = vec![ChatMessage::new("system", SYSTEM_PROMPT)];
        for &(word, letter) in EXAMPLES.iter().take(examples) {
            let example = Puzzle::new(word, letter);
            messages.push(ChatMessage::new("user", example.question()));
            messages.push(ChatMessage::new("assistant", example.worked_answer()));
        }
        messages.push(ChatMessage::new("user", self.question()));
        messages
    }

    /// The word spelled out, the letter's positions, and the rendered count.
    fn worked_answer(&self) -> String {
        let spelled: Vec<String> = self.word.chars().map(String::from).collect();
        let positions: Vec<String> = self.positions().map(|p| p.to_string()).collect();
        let found = match positions.len() {
            0 => format!("The letter '{}' does not appear.", self.letter),
            1 => format!(
                "The letter '{}' is at position {}.",
                self.letter, positions[0]
            ),
            _ => format!(
                "The letter '{}' is at positions {}.",
                self.letter,
                positions.join(", ")
            ),
        };
        let count = i64::try_from(positions.len()).unwrap_or(i64::MAX);
        format!("{}\n{found}\n{}", spelled.join(" "), render_answer(count))
    }

    /// A puzzle from the list or a random string, with a letter it has, or (with probability
    /// `absent_share`) one it lacks.
    pub fn random(rng: &mut StdRng, settings: &Settings) -> Puzzle {
        let word = match settings.words {
            WordSource::English => {
                words::WORDS[rng.random_range(0..words::WORDS.len())].to_string()
            }
            WordSource::Random => {
                let length = rng.random_range(settings.min_length..=settings.max_length);
                (0..length)
                    .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
                    .collect()
            }
        };
        let absent: Vec<char> = ('a'..='z').filter(|c| !word.contains(*c)).collect();
        let letter = if !absent.is_empty() && rng.random_bool(settings.absent_share) {
            absent[rng.random_range(0..absent.len())]
        } else {
            let letters: Vec<char> = word.chars().collect();
            letters[rng.random_range(0..letters.len())]
        };
        Puzzle { word, letter }
    }
}

impl IntegerQuestion for Puzzle {
    fn question(&self) -> String {
        format!(
            "How many times does the letter '{}' appear in the word \"{}\"?",
            self.letter, self.word
        )
    }

    fn expected(&self) -> Option<i64> {
        i64::try_from(self.count()).ok()
    }
}

/// Where words come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WordSource {
    /// The built-in list of English words.
    English,
    /// Random lowercase strings of `min_length` to `max_length` letters.
    Random,
}

/// Settings read from `EnvOptions::settings`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub words: WordSource,
    pub min_length: usize,
    pub max_length: usize,
    /// The share of puzzles whose letter is not in the word.
    pub absent_share: f64,
    /// Worked examples before each question (0 to 2).
    pub examples: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            words: WordSource::English,
            min_length: 4,
            max_length: 12,
            absent_share: 0.2,
            examples: 1,
        }
    }
}

impl Settings {
    fn check(&self) -> Result<(), EnvError> {
        let invalid = |message: String| Err(EnvError::InvalidOption(format!("{NAME}: {message}")));
        if self.min_length == 0 || self.min_length > self.max_length {
            return invalid("min_length must be at least 1 and at most max_length".into());
        }
        if self.max_length > MAX_LENGTH_LIMIT {
            return invalid(format!("max_length must be at most {MAX_LENGTH_LIMIT}"));
        }
        if !(0.0..=1.0).contains(&self.absent_share) {
            return invalid("absent_share must be between 0 and 1".into());
        }
        if self.examples > EXAMPLES.len() {
            return invalid(format!("examples must be at most {}", EXAMPLES.len()));
        }
        Ok(())
    }
}

/// The settings are the whole task: they say how puzzles are drawn and asked.
impl IntegerTask for Settings {
    const NAME: &str = NAME;
    const EVAL_SEED: u64 = 0x1e77e5;
    type Question = Puzzle;

    fn draw(&self, rng: &mut StdRng) -> Puzzle {
        Puzzle::random(rng, self)
    }

    fn messages(&self, puzzle: &Puzzle) -> Vec<ChatMessage> {
        puzzle.messages(self.examples)
    }

    fn check(&self, puzzle: &Puzzle) -> Result<(), EnvError> {
        if puzzle.word.is_empty() || puzzle.word.chars().count() > MAX_LENGTH_LIMIT {
            return Err(EnvError::InvalidItem(format!(
                "the word must have 1 to {MAX_LENGTH_LIMIT} characters"
            )));
        }
        Ok(())
    }
}

pub type LetterCountEnv = IntegerAnswerEnv<Settings>;

impl LetterCountEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let (scoring, settings): (Scoring, Settings) = integer_answer::settings(NAME, options)?;
        settings.check()?;
        IntegerAnswerEnv::with_task(settings, scoring, options)
    }
}

#[cfg(test)]
mod tests;
