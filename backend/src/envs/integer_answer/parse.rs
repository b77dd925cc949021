//! Reading the final answer out of a model's completion. Model output is untrusted input: every
//! string gives a typed answer or a typed error, never a panic.
//!
//! Two spellings count as a final answer: a line `Answer: <integer>` (the marker anywhere, any
//! ASCII case) and LaTeX `\boxed{<integer>}`. Markdown and LaTeX decoration around the number
//! (`**`, `$`, a closing full stop) is forgiven; anything else after the marker makes the answer
//! "not an integer". A completion may restate its answer, but two different answers are refused:
//! guessing which one was meant would reward hedging.

/// Why no single integer answer could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no final answer (expected a line `Answer: <integer>` or \\boxed{{<integer>}})")]
    NoAnswer,
    #[error("the final answer is empty")]
    Empty,
    #[error("several different answers: {first} and {second}")]
    Ambiguous { first: i64, second: i64 },
    #[error("the final answer {0:?} is not an integer")]
    NotAnInteger(String),
    #[error("the final answer {0:?} does not fit in 64 bits")]
    Overflow(String),
    #[error("\\boxed{{ is never closed")]
    Unterminated,
}

const MARKER: &[u8] = b"answer:";
const BOXED: &str = "\\boxed{";
/// Error messages quote at most this much of the model's text.
const QUOTE_LIMIT: usize = 48;

/// The one integer the completion gives as its final answer.
pub fn parse_answer(text: &str) -> Result<i64, ParseError> {
    let mut answer: Option<i64> = None;
    for candidate in candidates(text) {
        let value = candidate?;
        match answer {
            Some(first) if first != value => {
                return Err(ParseError::Ambiguous {
                    first,
                    second: value,
                });
            }
            _ => answer = Some(value),
        }
    }
    answer.ok_or(ParseError::NoAnswer)
}

/// How an answer is rendered for the model to imitate; `parse_answer` reads it back.
pub fn render_answer(value: i64) -> String {
    format!("Answer: {value}")
}

/// Every answer the text states, in order of appearance.
fn candidates(text: &str) -> Vec<Result<i64, ParseError>> {
    let mut found: Vec<(usize, Result<i64, ParseError>)> = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = find_ascii_ci(&bytes[at..], MARKER) {
        // The marker is ASCII, so both ends of a match are character boundaries.
        let start = at + offset + MARKER.len();
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        found.push((at + offset, parse_integer(&text[start..line_end])));
        at = start;
    }
    let mut at = 0;
    while let Some(offset) = text[at..].find(BOXED) {
        let start = at + offset + BOXED.len();
        match closing_brace(&text[start..]) {
            Some(len) => found.push((at + offset, parse_integer(&text[start..start + len]))),
            None => found.push((at + offset, Err(ParseError::Unterminated))),
        }
        at = start;
    }
    found.sort_by_key(|(position, _)| *position);
    found.into_iter().map(|(_, result)| result).collect()
}

/// The index of `needle` (lowercase ASCII) in `haystack`, ignoring ASCII case.
fn find_ascii_ci(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

/// The length of the text before the `}` that closes an already opened brace, if any.
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// An integer with optional decoration: sign (`-`, `+`, or U+2212 `−`), thousands commas.
fn parse_integer(raw: &str) -> Result<i64, ParseError> {
    let text = strip_decoration(raw);
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let (negative, digits) = if let Some(rest) = text.strip_prefix('-') {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix('\u{2212}') {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix('+') {
        (false, rest)
    } else {
        (false, text)
    };
    if !valid_digit_groups(digits) {
        return Err(ParseError::NotAnInteger(quote(raw)));
    }
    // Accumulate negatively so i64::MIN parses too; overflow is a typed error, not a wrap.
    let mut value: i64 = 0;
    for digit in digits.bytes().filter(u8::is_ascii_digit) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_sub(i64::from(digit - b'0')))
            .ok_or_else(|| ParseError::Overflow(quote(raw)))?;
    }
    if negative {
        Ok(value)
    } else {
        value
            .checked_neg()
            .ok_or_else(|| ParseError::Overflow(quote(raw)))
    }
}

/// `1234` or `1,234` (one to three digits, then groups of exactly three); nothing else.
fn valid_digit_groups(digits: &str) -> bool {
    if !digits.bytes().all(|b| b.is_ascii_digit() || b == b',') {
        return false;
    }
    let mut groups = digits.split(',');
    let first = groups.next().unwrap_or_default();
    if !digits.contains(',') {
        return !first.is_empty();
    }
    (1..=3).contains(&first.len()) && groups.all(|g| g.len() == 3)
}

/// Drops whitespace, Markdown emphasis, LaTeX math delimiters and a closing full stop.
fn strip_decoration(raw: &str) -> &str {
    let mut text = raw.trim();
    loop {
        let before = text.len();
        for wrapper in ["**", "*", "$", "\\(", "\\)", "`"] {
            text = text.strip_prefix(wrapper).unwrap_or(text);
            text = text.strip_suffix(wrapper).unwrap_or(text);
        }
        text = text.strip_suffix('.').unwrap_or(text).trim();
        if text.len() == before {
            return text;
        }
    }
}

fn quote(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_answer_line_in_its_common_spellings() {
        assert_eq!(parse_answer("7 * 8 = 56\nAnswer: 56"), Ok(56));
        assert_eq!(parse_answer("answer:-3"), Ok(-3));
        assert_eq!(parse_answer("**Answer:** **1,234**."), Ok(1234));
        assert_eq!(parse_answer("ANSWER: $\u{2212}12$"), Ok(-12));
        assert_eq!(parse_answer("so \\boxed{42} it is"), Ok(42));
        assert_eq!(parse_answer("Answer: 42\n\\boxed{42}\nAnswer: 42."), Ok(42));
        assert_eq!(parse_answer(&format!("Answer: {}", i64::MIN)), Ok(i64::MIN));
    }

    #[test]
    fn refuses_what_is_not_one_integer() {
        assert_eq!(parse_answer("The answer is 56."), Err(ParseError::NoAnswer));
        assert_eq!(parse_answer("Answer:   \n56"), Err(ParseError::Empty));
        assert_eq!(
            parse_answer("Answer: 5\nAnswer: 6"),
            Err(ParseError::Ambiguous {
                first: 5,
                second: 6
            })
        );
        assert_eq!(
            parse_answer("Answer: 4.5"),
            Err(ParseError::NotAnInteger("4.5".into()))
        );
        assert_eq!(
            parse_answer("Answer: 56 apples"),
            Err(ParseError::NotAnInteger("56 apples".into()))
        );
        assert_eq!(
            parse_answer("Answer: 12,34"),
            Err(ParseError::NotAnInteger("12,34".into()))
        );
        assert_eq!(
            parse_answer("Answer: 99999999999999999999"),
            Err(ParseError::Overflow("99999999999999999999".into()))
        );
        assert_eq!(parse_answer("\\boxed{12"), Err(ParseError::Unterminated));
        assert_eq!(
            parse_answer("\\boxed{\\frac{1}{2}}"),
            Err(ParseError::NotAnInteger("\\frac{1}{2}".into()))
        );
    }

    #[test]
    fn long_garbage_is_quoted_briefly() {
        let err = parse_answer(&format!("Answer: {}", "é".repeat(500))).unwrap_err();
        let ParseError::NotAnInteger(quoted) = err else {
            panic!("expected NotAnInteger, got {err:?}");
        };
        assert!(quoted.chars().count() <= QUOTE_LIMIT + 1);
    }

    /// Text that states no answer of its own.
    fn surrounding() -> impl Strategy<Value = String> {
        any::<String>().prop_filter("no answer markers", |s| {
            !s.to_ascii_lowercase().contains("answer") && !s.contains("boxed")
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_text_never_panics(text in any::<String>()) {
            let _ = parse_answer(&text);
        }

        #[test]
        fn text_around_markers_never_panics(
            a in ".{0,20}", b in ".{0,20}", marker in prop_oneof!["Answer:", "\\\\boxed\\{", "}"]
        ) {
            let _ = parse_answer(&format!("{a}{marker}{b}{marker}{a}"));
        }

        #[test]
        fn a_rendered_answer_in_any_text_parses_back(
            value in any::<i64>(), before in surrounding(), after in surrounding()
        ) {
            let text = format!("{before}\n{}\n{after}", render_answer(value));
            prop_assert_eq!(parse_answer(&text), Ok(value));
        }

        #[test]
        fn a_boxed_answer_in_any_text_parses_back(
            value in any::<i64>(), before in surrounding(), after in surrounding()
        ) {
            let text = format!("{before} \\boxed{{{value}}} {after}");
            prop_assert_eq!(parse_answer(&text), Ok(value));
        }
    }
}
