//! Names given on the command line, checked against the store before a command runs: an
//! unknown topic, group or message id is an error (exit status 2) that says what is unknown and
//! which known names are close, never an empty answer.

use crate::engine::broker::pending::known_groups;
use std::collections::BTreeSet;

use crate::engine::broker::Engine;

/// Most known names listed when none is close to the one given.
const LIST_AT_MOST: usize = 8;

/// Fail unless `name` is one of `known`. `kind` names what it is ("topic", "consumer group"),
/// `looked_in` where the known names come from.
pub fn ensure_known<'a>(
    kind: &str,
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
    looked_in: &str,
) -> anyhow::Result<()> {
    let mut known: Vec<&str> = known.into_iter().collect();
    if known.contains(&name) {
        return Ok(());
    }
    known.sort_unstable();
    known.dedup();
    anyhow::bail!("{}", unknown_message(kind, name, &known, looked_in))
}

/// The words of an unknown-name error: what is unknown, where it was looked for, and the
/// closest known names (or all of them when there are few).
pub fn unknown_message(kind: &str, name: &str, known: &[&str], looked_in: &str) -> String {
    let mut msg = format!("unknown {kind} {name:?}: not in {looked_in}");
    let close = close_names(name, known);
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", quoted(&close)));
    } else if known.is_empty() {
        msg.push_str(&format!(" (the store has no {kind})"));
    } else if known.len() <= LIST_AT_MOST {
        msg.push_str(&format!("; known: {}", quoted(known)));
    } else {
        msg.push_str(&format!(
            " ({} known, e.g. {})",
            known.len(),
            quoted(&known[..LIST_AT_MOST])
        ));
    }
    msg
}

/// Known names within a small edit distance of `name` (case ignored), closest first, at most 3.
pub fn close_names<'a>(name: &str, known: &[&'a str]) -> Vec<&'a str> {
    let wanted = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .filter_map(|k| {
            let d = strsim::levenshtein(&wanted, &k.to_lowercase());
            let allowed = (wanted.chars().count().max(k.chars().count()) / 3).max(1);
            let contains = k.len() >= 3
                && wanted.len() >= 3
                && (k.to_lowercase().contains(&wanted) || wanted.contains(&k.to_lowercase()));
            (d <= allowed || contains).then_some((d, *k))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, k)| k).collect()
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fail unless `id` can be a message id: an offset message id or a client UNIQ_KEY is 32 hex
/// digits (IPv4 hosts) or 56 (IPv6).
pub fn ensure_message_id(id: &str) -> anyhow::Result<()> {
    let hex = !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && (id.len() == 32 || id.len() == 56) {
        return Ok(());
    }
    anyhow::bail!(
        "not a message id: {id:?} ({} characters{}); an offset message id or a client UNIQ_KEY \
         is 32 hex digits (56 for IPv6 hosts), e.g. C0A8000A00002A9F00000000000090FC",
        id.chars().count(),
        if hex { "" } else { ", not all hex digits" }
    )
}

/// Fail unless `group` is a group `engine` knows; `hint` says how to go on as a new group.
pub fn ensure_group(engine: &Engine, group: &str, hint: &str) -> anyhow::Result<()> {
    let groups = known_groups(engine);
    if groups.contains(group) {
        return Ok(());
    }
    let known: Vec<&str> = groups.iter().map(String::as_str).collect();
    anyhow::bail!(
        "{}. {hint}",
        unknown_message(
            "consumer group",
            group,
            &known,
            "this store's consumer offsets, config/subscriptionGroup.json, retry or DLQ topics",
        )
    )
}

/// Topics an engine knows: those with consume queues (store and overlay) and `topics.json`'s.
pub fn engine_topics(engine: &Engine) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = engine.queue_keys().into_iter().map(|(t, _)| t).collect();
    set.extend(engine.topic_configs().iter().map(|t| t.topic_name.clone()));
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested_and_far_ones_listed() {
        let known = ["AuditTopic", "OrderTopic", "PaymentTopic"];
        assert_eq!(close_names("OrderTopik", &known), vec!["OrderTopic"]);
        assert_eq!(close_names("ordertopic", &known), vec!["OrderTopic"]);
        assert_eq!(close_names("Order", &known), vec!["OrderTopic"]);
        assert!(close_names("Zzz", &known).is_empty());
        let m = unknown_message("topic", "Zzz", &known, "this store");
        assert!(
            m.contains("known: \"AuditTopic\", \"OrderTopic\", \"PaymentTopic\""),
            "{m}"
        );
        let m = unknown_message("topic", "OrderTopik", &known, "this store");
        assert!(m.contains("did you mean \"OrderTopic\"?"), "{m}");
        assert!(ensure_known("topic", "OrderTopic", known, "x").is_ok());
        assert!(ensure_known("topic", "Nope", known, "x").is_err());
    }

    #[test]
    fn message_ids_are_hex_of_the_broker_lengths() {
        assert!(ensure_message_id("C0A8000A00002A9F00000000000090FC").is_ok());
        assert!(ensure_message_id(&"ab".repeat(28)).is_ok());
        for bad in [
            "",
            "ZZZZ",
            "C0A8000A00002A9F00000000000090F",
            &"g".repeat(32),
        ] {
            assert!(ensure_message_id(bad).is_err(), "{bad}");
        }
    }
}
