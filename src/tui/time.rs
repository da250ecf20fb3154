//! Times in the browser: shown in UTC and read in UTC, so what the screen says and what `g`
//! accepts agree whatever the machine's time zone. A time with an explicit offset (`Z`,
//! `+08:00`) is read in that offset; a bare number is epoch milliseconds.

use chrono::DateTime;

/// The zone every time on screen is in.
pub const ZONE: &str = "UTC";

/// Epoch ms as `YYYY-mm-dd HH:MM:SS.mmm` in UTC (the number itself when out of range).
pub fn format_utc(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// Epoch milliseconds, an ISO 8601 date-time with an offset, or one without (read as UTC).
pub fn parse_utc(text: &str) -> Result<i64, String> {
    crate::engine::broker::clock::parse_time(text, crate::engine::broker::clock::Zoneless::Utc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoneless_times_are_utc_and_offsets_are_honoured() {
        assert_eq!(parse_utc("1000").unwrap(), 1000);
        assert_eq!(parse_utc("1970-01-01 00:00:01").unwrap(), 1000);
        assert_eq!(parse_utc("1970-01-01T00:00:01.250").unwrap(), 1250);
        assert_eq!(parse_utc("1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_utc("1970-01-01T08:00:00+08:00").unwrap(), 0);
        assert_eq!(parse_utc("1970-01-01 08:00+08:00").unwrap(), 0);
        assert_eq!(parse_utc("1970-01-02").unwrap(), 86_400_000);
        assert!(parse_utc("yesterday").unwrap_err().contains("UTC"));
        assert_eq!(format_utc(1250), "1970-01-01 00:00:01.250");
        let shown = format_utc(1_796_073_054_160);
        assert_eq!(parse_utc(&shown).unwrap(), 1_796_073_054_160);
    }
}
