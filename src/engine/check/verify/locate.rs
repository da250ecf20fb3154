//! Where each finding is in the store's own terms ([`Location`]): the commitlog offset, the
//! queue unit, or the index slot or entry that its file and byte name. Files are known by the
//! paths the store listed when it opened; a finding about any other file stays `File`.

use std::collections::HashMap;
use std::path::Path;

use crate::engine::Store;
use crate::format::consumequeue::UNIT_SIZE;
use crate::format::finding::{Finding, Location};
use crate::format::indexfile::{HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE};

/// What kind of store file a path is, with what its byte offsets need to become a place.
enum Place<'s> {
    /// A commitlog file starting at this commitlog offset.
    Commitlog(u64),
    /// A consume queue file of a topic and queue, starting at this byte of the queue.
    Queue(&'s str, i32, u64),
    Index,
}

/// Fill in the location of every finding (one map of the store's files, one lookup each).
pub(super) fn locate(store: &Store, findings: &mut [Finding]) {
    let mut places: HashMap<&Path, Place<'_>> = HashMap::new();
    for seg in &store.commitlog.segments {
        places.insert(&seg.path, Place::Commitlog(seg.start));
    }
    for cq in store.queues.values() {
        for qf in &cq.files {
            places.insert(&qf.path, Place::Queue(&cq.topic, cq.queue_id, qf.start));
        }
    }
    for p in &store.index_files {
        places.insert(p, Place::Index);
    }
    let slots = u64::from(store.geometry.index_slots.value);
    for f in findings.iter_mut() {
        f.location = match places.get(f.file.as_path()) {
            Some(Place::Commitlog(start)) => Location::Commitlog {
                offset: start + f.offset,
            },
            Some(Place::Queue(topic, queue_id, start)) => Location::QueueUnit {
                topic: topic.to_string(),
                queue_id: *queue_id,
                unit: (start + f.offset) / UNIT_SIZE as u64,
            },
            Some(Place::Index) => index_location(f.offset, slots),
            None => Location::File,
        };
    }
}

/// The slot or entry of an index file with `slots` hash slots that byte `offset` falls in.
fn index_location(offset: u64, slots: u64) -> Location {
    let header = INDEX_HEADER_SIZE as u64;
    let entries = header + slots * HASH_SLOT_SIZE as u64;
    if offset < header {
        Location::File
    } else if offset < entries {
        Location::IndexSlot {
            slot: (offset - header) / HASH_SLOT_SIZE as u64,
        }
    } else {
        Location::IndexEntry {
            entry: (offset - entries) / INDEX_SIZE as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_bytes_fall_in_the_header_a_slot_or_an_entry() {
        assert_eq!(index_location(0, 8), Location::File);
        assert_eq!(index_location(39, 8), Location::File);
        assert_eq!(index_location(40, 8), Location::IndexSlot { slot: 0 });
        assert_eq!(index_location(47, 8), Location::IndexSlot { slot: 1 });
        assert_eq!(index_location(71, 8), Location::IndexSlot { slot: 7 });
        // entry 0 is never written: the broker counts entries from 1
        assert_eq!(
            index_location(72 + 20, 8),
            Location::IndexEntry { entry: 1 }
        );
        assert_eq!(
            index_location(72 + 59, 8),
            Location::IndexEntry { entry: 2 }
        );
    }
}
