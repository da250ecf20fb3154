//! The 5.x timer files of a store root (FORMAT.md 10.4): `timerlog/`, `timerwheel`,
//! `config/timercheck` and `config/timermetrics`, each opened when present.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::format::error::Result;
use crate::format::timer::metrics::{parse_timing_counts, TopicTiming};
use crate::format::timer::{self, TimerCheckpoint, TimerLog, TimerUnit, TimerWheel};

/// The timer files of a store root; each is `None` when absent.
pub struct TimerFiles {
    pub log: Option<TimerLog>,
    pub wheel: Option<Result<TimerWheel>>,
    pub checkpoint_path: PathBuf,
    pub checkpoint: Option<Result<TimerCheckpoint>>,
    pub metrics_path: PathBuf,
    pub metrics: Option<Result<Vec<TopicTiming>>>,
}

impl TimerFiles {
    /// Look for `timerlog/`, `timerwheel`, `config/timercheck` and `config/timermetrics`.
    pub fn open(root: &Path) -> Result<TimerFiles> {
        let log = TimerLog::open(&root.join(timer::TIMERLOG_DIR))?;
        let wheel_path = root.join(timer::TIMERWHEEL_FILE);
        let wheel = wheel_path.exists().then(|| TimerWheel::open(&wheel_path));
        let conf = root.join("config");
        let checkpoint_path = conf.join(timer::TIMERCHECK_FILE);
        let checkpoint = checkpoint_path
            .exists()
            .then(|| read_checkpoint(&checkpoint_path));
        let metrics_path = conf.join(timer::TIMERMETRICS_FILE);
        let metrics = metrics_path.exists().then(|| {
            let text = crate::format::entry::read_bounded(&metrics_path, 64 << 20)?;
            parse_timing_counts(&text).map_err(|e| e.in_file(&metrics_path, 0))
        });
        Ok(TimerFiles {
            log,
            wheel,
            checkpoint_path,
            checkpoint,
            metrics_path,
            metrics,
        })
    }

    /// Whether the store has any timer file.
    pub fn present(&self) -> bool {
        self.log.is_some() || self.wheel.is_some() || self.checkpoint.is_some()
    }

    /// The checkpoint, when it was read.
    pub fn checkpoint(&self) -> Option<&TimerCheckpoint> {
        self.checkpoint.as_ref().and_then(|c| c.as_ref().ok())
    }

    /// The wheel, when it was opened.
    pub fn wheel(&self) -> Option<&TimerWheel> {
        self.wheel.as_ref().and_then(|w| w.as_ref().ok())
    }

    /// Timer log units by the commitlog offset they point at (delete markers left out).
    pub fn units_by_record(&self) -> HashMap<i64, (u64, TimerUnit)> {
        let mut out = HashMap::new();
        if let Some(log) = &self.log {
            for (pos, u) in log.units() {
                if !u.is_delete() {
                    out.insert(u.commitlog_offset, (pos, u));
                }
            }
        }
        out
    }
}

/// Read `config/timercheck`.
pub fn read_checkpoint(path: &Path) -> Result<TimerCheckpoint> {
    let bytes = crate::format::entry::read_prefix(
        path,
        crate::format::timer::checkpoint::TIMERCHECK_FILE_SIZE as u64,
    )?;
    TimerCheckpoint::from_bytes(&bytes).map_err(|e| e.in_file(path, 0))
}
