//! The health job: `verify` and the recovery plan run on a worker thread that Esc can stop,
//! and Enter on a finding goes to its place (the record, or the queue unit).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::app::{count_of, App, HealthState, Job, Screen};
use crate::engine::check::recovery::plan as recovery_plan;
use crate::engine::check::verify::{verify, VerifyOptions};
use crate::format::finding::{Finding, Location, Severity};

impl App {
    pub(super) fn jump_to_finding(&mut self, f: &Finding) {
        match &f.location {
            Location::Commitlog { offset } => {
                let at = f.record.unwrap_or(*offset);
                match self.reader.message_at(at) {
                    Ok(Some(_)) => self.open_detail(at),
                    _ => {
                        self.status = format!(
                            "{} byte {}: no readable record starts there",
                            f.file.display(),
                            f.offset
                        )
                    }
                }
            }
            Location::QueueUnit {
                topic,
                queue_id,
                unit,
            } => {
                let (t, q, u) = (topic.clone(), *queue_id, *unit);
                self.open_queue(&t, q, u);
            }
            _ => {
                self.status = format!(
                    "{} byte {}: not a commitlog or consume queue file; the finding is in full below",
                    f.file.display(),
                    f.offset
                );
            }
        }
    }

    /// `H`: the health screen, verify started when it has not run; on the health screen, verify
    /// again.
    pub(super) fn health_key(&mut self) {
        if self.screen == Screen::Health {
            self.start_health();
            return;
        }
        self.go(Screen::Health);
        if self.health_state == HealthState::NotStarted {
            self.start_health();
        }
    }

    /// What the title line warns of: an unclean shutdown (the abort file), and the errors a
    /// verify found.
    pub fn store_alert(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.store().abort.present {
            parts.push("unclean shutdown (abort file)".to_string());
        }
        if self.health_state == HealthState::Done {
            let errors = self.error_count();
            if errors > 0 {
                parts.push(format!("verify: {} (H)", count_of(errors, "error")));
            }
        } else if matches!(self.health_state, HealthState::Running { .. }) && !parts.is_empty() {
            parts.push("verify running".into());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Findings of severity error.
    pub fn error_count(&self) -> usize {
        self.health
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }

    /// Run `verify` and plan the recovery on a worker thread; the health screen fills in.
    pub fn start_health(&mut self) {
        if matches!(self.health_state, HealthState::Running { .. }) {
            return;
        }
        // a flag of its own: a run stopped earlier keeps its set flag and ends on its own
        self.cancel = Arc::new(AtomicBool::new(false));
        self.health_state = HealthState::Running { done: 0, total: 0 };
        let store = self.store();
        let tx = self.jobs_tx.clone();
        let (done, total) = (self.progress.clone(), self.progress_total.clone());
        let cancel = self.cancel.clone();
        std::thread::spawn(move || {
            let progress = move |_p, d: u64, t: u64| {
                done.store(d, Ordering::Relaxed);
                total.store(t, Ordering::Relaxed);
            };
            let opts = VerifyOptions {
                interrupt: Some(cancel.clone()),
                ..Default::default()
            };
            let r = verify(store, &opts, Some(&progress));
            if cancel.load(Ordering::Relaxed) {
                return;
            }
            let _ = tx.send(Job::Health(
                r.map(|r| r.findings).map_err(|e| e.to_string()),
            ));
            let plan = recovery_plan(store, true)
                .map(|p| p.steps())
                .map_err(|e| e.to_string());
            if !cancel.load(Ordering::Relaxed) {
                let _ = tx.send(Job::Recovery(plan));
            }
        });
    }

    /// Collect what background work finished; true when something changed.
    pub fn poll_jobs(&mut self) -> bool {
        let mut changed = false;
        if let HealthState::Running { .. } = self.health_state {
            self.health_state = HealthState::Running {
                done: self.progress.load(Ordering::Relaxed),
                total: self.progress_total.load(Ordering::Relaxed),
            };
            changed = true;
        }
        if let Some(c) = self.filter_count.as_mut().filter(|c| !c.reported) {
            // redraw while counting, and once more for the final count
            c.reported = c.progress.done.load(Ordering::Relaxed);
            changed = true;
        }
        while let Ok(job) = self.jobs_rx.try_recv() {
            match job {
                Job::Health(Ok(f)) => {
                    self.show_recovery = f.is_empty();
                    self.health = f;
                    let errors = self.error_count();
                    self.status = if self.screen != Screen::Health && errors > 0 {
                        format!(
                            "verify found {} ({} in all): H shows them",
                            count_of(errors, "error"),
                            count_of(self.health.len(), "finding")
                        )
                    } else {
                        format!("health: {}", count_of(self.health.len(), "finding"))
                    };
                    self.health_state = HealthState::Done;
                    self.clamp_selection();
                }
                Job::Health(Err(e)) => self.health_state = HealthState::Failed(e),
                Job::Recovery(r) => self.recovery = Some(r),
            }
            changed = true;
        }
        changed
    }

    /// Stop background work (its result is dropped).
    pub fn cancel_jobs(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.stop_filter_count();
        if matches!(self.health_state, HealthState::Running { .. }) {
            self.health_state = HealthState::NotStarted;
        }
    }
}
