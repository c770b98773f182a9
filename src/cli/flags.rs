//! Flag value types: durations and label sets, parsed and printed the same way, so that a
//! flag's `--help` default can be the printed form of the default the options type declares.

use std::time::Duration;

/// Parses a duration flag: a Gateway API duration (`30s`, `500ms`, `2m`, `1h30m`) or a plain
/// number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(Duration::from_secs)
            .map_err(|e| format!("`{s}`: {e}"));
    }
    crate::translate::parse_duration(s).map_err(|e| e.to_string())
}

/// The shortest exact text [`parse_duration`] reads back as `d` (`300s` prints as `5m`).
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".to_owned(),
        _ if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        _ if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        _ if ms % 1000 == 0 => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_back() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        for d in [
            0, 1, 999, 1000, 1500, 60_000, 90_000, 300_000, 3_600_000, 5_400_000,
        ] {
            let d = Duration::from_millis(d);
            assert_eq!(
                parse_duration(&duration_text(d)),
                Ok(d),
                "{}",
                duration_text(d)
            );
        }
        assert_eq!(duration_text(Duration::from_secs(300)), "5m");
    }
}
