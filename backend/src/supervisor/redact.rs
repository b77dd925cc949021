//! Error texts shown to users (`GET /api/system/tasks`) and written to logs without the secrets
//! they may quote: a failure to connect names the database URL, password included.

/// Longest error text kept, in bytes: a task's whole error chain is useful, a page of it is not.
pub const MAX_ERROR_BYTES: usize = 1000;

/// `text` with the password of every URL (`scheme://user:password@host`) and every
/// `password=...` pair (libpq's keyword form) replaced by `***`, cut to [`MAX_ERROR_BYTES`].
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_ERROR_BYTES));
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        out.push_str(&word(&rest[..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    if out.len() > MAX_ERROR_BYTES {
        let mut cut = MAX_ERROR_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

fn word(word: &str) -> String {
    if word.contains("://") {
        return crate::db::redact(word);
    }
    match word.to_ascii_lowercase().find("password=") {
        Some(at) => format!("{}***", &word[..at + "password=".len()]),
        None => word.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_and_keywords_are_hidden() {
        let shown =
            text("cannot connect to Postgres at postgres://app:s3cret@db:5432/lachesis: refused");
        assert_eq!(
            shown,
            "cannot connect to Postgres at postgres://app:***@db:5432/lachesis: refused"
        );
        assert_eq!(
            text("host=db user=app PASSWORD=s3cret dbname=x"),
            "host=db user=app PASSWORD=*** dbname=x"
        );
        assert_eq!(text("  plain\ttext  "), "  plain\ttext  ");
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let shown = text(&"é".repeat(MAX_ERROR_BYTES));
        assert!(shown.len() <= MAX_ERROR_BYTES + '…'.len_utf8());
        assert!(shown.ends_with('…'));
    }
}
