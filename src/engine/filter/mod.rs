//! Message filters as the broker and the client apply them (ENGINE.md 3).
//!
//! [`TagFilter`] is a tag expression (`TagA || TagB`, `*`) built the way
//! `FilterAPI.buildSubscriptionData` builds a `SubscriptionData`: the expression is split on `||`
//! with Java's `String.split` rules, each piece trimmed; the tags go to `tagsSet` and their Java
//! hash codes to `codeSet`. Matching is two-step, as in a real pull: the broker keeps a unit whose
//! tags code is in `codeSet` (`ExpressionMessageFilter.isMatchedByConsumeQueue`), then the client
//! keeps a record whose whole `TAGS` value is in `tagsSet` (`PullAPIWrapper.processPullResult`),
//! which removes hash collisions. The tag part is self-contained; other filter kinds (SQL92) can
//! live beside it in this module.

pub mod sql;

use std::fmt;

use crate::format::commitlog::MessageRef;
use crate::format::java::{string_hash, tags_code};

/// `SubscriptionData.SUB_ALL`.
pub const SUB_ALL: &str = "*";
/// The separator `FilterAPI.buildSubscriptionData` splits a tag expression on.
pub const TAG_SEPARATOR: &str = "||";

/// Why a tag expression cannot be built (the broker answers `SUBSCRIPTION_PARSE_FAILED`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagFilterError {
    /// The expression is made of separators only (`"||"`): Java's `split` returns no pieces and
    /// `buildSubscriptionData` throws "subString split error".
    #[error(
        "tag expression {0:?} has no tags: it is only `||` separators (subString split error)"
    )]
    SplitError(String),
}

/// A tag subscription: `*` (everything) or a set of tags with their hash codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    /// The expression as given (`subString`; `*` for "all").
    expression: String,
    all: bool,
    /// `tagsSet`, in expression order without repeats.
    tags: Vec<String>,
    /// `codeSet`: `tag.hashCode()` of each tag.
    codes: Vec<i32>,
}

impl TagFilter {
    /// The filter that keeps everything (`*`).
    pub fn all() -> Self {
        TagFilter {
            expression: SUB_ALL.to_string(),
            all: true,
            tags: Vec::new(),
            codes: Vec::new(),
        }
    }

    /// `FilterAPI.buildSubscriptionData`: `""` or exactly `*` means all. Otherwise split on `||`
    /// (trailing empty pieces dropped as Java's `split` does), trim each piece and keep the
    /// non-empty ones. `" * "` is not "all": it subscribes to the tag `*`. An expression whose
    /// pieces are all blank (`" "`) builds, but then matches nothing, as on the broker.
    pub fn parse(expr: &str) -> Result<Self, TagFilterError> {
        if expr.is_empty() || expr == SUB_ALL {
            return Ok(TagFilter::all());
        }
        let mut pieces: Vec<&str> = expr.split(TAG_SEPARATOR).collect();
        while pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        if pieces.is_empty() {
            return Err(TagFilterError::SplitError(expr.to_string()));
        }
        let mut f = TagFilter {
            expression: expr.to_string(),
            all: false,
            tags: Vec::new(),
            codes: Vec::new(),
        };
        for p in pieces {
            let t = p.trim_matches(|c: char| c <= ' ');
            if t.is_empty() || f.tags.iter().any(|x| x == t) {
                continue;
            }
            f.tags.push(t.to_string());
            let code = string_hash(t);
            if !f.codes.contains(&code) {
                f.codes.push(code);
            }
        }
        Ok(f)
    }

    /// True for `*`.
    pub fn is_all(&self) -> bool {
        self.all
    }

    /// The subscribed tags (`tagsSet`); empty for `*`.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The subscribed hash codes (`codeSet`); empty for `*`.
    pub fn codes(&self) -> &[i32] {
        &self.codes
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Broker, consume-queue level (`ExpressionMessageFilter.isMatchedByConsumeQueue`): an unknown
    /// tags code (`None`: no code, or an unresolvable ext address) and `*` match; otherwise the
    /// low 32 bits of the code must be in `codeSet`.
    pub fn matches_tags_code(&self, tags_code: Option<i64>) -> bool {
        match tags_code {
            None => true,
            Some(_) if self.all => true,
            Some(code) => self.codes.contains(&(code as i32)),
        }
    }

    /// Client level (`PullAPIWrapper.processPullResult`): with a non-empty `tagsSet`, keep a
    /// record only if its whole TAGS value is in it (a record without TAGS is dropped).
    pub fn matches_tags(&self, tags: Option<&str>) -> bool {
        if self.tags.is_empty() {
            return true;
        }
        tags.is_some_and(|t| self.tags.iter().any(|x| x == t))
    }

    /// Both steps for a record whose tags code is known (`tags_code`, e.g. from its consume queue
    /// unit), then its TAGS property.
    pub fn matches(&self, tags_code: Option<i64>, tags: Option<&str>) -> bool {
        self.matches_tags_code(tags_code) && self.matches_tags(tags)
    }

    /// Both steps for a record read from the commitlog, its tags code computed from its TAGS
    /// property (`tagsString2tagsCode`; a record without TAGS has code 0).
    pub fn matches_message(&self, m: &MessageRef<'_>) -> bool {
        let tags = m.tags();
        let code = tags.as_deref().map(tags_code).unwrap_or(0);
        self.matches(Some(code), tags.as_deref())
    }
}

impl Default for TagFilter {
    fn default() -> Self {
        TagFilter::all()
    }
}

impl fmt::Display for TagFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}

impl std::str::FromStr for TagFilter {
    type Err = TagFilterError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TagFilter::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_like_filter_api() {
        for all in ["", "*"] {
            let f = TagFilter::parse(all).unwrap();
            assert!(f.is_all() && f.tags().is_empty());
            assert!(f.matches(Some(12345), Some("x")) && f.matches(Some(0), None));
        }
        let f = TagFilter::parse("TagA || TagB").unwrap();
        assert!(!f.is_all());
        assert_eq!(f.tags(), ["TagA", "TagB"]);
        assert_eq!(f.codes(), [2598919, 2598920]);
        // trailing separators are dropped; leading empty pieces are skipped
        assert_eq!(TagFilter::parse("TagA||").unwrap().tags(), ["TagA"]);
        assert_eq!(TagFilter::parse("||TagA").unwrap().tags(), ["TagA"]);
        // "a|||b" splits into "a" and "|b", as Java's regex split does
        assert_eq!(TagFilter::parse("a|||b").unwrap().tags(), ["a", "|b"]);
        assert!(matches!(
            TagFilter::parse("||"),
            Err(TagFilterError::SplitError(_))
        ));
        assert!(TagFilter::parse("||||").is_err());
        // " * " subscribes to the tag "*"
        let star = TagFilter::parse(" * ").unwrap();
        assert!(!star.is_all());
        assert_eq!(star.tags(), ["*"]);
        // blank pieces build an empty set that matches nothing at the broker
        let blank = TagFilter::parse(" ").unwrap();
        assert!(!blank.matches_tags_code(Some(0)));
        assert!(blank.matches_tags(Some("x")));
    }

    #[test]
    fn two_step_matching() {
        let f = TagFilter::parse("TagA||TagC").unwrap();
        assert!(f.matches(Some(2598919), Some("TagA")));
        assert!(!f.matches(Some(2598920), Some("TagB")));
        // an unknown tags code passes the broker; the client still checks the string
        assert!(f.matches_tags_code(None));
        assert!(!f.matches(None, Some("TagB")));
        // a record without tags has code 0 and no TAGS: dropped
        assert!(!f.matches(Some(0), None));
        // a collision passes the broker and is removed by the client: "Aa" and "BB" share a hash
        let c = TagFilter::parse("Aa").unwrap();
        assert!(c.matches_tags_code(Some(string_hash("BB") as i64)));
        assert!(!c.matches(Some(string_hash("BB") as i64), Some("BB")));
        // the code is truncated to its low 32 bits
        let high = (1i64 << 32) + 2598919;
        assert!(f.matches_tags_code(Some(high)));
        // a stored TAGS value "a||b" is one tag: it matches no subscription but "*"
        let ab = TagFilter::parse("a||b").unwrap();
        assert!(!ab.matches(Some(string_hash("a||b") as i64), Some("a||b")));
    }
}
