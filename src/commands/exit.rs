//! Exit statuses, mapped to process codes in one place.
//!
//! 0: the store is healthy or the command did its job; 1: problems were found (or nothing was
//! found); 2: the command could not run (bad arguments, unreadable store, I/O error).

/// The outcome of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    Findings,
    Failure,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Findings => 1,
            ExitStatus::Failure => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        assert_eq!(ExitStatus::Success.code(), 0);
        assert_eq!(ExitStatus::Findings.code(), 1);
        assert_eq!(ExitStatus::Failure.code(), 2);
    }
}
