//! A judge's score, read from its (untrusted) answer: the last `\boxed{...}` outside any
//! `<think>` block. This is the cat caretaker's judging protocol: the rubric writes its verdict in
//! this form ([`super::rubric`]), model judges are asked for it ([`super::judge`]), and the
//! marketplace's cards are read by it. A score the judge only considered while thinking is not its
//! verdict, and a missing or unreadable score is a typed error rather than 0.0, so a judge's
//! failure is never scored as a terrible answer: whoever asked leaves that judge out.

use std::fmt;

/// Why no score could be read.
#[derive(Debug, Clone, PartialEq)]
pub enum VerdictError {
    /// No `\boxed{` outside the thinking.
    NoBoxedScore,
    /// `\boxed{` without its closing brace.
    Unclosed,
    /// The box holds something other than a number (a fraction like `8/10` or a percentage is a
    /// number here).
    NotANumber(String),
    /// A number outside 0..=1 (after reading `x/10`, `x/100` or `x%`).
    OutOfRange(f64),
}

impl fmt::Display for VerdictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerdictError::NoBoxedScore => write!(f, "no \\boxed{{score}} after the thinking"),
            VerdictError::Unclosed => write!(f, "\\boxed{{ is never closed"),
            VerdictError::NotANumber(content) => {
                let shown: String = content.chars().take(40).collect();
                write!(f, "\\boxed{{{shown}}} does not hold a number")
            }
            VerdictError::OutOfRange(value) => write!(f, "score {value} is outside 0..1"),
        }
    }
}

impl std::error::Error for VerdictError {}

/// The text with `<think>...</think>` blocks removed; an unclosed `<think>` hides the rest.
fn outside_thinking(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<think>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The score in 0..=1 that the judge's answer gives.
pub fn parse_judge_score(text: &str) -> Result<f64, VerdictError> {
    let visible = outside_thinking(text);
    let start = visible
        .rfind("\\boxed{")
        .ok_or(VerdictError::NoBoxedScore)?;
    let inner = &visible[start + "\\boxed{".len()..];
    let end = inner.find('}').ok_or(VerdictError::Unclosed)?;
    read_score(inner[..end].trim())
}

fn read_score(content: &str) -> Result<f64, VerdictError> {
    let not_a_number = || VerdictError::NotANumber(content.to_string());
    let number = |s: &str| -> Result<f64, VerdictError> {
        let s = s.trim();
        // Plain decimals only: no `inf`, `nan`, exponents or signs beyond a leading minus.
        let digits = s.strip_prefix('-').unwrap_or(s);
        if digits.is_empty()
            || digits.len() > 24
            || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            || digits.bytes().filter(|&b| b == b'.').count() > 1
            || digits == "."
        {
            return Err(not_a_number());
        }
        s.parse::<f64>().map_err(|_| not_a_number())
    };
    let value = if let Some(percent) = content.strip_suffix('%') {
        number(percent)? / 100.0
    } else if let Some((top, bottom)) = content.split_once('/') {
        let bottom = number(bottom)?;
        if bottom != 10.0 && bottom != 100.0 && bottom != 1.0 {
            return Err(not_a_number());
        }
        number(top)? / bottom
    } else {
        number(content)?
    };
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(VerdictError::OutOfRange(value))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn reads_the_last_box_outside_the_thinking() {
        assert_eq!(parse_judge_score("Good answer. \\boxed{0.8}"), Ok(0.8));
        assert_eq!(parse_judge_score("\\boxed{ 1 }"), Ok(1.0));
        assert_eq!(
            parse_judge_score("<think>maybe \\boxed{0.1}</think> \\boxed{0.9}"),
            Ok(0.9)
        );
        assert_eq!(
            parse_judge_score("first \\boxed{0.2}, revised: \\boxed{0.6}"),
            Ok(0.6)
        );
        assert_eq!(parse_judge_score("\\boxed{7/10}"), Ok(0.7));
        assert_eq!(parse_judge_score("\\boxed{85%}"), Ok(0.85));
        assert_eq!(parse_judge_score("\\boxed{.5}"), Ok(0.5));
    }

    #[test]
    fn anything_else_is_a_typed_error() {
        assert_eq!(
            parse_judge_score("I rate it 0.7"),
            Err(VerdictError::NoBoxedScore)
        );
        assert_eq!(
            parse_judge_score("<think>\\boxed{0.3}</think> no verdict"),
            Err(VerdictError::NoBoxedScore)
        );
        assert_eq!(
            parse_judge_score("<think>\\boxed{0.3} never ends"),
            Err(VerdictError::NoBoxedScore)
        );
        assert_eq!(
            parse_judge_score("\\boxed{0.7"),
            Err(VerdictError::Unclosed)
        );
        assert_eq!(
            parse_judge_score("\\boxed{good}"),
            Err(VerdictError::NotANumber("good".into()))
        );
        assert_eq!(
            parse_judge_score("\\boxed{}"),
            Err(VerdictError::NotANumber(String::new()))
        );
        for junk in ["nan", "inf", "1e-1", "0.5.5", "+0.5", "3/4", ".", "0x1"] {
            assert!(
                matches!(
                    parse_judge_score(&format!("\\boxed{{{junk}}}")),
                    Err(VerdictError::NotANumber(_))
                ),
                "{junk}"
            );
        }
        assert_eq!(
            parse_judge_score("\\boxed{8}"),
            Err(VerdictError::OutOfRange(8.0))
        );
        assert_eq!(
            parse_judge_score("\\boxed{-0.1}"),
            Err(VerdictError::OutOfRange(-0.1))
        );
        assert_eq!(
            parse_judge_score("\\boxed{120%}"),
            Err(VerdictError::OutOfRange(1.2))
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_scores_stay_in_range(text in ".{0,200}") {
            if let Ok(score) = parse_judge_score(&text) {
                prop_assert!((0.0..=1.0).contains(&score));
            }
        }

        #[test]
        fn a_boxed_score_after_any_prose_is_read(
            prose in "[^\\\\<]{0,80}",
            thinking in "[^<]{0,80}",
            milli in 0u32..=1000,
        ) {
            let score = f64::from(milli) / 1000.0;
            let text = format!("<think>{thinking}</think>{prose}\\boxed{{{score}}}");
            prop_assert_eq!(parse_judge_score(&text), Ok(score));
        }
    }
}
