//! Named points where crash tests stop the process: `RMQSTORE_FAILPOINT=<name>` aborts there,
//! `RMQSTORE_PAUSEPOINT=<name>:<ms>` waits there. Unset, a point costs one environment lookup.

/// Abort the process here when `RMQSTORE_FAILPOINT` names this point, or wait here for some
/// milliseconds when `RMQSTORE_PAUSEPOINT` is `<name>:<ms>` (crash and lock tests only).
pub fn failpoint(name: &str) {
    if std::env::var("RMQSTORE_FAILPOINT").is_ok_and(|v| v == name) {
        std::process::abort();
    }
    if let Ok(v) = std::env::var("RMQSTORE_PAUSEPOINT") {
        if let Some(ms) = v
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .and_then(|ms| ms.parse::<u64>().ok())
        {
            eprintln!("rmqstore: paused at {name}");
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}
