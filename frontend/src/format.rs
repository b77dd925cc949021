//! Numbers and times as the pages show them. Pure, so tested natively; the one function that
//! needs the browser's clock and time zone is kept apart at the bottom.

/// "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago".
pub fn ago(now_ms: i64, at_ms: i64) -> String {
    let s = (now_ms - at_ms).max(0) / 1_000;
    match s {
        0..5 => "just now".to_owned(),
        5..60 => format!("{s} s ago"),
        60..3_600 => format!("{} min ago", s / 60),
        3_600..86_400 => format!("{} h ago", s / 3_600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// "4 min 52 s", "9 s": what is left of a wait, to the second.
pub fn time_left(ms: i64) -> String {
    let s = ms.max(0) / 1_000;
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// A list of scores or advantages, each to two decimals, shortened after `max` entries.
pub fn numbers(values: &[f64], max: usize) -> String {
    let mut parts: Vec<String> = values.iter().take(max).map(|v| format!("{v:.2}")).collect();
    if values.len() > max {
        parts.push(format!("… +{}", values.len() - max));
    }
    parts.join(", ")
}

/// `HH:MM:SS` from its parts.
pub fn clock(hours: u32, minutes: u32, seconds: u32) -> String {
    format!("{hours:02}:{minutes:02}:{seconds:02}")
}

/// Milliseconds since the epoch, from the browser.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// The local wall-clock time of a Unix-milliseconds instant.
pub fn local_time(at_ms: i64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at_ms as f64));
    clock(date.get_hours(), date.get_minutes(), date.get_seconds())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_round_down_to_a_readable_unit() {
        assert_eq!(ago(10_000, 9_000), "just now");
        assert_eq!(ago(60_000, 18_000), "42 s ago");
        assert_eq!(ago(400_000, 0), "6 min ago");
        assert_eq!(ago(3 * 3_600_000 + 5, 0), "3 h ago");
        assert_eq!(ago(2 * 86_400_000, 0), "2 d ago");
        // A clock slightly behind the server's does not print negative ages.
        assert_eq!(ago(0, 2_000), "just now");
    }

    #[test]
    fn time_left_counts_down_in_minutes_and_seconds() {
        assert_eq!(time_left(292_400), "4 min 52 s");
        assert_eq!(time_left(60_000), "1 min 00 s");
        assert_eq!(time_left(59_999), "59 s");
        // A wait already over (or a clock ahead of the server's) shows nothing left.
        assert_eq!(time_left(-1_500), "0 s");
    }

    #[test]
    fn number_lists_are_short() {
        assert_eq!(numbers(&[0.5, 1.0], 4), "0.50, 1.00");
        assert_eq!(numbers(&[1.0, 2.0, 3.0], 2), "1.00, 2.00, … +1");
        assert_eq!(numbers(&[], 2), "");
    }

    #[test]
    fn clocks_are_zero_padded() {
        assert_eq!(clock(9, 5, 3), "09:05:03");
    }
}
