//! `config/timermetrics` (`TimerMetrics`): compact fastjson
//! `{"dataVersion":{...},"timingCount":{"<topic>":{"count":N,"timeStamp":ms}}}`, the timer
//! messages pending per real topic. Read only: the broker rebuilds it.

use serde::Serialize;

use crate::format::config::fastjson::{parse, JsonValue};
use crate::format::error::{ErrorKind, ParseError};

/// Pending timer messages of one real topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicTiming {
    pub topic: String,
    pub count: i64,
    /// `timeStamp`: when the count last changed (ms).
    pub timestamp: i64,
}

/// Parse the file: the `timingCount` table in file order.
pub fn parse_timing_counts(text: &[u8]) -> Result<Vec<TopicTiming>, ParseError> {
    let v = parse(text)?;
    let bad = |what: &'static str, expected: &str| {
        ParseError::new(
            0,
            ErrorKind::Unexpected {
                what,
                expected: expected.to_string(),
                found: "something else".to_string(),
            },
        )
    };
    let Some(JsonValue::Object(table)) = v.get("timingCount") else {
        return Err(bad("timingCount", "an object of topics"));
    };
    table
        .iter()
        .map(|(k, t)| {
            Ok(TopicTiming {
                topic: k.name().into_owned(),
                count: t
                    .get("count")
                    .and_then(JsonValue::as_i64)
                    .ok_or_else(|| bad("timingCount count", "a number"))?,
                timestamp: t.get("timeStamp").and_then(JsonValue::as_i64).unwrap_or(0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_file_order() {
        let t = br#"{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":5},"timingCount":{"TopicB":{"count":21,"timeStamp":7},"TopicA":{"count":22,"timeStamp":8}}}"#;
        let c = parse_timing_counts(t).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].topic.as_str(), c[0].count, c[0].timestamp),
            ("TopicB", 21, 7)
        );
        assert!(parse_timing_counts(b"{}").is_err());
        assert!(parse_timing_counts(b"{\"timingCount\":").is_err());
    }
}
