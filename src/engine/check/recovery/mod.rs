//! What the broker would do to the store on its next start, worked out without changing anything
//! (FORMAT.md 8.3; `DefaultMessageStore.load/recover`, `CommitLog.recoverNormally/recoverAbnormally`,
//! `MappedFileQueue.truncateDirtyFiles`, `ConsumeQueue.truncateDirtyLogicFiles`,
//! `IndexService.load`).
//!
//! The model is a pure function of the store: [`plan`] returns a [`RecoveryPlan`] that says normal
//! or abnormal recovery, which commitlog file the scan starts from, where it cuts, which files it
//! deletes, which consume queue units and index files it drops, and how many messages each step
//! loses. `verify` builds the same plan from its own walk of every file ([`prepare`],
//! [`walk_file`], [`finish`]) so the commitlog is read once; `repair` can follow the plan.
//!
//! The broker's release matters in two places (clean-start scan origin, dispatch during recovery);
//! [`crate::engine::store::version`] reads the hints the files carry.

mod dledger;
mod plan;
mod requeue;
mod walk;

pub use dledger::DledgerRecovery;

pub use plan::*;
pub use requeue::{requeues, Order, Requeue};
pub use walk::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::version::BrokerVersion;
    use crate::engine::Store;
    use crate::format::commitlog::{parse_record, Record};

    fn fixture(name: &str) -> Store {
        crate::engine::store::test_fixture(name)
    }

    #[test]
    fn clean_fixture_recovers_without_loss() {
        let store = fixture("store-4.9");
        let p = plan(&store, true).unwrap();
        assert_eq!(p.mode, RecoveryMode::Normal);
        assert_eq!(p.version.version, BrokerVersion::V4_9);
        let cut = p.cut.as_ref().unwrap();
        assert_eq!(cut.offset, store.commitlog.max_offset().unwrap());
        assert_eq!(cut.messages_dropped, 0);
        assert!(p.loses_nothing(), "{:#?}", p.steps());
        // the third-to-last file
        assert_eq!(
            p.start_file.as_ref().unwrap().start,
            store.commitlog.segments[store.commitlog.segments.len() - 3].start
        );
    }

    #[test]
    fn five_x_fixture_is_recognised() {
        let store = fixture("store-5x");
        let p = plan(&store, true).unwrap();
        assert_eq!(p.version.version, BrokerVersion::V5);
        assert!(p.loses_nothing(), "{:#?}", p.steps());
    }

    #[test]
    fn walk_finds_records_after_a_damaged_size() {
        let store = fixture("store-4.9");
        let seg = &store.commitlog.segments[0];
        let mut buf = std::fs::read(&seg.path).unwrap();
        let clean = walk_file(&buf, seg, &WalkOptions::default(), |_, _| {});
        // second record: flip a bit of its size field
        let Ok(Record::Message(m)) = parse_record(&buf, 0, 0, false) else {
            panic!()
        };
        let second = m.raw.len();
        buf[second + 2] ^= 0x10;
        let w = walk_file(&buf, seg, &WalkOptions::default(), |_, _| {});
        assert_eq!(w.stop, StopReason::BadRecord);
        assert_eq!(w.stop_pos, second as u64);
        assert_eq!(w.records, 1);
        assert_eq!(w.after_records, clean.records - 2);
        assert!(
            matches!(w.problems[0], WalkProblem::BadRecord { pos, .. } if pos == second as u64)
        );
    }
}
