//! 5.x POP consumers are not read yet: a store whose `config/messageRequestMode.json` names a
//! group as POP, or whose revive topic holds records, makes `pending`, `export`, `replay` and
//! `info` say that popped, unacknowledged messages are left out; `export` exits 1 unless
//! `--accept-pop-gap`.

use std::path::{Path, PathBuf};

use crate::common::*;

/// A copy of the 5.x fixture where OrderGroup (and IdleGroup, new) consume OrderTopic by POP.
fn pop_store() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    copy_tree(&fixture("store-5x"), &root);
    std::fs::write(
        root.join("config/messageRequestMode.json"),
        r#"{"messageRequestModeMap":{"OrderTopic":{
            "OrderGroup":{"consumerGroup":"OrderGroup","mode":"POP","popShareQueueNum":0,"topic":"OrderTopic"},
            "IdleGroup":{"consumerGroup":"IdleGroup","mode":"POP","popShareQueueNum":0,"topic":"OrderTopic"}}}}"#,
    )
    .unwrap();
    (t, root)
}

fn stderr_of(args: &[&str], root: &Path) -> (i32, String) {
    let out = bin().args(args).arg(root).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pending_info_and_replay_say_popped_messages_are_left_out() {
    let (t, root) = pop_store();
    let (_, e) = stderr_of(&["pending", "-g", "OrderGroup"], &root);
    assert!(e.contains("OrderGroup consumes by POP"), "{e}");
    let (_, e) = stderr_of(&["info"], &root);
    assert!(
        e.contains("POP consumption") && e.contains("OrderGroup"),
        "{e}"
    );
    // a new group starts at the end: nothing to consume, the run ends at once
    let (_, e) = stderr_of(
        &[
            "replay",
            "-g",
            "IdleGroup",
            "-t",
            "OrderTopic",
            "--exec",
            "true",
            "--until-idle",
            "--time-scale",
            "1000000",
        ],
        &root,
    );
    assert!(e.contains("IdleGroup consumes by POP"), "{e}");
    // a group that pulls is not warned about
    let (_, e) = stderr_of(&["pending", "-g", "PaymentGroup"], &root);
    assert!(!e.contains("POP"), "{e}");
    drop(t);
}

#[test]
fn export_of_a_pop_group_exits_1_unless_the_gap_is_accepted() {
    let (t, root) = pop_store();
    let out = t.path().join("order.jsonl");
    let o = out.to_str().unwrap();
    let (code, e) = stderr_of(&["export", "-g", "OrderGroup", "--out", o], &root);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("--accept-pop-gap"), "{e}");
    let (code, e) = stderr_of(
        &[
            "export",
            "-g",
            "OrderGroup",
            "--out",
            o,
            "--force",
            "--accept-pop-gap",
        ],
        &root,
    );
    assert_eq!(code, 0, "{e}");
    assert!(e.contains("consumes by POP"), "{e}");
}

#[test]
fn revive_records_warn_every_group() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("store");
    copy_tree(&fixture("store-5x"), &root);
    // a revive queue with units (copied from a real queue: only their count is read)
    let cq = root.join("consumequeue");
    let revive = cq.join("rmq_sys_REVIVE_LOG_DefaultCluster/0");
    std::fs::create_dir_all(&revive).unwrap();
    let first = cq.join("OrderTopic/0/00000000000000000000");
    std::fs::copy(&first, revive.join("00000000000000000000")).unwrap();
    let (_, e) = stderr_of(&["pending", "-g", "PaymentGroup"], &root);
    assert!(e.contains("POP revive record"), "{e}");
}
