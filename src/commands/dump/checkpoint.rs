//! `dump checkpoint`: the checkpoint's times and offsets.

use std::io::Write;

use serde_json::json;

use crate::commands::output::{self, format_time};
use crate::commands::ExitStatus;
use crate::format::checkpoint::Checkpoint;

use super::CheckpointArgs;

pub(super) fn checkpoint(a: &CheckpointArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let path = if a.store.is_dir() {
        a.store.join("checkpoint")
    } else {
        a.store.clone()
    };
    let bytes = crate::format::entry::read_prefix(
        &path,
        crate::format::checkpoint::CHECKPOINT_FILE_SIZE as u64,
    )?;
    let cp = Checkpoint::from_bytes(&bytes).map_err(|e| e.in_file(&path, 0))?;
    if a.json {
        output::typed_line(
            out,
            "checkpoint",
            &json!({
                "file": path.display().to_string(),
                "size": bytes.len(),
                "physic_msg_timestamp": cp.physic_msg_timestamp,
                "logics_msg_timestamp": cp.logics_msg_timestamp,
                "index_msg_timestamp": cp.index_msg_timestamp,
                "master_flushed_offset": cp.master_flushed_offset,
                "confirm_commitlog_offset": cp.confirm_phy_offset,
                "min_timestamp": cp.min_timestamp(),
                "min_timestamp_index": cp.min_timestamp_index(),
            }),
        )?;
        output::summary_line(out, "dump checkpoint", &json!({ "files": 1 }))?;
    } else {
        writeln!(out, "{} ({} bytes)", path.display(), bytes.len())?;
        for (name, v, is_time) in [
            ("physicMsgTimestamp", cp.physic_msg_timestamp, true),
            ("logicsMsgTimestamp", cp.logics_msg_timestamp, true),
            ("indexMsgTimestamp", cp.index_msg_timestamp, true),
            ("masterFlushedOffset", cp.master_flushed_offset, false),
            ("confirmPhyOffset", cp.confirm_phy_offset, false),
            ("minTimestamp (recovery)", cp.min_timestamp(), true),
            ("minTimestampIndex", cp.min_timestamp_index(), true),
        ] {
            if is_time && v > 0 {
                writeln!(out, "{name:<24} {v:>15}  {}", format_time(v))?;
            } else {
                writeln!(out, "{name:<24} {v:>15}")?;
            }
        }
    }
    Ok(ExitStatus::Success)
}
