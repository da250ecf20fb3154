//! Findings collected with a cap per code: of each code the first [`Sink::cap`] in the order
//! they are printed (file, then byte offset) are kept, whatever order they arrive in, and every
//! one is counted. Memory grows with the cap, never with the damage.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use crate::format::finding::{Code, Finding, Severity};

/// A finding ordered as the report prints it within its code.
#[derive(Debug)]
struct Kept(Finding);

impl Kept {
    fn key(&self) -> (&std::path::Path, u64, &str) {
        (&self.0.file, self.0.offset, &self.0.message)
    }
}

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Kept {}
impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Kept {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

#[derive(Debug, Default)]
struct PerCode {
    /// The first `cap` findings (the greatest on top, the first to go).
    kept: BinaryHeap<Kept>,
    /// All findings of the code, kept or not, by severity (info, warning, error).
    count: [u64; 3],
}

#[derive(Debug, Default)]
pub(super) struct Sink {
    codes: HashMap<Code, PerCode>,
    cap: usize,
}

pub(super) fn sev_index(s: Severity) -> usize {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Error => 2,
    }
}

impl Sink {
    pub(super) fn new(cap: usize) -> Self {
        Sink {
            cap: cap.max(1),
            ..Default::default()
        }
    }

    pub(super) fn push(&mut self, f: Finding) {
        let c = self.codes.entry(f.code).or_default();
        c.count[sev_index(f.severity)] += 1;
        Self::keep(c, self.cap, f);
    }

    fn keep(c: &mut PerCode, cap: usize, f: Finding) {
        let f = Kept(f);
        if c.kept.len() < cap {
            c.kept.push(f);
        } else if c.kept.peek().is_some_and(|top| f < *top) {
            c.kept.pop();
            c.kept.push(f);
        }
    }

    /// Take in what another sink collected (its counts included).
    pub(super) fn absorb(&mut self, other: Sink) {
        for (code, o) in other.codes {
            let c = self.codes.entry(code).or_default();
            for (n, m) in c.count.iter_mut().zip(o.count) {
                *n += m;
            }
            for f in o.kept {
                Self::keep(c, self.cap, f.0);
            }
        }
    }

    /// Drop the kept findings `gone` says are not findings after all (and their counts).
    pub(super) fn retract(&mut self, gone: impl Fn(&Finding) -> bool) {
        for c in self.codes.values_mut() {
            let count = &mut c.count;
            c.kept.retain(|f| {
                let go = gone(&f.0);
                if go {
                    count[sev_index(f.0.severity)] -= 1;
                }
                !go
            });
        }
    }

    /// The findings kept, and the counts: per code, and per severity (info, warning, error).
    pub(super) fn finish(self) -> (Vec<Finding>, Vec<(Code, u64)>, [u64; 3]) {
        let mut list = Vec::new();
        let mut per_code = Vec::new();
        let mut per_sev = [0u64; 3];
        // in a fixed order (codes by name, each code's findings as printed), so that the report
        // does not depend on the order of the map or of the workers
        let mut codes: Vec<(Code, PerCode)> = self.codes.into_iter().collect();
        codes.sort_by_key(|(code, _)| code.as_str());
        for (code, c) in codes {
            per_code.push((code, c.count.iter().sum()));
            for (n, m) in per_sev.iter_mut().zip(c.count) {
                *n += m;
            }
            list.extend(c.kept.into_sorted_vec().into_iter().map(|k| k.0));
        }
        (list, per_code, per_sev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_in_printed_order_and_counts_all() {
        let mut a = Sink::new(3);
        for off in [9u64, 4, 7, 1, 8, 2, 6] {
            a.push(Finding::new(
                Code::ConsumequeueUnitMismatch,
                std::path::Path::new("q"),
                off,
                String::new(),
            ));
        }
        let mut b = Sink::new(3);
        b.push(Finding::new(
            Code::ConsumequeueUnitMismatch,
            std::path::Path::new("q"),
            0,
            String::new(),
        ));
        b.absorb(a);
        let (list, per_code, per_sev) = b.finish();
        let mut offs: Vec<u64> = list.iter().map(|f| f.offset).collect();
        offs.sort_unstable();
        assert_eq!(offs, [0, 1, 2]);
        assert_eq!(per_code, [(Code::ConsumequeueUnitMismatch, 8)]);
        assert_eq!(per_sev.iter().sum::<u64>(), 8);
    }
}
