//! Filters: the message filter of `f` (by tag, key, property or body text) and the
//! type-as-you-go text filter of `/` over any list.
//!
//! `f` takes `tag:EXPR` (a tag expression as a consumer subscribes: `TagA || TagB`), `key:K`
//! (a message key or UNIQ_KEY), `prop:NAME=VALUE` (or `prop:NAME`: the property is present),
//! `body:TEXT` (the decompressed body contains TEXT); text without a prefix is a tag
//! expression. A tag filter checks the consume queue unit's tags code first, then the record's
//! TAGS, as `rmqstore query --tag` does.

use crate::engine::filter::TagFilter;
use crate::format::commitlog::MessageRef;
use crate::format::consumequeue::CqUnit;

/// What `f` filters the message list by.
#[derive(Debug, Clone)]
pub enum MessageFilter {
    Tag(TagFilter),
    Key(String),
    Property { name: String, value: Option<String> },
    Body(String),
}

impl MessageFilter {
    /// Parse the text typed after `f`. `None` for an empty text or `*` (no filter).
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(None);
        }
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) if ["tag", "key", "prop", "body"].contains(&k) => (k, r),
            _ => ("tag", text),
        };
        if rest.is_empty() {
            return Err(format!("{kind}: needs a value after the colon"));
        }
        Ok(Some(match kind {
            "tag" => {
                let f =
                    TagFilter::parse(rest.trim()).map_err(|e| format!("tag expression: {e}"))?;
                if f.is_all() {
                    return Ok(None);
                }
                MessageFilter::Tag(f)
            }
            "key" => MessageFilter::Key(rest.to_string()),
            "prop" => match rest.split_once('=') {
                Some((n, v)) if !n.is_empty() => MessageFilter::Property {
                    name: n.to_string(),
                    value: Some(v.to_string()),
                },
                Some(_) => return Err("prop: write prop:NAME=VALUE or prop:NAME".into()),
                None => MessageFilter::Property {
                    name: rest.to_string(),
                    value: None,
                },
            },
            _ => MessageFilter::Body(rest.to_string()),
        }))
    }

    /// The cheap check on a consume queue unit alone: false when the record cannot match.
    pub fn may_match_unit(&self, u: &CqUnit) -> bool {
        match self {
            MessageFilter::Tag(f) => {
                let code = (!u.has_ext_addr()).then_some(u.tags_code);
                f.matches_tags_code(code)
            }
            _ => true,
        }
    }

    /// The check on the record itself.
    pub fn matches(&self, m: &MessageRef<'_>) -> bool {
        match self {
            MessageFilter::Tag(f) => f.matches_tags(m.tags().as_deref()),
            MessageFilter::Key(k) => {
                m.keys().iter().any(|x| x == k) || m.uniq_key().as_deref() == Some(k.as_str())
            }
            MessageFilter::Property { name, value } => match (m.property(name), value) {
                (Some(v), Some(want)) => v == want.as_str(),
                (Some(_), None) => true,
                (None, _) => false,
            },
            MessageFilter::Body(text) => match m.decompressed_body() {
                Ok(b) => memchr::memmem::find(&b, text.as_bytes()).is_some(),
                Err(_) => false,
            },
        }
    }

    /// How the filter reads in a title.
    pub fn describe(&self) -> String {
        match self {
            MessageFilter::Tag(f) => format!("tag {}", f.expression()),
            MessageFilter::Key(k) => format!("key {k}"),
            MessageFilter::Property { name, value: None } => format!("property {name}"),
            MessageFilter::Property {
                name,
                value: Some(v),
            } => format!("property {name}={v}"),
            MessageFilter::Body(t) => format!("body contains {t:?}"),
        }
    }
}

/// True when `needle` (already lower case) occurs in any of `cells`, ignoring case. An empty
/// needle keeps everything.
pub fn text_matches<S: AsRef<str>>(cells: &[S], needle: &str) -> bool {
    needle.is_empty()
        || cells
            .iter()
            .any(|c| c.as_ref().to_lowercase().contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_rejects_half_expressions() {
        assert!(MessageFilter::parse("").unwrap().is_none());
        assert!(MessageFilter::parse("*").unwrap().is_none());
        assert!(matches!(
            MessageFilter::parse("TagB").unwrap(),
            Some(MessageFilter::Tag(_))
        ));
        assert_eq!(
            MessageFilter::parse("tag:TagA || TagB")
                .unwrap()
                .unwrap()
                .describe(),
            "tag TagA || TagB"
        );
        assert!(matches!(
            MessageFilter::parse("key:order-1").unwrap(),
            Some(MessageFilter::Key(k)) if k == "order-1"
        ));
        assert!(matches!(
            MessageFilter::parse("prop:REAL_QID=2").unwrap(),
            Some(MessageFilter::Property { name, value: Some(v) }) if name == "REAL_QID" && v == "2"
        ));
        assert!(matches!(
            MessageFilter::parse("prop:DELAY").unwrap(),
            Some(MessageFilter::Property { value: None, .. })
        ));
        assert!(matches!(
            MessageFilter::parse("body:amount").unwrap(),
            Some(MessageFilter::Body(t)) if t == "amount"
        ));
        assert!(MessageFilter::parse("key:").is_err());
        assert!(MessageFilter::parse("prop:=x").is_err());
        // an unknown prefix is part of a tag name
        assert!(matches!(
            MessageFilter::parse("x:y").unwrap(),
            Some(MessageFilter::Tag(_))
        ));
    }

    #[test]
    fn text_filter_ignores_case() {
        assert!(text_matches(&["OrderTopic", "4"], "order"));
        assert!(!text_matches(&["OrderTopic"], "pay"));
        assert!(text_matches::<&str>(&[], ""));
    }
}
