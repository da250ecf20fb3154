//! Checks of a consume queue's files as files: each one's size and name, and the files missing
//! between two others. What the units say, and whether they point at their records, is checked
//! by the store-level verify, which reads them in the same pass as it matches them.

use super::{ConsumeQueue, UNIT_SIZE};
use crate::format::finding::{Code, Finding};

/// Findings about the files of `cq`: a size other than the configured one (the broker does not
/// start), a name that is not a multiple of it, and queue offsets no file holds.
pub fn check_files(cq: &ConsumeQueue) -> Vec<Finding> {
    let mut out = Vec::new();
    let fs = cq.file_size;
    let name = format!("{}/{}", cq.topic, cq.queue_id);
    let mut expected_start: Option<u64> = None;
    for f in &cq.files {
        if f.len != fs {
            out.push(
                Finding::new(
                    Code::ConsumequeueFileSize,
                    &f.path,
                    f.len.min(fs),
                    format!(
                        "consume queue file of {name} is {} bytes, expected {fs}",
                        f.len
                    ),
                )
                .with_action("MappedFileQueue.load fails: the broker does not start"),
            );
        } else if fs > 0 && f.start % fs != 0 {
            out.push(Finding::new(
                Code::ConsumequeueFileSize,
                &f.path,
                0,
                format!(
                    "consume queue file name {} of {name} is not a multiple of {fs}",
                    f.start
                ),
            ));
        }
        if let Some(e) = expected_start.filter(|&e| f.start > e) {
            out.push(
                Finding::new(
                    Code::ConsumequeueGap,
                    &f.path,
                    0,
                    format!(
                        "{name}: no file holds queue offsets {}..{}",
                        e / UNIT_SIZE as u64,
                        f.start / UNIT_SIZE as u64
                    ),
                )
                .with_action(
                    "reads of those queue offsets find nothing; the broker only logs the gap",
                ),
            );
        }
        expected_start = Some(f.start.saturating_add(fs.max(f.len)));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::format::filename::QueueFile;

    fn queue(files: &[(u64, u64)]) -> ConsumeQueue {
        ConsumeQueue {
            topic: "T".into(),
            queue_id: 1,
            dir: PathBuf::from("consumequeue/T/1"),
            files: files
                .iter()
                .map(|&(start, len)| QueueFile {
                    path: PathBuf::from(format!("consumequeue/T/1/{start:020}")),
                    start,
                    len,
                })
                .collect(),
            foreign: Vec::new(),
            odd: Vec::new(),
            file_size: 200,
        }
    }

    #[test]
    fn sizes_names_and_gaps_of_queue_files() {
        assert!(check_files(&queue(&[(0, 200), (200, 200)])).is_empty());
        let f = check_files(&queue(&[(0, 180)]));
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].code, f[0].offset), (Code::ConsumequeueFileSize, 180));
        assert!(f[0].broker_action.is_some());
        let f = check_files(&queue(&[(100, 200)]));
        assert_eq!(f[0].code, Code::ConsumequeueFileSize);
        assert!(f[0].message.contains("not a multiple"), "{}", f[0].message);
        // a missing file between two: queue offsets 10..20 (bytes 200..400) are in no file
        let f = check_files(&queue(&[(0, 200), (400, 200)]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, Code::ConsumequeueGap);
        assert!(
            f[0].message.ends_with("queue offsets 10..20"),
            "{}",
            f[0].message
        );
        assert!(f[0].file.ends_with("00000000000000000400"));
    }
}
