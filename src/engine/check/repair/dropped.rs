//! Messages that leave service where the commitlog is cut (or ends before what its consume
//! queues hold: a tail the broker never flushed, a file gone): the units of the store's consume
//! queues at queue offsets the rebuilt queues no longer reach. Salvaged records are named in
//! `salvaged.jsonl`; the rest are named here by what their unit proves: topic, queue, queue
//! offset, commitlog offset and size, and the offset message id the store's host gives them.

use std::collections::{BTreeMap, HashSet};

use super::{salvage_file, LostRecord};
use crate::engine::store::Store;
use crate::format::commitlog::read::{parse_record, Record};
use crate::format::commitlog::Host;
use crate::format::error::Result;
use crate::format::msgid::offset_msg_id;

/// What [`LostRecord::replaced_by`] says of a message a cut takes out of service.
pub const CUT: &str = "cut";

/// The units of `store`'s queues past each rebuilt queue's end (`bounds`: the rebuilt queues'
/// `(min, max)`), whose record is not salvaged from `salvage_from` (the cut: file index and
/// position) on. In queue order.
pub(super) fn dropped_units(
    store: &Store,
    bounds: &BTreeMap<(String, i32), (u64, u64)>,
    salvage_from: Option<(usize, u64)>,
) -> Result<Vec<LostRecord>> {
    let mut dropped = Vec::new();
    for topic in store.topics() {
        for cq in store.topic_queues(topic) {
            let Ok(old_max) = cq.max_offset() else {
                continue;
            };
            let kept = bounds
                .get(&(topic.to_string(), cq.queue_id))
                .map_or(0, |b| b.1);
            let from = kept.max(cq.min_offset(store.commitlog.min_offset()).unwrap_or(0));
            for q in from..old_max {
                if let Ok(Some(u)) = cq.unit_at(q) {
                    if u.is_valid() {
                        dropped.push((topic.to_string(), cq.queue_id, q, u));
                    }
                }
            }
        }
    }
    if dropped.is_empty() {
        return Ok(Vec::new());
    }
    let salvaged = salvaged_offsets(store, salvage_from)?;
    let host = store_host(store);
    Ok(dropped
        .into_iter()
        .filter(|(_, _, _, u)| !salvaged.contains(&u.offset))
        .map(|(topic, queue_id, q, u)| LostRecord {
            commitlog_offset: u.offset as u64,
            size: u.size.max(0) as u64,
            topic: Some(topic),
            queue_id: Some(queue_id),
            queue_offset: Some(q as i64),
            msg_id: host.as_ref().map(|h| offset_msg_id(h, u.offset)),
            uniq_key: None,
            keys: Vec::new(),
            proof: "its consume queue unit: its record lies past the kept commitlog".into(),
            replaced_by: CUT,
        })
        .collect())
}

/// The original commitlog offsets of the records salvage keeps from the cut on.
fn salvaged_offsets(store: &Store, from: Option<(usize, u64)>) -> Result<HashSet<i64>> {
    let mut out = HashSet::new();
    let Some((seg, pos)) = from else {
        return Ok(out);
    };
    for i in seg..store.commitlog.segments.len() {
        let start = if i == seg { pos } else { 0 };
        salvage_file(store, i, start, &mut |_, m| {
            out.insert(m.physical_offset);
            Ok(())
        })?;
    }
    Ok(out)
}

/// The store host of the store's first record: the broker writes its own into every record.
fn store_host(store: &Store) -> Option<Host> {
    let seg = store.commitlog.segments.first()?;
    let map = seg.map().ok()?;
    match parse_record(&map, seg.header_len(), seg.start, false) {
        Ok(Record::Message(m)) => Some(m.store_host),
        _ => None,
    }
}
